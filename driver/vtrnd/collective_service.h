// vtrnd's collective service: the CollectiveRequest of vtrn.api
// (proto/vtrn_api_jobs.proto), an all-reduce or all-gather over every chip
// of the board, run as one collective job per chip.
//
// Phases, each with one owner: vtrnd orders the chips in a ring of direct
// chip-to-chip links from the board topology (build_ring), allocates each
// chip's input and output buffers through the HBM service (owner
// (2<<32)|job id, like every job), DMAs the inputs in, then sends every
// chip its vtrn.ctrl.CollectiveSubmitRequest; the firmwares move the data
// over their link ports and each ends with a CollectiveEvent; vtrnd reads
// the outputs back, answers the client with a CRC-32 of each (and the bytes
// when asked and they fit a frame) and frees the buffers.
//
// It is not the job scheduler (JobService runs kernel jobs; collectives use
// the same JobBackend for HBM, DMA and control requests) and it does not
// check the numbers: the client holds the inputs and the reference. One
// collective runs at a time. Nothing the firmware sends is trusted: an
// event for another job, or from a chip outside the collective, is ignored.
// vtrnd keeps its own deadline (the collective's timeout plus a margin) so
// the request is answered even when a chip never reports.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "job_service.h"
#include "vtrn/board.h"
#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

// One rank of a ring: the chip and the link ports it sends and receives on.
struct RingMember {
  uint32_t chip = 0;
  uint32_t send_port = 0;  // towards the next rank
  uint32_t recv_port = 0;  // from the previous rank
};

// Orders `chips` in a ring where each chip has a direct link to the next
// (ports wired chip to chip, both ends on the board). kUnsupported when
// there is none (fewer than 2 chips, or a switched board: the switch does
// not forward).
Result<std::vector<RingMember>> build_ring(const std::vector<vtrn::board::Chip>& chips);

class CollectiveService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;

  // Apart from JobService's ids (from 1 up) and inside the HBM owner id range (2^28).
  static constexpr uint64_t kJobIdBase = 1ull << 27;
  static constexpr uint64_t kMaxBytes = 64ull << 20;
  static constexpr uint64_t kMaxReturnBytes = 3ull << 20;
  static constexpr uint32_t kHostMarginMs = 5'000;
  static constexpr uint32_t kDefaultTimeoutMs = 60'000;
  static constexpr uint32_t kDefaultStepTimeoutMs = 5'000;
  static constexpr uint64_t kDmaPiece = 1ull << 20;

  CollectiveService(EventLoop* loop, JobBackend* backend, std::vector<vtrn::board::Chip> chips,
                    std::string board_model, ReplyFn reply);
  ~CollectiveService();
  CollectiveService(const CollectiveService&) = delete;
  CollectiveService& operator=(const CollectiveService&) = delete;

  void run(uint64_t cid, uint64_t id, const Vtrn__Api__CollectiveRequest& r);
  void on_event(uint32_t chip, const Vtrn__Ctrl__Event& ev) override;
  void on_chip_down(uint32_t chip, const std::string& reason);
  // Not READY: on_chip_down with chip_down_reason().
  void on_chip_state(Chip& chip) override;
  void client_gone(uint64_t cid) override;

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;


 private:
  struct Rank {
    RingMember m;
    uint64_t job_id = 0;
    uint64_t in_addr = 0, out_addr = 0;
    bool submitted = false, ended = false;
    Vtrn__Types__JobState state = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED;
    std::string reason;
    uint64_t start_ns = 0, end_ns = 0, frames_rejected = 0;
    std::vector<uint8_t> input, output;
  };
  struct Run {
    uint64_t cid = 0, id = 0;
    bool client_here = true;
    Vtrn__Types__CollectiveOp op = VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_UNSPECIFIED;
    uint32_t collective_id = 0;
    uint64_t bytes = 0, out_bytes = 0;
    uint32_t timeout_ms = 0, step_timeout_ms = 0;
    bool return_outputs = false;
    std::vector<Rank> ranks;  // ring order
    uint32_t pending = 0;     // operations in flight in the current phase
    bool failed = false;
    std::string reason;
    uint64_t submit_ns = 0, all_ended_ns = 0;
    EventLoop::TimerId deadline = 0;
    enum class Phase { kStaging, kRunning, kReading, kFreeing } phase = Phase::kStaging;
  };

  void stage(Rank& r);
  void write_piece(Rank& r, uint64_t off);
  void staged_one();
  void submit_all();
  void rank_ended(Rank& r, Vtrn__Types__JobState st, const std::string& reason);
  void maybe_read();
  void read_piece(Rank& r, uint64_t off);
  void read_one();
  void finish();
  void reply_result(const Run& run);
  void fail_staging(const std::string& why);
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);

  EventLoop* loop_;
  JobBackend* backend_;
  std::vector<vtrn::board::Chip> chips_;
  std::string model_;
  ReplyFn reply_;
  std::unique_ptr<Run> run_;
  uint64_t next_job_ = kJobIdBase;
  uint32_t next_collective_ = 1;
};

}  // namespace drv
