// vtrnd's DMA service: the DmaWrite / DmaRead / DmaCopy / DmaBench /
// DmaStats / DmaReset requests of vtrn.api, run on each chip's DmaEngine.
//
// Every request becomes a job in its client's FIFO; jobs are cut into chunks
// (kChunkBytes of a transfer, one staging buffer in the host window each; a
// batch of descriptors for a benchmark) and DmaScheduler hands chunks out
// round-robin across clients, so one client's large transfer or benchmark
// delays another client's small one by at most one chunk per active client
// beyond what is already in flight (8 chunks per transfer, `depth` per bench
// queue).
//
// It never blocks the event loop: chunks are submitted when picked, and
// completions are reaped when the chip rings kVectorDma (Chip::on_dma_event)
// and on a 1 ms timer that runs while any job exists (doorbells are only
// hints and the firmware rings only for IRQ-flagged chains). When a chunk
// cannot go out (ring full, window full, queue resetting) it goes back to the
// scheduler and is retried on the next completion or tick.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vtrn/drv/chip.h"
#include "vtrn/drv/dma_engine.h"
#include "vtrn/drv/dma_scheduler.h"
#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/reservoir.h"
#include "vtrn_api.pb-c.h"

namespace drv {

struct DmaServiceOptions {
  bool allow_raw = false;          // accept DmaCopy.raw (hostile-input tests)
  uint32_t chunk_bytes = 256 * 1024;
  // The tenant (uid) of a client connection; queued-work caps are per
  // tenant across its connections. Unset: each connection is its own.
  std::function<uint32_t(uint64_t cid)> tenant_of;
  // Per tenant, across chips: requests queued or running, and the host
  // bytes they hold (DmaWrite data, DmaRead results, bench buffers).
  // Past either, a request is answered STATUS_BUSY before anything is
  // allocated for it. The byte cap is a connection's unread-output limit
  // (16 MiB, server.cpp): the answers of everything a tenant may have
  // queued fit it, so a client that pipelines reads gets BUSY, not dropped.
  // Tenants reach only their own HBM, and hold it while they use it. Asked
  // for every HBM range of a client's write, read, copy and bench span,
  // never for a service's transfers (a job's buffers): a claim id (0:
  // nothing held) when client `cid` may DMA [addr, addr + len) of `chip`,
  // else the refusal (answered PERMISSION_DENIED before anything is
  // queued). `what` names the side ("DMA write to", ...). What a claim
  // holds cannot be freed until hbm_release(chip, claim), which runs when
  // the request's job ends (answered, failed, or drained after its client
  // left). Unset: no check, nothing held.
  std::function<Result<uint64_t>(uint64_t cid, Chip* chip, uint64_t addr, uint64_t len, const std::string& what)>
      hbm_claim;
  std::function<void(Chip* chip, uint64_t claim)> hbm_release;
  uint32_t max_queued_requests = 256;
  uint64_t max_queued_bytes = 16ull << 20;
};

class DmaService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;

  static constexpr uint32_t kMaxReadBytes = (4u << 20) - (64u << 10);
  static constexpr uint32_t kMaxBenchMs = 600'000;
  // Per bench: a 512 KiB sample (cache resident; p99 of 64 Ki uniform
  // samples is within ~0.05 percentile points), the maximum kept exactly.
  static constexpr size_t kLatencySamples = size_t(1) << 16;
  static constexpr uint64_t kTickNs = 1'000'000;
  static constexpr uint64_t kResetTimeoutNs = 2'000'000'000;

  DmaService(EventLoop* loop, DmaServiceOptions opts, ReplyFn reply);
  ~DmaService();
  DmaService(const DmaService&) = delete;
  DmaService& operator=(const DmaService&) = delete;

  // Registers a chip (sets its on_dma_event).
  void add_chip(Chip* chip);

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;

  void write(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaWriteRequest& r);
  void read(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaReadRequest& r);
  void copy(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaCopyRequest& r);
  void bench(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaBenchRequest& r);
  void stats(uint64_t cid, uint64_t id, Chip* chip);
  void reset(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaResetRequest& r);
  void inject(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaInjectRequest& r);
  // The client disconnected: its queued work is dropped, chunks in flight
  // drain silently.
  void client_gone(uint64_t cid) override;

  // The typed API of other services (the job service's buffers): the same
  // checks, chunking and round-robin share as a client's DmaWrite / DmaRead,
  // each transfer under an owner id of its own that no client connection
  // has. `done` runs once, possibly before the call returns (chip not
  // READY, range outside HBM); a read's data comes with a success, a
  // write's success holds no bytes.
  using TransferDone = std::function<void(Result<std::vector<uint8_t>> data)>;
  void write(Chip* chip, uint64_t hbm_addr, const uint8_t* data, size_t len, TransferDone done);
  void read(Chip* chip, uint64_t hbm_addr, uint32_t len, TransferDone done);

 private:
  enum class Kind { kWrite, kRead, kCopy, kBench };
  // Who a transfer answers: a client request (cid, id) or a service (done).
  struct Origin {
    uint64_t cid = 0, id = 0;
    TransferDone done;
  };
  using Refuse = std::function<void(const Error&)>;
  // Owner ids of the typed API: above any connection id the daemon hands out.
  static constexpr uint64_t kInternalOwnerBase = 1ull << 62;
  // What became of a chunk handed to issue(): submitted, or no room now
  // (ring or window full, queue resetting: the scheduler gets it back and
  // it is retried). A chunk that can never go out is an error instead.
  enum class Issue { kIssued, kNoRoom };

  struct Job {
    Kind kind = Kind::kWrite;
    uint64_t id = 0, cid = 0, req_id = 0;
    // Charged to a client tenant's caps (client requests only), released
    // when the job ends.
    bool charged = false;
    uint64_t tenant = 0;  // uid, or 2^32 + cid without tenant_of
    uint64_t charged_bytes = 0;
    std::vector<uint64_t> claims;  // HBM held for a client's request (hbm_claim)
    uint64_t t0 = 0;
    bool orphan = false;
    uint32_t chunks_in_flight = 0;
    // Write / read.
    uint64_t hbm_addr = 0;
    uint64_t length = 0;
    uint64_t chunks = 0;
    std::vector<uint8_t> data;
    // Copy.
    std::vector<DmaSegment> segs;
    std::vector<vtrn::dma::Descriptor> raw_descs;
    bool raw = false;
    int32_t queue = -1;
    uint32_t completions = 0;
    DmaResult result;
    uint32_t used_queue = 0;
    // Bench.
    Vtrn__Api__DmaDirection dir = VTRN__API__DMA_DIRECTION__DMA_DIR_H2D;
    uint32_t transfer = 0, depth = 0, queues = 1, batch = 1;
    uint64_t slots = 1;  // HBM slots of `transfer` bytes the bench cycles through
    uint64_t hbm_base = 0;  // the HBM span the bench cycles through
    uint64_t hbm_span = 0;
    DmaBuffer buf;
    bool has_buf = false;
    EventLoop::TimerId timer = 0;
    Reservoir latencies{kLatencySamples};  // a uniform sample of per-descriptor latencies
    uint64_t lat_max = 0;
    uint64_t descs_done = 0, bytes_done = 0, errors = 0, t_first = 0, t_last = 0;
    // Outcome.
    TransferDone done;  // a service's transfer: answered here, not to a client
    uint32_t first_status = vtrn::dma::kOk;
    Error error;  // the job's first failure; success until one
  };
  struct Chunk {
    uint64_t job = 0;
    uint64_t index = 0;
    DmaBuffer buf;
    bool has_buf = false;
    uint32_t left = 0;       // results still expected
    uint64_t offset = 0;     // into the job's data
    uint32_t length = 0;
    uint64_t wait_handle = 0;  // raw copy: the handle whose result is the answer
  };
  struct ResetWaiter {
    uint64_t cid = 0, id = 0, deadline = 0;
    std::vector<uint32_t> queues;
  };
  struct ChipDma {
    Chip* chip = nullptr;
    DmaScheduler sched;
    std::map<uint64_t, std::unique_ptr<Job>> jobs;
    std::map<uint64_t, Chunk> chunks;
    // A chunk's handles are consecutive (one submit call), so chunks are
    // found by range: last handle -> {first handle, chunk id}. One entry per
    // chunk, not per descriptor, keeps a 64 B benchmark's bookkeeping cheap.
    struct HandleRange {
      uint64_t first = 0;
      uint64_t chunk = 0;
    };
    std::map<uint64_t, HandleRange> by_handle;
    std::vector<ResetWaiter> resets;
    EventLoop::TimerId tick = 0;
    uint32_t next_queue = 0;
    uint64_t next_chunk = 1;
  };

  struct TenantLoad {
    uint32_t requests = 0;
    uint64_t bytes = 0;
  };
  // Charges a client request of `bytes` host bytes to its tenant, or
  // answers STATUS_BUSY and returns false.
  bool charge(uint64_t cid, uint64_t id, Job& j, uint64_t bytes);
  void uncharge(Job& j);
  // Claims [addr, addr + len) of `chip` for client request `j`, or answers
  // PERMISSION_DENIED, lets go of what `j` already claimed and returns false.
  bool claim(Chip* chip, uint64_t cid, uint64_t id, Job& j, uint64_t addr, uint64_t len, const std::string& what);
  void release_claims(Chip* chip, Job& j);

  ChipDma* ready_chip(uint64_t cid, uint64_t id, Chip* chip);
  ChipDma* ready_chip(Chip* chip, const Refuse& refuse);
  void start_transfer(Origin from, Kind kind, Chip* chip, uint64_t hbm_addr, const uint8_t* data, uint64_t len);
  void start_job(ChipDma& cd, std::unique_ptr<Job> job, uint64_t chunks, uint32_t max_inflight);
  void on_event(ChipDma& cd);
  void pump(ChipDma& cd);
  // Submits chunk `index` of job `j`; kChipError when its queue (or every
  // queue) is broken or the submit fails for good.
  Result<Issue> issue(ChipDma& cd, Job& j, uint64_t index);
  // The next queue in round robin with `needed` free slots; none while the
  // usable ones are full or resetting; kChipError when every queue is broken.
  Result<std::optional<uint32_t>> pick_queue(ChipDma& cd, uint32_t needed);
  // Handles the leading results of rs[0..n) that belong to one chunk (at
  // least one result); returns how many it consumed. One lookup per chunk
  // instead of per result: results arrive in completion order, so a
  // benchmark batch's results are adjacent.
  size_t on_results(ChipDma& cd, const DmaResult* rs, size_t n);
  void chunk_finished(ChipDma& cd, uint64_t chunk_id);
  // Ends job `j` with `why` (unless it failed already) once its chunks in
  // flight are back.
  void fail_job(ChipDma& cd, Job& j, const Error& why);
  void finish_job(ChipDma& cd, uint64_t job_id);
  void answer(Job& j);
  void check_resets(ChipDma& cd);
  void schedule_tick(ChipDma& cd);
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);

  EventLoop* loop_;
  DmaServiceOptions opts_;
  ReplyFn reply_;
  std::map<Chip*, std::unique_ptr<ChipDma>> chips_;
  std::map<uint64_t, TenantLoad> load_;
  uint64_t next_job_ = 1;
  std::vector<DmaResult> results_scratch_;  // on_event's, kept between turns
  uint64_t next_internal_ = kInternalOwnerBase;
};

}  // namespace drv
