// The handshake between the engines_check.elf bare-metal image and the test
// harness that plays its host (hw/test/hw_chip_test.cpp): a block at offset 0
// of the host interface BAR2, standing in for the firmware's FwHeader in this
// test only. The harness writes `mode` before QEMU starts; afterwards each
// field has one writer (noted), as in the real ABI.
#pragma once

#include <stdint.h>

namespace bm::mailbox {

inline constexpr uint32_t kMagic = 0x57484d42;  // "BMHW"

enum Mode : uint32_t {
  kModeCheck = 0,  // the whole check
  kModeCrash = 1,  // start a GEMM, ask the harness to kill vtrn-hw, detect it
};

// Mailbox::state (writer: image).
enum State : uint32_t {
  kBooting = 0,
  kHostTurn = 1,  // host DMA queues configured: the host may copy now
  kKillNow = 2,   // crash mode: GEMMs in flight, kill vtrn-hw
  kDone = 3,      // gemms[] final
};

// Mailbox::host_state (writer: harness).
enum HostState : uint32_t { kHostIdle = 0, kHostDone = 1 };

struct GemmRecord {
  uint32_t dtype, m, n, k;
  uint64_t a, a_scales, b, b_scales;
  uint64_t c_engine;  // computed by the tensor engines
  uint64_t c_core;    // computed by the on-core kernel
  uint64_t wall_ns;   // sum over the tiles' completions
  uint64_t modeled_ns;
};

inline constexpr uint32_t kMaxGemms = 8;

struct Mailbox {
  uint32_t magic;        // writer: image
  uint32_t mode;         // writer: harness, before boot
  uint32_t state;        // writer: image
  uint32_t host_state;   // writer: harness
  // Where the host copies (writer: image).
  uint64_t dma_region_offset;
  uint64_t window_offset;
  uint64_t window_size;
  uint32_t queues, depth;
  uint64_t hbm_dst;      // host window -> here -> back to the window
  uint32_t host_bytes;
  uint32_t host_status;  // writer: harness; 0 = both copies ok and verified
  uint32_t gemm_count;   // writer: image
  uint32_t reserved;
  GemmRecord gemms[kMaxGemms];
};

inline constexpr uint64_t kDmaRegionOffset = 0x100000;
inline constexpr uint32_t kQueues = 2;
inline constexpr uint32_t kDepth = 64;
inline constexpr uint64_t kWindowOffset = 0x200000;

}  // namespace bm::mailbox
