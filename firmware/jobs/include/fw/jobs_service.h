// fw::jobs::JobsService: the chip's job service, the firmware glue around
// the portable scheduler (fw/job_sched.h) and job model (fw/job_model.h).
//
// Core 0 is the service core: it serves JobSubmit/JobCancel from the
// control queue, validates against the HBM allocator (fw::hbm::check),
// dispatches, advances steps, enforces timeouts (every turn, at the latest
// on the telemetry tick), sends exactly one JobEvent per accepted job into
// the response ring, and mirrors the table into BAR2 (kRegionJobs,
// include/vtrn/jobs_abi.h, one seqlocked record each). Cores 1..N-1 are
// executors (fw::smp starts them at executor_main): they run kernel chunks
// and sleep in WFI when there is nothing to claim. Core 0 executes chunks
// itself only when it is the chip's only core (a 1-core board, or no
// secondary came up), one chunk per event-loop turn so the control queue
// and DMA stay served between chunks; with secondaries it stays a pure
// service core, so control latency never waits on a kernel.
//
// GEMM steps run on the chip's tensor engines (fw::engines' region,
// hal::tensor, one per NeuronCore) when the job's engine resolves to
// tensor (the default when the engines advertise kCapTensorGemm); core 0
// feeds their tiles and sleeps in WFI until their completion interrupts
// (fw/job_sched.h). `engine: cores` keeps the on-core kernels.
//
// Not the DMA part of a job: vtrnd moves inputs in and outputs out around
// the kernel steps; the firmware only runs kernels over HBM buffers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/job_model.h"
#include "fw/job_sched.h"
#include "fw/service.h"
#include "hal/tensor.h"
#include "vtrn/hostif.h"
#include "vtrn/jobs_abi.h"
#include "vtrn/kernels.h"
#include "vtrn/seqlock.h"
#include "vtrn_ctrl.pb-c.h"

namespace hal::gic {
class Gic;
}

namespace fw::jobs {

class JobsService final : public Service {
 public:
  constexpr JobsService() : Service("jobs") {}
  [[nodiscard]] std::span<const Route> routes() const override;

  // Boot, after every mapping the executors use: sets up fw::cores, the
  // scheduler and the BAR2 table. The secondary cores are started through
  // fw::smp on poll()'s first call, after READY, without waiting for them
  // (each becomes an executor when poll() sees it online).
  void init(const Boot& boot) override;
  // Advances jobs, starts queued ones, sends end events (a full ring keeps
  // an event for the next turn); on a one-core chip, then runs one chunk.
  Vectors poll(Turn& turn) override;
  // Timeouts, the stuck bound (a job whose cores are still on it kStuckNs
  // after its stop panics the chip, kPanicJobStuck), progress and per-core
  // rows of the BAR2 table.
  void tick(Turn& turn) override;
  [[nodiscard]] bool has_work() override;
  // Jobs queued or running (their timeouts and progress are ticked).
  [[nodiscard]] bool busy() const override;
  void fill_telemetry(vtrn::hostif::Telemetry* t) const override;

  vtrn::Error submit(const Vtrn__Ctrl__JobSubmitRequest& r, Vtrn__Ctrl__JobSubmitResponse& out,
                     Call& c);
  vtrn::Error cancel(const Vtrn__Ctrl__JobCancelRequest& r, Vtrn__Ctrl__JobCancelResponse& out,
                     Call& c);

  // The loop of executor core `core`, never returns.
  [[noreturn]] void executor(uint32_t core);

  // Fault injection (fw::reliability, RELIABILITY_FAULT_JOB_STUCK): the
  // next chunk an executor core other than core 0 runs never returns and
  // ignores stop, so once that job's stop is requested (cancel, timeout)
  // the stuck bound panics the chip (kPanicJobStuck). False on a chip with
  // no executor besides core 0 (nothing would run the chunk).
  bool arm_stuck();

 private:
  class HbmCheck final : public BufferCheck {
    Access do_check(uint64_t addr, uint64_t bytes, uint64_t owner) override;
  };
  class KernelRunner final : public ChunkRunner {
    void do_run(uint32_t core, const Step& s, uint32_t b, uint32_t e) override;
  };
  class HalTensor final : public TensorEngines {
   public:
    hal::tensor::TensorEngine engine[kMaxEngines];
    uint32_t n = 0;

   private:
    uint32_t do_count() const override { return n; }
    bool do_submit(uint32_t e, const vtrn::engine::TensorCommand& c) override;
    void do_ring(uint32_t e) override;
    Poll do_poll(uint32_t e, vtrn::engine::TensorCompletion* out, uint32_t* error) override;
    bool do_pending(uint32_t e) const override;
  };

  void wake(uint32_t mask);
  void start_cores();
  void collect_cores();
  void init_table(uint8_t* bar2, uint64_t bar2_size);
  void publish_job(uint32_t slot);
  void publish_header();
  void publish_cores();
  void publish_changes(bool all);
  void run_on_service_core();
  void init_tensor();
  struct EngineTotals {
    uint64_t busy_ns = 0, modeled_ns = 0;
  };
  void tensor_totals(EngineTotals* out) const;
  void watch_tensor(uint64_t now);
  void check_stuck(uint64_t now);

  Scheduler sched_;
  HbmCheck hbm_;
  KernelRunner runner_;
  HalTensor tensor_;
  uint32_t tensor_heartbeat_ = 0;     // the engines' heartbeat when it last moved
  uint64_t tensor_heartbeat_ns_ = 0;  // and when
  Submit submit_;               // 1 KiB+: kept off the stack; core 0 only
  uint32_t ready_ = 0;          // executors start serving once init is done
  uint32_t cores_online_ = 1;
  bool cores_started_ = false;
  bool events_blocked_ = false;  // the response ring was full on the last try
  const platform::Platform* platform_ = nullptr;
  hal::gic::Gic* gic_ = nullptr;
  bool all_reported_ = false;
  bool core0_executes_ = false;
  uint32_t stuck_armed_ = 0;  // atomic: arm_stuck() sets it, the stuck chunk takes it
  // The BAR2 job table: one seqlock writer per record.
  vtrn::hostif::SeqlockWriter<vtrn::jobs::JobTableHeader> table_;
  vtrn::hostif::SeqlockWriter<vtrn::jobs::CoreEntry> core_rows_[vtrn::jobs::kJobCoreCount];
  vtrn::hostif::SeqlockWriter<vtrn::jobs::JobEntry> rows_[kSlots];
  uint32_t executor_mask_ = 0;  // as published in the header
  uint64_t row_job_[kSlots] = {};  // job id last published per slot
  uint32_t last_state_[kSlots] = {};
  uint64_t published_gen_ = 0;
};

JobsService& service();

// Entry of executor cores (fw::smp), never returns.
[[noreturn]] void executor_main(uint32_t core);

}  // namespace fw::jobs
