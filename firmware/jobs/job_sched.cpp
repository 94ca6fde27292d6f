// fw::jobs scheduler implementation. See fw/job_sched.h for the protocol
// between core 0 and the executors; every cross-core access below is an
// __atomic builtin with the ordering named next to it.
#include "fw/job_sched.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace fw::jobs {
namespace {

template <typename T>
T load_acq(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
T load_rlx(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <typename T>
void store_rel(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
template <typename T>
void store_rlx(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

uint32_t popcount(uint32_t v) { return uint32_t(__builtin_popcount(v)); }

// Tile cookie: acceptance order (24 bits) << 40 | slot << 32 | first row.
uint64_t tile_cookie(const Job& j, uint32_t slot, uint32_t row) {
  return (uint64_t(j.seq & 0xffffff) << 40) | (uint64_t(slot) << 32) | row;
}

}  // namespace

const char* tensor_status_name(uint32_t status) {
  using namespace vtrn::engine;
  switch (status) {
    case kTensorOk: return "ok";
    case kTensorBadOpcode: return "bad opcode";
    case kTensorBadFlags: return "bad flags";
    case kTensorBadShape: return "bad shape";
    case kTensorMisaligned: return "misaligned operand";
    case kTensorAddrOverflow: return "operand address wraps";
    case kTensorRange: return "operand outside HBM";
    case kTensorMpuFault: return "mpu fault";
    case kTensorOverlap: return "C overlaps an input";
    case kTensorInjected: return "injected fault";
    default: return "unknown status";
  }
}

const char* state_name(uint32_t state) {
  switch (state) {
    case kFree: return "free";
    case kQueued: return "queued";
    case kRunning: return "running";
    case kDone: return "done";
    case kFailed: return "failed";
    case kCancelled: return "cancelled";
    case kTimedOut: return "timed-out";
    default: return "unknown";
  }
}

void Scheduler::init(uint32_t executor_mask, uint64_t chunk_cost) {
  for (Job& j : jobs_) j = Job{};
  for (CoreLine& c : cores_) c = CoreLine{};
  executors_ = executor_mask & ((1u << kMaxCores) - 1);
  chunk_cost_ = chunk_cost ? chunk_cost : kDefaultChunkCost;
  seq_ = 0;
  rr_client_ = 0;
  rr_valid_ = false;
  token_gen_ = 0;
  generation_ = 1;
  counters_ = Counters{};
  feed_rr_ = 0;
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void Scheduler::set_tensor_engines(TensorEngines* engines) { tensor_ = engines; }

uint32_t Scheduler::tensor_engines() const {
  if (!tensor_) return 0;
  const uint32_t n = tensor_->count();
  return n > kMaxEngines ? kMaxEngines : n;
}

uint32_t Scheduler::tiles_in_flight() const {
  uint32_t n = 0;
  for (const Job& j : jobs_) n += j.state == kRunning ? j.tensor.in_flight : 0;
  return n;
}

uint32_t Scheduler::engine_load(uint32_t e) const {
  uint32_t n = 0;
  for (const Job& j : jobs_) n += j.state == kRunning ? j.tensor.on_engine[e] : 0;
  return n;
}

void Scheduler::set_reason(Job& j, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(j.reason, sizeof j.reason, fmt, ap);
  va_end(ap);
}

uint32_t Scheduler::queued() const {
  uint32_t n = 0;
  for (const Job& j : jobs_) n += j.state == kQueued ? 1 : 0;
  return n;
}

uint32_t Scheduler::running() const {
  uint32_t n = 0;
  for (const Job& j : jobs_) n += j.state == kRunning ? 1 : 0;
  return n;
}

bool Scheduler::holds_owner(uint64_t owner) const {
  for (const Job& j : jobs_) {
    if ((j.state == kQueued || j.state == kRunning) && j.sub.owner == owner) return true;
  }
  return false;
}

int Scheduler::free_slot() const {
  int oldest = -1;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = jobs_[i];
    if (j.state == kFree) return int(i);
    if (is_end_state(j.state) && !j.event_pending &&
        (oldest < 0 || j.end_ns < jobs_[oldest].end_ns)) {
      oldest = int(i);
    }
  }
  return oldest;
}

vtrn::Error Scheduler::submit(const Submit& s, uint64_t now) {
  for (const Job& j : jobs_) {
    if ((j.state == kQueued || j.state == kRunning) && j.sub.job_id == s.job_id) {
      ++counters_.rejected;
      return vtrn::Error(vtrn::Code::kInvalidArgument, "job_id: %llu is already %s",
                         (unsigned long long)s.job_id, state_name(j.state));
    }
  }
  uint32_t engine = kEngineCores;
  const vtrn::Error eerr = resolve_engine(s.engine, tensor_engines(), &engine);
  if (!eerr.ok()) {
    ++counters_.rejected;
    return eerr;
  }
  const int slot = free_slot();
  if (slot < 0) {
    ++counters_.rejected;
    return vtrn::Error(vtrn::Code::kCapacity,
                       "job table full: %u jobs queued, running or ending; retry later",
                       unsigned(kSlots));
  }
  Job& j = jobs_[slot];
  j = Job{};
  j.sub = s;
  j.engine = engine;
  if (engine == kEngineTensor) {
    const uint32_t n = tensor_engines();
    j.engine_count = s.max_cores && s.max_cores < n ? s.max_cores : n;
  }
  for (uint32_t i = 0; i < s.step_count && i < kMaxSteps; ++i) {
    StepPlan& p = j.plan[i];
    p.rows = step_rows(s.steps[i]);
    if (engine == kEngineTensor && s.steps[i].kernel == kKernelGemm) {
      // Tiles of at most kTileFlops, and at least one per engine it may use.
      const uint64_t row_flops = step_flops(s.steps[i]) / (p.rows ? p.rows : 1);
      uint64_t rpt = kTileFlops / (row_flops ? row_flops : 1);
      const uint64_t even = (uint64_t(p.rows) + j.engine_count - 1) / j.engine_count;
      if (rpt > even) rpt = even;
      if (rpt == 0) rpt = 1;
      p.tensor = true;
      p.rows_per_chunk = uint32_t(rpt);
      p.chunks = 0;
      continue;
    }
    const uint64_t cost = step_row_cost(s.steps[i]);
    uint64_t rpc = chunk_cost_ / (cost ? cost : 1);
    if (rpc == 0) rpc = 1;
    if (rpc > p.rows) rpc = p.rows ? p.rows : 1;
    p.rows_per_chunk = uint32_t(rpc);
    p.chunks = uint32_t((uint64_t(p.rows) + rpc - 1) / rpc);
  }
  j.seq = ++seq_;
  j.queued_ns = now;
  j.state = kQueued;
  ++counters_.accepted;
  ++generation_;
  return vtrn::Error();
}

bool Scheduler::startable() const {
  const int slot = pick_next();
  if (slot < 0) return false;
  // A job with core steps waits for a free core; one of tensor steps only
  // starts at once.
  const Job& j = jobs_[slot];
  for (uint32_t s = 0; s < j.sub.step_count && s < kMaxSteps; ++s) {
    if (j.plan[s].chunks != 0) return (executors_ & ~busy_cores()) != 0;
  }
  return true;
}

int Scheduler::pick_next() const {
  bool any = false;
  uint32_t best = 0;
  for (const Job& j : jobs_) {
    if (j.state != kQueued) continue;
    if (!any || j.sub.priority < best) best = j.sub.priority;
    any = true;
  }
  if (!any) return -1;
  // Round robin among the clients that have work at this priority: the
  // smallest client id above the one served last, else the smallest.
  bool have_after = false, have_low = false;
  uint32_t after = 0, low = 0;
  for (const Job& j : jobs_) {
    if (j.state != kQueued || j.sub.priority != best) continue;
    const uint32_t c = j.sub.client;
    if (rr_valid_ && c > rr_client_ && (!have_after || c < after)) {
      after = c;
      have_after = true;
    }
    if (!have_low || c < low) {
      low = c;
      have_low = true;
    }
  }
  const uint32_t client = have_after ? after : low;
  int pick = -1;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = jobs_[i];
    if (j.state != kQueued || j.sub.priority != best || j.sub.client != client) continue;
    if (pick < 0 || j.seq < jobs_[pick].seq) pick = int(i);
  }
  return pick;
}

uint32_t Scheduler::busy_cores() const {
  uint32_t busy = 0;
  for (const Job& j : jobs_) {
    if (j.state == kRunning) busy |= load_acq(&j.run.attached);
  }
  return busy;
}

void Scheduler::end(int slot, uint32_t state, uint64_t now) {
  Job& j = jobs_[slot];
  j.state = state;
  j.end_ns = now;
  j.event_pending = true;
  switch (state) {
    case kDone: ++counters_.completed; break;
    case kFailed: ++counters_.failed; break;
    case kCancelled: ++counters_.cancelled; break;
    case kTimedOut: ++counters_.timed_out; break;
    default: break;
  }
  ++generation_;
}

bool Scheduler::stop_job(Job& j, uint32_t code, uint64_t now) {
  // Core 0 is the only writer of stop: the first reason stays.
  if (load_rlx(&j.run.stop) != kStopNone) return false;
  store_rel(&j.run.stop, code);
  j.stop_seen_ns = now ? now : 1;  // 0 means no stop
  ++generation_;
  return true;
}

uint32_t Scheduler::start(int slot, uint32_t free, uint64_t now, BufferCheck& hbm) {
  Job& j = jobs_[slot];
  const vtrn::Error err = check_step_buffers(j.sub, 0, hbm);
  if (!err.ok()) {
    set_reason(j, "%.*s", int(sizeof j.reason - 1), err.detail());
    j.failed_step = 0;
    j.start_ns = now;
    end(slot, kFailed, now);
    return 0;
  }
  // Tensor steps need no core: a job of them only takes none.
  uint32_t max_chunks = 0;
  for (uint32_t i = 0; i < j.sub.step_count; ++i) {
    if (j.plan[i].chunks > max_chunks) max_chunks = j.plan[i].chunks;
  }
  uint32_t want = popcount(free);
  if (j.sub.max_cores && j.sub.max_cores < want) want = j.sub.max_cores;
  if (max_chunks < want) want = max_chunks;
  uint32_t mask = 0;
  for (uint32_t c = 0; c < kMaxCores && popcount(mask) < want; ++c) {
    if (free & (1u << c)) mask |= 1u << c;
  }
  RunState& r = j.run;
  store_rlx(&r.cursor, uint64_t(0));
  store_rlx(&r.chunks_done, 0u);
  store_rlx(&r.steps_done, 0u);
  store_rlx(&r.stop, uint32_t(kStopNone));
  // Everything above (and the slot's Submit and plan) is visible to a core
  // that acquires its token below.
  store_rel(&r.attached, mask);
  j.state = kRunning;
  j.start_ns = now;
  j.deadline_ns = j.sub.timeout_ms ? now + uint64_t(j.sub.timeout_ms) * 1000000ull : 0;
  j.core_mask = mask;
  j.cores_used = popcount(mask);
  j.step = 0;
  begin_step(j, now);
  for (uint32_t c = 0; c < kMaxCores; ++c) {
    if (!(mask & (1u << c))) continue;
    token_gen_ = (token_gen_ + 1) & 0xffffff;
    if (token_gen_ == 0) token_gen_ = 1;
    store_rel(&cores_[c].token, (token_gen_ << 8) | uint32_t(slot));
  }
  rr_client_ = j.sub.client;
  rr_valid_ = true;
  ++generation_;
  if (j.plan[0].tensor) tensor_progress(slot, now);
  return mask;
}

void Scheduler::begin_step(Job& j, uint64_t now) {
  j.step_start_ns = now;
  j.tensor = TensorRun{};
}

// Routes every completion waiting on the engines to its job.
void Scheduler::drain_tensor() {
  const uint32_t n = tensor_engines();
  for (uint32_t e = 0; e < n; ++e) {
    if (engine_load(e) == 0 && !tensor_->pending(e)) continue;
    vtrn::engine::TensorCompletion c;
    uint32_t qerr = 0;
    for (;;) {
      const TensorEngines::Poll p = tensor_->poll(e, &c, &qerr);
      if (p == TensorEngines::Poll::kEmpty) break;
      if (p == TensorEngines::Poll::kBroken) {
        // Its tiles will never complete: every job with one there fails.
        for (Job& j : jobs_) {
          if (j.state != kRunning || j.tensor.on_engine[e] == 0) continue;
          j.tensor.in_flight -= j.tensor.on_engine[e];
          j.tensor.on_engine[e] = 0;
          if (!j.tensor.status && !j.tensor.broken) {
            j.tensor.broken = qerr ? qerr : 0xffffffffu;
            j.tensor.bad_engine = e;
          }
        }
        break;
      }
      const uint32_t slot = uint32_t(c.cookie >> 32) & 0xff;
      Job* j = slot < kSlots ? &jobs_[slot] : nullptr;
      if (!j || j->state != kRunning || (j->seq & 0xffffff) != (c.cookie >> 40) || j->tensor.on_engine[e] == 0) {
        ++counters_.stray_completions;
        continue;
      }
      TensorRun& t = j->tensor;
      --t.on_engine[e];
      --t.in_flight;
      ++counters_.tiles;
      t.modeled_ns[e] += c.modeled_ns;
      j->engine_wall_ns += c.wall_ns;
      j->engine_mask |= 1u << e;
      if (c.status != vtrn::engine::kTensorOk) {
        ++counters_.tile_errors;
        if (!t.status && !t.broken) {
          t.status = c.status;
          t.bad_engine = e;
          t.bad_row = uint32_t(c.cookie);
        }
      }
    }
  }
}

// Submits tiles of a job's tensor step while its engines have room.
void Scheduler::feed_tensor(int slot) {
  Job& j = jobs_[slot];
  TensorRun& t = j.tensor;
  const StepPlan& p = j.plan[j.step];
  const Step& s = j.sub.steps[j.step];
  const vtrn::num::DType dt = vtrn::num::DType(s.dtype);
  uint32_t rung = 0;
  while (t.next_row < p.rows) {
    // The engine of the job's set with the fewest tiles in flight.
    uint32_t best = kMaxEngines, best_load = kTilesPerEngine;
    for (uint32_t e = 0; e < j.engine_count; ++e) {
      const uint32_t load = engine_load(e);
      if (load < best_load) {
        best = e;
        best_load = load;
      }
    }
    if (best == kMaxEngines) break;
    const uint32_t row = t.next_row;
    uint32_t rows = p.rows - row < p.rows_per_chunk ? p.rows - row : p.rows_per_chunk;
    vtrn::engine::TensorCommand c{};
    c.opcode = vtrn::engine::kTensorOpGemm;
    c.dtype = s.dtype;
    c.flags = vtrn::engine::kTensorIrq;
    c.m = rows;
    c.n = s.n;
    c.k = s.k;
    c.ldc = s.n;
    c.a = s.a + vtrn::num::operand_bytes(dt, row, s.k);
    c.b = s.b;
    c.c = s.out + uint64_t(row) * s.n * 4;
    if (dt == vtrn::num::DType::kMXFP4) {
      c.a_scales = s.a_scales + vtrn::num::scale_bytes(dt, row, s.k);
      c.b_scales = s.b_scales;
    }
    c.cookie = tile_cookie(j, uint32_t(slot), row);
    if (!tensor_->submit(best, c)) break;
    rung |= 1u << best;
    ++t.on_engine[best];
    ++t.in_flight;
    t.next_row = row + rows;
  }
  for (uint32_t e = 0; e < kMaxEngines; ++e) {
    if (rung & (1u << e)) tensor_->ring(e);
  }
}

// Feeds a tensor step and, once nothing of it is in flight, completes or
// fails it.
void Scheduler::tensor_progress(int slot, uint64_t now) {
  Job& j = jobs_[slot];
  TensorRun& t = j.tensor;
  const bool failing = t.status != 0 || t.broken != 0;
  if (!failing && load_rlx(&j.run.stop) == kStopNone) feed_tensor(slot);
  if (t.in_flight != 0) return;
  if (failing) {
    if (load_rlx(&j.run.stop) != kStopNone) return;  // a cancel or timeout came first
    const Step& s = j.sub.steps[j.step];
    if (t.broken) {
      set_reason(j, "steps[%u]: tensor engine %u broke its queue (error %u); its tiles are lost", j.step,
                 unsigned(t.bad_engine), unsigned(t.broken == 0xffffffffu ? 0 : t.broken));
    } else {
      const uint32_t rpt = j.plan[j.step].rows_per_chunk;
      const uint32_t end = t.bad_row + rpt < s.m ? t.bad_row + rpt : s.m;
      set_reason(j, "steps[%u]: tensor engine %u: %s (status %u) on rows %u..%u", j.step,
                 unsigned(t.bad_engine), tensor_status_name(t.status), unsigned(t.status), unsigned(t.bad_row),
                 unsigned(end));
    }
    j.failed_step = j.step;
    stop_job(j, kStopFail, now);
    return;
  }
  if (t.next_row < j.plan[j.step].rows || load_rlx(&j.run.stop) != kStopNone) return;
  // Done: the engines ran in parallel, so the step took the busiest one's time.
  uint64_t busiest = 0;
  for (uint64_t m : t.modeled_ns) busiest = m > busiest ? m : busiest;
  j.modeled_ns += busiest;
  store_rel(&j.run.steps_done, j.step + 1);
}

uint32_t Scheduler::tensor_lost(const char* why, uint64_t now) {
  uint32_t wake = 0;
  for (Job& j : jobs_) {
    if (j.state != kRunning || j.tensor.in_flight == 0) continue;
    j.tensor = TensorRun{};
    j.tensor.next_row = j.plan[j.step].rows;
    if (load_rlx(&j.run.stop) == kStopNone) {
      set_reason(j, "steps[%u]: %s", j.step, why);
      j.failed_step = j.step;
      stop_job(j, kStopFail, now);
    }
    wake |= load_acq(&j.run.attached);
  }
  return wake;
}

uint32_t Scheduler::poll(uint64_t now, bool device_active, BufferCheck& hbm) {
  uint32_t wake = 0;
  if (tensor_engines()) drain_tensor();
  for (uint32_t n = 0; n < kSlots; ++n) {
    // The slot fed first rotates, so jobs share the engines' queues.
    const uint32_t i = (feed_rr_ + n) % kSlots;
    Job& j = jobs_[i];
    if (j.state != kRunning) continue;
    RunState& r = j.run;
    if (j.step < j.sub.step_count && j.plan[j.step].tensor) tensor_progress(int(i), now);
    const uint32_t done = load_acq(&r.steps_done);
    if (done > j.step) {
      j.flops += step_flops(j.sub.steps[j.step]);
      if (!j.plan[j.step].tensor) j.modeled_ns += now - j.step_start_ns;
      j.step = done;
      begin_step(j, now);
      ++generation_;
      const uint32_t attached = load_acq(&r.attached);
      if (j.step >= j.sub.step_count) {
        // Past the last step: executors see it and leave.
        store_rel(&r.cursor, uint64_t(j.sub.step_count) << 32);
      } else if (load_rlx(&r.stop) == kStopNone) {
        const vtrn::Error err = check_step_buffers(j.sub, j.step, hbm);
        if (!err.ok()) {
          set_reason(j, "%.*s", int(sizeof j.reason - 1), err.detail());
          j.failed_step = j.step;
          stop_job(j, kStopFail, now);
        } else {
          // chunks_done first: a core that claims from the new cursor
          // (acquire) counts from zero.
          store_rlx(&r.chunks_done, 0u);
          store_rel(&r.cursor, uint64_t(j.step) << 32);
          if (j.plan[j.step].tensor) tensor_progress(int(i), now);
        }
      }
      wake |= attached;
    }
    // Nothing of it on a core or an engine: it ends once past its last
    // step or stopped (or, on the cores path, when every core left).
    const bool stopped = load_rlx(&r.stop) != kStopNone;
    if (load_acq(&r.attached) == 0 && j.tensor.in_flight == 0 &&
        (j.step >= j.sub.step_count || stopped || j.core_mask != 0)) {
      const uint32_t stop = load_rlx(&r.stop);
      if (j.step >= j.sub.step_count) {
        j.reason[0] = '\0';
        end(int(i), kDone, now);
      } else if (stop == kStopCancel) {
        end(int(i), kCancelled, now);
      } else if (stop == kStopTimeout) {
        end(int(i), kTimedOut, now);
      } else {
        if (stop != kStopFail) set_reason(j, "internal: every core left at step %u", j.step);
        j.failed_step = j.step;
        end(int(i), kFailed, now);
      }
    }
  }
  feed_rr_ = (feed_rr_ + 1) % kSlots;
  if (!device_active) return wake;
  while (startable()) wake |= start(pick_next(), executors_ & ~busy_cores(), now, hbm);
  return wake;
}

uint32_t Scheduler::tick(uint64_t now) {
  uint32_t wake = 0;
  for (Job& j : jobs_) {
    if (j.state != kRunning || j.deadline_ns == 0 || now < j.deadline_ns) continue;
    if (load_rlx(&j.run.stop) != kStopNone) continue;
    uint32_t done = 0, total = 0;
    progress(uint32_t(&j - jobs_), &done, &total);
    set_reason(j, "timed out after %u ms in step %u of %u (chunk %u of %u)", j.sub.timeout_ms,
               j.step, j.sub.step_count, done, total);
    j.failed_step = j.step;
    stop_job(j, kStopTimeout, now);
    wake |= load_acq(&j.run.attached);
  }
  return wake;
}

int Scheduler::stuck(uint64_t now, uint64_t bound_ns, uint32_t* cores) const {
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = jobs_[i];
    if (j.state != kRunning || j.stop_seen_ns == 0 || now < j.stop_seen_ns ||
        now - j.stop_seen_ns <= bound_ns) {
      continue;
    }
    const uint32_t attached = load_acq(&j.run.attached);
    if (attached == 0) continue;
    *cores = attached;
    return int(i);
  }
  return -1;
}

bool Scheduler::cancel(uint64_t job_id, uint64_t now, uint32_t* state_after, uint32_t* wake) {
  int slot = -1;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = jobs_[i];
    if (j.state == kFree || j.sub.job_id != job_id) continue;
    // A live job wins over an ended one that reused the id.
    if (slot < 0 || !is_end_state(j.state)) slot = int(i);
  }
  if (slot < 0) return false;
  Job& j = jobs_[slot];
  *wake = 0;
  if (j.state == kQueued) {
    set_reason(j, "cancelled while queued");
    end(slot, kCancelled, now);
  } else if (j.state == kRunning) {
    if (load_rlx(&j.run.stop) == kStopNone) {
      set_reason(j, "cancelled in step %u of %u", j.step, j.sub.step_count);
      j.failed_step = j.step;
      stop_job(j, kStopCancel, now);
    }
    *wake = load_acq(&j.run.attached);
  }
  *state_after = j.state;
  return true;
}

int Scheduler::next_event(EndReport* out) const {
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Job& j = jobs_[i];
    if (!j.event_pending) continue;
    *out = EndReport{j.sub.job_id, j.state,  j.reason,     j.failed_step,
                     j.queued_ns,  j.start_ns, j.end_ns,     j.cores_used,
                     j.flops,      j.engine,   uint32_t(popcount(j.engine_mask)),
                     j.modeled_ns, j.engine_wall_ns};
    return int(i);
  }
  return -1;
}

void Scheduler::event_sent(int slot) {
  if (slot >= 0 && uint32_t(slot) < kSlots) jobs_[slot].event_pending = false;
}

bool Scheduler::service_work(bool device_active, bool events_blocked) const {
  bool queued = false;
  for (const Job& j : jobs_) {
    if (j.event_pending && !events_blocked) return true;
    if (j.state == kQueued) queued = true;
    if (j.state != kRunning) continue;
    if (load_acq(&j.run.steps_done) > j.step) return true;
    if (load_acq(&j.run.attached) != 0 || j.tensor.in_flight != 0) continue;
    // A tensor step waiting for room on the engines waits for a completion.
    const bool feeding = j.step < j.sub.step_count && j.plan[j.step].tensor && j.tensor.status == 0 &&
                         j.tensor.broken == 0 && j.tensor.next_row < j.plan[j.step].rows &&
                         load_rlx(&j.run.stop) == kStopNone;
    if (!feeding) return true;
  }
  // A completion on an engine (its interrupt woke us, or will).
  for (uint32_t e = 0; e < tensor_engines(); ++e) {
    if (tensor_->pending(e)) return true;
  }
  return queued && device_active && startable();
}

void Scheduler::progress(uint32_t slot, uint32_t* done, uint32_t* total) const {
  const Job& j = jobs_[slot];
  *done = 0;
  *total = 0;
  if (j.step < j.sub.step_count && j.step < kMaxSteps) {
    const StepPlan& p = j.plan[j.step];
    if (p.tensor) {
      // Tiles: the ones submitted less the ones still on the engines.
      const uint32_t rpt = p.rows_per_chunk ? p.rows_per_chunk : 1;
      *total = (p.rows + rpt - 1) / rpt;
      const uint32_t sent = (j.tensor.next_row + rpt - 1) / rpt;
      *done = j.state == kRunning && sent >= j.tensor.in_flight ? sent - j.tensor.in_flight : 0;
    } else {
      *total = p.chunks;
      *done = j.state == kRunning ? load_rlx(&j.run.chunks_done) : 0;
    }
    if (*done > *total) *done = *total;
  }
}

int Scheduler::core_slot(uint32_t core) const {
  return core < kMaxCores ? load_rlx(&cores_[core].slot) : -1;
}

uint64_t Scheduler::core_chunks(uint32_t core) const {
  return core < kMaxCores ? load_rlx(&cores_[core].chunks) : 0;
}

ExecResult Scheduler::exec(uint32_t core, ChunkRunner& runner, uint32_t* wake) {
  *wake = 0;
  if (core >= kMaxCores) return ExecResult::kIdle;
  CoreLine& cl = cores_[core];
  if (load_rlx(&cl.slot) < 0) {
    // Acquire: the job's Submit, plan and RunState written before the token.
    const uint32_t tok = load_acq(&cl.token);
    if (tok == cl.served) return ExecResult::kIdle;
    cl.served = tok;
    store_rlx(&cl.slot, int32_t(tok & 0xff));
  }
  const int32_t slot = load_rlx(&cl.slot);
  Job& j = jobs_[slot];
  RunState& r = j.run;
  for (;;) {
    bool leave = load_acq(&r.stop) != kStopNone;
    const uint64_t cur = load_acq(&r.cursor);
    const uint32_t s = uint32_t(cur >> 32);
    const uint32_t k = uint32_t(cur);
    if (s >= j.sub.step_count) leave = true;
    if (leave) {
      // Release: every store of this core's chunks happens before core 0
      // sees it gone (and ends the job, and the host reads the buffers).
      __atomic_fetch_and(&r.attached, ~(1u << core), __ATOMIC_RELEASE);
      store_rlx(&cl.slot, int32_t(-1));
      *wake = kServiceCoreMask;
      return ExecResult::kDetached;
    }
    const StepPlan& p = j.plan[s];
    if (k >= p.chunks) return ExecResult::kWaiting;
    uint64_t expect = cur;
    if (!__atomic_compare_exchange_n(&r.cursor, &expect, cur + 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      continue;  // another core took chunk k (or core 0 moved the step)
    }
    const uint32_t begin = k * p.rows_per_chunk;
    uint32_t end = begin + p.rows_per_chunk;
    if (end > p.rows || end < begin) end = p.rows;
    runner.run(core, j.sub.steps[s], begin, end);
    store_rlx(&cl.chunks, load_rlx(&cl.chunks) + 1);
    const uint32_t done = __atomic_add_fetch(&r.chunks_done, 1u, __ATOMIC_ACQ_REL);
    if (done == p.chunks) {
      // The step is complete: every core's chunk stores happened before
      // their increments (acq_rel), so core 0 may start the next step.
      store_rel(&r.steps_done, s + 1);
      *wake = kServiceCoreMask;
    }
    return ExecResult::kRan;
  }
}

bool Scheduler::exec_has_work(uint32_t core) const {
  if (core >= kMaxCores) return false;
  const CoreLine& cl = cores_[core];
  const int32_t slot = load_rlx(&cl.slot);
  if (slot < 0) return load_acq(&cl.token) != cl.served;
  const Job& j = jobs_[slot];
  if (load_acq(&j.run.stop) != kStopNone) return true;
  const uint64_t cur = load_acq(&j.run.cursor);
  const uint32_t s = uint32_t(cur >> 32);
  if (s >= j.sub.step_count) return true;
  return uint32_t(cur) < j.plan[s].chunks;
}

}  // namespace fw::jobs
