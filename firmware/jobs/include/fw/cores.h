// fw::cores: what each NeuronCore (one vCPU of the chip) is doing and how
// long it has spent in each state, for the power model and telemetry.
//
// A core's record has one writer, the core itself (core 0 writes the records
// of cores that are still off); readers on any core take a consistent copy
// through the record's seqlock. Times
// are accumulated on each state change, and snapshot() adds the time spent
// in the current state up to "now", so a core that sleeps for a second still
// shows a second of idle time without having to wake to account for it.
//
// Not a scheduler: which job runs where is fw::jobs; this is bookkeeping.
// Portable except for the clock: the firmware passes fw::arch::now_ns, host
// tests pass a fake clock.
#pragma once

#include <stdint.h>

#include "vtrn/jobs_abi.h"

namespace fw::cores {

inline constexpr uint32_t kMaxCores = 8;  // vtrn,neuron-cores binding: 1..8

// The numbers are the BAR2 job table's (CoreEntryState) and the power
// model's core states (fw::power::CoreSample::state).
enum CoreState : uint32_t {
  kCoreOff = vtrn::jobs::kCoreEntryOff,          // not brought up (yet), or failed to come up
  kCoreIdle = vtrn::jobs::kCoreEntryIdle,        // sleeping in WFI, waiting for work
  kCoreRunning = vtrn::jobs::kCoreEntryRunning,  // executing kernel chunks; core 0's service
                                                 // work is not counted here (the power
                                                 // model uses its WFI time)
};

struct CoreSnapshot {
  uint32_t state;               // CoreState
  uint32_t intensity_permille;  // how hard the running kernel drives the core, 0..1000
  uint64_t busy_ns;             // time in kCoreRunning since boot
  uint64_t idle_ns;             // time in kCoreIdle since boot
  uint64_t off_ns;              // time in kCoreOff since boot
};

using Clock = uint64_t (*)();

// Sets the core count (1..kMaxCores) and the clock; every core starts off at
// time clock(). Called once by core 0 before any secondary starts.
void init(uint32_t count, Clock clock);

// Cores of this chip (the vCPUs QEMU gives it).
uint32_t count();

// Consistent copy of `core`'s record with the current state's time added.
// A core >= count() reads as off with zero times.
void snapshot(uint32_t core, CoreSnapshot* out);

// Called by `core` itself (core 0 for a core that never came up): enters
// `state` now. `intensity_permille` is kept while running and reads 0 otherwise.
void set_state(uint32_t core, CoreState state, uint32_t intensity_permille);

}  // namespace fw::cores
