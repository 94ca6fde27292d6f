// fw::links: the chip's link ports. One vtrn::link::Port per port the board
// defines, each bound to the ivshmem-plain PCIe function vtrnd placed at
// slot links_abi kPortSlotBase + port; the service polls them from the main
// loop, publishes their status and counters into BAR2 (kRegionLinks,
// vtrn/links_abi.h) and serves the LinkControl ctrl request.
//
// It is not the link protocol (common/link) and not PCIe enumeration
// (hal::pcie): main.cpp hands it the enumerated functions. Portable except
// for attach_pcie (links_pcie.cpp), so host tests can drive it over plain
// memory. The loop has no thread of its own: a trained, idle link only needs
// a heartbeat every few tens of milliseconds, training needs about one poll
// per millisecond, so next_poll_ns() tells the loop when to wake.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/board.h"
#include "vtrn/link.h"
#include "vtrn_ctrl.pb-c.h"

namespace hal::pcie {
class Ecam;
struct Topology;
}  // namespace hal::pcie

namespace fw::pb {
class Arena;
}

namespace fw::links {

// Offers one PCIe function's shared memory. Returns false (and takes
// nothing) when the slot is not a link-port slot.
bool add_function(uint32_t slot, uint8_t* base, uint64_t size);

// Every ivshmem-plain function of the enumerated bus (links_pcie.cpp).
// Returns how many were taken as link ports.
uint32_t attach_pcie(const hal::pcie::Ecam& ecam, const hal::pcie::Topology& topo);

// Binds the board's ports to the functions added so far, starts every wired
// port with a function in Detect and publishes the first status block at
// `block` (kLinksSize bytes of BAR2).
void init(const vtrn::board::Chip& chip, uint8_t* block, uint64_t block_size, uint64_t now_ns);

// Advances every port; publishes the block when something changed or every
// few milliseconds. Cheap when nothing is due.
void poll(uint64_t now_ns);

// Absolute time (ns) by which poll() must run again; UINT64_MAX when no port
// is active.
uint64_t next_poll_ns();

// Ports in L0 (or L0s/L1), for logs and telemetry.
uint32_t ports_up();

// ---- collectives: other users of the ports' frames ----
// One client besides the test traffic (firmware/collectives). Frames whose
// first four bytes are `magic` go to on_frame, which returns true when it
// took the frame and false to leave it at the head of the port's receive
// queue (offered again on a later poll; the sender is held back by the link
// layer's credits meanwhile). pump runs at the start of every poll to queue
// what the client wants to send; while it returns true the loop keeps
// polling without sleeping.
struct FrameClient {
  uint32_t magic;
  bool (*on_frame)(uint32_t port, const uint8_t* data, uint32_t length, uint64_t now_ns);
  bool (*pump)(uint64_t now_ns);
};
void set_frame_client(const FrameClient* client);
// Queues one frame on board port `port` (kOk, kFull: window full, kDown,
// kTooLarge, kBadArgument: no such running port).
vtrn::link::LinkStatus send_frame(uint32_t port, const void* data, uint32_t length);
// Frames port `port` accepts now without kFull (0 for a port not running).
uint32_t tx_space(uint32_t port);
// Largest frame payload of a port.
uint32_t max_frame_payload();
// True when `port` runs a link to a chip; else false with one line in why.
// Either way *state is the port's LinkState number (Detect when not running).
bool port_runs(uint32_t port, uint32_t* state, char* why, size_t cap);
// ---- end collectives ----

// LinkControl (ctrl field 60). False for requests of other services.
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap);

}  // namespace fw::links
