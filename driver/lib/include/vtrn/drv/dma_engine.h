// The host side of a chip's DMA (include/vtrn/dma_abi.h): one HostQueue per
// queue of the BAR2 DMA region, a buffer allocator over the host DMA window,
// chain validation, batched submission, completion tracking by cookie, and
// polling or blocking waits. vtrnd owns one per chip; tests and benchmarks
// can drive a chip in-process with it too.
//
// It is not a scheduler: fairness between clients is vtrnd's business
// (dma_scheduler.h). It does no I/O of its own beyond the two hooks it is
// given: `ring_chip` (host -> chip doorbell on hostif::kVectorDma, called once
// per submit batch, or once per hold_doorbell() span) and `irq_fd` (the
// eventfd the chip's kVectorDma doorbell lands on; blocking waits sleep in
// poll(2) on it).
//
// Nothing the device writes is trusted. Every completion's cookie must name
// a chain in flight on that very queue: a cookie this side never handed out,
// or one whose chain already completed, is a device error. So is a
// completion index that jumps or runs backwards (vtrn::dma::HostQueue), and
// so is the device latching QueueControl::error. Any of these latches the
// queue (fault()): it stops reaping and submitting, every chain in flight
// on it completes locally with kErrQueueBroken, and only reset() revives it.
// The other queues keep working.
//
// Cookies (= handles): (queue << 56) | sequence, the sequence counting up per
// queue from 1 and never reused, resets included; every descriptor of a
// chain carries its chain's cookie, since the device echoes the LAST one's.
//
// Threading model: after attach(), every public method may be called from
// any number of threads at once. Each queue has its own mutex (submit, reap,
// results, reset of that queue); the buffer allocator has another. Blocking
// waits elect one leader that sleeps on irq_fd, reaps every queue when it
// wakes and wakes the other waiters (condition variable); the others wait on
// the condition variable. Waits re-check at least every kWaitSliceNs, so a
// doorbell that never comes (a chain without kDescIrq, IRQs disarmed, a
// coalesced eventfd) costs latency, never a hang. attach() and detach() must
// not race with anything else.
//
// Results are kept until someone collects them: wait()/try_take() take one
// handle's result; collect() takes all of them (the event-loop model vtrnd
// uses). Use one model per engine.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "vtrn/dma_abi.h"
#include "vtrn/dma_host.h"
#include "vtrn/drv/error.h"
#include "vtrn/drv/handle_fifo.h"
#include "vtrn/hbm.h"
#include "vtrn/layout.h"

namespace drv {

// What a DmaEngine call can answer. Closed list.
enum class DmaError : uint32_t {
  kOk = 0,
  kNotAttached = 1,   // no DMA region (firmware without kCapDma, or detached)
  kBadQueue = 2,      // queue index >= queue_count()
  kInvalidChain = 3,  // host-side validation refused a chain (*bad tells which, and why)
  kQueueFull = 4,     // not enough free submission slots for the whole batch
  kQueueBroken = 5,   // the queue is latched (fault()); reset() it
  kResetting = 6,     // a reset is in progress on the queue
  kNoMemory = 7,      // no window buffer of that size is free
  kTimeout = 8,       // wait() deadline passed; the chain is still in flight
  kUnknownHandle = 9, // not in flight and no uncollected result
  kBadArgument = 10,  // empty batch, bad buffer, zero size
};
const char* dma_error_name(DmaError e);
// Name of a vtrn::dma::Status value ("ok", "src out of range", ...).
const char* dma_status_name(uint32_t status);

// Why a queue latched. Closed list.
enum class DmaFault : uint32_t {
  kNone = 0,
  kUnknownCookie = 1,        // completion for a cookie never handed out on this queue
  kDuplicateCompletion = 2,  // second completion for a chain already completed
  kCqIndexJump = 3,          // HostQueue: cq_prod more than depth ahead
  kCqIndexBackward = 4,      // HostQueue: cq_prod moved backwards
  kTooManyCompletions = 5,   // HostQueue: more completions than descriptors
  kSqConsumerAhead = 6,      // HostQueue: sq_cons beyond what we produced
  kDeviceLatched = 7,        // the device latched QueueControl::error (device_error says why)
};
const char* dma_fault_name(DmaFault f);

// One descriptor of a chain, before cookies and chain flags are added.
struct DmaSegment {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint32_t length = 0;
  bool src_host = false;  // src is a host-window offset (else an HBM address)
  bool dst_host = false;
};

// One chain = one request = one completion.
struct DmaChain {
  const DmaSegment* segs = nullptr;
  uint32_t count = 0;
  bool irq = true;     // kDescIrq on the LAST descriptor: needed for a blocking wait to wake early
  bool fence = false;  // kDescFence on the FIRST descriptor
};

// Which chain of a batch host-side validation refused, and the status the
// device would have completed it with.
struct DmaInvalid {
  uint32_t chain = 0;
  uint32_t segment = 0;
  uint32_t status = vtrn::dma::kOk;
};

struct DmaResult {
  uint64_t handle = 0;
  uint32_t status = vtrn::dma::kOk;  // vtrn::dma::Status; kErrReset / kErrQueueBroken may be local
  uint32_t bytes = 0;
  uint64_t latency_ns = 0;           // submit to reap, CLOCK_MONOTONIC
  bool local = false;                // completed by this side (reset, latched queue), not by the device
};

// A buffer in the host DMA window: `offset` goes into descriptors, `ptr` is
// where the host reads and writes it.
struct DmaBuffer {
  uint64_t offset = 0;
  uint8_t* ptr = nullptr;
  uint64_t bytes = 0;  // rounded up to kDmaBufferGranule
};
inline constexpr uint64_t kDmaBufferGranule = 4096;

enum class DmaWait : uint32_t {
  kPoll = 0,   // spin on the completion ring (lowest latency, burns a core)
  kBlock = 1,  // sleep on irq_fd between checks
};

struct DmaQueueSnapshot {
  vtrn::dma::QueueStats device{};  // the device's counters (seqlock copy)
  bool device_stats_valid = false; // false when the writer never held still
  uint32_t device_error = 0;       // QueueControl::error (vtrn::dma::QueueError)
  DmaFault fault = DmaFault::kNone;
  std::string fault_text;          // one line; empty when healthy
  bool resetting = false;
  uint32_t in_flight = 0;          // chains
  uint32_t free_slots = 0;
  uint64_t chains_submitted = 0, descs_submitted = 0, chains_completed = 0, bytes_completed = 0;
  uint64_t resets = 0;
  uint64_t host_by_status[vtrn::dma::kStatusCount] = {};  // results as this side recorded them
};

class DmaEngine {
 public:
  static constexpr uint64_t kWaitSliceNs = 10'000'000;

  struct Hooks {
    std::function<void()> ring_chip;  // host -> chip doorbell (thread-safe); may be empty
    int irq_fd = -1;                  // chip -> host eventfd for kVectorDma; -1: none (no blocking sleep on it)
  };

  DmaEngine() = default;
  ~DmaEngine();
  DmaEngine(const DmaEngine&) = delete;
  DmaEngine& operator=(const DmaEngine&) = delete;

  // Sets up from a BAR2 mapping and its validated layout: copies and
  // validates the DMA region header (validate_dma_region), checks the host
  // window, builds the queues and the window allocator. Interrupts start
  // disarmed (arm_irq). An error (one line) when the region is unusable.
  Error attach(uint8_t* bar2, const vtrn::hostif::Layout& layout, Hooks hooks);
  // Completes everything in flight locally with kErrReset and forgets the
  // mapping (the chip went away). Uncollected results stay collectable.
  void detach();
  [[nodiscard]] bool attached() const { return attached_; }

  [[nodiscard]] uint32_t queue_count() const { return hdr_.queue_count; }
  [[nodiscard]] uint32_t depth() const { return hdr_.depth; }
  [[nodiscard]] uint32_t max_desc_bytes() const { return hdr_.max_desc_bytes; }
  [[nodiscard]] uint32_t max_chain_descs() const { return hdr_.max_chain_descs; }
  [[nodiscard]] uint64_t hbm_base() const { return hdr_.hbm_base; }
  [[nodiscard]] uint64_t hbm_size() const { return hdr_.hbm_size; }
  // True when [addr, addr + len) lies inside the HBM range DMA may use or
  // inside the remap window of stitched allocations (overflow-safe).
  [[nodiscard]] bool hbm_contains(uint64_t addr, uint64_t len) const {
    if (hdr_.remap_size != 0 && addr >= hdr_.remap_base && addr - hdr_.remap_base < hdr_.remap_size)
      return len <= hdr_.remap_size - (addr - hdr_.remap_base);
    return addr >= hdr_.hbm_base && addr - hdr_.hbm_base <= hdr_.hbm_size &&
           len <= hdr_.hbm_size - (addr - hdr_.hbm_base);
  }
  [[nodiscard]] uint64_t remap_base() const { return hdr_.remap_base; }
  [[nodiscard]] uint64_t remap_size() const { return hdr_.remap_size; }
  [[nodiscard]] uint64_t window_size() const { return window_size_; }
  [[nodiscard]] uint8_t* window() const { return window_; }

  // Window buffers.
  DmaError alloc(uint64_t bytes, DmaBuffer* out);
  DmaError free(const DmaBuffer& b);
  [[nodiscard]] uint64_t window_free_bytes() const;

  // Submission.
  // Validates every chain (see check_chain), then writes all of them with one
  // index store and rings the chip once (see hold_doorbell). All or
  // nothing. handles[i] receives chain i's handle.
  DmaError submit(uint32_t queue, const DmaChain* chains, uint32_t n, uint64_t* handles,
                  DmaInvalid* bad = nullptr);
  // Hostile-input mode: writes `descs` as given (flags, lengths, addresses
  // untouched) except each descriptor's cookie, which becomes its own new
  // handle (handles[i]). Whatever completion the device writes for a
  // descriptor carries that handle; descriptors that end no chain never
  // complete (their handles stay in flight until reset()).
  DmaError submit_raw(uint32_t queue, const vtrn::dma::Descriptor* descs, uint32_t n,
                      uint64_t* handles);
  // The check submit() applies: the vtrn::dma::Status the device would give
  // the chain (kOk if none), and *segment the first offending descriptor.
  [[nodiscard]] uint32_t check_chain(const DmaChain& c, uint32_t* segment = nullptr) const;
  [[nodiscard]] uint32_t free_slots(uint32_t queue);
  // Doorbell batching for a caller about to submit several times in a row
  // (vtrnd refilling rings in one loop turn): between hold_doorbell() and
  // release_doorbell() submissions and resets only note that the chip needs
  // a doorbell; the last release rings it once. Each ring wakes the chip
  // through QEMU's main loop (tens of microseconds), so one per turn instead
  // of one per batch matters. Holds nest and may come from several threads;
  // a doorbell noted under any hold is rung by whichever release ends it.
  void hold_doorbell();
  void release_doorbell();

  // Completion.
  // Reaps one queue / every queue; returns how many completions were reaped.
  uint32_t poll(uint32_t queue);
  uint32_t poll_all();
  // Takes the result of `handle` if it has completed.
  DmaError try_take(uint64_t handle, DmaResult* out);
  // Waits until `handle` completes or `timeout_ns` passes (kTimeout).
  DmaError wait(uint64_t handle, DmaResult* out, DmaWait mode, uint64_t timeout_ns);
  // Moves every uncollected result into *out (appends); returns how many.
  size_t collect(std::vector<DmaResult>* out);
  // Chains in flight on `queue` (or all queues).
  [[nodiscard]] uint32_t in_flight(uint32_t queue);
  [[nodiscard]] uint32_t in_flight_all();

  // Interrupts, errors, reset.
  // Sets QueueControl::irq_armed on every queue: the device rings kVectorDma
  // when an IRQ-flagged chain completes only while armed. A blocking wait
  // arms them itself; vtrnd arms them once at bring-up.
  void arm_irq(bool on);
  [[nodiscard]] DmaFault fault(uint32_t queue, std::string* text = nullptr);
  // Starts the reset handshake on `queue`: chains in flight complete locally
  // with kErrReset now, the fault and the device's latch clear when the
  // device acknowledges. Submissions get kResetting until reset_done().
  DmaError begin_reset(uint32_t queue);
  // True once the device acknowledged (and the queue is usable again).
  bool reset_done(uint32_t queue);
  // Test hook: publishes a submission index that breaks the ring protocol
  // (`backward` false: more than a ring ahead; true: behind what the device
  // has consumed) and rings. The device must latch the queue; the host's own
  // bookkeeping is untouched, and reset() recovers.
  DmaError inject_sq_index_fault(uint32_t queue, bool backward);
  // Test hook: publishes a completion consumer index one past what the
  // device produced. The device latches the queue when it next needs
  // completion space (its next descriptor); reset() recovers.
  DmaError inject_cq_consumer_fault(uint32_t queue);
  // begin_reset + wait for the acknowledgement (polling, 1 ms sleeps).
  DmaError reset(uint32_t queue, uint64_t timeout_ns);

  bool snapshot(uint32_t queue, DmaQueueSnapshot* out);

  // Handle layout.
  static constexpr uint32_t kQueueShift = 56;
  [[nodiscard]] static uint32_t handle_queue(uint64_t h) { return uint32_t(h >> kQueueShift); }

 private:
  struct Pending {
    uint64_t handle = 0;
    uint64_t t_submit_ns = 0;
  };
  struct Queue {
    std::mutex mu;
    vtrn::dma::HostQueue hq;
    vtrn::dma::QueueControl* ctl = nullptr;
    const vtrn::dma::QueueStats* stats = nullptr;
    uint64_t next_seq = 1;
    uint64_t floor_seq = 1;  // sequences below belong to before the last reset
    // Both ascending by handle, i.e. by submission order within the queue:
    // the device completes a queue strictly in order, so results are
    // collected in completion order, and a completion retires every older
    // descriptor of a raw chain that will never complete on its own. Entries
    // leave `pending` from the front and join `done` at the back, so FIFOs
    // in reused storage (lookups by binary search) replace ordered maps: a
    // 64 B benchmark moves millions of handles a second through here, and
    // an allocation per handle (map nodes, then deque blocks) was a large
    // part of vtrnd's CPU per descriptor.
    HandleFifo<Pending> pending;
    HandleFifo<DmaResult> done;
    DmaFault fault = DmaFault::kNone;
    std::string fault_text;
    bool resetting = false;
    uint64_t chains_submitted = 0, descs_submitted = 0, chains_completed = 0, bytes_completed = 0;
    uint64_t resets = 0;
    uint64_t by_status[vtrn::dma::kStatusCount] = {};
    std::vector<vtrn::dma::Descriptor> scratch;
  };

  Queue* queue(uint32_t q) { return attached_ && q < queues_.size() ? queues_[q].get() : nullptr; }
  DmaError submit_locked(Queue& q, uint32_t qi, vtrn::dma::Descriptor* d, uint32_t ndesc);
  uint32_t reap_locked(Queue& q, uint32_t qi);
  void latch_locked(Queue& q, DmaFault f, const std::string& text);
  void finish_locked(Queue& q, uint64_t handle, uint32_t status, uint32_t bytes, bool local,
                     uint64_t now);
  void finish_at_locked(Queue& q, Pending* it, uint32_t status, uint32_t bytes,
                        bool local, uint64_t now);
  void fail_pending_locked(Queue& q, uint32_t status);
  void ring_chip();
  bool check_range(uint64_t addr, uint32_t len, bool host) const;
  void sleep_for_doorbell(uint64_t deadline_ns);

  std::atomic<bool> attached_{false};
  std::atomic<bool> irq_on_{false};
  vtrn::dma::DmaRegionHeader hdr_{};
  uint8_t* window_ = nullptr;
  uint64_t window_size_ = 0;
  Hooks hooks_;
  std::vector<std::unique_ptr<Queue>> queues_;

  mutable std::mutex alloc_mu_;
  vtrn::hbm::Allocator alloc_;
  std::vector<uint64_t> arena_;

  // Doorbell batching (hold_doorbell / release_doorbell).
  std::atomic<uint32_t> db_hold_{0};
  std::atomic<bool> db_pending_{false};

  // Blocking-wait leader election.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  bool leader_ = false;
  uint64_t wake_gen_ = 0;
};

}  // namespace drv
