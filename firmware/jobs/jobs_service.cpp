// fw::jobs service glue: control requests, events, the BAR2 job table, the
// executor loop and the kernels it calls. See fw/jobs_service.h.
//
// Executors reach HBM by physical address: the firmware's identity map
// covers all of RAM, HBM included (boot maps it), so a validated buffer
// address is a pointer. Each executor has its own GEMM scratch and never
// logs or touches the HBM allocator (both are core 0's); a kernel that
// refuses arguments validation already accepted is a firmware bug
// (FW_CHECK).
#include "fw/jobs_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/cores.h"
#include "fw/ctrl_service.h"
#include "fw/engines_service.h"
#include "fw/hbm_service.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/platform.h"
#include "fw/power_service.h"
#include "fw/smp.h"
#include "vtrn/board.h"

namespace fw::jobs {
namespace {

namespace abi = vtrn::jobs;
using vtrn::Code;
using vtrn::Error;

// How long boot waits for secondaries to report online (they take
// microseconds; this only bounds a core that never arrives).
constexpr uint64_t kSmpTimeoutNs = 200ull * 1000 * 1000;
// Tiles in flight and no heartbeat from vtrn-hw for this long (10 beats):
// the engines are gone and those jobs fail instead of waiting forever.
constexpr uint64_t kTensorSilenceNs = 1000ull * 1000 * 1000;
// A job's cores still on it this long after its stop (a chunk takes about
// a millisecond): a chunk ignores stop, and only a chip reset ends it.
constexpr uint64_t kStuckNs = 5000ull * 1000 * 1000;

const Route kRoutes[] = {
    route<&JobsService::submit>(VTRN__CTRL__REQUEST__BODY_JOB_SUBMIT,
                                VTRN__CTRL__RESPONSE__BODY_JOB_SUBMIT),
    route<&JobsService::cancel>(VTRN__CTRL__REQUEST__BODY_JOB_CANCEL,
                                VTRN__CTRL__RESPONSE__BODY_JOB_CANCEL),
};

// One GEMM scratch per executor: memory the service owns, outside the
// service object so that it stays in .bss while the object (constant-
// initialized, with its vtable) is in .data.
struct alignas(64) Scratch {
  float f[vtrn::kern::kGemmScratchMaxBytes / sizeof(float) + 16];
};
Scratch g_scratch[kMaxCores];

constinit JobsService g_service;

float* f32(uint64_t addr) { return reinterpret_cast<float*>(uintptr_t(addr)); }

Vtrn__Types__JobState to_proto_state(uint32_t s) { return Vtrn__Types__JobState(s); }

}  // namespace

JobsService& service() { return g_service; }

void executor_main(uint32_t core) { g_service.executor(core); }

std::span<const Route> JobsService::routes() const { return kRoutes; }

Access JobsService::HbmCheck::do_check(uint64_t addr, uint64_t bytes, uint64_t owner) {
  switch (hbm::check(addr, bytes, owner)) {
    case hbm::Access::kOk: return Access::kOk;
    case hbm::Access::kEccError: return Access::kEccError;
    case hbm::Access::kNotOwner: return Access::kNotOwner;
    case hbm::Access::kNotAllocated: break;
  }
  return Access::kNotAllocated;
}

void JobsService::KernelRunner::do_run(uint32_t core, const Step& s, uint32_t b, uint32_t e) {
  cores::set_state(core, cores::kCoreRunning, kernel_intensity(s.kernel, s.dtype));
  if (core != 0 && __atomic_load_n(&g_service.stuck_armed_, __ATOMIC_RELAXED) != 0 &&
      __atomic_exchange_n(&g_service.stuck_armed_, 0u, __ATOMIC_ACQ_REL) != 0) {
    // Injected (arm_stuck): this chunk never returns and ignores stop;
    // interrupts still end each WFI (the panic's stop SGI parks the core).
    for (;;) arch::wait_for_interrupt();
  }
  const uint64_t t0 = arch::now_ns();
  const size_t n = s.n;
  switch (s.kernel) {
    case kKernelGemm: {
      vtrn::kern::GemmArgs a{};
      a.dtype = vtrn::num::DType(s.dtype);
      a.m = s.m;
      a.n = s.n;
      a.k = s.k;
      a.a = reinterpret_cast<const void*>(uintptr_t(s.a));
      a.b = reinterpret_cast<const void*>(uintptr_t(s.b));
      a.a_scales = reinterpret_cast<const uint8_t*>(uintptr_t(s.a_scales));
      a.b_scales = reinterpret_cast<const uint8_t*>(uintptr_t(s.b_scales));
      a.c = f32(s.out);
      const bool ok = vtrn::kern::gemm_rows(a, b, e, g_scratch[core].f, sizeof g_scratch[core].f);
      FW_CHECK(ok, "jobs: gemm_rows refused a validated step (core %u, rows %u..%u)",
               unsigned(core), unsigned(b), unsigned(e));
      break;
    }
    case kKernelAdd: vtrn::kern::add_range(f32(s.a), f32(s.b), f32(s.out), b * n, e * n); break;
    case kKernelMul: vtrn::kern::mul_range(f32(s.a), f32(s.b), f32(s.out), b * n, e * n); break;
    case kKernelGelu: vtrn::kern::gelu_range(f32(s.a), f32(s.out), b * n, e * n); break;
    case kKernelSoftmax: vtrn::kern::softmax_rows(f32(s.a), f32(s.out), s.n, b, e); break;
    case kKernelSum: vtrn::kern::sum_rows(f32(s.a), f32(s.out), s.n, b, e); break;
    default: FW_CHECK(false, "jobs: unknown kernel %u reached an executor", unsigned(s.kernel));
  }
  // DVFS: the chunk takes as long as it would at the current clock.
  power::pace(core, arch::now_ns() - t0);
}

bool JobsService::HalTensor::do_submit(uint32_t e, const vtrn::engine::TensorCommand& c) {
  hal::tensor::Gemm g;
  g.dtype = c.dtype;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.ldc = c.ldc;
  g.a = c.a;
  g.a_scales = c.a_scales;
  g.b = c.b;
  g.b_scales = c.b_scales;
  g.c = c.c;
  g.cookie = c.cookie;
  g.irq = (c.flags & vtrn::engine::kTensorIrq) != 0;
  return e < n && engine[e].submit(g) == hal::Status::kOk;
}

void JobsService::HalTensor::do_ring(uint32_t e) {
  if (e < n) (void)engine[e].ring();
}

TensorEngines::Poll JobsService::HalTensor::do_poll(uint32_t e, vtrn::engine::TensorCompletion* out,
                                                    uint32_t* error) {
  *error = 0;
  if (e >= n) return Poll::kEmpty;
  const hal::Status s = engine[e].poll(out);
  if (s == hal::Status::kOk) return Poll::kDone;
  if (s == hal::Status::kBadHardware) return Poll::kBroken;
  *error = engine[e].error();
  return *error ? Poll::kBroken : Poll::kEmpty;
}

bool JobsService::HalTensor::do_pending(uint32_t e) const {
  if (e >= n) return false;
  const vtrn::engine::TensorEngineBlock* b = fw::engines::service().region().tensor(e);
  return __atomic_load_n(&b->cq_prod.value, __ATOMIC_ACQUIRE) !=
         __atomic_load_n(&b->cq_cons.value, __ATOMIC_RELAXED);
}

// The engines' statistics summed (a block the engine is rewriting for
// longer than a few tries is skipped this period rather than waited for).
void JobsService::tensor_totals(EngineTotals* out) const {
  *out = EngineTotals{};
  for (uint32_t e = 0; e < tensor_.n; ++e) {
    vtrn::engine::EngineStats s;
    bool busy = false;
    if (!engines::service().tensor_stats(e, &s, &busy)) continue;
    out->busy_ns += s.busy_ns;
    out->modeled_ns += s.modeled_ns;
  }
}

// GEMM steps go to the tensor engines when fw::engines found them and they
// execute GEMM commands; otherwise every job runs on the cores.
void JobsService::init_tensor() {
  engines::EnginesService& es = engines::service();
  if (!es.present()) return;
  hal::copy::EngineRegion& r = es.region();
  if (!(r.id().capabilities & vtrn::engine::kCapTensorGemm) || r.tensor_engines() == 0) {
    log(kLogWarn, "jobs: the engines execute no GEMM: every job runs on the cores");
    return;
  }
  uint32_t n = 0;
  for (uint32_t e = 0; e < r.tensor_engines() && e < kMaxEngines; ++e) {
    if (tensor_.engine[e].init(r, e) != hal::Status::kOk) break;
    tensor_.engine[e].arm_irq(true);
    ++n;
  }
  tensor_.n = n;
  if (n == 0) return;
  // Their remap window: the firmware MMU's, as the DMA engines have it.
  (void)es.set_tensor_remap(tensor_.engine, n, mmu::remap_base(), mmu::remap_size());
  sched_.set_tensor_engines(&tensor_);
  tensor_heartbeat_ = r.heartbeat();
  tensor_heartbeat_ns_ = arch::now_ns();
  log(kLogInfo, "jobs: GEMM steps on %u tensor engines by default (engine cores: on-core kernels)",
      unsigned(n));
}

// Tiles in flight while vtrn-hw's heartbeat stands still: they will not
// complete, so their jobs fail now (nothing is lost silently).
void JobsService::watch_tensor(uint64_t now) {
  if (tensor_.n == 0) return;
  const uint32_t beat = engines::service().region().heartbeat();
  if (beat != tensor_heartbeat_ || sched_.tiles_in_flight() == 0) {
    tensor_heartbeat_ = beat;
    tensor_heartbeat_ns_ = now;
    return;
  }
  if (now - tensor_heartbeat_ns_ < kTensorSilenceNs) return;
  char why[96];
  snprintf(why, sizeof why, "tensor engines stopped answering (no vtrn-hw heartbeat for %llu ms)",
           (unsigned long long)((now - tensor_heartbeat_ns_) / 1000000));
  log(kLogErr, "jobs: %s: failing the jobs with tiles in flight", why);
  wake(sched_.tensor_lost(why, now));
  tensor_heartbeat_ns_ = now;
}

void JobsService::wake(uint32_t mask) {
  if (core0_executes_) mask &= ~1u;  // core 0 checks its own work every turn
  smp::wake(mask);
}

void JobsService::publish_job(uint32_t slot) {
  const Job& j = sched_.job(slot);
  uint32_t done = 0, total = 0;
  sched_.progress(slot, &done, &total);
  abi::JobEntry e{};
  e.state = j.state;
  e.job_id = j.sub.job_id;
  e.client = j.sub.client;
  e.priority = j.sub.priority;
  e.step = j.step;
  e.step_count = j.sub.step_count;
  e.core_mask = j.state == kRunning ? __atomic_load_n(&j.run.attached, __ATOMIC_RELAXED) : 0;
  e.cores_used = j.cores_used;
  e.queued_ns = j.queued_ns;
  e.start_ns = j.start_ns;
  e.end_ns = j.end_ns;
  e.deadline_ns = j.deadline_ns;
  e.chunks_done = done;
  e.chunks_total = total;
  snprintf(e.reason, sizeof e.reason, "%s", j.state == kDone ? "" : j.reason);
  rows_[slot].publish(e);
  row_job_[slot] = e.job_id;
}

void JobsService::publish_header() {
  const Counters& c = sched_.counters();
  abi::JobTableHeader h{};
  h.magic = abi::kJobTableMagic;
  h.version = abi::kJobTableVersion;
  h.header_bytes = sizeof(abi::JobTableHeader);
  h.core_bytes = sizeof(abi::CoreEntry);
  h.entry_bytes = sizeof(abi::JobEntry);
  h.core_count = cores::count();
  h.entry_count = kSlots;
  h.executor_mask = executor_mask_;
  h.queued = sched_.queued();
  h.running = sched_.running();
  h.updated_ns = arch::now_ns();
  h.accepted = c.accepted;
  h.completed = c.completed;
  h.failed = c.failed;
  h.cancelled = c.cancelled;
  h.timed_out = c.timed_out;
  h.rejected = c.rejected;
  table_.publish(h);
}

void JobsService::publish_cores() {
  for (uint32_t i = 0; i < abi::kJobCoreCount && i < cores::count(); ++i) {
    cores::CoreSnapshot s{};
    cores::snapshot(i, &s);
    const int slot = sched_.core_slot(i);
    abi::CoreEntry e{};
    e.state = s.state;
    e.intensity_permille = s.intensity_permille;
    e.slot = slot < 0 ? 0xffffffffu : uint32_t(slot);
    e.job_id = slot < 0 ? 0 : sched_.job(uint32_t(slot)).sub.job_id;
    e.busy_ns = s.busy_ns;
    e.idle_ns = s.idle_ns;
    e.off_ns = s.off_ns;
    e.chunks = sched_.core_chunks(i);
    core_rows_[i].publish(e);
  }
}

// Rows whose slot changed since the last call, and the header.
void JobsService::publish_changes(bool all) {
  if (!table_.attached()) return;
  if (!all && sched_.generation() == published_gen_) return;
  published_gen_ = sched_.generation();
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = sched_.job(i);
    if (j.state == kFree) continue;
    if (all || j.state == kRunning || j.state != last_state_[i] ||
        j.sub.job_id != row_job_[i]) {
      publish_job(i);
      last_state_[i] = j.state;
    }
  }
  publish_header();
}

void JobsService::init_table(uint8_t* bar2, uint64_t bar2_size) {
  if (!bar2 || bar2_size < vtrn::hostif::kJobsOffset + vtrn::hostif::kJobsSize) return;
  uint8_t* base = bar2 + vtrn::hostif::kJobsOffset;
  memset(base, 0, vtrn::hostif::kJobsSize);
  static_assert(kSlots <= abi::kMaxEntries);
  table_.attach(reinterpret_cast<abi::JobTableHeader*>(base));
  for (uint32_t i = 0; i < abi::kJobCoreCount; ++i) {
    core_rows_[i].attach(reinterpret_cast<abi::CoreEntry*>(base + abi::kCoresOffset) + i);
  }
  for (uint32_t i = 0; i < kSlots; ++i) {
    rows_[i].attach(reinterpret_cast<abi::JobEntry*>(base + abi::kEntriesOffset) + i);
  }
  executor_mask_ = 0;
  publish_header();
  publish_cores();
}

Error JobsService::submit(const Vtrn__Ctrl__JobSubmitRequest& req,
                          Vtrn__Ctrl__JobSubmitResponse& body, Call& c) {
  submit_from_proto(req, &submit_);
  const Submit& sub = submit_;
  Error e = validate(sub, hbm_);
  if (e.ok() && tensor_.n && sub.engine != kEngineCores) {
    // A dtype the engines do not take, or a stitched allocation out of
    // their reach (engines without a remap window): the chip's own choice
    // is then the cores; an explicit tensor is refused naming it.
    const Error far = tensor_eligible(sub, engines::service().region().id().dtype_mask,
                                      engines::service().tensor_reach(hbm::kRemapBase));
    if (!far.ok() && sub.engine == kEngineTensor) e = far;
    if (!far.ok()) submit_.engine = kEngineCores;
  }
  if (!e.ok()) {
    sched_.count_rejected();
    return e;
  }
  VTRN_TRY(sched_.submit(sub, c.now_ns()));
  body.state = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED;
  log(kLogDebug, "jobs: job %llu queued (client %u, priority %u, %u steps)",
      (unsigned long long)sub.job_id, unsigned(sub.client), unsigned(sub.priority),
      unsigned(sub.step_count));
  return Error();
}

Error JobsService::cancel(const Vtrn__Ctrl__JobCancelRequest& req,
                          Vtrn__Ctrl__JobCancelResponse& body, Call& c) {
  uint32_t state = 0, to_wake = 0;
  if (!sched_.cancel(req.job_id, c.now_ns(), &state, &to_wake)) {
    return Error(Code::kNotFound, "job_id: no job %llu on this chip",
                 (unsigned long long)req.job_id);
  }
  wake(to_wake);
  body.state = to_proto_state(state);
  return Error();
}

// The secondaries are started on the event loop's first turn, after READY:
// nothing before READY needs them (no job can arrive earlier), and PSCI
// CPU_ON plus the new vCPU threads competing for the host's cores cost the
// boot about 30 ms under TCG when done before it.
void JobsService::start_cores() {
  if (cores_started_) return;
  cores_started_ = true;
  (void)smp::start(*platform_, gic_, cores::count(), executor_main);
  collect_cores();
}

// Secondary cores report online asynchronously (fw::smp): each becomes an
// executor when core 0 notices it. If none arrives, core 0 executes.
void JobsService::collect_cores() {
  if (all_reported_) return;
  const uint32_t online = smp::collect_online(kSmpTimeoutNs);
  sched_.add_executors(online & ~1u);
  if (!smp::all_reported()) return;
  all_reported_ = true;
  cores_online_ = uint32_t(__builtin_popcount(online));
  if ((online & ~1u) == 0) {
    core0_executes_ = true;
    sched_.add_executors(1u);
  }
  if (table_.attached()) {
    executor_mask_ = sched_.executor_mask();
    publish_header();
  }
  log(kLogInfo, "jobs: %u of %u NeuronCores online, executors 0x%x%s, %u job slots",
      unsigned(cores_online_), unsigned(cores::count()), unsigned(sched_.executor_mask()),
      core0_executes_ ? " (core 0 executes: no secondary core)" : " (core 0 serves only)",
      unsigned(kSlots));
}

void JobsService::init(const Boot& boot) {
  uint32_t want = boot.chip->neuron_cores;
  if (want > boot.platform->cpu_count) want = boot.platform->cpu_count;
  if (want > kMaxCores) want = kMaxCores;
  if (want == 0) want = 1;
  cores::init(want, arch::now_ns);
  cores::set_state(0, cores::kCoreIdle, 0);
  sched_.init(0);
  // A job's buffers stay until the chip has ended the job (issue 15).
  hbm::service().set_pin_check([](uint64_t owner) { return service().sched_.holds_owner(owner); });
  init_tensor();
  init_table(boot.bar2, boot.bar2_size);
  if (table_.attached()) {
    vtrn::hostif::FwHeader* header = boot.hostif->header();
    header->capabilities = header->capabilities | vtrn::hostif::kCapJobs;
  }
  platform_ = boot.platform;
  gic_ = boot.gic;
  // Executors wait for this (acquire) before their first look at the table.
  __atomic_store_n(&ready_, 1u, __ATOMIC_RELEASE);
}

Vectors JobsService::poll(Turn&) {
  start_cores();
  collect_cores();
  // Deadlines are checked on every turn (any wake-up: a step ending, a
  // request) and at the latest on the telemetry tick.
  const uint64_t now = arch::now_ns();
  wake(sched_.tick(now));
  wake(sched_.poll(now, power::device_active(), hbm_));
  bool sent = false;
  events_blocked_ = false;
  EndReport r;
  int slot;
  while ((slot = sched_.next_event(&r)) >= 0) {
    Vtrn__Ctrl__JobEvent body = VTRN__CTRL__JOB_EVENT__INIT;
    body.job_id = r.job_id;
    body.state = to_proto_state(r.state);
    body.reason = const_cast<char*>(r.state == kDone ? "" : r.reason);
    body.failed_step = r.failed_step;
    body.queued_ns = r.queued_ns;
    body.start_ns = r.start_ns;
    body.end_ns = r.end_ns;
    body.cores_used = r.cores_used;
    body.flops = r.flops;
    body.engine = Vtrn__Types__JobEngine(r.engine);
    body.engines_used = r.engines_used;
    body.modeled_ns = r.modeled_ns;
    body.engine_wall_ns = r.engine_wall_ns;
    Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
    ev.body_case = VTRN__CTRL__EVENT__BODY_JOB;
    ev.job = &body;
    // A full response ring keeps the event pending for a later turn (the
    // host frees slots and rings us; the tick retries at the latest).
    if (!ctrl::send_event(ev)) {
      events_blocked_ = true;
      break;
    }
    sched_.event_sent(slot);
    sent = true;
    const uint32_t level = r.state == kDone || r.state == kCancelled ? kLogDebug : kLogWarn;
    log(level, "jobs: job %llu %s after %llu us (modeled %llu us) on %u cores, %u tensor engines%s%s",
        (unsigned long long)r.job_id, state_name(r.state),
        (unsigned long long)((r.end_ns - (r.start_ns ? r.start_ns : r.queued_ns)) / 1000),
        (unsigned long long)(r.modeled_ns / 1000), unsigned(r.cores_used), unsigned(r.engines_used),
        r.state == kDone ? "" : ": ", r.state == kDone ? "" : r.reason);
  }
  publish_changes(false);
  run_on_service_core();
  return sent ? vector(vtrn::hostif::kVectorControl) : 0;
}

void JobsService::tick(Turn&) {
  const uint64_t now = arch::now_ns();
  watch_tensor(now);
  wake(sched_.tick(now));
  check_stuck(now);
  publish_changes(true);
  publish_cores();
}

void JobsService::run_on_service_core() {
  if (!core0_executes_) return;
  uint32_t to_wake = 0;
  const ExecResult r = sched_.exec(0, runner_, &to_wake);
  if (r != ExecResult::kRan) cores::set_state(0, cores::kCoreIdle, 0);
}

// A chunk that ignores stop keeps its job RUNNING and its buffers in use
// forever: past the bound the chip panics naming the job and its cores,
// and vtrnd resets it.
void JobsService::check_stuck(uint64_t now) {
  uint32_t cores = 0;
  const int slot = sched_.stuck(now, kStuckNs, &cores);
  if (slot < 0) return;
  const Job& j = sched_.job(uint32_t(slot));
  const uint32_t stop = __atomic_load_n(&j.run.stop, __ATOMIC_RELAXED);
  const char* why = stop == kStopCancel ? "cancel" : stop == kStopTimeout ? "timeout" : "failure";
  panic(vtrn::hostif::kPanicJobStuck, "job %llu: cores 0x%x did not stop within %llu ms of its %s (step %u of %u)",
        (unsigned long long)j.sub.job_id, unsigned(cores), (unsigned long long)(kStuckNs / 1000000), why,
        unsigned(j.step), unsigned(j.sub.step_count));
}

bool JobsService::arm_stuck() {
  // A chip whose only executor is core 0 would never run the stuck chunk.
  if (all_reported_ && (sched_.executor_mask() & ~1u) == 0) return false;
  __atomic_store_n(&stuck_armed_, 1u, __ATOMIC_RELEASE);
  return true;
}

bool JobsService::has_work() {
  if (!cores_started_) return true;
  if (!all_reported_ && smp::collect_online(kSmpTimeoutNs) != (sched_.executor_mask() | 1u)) {
    return true;
  }
  if (sched_.service_work(power::device_active(), events_blocked_)) return true;
  return core0_executes_ && sched_.exec_has_work(0);
}

bool JobsService::busy() const { return sched_.queued() != 0 || sched_.running() != 0; }

void JobsService::fill_telemetry(vtrn::hostif::Telemetry* t) const {
  const Counters& c = sched_.counters();
  t->jobs_queued = sched_.queued();
  t->jobs_running = sched_.running();
  t->jobs_completed = c.completed;
  t->jobs_failed = c.failed + c.cancelled + c.timed_out;
  EngineTotals e;
  tensor_totals(&e);
  t->tensor_busy_ns = e.busy_ns;
  t->tensor_modeled_ns = e.modeled_ns;
}

void JobsService::executor(uint32_t core) {
  cores::set_state(core, cores::kCoreIdle, 0);
  for (;;) {
    if (__atomic_load_n(&ready_, __ATOMIC_ACQUIRE) != 0) {
      uint32_t to_wake = 0;
      const ExecResult r = sched_.exec(core, runner_, &to_wake);
      if (to_wake) wake(to_wake);
      if (r == ExecResult::kRan || r == ExecResult::kDetached) continue;
    }
    // Nothing to claim: sleep until an SGI. IRQs are masked across the
    // check and WFI, so a wake-up sent after the check stays pending and
    // ends the WFI at once; unmasking then takes (and completes) the SGI.
    cores::set_state(core, cores::kCoreIdle, 0);
    arch::irq_disable();
    const bool work = __atomic_load_n(&ready_, __ATOMIC_ACQUIRE) != 0 &&
                      sched_.exec_has_work(core);
    if (!work) arch::wait_for_interrupt();
    arch::irq_enable();
  }
}

}  // namespace fw::jobs
