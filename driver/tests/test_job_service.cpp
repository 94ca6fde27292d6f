// Unit tests of vtrnd's job state machine (driver/vtrnd/job_service.cpp)
// against a fake chip: FakeJobChip implements JobBackend with an in-memory
// HBM (a byte array and an owner-tagged allocation table), DMA that copies
// into it, and a scripted firmware that accepts JobSubmit / JobCancel; the
// tests play the firmware's JobEvents by hand, including hostile ones.
// Every callback is delivered on a later loop turn, as the real backend does.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../vtrnd/job_service.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"

extern "C" {
#include <cmocka.h>
}

namespace {

constexpr uint64_t kHbmBase = 0x100000000ull;
constexpr uint64_t kHbmBytes = 1u << 20;

struct FakeJobChip final : drv::JobBackend {
  drv::EventLoop* loop = nullptr;
  bool ready = true;
  std::vector<uint8_t> hbm = std::vector<uint8_t>(kHbmBytes, 0xee);
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> allocs;  // addr -> (owner, bytes)
  uint64_t next_addr = kHbmBase;
  uint64_t allocations = 0, frees = 0;
  bool fail_dma = false;
  bool answer_cancel = true;
  std::vector<Vtrn__Ctrl__JobSubmitRequest*> submits;  // unpacked copies
  std::vector<uint64_t> cancels;

  ~FakeJobChip() override {
    for (auto* s : submits) vtrn__ctrl__job_submit_request__free_unpacked(s, nullptr);
  }
  void later(std::function<void()> f) { loop->add_timer_in(0, std::move(f)); }

  drv::Error chip_check(uint32_t chip) override {
    if (chip != 0) return drv::Error(drv::Code::kNoSuchChip, "no chip");
    if (!ready) return drv::Error(drv::Code::kNotReady, "chip 0 is BOOTING");
    return drv::Error();
  }
  uint32_t neuron_cores(uint32_t) override { return 2; }
  uint64_t hbm_bytes(uint32_t) override { return kHbmBytes; }
  void hbm_alloc(uint32_t, uint64_t owner, uint64_t bytes, AllocDone done) override {
    const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
    if (next_addr + rounded > kHbmBase + kHbmBytes) {
      later([done] { done(drv::Error(drv::Code::kNoSpace, "out of HBM")); });
      return;
    }
    const uint64_t a = next_addr;
    next_addr += rounded;
    allocs[a] = {owner, bytes};
    ++allocations;
    later([done, a] { done(a); });
  }
  uint64_t pinned_refusals = 0;
  void hbm_free_owner(uint32_t, uint64_t owner, FreeDone done) override {
    // As the firmware does: a job still running on the chip pins its
    // owner's memory (issue 15); a chip that is down holds nothing.
    const uint64_t jid = owner & 0xffffffffull;
    if (ready && (owner >> 32) == 2 && table.count(jid) != 0 &&
        table[jid] == VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING) {
      ++pinned_refusals;
      later([done] { done(drv::Error(drv::Code::kBusy, "pinned by a job the chip has not ended")); });
      return;
    }
    for (auto it = allocs.begin(); it != allocs.end();) {
      if (it->second.first == owner) {
        it = allocs.erase(it);
        ++frees;
      } else {
        ++it;
      }
    }
    later([done] { done(drv::Error()); });
  }
  void dma_write(uint32_t, uint64_t addr, const uint8_t* data, size_t len, Done done) override {
    if (fail_dma) {
      later([done] { done(drv::Error(drv::Code::kOutOfRange, "dst out of range")); });
      return;
    }
    memcpy(hbm.data() + (addr - kHbmBase), data, len);
    later([done] { done(drv::Error()); });
  }
  void dma_read(uint32_t, uint64_t addr, uint64_t len, ReadDone done) override {
    std::vector<uint8_t> d(hbm.begin() + ptrdiff_t(addr - kHbmBase), hbm.begin() + ptrdiff_t(addr - kHbmBase + len));
    later([done, d] { done(d); });
  }
  std::map<uint64_t, uint32_t> table;  // the firmware's job table: id -> state
  uint32_t chip_job_state(uint32_t, uint64_t job_id) override {
    auto it = table.find(job_id);
    return it == table.end() ? 0 : it->second;
  }
  void ctrl(uint32_t, const Vtrn__Ctrl__Request& req, uint32_t, drv::CtrlDone done) override {
    if (!ready) {
      later([done] { done(drv::CtrlResult{drv::Error(drv::Code::kNotReady, "chip 0 is BOOTING"), nullptr, 0}); });
      return;
    }
    if (req.body_case == VTRN__CTRL__REQUEST__BODY_JOB_SUBMIT) {
      std::vector<uint8_t> buf(vtrn__ctrl__job_submit_request__get_packed_size(req.job_submit));
      vtrn__ctrl__job_submit_request__pack(req.job_submit, buf.data());
      submits.push_back(vtrn__ctrl__job_submit_request__unpack(nullptr, buf.size(), buf.data()));
      later([done] {
        Vtrn__Ctrl__JobSubmitResponse sr = VTRN__CTRL__JOB_SUBMIT_RESPONSE__INIT;
        sr.state = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED;
        Vtrn__Ctrl__Response r = VTRN__CTRL__RESPONSE__INIT;
        r.body_case = VTRN__CTRL__RESPONSE__BODY_JOB_SUBMIT;
        r.job_submit = &sr;
        done(drv::CtrlResult{drv::Error(), &r, 0});
      });
      return;
    }
    if (req.body_case == VTRN__CTRL__REQUEST__BODY_JOB_CANCEL) {
      cancels.push_back(req.job_cancel->job_id);
      if (!answer_cancel) return;  // a firmware that has stopped answering
      // A running job stops when its cores leave it: RUNNING until then.
      const bool running = table.count(req.job_cancel->job_id) != 0 &&
                           table[req.job_cancel->job_id] == VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
      later([done, running] {
        Vtrn__Ctrl__JobCancelResponse cr = VTRN__CTRL__JOB_CANCEL_RESPONSE__INIT;
        cr.state = running ? VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING : VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED;
        Vtrn__Ctrl__Response r = VTRN__CTRL__RESPONSE__INIT;
        r.body_case = VTRN__CTRL__RESPONSE__BODY_JOB_CANCEL;
        r.job_cancel = &cr;
        done(drv::CtrlResult{drv::Error(), &r, 0});
      });
      return;
    }
    later([done] { done(drv::CtrlResult{drv::Error(drv::Code::kChipError, "unsupported"), nullptr, 0}); });
  }
};

struct Reply {
  uint64_t cid = 0, id = 0;
  Vtrn__Api__Status status = VTRN__API__STATUS__STATUS_OK;
  std::string error;
  int body = 0;
  uint64_t job = 0;
  Vtrn__Types__JobState state = VTRN__TYPES__JOB_STATE__JOB_STATE_UNKNOWN;
  std::string reason;
  std::map<std::string, std::vector<uint8_t>> outputs;
  size_t listed = 0;
};

struct Fixture {
  drv::EventLoop loop;
  FakeJobChip chip;
  std::unique_ptr<drv::JobService> svc;
  std::vector<Reply> replies;
};

void capture(Fixture* f, uint64_t cid, Vtrn__Api__Response* r) {
  Reply x;
  x.cid = cid;
  x.id = r->id;
  x.status = r->status;
  x.error = r->error ? r->error : "";
  x.body = int(r->body_case);
  const Vtrn__Api__JobInfo* info = nullptr;
  switch (r->body_case) {
    case VTRN__API__RESPONSE__BODY_JOB_SUBMIT:
      info = r->job_submit->job;
      for (size_t i = 0; i < r->job_submit->n_outputs; ++i) {
        const auto* o = r->job_submit->outputs[i];
        x.outputs[o->name] = std::vector<uint8_t>(o->data.data, o->data.data + o->data.len);
      }
      break;
    case VTRN__API__RESPONSE__BODY_JOB_WAIT: info = r->job_wait->job; break;
    case VTRN__API__RESPONSE__BODY_JOB_SHOW: info = r->job_show->job; break;
    case VTRN__API__RESPONSE__BODY_JOB_CANCEL: info = r->job_cancel->job; break;
    case VTRN__API__RESPONSE__BODY_JOB_LIST: x.listed = r->job_list->n_jobs; break;
    default: break;
  }
  if (info) {
    x.job = info->id;
    x.state = info->state;
    x.reason = info->reason ? info->reason : "";
  }
  f->replies.push_back(x);
}

int setup(void** state) {
  auto* f = new Fixture;
  f->chip.loop = &f->loop;
  drv::JobServiceOptions o;
  o.host_margin_ms = 30;
  o.ctrl_timeout_ms = 30;
  o.dma_piece_bytes = 4096;  // several pieces per buffer
  f->svc = std::make_unique<drv::JobService>(&f->loop, &f->chip, o,
                                             [f](uint64_t cid, Vtrn__Api__Response* r) { capture(f, cid, r); });
  *state = f;
  return 0;
}

int teardown(void** state) {
  delete static_cast<Fixture*>(*state);
  return 0;
}

// Runs the loop until pred() holds or 2 s pass.
bool spin(Fixture* f, const std::function<bool()>& pred) {
  const uint64_t until = drv::monotonic_ns() + 2'000'000'000ull;
  while (!pred()) {
    if (drv::monotonic_ns() > until) return false;
    assert_true(f->loop.run_once(5).ok());
  }
  return true;
}

// An ADD job over n floats: buffers x, y (inputs) and z (output).
struct AddJob {
  std::vector<float> x, y;
  Vtrn__Api__JobBuffer bufs[3];
  Vtrn__Api__JobBuffer* bp[3];
  Vtrn__Api__JobStep step;
  Vtrn__Api__JobStep* sp[1];
  Vtrn__Api__JobSubmitRequest req;
  std::string xs = "x", ys = "y", zs = "z";

  explicit AddJob(uint32_t rows, uint32_t cols, bool wait = true) : x(rows * cols), y(rows * cols) {
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = float(i);
      y[i] = 0.5f * float(i);
    }
    for (int i = 0; i < 3; ++i) {
      bufs[i] = VTRN__API__JOB_BUFFER__INIT;
      bufs[i].bytes = uint64_t(rows) * cols * 4;
      bp[i] = &bufs[i];
    }
    bufs[0].name = xs.data();
    bufs[0].data.data = reinterpret_cast<uint8_t*>(x.data());
    bufs[0].data.len = x.size() * 4;
    bufs[1].name = ys.data();
    bufs[1].data.data = reinterpret_cast<uint8_t*>(y.data());
    bufs[1].data.len = y.size() * 4;
    bufs[2].name = zs.data();
    bufs[2].output = true;
    step = VTRN__API__JOB_STEP__INIT;
    step.kernel = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD;
    step.m = rows;
    step.n = cols;
    step.a = xs.data();
    step.b = ys.data();
    step.out = zs.data();
    sp[0] = &step;
    req = VTRN__API__JOB_SUBMIT_REQUEST__INIT;
    req.n_buffers = 3;
    req.buffers = bp;
    req.n_steps = 1;
    req.steps = sp;
    req.wait = wait;
  }
};

void send_event(Fixture* f, uint64_t job, int state, const char* reason = "", uint64_t q = 10, uint64_t s = 20,
                uint64_t e = 30) {
  Vtrn__Ctrl__JobEvent je = VTRN__CTRL__JOB_EVENT__INIT;
  je.job_id = job;
  je.state = Vtrn__Types__JobState(state);
  je.reason = const_cast<char*>(reason);
  je.queued_ns = q;
  je.start_ns = s;
  je.end_ns = e;
  je.cores_used = 2;
  je.flops = 1000;
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_JOB;
  ev.job = &je;
  f->svc->on_event(0, ev);
}

// The fake firmware's ADD kernel over the addresses it was given.
void run_add_on_chip(Fixture* f, const Vtrn__Ctrl__JobSubmitRequest* s) {
  const Vtrn__Ctrl__JobStep* st = s->steps[0];
  const size_t n = size_t(st->m) * st->n;
  const float* a = reinterpret_cast<const float*>(f->chip.hbm.data() + (st->a_addr - kHbmBase));
  const float* b = reinterpret_cast<const float*>(f->chip.hbm.data() + (st->b_addr - kHbmBase));
  float* o = reinterpret_cast<float*>(f->chip.hbm.data() + (st->out_addr - kHbmBase));
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

void test_job_runs_to_done_returns_outputs_and_frees_its_buffers(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(16, 128);  // 8 KiB per buffer: two DMA pieces each
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const Vtrn__Ctrl__JobSubmitRequest* s = f->chip.submits[0];
  assert_int_equal(s->owner >> 32, 2);
  assert_int_equal(s->owner & 0xffffffff, s->job_id);
  assert_int_equal(s->n_steps, 1);
  run_add_on_chip(f, s);
  send_event(f, s->job_id, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);
  assert_true(spin(f, [&] { return !f->replies.empty(); }));
  const Reply& r = f->replies[0];
  assert_int_equal(r.status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(r.state, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);
  assert_int_equal(r.outputs.count("z"), 1);
  const auto& z = r.outputs.at("z");
  assert_int_equal(z.size(), 16 * 128 * 4);
  const float* zf = reinterpret_cast<const float*>(z.data());
  for (size_t i = 0; i < job.x.size(); ++i) assert_true(zf[i] == job.x[i] + job.y[i]);
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
  assert_true(f->chip.allocs.empty());
  const drv::JobCounters c = f->svc->counters(0);
  assert_int_equal(c.done, 1);
  assert_true(c.p50_ns > 0);
}

void test_outputs_buffer_starts_zeroed_not_with_old_hbm_bytes(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const Vtrn__Ctrl__JobStep* st = f->chip.submits[0]->steps[0];
  const uint8_t* out = f->chip.hbm.data() + (st->out_addr - kHbmBase);
  for (size_t i = 0; i < 4 * 8 * 4; ++i) assert_int_equal(out[i], 0);
}

void test_bad_shapes_are_rejected_before_anything_is_allocated(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(16, 128);
  job.step.n = 64;  // buffers hold 16x128 floats
  f->svc->submit(7, 1, job.req);
  AddJob j2(4, 4);
  j2.step.kernel = Vtrn__Types__JobKernel(42);
  f->svc->submit(7, 2, j2.req);
  AddJob j3(4, 4);
  j3.step.dtype = VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_BF16;
  f->svc->submit(7, 3, j3.req);
  AddJob j4(4, 4);
  j4.bufs[2].bytes = kHbmBytes * 2;
  f->svc->submit(7, 4, j4.req);
  AddJob j5(4, 4);
  j5.step.b = j5.zs.data();  // out aliases b
  f->svc->submit(7, 5, j5.req);
  assert_int_equal(f->replies.size(), 5);
  for (const Reply& r : f->replies) assert_int_equal(r.status, VTRN__API__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(f->replies[0].error.c_str(), "steps[0].a: buffer 'x' holds 8192 bytes"));
  assert_non_null(strstr(f->replies[1].error.c_str(), "steps[0].kernel: unknown kernel 42"));
  assert_non_null(strstr(f->replies[2].error.c_str(), "steps[0].dtype: add takes fp32 only"));
  assert_non_null(strstr(f->replies[3].error.c_str(), "buffers[2].bytes"));
  assert_non_null(strstr(f->replies[4].error.c_str(), "steps[0].out"));
  assert_int_equal(f->chip.allocations, 0);
  assert_int_equal(f->svc->counters(0).rejected, 5);
}

void test_mxfp4_gemm_needs_scales_and_k_multiple_of_32(void** state) {
  (void)state;
  Vtrn__Api__JobStep s = VTRN__API__JOB_STEP__INIT;
  s.kernel = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
  s.dtype = VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4;
  s.m = 8;
  s.n = 4;
  s.k = 64;
  drv::Result<drv::JobService::OperandBytes> sized = drv::JobService::operand_bytes(s);
  assert_true(sized.ok());
  const drv::JobService::OperandBytes b = *sized;
  assert_int_equal(b.a, 8 * 64 / 2);
  assert_int_equal(b.a_scales, 8 * 2);
  assert_int_equal(b.b, 4 * 64 / 2);
  assert_int_equal(b.b_scales, 4 * 2);
  assert_int_equal(b.out, 8 * 4 * 4);
  s.k = 48;
  sized = drv::JobService::operand_bytes(s);
  assert_false(sized.ok());
  assert_non_null(strstr(sized.error().detail().c_str(), "multiple of 32"));
}

void test_events_for_unknown_jobs_or_impossible_states_are_ignored(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  send_event(f, id + 1000, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);  // no such job
  send_event(f, id, 99);                                            // no such state
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED);       // not an event state
  assert_true(f->loop.run_once(5).ok());
  assert_true(f->replies.empty());
  // Out-of-order chip times are dropped, the end itself is taken.
  run_add_on_chip(f, f->chip.submits[0]);
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE, "", 50, 40, 30);
  assert_true(spin(f, [&] { return !f->replies.empty(); }));
  assert_int_equal(f->replies[0].state, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);
  // A second end for the same job changes nothing.
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED, "late");
  assert_true(f->loop.run_once(5).ok());
  assert_int_equal(f->replies.size(), 1);
  assert_int_equal(f->svc->counters(0).failed, 0);
}

void test_cancel_of_job_on_chip_ends_cancelled_and_frees(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  Vtrn__Api__JobCancelRequest c = VTRN__API__JOB_CANCEL_REQUEST__INIT;
  c.job_id = id;
  f->svc->cancel(8, 2, c);
  assert_true(spin(f, [&] { return f->replies.size() == 2; }));
  assert_int_equal(f->chip.cancels.size(), 1);
  assert_int_equal(f->replies[1].body, VTRN__API__RESPONSE__BODY_JOB_CANCEL);
  assert_int_equal(f->replies[1].state, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
  assert_true(f->chip.allocs.empty());
  // The firmware's own CANCELLED event arrives after: ignored.
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
  assert_int_equal(f->svc->counters(0).cancelled, 1);
}

void test_departed_client_jobs_are_cancelled_with_client_gone(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  f->svc->submit(7, 1, job.req);
  AddJob kept(4, 8, /*wait=*/false);
  kept.req.detach = true;
  f->svc->submit(7, 2, kept.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 2; }));
  f->svc->client_gone(7);
  assert_true(spin(f, [&] { return f->svc->counters(0).cancelled == 1; }));
  Vtrn__Api__JobShowRequest s = VTRN__API__JOB_SHOW_REQUEST__INIT;
  s.job_id = f->chip.submits[0]->job_id;
  f->svc->show(9, 3, s);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
  assert_string_equal(f->replies.back().reason.c_str(), "client_gone");
  s.job_id = f->chip.submits[1]->job_id;
  f->svc->show(9, 4, s);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED);
}

void test_silent_firmware_job_times_out_on_the_host_and_frees(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->chip.answer_cancel = false;
  AddJob job(4, 8);
  job.req.timeout_ms = 40;
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return !f->replies.empty(); }));
  assert_int_equal(f->replies[0].state, VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT);
  // Never started on the fake chip: the reason says so.
  assert_non_null(strstr(f->replies[0].reason.c_str(), "timed out after 40 ms before a NeuronCore started it"));
  assert_int_equal(f->chip.cancels.size(), 1);
  assert_int_equal(f->svc->counters(0).timed_out, 1);
}

void test_chip_reset_fails_jobs_in_flight_with_the_reason(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  f->chip.ready = false;
  f->svc->on_chip_down(0, "watchdog: heartbeat stopped");
  assert_int_equal(f->replies.size(), 1);
  assert_int_equal(f->replies[0].state, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED);
  assert_non_null(strstr(f->replies[0].reason.c_str(), "chip reset: watchdog"));
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
}

void test_dma_failure_fails_the_job_naming_the_buffer(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->chip.fail_dma = true;
  AddJob job(4, 8);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return !f->replies.empty(); }));
  assert_int_equal(f->replies[0].state, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED);
  assert_non_null(strstr(f->replies[0].reason.c_str(), "buffers[0] 'x': DMA into HBM failed"));
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
  assert_true(f->chip.allocs.empty());
  assert_int_equal(f->chip.submits.size(), 0);
}

void test_firmware_failure_names_the_step(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  Vtrn__Ctrl__JobEvent je = VTRN__CTRL__JOB_EVENT__INIT;
  je.job_id = f->chip.submits[0]->job_id;
  je.state = VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED;
  je.reason = const_cast<char*>("a_addr not allocated\x01");
  je.failed_step = 0;
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_JOB;
  ev.job = &je;
  f->svc->on_event(0, ev);
  assert_true(spin(f, [&] { return !f->replies.empty(); }));
  assert_int_equal(f->replies[0].state, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED);
  assert_string_equal(f->replies[0].reason.c_str(), "step 0: a_addr not allocated?");
}

void test_job_shows_running_once_the_firmware_table_does(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  Vtrn__Api__JobShowRequest s = VTRN__API__JOB_SHOW_REQUEST__INIT;
  s.job_id = id;
  f->svc->show(9, 2, s);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED);
  f->chip.table[id] = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
  f->svc->show(9, 3, s);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING);
  assert_int_equal(f->svc->counters(0).running, 1);
}

// Issue 15: a job cancelled here while a NeuronCore is still inside one
// of its chunks keeps its buffers until the chip says it stopped, so the
// chunk cannot write into memory handed to someone else.
void test_buffers_of_a_job_still_running_on_the_chip_wait_for_its_end(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  f->chip.table[id] = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
  Vtrn__Api__JobCancelRequest c = VTRN__API__JOB_CANCEL_REQUEST__INIT;
  c.job_id = id;
  f->svc->cancel(8, 2, c);
  // The firmware answers RUNNING and sends no event: vtrnd ends the job
  // after its margin, but the free is refused and the buffers stay.
  assert_true(spin(f, [&] { return f->svc->pinned_jobs() == 1; }));
  assert_int_equal(f->svc->counters(0).cancelled, 1);
  assert_int_equal(f->chip.pinned_refusals, 1);
  assert_int_equal(f->chip.allocs.size(), 3);
  Vtrn__Api__JobShowRequest s = VTRN__API__JOB_SHOW_REQUEST__INIT;
  s.job_id = id;
  f->svc->show(9, 3, s);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
  assert_non_null(strstr(f->replies.back().reason.c_str(), "never confirmed the cancel"));
  // The chip's end of the job frees them.
  f->chip.table[id] = VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED;
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
  assert_true(f->chip.allocs.empty());
  assert_int_equal(f->svc->pinned_jobs(), 0);
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
  assert_int_equal(f->svc->counters(0).cancelled, 1);  // counted once
}

void test_chip_down_frees_what_a_job_running_there_pinned(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  job.req.timeout_ms = 20;
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  f->chip.table[id] = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING;
  // Past its timeout and the margin with no event: TIMED_OUT here, pinned there.
  assert_true(spin(f, [&] { return f->svc->pinned_jobs() == 1; }));
  assert_int_equal(f->svc->counters(0).timed_out, 1);
  assert_int_equal(f->chip.allocs.size(), 3);
  // The chip is reset under it: nothing runs there any more.
  f->chip.ready = false;
  f->svc->on_chip_down(0, "firmware panic: job stuck");
  assert_true(f->chip.allocs.empty());
  assert_int_equal(f->svc->pinned_jobs(), 0);
  assert_true(spin(f, [&] { return f->svc->live_jobs() == 0; }));
  assert_int_equal(f->svc->counters(0).failed, 0);  // it stays TIMED_OUT
}

void test_wait_and_list_see_ended_jobs(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  Vtrn__Api__JobWaitRequest w = VTRN__API__JOB_WAIT_REQUEST__INIT;
  w.job_id = id;
  f->svc->wait(8, 2, w);
  send_event(f, id, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);
  assert_true(spin(f, [&] { return f->replies.size() == 2; }));
  assert_int_equal(f->replies[1].body, VTRN__API__RESPONSE__BODY_JOB_WAIT);
  assert_int_equal(f->replies[1].state, VTRN__TYPES__JOB_STATE__JOB_STATE_DONE);
  assert_true(f->replies[1].outputs.empty());
  Vtrn__Api__JobListRequest l = VTRN__API__JOB_LIST_REQUEST__INIT;
  l.chip = -1;
  f->svc->list(8, 3, l);
  assert_int_equal(f->replies.back().listed, 1);
  l.active_only = true;
  f->svc->list(8, 4, l);
  assert_int_equal(f->replies.back().listed, 0);
}

// Tenants: cids 7 and 8 are uid 1000, cid 9 is uid 2000, cid 1 the admin.
int setup_tenants(void** state) {
  setup(state);
  auto* f = static_cast<Fixture*>(*state);
  drv::JobServiceOptions o;
  o.host_margin_ms = 30;
  o.ctrl_timeout_ms = 30;
  o.dma_piece_bytes = 4096;
  o.tenant_of = [](uint64_t cid) { return cid == 9 ? 2000u : cid == 1 ? 0u : 1000u; };
  o.is_admin = [](uint64_t cid) { return cid == 1; };
  f->svc = std::make_unique<drv::JobService>(&f->loop, &f->chip, o,
                                             [f](uint64_t cid, Vtrn__Api__Response* r) { capture(f, cid, r); });
  return 0;
}

void test_only_the_jobs_tenant_or_the_admin_see_wait_on_or_cancel_it(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  AddJob job(4, 8, /*wait=*/false);
  job.req.detach = true;
  f->svc->submit(7, 1, job.req);
  assert_true(spin(f, [&] { return f->chip.submits.size() == 1; }));
  const uint64_t id = f->chip.submits[0]->job_id;
  assert_int_equal(f->svc->job_tenant(id), 1000);
  // The detached job stays its tenant's after the submitting connection left.
  f->svc->client_gone(7);
  assert_int_equal(f->svc->job_tenant(id), 1000);
  const std::string denied = "job " + std::to_string(id) + " belongs to another tenant";
  auto expect_denied = [&](const char* verb) {
    const Reply& r = f->replies.back();
    assert_int_equal(r.cid, 9);
    assert_int_equal(r.status, VTRN__API__STATUS__STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(r.error.c_str(), denied.c_str()));
    assert_non_null(strstr(r.error.c_str(), verb));
  };
  Vtrn__Api__JobShowRequest s = VTRN__API__JOB_SHOW_REQUEST__INIT;
  s.job_id = id;
  f->svc->show(9, 2, s);
  expect_denied("may show it");
  Vtrn__Api__JobWaitRequest w = VTRN__API__JOB_WAIT_REQUEST__INIT;
  w.job_id = id;
  f->svc->wait(9, 3, w);
  expect_denied("may wait on it");
  Vtrn__Api__JobCancelRequest c = VTRN__API__JOB_CANCEL_REQUEST__INIT;
  c.job_id = id;
  f->svc->cancel(9, 4, c);
  expect_denied("may cancel it");
  assert_true(f->chip.cancels.empty());
  // A job that does not exist is still "no job", for everyone.
  s.job_id = id + 100;
  f->svc->show(9, 5, s);
  assert_int_equal(f->replies.back().status, VTRN__API__STATUS__STATUS_BAD_REQUEST);
  // Listing: the other tenant sees nothing, the admin every tenant's.
  Vtrn__Api__JobListRequest l = VTRN__API__JOB_LIST_REQUEST__INIT;
  f->svc->list(9, 6, l);
  assert_int_equal(f->replies.back().listed, 0);
  f->svc->list(1, 7, l);
  assert_int_equal(f->replies.back().listed, 1);
  f->svc->list(8, 8, l);
  assert_int_equal(f->replies.back().listed, 1);
  // Another connection of the same tenant may cancel it.
  f->svc->cancel(8, 9, c);
  assert_true(spin(f, [&] { return f->replies.back().id == 9; }));
  assert_int_equal(f->replies.back().status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(f->replies.back().state, VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_job_runs_to_done_returns_outputs_and_frees_its_buffers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_outputs_buffer_starts_zeroed_not_with_old_hbm_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_shapes_are_rejected_before_anything_is_allocated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mxfp4_gemm_needs_scales_and_k_multiple_of_32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_events_for_unknown_jobs_or_impossible_states_are_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_of_job_on_chip_ends_cancelled_and_frees, setup, teardown),
      cmocka_unit_test_setup_teardown(test_departed_client_jobs_are_cancelled_with_client_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_silent_firmware_job_times_out_on_the_host_and_frees, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_reset_fails_jobs_in_flight_with_the_reason, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dma_failure_fails_the_job_naming_the_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_firmware_failure_names_the_step, setup, teardown),
      cmocka_unit_test_setup_teardown(test_job_shows_running_once_the_firmware_table_does, setup, teardown),
      cmocka_unit_test_setup_teardown(test_buffers_of_a_job_still_running_on_the_chip_wait_for_its_end, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_chip_down_frees_what_a_job_running_there_pinned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_and_list_see_ended_jobs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_only_the_jobs_tenant_or_the_admin_see_wait_on_or_cancel_it, setup_tenants,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
