// vtrn DMA ABI: descriptor and completion formats and the per-queue control
// block in BAR2, shared byte for byte by the firmware copy engine and the host
// driver. Same conventions as hostif.h: fixed-width little-endian fields, one
// writer per field, free-running uint32 indexes, payload before index.
//
// A queue is a submission ring (host produces descriptors, engine consumes)
// and a completion ring (engine produces, host consumes). Descriptors form
// chains: FIRST ... LAST (a single descriptor carries both flags). The engine
// writes one completion per chain, after its LAST descriptor, carrying the
// LAST descriptor's cookie, the chain's status and the bytes it moved.
//
// Addresses: a descriptor names each side's address space in its flags.
// Host-window addresses are byte offsets from the start of the host DMA window
// region of BAR2; HBM addresses are chip physical addresses inside the HBM
// range the firmware reports. Nothing else is reachable. There are no
// alignment rules: the copy engine is byte-granular, so any address and any
// length from 1 to kMaxDescBytes is valid (aligned buffers are simply faster).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/hostif.h"

namespace vtrn::dma {

enum DescFlags : uint32_t {
  kDescFirst = 1u << 0,     // first descriptor of a chain
  kDescLast = 1u << 1,      // last descriptor of a chain: a completion follows
  kDescIrq = 1u << 2,       // interrupt the host when this chain completes
  kDescFence = 1u << 3,     // start only after every earlier chain of this queue completed
                            // (one engine runs a queue strictly in order, so today every
                            // chain is fenced; the bit keeps its meaning for parallel engines)
  kDescSrcHost = 1u << 8,   // src is a host-window offset (else HBM)
  kDescDstHost = 1u << 9,   // dst is a host-window offset (else HBM)
  kDescKnownFlags = kDescFirst | kDescLast | kDescIrq | kDescFence | kDescSrcHost | kDescDstHost,
};

struct Descriptor {
  uint64_t src;
  uint64_t dst;
  uint32_t length;  // bytes, 1..kMaxDescBytes
  uint32_t flags;   // DescFlags
  uint64_t cookie;  // opaque to the engine; echoed in the chain's completion
};
static_assert(sizeof(Descriptor) == 32);
static_assert(offsetof(Descriptor, length) == 16);
static_assert(offsetof(Descriptor, cookie) == 24);

inline constexpr uint32_t kMaxDescBytes = 16u << 20;  // x kMaxChainDescs fits Completion::bytes
inline constexpr uint32_t kMaxChainDescs = 64;

// Completion status. Closed list; values are ABI.
enum Status : uint32_t {
  kOk = 0,
  kErrZeroLength = 1,        // length 0
  kErrTooLong = 2,           // length > kMaxDescBytes
  kErrAddrOverflow = 3,      // address + length wraps around 2^64
  kErrSrcRange = 4,          // src outside the host window / HBM
  kErrDstRange = 5,          // dst outside the host window / HBM
  kErrBadFlags = 6,          // unknown flag bits
  kErrChainTooLong = 7,      // more than kMaxChainDescs descriptors
  kErrChainUnterminated = 8, // a FIRST arrived before the previous chain's LAST
  kErrChainNoFirst = 9,      // a descriptor outside any chain (no FIRST)
  kErrNotAllocated = 10,     // HBM range not inside one live allocation
  kErrEcc = 11,              // HBM range touches a retired (uncorrectable) page
  kErrOverlap = 12,          // src and dst ranges overlap
  kErrQueueBroken = 13,      // the queue latched a protocol error; chain flushed
  kErrReset = 14,            // the chip was reset with this chain in flight
  kErrEngine = 15,           // the DMA engine failed this descriptor (a hardware fault, e.g. an
                             // injected one: vtrn inject dma-engine); nothing of it was copied,
                             // and the engine posted an error record to the firmware
  kStatusCount = 16,         // (15 before kErrEngine: QueueStats::errors_by_status grew by one)
};

struct Completion {
  uint64_t cookie;
  uint32_t status;  // Status
  uint32_t bytes;   // bytes the chain moved; on error, what moved before it
};
static_assert(sizeof(Completion) == 16);

// Why a queue latched broken (QueueControl::error). Values are ABI.
enum QueueError : uint32_t {
  kQueueOk = 0,
  kQueueSqIndexJump = 1,      // sq_prod moved more than depth ahead of the engine
  kQueueSqIndexBackward = 2,  // sq_prod moved backwards
  kQueueCqConsumerAhead = 3,  // cq_cons beyond what the engine produced
};

// One per queue, in the DMA region. Indexes on their own cache lines.
struct QueueControl {
  hostif::CacheLineIndex sq_prod;    // writer: host
  hostif::CacheLineIndex sq_cons;    // writer: engine
  hostif::CacheLineIndex cq_prod;    // writer: engine
  hostif::CacheLineIndex cq_cons;    // writer: host
  hostif::CacheLineIndex error;      // writer: engine; QueueError latched
  hostif::CacheLineIndex reset_req;  // writer: host; bump to ask for a reset
  hostif::CacheLineIndex reset_ack;  // writer: engine; = reset_req once the queue restarted at 0
  hostif::CacheLineIndex irq_armed;  // writer: host; 1 = interrupt on IRQ-flagged completions
};
static_assert(sizeof(QueueControl) == 8 * 64);

// Per-queue statistics, writer: engine, read with the seqlock in `seq`.
struct QueueStats {
  uint32_t seq;
  uint32_t reserved;
  uint64_t descriptors;
  uint64_t chains;
  uint64_t bytes;
  uint64_t errors;
  uint64_t busy_ns;
  uint64_t irqs;
  uint64_t errors_by_status[kStatusCount];
};

// ---- The DMA region of BAR2 (hostif::kRegionDma) ----------------------------
// Offset 0: DmaRegionHeader (writer: firmware). Then queue i's block at
// kDmaQueuesOffset + i * queue_stride(depth):
//   +0                 QueueControl
//   +kQueueStatsOffset QueueStats
//   +kQueueSqOffset    depth x Descriptor
//   +cq_offset(depth)  depth x Completion
inline constexpr uint32_t kDmaRegionVersion = 1;
inline constexpr uint32_t kMaxQueues = 16;
inline constexpr uint32_t kMinDepth = 16;
inline constexpr uint32_t kMaxDepth = 4096;
inline constexpr uint64_t kDmaQueuesOffset = 4096;
inline constexpr uint64_t kQueueStatsOffset = sizeof(QueueControl);
inline constexpr uint64_t kQueueSqOffset = 4096;
static_assert(kQueueStatsOffset + sizeof(QueueStats) <= kQueueSqOffset);

constexpr uint64_t align_4k(uint64_t v) { return (v + 4095) & ~uint64_t(4095); }
constexpr uint64_t cq_offset(uint32_t depth) { return kQueueSqOffset + align_4k(uint64_t(depth) * sizeof(Descriptor)); }
constexpr uint64_t queue_stride(uint32_t depth) { return cq_offset(depth) + align_4k(uint64_t(depth) * sizeof(Completion)); }
constexpr uint64_t dma_region_bytes(uint32_t queues, uint32_t depth) {
  return kDmaQueuesOffset + uint64_t(queues) * queue_stride(depth);
}

struct DmaRegionHeader {
  uint32_t version;         // kDmaRegionVersion
  uint32_t queue_count;     // 1..kMaxQueues (board DTB vtrn,dma-queues)
  uint32_t depth;           // power of two, kMinDepth..kMaxDepth (vtrn,dma-queue-depth)
  uint32_t max_desc_bytes;  // kMaxDescBytes
  uint64_t queue_stride;    // queue_stride(depth)
  uint64_t hbm_base;        // chip physical address of the DMA-reachable HBM
  uint64_t hbm_size;
  uint32_t max_chain_descs; // kMaxChainDescs
  uint32_t reserved0;
  // ---- HBM ---- the remap window of stitched HBM allocations (common/hbm):
  // descriptors may also address [remap_base, + remap_size); 0/0 when the
  // firmware does not stitch (these were reserved, zero, before).
  uint64_t remap_base;
  uint64_t remap_size;
  // ---- end HBM ----
};
static_assert(sizeof(DmaRegionHeader) == 64);

}  // namespace vtrn::dma
