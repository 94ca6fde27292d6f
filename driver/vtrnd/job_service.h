// vtrnd's job service: the JobSubmit / JobWait / JobList / JobShow /
// JobCancel requests of vtrn.api (proto/vtrn_api_jobs.proto).
//
// A job is a graph over named HBM buffers in three phases, each with a
// single owner: vtrnd stages it (allocates every buffer through the HBM
// service with owner (2<<32)|job id, DMAs the inputs in and zero-fills the
// rest, so no buffer shows an earlier owner's bytes), the firmware runs its
// kernel steps (one vtrn.ctrl.JobSubmitRequest; it answers QUEUED and later
// sends JobEvents), and vtrnd reads the outputs back. The buffers are freed
// with one free_owner however the job ends, but only once no DMA or
// allocation of the job is still in flight (a late write into memory that
// already belongs to someone else would be worse than holding it a little
// longer).
//
// The service is a state machine on vtrnd's loop, with no I/O of its own:
// everything it needs from the chip (readiness, HBM, DMA, control requests)
// goes through JobBackend, so unit tests drive it with a fake chip. It trusts
// nothing the firmware writes back: a JobEvent for a job id it does not know,
// for a job on another chip, in a state the job cannot move to, or with
// times that run backwards is logged and ignored (or its times dropped).
//
// Timeouts: the firmware gets what is left of the job's timeout after
// staging and enforces it on the cores; vtrnd also keeps its own deadline
// (the same timeout plus kHostMarginMs) so a job still ends, TIMED_OUT,
// when the firmware never reports. A chip that leaves READY (reset, QEMU
// gone) ends its jobs FAILED with the reason; a client that disconnects has
// its jobs cancelled with reason "client_gone" unless they were submitted
// detached.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fw_call.h"
#include "vtrn/proto_names.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

class ProtoArena;  // job_service.cpp: owns what a reply under construction points at

// What the job service needs from the rest of vtrnd, per chip id. Every
// callback runs later on the loop thread (never inside the call), exactly
// once.
class JobBackend {
 public:
  using Done = std::function<void(const Error& error)>;
  using AllocDone = std::function<void(Result<uint64_t> addr)>;
  using ReadDone = std::function<void(Result<std::vector<uint8_t>> data)>;
  virtual ~JobBackend() = default;

  // Success when the chip exists and is READY; otherwise kNoSuchChip or
  // kNotReady with one line of detail.
  virtual Error chip_check(uint32_t chip) = 0;
  virtual uint32_t neuron_cores(uint32_t chip) = 0;
  virtual uint64_t hbm_bytes(uint32_t chip) = 0;
  virtual void hbm_alloc(uint32_t chip, uint64_t owner, uint64_t bytes, AllocDone done) = 0;
  // kBusy: the firmware keeps the memory pinned because a job of this
  // owner has not ended on the chip yet (nothing freed; issue 15).
  using FreeDone = std::function<void(const Error& error)>;
  virtual void hbm_free_owner(uint32_t chip, uint64_t owner, FreeDone done) = 0;
  // Copies `data` before returning.
  virtual void dma_write(uint32_t chip, uint64_t addr, const uint8_t* data, size_t len, Done done) = 0;
  virtual void dma_read(uint32_t chip, uint64_t addr, uint64_t len, ReadDone done) = 0;
  virtual void ctrl(uint32_t chip, const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, CtrlDone done) = 0;
  // One chip as a port of fw_call (fw_call.h), over ctrl().
  struct Port {
    JobBackend* backend;
    uint32_t chip;
    [[nodiscard]] uint32_t id() const { return chip; }
    void submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool, CtrlDone done) {
      backend->ctrl(chip, req, timeout_ms, std::move(done));
    }
  };
  [[nodiscard]] Port port(uint32_t chip) { return Port{this, chip}; }
  // The job's state in the firmware's job table (vtrn.ctrl.JobState
  // numbers; 0 when the table does not show it). The firmware reports only
  // the end of a job as an event; the table is how vtrnd sees it start.
  virtual uint32_t chip_job_state(uint32_t chip, uint64_t job_id) = 0;
  // Busy share of each NeuronCore since the previous call (telemetry);
  // empty when the chip does not report it.
  virtual std::vector<double> core_utilization(uint32_t chip) {
    (void)chip;
    return {};
  }
};

struct JobServiceOptions {
  uint32_t default_timeout_ms = 60'000;
  uint32_t host_margin_ms = 2'000;   // vtrnd's deadline beyond the firmware's
  uint32_t ctrl_timeout_ms = 5'000;  // one JobSubmit / JobCancel control request
  uint32_t dma_piece_bytes = 2u << 20;
  // A client connection's tenant (uid) and whether it is the admin. A job
  // belongs to its submitter's tenant (kept with the job, so a detached job
  // stays its tenant's): only that tenant and the admin wait on, show,
  // cancel or list it. Unset: every client is one tenant.
  std::function<uint32_t(uint64_t cid)> tenant_of;
  std::function<bool(uint64_t cid)> is_admin;
};

// Submit-to-end latency of every job that ended since vtrnd started, as a
// cumulative histogram (the exporter's vtrn_job_latency_seconds): counts[i]
// holds the jobs that took at most kBoundsNs[i], the last one every job.
struct JobLatencyHistogram {
  static constexpr uint64_t kBoundsNs[] = {
      1'000'000,     2'500'000,     5'000'000,      10'000'000,     25'000'000,
      50'000'000,    100'000'000,   250'000'000,    500'000'000,    1'000'000'000,
      2'500'000'000, 5'000'000'000, 10'000'000'000, 30'000'000'000, 60'000'000'000};
  static constexpr size_t kBuckets = sizeof kBoundsNs / sizeof kBoundsNs[0];
  uint64_t counts[kBuckets] = {};
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  void add(uint64_t ns) {
    for (size_t i = 0; i < kBuckets; ++i) counts[i] += ns <= kBoundsNs[i] ? 1 : 0;
    ++count;
    sum_ns += ns;
  }
};

// Per-chip figures for Telemetry.
struct JobCounters {
  uint64_t submitted = 0, done = 0, failed = 0, cancelled = 0, timed_out = 0, rejected = 0;
  uint32_t staging = 0, queued = 0, running = 0;
  uint64_t p50_ns = 0, p90_ns = 0, p99_ns = 0;
  JobLatencyHistogram latency;
};

class JobService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;

  static constexpr uint32_t kMaxBuffers = 32;
  static constexpr uint32_t kMaxSteps = 16;
  static constexpr uint32_t kMaxPriority = 7;
  static constexpr uint32_t kMaxTimeoutMs = 600'000;
  static constexpr uint32_t kMaxNameChars = 64;
  static constexpr uint32_t kMaxDim = 1u << 16;       // m, n, k each
  static constexpr uint64_t kMaxOutputBytes = (4u << 20) - (128u << 10);  // answer fits a frame
  static constexpr size_t kHistory = 256;             // ended jobs kept for list/show
  static constexpr size_t kLatencyWindow = 1024;      // latencies kept per chip for percentiles
  static constexpr uint64_t kBufferAlign = 4096;

  JobService(EventLoop* loop, JobBackend* backend, JobServiceOptions opts, ReplyFn reply);
  ~JobService();
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  void submit(uint64_t cid, uint64_t id, const Vtrn__Api__JobSubmitRequest& r);
  void wait(uint64_t cid, uint64_t id, const Vtrn__Api__JobWaitRequest& r);
  void list(uint64_t cid, uint64_t id, const Vtrn__Api__JobListRequest& r);
  void show(uint64_t cid, uint64_t id, const Vtrn__Api__JobShowRequest& r);
  void cancel(uint64_t cid, uint64_t id, const Vtrn__Api__JobCancelRequest& r);

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;

  // A firmware event of `chip` (any kind; JobEvents are taken, the rest
  // ignored).
  void on_event(uint32_t chip, const Vtrn__Ctrl__Event& ev) override;
  // Not READY: on_chip_down with chip_down_reason().
  void on_chip_state(Chip& chip) override;
  // The job counters and NeuronCore utilization of the chip.
  void fill_telemetry(Chip& chip, Vtrn__Api__Telemetry& t, ProtoArena& a) override;
  // The chip left READY or came back from a reset: every job it held ends
  // FAILED with `reason`.
  void on_chip_down(uint32_t chip, const std::string& reason);
  // The client disconnected: its waits are dropped, its jobs that are not
  // detached are cancelled (reason "client_gone").
  void client_gone(uint64_t cid) override;

  [[nodiscard]] JobCounters counters(uint32_t chip) const;
  // The tenant (uid) that submitted job `job_id` (its buffers' tenant);
  // kNoTenant when no such job is known or tenant_of is unset.
  static constexpr uint32_t kNoTenant = UINT32_MAX;
  [[nodiscard]] uint32_t job_tenant(uint64_t job_id) const;
  // Jobs still holding buffers or waiting on an operation (tests: must reach
  // zero once everything has ended).
  [[nodiscard]] size_t live_jobs() const { return jobs_.size(); }
  // Jobs ended here whose buffers the firmware still pins: they stay in
  // the table until the chip ends them or goes down.
  [[nodiscard]] size_t pinned_jobs() const;

  // The validation a submit gets, without a backend (unit tests, and the
  // error texts the CLI shows): success when valid, else kInvalidArgument
  // (kOutOfRange for a step's dimension) with one line naming the field.
  static Error validate(const Vtrn__Api__JobSubmitRequest& r, uint32_t neuron_cores, uint64_t hbm_bytes);
  // Bytes each operand of a step needs, or the error when the shape is
  // invalid (zero or oversized dimension, k not a multiple of 32 for mxfp4).
  struct OperandBytes {
    uint64_t a = 0, a_scales = 0, b = 0, b_scales = 0, out = 0;
  };
  // On an error, *field (when given) is the step field that is wrong.
  static Result<OperandBytes> operand_bytes(const Vtrn__Api__JobStep& s, const char** field = nullptr);

 private:
  enum class Phase { kStaging, kSubmitting, kChipQueued, kChipRunning, kReading, kEnded };
  enum class WaitKind { kSubmit, kWait, kCancel };
  struct Waiter {
    uint64_t cid = 0, id = 0;
    WaitKind kind = WaitKind::kWait;
    EventLoop::TimerId timer = 0;
  };
  struct Buffer {
    std::string name;
    uint64_t bytes = 0;
    std::vector<uint8_t> data;
    bool output = false;
    bool allocated = false;
    uint64_t addr = 0;
  };
  struct Step {
    Vtrn__Types__JobKernel kernel = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED;
    Vtrn__Types__JobDType dtype = VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32;
    uint32_t m = 0, n = 0, k = 0;
    int a = -1, a_scales = -1, b = -1, b_scales = -1, out = -1;  // buffer indexes
  };
  struct Job {
    uint64_t id = 0;
    uint32_t chip = 0;
    uint64_t cid = 0;
    uint32_t tenant = kNoTenant;  // the submitter's uid (tenant_of at submit)
    std::string name;
    uint32_t priority = 0, timeout_ms = 0, max_cores = 0;
    bool detached = false;
    std::vector<Buffer> buffers;
    std::vector<Step> steps;
    Phase phase = Phase::kStaging;
    Vtrn__Types__JobState state = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED;
    std::string reason;
    int32_t failed_step = -1;
    // Set while staging or reading when a cancel, timeout or reset arrives:
    // the job ends when the operation in flight returns.
    bool stop_pending = false;
    Vtrn__Types__JobState stop_state = VTRN__TYPES__JOB_STATE__JOB_STATE_CANCELLED;
    std::string stop_reason;
    bool cancel_sent = false;     // JobCancel went to the firmware
    uint32_t ops_in_flight = 0;   // allocations, DMAs, control requests
    bool any_alloc = false;       // free_owner needed at the end
    bool released = false;        // free_owner issued
    // The firmware refused the free (STATUS_BUSY): the job ended here but
    // still runs on the chip. Released again on its JobEvent or when the
    // chip goes down; until then the job stays in the table.
    bool hbm_pinned = false;
    bool chip_ended = false;      // its end event came after it ended here
    size_t next_buffer = 0;       // staging cursor
    uint64_t piece = 0;           // DMA piece cursor within buffers[next_buffer]
    std::vector<std::pair<std::string, std::vector<uint8_t>>> outputs;
    uint64_t submit_ns = 0, staged_ns = 0, chip_end_ns = 0, end_ns = 0;
    uint64_t read_start_ns = 0;
    uint64_t chip_queued_ns = 0, chip_start_ns = 0, chip_stop_ns = 0;
    uint32_t cores_used = 0;
    uint64_t flops = 0;
    int engine = 0;               // Vtrn__Types__JobEngine: as asked, then as the chip ran it
    uint32_t engines_used = 0;
    uint64_t modeled_ns = 0;      // the chip's modeled time
    uint64_t engine_wall_ns = 0;
    EventLoop::TimerId deadline = 0;
    bool deadline_margin = false;  // the first deadline passed; waiting out the margin
    std::vector<Waiter> waiters;
  };
  struct ChipJobs {
    JobCounters c;
    std::deque<uint64_t> latencies;
  };

  Job* find(uint64_t id);
  // QUEUED on the chip -> RUNNING once the firmware's job table shows a core
  // on it (looked up when someone asks about the job).
  void refresh(Job& j);
  const Job* find_any(uint64_t id) const;  // active or in history
  // Whether client `cid` may wait on, show, cancel or list job j: its
  // tenant or the admin.
  [[nodiscard]] bool may_see(uint64_t cid, const Job& j) const;
  // find_any(id) for client `cid`: nullptr after answering BAD_REQUEST (no
  // such job) or PERMISSION_DENIED (another tenant's), naming the job.
  const Job* find_for(uint64_t cid, uint64_t id, uint64_t job_id, const char* what);
  void stage_next(Job& j);
  void submit_to_chip(Job& j);
  void read_next(Job& j);
  void on_job_event(uint32_t chip, const Vtrn__Ctrl__JobEvent& ev);
  void on_deadline(uint64_t id);
  // Ends the job now (phase kEnded), answers its waiters and frees its
  // buffers once nothing is in flight.
  void end(Job& j, Vtrn__Types__JobState st, const std::string& reason);
  // Stop a job in whatever phase: immediately when nothing of ours is in
  // flight, else when the operation returns; on the chip through JobCancel.
  void stop(Job& j, Vtrn__Types__JobState st, const std::string& reason);
  // Best-effort JobCancel for a job that already ended on the host; its
  // buffers are freed once the answer (or the control timeout) is back.
  void cancel_on_chip(Job& j);
  void op_returned(Job& j);  // after ops_in_flight-- : finishes a pending stop or release
  void release(Job& j);
  void retire(uint64_t id);  // moves an ended, released job into history
  void answer(Job& j, const Waiter& w);
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);
  Vtrn__Api__JobInfo* make_info(const Job& j, ProtoArena& a) const;
  ChipJobs& chip_stats(uint32_t chip) { return stats_[chip]; }

  EventLoop* loop_;
  JobBackend* backend_;
  JobServiceOptions opts_;
  ReplyFn reply_;
  std::map<uint64_t, std::unique_ptr<Job>> jobs_;  // not yet retired
  std::deque<std::unique_ptr<Job>> history_;       // retired, newest last
  std::map<uint32_t, ChipJobs> stats_;
  uint64_t next_id_ = 1;
  bool destroying_ = false;
};


}  // namespace drv
