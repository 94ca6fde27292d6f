// fw::dma: the portable half of the chip's DMA service. It sets up the BAR2
// DMA region (header, queue control blocks, statistics), derives the HBM
// range from the platform's RAM, and schedules the queues: one pass polls
// every queue that has work, round robin, with a bounded descriptor budget
// per queue, so a busy or latched queue never starves the others.
//
// Not the copy engine (vtrn::dma::Queue validates and completes descriptors,
// a vtrn::dma::Copier moves the bytes) and not the firmware glue (MMU, log,
// doorbells: dma_service.h). It has no hardware in it and is built into host
// unit tests as well as the image.
//
// The quirk that shaped it: a queue whose completion ring is full cannot make
// progress until the host consumes completions, and the host writing cq_cons
// raises no interrupt. Such a queue is "stalled": it is not polled again (so
// the loop can sleep instead of spinning on it) until something changes:
// any interrupt was taken since (wake generation), or its cq_cons, sq_prod or
// reset_req moved. stalled() tells the caller to bound its sleep.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_abi.h"
#include "vtrn/dma_queue.h"
#include "vtrn/error.h"

namespace fw::dma {

// The chip's RAM below HBM: platform DTB, board DTB, firmware image and
// stacks. vtrnd launches QEMU with -m = this + the board's HBM total
// (driver/lib/chip.cpp, qemu/chip.args), so HBM is the RAM above it.
inline constexpr uint64_t kFirmwareRamBytes = 64ull << 20;

struct HbmRange {
  uint64_t base = 0;  // chip physical address
  uint64_t size = 0;
};

struct HbmInputs {
  uint64_t ram_base = 0;       // platform DTB /memory reg
  uint64_t ram_size = 0;
  uint64_t hbm_bytes = 0;      // board: stacks x bytes per stack
  uint64_t firmware_end = 0;   // first byte above everything the firmware occupies
};

// HBM = [ram_base + kFirmwareRamBytes, + hbm_bytes). Fails when the size is
// 0 (kBadProperty), the range wraps, RAM does not cover it, or the
// firmware's own memory reaches into it (kNoSpace).
[[nodiscard]] vtrn::Error derive_hbm(const HbmInputs& in, HbmRange* out);

// "sq index jump" etc.; "unknown" outside the closed list.
const char* queue_error_name(uint32_t e);

// Checks queue count and depth against the ABI limits (board values:
// kBadProperty).
[[nodiscard]] vtrn::Error check_geometry(uint32_t queues, uint32_t depth);

// Told about queue state changes, from inside run_pass.
class Observer {
 public:
  virtual void on_latched(uint32_t queue, vtrn::dma::QueueError error) = 0;
  virtual void on_reset(uint32_t queue) = 0;

 protected:
  ~Observer() = default;
};

struct PassResult {
  uint32_t queues_polled = 0;
  uint32_t descriptors = 0;
  uint32_t completions = 0;
  bool irq = false;       // some queue completed an IRQ-flagged chain while armed
  bool progress = false;  // descriptors, completions or a reset happened
};

// Firmware-side totals since boot (our own counts; nothing read back from
// BAR2, which the host can write).
struct Totals {
  uint64_t descriptors = 0;
  uint64_t completions = 0;
  uint64_t bytes = 0;      // bytes handed to the copier
  uint64_t busy_ns = 0;    // time spent in Queue::poll
  uint64_t irq_passes = 0; // passes that asked for a host interrupt
  uint64_t latches = 0;
  uint64_t resets = 0;
};

// What one queue may take in one pass. Queue::poll counts descriptors only,
// so the scheduler polls in chunks and stops a queue's turn once either
// limit is reached: 64 B descriptors get a batch per turn, 1 MiB ones a
// couple, and a control request never waits behind gigabytes.
struct Budget {
  uint32_t descriptors = 32;
  uint32_t chunk = 8;          // descriptors per Queue::poll call, <= descriptors
  uint64_t bytes = 2u << 20;   // checked between chunks
};

class Scheduler {
 public:
  using Clock = uint64_t (*)();

  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Zeroes `region` (region_size bytes, at least dma_region_bytes), writes
  // the DmaRegionHeader, builds one Queue per queue over it (each starts at
  // index 0 with reset_ack = reset_req = 0). Fails on a bad geometry, a
  // short region or an empty budget. `clock` (may be null) times each
  // queue's turn for QueueStats::busy_ns.
  [[nodiscard]] vtrn::Error init(uint8_t* region, uint64_t region_size, uint32_t queues,
                                 uint32_t depth, const HbmRange& hbm, const Budget& budget,
                                 Clock clock, Observer* observer);

  // One round-robin pass starting one queue after the previous pass's start.
  // `wake_gen` is any counter that changes when the core took an interrupt
  // (the firmware passes irq::count()).
  PassResult run_pass(const vtrn::dma::AddressMap& map, vtrn::dma::Copier& copier,
                      uint64_t wake_gen);
  // True when a pass would find something to do: a queue with work that is
  // not stalled, or a stalled one whose inputs changed. Reads BAR2 indexes
  // only.
  [[nodiscard]] bool wants_run(uint64_t wake_gen) const;
  // True when some queue is waiting for completion-ring space.
  [[nodiscard]] bool stalled() const;

  [[nodiscard]] uint32_t queue_count() const { return count_; }
  [[nodiscard]] uint32_t depth() const { return depth_; }
  [[nodiscard]] const Totals& totals() const { return totals_; }

 private:
  struct Slot {
    vtrn::dma::Queue queue;
    vtrn::dma::QueueControl* ctl = nullptr;
    uint32_t reset_ack_seen = 0;
    bool stalled = false;
    // Host-written indexes when the queue stalled; any change un-stalls it.
    uint32_t stall_cq_cons = 0;
    uint32_t stall_sq_prod = 0;
    uint32_t stall_reset_req = 0;
  };

  bool runnable(const Slot& s, uint64_t wake_gen) const;
  void note_stall(Slot& s, bool budget_hit);

  Slot slots_[vtrn::dma::kMaxQueues];
  uint32_t count_ = 0;
  uint32_t depth_ = 0;
  Budget budget_;
  uint32_t next_ = 0;
  uint64_t wake_gen_seen_ = 0;
  Clock clock_ = nullptr;
  Observer* observer_ = nullptr;
  Totals totals_;
};

}  // namespace fw::dma
