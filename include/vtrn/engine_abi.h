// vtrn engine ABI v1.3: the register and queue region of a chip's hardware
// engines (DMA engines, tensor engines), shared byte for byte by the
// firmware (which programs them) and vtrn-hw (the board's silicon, which
// runs them natively).
//
// The region is BAR2 of the chip's second ivshmem-doorbell PCI function
// (00:02.0). vtrn-hw is that function's ivshmem server: it creates the
// memfd, publishes the ID block below before QEMU connects, and holds the
// eventfds. Doorbells firmware -> vtrn-hw: Doorbell register of the
// function's BAR0 = (kEngineHwPeerId << 16) | vector. Interrupts vtrn-hw ->
// chip: MSI-X vector `vector` of the same function. Vector numbering is
// fixed (kVector*), whatever the engine counts are.
//
// Same conventions as hostif.h: fixed-width little-endian fields, naturally
// aligned, every field written by exactly one side (noted "writer: fw" or
// "writer: hw"), free-running uint32 indexes on their own cache lines,
// payload before index:
//  - a producer writes the entry, then a release barrier, then the index;
//  - a consumer reads the index with acquire, then copies the entry out;
//  - a doorbell or interrupt is only a wake-up hint: re-read the indexes
//    after every wake-up.
// vtrn-hw copies every command and descriptor out of shared memory before
// it validates and uses it, and checks every address against the MPU table
// (MpuBlock) the firmware programs: an engine reaches nothing else.
//
// This header is data layout and constants only. The engines' behaviour is
// hw/README.md; the firmware-side drivers are hal/copy (copy_engine.h) and
// hal/tensor. DMA descriptors and completions are the dma_abi.h formats, and
// the host's DMA queues in BAR2 keep that ABI unchanged: the DMA engines
// serve them directly.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_abi.h"
#include "vtrn/hostif.h"

namespace vtrn::engine {

inline constexpr uint32_t kMagic = 0x4e455456;  // "VTEN" read as little-endian bytes
inline constexpr uint16_t kAbiMajor = 1;
// 1.1: DmaConfig::flags (kDmaConfigPaused).
// 1.2: translated MPU windows (kMpuTranslate, MpuWindow::phys) and the remap
//      window in DmaConfig (remap_base, remap_size; were reserved, zero):
//      stitched HBM allocations reach the DMA engines. kInjectDmaFail.
// 1.3: TensorConfig in TensorEngineBlock (was pad, zero) and kCapTensorRemap:
//      the remap window reaches the tensor engines too, so a GEMM's operands
//      may be stitched allocations. Gated by the capability (a fw never
//      writes the config to engines without it); a config never written
//      (config_gen 0) or 0/0 is no remap window: 1.2 behaviour.
inline constexpr uint16_t kAbiMinor = 3;

// PCI placement and the ivshmem peers of the engine function.
inline constexpr uint32_t kEnginePciDevice = 2;     // 00:02.0 (host interface: 00:01.0)
inline constexpr uint16_t kEngineHwPeerId = 0;      // vtrn-hw
inline constexpr uint16_t kEngineChipPeerId = 1;    // the chip
inline constexpr uint64_t kRegionBytes = 1u << 20;  // BAR2 size: a power of two

inline constexpr uint32_t kMaxDmaEngines = 8;
inline constexpr uint32_t kMaxTensorEngines = 8;  // one per NeuronCore (vtrn,neuron-cores <= 8)

// MSI-X / doorbell vectors. Firmware -> hw on a vector is that block's
// doorbell; hw -> firmware on a vector is that block's interrupt.
//  kVectorControl: fw -> hw: ControlBlock or MpuBlock changed;
//                  hw -> fw: an error record was posted (ErrorBlock).
//  kVectorDma0 + i: fw -> hw: DMA engine i's firmware queue or config;
//                   hw -> fw: an IRQ chain completed on its firmware queue
//                   (irq_armed), or host-queue activity (host_irq_armed).
//  kVectorTensor0 + j: fw -> hw: tensor engine j's command queue;
//                      hw -> fw: an IRQ command completed (irq_armed).
inline constexpr uint16_t kVectorControl = 0;
inline constexpr uint16_t kVectorDma0 = 1;
inline constexpr uint16_t kVectorTensor0 = kVectorDma0 + kMaxDmaEngines;
inline constexpr uint16_t kVectorCount = kVectorTensor0 + kMaxTensorEngines;  // 17

// IdBlock::capabilities.
enum Capability : uint64_t {
  kCapDmaFwQueue = 1u << 0,     // each DMA engine has a firmware queue (DmaEngineBlock)
  kCapDmaHostQueues = 1u << 1,  // DMA engines serve the host's BAR2 DMA queues (DmaConfig)
  kCapTensorGemm = 1u << 2,     // tensor engines execute kTensorOpGemm
  kCapMpu = 1u << 3,            // MpuBlock is enforced
  kCapFaultInject = 1u << 4,    // ControlBlock::inject_* is honoured
  kCapModeledTime = 1u << 5,    // completions and stats carry modeled time
  kCapTensorRemap = 1u << 6,    // ABI 1.3: tensor engines take a remap window (TensorConfig)
};

// Offset 0. Writer: hw, once per attach and again after every chip reset
// (before reset_ack). The firmware reads it after the function's BAR2 is
// mapped and refuses to use engines on a magic or major mismatch.
struct IdBlock {
  uint32_t magic;            // kMagic
  uint16_t abi_major;        // kAbiMajor
  uint16_t abi_minor;
  uint32_t region_bytes;     // kRegionBytes
  uint32_t vector_count;     // kVectorCount
  uint64_t capabilities;     // Capability bits
  uint32_t dma_engines;      // 0..kMaxDmaEngines (board: vtrn,dma-engines)
  uint32_t tensor_engines;   // 0..kMaxTensorEngines (board: vtrn,neuron-cores)
  uint32_t dtype_mask;       // bit d: tensor engines accept num::DType d
  uint32_t mpu_windows;      // kMpuWindows
  uint32_t dma_fw_depth;     // kDmaFwDepth
  uint32_t tensor_depth;     // kTensorDepth
  uint64_t hbm_base;         // chip physical range vtrn-hw maps (the chip's RAM, HBM inside it)
  uint64_t hbm_size;
  // Modeled throughput from the board DT (vtrn,engines binding), per engine.
  uint64_t dma_bytes_per_s;          // vtrn,dma-gbps x 1e9
  uint64_t tensor_flops_per_s[5];    // indexed by num::DType: fp32, bf16, e4m3, e5m2, mxfp4
  uint32_t chip_id;
  uint32_t reserved0;
  char hw_build[32];                 // NUL-terminated vtrn-hw build string
  uint64_t reserved[8];
};
static_assert(offsetof(IdBlock, capabilities) == 16);
static_assert(offsetof(IdBlock, hbm_base) == 48);
static_assert(offsetof(IdBlock, dma_bytes_per_s) == 64);
static_assert(offsetof(IdBlock, chip_id) == 112);
static_assert(sizeof(IdBlock) == 216);

// Why vtrn-hw stopped serving an engine or refused a request. Closed list;
// values are ABI. Reported in ErrorRecord::code and the config status words.
enum EngineError : uint32_t {
  kEngineOk = 0,
  kEngineMpuFault = 1,       // an address outside every live MPU window (or in a poisoned one)
  kEngineBadAddress = 2,     // an address outside HBM / the host window
  kEngineBadConfig = 3,      // DmaConfig refused (geometry, ranges); see detail
  kEngineQueueBroken = 4,    // a firmware ring broke the index rules; the queue latched
  kEngineInjected = 5,       // the fault ControlBlock::inject_* asked for
  kEngineBadCommand = 6,     // a tensor command with bad opcode, dtype or shape
  kEngineErrorCount = 7,
};

// Writer: fw except where noted.
struct ControlBlock {
  hostif::CacheLineIndex reset_req;   // fw bumps: quiesce and restart every engine of the chip
  hostif::CacheLineIndex reset_ack;   // writer: hw; = reset_req once every engine is idle at index 0
  hostif::CacheLineIndex heartbeat;   // writer: hw; +1 every kHeartbeatMs while vtrn-hw runs
  hostif::CacheLineIndex error_irq_armed;  // 1 = kVectorControl interrupt on each error record
  // Fault injection on engine `inject_engine` of kind `inject_kind`: a
  // tensor engine fails its next command (kTensorInjected); a DMA engine
  // halts before its next descriptor (kInjectDma: kEngineHalted, nothing
  // consumed, so nothing is lost) until the next chip reset, or fails the
  // next descriptor it would copy, on whichever queue it serves
  // (kInjectDmaFail, ABI 1.2: the chain completes with dma::kErrEngine and
  // the bytes moved before it; the error record names queue and cookie).
  // Each posts an error record (kEngineInjected). The fw bumps inject_seq
  // after writing the two words; hw sets inject_ack = inject_seq when the
  // fault fired (a halt: at once; a failed descriptor: when it failed).
  hostif::CacheLineIndex inject_kind;    // 0 none, 1 DMA engine, 2 tensor engine
  hostif::CacheLineIndex inject_engine;
  hostif::CacheLineIndex inject_seq;
  hostif::CacheLineIndex inject_ack;     // writer: hw
};
static_assert(sizeof(ControlBlock) == 8 * 64);
inline constexpr uint32_t kHeartbeatMs = 100;
inline constexpr uint32_t kInjectNone = 0;
inline constexpr uint32_t kInjectDma = 1;
inline constexpr uint32_t kInjectTensor = 2;
inline constexpr uint32_t kInjectDmaFail = 3;  // ABI 1.2

// ---- MPU ------------------------------------------------------------------
// The windows every engine address must fall in. Double-buffered: for
// generation G the fw writes bank G & 1 completely, then publishes G in
// `generation` (release). An engine copies bank G & 1 between two acquire
// reads of `generation` and retries if it changed by 2 or more (the fw was
// rewriting that bank). An engine checks each descriptor chain or command
// against one snapshot, and sets its ack word to G once no work checked
// against an older generation is in flight: a fw that frees HBM waits for
// every engine's ack >= G before reusing it.
// The windows cover HBM only: the host DMA window of BAR2 is programmed per
// DMA engine (DmaConfig), and a host-window address is checked against it.
//
// Translated windows (ABI 1.2, an IOMMU): a stitched HBM allocation lives at
// device addresses in the remap window (DmaConfig::remap_base/size, the
// firmware MMU's own remap range) backed by physical extents elsewhere in
// HBM. Each extent is one kMpuTranslate window: device [base, base + size)
// is chip physical [phys, phys + size). base, size and phys are multiples of
// kMpuTranslatePage; base lies in the remap window and phys in HBM. A range
// may run across windows only when they are translated, adjacent and carry
// the same nonzero tag (the extents of one allocation, in device order);
// every other range must lie inside one window. An engine without a remap
// window (a DMA engine whose DmaConfig has none, a tensor engine whose
// TensorConfig has none, ABI 1.3) ignores translated windows, so their
// addresses reach nothing.
enum MpuFlags : uint32_t {
  kMpuValid = 1u << 0,
  kMpuPoison = 1u << 1,     // retired pages: any access that touches them fails (DMA: kErrEcc)
  kMpuTranslate = 1u << 2,  // ABI 1.2: device base..+size maps onto phys (never with kMpuPoison)
  kMpuKnownFlags = kMpuValid | kMpuPoison | kMpuTranslate,
};
inline constexpr uint64_t kMpuTranslatePage = 4096;

// Valid non-poison windows must not overlap each other (a bank where they
// do, or with a malformed translated window, is refused as a whole: every
// HBM access faults until the next bank).
struct MpuWindow {
  uint64_t base;   // chip physical address; device address of a translated window
  uint64_t size;
  uint32_t flags;  // MpuFlags
  uint32_t tag;    // opaque to hw (the fw's allocation id); echoed in ErrorRecord
  uint64_t phys;   // kMpuTranslate: chip physical address of base (ABI 1.2; 0 before)
};
static_assert(sizeof(MpuWindow) == 32);
static_assert(offsetof(MpuWindow, phys) == 24);

inline constexpr uint32_t kMpuWindows = 256;

struct MpuHeader {
  hostif::CacheLineIndex generation;  // 0 = MPU off: HBM ranges are checked against HBM only
  hostif::CacheLineIndex count;       // windows valid in the published bank (<= kMpuWindows)
  hostif::CacheLineIndex dma_ack[kMaxDmaEngines];        // writer: hw
  hostif::CacheLineIndex tensor_ack[kMaxTensorEngines];  // writer: hw
};
static_assert(sizeof(MpuHeader) == 18 * 64);

struct MpuBlock {
  MpuHeader header;
  uint8_t pad[4096 - sizeof(MpuHeader)];
  MpuWindow bank[2][kMpuWindows];
  // The count of bank b, written with the bank (the header's count is a
  // copy for observers).
  uint32_t bank_count[2];
  uint32_t reserved[14];
};
static_assert(offsetof(MpuBlock, bank) == 4096);

// ---- Errors ---------------------------------------------------------------
// A ring of records, writer: hw. `prod` is free-running; a reader keeps its
// own cursor and, finding prod - cursor > kErrorRecords, has lost the
// oldest prod - cursor - kErrorRecords of them.
enum ErrorSource : uint32_t { kSourceDma = 1, kSourceTensor = 2 };

struct ErrorRecord {
  uint32_t seq;        // prod value when written (so a torn read is detectable)
  uint32_t code;       // EngineError
  uint32_t source;     // ErrorSource
  uint32_t engine;     // engine index within its kind
  uint32_t queue;      // DMA: host queue index or kQueueFirmware; tensor: 0
  uint32_t status;     // the status the work completed with (dma::Status / TensorStatus)
  uint64_t address;    // the offending address (0 if none)
  uint64_t length;
  uint64_t cookie;     // of the chain / command
  uint32_t mpu_generation;
  uint32_t detail;     // code-specific (kEngineBadConfig: which field, ConfigField)
  uint64_t reserved;
};
static_assert(sizeof(ErrorRecord) == 64);
inline constexpr uint32_t kQueueFirmware = 0xffffffffu;
inline constexpr uint32_t kErrorRecords = 64;

struct ErrorBlock {
  hostif::CacheLineIndex prod;      // writer: hw
  hostif::CacheLineIndex reserved;
  ErrorRecord records[kErrorRecords];
};
static_assert(offsetof(ErrorBlock, records) == 128);

// ---- DMA engines ----------------------------------------------------------
// Per engine: the host-queue configuration, statistics, and a firmware
// queue (the dma_abi.h ring formats, in this region instead of BAR2).

// Which field of a DmaConfig was refused (ErrorRecord::detail and
// DmaEngineBlock::config_status >> 8).
enum ConfigField : uint32_t {
  kFieldNone = 0,
  kFieldRegion = 1,      // dma_region_offset / queue geometry outside BAR2
  kFieldGeometry = 2,    // queue_count / depth outside the dma_abi.h limits
  kFieldQueueMask = 3,   // a bit beyond queue_count
  kFieldWindow = 4,      // host window outside BAR2, or overlapping the DMA region
  kFieldHbm = 5,         // HBM range outside what vtrn-hw maps
  kFieldRemap = 6,       // remap window not page-aligned, wrapping, over HBM, or too large (ABI 1.2;
                         // TensorConfig too, ABI 1.3)
};
// The largest remap window a DMA or tensor engine accepts (it reserves that
// much address space to map translated windows into).
inline constexpr uint64_t kMaxRemapBytes = 1ull << 40;

// Writer: fw. The fw writes the fields, then bumps config_gen (release);
// the engine copies them, validates, and answers in config_ack/config_status.
struct DmaConfig {
  uint32_t config_gen;
  uint32_t host_queue_mask;     // bit q: serve host queue q (0 = no host queues)
  uint64_t dma_region_offset;   // of the dma_abi.h DMA region, from the start of BAR2
  uint32_t queue_count;         // of that region (DmaRegionHeader::queue_count)
  uint32_t depth;               // of that region (DmaRegionHeader::depth)
  uint64_t host_window_offset;  // from the start of BAR2
  uint64_t host_window_size;
  uint64_t hbm_base;            // the DMA-reachable HBM range (chip physical)
  uint64_t hbm_size;
  uint32_t host_irq_armed;      // 1 = kVectorDma0 + i on host-queue activity (for accounting)
  uint32_t flags;               // DmaConfigFlags (ABI 1.1; 0 before)
  // ABI 1.2 (reserved, zero, before): the device addresses of stitched HBM
  // allocations, reached only through kMpuTranslate windows. 0/0: none.
  uint64_t remap_base;
  uint64_t remap_size;
};
enum DmaConfigFlags : uint32_t {
  // The host queues are not served (the device is in D3hot) but keep their
  // state, chains in flight included: a config that differs from the one
  // in force only in this bit pauses or resumes them.
  kDmaConfigPaused = 1u << 0,
};
static_assert(sizeof(DmaConfig) == 80);
static_assert(offsetof(DmaConfig, remap_base) == 64);

// Writer: hw, read with the seqlock in `seq` (odd while updating).
struct EngineStats {
  uint32_t seq;
  uint32_t reserved0;
  uint64_t units;         // DMA: chains; tensor: commands
  uint64_t descriptors;   // DMA only
  uint64_t bytes;         // DMA: bytes moved; tensor: operand bytes read + written
  uint64_t flops;         // tensor only
  uint64_t errors;        // units completed with a non-ok status
  uint64_t busy_ns;       // wall time spent working
  uint64_t modeled_ns;    // what the modeled silicon would have taken
  uint64_t irqs;          // interrupts raised to the fw
  uint64_t host_irqs;     // interrupts raised to the host (DMA)
  uint64_t reserved[6];
};
static_assert(sizeof(EngineStats) == 128);

inline constexpr uint32_t kDmaFwDepth = 256;

struct DmaEngineBlock {
  DmaConfig config;                    // writer: fw
  uint8_t pad0[128 - sizeof(DmaConfig)];
  uint32_t config_ack;                 // writer: hw; = config_gen once applied or refused
  uint32_t config_status;              // writer: hw; EngineError | ConfigField << 8
  uint32_t state;                      // writer: hw; EngineState
  uint32_t reserved0[29];
  EngineStats stats;                   // writer: hw
  dma::QueueControl fw_queue;          // the dma_abi.h index rules
  dma::QueueStats fw_queue_stats;      // writer: hw
  uint8_t pad1[4096 - 384 - sizeof(dma::QueueControl) - sizeof(dma::QueueStats)];
  dma::Descriptor fw_sq[kDmaFwDepth];  // writer: fw
  dma::Completion fw_cq[kDmaFwDepth];  // writer: hw
};
static_assert(offsetof(DmaEngineBlock, config_ack) == 128);
static_assert(offsetof(DmaEngineBlock, stats) == 256);
static_assert(offsetof(DmaEngineBlock, fw_queue) == 384);
static_assert(offsetof(DmaEngineBlock, fw_sq) == 4096);

// DmaEngineBlock::state and TensorEngineBlock::state.
enum EngineState : uint32_t {
  kEngineIdle = 0,     // nothing to do (blocked)
  kEngineBusy = 1,     // working or spinning after work
  kEngineHalted = 2,   // an injected fault stopped it until the next chip reset (DMA)
};

// ---- Tensor engines -------------------------------------------------------
enum TensorOp : uint32_t {
  kTensorOpGemm = 1,  // C[m, n] = A[m, k] . B[n, k]^T, f32 out (numerics.h storage)
};

enum TensorFlags : uint32_t {
  kTensorIrq = 1u << 0,  // interrupt the fw when this command completes (irq_armed)
  kTensorKnownFlags = kTensorIrq,
};

// Writer: fw. Addresses are chip physical (HBM) or, for an engine given a
// remap window (TensorConfig, ABI 1.3), device addresses of stitched
// allocations inside it; each operand checked against the MPU as a whole
// (a remap-window operand only through translated windows, so it may run
// across the extents of one allocation): A rows are k elements apart, B rows too, C
// rows `ldc` floats apart. Splitting a GEMM across engines is the fw's
// business: a row tile is A and C (and A's scales) offset by rows.
struct TensorCommand {
  uint32_t opcode;    // TensorOp
  uint32_t dtype;     // num::DType
  uint32_t flags;     // TensorFlags
  uint32_t m, n, k;
  uint32_t ldc;       // C row stride in floats, >= n (0 = n)
  uint32_t reserved0;
  uint64_t a, a_scales, b, b_scales, c;  // scales: MXFP4 only, else 0
  uint64_t cookie;    // opaque; echoed in the completion
  uint64_t reserved[6];
};
static_assert(sizeof(TensorCommand) == 128);
static_assert(offsetof(TensorCommand, a) == 32);
static_assert(offsetof(TensorCommand, cookie) == 72);

// Tensor command status. Closed list; values are ABI.
enum TensorStatus : uint32_t {
  kTensorOk = 0,
  kTensorBadOpcode = 1,
  kTensorBadFlags = 2,
  kTensorBadShape = 3,     // num::check_gemm refused dtype/m/n/k, or ldc < n
  kTensorMisaligned = 4,   // an operand not aligned to its element (f32 4, bf16 2 bytes)
  kTensorAddrOverflow = 5, // an operand's address + extent wraps
  kTensorRange = 6,        // an operand outside HBM
  kTensorMpuFault = 7,     // an operand not inside one live MPU window (or poisoned)
  kTensorOverlap = 8,      // C overlaps A, B or a scale array
  kTensorInjected = 9,     // ControlBlock fault injection: this command was not executed
  kTensorStatusCount = 10,
};

struct TensorCompletion {
  uint64_t cookie;
  uint32_t status;        // TensorStatus
  uint32_t engine;
  uint64_t flops;         // 2 m n k when done
  uint64_t wall_ns;       // host time the engine spent on it
  uint64_t modeled_ns;    // flops / the board's rate for the dtype
  uint64_t reserved[3];
};
static_assert(sizeof(TensorCompletion) == 64);

inline constexpr uint32_t kTensorDepth = 64;

// ABI 1.3 (kCapTensorRemap). Writer: fw. The fw writes the fields, then
// bumps config_gen (release) and rings the engine's vector; the engine
// copies them between commands, validates them as a DmaConfig's remap window
// (page-aligned, not wrapping, not over the RAM vtrn-hw maps, at most
// kMaxRemapBytes; else kEngineBadConfig | kFieldRemap << 8, an error record
// with detail kFieldRemap, and no remap window) and answers in
// TensorEngineBlock::config_ack/config_status. Commands after the ack are
// resolved through the window: translated MPU windows map its device
// addresses onto their extents (phys inside IdBlock::hbm_base/hbm_size).
// 0/0: no remap window. A chip reset zeroes it.
struct TensorConfig {
  uint32_t config_gen;
  uint32_t reserved0;     // zero
  uint64_t remap_base;    // the firmware MMU's remap range, as in DmaConfig
  uint64_t remap_size;
  uint64_t reserved[5];   // zero
};
static_assert(sizeof(TensorConfig) == 64);
static_assert(offsetof(TensorConfig, remap_base) == 8);
static_assert(offsetof(TensorConfig, remap_size) == 16);

struct TensorEngineBlock {
  hostif::CacheLineIndex sq_prod;    // writer: fw
  hostif::CacheLineIndex sq_cons;    // writer: hw
  hostif::CacheLineIndex cq_prod;    // writer: hw
  hostif::CacheLineIndex cq_cons;    // writer: fw
  hostif::CacheLineIndex error;      // writer: hw; dma::QueueError values, latched until chip reset
  hostif::CacheLineIndex irq_armed;  // writer: fw
  hostif::CacheLineIndex state;      // writer: hw; EngineState
  hostif::CacheLineIndex reserved0;
  EngineStats stats;                 // writer: hw
  TensorConfig config;               // writer: fw (ABI 1.3; pad before, zero)
  uint32_t config_ack;               // writer: hw; = config_gen once applied or refused (ABI 1.3)
  uint32_t config_status;            // writer: hw; EngineError | ConfigField << 8 (ABI 1.3)
  uint32_t reserved1[14];
  uint8_t pad[1024 - 8 * 64 - sizeof(EngineStats) - sizeof(TensorConfig) - 64];
  TensorCommand sq[kTensorDepth];    // writer: fw
  TensorCompletion cq[kTensorDepth]; // writer: hw
};
static_assert(offsetof(TensorEngineBlock, stats) == 512);
static_assert(offsetof(TensorEngineBlock, config) == 640);
static_assert(offsetof(TensorEngineBlock, config_ack) == 704);
static_assert(offsetof(TensorEngineBlock, config_status) == 708);
static_assert(offsetof(TensorEngineBlock, pad) == 768);
static_assert(offsetof(TensorEngineBlock, sq) == 1024);

// ---- Layout ---------------------------------------------------------------
inline constexpr uint64_t kIdOffset = 0x0;
inline constexpr uint64_t kControlOffset = 0x1000;
inline constexpr uint64_t kErrorOffset = 0x2000;
inline constexpr uint64_t kMpuOffset = 0x4000;
inline constexpr uint64_t kDmaEnginesOffset = 0x10000;
inline constexpr uint64_t kDmaEngineStride = 0x4000;
inline constexpr uint64_t kTensorEnginesOffset = kDmaEnginesOffset + kMaxDmaEngines * kDmaEngineStride;
inline constexpr uint64_t kTensorEngineStride = 0x4000;
inline constexpr uint64_t kLayoutEnd = kTensorEnginesOffset + kMaxTensorEngines * kTensorEngineStride;

static_assert(kControlOffset >= sizeof(IdBlock));
static_assert(kControlOffset + sizeof(ControlBlock) <= kErrorOffset);
static_assert(kErrorOffset + sizeof(ErrorBlock) <= kMpuOffset);
static_assert(kMpuOffset + sizeof(MpuBlock) <= kDmaEnginesOffset);
static_assert(sizeof(DmaEngineBlock) <= kDmaEngineStride);
static_assert(sizeof(TensorEngineBlock) <= kTensorEngineStride);
static_assert(kLayoutEnd <= kRegionBytes);
static_assert((kRegionBytes & (kRegionBytes - 1)) == 0);

constexpr uint64_t dma_engine_offset(uint32_t i) { return kDmaEnginesOffset + uint64_t(i) * kDmaEngineStride; }
constexpr uint64_t tensor_engine_offset(uint32_t j) {
  return kTensorEnginesOffset + uint64_t(j) * kTensorEngineStride;
}

}  // namespace vtrn::engine
