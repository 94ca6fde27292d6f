// fw::jobs: the chip's job service, the firmware glue around the portable
// scheduler (fw/job_sched.h) and job model (fw/job_model.h).
//
// Core 0 is the service core: it serves JobSubmit/JobCancel from the
// control queue, validates against the HBM allocator (fw::hbm::check),
// dispatches, advances steps, enforces timeouts on the telemetry tick,
// sends exactly one JobEvent per accepted job into the response ring, and
// mirrors the table into BAR2 (kRegionJobs, include/vtrn/jobs_abi.h).
// Cores 1..N-1 are executors (fw::smp starts them at executor_main): they
// run kernel chunks and sleep in WFI when there is nothing to claim. Core 0
// executes chunks itself only when it is the chip's only core (a 1-core
// board, or no secondary came up), one chunk per event-loop turn so the
// control queue and DMA stay served between chunks; with secondaries it
// stays a pure service core, so control latency never waits on a kernel.
//
// Not the DMA part of a job: vtrnd moves inputs in and outputs out around
// the kernel steps; the firmware only runs kernels over HBM buffers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/pb_arena.h"
#include "vtrn/hostif.h"
#include "vtrn_ctrl.pb-c.h"

namespace hal::gic {
class Gic;
}
namespace fw::platform {
struct Platform;
}

namespace fw::jobs {

struct ServiceConfig {
  uint8_t* bar2 = nullptr;       // BAR2 base (kRegionJobs lives at hostif::kJobsOffset)
  uint64_t bar2_size = 0;
  vtrn::hostif::FwHeader* header = nullptr;  // kCapJobs is set here
  uint32_t neuron_cores = 1;     // board's vtrn,neuron-cores
};

// Boot, after the HBM and power services: sets up fw::cores, the scheduler
// and the BAR2 table. The secondary cores are started through fw::smp on
// poll()'s first call, after READY, without waiting for them (each becomes
// an executor when poll() sees it online). `platform` and `gic` must
// outlive the service. Returns the NeuronCores it will use.
uint32_t init(const ServiceConfig& cfg, const platform::Platform& platform, hal::gic::Gic* gic);

// The vtrn.ctrl jobs range (for ChipBackend::do_serve).
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap);

using EventSender = bool (*)(const Vtrn__Ctrl__Event& event);
// Event loop, every turn: advances jobs, starts queued ones, sends end
// events (a full ring keeps the event for the next turn). Returns true when
// an event was queued (the caller rings the host's control vector).
bool poll(EventSender send);
// Telemetry tick: timeouts, progress and per-core rows of the BAR2 table.
void tick();
// Core 0, single-core chips only: runs one kernel chunk if one is ready.
void run_on_service_core();
// WFI condition of the event loop: true when poll() or
// run_on_service_core() has work now.
bool has_work();
// Telemetry v2 jobs_* fields.
void fill_telemetry(vtrn::hostif::Telemetry* t);

// Entry of executor cores (fw::smp), never returns.
[[noreturn]] void executor_main(uint32_t core);

}  // namespace fw::jobs
