// fw::reliability: faults the host can ask the firmware to commit, so the
// watchdog, panic and reset paths of vtrnd are tested against the real
// failure and not a simulation of it (vtrn inject hang|stall|panic).
//
// serve() only validates and arms the fault and answers OK: the response
// must reach the host before the firmware breaks, otherwise the host would
// see a control-request timeout instead of the failure under test. poll(),
// called from the event loop after the control queue has been served and
// the host rung, commits the armed fault:
//  - HANG: IRQs masked, spin forever (no heartbeat, no doorbells);
//  - STALL: IRQs enabled, sleep in WFI forever (interrupts are taken, the
//    loop that beats the heartbeat never runs);
//  - PANIC: a load from an address the MMU does not map, which takes the
//    real synchronous-exception path into fw::panic.
// Only a reset ends a committed fault. This is not a general fault
// framework: DMA ring corruption and QEMU death are done by the host.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/pb_arena.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::reliability {

// ChipBackend::do_serve chain: true when `req` is a reliability request
// (then `resp` is filled). `heartbeat` is echoed in the response.
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap, uint64_t heartbeat);

// Commits an armed fault; returns at once when none is armed.
void poll();

}  // namespace fw::reliability
