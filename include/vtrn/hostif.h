// vtrn host interface, ABI v1: the byte layout of BAR2 that the chip firmware
// and the host driver share.
//
// BAR2 of the chip's ivshmem-doorbell function is a memfd that vtrnd creates
// and maps; QEMU maps the same pages into the guest. Everything here is
// fixed-width, little-endian, naturally aligned, and written by exactly one
// side (the "writer" noted on each field): under TCG, read-modify-write atomics
// are not atomic against the host, so no field is ever written by both.
//
// Ordering rules (both sides):
//  - a producer writes the slot, then a release barrier, then the index;
//  - a consumer reads the index with acquire, then the slot;
//  - a doorbell is only a wake-up hint (eventfds coalesce): after any wake-up,
//    re-read the indexes; never clear a flag the peer may have set already.
// The firmware copies what it reads from BAR2 into its own memory, validates
// the copy, and only then uses it: the host can change BAR2 underneath it.
// The host treats everything the firmware publishes the same way.
//
// This header is data layout and constants only; the queue logic that uses it
// lives in common/hostif/ and is built into both the firmware and the host.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace vtrn::hostif {

inline constexpr uint32_t kMagic = 0x4e525456;  // "VTRN" read as little-endian bytes
inline constexpr uint16_t kAbiMajor = 1;
// 1.1: telemetry version 4 (wakeups), kCapTelemetryOnDemand (kVectorAux
// asks for a refresh), the idle tick cadence kIdleTickMs.
inline constexpr uint16_t kAbiMinor = 1;
inline constexpr uint32_t kCacheLine = 64;

// The host driver is peer 0 on every chip's ivshmem server; the chip is peer 1.
// The chip rings the host with Doorbell = (kHostPeerId << 16) | vector.
inline constexpr uint16_t kHostPeerId = 0;
inline constexpr uint16_t kChipPeerId = 1;

// MSI-X / eventfd vectors, the same numbering both ways.
enum Vector : uint16_t {
  kVectorControl = 0,  // host->chip: requests queued; chip->host: responses/events queued
  kVectorLog = 1,      // chip->host: log ring has new lines (rate-limited by firmware)
  kVectorDma = 2,      // reserved for the DMA queues
  kVectorAux = 3,      // host->chip: refresh telemetry now (kCapTelemetryOnDemand)
  kVectorCount = 4,
};

// Firmware lifecycle, published in FwHeader::state.
enum FwState : uint32_t {
  kStateOff = 0,      // BAR2 still zero: firmware has not started
  kStateBooting = 1,  // header and regions valid, services not yet serving
  kStateReady = 2,    // control queue served
  kStateHalted = 3,   // orderly stop (PSCI SYSTEM_OFF follows)
  kStatePanic = 4,    // panic record valid; nothing else is served
};

// Capability bits in FwHeader::capabilities.
enum Capability : uint64_t {
  kCapControlQueue = 1u << 0,
  kCapLogRing = 1u << 1,
  kCapTelemetry = 1u << 2,
  kCapPanicRecord = 1u << 3,
  kCapDma = 1u << 4,
  kCapHbm = 1u << 5,     // HBM allocator served over the control queue
  kCapJobs = 1u << 6,    // job queue region + NeuronCore executors
  kCapLinks = 1u << 7,   // link ports: kRegionLinks valid
  kCapPower = 1u << 8,   // power/thermal: kRegionPower valid
  // With kCapDma: the chip's DMA engines serve the host queues. The host
  // rings the engines' doorbell (the eventfd vtrn-hw watches) after
  // publishing descriptors or a reset request, not kVectorDma; completions
  // still interrupt it on kVectorDma.
  kCapDmaEngines = 1u << 9,
  // A host->chip doorbell on kVectorAux makes the firmware refresh the
  // telemetry block (and the power block) at once, so a reader sees the
  // chip as of its request even when an idle chip ticks only every
  // kIdleTickMs.
  kCapTelemetryOnDemand = 1u << 10,
};

// The firmware's tick (heartbeat, services' periodic work, telemetry) runs
// every telemetry period while the chip is busy; after a whole period with
// no interrupt but the timer and no busy service it runs every kIdleTickMs
// (or the period, if longer) until the next interrupt. The host watchdog's
// default window (at least 1000 ms, driver/lib) holds four idle heartbeats.
inline constexpr uint32_t kIdleTickMs = 250;

// Region types in the region table.
enum RegionType : uint32_t {
  kRegionNone = 0,
  kRegionPanic = 1,      // PanicRecord
  kRegionTelemetry = 2,  // Telemetry
  kRegionCtrlIndex = 3,  // CtrlIndexes
  kRegionCtrlReq = 4,    // host->fw slots, kCtrlSlots x kCtrlSlotSize
  kRegionCtrlResp = 5,   // fw->host slots, kCtrlSlots x kCtrlSlotSize
  kRegionLog = 6,        // LogRing header followed by the byte ring
  kRegionHostWindow = 7, // host DMA window: the rest of BAR2
  kRegionDma = 8,        // DMA queues: dma::DmaRegionHeader, then the queue blocks (dma_abi.h)
  kRegionPower = 9,      // vtrn::power::PowerTelemetry (common/power/include/vtrn/power_telemetry.h)
  kRegionLinks = 10,     // link port status/counters (layout owned by common/link)
  kRegionJobs = 11,      // job status table (layout owned by the jobs service)
  kRegionTypeCount = 12,
};

struct Region {
  uint32_t type;  // RegionType
  uint32_t flags;
  uint64_t offset;  // from the start of BAR2
  uint64_t size;
};
static_assert(sizeof(Region) == 24);

inline constexpr uint32_t kMaxRegions = 16;

// Offset 0. Writer: firmware. The host reads it only after state != kStateOff
// and validates every region before using it.
struct FwHeader {
  uint32_t magic;        // kMagic
  uint16_t abi_major;    // kAbiMajor: the host refuses a different major
  uint16_t abi_minor;
  uint32_t state;        // FwState
  uint32_t fw_version;   // major << 16 | minor << 8 | patch
  uint64_t heartbeat;    // +1 every telemetry period while the firmware runs
  uint64_t capabilities; // Capability bits
  uint64_t bar2_size;    // size the firmware saw when it sized BAR2
  uint32_t chip_id;      // from the board DTB / bootargs
  uint32_t region_count;
  uint64_t boot_counter_ns;  // generic-timer time when the header was published
  uint32_t boot_generation;  // +1 on every firmware start; lets the host spot a reboot
  uint32_t reserved0;
  char build_id[32];         // NUL-terminated firmware build string
  Region regions[kMaxRegions];
};
static_assert(offsetof(FwHeader, state) == 8);
static_assert(offsetof(FwHeader, heartbeat) == 16);
static_assert(offsetof(FwHeader, regions) == 96);
static_assert(sizeof(FwHeader) == 96 + 24 * kMaxRegions);

// ---- Control queue pair -------------------------------------------------
// Two rings of fixed-size slots: requests (host produces, firmware consumes)
// and responses/events (firmware produces, host consumes). Indexes are
// free-running uint32 counters; slot = index % kCtrlSlots. Each index has one
// writer and lives on its own cache line.

inline constexpr uint32_t kCtrlSlots = 32;           // power of two
inline constexpr uint32_t kCtrlSlotSize = 4096;
inline constexpr uint32_t kCtrlSlotHeader = 16;
inline constexpr uint32_t kCtrlMaxPayload = kCtrlSlotSize - kCtrlSlotHeader;

enum SlotKind : uint32_t {
  kSlotRequest = 1,   // in the request ring
  kSlotResponse = 2,  // in the response ring, seq = the request's seq
  kSlotEvent = 3,     // in the response ring, seq = firmware event counter
};

// A slot: header then protobuf-c payload (vtrn.ctrl.Request / Response / Event).
struct SlotHeader {
  uint32_t seq;    // request: host's sequence number; response: echoes it
  uint32_t kind;   // SlotKind
  uint32_t length; // payload bytes, <= kCtrlMaxPayload
  uint32_t crc32;  // CRC-32 (IEEE 802.3, reflected, as zlib) over seq, kind, length and payload
};
static_assert(sizeof(SlotHeader) == kCtrlSlotHeader);

struct alignas(kCacheLine) CacheLineIndex {
  uint32_t value;
  uint32_t pad[kCacheLine / 4 - 1];
};
static_assert(sizeof(CacheLineIndex) == kCacheLine);

struct CtrlIndexes {
  CacheLineIndex req_prod;   // writer: host
  CacheLineIndex req_cons;   // writer: firmware
  CacheLineIndex resp_prod;  // writer: firmware
  CacheLineIndex resp_cons;  // writer: host
  CacheLineIndex fw_error;   // writer: firmware; CtrlError latched (0 = healthy)
  CacheLineIndex host_error; // writer: host; CtrlError the host latched
};
static_assert(offsetof(CtrlIndexes, req_cons) == 64);
static_assert(sizeof(CtrlIndexes) == 6 * 64);

// Why a queue latched broken. Closed list; the value is ABI.
enum CtrlError : uint32_t {
  kCtrlOk = 0,
  kCtrlIndexJump = 1,     // producer index moved more than kCtrlSlots ahead of the consumer
  kCtrlIndexBackward = 2, // producer index moved backwards
  kCtrlBadLength = 3,     // slot length > kCtrlMaxPayload
  kCtrlBadCrc = 4,        // slot CRC mismatch
  kCtrlBadKind = 5,       // slot kind not valid for this ring
  kCtrlConsumerAhead = 6, // consumer index beyond producer
};

// ---- Log ring -------------------------------------------------------------
// The chip's dmesg: a byte ring of text lines "<level> <uptime_us> <text>\n"
// (level is one ASCII digit, a syslog severity 0-7; uptime in microseconds). The firmware is the only
// writer; the host keeps its own read cursor and never writes back, so a slow
// reader loses the oldest lines, never blocks the firmware. A reader that sees
// write_pos - cursor > size has been overrun: it resumes at write_pos - size
// and skips to the next '\n'.
struct LogRingHeader {
  uint64_t write_pos;   // writer: firmware; free-running byte count
  uint64_t size;        // bytes of ring data after this header (power of two)
  uint64_t dropped;     // lines the firmware dropped (longer than the ring)
  uint64_t reserved[5];
};
static_assert(sizeof(LogRingHeader) == 64);

// ---- Telemetry ------------------------------------------------------------
// Refreshed by the firmware every telemetry period. Read with a seqlock:
// read seq (acquire), copy the block, read seq again; retry if odd or changed.
// Every field name carries its unit.
struct Telemetry {
  uint32_t seq;              // writer: firmware; odd while updating
  uint32_t version;          // layout version of this block (1)
  uint64_t uptime_ns;
  uint64_t heartbeat;
  uint32_t period_ms;        // refresh period from the board DTB
  uint32_t neuron_cores;
  uint64_t idle_ns;          // time the boot core spent in WFI
  uint64_t irq_count;        // interrupts taken
  uint64_t doorbell_irq_count;
  uint64_t timer_irq_count;
  uint64_t ctrl_requests;    // requests consumed
  uint64_t ctrl_errors;      // requests answered with an error status
  uint64_t events_sent;
  uint64_t log_bytes;        // bytes written to the log ring
  int32_t temperature_mc;    // die temperature, milli-degrees Celsius (model)
  uint32_t reserved0;
  // DMA service totals since boot, all queues (per-queue figures: dma::QueueStats).
  // Taken from reserved words: appended fields only, the block size is unchanged.
  uint64_t dma_descriptors;  // descriptors consumed
  uint64_t dma_completions;  // completions written
  uint64_t dma_bytes;        // bytes moved by the copy engine
  uint64_t dma_busy_ns;      // time the engine spent on descriptors
  // Version 2: HBM, ECC and job totals (taken from reserved words; offsets of
  // earlier fields unchanged). Power, thermal and per-core figures live in
  // kRegionPower, link counters in kRegionLinks.
  uint64_t hbm_total_bytes;      // allocatable HBM
  uint64_t hbm_used_bytes;       // bytes in live allocations
  uint64_t hbm_alloc_failures;   // allocations refused (no space, quota, alignment)
  uint64_t hbm_retired_pages;    // pages retired after uncorrectable ECC errors
  uint64_t ecc_correctable;      // corrected errors, all stacks
  uint64_t ecc_uncorrectable;    // uncorrectable errors, all stacks
  uint32_t jobs_queued;          // jobs waiting for a NeuronCore now
  uint32_t jobs_running;         // jobs on a NeuronCore now
  uint64_t jobs_completed;       // jobs ended DONE since boot
  uint64_t jobs_failed;          // jobs ended FAILED, CANCELLED or TIMED_OUT since boot
  // Version 3: the tensor engines (engine_abi.h EngineStats, summed over the
  // chip's engines since their last reset; from one reserved word each).
  uint64_t tensor_busy_ns;       // wall time the engines spent on commands
  uint64_t tensor_modeled_ns;    // what the modeled silicon would have taken
  // Version 4: how often the boot core left WFI since boot (every interrupt
  // that ended a sleep: timer, doorbell, engine), the figure an idle chip
  // keeps low. From the last reserved word.
  uint64_t wakeups;
};
static_assert(offsetof(Telemetry, uptime_ns) == 8);
static_assert(offsetof(Telemetry, dma_descriptors) == 104);
static_assert(offsetof(Telemetry, hbm_total_bytes) == 136);
static_assert(sizeof(Telemetry) == 232);
inline constexpr uint32_t kTelemetryVersion = 4;
static_assert(sizeof(Telemetry) % 8 == 0);

// ---- Panic record -----------------------------------------------------------
inline constexpr uint32_t kPanicMagic = 0x43494e50;  // "PNIC"

enum PanicCause : uint32_t {
  kPanicNone = 0,
  kPanicException = 1,  // synchronous exception / SError: ec, esr, elr, far valid
  kPanicAssert = 2,     // firmware assertion
  kPanicBoard = 3,      // invalid board DTB (reason names the property)
  kPanicPlatform = 4,   // platform DTB / PCIe / GIC bring-up failed
  kPanicStack = 5,      // stack protector tripped
  // A job's cores did not leave it within the bound after its stop was
  // requested (cancel, timeout or failure): a chunk that ignores stop.
  kPanicJobStuck = 6,
};

// The one name table of panic causes ("job stuck"), for the firmware's
// panic print and the host's panic summary; "unknown" for any other value.
constexpr const char* panic_cause_name(uint32_t cause) {
  switch (cause) {
    case kPanicException: return "exception";
    case kPanicAssert: return "assert";
    case kPanicBoard: return "board";
    case kPanicPlatform: return "platform";
    case kPanicStack: return "stack";
    case kPanicJobStuck: return "job stuck";
    default: return "unknown";
  }
}

// Writer: firmware, once. Valid when magic == kPanicMagic.
struct PanicRecord {
  uint32_t magic;
  uint32_t cause;        // PanicCause
  uint32_t ec;           // ESR_EL1.EC
  uint32_t cpu;          // MPIDR_EL1.Aff0 of the core that panicked
  uint64_t esr;
  uint64_t elr;
  uint64_t far;
  uint64_t spsr;
  uint64_t sp;
  uint64_t uptime_ns;
  uint64_t x[31];
  char reason[192];      // NUL-terminated
};
static_assert(offsetof(PanicRecord, x) == 64);

// ---- Default layout ---------------------------------------------------------
// The firmware publishes this layout in the region table; the host never
// assumes it and validates the table instead (see common/hostif/layout.h).
inline constexpr uint64_t kPanicOffset = 0x1000;
inline constexpr uint64_t kTelemetryOffset = 0x2000;
inline constexpr uint64_t kCtrlIndexOffset = 0x4000;
inline constexpr uint64_t kCtrlReqOffset = 0x10000;
inline constexpr uint64_t kCtrlRespOffset = kCtrlReqOffset + kCtrlSlots * kCtrlSlotSize;
inline constexpr uint64_t kLogOffset = kCtrlRespOffset + kCtrlSlots * kCtrlSlotSize;
inline constexpr uint64_t kLogDataSize = 256 * 1024;
// Service regions between the log ring and the DMA region.
inline constexpr uint64_t kPowerOffset = 0x92000;
inline constexpr uint64_t kPowerSize = 0x2000;
inline constexpr uint64_t kLinksOffset = 0x94000;
inline constexpr uint64_t kLinksSize = 0x4000;
inline constexpr uint64_t kJobsOffset = 0x98000;
inline constexpr uint64_t kJobsSize = 0x8000;
inline constexpr uint64_t kHostWindowOffset = 0x100000;  // without a DMA region
inline constexpr uint64_t kDmaOffset = 0x100000;
inline constexpr uint64_t kMinBar2Size = 4u << 20;
static_assert(kLogOffset + sizeof(LogRingHeader) + kLogDataSize <= kPowerOffset);
static_assert(kJobsOffset + kJobsSize <= kHostWindowOffset);

}  // namespace vtrn::hostif
