// fw::jobs service glue: control requests, events, the BAR2 job table, the
// executor loop and the kernels it calls. See fw/jobs_service.h.
//
// Executors reach HBM by physical address: the firmware's identity map
// covers all of RAM, HBM included (main.cpp map_platform), so a validated
// buffer address is a pointer. Each executor has its own GEMM scratch and
// never logs or touches the HBM allocator (both are core 0's); a kernel that
// refuses arguments validation already accepted is a firmware bug (FW_CHECK).
#include "fw/jobs_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/cores.h"
#include "fw/hbm_service.h"
#include "fw/job_model.h"
#include "fw/job_sched.h"
#include "fw/log.h"
#include "fw/panic.h"
#include "fw/platform.h"
#include "fw/power_service.h"
#include "fw/smp.h"
#include "vtrn/jobs_abi.h"
#include "vtrn/kernels.h"

namespace fw::jobs {
namespace {

namespace abi = vtrn::jobs;

// How long boot waits for secondaries to report online (they take
// microseconds; this only bounds a core that never arrives).
constexpr uint64_t kSmpTimeoutNs = 200ull * 1000 * 1000;

class HbmCheck final : public BufferCheck {
  Access do_check(uint64_t addr, uint64_t bytes) override {
    switch (hbm::check(addr, bytes)) {
      case hbm::Access::kOk: return Access::kOk;
      case hbm::Access::kEccError: return Access::kEccError;
      default: return Access::kNotAllocated;
    }
  }
};

struct alignas(64) Scratch {
  float f[vtrn::kern::kGemmScratchMaxBytes / sizeof(float) + 16];
};

class KernelRunner final : public ChunkRunner {
  void do_run(uint32_t core, const Step& s, uint32_t b, uint32_t e) override;
};

Scheduler g_sched;
HbmCheck g_hbm;
KernelRunner g_runner;
Scratch g_scratch[kMaxCores];
uint32_t g_ready = 0;          // executors start serving once init is done
uint32_t g_cores_online = 1;
bool g_cores_started = false;
bool g_events_blocked = false;  // the response ring was full on the last try
const platform::Platform* g_platform = nullptr;
hal::gic::Gic* g_gic = nullptr;
bool g_all_reported = false;
bool g_core0_executes = false;
abi::JobTableHeader* g_table = nullptr;
abi::CoreEntry* g_core_rows = nullptr;
abi::JobEntry* g_rows = nullptr;
uint64_t g_published_gen = 0;
uint32_t g_last_state[kSlots];

float* f32(uint64_t addr) { return reinterpret_cast<float*>(uintptr_t(addr)); }

void KernelRunner::do_run(uint32_t core, const Step& s, uint32_t b, uint32_t e) {
  cores::set_state(core, cores::kCoreRunning, kernel_intensity(s.kernel, s.dtype));
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

void wake(uint32_t mask) {
  if (g_core0_executes) mask &= ~1u;  // core 0 checks its own work every turn
  smp::wake(mask);
}

// ---- BAR2 table ----
template <typename T>
void begin_write(T* rec) {
  const uint32_t s = rec->seq;
  __atomic_store_n(&rec->seq, s + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}
template <typename T>
void end_write(T* rec) {
  __atomic_store_n(&rec->seq, rec->seq + 1, __ATOMIC_RELEASE);
}

void publish_job(uint32_t slot) {
  const Job& j = g_sched.job(slot);
  abi::JobEntry* e = &g_rows[slot];
  uint32_t done = 0, total = 0;
  g_sched.progress(slot, &done, &total);
  begin_write(e);
  e->state = j.state;
  e->job_id = j.sub.job_id;
  e->client = j.sub.client;
  e->priority = j.sub.priority;
  e->step = j.step;
  e->step_count = j.sub.step_count;
  e->core_mask = j.state == kRunning ? __atomic_load_n(&j.run.attached, __ATOMIC_RELAXED) : 0;
  e->cores_used = j.cores_used;
  e->queued_ns = j.queued_ns;
  e->start_ns = j.start_ns;
  e->end_ns = j.end_ns;
  e->deadline_ns = j.deadline_ns;
  e->chunks_done = done;
  e->chunks_total = total;
  snprintf(e->reason, sizeof e->reason, "%s", j.state == kDone ? "" : j.reason);
  end_write(e);
}

void publish_header() {
  abi::JobTableHeader* h = g_table;
  const Counters& c = g_sched.counters();
  begin_write(h);
  h->queued = g_sched.queued();
  h->running = g_sched.running();
  h->updated_ns = arch::now_ns();
  h->accepted = c.accepted;
  h->completed = c.completed;
  h->failed = c.failed;
  h->cancelled = c.cancelled;
  h->timed_out = c.timed_out;
  h->rejected = c.rejected;
  end_write(h);
}

void publish_cores() {
  for (uint32_t i = 0; i < abi::kJobCoreCount && i < cores::count(); ++i) {
    cores::CoreSnapshot s{};
    cores::snapshot(i, &s);
    abi::CoreEntry* e = &g_core_rows[i];
    const int slot = g_sched.core_slot(i);
    begin_write(e);
    e->state = s.state;
    e->intensity_permille = s.intensity_permille;
    e->slot = slot < 0 ? 0xffffffffu : uint32_t(slot);
    e->job_id = slot < 0 ? 0 : g_sched.job(uint32_t(slot)).sub.job_id;
    e->busy_ns = s.busy_ns;
    e->idle_ns = s.idle_ns;
    e->off_ns = s.off_ns;
    e->chunks = g_sched.core_chunks(i);
    end_write(e);
  }
}

// Rows whose slot changed since the last call, and the header.
void publish_changes(bool all) {
  if (!g_table) return;
  if (!all && g_sched.generation() == g_published_gen) return;
  g_published_gen = g_sched.generation();
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = g_sched.job(i);
    if (j.state == kFree) continue;
    if (all || j.state == kRunning || j.state != g_last_state[i] ||
        j.sub.job_id != g_rows[i].job_id) {
      publish_job(i);
      g_last_state[i] = j.state;
    }
  }
  publish_header();
}

void init_table(const ServiceConfig& cfg, uint32_t executor_mask) {
  if (!cfg.bar2 || cfg.bar2_size < vtrn::hostif::kJobsOffset + vtrn::hostif::kJobsSize) return;
  uint8_t* base = cfg.bar2 + vtrn::hostif::kJobsOffset;
  memset(base, 0, vtrn::hostif::kJobsSize);
  g_table = reinterpret_cast<abi::JobTableHeader*>(base);
  g_core_rows = reinterpret_cast<abi::CoreEntry*>(base + abi::kCoresOffset);
  g_rows = reinterpret_cast<abi::JobEntry*>(base + abi::kEntriesOffset);
  static_assert(kSlots <= abi::kMaxEntries);
  abi::JobTableHeader* h = g_table;
  begin_write(h);
  h->magic = abi::kJobTableMagic;
  h->version = abi::kJobTableVersion;
  h->header_bytes = sizeof(abi::JobTableHeader);
  h->core_bytes = sizeof(abi::CoreEntry);
  h->entry_bytes = sizeof(abi::JobEntry);
  h->core_count = cores::count();
  h->entry_count = kSlots;
  h->executor_mask = executor_mask;
  end_write(h);
  publish_cores();
  if (cfg.header) {
    cfg.header->capabilities = cfg.header->capabilities | vtrn::hostif::kCapJobs;
  }
}

// ---- control requests ----
template <typename T>
T* arena_new(pb::Arena& arena) {
  ProtobufCAllocator* a = arena.allocator();
  return static_cast<T*>(a->alloc(a->allocator_data, sizeof(T)));
}

Vtrn__Ctrl__JobState to_proto_state(uint32_t s) { return Vtrn__Ctrl__JobState(s); }

void serve_submit(const Vtrn__Ctrl__JobSubmitRequest& req, Vtrn__Ctrl__Response* resp,
                  pb::Arena& arena, char* error, size_t cap) {
  static Submit sub;  // 1 KiB+: kept off the stack; core 0 only
  submit_from_proto(req, &sub);
  if (!validate(sub, g_hbm, error, cap)) {
    g_sched.count_rejected();
    resp->status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
    return;
  }
  const SubmitStatus st = g_sched.submit(sub, arch::now_ns(), error, cap);
  if (st != SubmitStatus::kAccepted) {
    resp->status = st == SubmitStatus::kBusy ? VTRN__CTRL__STATUS__STATUS_BUSY
                                             : VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
    return;
  }
  auto* body = arena_new<Vtrn__Ctrl__JobSubmitResponse>(arena);
  if (!body) {
    snprintf(error, cap, "jobs: response arena exhausted");
    resp->status = VTRN__CTRL__STATUS__STATUS_INTERNAL;
    return;
  }
  vtrn__ctrl__job_submit_response__init(body);
  body->state = VTRN__CTRL__JOB_STATE__JOB_STATE_QUEUED;
  resp->status = VTRN__CTRL__STATUS__STATUS_OK;
  resp->body_case = VTRN__CTRL__RESPONSE__BODY_JOB_SUBMIT;
  resp->job_submit = body;
  log(kLogDebug, "jobs: job %llu queued (client %u, priority %u, %u steps)",
      (unsigned long long)sub.job_id, unsigned(sub.client), unsigned(sub.priority),
      unsigned(sub.step_count));
}

void serve_cancel(const Vtrn__Ctrl__JobCancelRequest& req, Vtrn__Ctrl__Response* resp,
                  pb::Arena& arena, char* error, size_t cap) {
  uint32_t state = 0, to_wake = 0;
  if (!g_sched.cancel(req.job_id, arch::now_ns(), &state, &to_wake)) {
    snprintf(error, cap, "job_id: no job %llu on this chip", (unsigned long long)req.job_id);
    resp->status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
    return;
  }
  wake(to_wake);
  auto* body = arena_new<Vtrn__Ctrl__JobCancelResponse>(arena);
  if (!body) {
    snprintf(error, cap, "jobs: response arena exhausted");
    resp->status = VTRN__CTRL__STATUS__STATUS_INTERNAL;
    return;
  }
  vtrn__ctrl__job_cancel_response__init(body);
  body->state = to_proto_state(state);
  resp->status = VTRN__CTRL__STATUS__STATUS_OK;
  resp->body_case = VTRN__CTRL__RESPONSE__BODY_JOB_CANCEL;
  resp->job_cancel = body;
}

}  // namespace

// The secondaries are started on the event loop's first turn, after READY:
// nothing before READY needs them (no job can arrive earlier), and PSCI
// CPU_ON plus the new vCPU threads competing for the host's cores cost the
// boot about 30 ms under TCG when done before it.
void collect_cores();

void start_cores() {
  if (g_cores_started) return;
  g_cores_started = true;
  (void)smp::start(*g_platform, g_gic, cores::count(), executor_main);
  collect_cores();
}

// Secondary cores report online asynchronously (fw::smp): each becomes an
// executor when core 0 notices it. If none arrives, core 0 executes.
void collect_cores() {
  if (g_all_reported) return;
  const uint32_t online = smp::collect_online(kSmpTimeoutNs);
  g_sched.add_executors(online & ~1u);
  if (!smp::all_reported()) return;
  g_all_reported = true;
  g_cores_online = uint32_t(__builtin_popcount(online));
  if ((online & ~1u) == 0) {
    g_core0_executes = true;
    g_sched.add_executors(1u);
  }
  if (g_table) {
    begin_write(g_table);
    g_table->executor_mask = g_sched.executor_mask();
    end_write(g_table);
  }
  log(kLogInfo, "jobs: %u of %u NeuronCores online, executors 0x%x%s, %u job slots",
      unsigned(g_cores_online), unsigned(cores::count()), unsigned(g_sched.executor_mask()),
      g_core0_executes ? " (core 0 executes: no secondary core)" : " (core 0 serves only)",
      unsigned(kSlots));
}

uint32_t init(const ServiceConfig& cfg, const platform::Platform& platform, hal::gic::Gic* gic) {
  uint32_t want = cfg.neuron_cores;
  if (want > platform.cpu_count) want = platform.cpu_count;
  if (want > kMaxCores) want = kMaxCores;
  if (want == 0) want = 1;
  cores::init(want, arch::now_ns);
  cores::set_state(0, cores::kCoreIdle, 0);
  g_sched.init(0);
  init_table(cfg, 0);
  g_platform = &platform;
  g_gic = gic;
  // Executors wait for this (acquire) before their first look at the table.
  __atomic_store_n(&g_ready, 1u, __ATOMIC_RELEASE);
  return want;
}

bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap) {
  switch (req.body_case) {
    case VTRN__CTRL__REQUEST__BODY_JOB_SUBMIT:
      if (!req.job_submit) return false;
      serve_submit(*req.job_submit, resp, arena, error, error_cap);
      return true;
    case VTRN__CTRL__REQUEST__BODY_JOB_CANCEL:
      if (!req.job_cancel) return false;
      serve_cancel(*req.job_cancel, resp, arena, error, error_cap);
      return true;
    default:
      return false;
  }
}

bool poll(EventSender send) {
  start_cores();
  collect_cores();
  // Deadlines are checked on every turn (any wake-up: a step ending, a
  // request) and at the latest on the telemetry tick.
  const uint64_t now = arch::now_ns();
  wake(g_sched.tick(now));
  wake(g_sched.poll(now, power::device_active(), g_hbm));
  bool sent = false;
  g_events_blocked = false;
  EndReport r;
  int slot;
  while ((slot = g_sched.next_event(&r)) >= 0) {
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
    Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
    ev.body_case = VTRN__CTRL__EVENT__BODY_JOB;
    ev.job = &body;
    // A full response ring keeps the event pending for a later turn (the
    // host frees slots and rings us; the tick retries at the latest).
    if (!send(ev)) {
      g_events_blocked = true;
      break;
    }
    g_sched.event_sent(slot);
    sent = true;
    const uint32_t level = r.state == kDone || r.state == kCancelled ? kLogDebug : kLogWarn;
    log(level, "jobs: job %llu %s after %llu us on %u cores%s%s", (unsigned long long)r.job_id,
        state_name(r.state),
        (unsigned long long)((r.end_ns - (r.start_ns ? r.start_ns : r.queued_ns)) / 1000),
        unsigned(r.cores_used), r.state == kDone ? "" : ": ", r.state == kDone ? "" : r.reason);
  }
  publish_changes(false);
  return sent;
}

void tick() {
  wake(g_sched.tick(arch::now_ns()));
  publish_changes(true);
  publish_cores();
}

void run_on_service_core() {
  if (!g_core0_executes) return;
  uint32_t to_wake = 0;
  const ExecResult r = g_sched.exec(0, g_runner, &to_wake);
  if (r != ExecResult::kRan) cores::set_state(0, cores::kCoreIdle, 0);
}

bool has_work() {
  if (!g_cores_started) return true;
  if (!g_all_reported && smp::collect_online(kSmpTimeoutNs) != (g_sched.executor_mask() | 1u)) {
    return true;
  }
  if (g_sched.service_work(power::device_active(), g_events_blocked)) return true;
  return g_core0_executes && g_sched.exec_has_work(0);
}

void fill_telemetry(vtrn::hostif::Telemetry* t) {
  const Counters& c = g_sched.counters();
  t->jobs_queued = g_sched.queued();
  t->jobs_running = g_sched.running();
  t->jobs_completed = c.completed;
  t->jobs_failed = c.failed + c.cancelled + c.timed_out;
}

void executor_main(uint32_t core) {
  cores::set_state(core, cores::kCoreIdle, 0);
  for (;;) {
    if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) != 0) {
      uint32_t to_wake = 0;
      const ExecResult r = g_sched.exec(core, g_runner, &to_wake);
      if (to_wake) wake(to_wake);
      if (r == ExecResult::kRan || r == ExecResult::kDetached) continue;
    }
    // Nothing to claim: sleep until an SGI. IRQs are masked across the
    // check and WFI, so a wake-up sent after the check stays pending and
    // ends the WFI at once; unmasking then takes (and completes) the SGI.
    cores::set_state(core, cores::kCoreIdle, 0);
    arch::irq_disable();
    const bool work = __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) != 0 &&
                      g_sched.exec_has_work(core);
    if (!work) arch::wait_for_interrupt();
    arch::irq_enable();
  }
}

}  // namespace fw::jobs
