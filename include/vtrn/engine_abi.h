// vtrn engine ABI v1.4: the register and queue region of a chip's hardware
// engines (DMA engines, tensor engines, link engines), shared byte for byte by the
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
// hal/tensor (and, ABI 1.4, hal/link for the link engines). DMA descriptors and completions are the dma_abi.h formats, and
// the host's DMA queues in BAR2 keep that ABI unchanged: the DMA engines
// serve them directly.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dma_abi.h"
#include "vtrn/hostif.h"
#include "vtrn/links_abi.h"

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
// 1.4: link engines (kCapLinkEngines): a LinkEngineBlock per link port of
//      the chip (IdBlock::link_ports, was reserved0, zero), their vectors
//      kVectorLink0 + p (kVectorCount 17 -> 33), kSourceLink error records,
//      kFieldLink. Gated by the capability: without it the blocks are zero
//      and nothing serves them.
inline constexpr uint16_t kAbiMinor = 4;

// PCI placement and the ivshmem peers of the engine function.
inline constexpr uint32_t kEnginePciDevice = 2;     // 00:02.0 (host interface: 00:01.0)
inline constexpr uint16_t kEngineHwPeerId = 0;      // vtrn-hw
inline constexpr uint16_t kEngineChipPeerId = 1;    // the chip
inline constexpr uint64_t kRegionBytes = 1u << 20;  // BAR2 size: a power of two

inline constexpr uint32_t kMaxDmaEngines = 8;
inline constexpr uint32_t kMaxTensorEngines = 8;  // one per NeuronCore (vtrn,neuron-cores <= 8)
inline constexpr uint32_t kMaxLinkPorts = 16;     // one link engine per link port (links::kMaxPorts)

// MSI-X / doorbell vectors. Firmware -> hw on a vector is that block's
// doorbell; hw -> firmware on a vector is that block's interrupt.
//  kVectorControl: fw -> hw: ControlBlock or MpuBlock changed;
//                  hw -> fw: an error record was posted (ErrorBlock).
//  kVectorDma0 + i: fw -> hw: DMA engine i's firmware queue or config;
//                   hw -> fw: an IRQ chain completed on its firmware queue
//                   (irq_armed), or host-queue activity (host_irq_armed).
//  kVectorTensor0 + j: fw -> hw: tensor engine j's command queue;
//                      hw -> fw: an IRQ command completed (irq_armed).
//  kVectorLink0 + p (ABI 1.4): fw -> hw: link port p's send or receive
//                   queue, or its LinkConfig; hw -> fw: a send or receive
//                   completion with kLinkIrq was posted (irq_armed).
inline constexpr uint16_t kVectorControl = 0;
inline constexpr uint16_t kVectorDma0 = 1;
inline constexpr uint16_t kVectorTensor0 = kVectorDma0 + kMaxDmaEngines;
inline constexpr uint16_t kVectorLink0 = kVectorTensor0 + kMaxTensorEngines;  // 17 (ABI 1.4)
inline constexpr uint16_t kVectorCount = kVectorLink0 + kMaxLinkPorts;         // 33 (17 before 1.4)
static_assert(kVectorLink0 == 17 && kVectorCount == 33);

// IdBlock::capabilities.
enum Capability : uint64_t {
  kCapDmaFwQueue = 1u << 0,     // each DMA engine has a firmware queue (DmaEngineBlock)
  kCapDmaHostQueues = 1u << 1,  // DMA engines serve the host's BAR2 DMA queues (DmaConfig)
  kCapTensorGemm = 1u << 2,     // tensor engines execute kTensorOpGemm
  kCapMpu = 1u << 3,            // MpuBlock is enforced
  kCapFaultInject = 1u << 4,    // ControlBlock::inject_* is honoured
  kCapModeledTime = 1u << 5,    // completions and stats carry modeled time
  kCapTensorRemap = 1u << 6,    // ABI 1.3: tensor engines take a remap window (TensorConfig)
  kCapLinkEngines = 1u << 7,    // ABI 1.4: link engines serve the LinkEngineBlocks (link_ports of them)
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
  uint32_t link_ports;               // ABI 1.4 (reserved0, zero, before): LinkEngineBlocks served, 0..kMaxLinkPorts
  char hw_build[32];                 // NUL-terminated vtrn-hw build string
  uint64_t reserved[8];
};
static_assert(offsetof(IdBlock, capabilities) == 16);
static_assert(offsetof(IdBlock, hbm_base) == 48);
static_assert(offsetof(IdBlock, dma_bytes_per_s) == 64);
static_assert(offsetof(IdBlock, chip_id) == 112);
static_assert(offsetof(IdBlock, link_ports) == 116);
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
enum ErrorSource : uint32_t { kSourceDma = 1, kSourceTensor = 2, kSourceLink = 3 /* ABI 1.4 */ };

struct ErrorRecord {
  uint32_t seq;        // prod value when written (so a torn read is detectable)
  uint32_t code;       // EngineError
  uint32_t source;     // ErrorSource
  uint32_t engine;     // engine index within its kind
  uint32_t queue;      // DMA: host queue index or kQueueFirmware; tensor: 0; link: kLinkQueue*
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
  kFieldLink = 7,        // ABI 1.4: LinkConfig speed, width, state or BER out of range
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

// ---- Link engines (ABI 1.4, kCapLinkEngines) -------------------------------
// One per link port p of the chip (IdBlock::link_ports of them; the port
// numbers of the board DT, vtrn,link-port reg). The firmware keeps link
// management (training, power states, counters of its own); the engine moves
// the data. A send descriptor names an HBM range of this chip and the
// destination as the board wires this port (chip + port of the other end,
// /links); the engine copies it natively, checked against this chip's MPU,
// into the oldest posted receive buffer of that peer port, checked against
// the peer chip's MPU, and completes both sides: a send completion here
// (scq) and a receive completion at the peer (rcq). Nothing else reaches the
// peer's memory. Sends of one port complete in order; a send whose peer has
// no buffer posted waits at the head of the queue (a credit stall, counted
// once per send) until the peer posts one or the link goes away.
//
// Modeled time (completions and stats, kCapModeledTime): the transfer is cut
// into frames of kLinkFramePayload bytes, each carrying kLinkFrameOverhead
// bytes of header, sequence number and CRC, serialised at the trained speed
// x width (128b/130b encoding) plus kLinkLatencyNs of flight. An injected
// bit-error rate corrupts frames at random (seeded, reproducible); each
// corrupted frame is a CRC error at the receiver and a replay (counted,
// costing the frame again plus kLinkReplayNs of NAK and replay-timer); the
// data delivered is always the correct data. A frame corrupted
// kLinkMaxReplays times in a row fails the send: kLinkReplayLimit.
//
// Same index conventions as the rest of the region; doorbell kVectorLink0 +
// p after advancing sq_prod, rq_prod or config_gen, and after advancing
// scq_cons or rcq_cons of a ring that was full (a send waiting for room in
// a completion ring moves on that wake-up: the engine has no timer).

inline constexpr uint32_t kLinkSendDepth = 64;
inline constexpr uint32_t kLinkRecvDepth = 64;
static_assert(kMaxLinkPorts == links::kMaxPorts);
inline constexpr uint32_t kLinkFramePayload = 2048;
static_assert(kLinkFramePayload == links::kLinkMaxPayload);
inline constexpr uint32_t kLinkFrameOverhead = 32;         // bytes per frame on the wire
inline constexpr uint64_t kLinkLatencyNs = 500;            // flight time of one transfer
inline constexpr uint64_t kLinkReplayNs = 2 * kLinkLatencyNs;  // NAK back + replay
inline constexpr uint32_t kLinkMaxReplays = 8;             // consecutive, per frame
inline constexpr uint64_t kLinkMaxTransfer = 1ull << 30;   // bytes per send
inline constexpr uint64_t kLinkBerScale = 1000000000000ull;  // LinkConfig::ber_e12 of 1.0

enum LinkFlags : uint32_t {
  kLinkIrq = 1u << 0,  // interrupt this chip when this entry completes (irq_armed)
  kLinkKnownFlags = kLinkIrq,
};

// Writer: fw. addr is chip physical (HBM; remap-window addresses reach
// nothing: link engines take no remap window).
struct LinkSendDescriptor {
  uint64_t addr;
  uint64_t length;      // 1..kLinkMaxTransfer
  uint32_t dest_chip;   // the chip at the other end of this port (/links)
  uint32_t dest_port;   // its port
  uint32_t tag;         // opaque; delivered in the receive completion
  uint32_t flags;       // LinkFlags
  uint64_t cookie;      // opaque; echoed in the send completion
  uint64_t reserved[3]; // zero
};
static_assert(sizeof(LinkSendDescriptor) == 64);
static_assert(offsetof(LinkSendDescriptor, dest_chip) == 16);
static_assert(offsetof(LinkSendDescriptor, tag) == 24);
static_assert(offsetof(LinkSendDescriptor, cookie) == 32);

// Writer: fw. A buffer the peer's next send may land in.
struct LinkRecvBuffer {
  uint64_t addr;
  uint64_t length;      // 1..kLinkMaxTransfer
  uint64_t cookie;      // opaque; echoed in the receive completion
  uint32_t flags;       // LinkFlags
  uint32_t reserved;    // zero
};
static_assert(sizeof(LinkRecvBuffer) == 32);
static_assert(offsetof(LinkRecvBuffer, cookie) == 16);
static_assert(offsetof(LinkRecvBuffer, flags) == 24);

// Link completion status, send and receive side. Closed list; values are ABI.
enum LinkStatus : uint32_t {
  kLinkOk = 0,
  kLinkBadDescriptor = 1,   // length 0 or > kLinkMaxTransfer, unknown flags, reserved nonzero, address wraps
  kLinkUnwired = 2,         // this port is not wired to a chip port on the board
  kLinkWrongPeer = 3,       // dest_chip/dest_port is not the other end of this port
  kLinkDown = 4,            // this port or the peer port is not up (LinkConfig::state)
  kLinkPeerReset = 5,       // the peer chip is in reset, or was reset while this send waited
  kLinkBufferTooSmall = 6,  // the send is longer than the oldest posted buffer (both complete)
  kLinkBadAddress = 7,      // this side's range is outside the chip's RAM
  kLinkMpuFault = 8,        // this side's range is not inside one live MPU window (or is poisoned)
  kLinkPeerFault = 9,       // the other side's range failed (its own completion says how)
  kLinkReplayLimit = 10,    // a frame was corrupted kLinkMaxReplays times in a row
  kLinkStatusCount = 11,
};

// Writer: hw. Send side: bytes sent, tag of the send, peer = receiver.
// Receive side: bytes received, the send's tag, peer = sender.
struct LinkCompletion {
  uint64_t cookie;
  uint32_t status;        // LinkStatus
  uint32_t tag;
  uint64_t bytes;
  uint64_t modeled_ns;    // serialisation + replays + latency (0 when nothing moved)
  uint32_t peer_chip;
  uint32_t peer_port;
  uint32_t replays;       // frames replayed for this transfer
  uint32_t reserved0;
  uint64_t reserved[2];
};
static_assert(sizeof(LinkCompletion) == 64);
static_assert(offsetof(LinkCompletion, bytes) == 16);
static_assert(offsetof(LinkCompletion, peer_chip) == 32);

enum LinkConfigState : uint32_t { kLinkStateDown = 0, kLinkStateUp = 1 };

// Writer: fw (the firmware's link management publishes what it trained).
// The fw writes the fields, then bumps config_gen (release) and rings the
// port's vector; the engine copies them between sends, validates (state 0/1;
// up: speed 1..128 GT/s, width 1, 2, 4, 8 or 16, ber_e12 <= kLinkBerScale;
// else kEngineBadConfig | kFieldLink << 8 and an error record, the port
// down) and answers in config_ack/config_status. A chip reset zeroes it:
// down.
struct LinkConfig {
  uint32_t config_gen;
  uint32_t state;          // LinkConfigState
  uint32_t speed_gtps;     // trained speed per lane
  uint32_t width;          // trained lanes
  uint64_t ber_e12;        // injected bit-error rate x 1e12 (0: none)
  uint64_t ber_seed;       // seed of the error pattern (the same seed, the same replays)
  uint64_t reserved[4];    // zero
};
static_assert(sizeof(LinkConfig) == 64);
static_assert(offsetof(LinkConfig, ber_e12) == 16);

// Writer: hw, read with the seqlock in `seq` (odd while updating).
struct LinkStats {
  uint32_t seq;
  uint32_t reserved0;
  uint64_t sends;          // send completions posted
  uint64_t recvs;          // receive completions posted
  uint64_t frames_tx;      // frames sent, replays included
  uint64_t frames_rx;      // frames received good
  uint64_t bytes_tx;       // payload bytes delivered from this port
  uint64_t bytes_rx;       // payload bytes delivered into this port's buffers
  uint64_t replays;        // frames this port sent again
  uint64_t crc_errors;     // corrupted frames this port received
  uint64_t credit_stalls;  // sends that waited for a posted buffer at the peer
  uint64_t errors;         // completions with a non-ok status (both queues)
  uint64_t modeled_ns;     // sum over this port's send completions
  uint64_t irqs;           // interrupts raised to the fw
  uint64_t reserved[3];
};
static_assert(sizeof(LinkStats) == 128);

// Error records of a link engine: source kSourceLink, engine = port, queue
// one of these, status a LinkStatus.
inline constexpr uint32_t kLinkQueueSend = 0;
inline constexpr uint32_t kLinkQueueRecv = 1;

struct LinkEngineBlock {
  hostif::CacheLineIndex sq_prod;    // writer: fw; send descriptors
  hostif::CacheLineIndex sq_cons;    // writer: hw
  hostif::CacheLineIndex scq_prod;   // writer: hw; send completions
  hostif::CacheLineIndex scq_cons;   // writer: fw
  hostif::CacheLineIndex rq_prod;    // writer: fw; posted receive buffers
  hostif::CacheLineIndex rq_cons;    // writer: hw
  hostif::CacheLineIndex rcq_prod;   // writer: hw; receive completions
  hostif::CacheLineIndex rcq_cons;   // writer: fw
  hostif::CacheLineIndex error;      // writer: hw; dma::QueueError values, latched until chip reset
  hostif::CacheLineIndex irq_armed;  // writer: fw
  hostif::CacheLineIndex state;      // writer: hw; EngineState
  hostif::CacheLineIndex mpu_ack;    // writer: hw; the MPU generation, as MpuHeader::*_ack
  LinkConfig config;                 // writer: fw
  uint32_t config_ack;               // writer: hw; = config_gen once applied or refused
  uint32_t config_status;            // writer: hw; EngineError | ConfigField << 8
  uint32_t reserved1[14];
  LinkStats stats;                   // writer: hw
  LinkSendDescriptor sq[kLinkSendDepth];  // writer: fw
  LinkRecvBuffer rq[kLinkRecvDepth];      // writer: fw
  LinkCompletion scq[kLinkSendDepth];     // writer: hw
  LinkCompletion rcq[kLinkRecvDepth];     // writer: hw
};
static_assert(offsetof(LinkEngineBlock, sq_cons) == 64);
static_assert(offsetof(LinkEngineBlock, rq_prod) == 256);
static_assert(offsetof(LinkEngineBlock, error) == 512);
static_assert(offsetof(LinkEngineBlock, mpu_ack) == 704);
static_assert(offsetof(LinkEngineBlock, config) == 768);
static_assert(offsetof(LinkEngineBlock, config_ack) == 832);
static_assert(offsetof(LinkEngineBlock, config_status) == 836);
static_assert(offsetof(LinkEngineBlock, stats) == 896);
static_assert(offsetof(LinkEngineBlock, sq) == 1024);
static_assert(offsetof(LinkEngineBlock, rq) == 5120);
static_assert(offsetof(LinkEngineBlock, scq) == 7168);
static_assert(offsetof(LinkEngineBlock, rcq) == 11264);
static_assert(sizeof(LinkEngineBlock) == 15360);

// ---- Layout ---------------------------------------------------------------
inline constexpr uint64_t kIdOffset = 0x0;
inline constexpr uint64_t kControlOffset = 0x1000;
inline constexpr uint64_t kErrorOffset = 0x2000;
inline constexpr uint64_t kMpuOffset = 0x4000;
inline constexpr uint64_t kDmaEnginesOffset = 0x10000;
inline constexpr uint64_t kDmaEngineStride = 0x4000;
inline constexpr uint64_t kTensorEnginesOffset = kDmaEnginesOffset + kMaxDmaEngines * kDmaEngineStride;
inline constexpr uint64_t kTensorEngineStride = 0x4000;
inline constexpr uint64_t kLinkEnginesOffset = kTensorEnginesOffset + kMaxTensorEngines * kTensorEngineStride;
inline constexpr uint64_t kLinkEngineStride = 0x4000;
inline constexpr uint64_t kLayoutEnd = kLinkEnginesOffset + kMaxLinkPorts * kLinkEngineStride;
static_assert(kLinkEnginesOffset == 0x50000 && kLayoutEnd == 0x90000);

static_assert(kControlOffset >= sizeof(IdBlock));
static_assert(kControlOffset + sizeof(ControlBlock) <= kErrorOffset);
static_assert(kErrorOffset + sizeof(ErrorBlock) <= kMpuOffset);
static_assert(kMpuOffset + sizeof(MpuBlock) <= kDmaEnginesOffset);
static_assert(sizeof(DmaEngineBlock) <= kDmaEngineStride);
static_assert(sizeof(TensorEngineBlock) <= kTensorEngineStride);
static_assert(sizeof(LinkEngineBlock) <= kLinkEngineStride);
static_assert(kLayoutEnd <= kRegionBytes);
static_assert((kRegionBytes & (kRegionBytes - 1)) == 0);

constexpr uint64_t dma_engine_offset(uint32_t i) { return kDmaEnginesOffset + uint64_t(i) * kDmaEngineStride; }
constexpr uint64_t tensor_engine_offset(uint32_t j) {
  return kTensorEnginesOffset + uint64_t(j) * kTensorEngineStride;
}
constexpr uint64_t link_engine_offset(uint32_t p) { return kLinkEnginesOffset + uint64_t(p) * kLinkEngineStride; }

}  // namespace vtrn::engine
