// fw::jobs scheduler: the job table, its queues and the protocol between
// the service core (core 0) and the executor cores.
//
// Core 0 owns the table. It accepts validated jobs into one of kSlots
// slots, picks what runs next (lowest priority value first; among clients
// of equal priority, round robin by client id; FIFO within a client), gives
// a job up to max_cores free executor cores, advances it from step to step
// (checking the next step's buffers first), enforces timeouts, handles
// cancel, and ends every accepted job exactly once with an event.
//
// Executors only touch a running job's RunState, with atomics:
//  - cursor = step << 32 | next chunk: a core claims chunk k of step s by
//    CAS k -> k+1 while k < chunks(s). A step's rows are split into chunks
//    of about kChunkCost work (~1 ms), so a cancel or a timeout, which
//    executors check between chunks, takes effect within about a chunk.
//  - chunks_done: the executor whose increment completes the step stores
//    steps_done = s + 1 (release) and wakes core 0, which checks the next
//    step's buffers and publishes cursor = (s + 1) << 32 (release) after
//    resetting chunks_done. No core ever waits for another while holding
//    anything; a core with nothing to claim sleeps until woken.
//  - stop: set by core 0 (cancel, timeout, a failed buffer check); executors
//    stop claiming, finish the chunk in hand and detach. A chunk that does
//    not return is bounded by stuck(): the firmware panics (kPanicJobStuck)
//    when a job's cores are still on it kStuckNs after its stop.
//  - attached: the cores still on the job; each executor clears its own bit
//    when it leaves (release). A job ends on core 0 once attached == 0, so
//    its buffers are never touched after its end event.
// A core learns about a new job from its assignment token (generation << 8
// | slot), written by core 0 only while the core is free.
//
// Tensor path (a job whose engine is kEngineTensor): its GEMM steps do not
// go to executors (their plan has no chunks) but to the chip's tensor
// engines, driven by core 0 alone. A step's rows are cut into tiles of at
// most kTileFlops (A, its scales and C offset by rows, ldc = n), fed to the
// engines the job may use (the first max_cores of them, all for 0) with at
// most kTilesPerEngine in flight per engine, each completion routed back by
// its cookie (slot, acceptance order, first row). Core 0 sleeps between
// completions (their interrupts wake it). A step is done when every tile
// completed ok; the first tile that did not fails the job with a reason
// naming the engine, the status and the rows, once no tile of it is still
// in flight (an engine cannot be stopped mid-command: cancel and timeout
// also wait for the tiles in flight, never longer than one tile each).
// Steps of other kernels in the same job run on the executor cores the
// job was given; a job of GEMM steps only takes no core at all.
//
// Portable: no hardware; the firmware supplies the clock, the buffer check,
// the chunk runner and the wake-ups. Host tests drive it single-threaded.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/job_model.h"
#include "vtrn/engine_abi.h"
#include "vtrn/jobs_abi.h"

namespace fw::jobs {

inline constexpr uint32_t kSlots = 64;
inline constexpr uint32_t kMaxCores = 8;
inline constexpr uint32_t kReasonLen = 112;
// Work per chunk in step_row_cost units ("flops"): about a millisecond of
// a TCG vCPU running the f32 GEMM kernel (measured 0.1-0.2 GFLOP/s per
// vCPU), so cancel and timeout act within about a millisecond of work.
inline constexpr uint64_t kDefaultChunkCost = 1u << 17;
// Tensor tiles: at most this many flops each (5-10 ms of an engine on this
// host), so a cancel, a timeout or another job waits about a tile. Not
// smaller: every tile decodes all of B (non-f32 dtypes), so a 512^3 MXFP4
// GEMM cut in two tiles on one engine ran at 0.22x OpenBLAS, in one 0.5x.
inline constexpr uint64_t kTileFlops = 1ull << 29;
inline constexpr uint32_t kTilesPerEngine = 2;  // one running, one queued behind it
inline constexpr uint32_t kMaxEngines = vtrn::engine::kMaxTensorEngines;

// A job's state: the vtrn.ctrl.JobState numbers (kFree, a slot never used,
// is JOB_STATE_UNKNOWN), which the BAR2 job table carries as they are.
enum State : uint32_t {
  kFree = VTRN__TYPES__JOB_STATE__JOB_STATE_UNKNOWN,
  kQueued = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED,
  kRunning = VTRN__TYPES__JOB_STATE__JOB_STATE_RUNNING,
  kDone = VTRN__TYPES__JOB_STATE__JOB_STATE_DONE,
  kFailed = VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
  kCancelled = VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED,
  kTimedOut = VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT,
};
static_assert(uint32_t(kFree) == vtrn::jobs::kEntryFree &&
              uint32_t(kQueued) == vtrn::jobs::kEntryQueued &&
              uint32_t(kRunning) == vtrn::jobs::kEntryRunning &&
              uint32_t(kDone) == vtrn::jobs::kEntryDone &&
              uint32_t(kFailed) == vtrn::jobs::kEntryFailed &&
              uint32_t(kCancelled) == vtrn::jobs::kEntryCancelled &&
              uint32_t(kTimedOut) == vtrn::jobs::kEntryTimedOut);
// The one name table of job states in the firmware ("queued", "timed-out").
const char* state_name(uint32_t state);
inline bool is_end_state(uint32_t s) { return s >= kDone && s <= kTimedOut; }

enum Stop : uint32_t { kStopNone = 0, kStopCancel = 1, kStopTimeout = 2, kStopFail = 3 };

struct StepPlan {
  uint32_t rows = 0;
  uint32_t rows_per_chunk = 0;  // tensor steps: rows per tile
  uint32_t chunks = 0;          // executor chunks; 0 for a tensor step
  bool tensor = false;          // runs on the tensor engines
};

// Core 0's view of a tensor step in progress.
struct TensorRun {
  uint32_t next_row = 0;                   // first row not yet submitted
  uint32_t in_flight = 0;                  // tiles submitted, not completed
  uint8_t on_engine[kMaxEngines] = {};     // of them, per engine
  uint64_t modeled_ns[kMaxEngines] = {};   // this step, per engine
  uint32_t status = 0;                     // first TensorStatus that was not ok
  uint32_t bad_engine = 0;
  uint32_t bad_row = 0;                    // first row of that tile
  uint32_t bad_rows = 0;
  uint32_t broken = 0;                     // nonzero: an engine broke (its error / kBadHardware)
};

struct alignas(64) RunState {
  uint64_t cursor = 0;
  uint32_t chunks_done = 0;
  uint32_t steps_done = 0;
  uint32_t stop = 0;
  uint32_t attached = 0;
};

struct Job {
  uint32_t state = kFree;
  Submit sub;
  StepPlan plan[kMaxSteps];
  uint64_t seq = 0;  // acceptance order
  uint64_t queued_ns = 0, start_ns = 0, end_ns = 0, deadline_ns = 0;
  // When its stop (cancel, timeout, failure) was first requested while it
  // ran (0 = no stop requested): the start of the bound within which its
  // cores must leave it (Scheduler::stuck).
  uint64_t stop_seen_ns = 0;
  uint32_t step = 0;        // core 0's view: the step running or where it ended
  uint32_t core_mask = 0;   // cores given
  uint32_t cores_used = 0;
  uint32_t failed_step = 0;
  uint64_t flops = 0;       // of the steps completed
  uint32_t engine = kEngineCores;  // resolved: kEngineTensor or kEngineCores
  uint32_t engine_count = 0;       // tensor engines it may use
  uint32_t engine_mask = 0;        // tensor engines it used
  uint64_t step_start_ns = 0;
  uint64_t modeled_ns = 0;         // of the steps completed (see EndReport)
  uint64_t engine_wall_ns = 0;     // host time of its tensor commands
  TensorRun tensor;
  bool event_pending = false;
  char reason[kReasonLen] = {};
  RunState run;
};

// Result of one job's end, as its event reports it.
struct EndReport {
  uint64_t job_id;
  uint32_t state;
  const char* reason;
  uint32_t failed_step;
  uint64_t queued_ns, start_ns, end_ns;
  uint32_t cores_used;
  uint64_t flops;
  uint32_t engine;          // kEngineTensor or kEngineCores
  uint32_t engines_used;    // tensor engines that ran a tile
  uint64_t modeled_ns;      // tensor steps: the busiest engine's modeled time; core steps: their time
  uint64_t engine_wall_ns;  // host time the tensor engines spent on its tiles
};

// The chip's tensor engines as the scheduler drives them (core 0 only):
// hal::tensor in the firmware, a fake in host tests.
class TensorEngines {
 public:
  enum class Poll : uint8_t { kDone, kEmpty, kBroken };
  uint32_t count() const { return do_count(); }
  // False when the engine refused it (queue full or not ready).
  bool submit(uint32_t engine, const vtrn::engine::TensorCommand& c) { return do_submit(engine, c); }
  void ring(uint32_t engine) { do_ring(engine); }
  // kBroken: the engine latched an error or broke the queue rules; *error
  // gets the dma::QueueError value (0 for a rule the driver caught).
  Poll poll(uint32_t engine, vtrn::engine::TensorCompletion* out, uint32_t* error) {
    return do_poll(engine, out, error);
  }
  // True when a completion is waiting (one index read; the WFI predicate).
  bool pending(uint32_t engine) const { return do_pending(engine); }

 protected:
  ~TensorEngines() = default;

 private:
  virtual uint32_t do_count() const = 0;
  virtual bool do_submit(uint32_t engine, const vtrn::engine::TensorCommand& c) = 0;
  virtual void do_ring(uint32_t engine) = 0;
  virtual Poll do_poll(uint32_t engine, vtrn::engine::TensorCompletion* out, uint32_t* error) = 0;
  virtual bool do_pending(uint32_t engine) const = 0;
};

// The one name table of tensor statuses in the firmware ("mpu fault").
const char* tensor_status_name(uint32_t status);

// Runs rows [row_begin, row_end) of a step on the calling core.
class ChunkRunner {
 public:
  void run(uint32_t core, const Step& s, uint32_t row_begin, uint32_t row_end) {
    do_run(core, s, row_begin, row_end);
  }

 protected:
  ~ChunkRunner() = default;

 private:
  virtual void do_run(uint32_t core, const Step& s, uint32_t row_begin, uint32_t row_end) = 0;
};

enum class ExecResult : uint8_t {
  kIdle,      // no job for this core
  kWaiting,   // on a job, nothing to claim now (between steps)
  kRan,       // ran one chunk
  kDetached,  // left a job (ended or stopped)
};

struct Counters {
  uint64_t accepted = 0, completed = 0, failed = 0, cancelled = 0, timed_out = 0, rejected = 0;
  uint64_t tiles = 0, tile_errors = 0, stray_completions = 0;
};

class Scheduler {
 public:
  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // executor_mask: the cores that run chunks (bit n = core n).
  void init(uint32_t executor_mask, uint64_t chunk_cost = kDefaultChunkCost);
  // The tensor engines (nullptr or none: every job runs on the cores).
  void set_tensor_engines(TensorEngines* engines);
  [[nodiscard]] uint32_t tensor_engines() const;

  // core 0
  // Cores come online after boot: the executor set only grows.
  void add_executors(uint32_t mask) { executors_ |= mask & ((1u << kMaxCores) - 1); }
  // Queues a job validate() accepted. Fails with kCapacity (table full:
  // retry later) or kInvalidArgument (job_id already queued or running, or
  // an engine resolve_engine refuses).
  vtrn::Error submit(const Submit& s, uint64_t now);
  // Ends every running job with tensor tiles in flight as FAILED with
  // `why` (the engines stopped answering: vtrn-hw gone, or reset under
  // them): their tiles will never complete. Returns the cores to wake.
  uint32_t tensor_lost(const char* why, uint64_t now);
  // Tiles in flight on all engines (0: the engines may be reset).
  [[nodiscard]] uint32_t tiles_in_flight() const;
  // Cancels a job: queued -> CANCELLED now (event pending); running -> stop
  // requested, *state_after = RUNNING (the event follows when its cores
  // leave); ended -> its end state, unchanged. False if no slot holds job_id.
  bool cancel(uint64_t job_id, uint64_t now, uint32_t* state_after, uint32_t* wake);
  // Advances running jobs (next step, end) and starts queued ones on free
  // cores (not while !device_active). Returns the cores to wake.
  uint32_t poll(uint64_t now, bool device_active, BufferCheck& hbm);
  // Stops running jobs past their deadline. Returns the cores to wake.
  uint32_t tick(uint64_t now);
  // A running job whose stop was requested more than bound_ns before now
  // and that still has cores on it (a chunk that ignores stop): its slot,
  // with those cores in *cores; -1 if there is none. Tiles on the tensor
  // engines do not count (each is bounded by the engine).
  int stuck(uint64_t now, uint64_t bound_ns, uint32_t* cores) const;
  // An ended job whose event is not sent yet (slot index), or -1.
  int next_event(EndReport* out) const;
  void event_sent(int slot);
  // True when poll() has something to do now. events_blocked: the last
  // event could not be sent (response ring full); owed events then wait
  // for the next wake-up instead of keeping core 0 awake.
  bool service_work(bool device_active, bool events_blocked = false) const;

  // executors (any core)
  // One non-blocking step of core `core`'s executor loop. *wake: cores the
  // caller must wake now (core 0 after a step completed or a detach).
  ExecResult exec(uint32_t core, ChunkRunner& runner, uint32_t* wake);
  // True when exec(core) would make progress (checked with IRQs masked
  // before WFI, so a wake-up sent after it is not lost).
  bool exec_has_work(uint32_t core) const;
  static constexpr uint32_t kServiceCoreMask = 1u;

  // observers (core 0)
  const Job& job(uint32_t slot) const { return jobs_[slot]; }
  uint32_t executor_mask() const { return executors_; }
  uint32_t queued() const;
  uint32_t running() const;
  // True while a job of `owner` (Submit::owner) is queued or running: its
  // cores may still touch its buffers (the HBM pin, issue 15). A stopped
  // job is running until its last core has left it.
  [[nodiscard]] bool holds_owner(uint64_t owner) const;
  const Counters& counters() const { return counters_; }
  void count_rejected() { ++counters_.rejected; }
  // Slot -> chunks (tensor steps: tiles) done / total of its current step
  // (racy snapshot).
  void progress(uint32_t slot, uint32_t* done, uint32_t* total) const;
  // Per-core: the job slot it is serving (-1 if none) and chunks run.
  int core_slot(uint32_t core) const;
  uint64_t core_chunks(uint32_t core) const;
  // Bumped whenever a slot's visible state changes (table publishing).
  uint64_t generation() const { return generation_; }

 private:
  int pick_next() const;
  bool startable() const;
  int free_slot() const;
  uint32_t busy_cores() const;
  uint32_t start(int slot, uint32_t free, uint64_t now, BufferCheck& hbm);
  void begin_step(Job& j, uint64_t now);
  void drain_tensor();
  void feed_tensor(int slot);
  void tensor_progress(int slot, uint64_t now);
  uint32_t engine_load(uint32_t e) const;
  void end(int slot, uint32_t state, uint64_t now);
  void set_reason(Job& j, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  bool stop_job(Job& j, uint32_t code, uint64_t now);

  Job jobs_[kSlots];
  uint32_t executors_ = 0;
  uint64_t chunk_cost_ = kDefaultChunkCost;
  uint64_t seq_ = 0;
  uint32_t rr_client_ = 0;      // the client served last
  bool rr_valid_ = false;
  uint32_t token_gen_ = 0;
  uint64_t generation_ = 0;
  Counters counters_;
  TensorEngines* tensor_ = nullptr;
  uint32_t feed_rr_ = 0;  // the slot fed first rotates
  // Assignment tokens (core 0 writes) and what each executor last served
  // (the executor writes); separate lines per core.
  struct alignas(64) CoreLine {
    uint32_t token = 0;
    uint32_t served = 0;
    int32_t slot = -1;  // executor's current slot
    uint64_t chunks = 0;
  };
  CoreLine cores_[kMaxCores];
};

}  // namespace fw::jobs
