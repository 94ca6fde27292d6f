// vtrnd's job service (see job_service.h): validation, staging, the chip
// phase driven by JobEvents, read-back, and the end of every job.
#include "job_service.h"
#include "api_enums.h"
#include "hbm_service.h"
#include "proto_arena.h"

#include <string.h>

#include <algorithm>

#include "vtrn/drv/fd.h"
#include "vtrn/drv/log.h"

namespace drv {

namespace {

constexpr size_t kMaxReasonChars = 200;


// The firmware's text is data from the device: printable ASCII, bounded.
std::string clean_reason(const char* r) {
  std::string out;
  if (r == nullptr) return out;
  for (size_t i = 0; r[i] != 0 && out.size() < kMaxReasonChars; ++i)
    out.push_back(r[i] >= 0x20 && r[i] < 0x7f ? r[i] : '?');
  return out;
}

bool valid_name(const char* s) {
  if (s == nullptr || s[0] == 0) return false;
  size_t n = strlen(s);
  if (n > JobService::kMaxNameChars) return false;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  }
  return true;
}

bool kernel_known(int k) { return k >= VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM && k <= VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM; }
bool dtype_known(int d) { return d >= VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32 && d <= VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4; }

const std::vector<uint8_t>& zeros(size_t n) {
  static std::vector<uint8_t> z;
  if (z.size() < n) z.assign(n, 0);
  return z;
}

std::string step_field(size_t i, const char* f) { return "steps[" + std::to_string(i) + "]." + f; }

// A submit field that is wrong; the detail names it.
Error invalid(std::string detail) { return Error(Code::kInvalidArgument, std::move(detail)); }


}  // namespace

// Validation.

Result<JobService::OperandBytes> JobService::operand_bytes(const Vtrn__Api__JobStep& s, const char** field) {
  OperandBytes out;
  const char* ignored = nullptr;
  if (field == nullptr) field = &ignored;
  const bool gemm = s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
  auto dim = [&](uint32_t v, const char* f) {
    if (v != 0 && v <= kMaxDim) return Error();
    *field = f;
    return Error(Code::kOutOfRange,
                 std::string(f) + " " + std::to_string(v) + " outside 1.." + std::to_string(kMaxDim));
  };
  if (Error e = dim(s.m, "m"); !e.ok()) return e;
  if (Error e = dim(s.n, "n"); !e.ok()) return e;
  const uint64_t m = s.m, n = s.n;
  if (!gemm) {
    if (s.k != 0) {
      *field = "k";
      return Error(Code::kInvalidArgument, std::string("k must be 0 for ") + vtrn::proto::kernel_name(s.kernel));
    }
    out.a = m * n * 4;
    out.out = s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM ? m * 4 : m * n * 4;
    if (s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD || s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL)
      out.b = m * n * 4;
    return out;
  }
  if (Error e = dim(s.k, "k"); !e.ok()) return e;
  const uint64_t k = s.k;
  out.out = m * n * 4;
  switch (s.dtype) {
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32: out.a = m * k * 4; out.b = n * k * 4; break;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_BF16: out.a = m * k * 2; out.b = n * k * 2; break;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E4M3:
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E5M2: out.a = m * k; out.b = n * k; break;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4:
      if (k % 32 != 0) {
        *field = "k";
        return Error(Code::kInvalidArgument,
                     "k " + std::to_string(k) + " is not a multiple of 32 (one mxfp4 scale per 32 elements)");
      }
      out.a = m * k / 2;
      out.a_scales = m * k / 32;
      out.b = n * k / 2;
      out.b_scales = n * k / 32;
      break;
    default:
      *field = "dtype";
      return Error(Code::kInvalidArgument, "unknown dtype " + std::to_string(int(s.dtype)));
  }
  return out;
}

Error JobService::validate(const Vtrn__Api__JobSubmitRequest& r, uint32_t neuron_cores, uint64_t hbm_bytes) {
  if (r.name != nullptr && strlen(r.name) > kMaxNameChars)
    return invalid("name: longer than " + std::to_string(kMaxNameChars) + " characters");
  if (r.priority > kMaxPriority)
    return invalid("priority: " + std::to_string(r.priority) + " outside 0.." + std::to_string(kMaxPriority));
  if (r.timeout_ms > kMaxTimeoutMs)
    return invalid("timeout_ms: " + std::to_string(r.timeout_ms) + " above " + std::to_string(kMaxTimeoutMs));
  if (r.max_cores > neuron_cores)
    return invalid("max_cores: " + std::to_string(r.max_cores) + " above the chip's " + std::to_string(neuron_cores) +
                   " NeuronCores");
  if (r.detach && r.wait) return invalid("detach: a detached job cannot also be waited for");
  if (r.engine != VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_DEFAULT && r.engine != VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_TENSOR &&
      r.engine != VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_CORES)
    return invalid("engine: " + std::to_string(int(r.engine)) + " is not a known engine");
  if (r.n_buffers == 0 || r.n_buffers > kMaxBuffers)
    return invalid("buffers: " + std::to_string(r.n_buffers) + " buffers, expected 1.." + std::to_string(kMaxBuffers));
  if (r.n_steps == 0 || r.n_steps > kMaxSteps)
    return invalid("steps: " + std::to_string(r.n_steps) + " steps, expected 1.." + std::to_string(kMaxSteps));

  std::map<std::string, size_t> by_name;
  uint64_t total = 0, outputs = 0;
  for (size_t i = 0; i < r.n_buffers; ++i) {
    const Vtrn__Api__JobBuffer* b = r.buffers[i];
    const std::string f = "buffers[" + std::to_string(i) + "]";
    if (b == nullptr) return invalid(f + ": missing");
    if (!valid_name(b->name))
      return invalid(f + ".name: '" + std::string(b->name ? b->name : "") + "' is not 1.." +
                     std::to_string(kMaxNameChars) + " characters of [A-Za-z0-9_.-]");
    if (!by_name.emplace(b->name, i).second) return invalid(f + ".name: '" + b->name + "' is used twice");
    if (b->bytes == 0) return invalid(f + ".bytes: 0 (a buffer holds at least 1 byte)");
    if (b->bytes > hbm_bytes)
      return invalid(f + ".bytes: " + std::to_string(b->bytes) + " bytes do not fit in the chip's HBM (" +
                     std::to_string(hbm_bytes) + " bytes)");
    if (b->data.len != 0 && b->data.len != b->bytes)
      return invalid(f + ".data: " + std::to_string(b->data.len) + " bytes for a buffer of " +
                     std::to_string(b->bytes));
    total += (b->bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
    if (b->output) outputs += b->bytes;
  }
  if (total > hbm_bytes)
    return invalid("buffers: " + std::to_string(total) + " bytes in total do not fit in the chip's HBM (" +
                   std::to_string(hbm_bytes) + " bytes)");
  if (r.wait && outputs > kMaxOutputBytes)
    return invalid("buffers: outputs of " + std::to_string(outputs) +
                   " bytes in total exceed what one answer carries (" + std::to_string(kMaxOutputBytes) + ")");

  for (size_t i = 0; i < r.n_steps; ++i) {
    const Vtrn__Api__JobStep* s = r.steps[i];
    if (s == nullptr) return invalid(step_field(i, "kernel") + ": missing");
    if (!kernel_known(s->kernel))
      return invalid(step_field(i, "kernel") + ": unknown kernel " + std::to_string(int(s->kernel)));
    if (!dtype_known(s->dtype))
      return invalid(step_field(i, "dtype") + ": unknown dtype " + std::to_string(int(s->dtype)));
    const bool gemm = s->kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
    if (!gemm && s->dtype != VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32)
      return invalid(step_field(i, "dtype") + ": " + vtrn::proto::kernel_name(s->kernel) + " takes fp32 only, not " +
                     vtrn::proto::dtype_name(s->dtype));
    const char* fld = "";
    Result<OperandBytes> sized = operand_bytes(*s, &fld);
    if (!sized.ok()) return Error(sized.error()).prefix(step_field(i, fld) + ": ");
    const OperandBytes& need = *sized;
    struct Op {
      const char* field;
      const char* value;
      uint64_t need;
    };
    const Op ops[] = {{"a", s->a, need.a},
                      {"a_scales", s->a_scales, need.a_scales},
                      {"b", s->b, need.b},
                      {"b_scales", s->b_scales, need.b_scales},
                      {"out", s->out, need.out}};
    std::string shape = std::string(vtrn::proto::kernel_name(s->kernel)) + " " + std::to_string(s->m) + "x" +
                        std::to_string(s->n) + (gemm ? "x" + std::to_string(s->k) + " " + vtrn::proto::dtype_name(s->dtype) : "");
    for (const Op& op : ops) {
      const bool given = op.value != nullptr && op.value[0] != 0;
      if (op.need == 0) {
        if (given) return invalid(step_field(i, op.field) + ": " + shape + " takes no " + op.field + " operand");
        continue;
      }
      if (!given) return invalid(step_field(i, op.field) + ": missing (" + shape + " needs it)");
      auto it = by_name.find(op.value);
      if (it == by_name.end()) return invalid(step_field(i, op.field) + ": no buffer named '" + op.value + "'");
      const uint64_t have = r.buffers[it->second]->bytes;
      if (have != op.need)
        return invalid(step_field(i, op.field) + ": buffer '" + op.value + "' holds " + std::to_string(have) +
                       " bytes, " + shape + " needs " + std::to_string(op.need));
    }
    for (const Op& op : ops) {
      if (&op == &ops[4] || op.value == nullptr || op.value[0] == 0) continue;
      if (strcmp(op.value, s->out) == 0)
        return invalid(step_field(i, "out") + ": buffer '" + s->out + "' is also operand " + op.field + " of the step");
    }
  }
  return Error();
}

// The service.

JobService::JobService(EventLoop* loop, JobBackend* backend, JobServiceOptions opts, ReplyFn reply)
    : loop_(loop), backend_(backend), opts_(opts), reply_(std::move(reply)) {}

JobService::~JobService() {
  destroying_ = true;
  for (auto& [id, j] : jobs_) {
    if (j->deadline) loop_->cancel_timer(j->deadline);
    for (auto& w : j->waiters) {
      if (w.timer) loop_->cancel_timer(w.timer);
    }
  }
}

JobService::Job* JobService::find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const JobService::Job* JobService::find_any(uint64_t id) const {
  auto it = jobs_.find(id);
  if (it != jobs_.end()) return it->second.get();
  for (const auto& j : history_) {
    if (j->id == id) return j.get();
  }
  return nullptr;
}

bool JobService::may_see(uint64_t cid, const Job& j) const {
  if (!opts_.tenant_of) return true;
  if (opts_.is_admin && opts_.is_admin(cid)) return true;
  // A job vtrnd knows no tenant of is the admin's alone.
  return j.tenant != kNoTenant && opts_.tenant_of(cid) == j.tenant;
}

const JobService::Job* JobService::find_for(uint64_t cid, uint64_t id, uint64_t job_id, const char* what) {
  const Job* j = find_any(job_id);
  if (j == nullptr) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "job_id: no job " + std::to_string(job_id));
    return nullptr;
  }
  if (!may_see(cid, *j)) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_PERMISSION_DENIED,
                "job " + std::to_string(job_id) + " belongs to another tenant: only that tenant or the admin may " +
                    what + " it");
    return nullptr;
  }
  return j;
}

uint32_t JobService::job_tenant(uint64_t job_id) const {
  const Job* j = find_any(job_id);
  return j == nullptr ? kNoTenant : j->tenant;
}

void JobService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

void JobService::submit(uint64_t cid, uint64_t id, const Vtrn__Api__JobSubmitRequest& r) {
  if (Error e = backend_->chip_check(r.chip); !e.ok()) {
    reply_error(cid, id, to_api(e), e.detail());
    return;
  }
  if (Error e = validate(r, backend_->neuron_cores(r.chip), backend_->hbm_bytes(r.chip)); !e.ok()) {
    ++chip_stats(r.chip).c.rejected;
    reply_error(cid, id, to_api(e), e.detail());
    return;
  }
  auto j = std::make_unique<Job>();
  j->id = next_id_++;
  j->chip = r.chip;
  j->cid = cid;
  j->tenant = opts_.tenant_of ? opts_.tenant_of(cid) : kNoTenant;
  j->name = r.name ? r.name : "";
  j->priority = r.priority;
  j->timeout_ms = r.timeout_ms ? r.timeout_ms : opts_.default_timeout_ms;
  j->max_cores = r.max_cores;
  j->engine = int(r.engine);
  j->detached = r.detach;
  std::map<std::string, int> idx;
  for (size_t i = 0; i < r.n_buffers; ++i) {
    Buffer b;
    b.name = r.buffers[i]->name;
    b.bytes = r.buffers[i]->bytes;
    b.data.assign(r.buffers[i]->data.data, r.buffers[i]->data.data + r.buffers[i]->data.len);
    b.output = r.buffers[i]->output;
    idx[b.name] = int(i);
    j->buffers.push_back(std::move(b));
  }
  auto ref = [&idx](const char* s) { return s != nullptr && s[0] != 0 ? idx.at(s) : -1; };
  for (size_t i = 0; i < r.n_steps; ++i) {
    const Vtrn__Api__JobStep& s = *r.steps[i];
    Step st2;
    st2.kernel = s.kernel;
    st2.dtype = s.dtype;
    st2.m = s.m;
    st2.n = s.n;
    st2.k = s.k;
    st2.a = ref(s.a);
    st2.a_scales = ref(s.a_scales);
    st2.b = ref(s.b);
    st2.b_scales = ref(s.b_scales);
    st2.out = ref(s.out);
    j->steps.push_back(st2);
  }
  j->submit_ns = monotonic_ns();
  if (r.wait) j->waiters.push_back(Waiter{cid, id, WaitKind::kSubmit, 0});
  const uint64_t jid = j->id;
  j->deadline = loop_->add_timer_in(uint64_t(j->timeout_ms) * 1'000'000, [this, jid] { on_deadline(jid); });
  Job& job = *j;
  jobs_[jid] = std::move(j);
  ++chip_stats(job.chip).c.submitted;
  DRV_LOGI("chip %u: job %llu '%s' accepted (%zu buffers, %zu steps)", job.chip, (unsigned long long)jid,
           job.name.c_str(), job.buffers.size(), job.steps.size());
  if (!r.wait) {
    ProtoArena a;
    Vtrn__Api__JobSubmitResponse sr = VTRN__API__JOB_SUBMIT_RESPONSE__INIT;
    sr.job = make_info(job, a);
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_JOB_SUBMIT, &sr.base);
  }
  stage_next(job);
}

// Staging.

void JobService::stage_next(Job& j) {
  if (j.phase == Phase::kEnded) return;
  if (j.stop_pending) return end(j, j.stop_state, j.stop_reason);
  if (j.next_buffer == j.buffers.size()) return submit_to_chip(j);
  Buffer& b = j.buffers[j.next_buffer];
  const uint64_t jid = j.id;
  const size_t bi = j.next_buffer;
  const std::string field = "buffers[" + std::to_string(bi) + "] '" + b.name + "'";
  if (!b.allocated) {
    ++j.ops_in_flight;
    j.any_alloc = true;  // an allocation that times out on the host may still exist on the chip
    backend_->hbm_alloc(j.chip, HbmService::job_owner(jid), b.bytes,
                        [this, jid, bi, field](Result<uint64_t> addr) {
                          Job* jp = find(jid);
                          if (jp == nullptr) return;
                          --jp->ops_in_flight;
                          if (jp->phase == Phase::kEnded) return op_returned(*jp);
                          if (!addr.ok())
                            return end(*jp, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                                       field + ": HBM allocation of " + std::to_string(jp->buffers[bi].bytes) +
                                           " bytes failed: " + addr.error().detail());
                          jp->buffers[bi].allocated = true;
                          jp->buffers[bi].addr = addr.value();
                          stage_next(*jp);
                        });
    return;
  }
  const uint64_t off = j.piece * opts_.dma_piece_bytes;
  const uint64_t len = std::min<uint64_t>(opts_.dma_piece_bytes, b.bytes - off);
  const uint8_t* src = b.data.empty() ? zeros(size_t(len)).data() : b.data.data() + off;
  ++j.ops_in_flight;
  backend_->dma_write(j.chip, b.addr + off, src, size_t(len), [this, jid, field](const Error& e) {
    Job* jp = find(jid);
    if (jp == nullptr) return;
    --jp->ops_in_flight;
    if (jp->phase == Phase::kEnded) return op_returned(*jp);
    if (!e.ok())
      return end(*jp, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED, field + ": DMA into HBM failed: " + e.detail());
    Buffer& bb = jp->buffers[jp->next_buffer];
    ++jp->piece;
    if (jp->piece * opts_.dma_piece_bytes >= bb.bytes) {
      // Input bytes are on the chip now; vtrnd need not keep them.
      std::vector<uint8_t>().swap(bb.data);
      jp->piece = 0;
      ++jp->next_buffer;
    }
    stage_next(*jp);
  });
}

void JobService::submit_to_chip(Job& j) {
  j.staged_ns = monotonic_ns();
  const uint64_t elapsed_ms = (j.staged_ns - j.submit_ns) / 1'000'000;
  if (elapsed_ms >= j.timeout_ms)
    return end(j, VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT,
               "timed out after " + std::to_string(j.timeout_ms) + " ms while staging its buffers");
  j.phase = Phase::kSubmitting;

  std::vector<Vtrn__Ctrl__JobStep> steps(j.steps.size());
  std::vector<Vtrn__Ctrl__JobStep*> ptrs(j.steps.size());
  auto addr = [&j](int b) { return b >= 0 ? j.buffers[size_t(b)].addr : 0; };
  for (size_t i = 0; i < j.steps.size(); ++i) {
    const Step& s = j.steps[i];
    Vtrn__Ctrl__JobStep& c = steps[i];
    c = VTRN__CTRL__JOB_STEP__INIT;
    c.kernel = s.kernel;  // one enum for both protocols (vtrn_types.proto)
    c.dtype = s.dtype;
    c.m = s.m;
    c.n = s.n;
    c.k = s.k;
    c.a_addr = addr(s.a);
    c.a_scales_addr = addr(s.a_scales);
    c.b_addr = addr(s.b);
    c.b_scales_addr = addr(s.b_scales);
    c.out_addr = addr(s.out);
    ptrs[i] = &c;
  }
  Vtrn__Ctrl__JobSubmitRequest js = VTRN__CTRL__JOB_SUBMIT_REQUEST__INIT;
  js.job_id = j.id;
  js.owner = HbmService::job_owner(j.id);
  js.client = uint32_t(j.cid);
  js.priority = j.priority;
  js.timeout_ms = uint32_t(std::max<uint64_t>(1, j.timeout_ms - elapsed_ms));
  js.max_cores = j.max_cores;
  // The API and ctrl JobEngine numbers are the same (static_assert at the top).
  js.engine = Vtrn__Types__JobEngine(j.engine);
  js.n_steps = ptrs.size();
  js.steps = ptrs.data();
  const uint64_t jid = j.id;
  ++j.ops_in_flight;
  fw_call(backend_->port(j.chip), &Vtrn__Ctrl__Request::job_submit, js, &Vtrn__Ctrl__Response::job_submit,
          opts_.ctrl_timeout_ms, [this, jid](const FwReply<Vtrn__Ctrl__JobSubmitResponse>& r) {
                   Job* jp = find(jid);
                   if (jp == nullptr) return;
                   --jp->ops_in_flight;
                   if (jp->phase == Phase::kEnded) {
                     // Ended on the host (timeout, reset) while the chip was
                     // taking it: stop it there before its buffers are freed.
                     if (r.ok()) cancel_on_chip(*jp);
                     return op_returned(*jp);
                   }
                   if (!r.ok())
                     return end(*jp, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                                "firmware refused the job: " + (r.error.detail().empty() ? "no answer" : r.error.detail()));
                   // A JobEvent may have overtaken the answer: keep what it set.
                   if (jp->phase == Phase::kSubmitting) jp->phase = Phase::kChipQueued;
                   if (jp->stop_pending) {
                     // Stopped while the request was on its way: now the
                     // firmware knows the job, so it can be cancelled there.
                     const Vtrn__Types__JobState s = jp->stop_state;
                     const std::string r = jp->stop_reason;
                     jp->stop_pending = false;
                     stop(*jp, s, r);
                   }
                 });
}

// Chip phase.

void JobService::on_event(uint32_t chip, const Vtrn__Ctrl__Event& ev) {
  if (ev.body_case != VTRN__CTRL__EVENT__BODY_JOB || ev.job == nullptr) return;
  on_job_event(chip, *ev.job);
}

void JobService::on_job_event(uint32_t chip, const Vtrn__Ctrl__JobEvent& ev) {
  Job* j = find(ev.job_id);
  if (j == nullptr || j->chip != chip) {
    DRV_LOGW("chip %u: JobEvent for job %llu, which is not an active job of this chip; ignored", chip,
             (unsigned long long)ev.job_id);
    return;
  }
  if (j->phase == Phase::kEnded) {
    // Ended here first (host deadline, cancel): the chip has stopped it
    // now, so the buffers it pinned can go.
    if (j->hbm_pinned) {
      j->hbm_pinned = false;
      release(*j);
    } else if (j->released) {
      j->chip_ended = true;  // the free's answer may still say pinned
    }
    return;
  }
  const bool on_chip =
      j->phase == Phase::kSubmitting || j->phase == Phase::kChipQueued || j->phase == Phase::kChipRunning;
  if (!on_chip) {
    DRV_LOGW("chip %u: JobEvent (state %d) for job %llu, which is not on the chip; ignored", chip,
             int(ev.state), (unsigned long long)ev.job_id);
    return;
  }
  const int s = int(ev.state);
  // The firmware sends a job's end only; RUNNING is read from its job table
  // (refresh()).
  if (s != VTRN__TYPES__JOB_STATE__JOB_STATE_DONE && s != VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED &&
      s != VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED && s != VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT) {
    DRV_LOGW("chip %u: JobEvent for job %llu with state %d; ignored", chip, (unsigned long long)ev.job_id, s);
    return;
  }
  // Chip times, only when they are in order.
  if (ev.queued_ns <= ev.start_ns && ev.start_ns <= ev.end_ns) {
    j->chip_queued_ns = ev.queued_ns;
    j->chip_start_ns = ev.start_ns;
    j->chip_stop_ns = ev.end_ns;
  } else {
    DRV_LOGW("chip %u: job %llu times out of order (queued %llu start %llu end %llu); dropped", chip,
             (unsigned long long)ev.job_id, (unsigned long long)ev.queued_ns, (unsigned long long)ev.start_ns,
             (unsigned long long)ev.end_ns);
  }
  const uint32_t cores = backend_->neuron_cores(chip);
  j->cores_used = ev.cores_used <= cores ? ev.cores_used : 0;
  j->flops = ev.flops;
  // Engine figures only when they make sense (one tensor engine per NeuronCore).
  if (ev.engine == VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_TENSOR || ev.engine == VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_CORES)
    j->engine = int(ev.engine);
  j->engines_used = ev.engines_used <= cores ? ev.engines_used : 0;
  j->modeled_ns = ev.modeled_ns;
  j->engine_wall_ns = ev.engine_wall_ns;
  j->chip_end_ns = monotonic_ns();
  const std::string reason = clean_reason(ev.reason);
  if (j->stop_pending) {
    return end(*j, j->stop_state, j->stop_reason);
  }
  switch (s) {
    case VTRN__TYPES__JOB_STATE__JOB_STATE_DONE: {
      j->phase = Phase::kReading;
      j->state = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
      j->next_buffer = 0;
      j->piece = 0;
      j->read_start_ns = monotonic_ns();
      read_next(*j);
      return;
    }
    case VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED:
      if (ev.failed_step < j->steps.size()) j->failed_step = int32_t(ev.failed_step);
      return end(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                 (j->failed_step >= 0 ? "step " + std::to_string(j->failed_step) + ": " : std::string()) +
                     (reason.empty() ? "failed on the chip" : reason));
    case VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED:
      return end(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED, reason.empty() ? "cancelled by the firmware" : reason);
    default:
      return end(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT,
                 reason.empty() ? "timed out on the chip after " + std::to_string(j->timeout_ms) + " ms" : reason);
  }
}

// Read-back.

void JobService::read_next(Job& j) {
  if (j.phase == Phase::kEnded) return;
  if (j.stop_pending) return end(j, j.stop_state, j.stop_reason);
  // Outputs go only to a client waiting on the submit itself.
  const bool wanted = std::any_of(j.waiters.begin(), j.waiters.end(),
                                  [](const Waiter& w) { return w.kind == WaitKind::kSubmit; });
  while (j.next_buffer < j.buffers.size() && (!wanted || !j.buffers[j.next_buffer].output)) ++j.next_buffer;
  if (j.next_buffer == j.buffers.size()) return end(j, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE, "");
  Buffer& b = j.buffers[j.next_buffer];
  if (j.piece == 0) j.outputs.emplace_back(b.name, std::vector<uint8_t>());
  const uint64_t off = j.piece * opts_.dma_piece_bytes;
  const uint64_t len = std::min<uint64_t>(opts_.dma_piece_bytes, b.bytes - off);
  const uint64_t jid = j.id;
  const std::string field = "buffers[" + std::to_string(j.next_buffer) + "] '" + b.name + "'";
  ++j.ops_in_flight;
  backend_->dma_read(j.chip, b.addr + off, len,
                     [this, jid, len, field](Result<std::vector<uint8_t>> data) {
                       Job* jp = find(jid);
                       if (jp == nullptr) return;
                       --jp->ops_in_flight;
                       if (jp->phase == Phase::kEnded) return op_returned(*jp);
                       if (!data.ok())
                         return end(*jp, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                                    field + ": DMA out of HBM failed: " + data.error().detail());
                       if (data->size() != len)
                         return end(*jp, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                                    field + ": DMA out returned " + std::to_string(data->size()) + " bytes of " +
                                        std::to_string(len));
                       auto& out = jp->outputs.back().second;
                       out.insert(out.end(), data->begin(), data->end());
                       ++jp->piece;
                       if (jp->piece * opts_.dma_piece_bytes >= jp->buffers[jp->next_buffer].bytes) {
                         jp->piece = 0;
                         ++jp->next_buffer;
                       }
                       read_next(*jp);
                     });
}

// Stopping and ending.

void JobService::stop(Job& j, Vtrn__Types__JobState st, const std::string& reason) {
  if (j.phase == Phase::kEnded) return;
  if (j.stop_pending) return;  // the first stop wins
  switch (j.phase) {
    case Phase::kStaging:
    case Phase::kReading:
      if (j.ops_in_flight == 0) return end(j, st, reason);
      j.stop_pending = true;
      j.stop_state = st;
      j.stop_reason = reason;
      return;
    case Phase::kSubmitting:
      j.stop_pending = true;
      j.stop_state = st;
      j.stop_reason = reason;
      return;
    case Phase::kChipQueued:
    case Phase::kChipRunning: {
      j.stop_pending = true;
      j.stop_state = st;
      j.stop_reason = reason;
      // The firmware confirms with a JobEvent; if it never does, vtrnd's
      // own deadline ends the job after the margin.
      if (j.deadline) loop_->cancel_timer(j.deadline);
      j.deadline_margin = true;
      const uint64_t jid = j.id;
      j.deadline = loop_->add_timer_in(uint64_t(opts_.ctrl_timeout_ms + opts_.host_margin_ms) * 1'000'000,
                                       [this, jid] { on_deadline(jid); });
      if (j.cancel_sent) return;
      j.cancel_sent = true;
      Vtrn__Ctrl__JobCancelRequest cr = VTRN__CTRL__JOB_CANCEL_REQUEST__INIT;
      cr.job_id = j.id;
      ++j.ops_in_flight;
      fw_call(backend_->port(j.chip), &Vtrn__Ctrl__Request::job_cancel, cr, &Vtrn__Ctrl__Response::job_cancel,
              opts_.ctrl_timeout_ms, [this, jid](const FwReply<Vtrn__Ctrl__JobCancelResponse>& r) {
                       Job* jp = find(jid);
                       if (jp == nullptr) return;
                       --jp->ops_in_flight;
                       if (jp->phase == Phase::kEnded) return op_returned(*jp);
                       if (!r.ok()) {
                         DRV_LOGW("chip %u: JobCancel of job %llu not confirmed (%s); waiting for its event",
                                  jp->chip, (unsigned long long)jid, r.error.detail().c_str());
                         return;
                       }
                       // CANCELLED in the answer: the cores have let go of
                       // the job, so its buffers may be freed now; the
                       // JobEvent that follows finds the job ended.
                       if (int(r.body->state) == VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED) {
                         end(*jp, jp->stop_state, jp->stop_reason);
                       }
                     });
      return;
    }
    case Phase::kEnded: return;
  }
}

void JobService::cancel_on_chip(Job& j) {
  if (j.cancel_sent) return;
  j.cancel_sent = true;
  Vtrn__Ctrl__JobCancelRequest cr = VTRN__CTRL__JOB_CANCEL_REQUEST__INIT;
  cr.job_id = j.id;
  const uint64_t jid = j.id;
  ++j.ops_in_flight;
  fw_call(backend_->port(j.chip), &Vtrn__Ctrl__Request::job_cancel, cr, &Vtrn__Ctrl__Response::job_cancel,
          opts_.ctrl_timeout_ms, [this, jid](const FwReply<Vtrn__Ctrl__JobCancelResponse>&) {
                   Job* jp = find(jid);
                   if (jp == nullptr) return;
                   --jp->ops_in_flight;
                   op_returned(*jp);
                 });
}

void JobService::on_deadline(uint64_t id) {
  Job* j = find(id);
  if (j == nullptr || j->phase == Phase::kEnded) return;
  j->deadline = 0;
  const bool on_chip =
      j->phase == Phase::kSubmitting || j->phase == Phase::kChipQueued || j->phase == Phase::kChipRunning;
  if (!on_chip) {
    return stop(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT,
                "timed out after " + std::to_string(j->timeout_ms) + " ms (" +
                    (j->phase == Phase::kReading ? "reading outputs" : "staging buffers") + ")");
  }
  if (!j->deadline_margin) {
    // The firmware enforces the same timeout; give its TIMED_OUT event
    // time to arrive before vtrnd decides on its own.
    j->deadline_margin = true;
    j->deadline = loop_->add_timer_in(uint64_t(opts_.host_margin_ms) * 1'000'000, [this, id] { on_deadline(id); });
    return;
  }
  // The firmware never reported: end the job here. A cancel still goes to
  // the chip in case it is alive but slow.
  const bool stopping = j->stop_pending;
  const Vtrn__Types__JobState st = stopping ? j->stop_state : VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT;
  refresh(*j);
  const std::string reason =
      stopping ? j->stop_reason + " (the firmware never confirmed the cancel)"
      : j->phase == Phase::kChipRunning
          ? "timed out after " + std::to_string(j->timeout_ms) + " ms; the firmware never reported the end"
          : "timed out after " + std::to_string(j->timeout_ms) + " ms before a NeuronCore started it";
  // kSubmitting: the answer to the submit sends the cancel (see submit_to_chip).
  if (j->phase != Phase::kSubmitting) cancel_on_chip(*j);
  end(*j, st, reason);
}

void JobService::end(Job& j, Vtrn__Types__JobState st, const std::string& reason) {
  if (j.phase == Phase::kEnded) return;
  ChipJobs& cs = chip_stats(j.chip);
  j.phase = Phase::kEnded;
  j.state = st;
  j.reason = reason;
  j.end_ns = monotonic_ns();
  if (j.deadline) loop_->cancel_timer(j.deadline);
  j.deadline = 0;
  switch (st) {
    case VTRN__TYPES__JOB_STATE__JOB_STATE_DONE: ++cs.c.done; break;
    case VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED: ++cs.c.cancelled; break;
    case VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT: ++cs.c.timed_out; break;
    default: ++cs.c.failed; break;
  }
  cs.latencies.push_back(j.end_ns - j.submit_ns);
  if (cs.latencies.size() > kLatencyWindow) cs.latencies.pop_front();
  cs.c.latency.add(j.end_ns - j.submit_ns);
  if (st == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) {
    DRV_LOGI("chip %u: job %llu DONE in %.3f ms", j.chip, (unsigned long long)j.id,
             double(j.end_ns - j.submit_ns) / 1e6);
  } else {
    DRV_LOGI("chip %u: job %llu %s: %s", j.chip, (unsigned long long)j.id, vtrn::proto::job_state_name(st), reason.c_str());
    j.outputs.clear();
  }
  std::vector<Waiter> ws;
  ws.swap(j.waiters);
  for (Waiter& w : ws) {
    if (w.timer) loop_->cancel_timer(w.timer);
    answer(j, w);
  }
  j.outputs.clear();
  j.outputs.shrink_to_fit();
  if (j.ops_in_flight == 0) release(j);
}

void JobService::op_returned(Job& j) {
  if (j.phase == Phase::kEnded && j.ops_in_flight == 0) release(j);
}

void JobService::release(Job& j) {
  if (j.released || destroying_) return;
  j.released = true;
  for (Buffer& b : j.buffers) std::vector<uint8_t>().swap(b.data);
  const uint64_t jid = j.id;
  if (!j.any_alloc) return retire(jid);
  backend_->hbm_free_owner(j.chip, HbmService::job_owner(jid), [this, jid](const Error& e) {
    Job* jp = find(jid);
    if (jp == nullptr) return;
    if (e.code() == Code::kBusy) {
      // A NeuronCore may still be inside a chunk of it: the memory waits
      // for the firmware's end of the job, so nobody else gets it while
      // the chunk writes (issue 15).
      jp->released = false;
      jp->hbm_pinned = true;
      DRV_LOGI("chip %u: job %llu ended here but still runs on the chip; its HBM is freed when it stops there",
               jp->chip, (unsigned long long)jid);
      if (jp->chip_ended) {  // the end event overtook this answer
        jp->chip_ended = false;
        release(*jp);
      }
      return;
    }
    jp->hbm_pinned = false;
    if (!e.ok())
      DRV_LOGW("chip %u: freeing the HBM of job %llu failed: %s", jp->chip, (unsigned long long)jid,
               e.detail().c_str());
    retire(jid);
  });
}

size_t JobService::pinned_jobs() const {
  size_t n = 0;
  for (const auto& [jid, j] : jobs_) n += j->hbm_pinned ? 1 : 0;
  return n;
}

void JobService::retire(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  history_.push_back(std::move(it->second));
  jobs_.erase(it);
  while (history_.size() > kHistory) history_.pop_front();
}

// Clients.

Vtrn__Api__JobInfo* JobService::make_info(const Job& j, ProtoArena& a) const {
  Vtrn__Api__JobInfo* m = a.make<Vtrn__Api__JobInfo>(VTRN__API__JOB_INFO__INIT);
  m->id = j.id;
  m->chip = j.chip;
  m->name = a.str(j.name);
  m->state = j.state;
  m->reason = a.str(j.reason);
  m->failed_step = j.failed_step;
  m->priority = j.priority;
  m->timeout_ms = j.timeout_ms;
  m->max_cores = j.max_cores;
  m->steps = uint32_t(j.steps.size());
  uint64_t bytes = 0;
  for (const Buffer& b : j.buffers) bytes += b.bytes;
  m->buffer_bytes = bytes;
  m->client = j.cid;
  m->uid = j.tenant == kNoTenant ? -1 : int64_t(j.tenant);
  m->detached = j.detached;
  m->submit_ns = j.submit_ns;
  m->latency_ns = j.end_ns ? j.end_ns - j.submit_ns : 0;
  if (j.chip_start_ns >= j.chip_queued_ns && j.chip_queued_ns) m->chip_queue_ns = j.chip_start_ns - j.chip_queued_ns;
  if (j.chip_stop_ns >= j.chip_start_ns && j.chip_start_ns) m->chip_run_ns = j.chip_stop_ns - j.chip_start_ns;
  m->cores_used = j.cores_used;
  m->flops = j.flops;
  m->engine = Vtrn__Types__JobEngine(j.engine);
  m->engines_used = j.engines_used;
  m->chip_modeled_ns = j.modeled_ns;
  m->engine_wall_ns = j.engine_wall_ns;
  m->gflops = m->chip_run_ns ? double(j.flops) / double(m->chip_run_ns) : 0.0;
  if (j.staged_ns) m->stage_in_ns = j.staged_ns - j.submit_ns;
  if (j.read_start_ns && j.end_ns) m->stage_out_ns = j.end_ns - j.read_start_ns;
  m->n_kernels = j.steps.size();
  m->kernels = a.ptrs<char>(j.steps.size());
  for (size_t i = 0; i < j.steps.size(); ++i) {
    std::string k = vtrn::proto::kernel_name(j.steps[i].kernel);
    if (j.steps[i].kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM) k += std::string("/") + vtrn::proto::dtype_name(j.steps[i].dtype);
    m->kernels[i] = a.str(k);
  }
  return m;
}

void JobService::answer(Job& j, const Waiter& w) {
  ProtoArena a;
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  resp.id = w.id;
  Vtrn__Api__JobInfo* info = make_info(j, a);
  Vtrn__Api__JobSubmitResponse sr = VTRN__API__JOB_SUBMIT_RESPONSE__INIT;
  Vtrn__Api__JobWaitResponse wr = VTRN__API__JOB_WAIT_RESPONSE__INIT;
  Vtrn__Api__JobCancelResponse cr = VTRN__API__JOB_CANCEL_RESPONSE__INIT;
  std::vector<Vtrn__Api__JobOutput> outs(j.outputs.size());
  std::vector<Vtrn__Api__JobOutput*> outp(j.outputs.size());
  switch (w.kind) {
    case WaitKind::kSubmit:
      sr.job = info;
      for (size_t i = 0; i < j.outputs.size(); ++i) {
        outs[i] = VTRN__API__JOB_OUTPUT__INIT;
        outs[i].name = a.str(j.outputs[i].first);
        outs[i].data.data = j.outputs[i].second.data();
        outs[i].data.len = j.outputs[i].second.size();
        outp[i] = &outs[i];
      }
      sr.n_outputs = outp.size();
      sr.outputs = outp.data();
      resp.body_case = VTRN__API__RESPONSE__BODY_JOB_SUBMIT;
      resp.job_submit = &sr;
      break;
    case WaitKind::kWait:
      wr.job = info;
      resp.body_case = VTRN__API__RESPONSE__BODY_JOB_WAIT;
      resp.job_wait = &wr;
      break;
    case WaitKind::kCancel:
      cr.job = info;
      resp.body_case = VTRN__API__RESPONSE__BODY_JOB_CANCEL;
      resp.job_cancel = &cr;
      break;
  }
  reply_(w.cid, &resp);
}

void JobService::wait(uint64_t cid, uint64_t id, const Vtrn__Api__JobWaitRequest& r) {
  const Job* h = find_for(cid, id, r.job_id, "wait on");
  if (h == nullptr) return;
  Job* j = find(r.job_id);
  if (j == nullptr || j->phase == Phase::kEnded) return answer(*const_cast<Job*>(h), Waiter{cid, id, WaitKind::kWait, 0});
  Waiter w{cid, id, WaitKind::kWait, 0};
  if (r.timeout_ms) {
    const uint64_t jid = j->id;
    w.timer = loop_->add_timer_in(uint64_t(r.timeout_ms) * 1'000'000, [this, jid, cid, id, t = r.timeout_ms] {
      Job* jp = find(jid);
      if (jp == nullptr) return;
      auto& ws = jp->waiters;
      auto it = std::find_if(ws.begin(), ws.end(), [&](const Waiter& x) { return x.cid == cid && x.id == id; });
      if (it == ws.end()) return;
      ws.erase(it);
      reply_error(cid, id, VTRN__API__STATUS__STATUS_TIMEOUT,
                  "job " + std::to_string(jid) + " did not end within " + std::to_string(t) + " ms");
    });
  }
  j->waiters.push_back(w);
}

void JobService::refresh(Job& j) {
  // kSubmitting too: the table can show the job before its accept answer is read.
  if (j.phase != Phase::kChipQueued && j.phase != Phase::kSubmitting) return;
  if (backend_->chip_job_state(j.chip, j.id) != VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING) return;
  j.phase = Phase::kChipRunning;
  j.state = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
}

void JobService::show(uint64_t cid, uint64_t id, const Vtrn__Api__JobShowRequest& r) {
  const Job* j = find_for(cid, id, r.job_id, "show");
  if (j == nullptr) return;
  if (Job* live = find(r.job_id)) refresh(*live);
  ProtoArena a;
  Vtrn__Api__JobShowResponse sr = VTRN__API__JOB_SHOW_RESPONSE__INIT;
  sr.job = make_info(*j, a);
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_JOB_SHOW, &sr.base);
}

void JobService::list(uint64_t cid, uint64_t id, const Vtrn__Api__JobListRequest& r) {
  // Unset or -1: every chip.
  const int64_t chip = r.select_case == VTRN__API__JOB_LIST_REQUEST__SELECT_CHIP ? r.chip : -1;
  if (chip >= 0) {
    Error e = backend_->chip_check(uint32_t(chip));
    if (e.code() == Code::kNoSuchChip) return reply_error(cid, id, to_api(e), e.detail());
  }
  for (auto& [jid, j] : jobs_) refresh(*j);
  ProtoArena a;
  std::vector<Vtrn__Api__JobInfo*> out;
  // Another tenant's jobs are left out (the admin sees every tenant's).
  auto want = [this, cid, &r, chip](const Job& j) {
    if (chip >= 0 && j.chip != uint32_t(chip)) return false;
    if (!may_see(cid, j)) return false;
    return !r.active_only || j.phase != Phase::kEnded;
  };
  for (const auto& [jid, j] : jobs_) {
    if (j->phase != Phase::kEnded && want(*j)) out.push_back(make_info(*j, a));
  }
  if (!r.active_only) {
    std::vector<const Job*> ended;
    for (const auto& [jid, j] : jobs_) {
      if (j->phase == Phase::kEnded && want(*j)) ended.push_back(j.get());
    }
    for (const auto& j : history_) {
      if (want(*j)) ended.push_back(j.get());
    }
    std::sort(ended.begin(), ended.end(), [](const Job* x, const Job* y) { return x->id < y->id; });
    for (const Job* j : ended) out.push_back(make_info(*j, a));
  }
  Vtrn__Api__JobListResponse lr = VTRN__API__JOB_LIST_RESPONSE__INIT;
  lr.n_jobs = out.size();
  lr.jobs = out.data();
  lr.all_tenants = !opts_.tenant_of || (opts_.is_admin && opts_.is_admin(cid));
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_JOB_LIST, &lr.base);
}

void JobService::cancel(uint64_t cid, uint64_t id, const Vtrn__Api__JobCancelRequest& r) {
  const Job* h = find_for(cid, id, r.job_id, "cancel");
  if (h == nullptr) return;
  Job* j = find(r.job_id);
  if (j == nullptr || j->phase == Phase::kEnded) return answer(*const_cast<Job*>(h), Waiter{cid, id, WaitKind::kCancel, 0});
  j->waiters.push_back(Waiter{cid, id, WaitKind::kCancel, 0});
  const uint64_t jid = j->id;
  stop(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED, "cancelled by client " + std::to_string(cid));
  (void)jid;
}

void JobService::client_gone(uint64_t cid) {
  std::vector<uint64_t> ids;
  for (auto& [jid, j] : jobs_) {
    auto& ws = j->waiters;
    for (auto it = ws.begin(); it != ws.end();) {
      if (it->cid == cid) {
        if (it->timer) loop_->cancel_timer(it->timer);
        it = ws.erase(it);
      } else {
        ++it;
      }
    }
    if (j->cid == cid && !j->detached && j->phase != Phase::kEnded) ids.push_back(jid);
  }
  for (uint64_t jid : ids) {
    if (Job* j = find(jid)) stop(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED, "client_gone");
  }
}

void JobService::on_chip_down(uint32_t chip, const std::string& reason) {
  std::vector<uint64_t> ids, pinned;
  for (auto& [jid, j] : jobs_) {
    if (j->chip == chip && j->phase != Phase::kEnded) ids.push_back(jid);
    if (j->chip == chip && j->hbm_pinned) pinned.push_back(jid);
  }
  // A chip that went down runs nothing: what its jobs pinned is free.
  for (uint64_t jid : pinned) {
    if (Job* j = find(jid)) {
      j->hbm_pinned = false;
      release(*j);
    }
  }
  for (uint64_t jid : ids) {
    Job* j = find(jid);
    if (j == nullptr) continue;
    // Operations in flight fail on their own (the DMA and control queues
    // fail everything when the chip leaves READY); the buffers are freed
    // once they have.
    end(*j, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED, "chip reset: " + reason);
  }
}

JobCounters JobService::counters(uint32_t chip) const {
  JobCounters c;
  auto it = stats_.find(chip);
  if (it == stats_.end()) return c;
  c = it->second.c;
  // Gauges come from the jobs themselves, so they cannot drift.
  for (const auto& [jid, j] : jobs_) {
    if (j->chip != chip) continue;
    switch (j->phase) {
      case Phase::kStaging:
      case Phase::kReading: ++c.staging; break;
      case Phase::kSubmitting:
      case Phase::kChipQueued: ++c.queued; break;
      case Phase::kChipRunning: ++c.running; break;
      case Phase::kEnded: break;
    }
  }
  std::vector<uint64_t> v(it->second.latencies.begin(), it->second.latencies.end());
  if (!v.empty()) {
    std::sort(v.begin(), v.end());
    auto pct = [&v](double p) {
      size_t i = size_t(p * double(v.size() - 1) + 0.5);
      return v[std::min(i, v.size() - 1)];
    };
    c.p50_ns = pct(0.50);
    c.p90_ns = pct(0.90);
    c.p99_ns = pct(0.99);
  }
  return c;
}

std::span<const Route> JobService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_JOB_SUBMIT, false},
      {VTRN__API__REQUEST__BODY_JOB_WAIT, false},
      {VTRN__API__REQUEST__BODY_JOB_LIST, false},
      {VTRN__API__REQUEST__BODY_JOB_SHOW, false},
      {VTRN__API__REQUEST__BODY_JOB_CANCEL, false},
  };
  return kRoutes;
}

void JobService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* /*chip*/) {
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_JOB_SUBMIT: return submit(cid, req.id, *req.job_submit);
    case VTRN__API__REQUEST__BODY_JOB_WAIT: return wait(cid, req.id, *req.job_wait);
    case VTRN__API__REQUEST__BODY_JOB_LIST: return list(cid, req.id, *req.job_list);
    case VTRN__API__REQUEST__BODY_JOB_SHOW: return show(cid, req.id, *req.job_show);
    case VTRN__API__REQUEST__BODY_JOB_CANCEL: return cancel(cid, req.id, *req.job_cancel);
    default: return;
  }
}

void JobService::on_chip_state(Chip& chip) {
  if (chip.state() != ChipState::kReady) on_chip_down(chip.id(), chip.not_ready_reason());
}

void JobService::fill_telemetry(Chip& chip, Vtrn__Api__Telemetry& t, ProtoArena& a) {
  const JobCounters jc = counters(chip.id());
  t.jobs_submitted = jc.submitted;
  t.jobs_cancelled = jc.cancelled;
  t.jobs_timed_out = jc.timed_out;
  t.jobs_staging = jc.staging;
  t.job_latency_p50_ns = jc.p50_ns;
  t.job_latency_p90_ns = jc.p90_ns;
  t.job_latency_p99_ns = jc.p99_ns;
  std::vector<double>& util = *a.make(backend_->core_utilization(chip.id()));
  t.n_core_utilization = util.size();
  t.core_utilization = util.data();
}

}  // namespace drv
