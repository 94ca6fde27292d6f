// fw::smp: bringing up the chip's other vCPUs (NeuronCores 1..N-1) with PSCI
// CPU_ON, and waking them.
//
// Core 0 prepares each secondary's context (its own stack and exception
// stack, each above an unmapped guard page from boot/firmware.ld, and its
// own copy of picolibc's TLS block), then asks the PSCI implementation below
// (QEMU's, through the DT's /psci method) to start the core at
// _secondary_start (boot/start.S). There the core gets its stacks, FP/SIMD
// and vectors, then fw_secondary_main turns on the MMU with core 0's tables,
// enables its banked GIC CPU interface and wake SGIs, reports online and
// runs the entry function it was given, forever. Core 0 does not wait for
// them (collect_online tells it who has arrived).
//
// Wake-ups are SGIs, not SEV: QEMU's TCG implements WFE as a yield (the
// vCPU spins), while WFI really stops the vCPU until an interrupt is
// pending, so an idle core sleeps in WFI and is woken by kSgiWake.
// A panic on any core sends kSgiStop to the others, which park.
#pragma once

#include <stdint.h>

#include "fw/platform.h"

namespace hal::gic {
class Gic;
}

namespace fw::smp {

inline constexpr uint32_t kMaxCores = platform::kMaxCpus;
inline constexpr uint32_t kSgiWake = 1;  // "work for you": the handler only counts
inline constexpr uint32_t kSgiStop = 2;  // another core panicked: park

// Stacks of secondary core `core` (1..kMaxCores-1), from boot/firmware.ld:
// [guard 4K][stack][guard 4K][exception stack], lowest address first.
struct CoreStacks {
  uint64_t guard;
  uint64_t top;
  uint64_t exception_guard;
  uint64_t exception_top;
};
CoreStacks stacks_of(uint32_t core);
// Guard pages of every secondary stack (for fw::mmu, which leaves them
// unmapped, and fw_exception, which names an overflow). Returns the count.
uint32_t guard_pages(uint64_t* out, uint32_t cap);

using Entry = void (*)(uint32_t core);

// Starts cores 1..cores-1 (cores <= platform.cpu_count) running `entry`
// and returns without waiting for them; returns how many cores were asked
// to run (core 0 included; 1 when the platform has no PSCI). Needs the GIC
// initialised and every mapping the secondaries use already made.
uint32_t start(const platform::Platform& platform, hal::gic::Gic* gic, uint32_t cores,
               Entry entry);
// Core 0: the mask of cores online now (bit 0 always). Logs each core's
// arrival once, and once a core that is not online `timeout_ns` after its
// CPU_ON.
uint32_t collect_online(uint64_t timeout_ns);
// True once every started core has been logged as online or late.
bool all_reported();

// Core index of the caller (0..kMaxCores-1), from MPIDR and the DT's list.
uint32_t this_core();
// True once `core` reported online (core 0 always).
bool online(uint32_t core);

// Sends kSgiWake to the cores in `mask` (bit n = core n). Safe from any core.
void wake(uint32_t mask);
// Sends kSgiStop to every core but the caller (panic path).
void stop_others();

}  // namespace fw::smp
