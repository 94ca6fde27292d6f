// fw::collectives: the chip's part of ring collectives (all-reduce,
// all-gather) run as jobs. vtrnd sends one CollectiveSubmitRequest per chip
// (vtrn.ctrl field 42) naming the HBM buffers, this chip's rank and the two
// link ports of the ring; the service runs the portable state machine
// (fw/collective.h) on core 0 over fw::links' ports and ends every accepted
// submit with exactly one CollectiveEvent.
//
// It is not the link layer and not the kernel scheduler: collectives move
// data between chips, so they run where the link ports are polled (core 0's
// event loop), one at a time per chip, while kernel jobs run on the
// executor cores. Frames of a collective whose submit has not arrived yet
// (the neighbour started first) are held at the head of the port's queue
// for a bounded time, so chips may start in any order.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/pb_arena.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::collectives {

// Registers with fw::links as its frame client (after links::init).
void init();

// The collective part of the vtrn.ctrl jobs range. False for other requests.
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap);

using EventSender = bool (*)(const Vtrn__Ctrl__Event& event);
// Event loop, every turn: sends the end event of a finished collective
// (kept for the next turn when the ring is full). True when one was queued.
bool poll(EventSender send);

// WFI condition: a collective runs or its event is owed.
bool has_work();

}  // namespace fw::collectives
