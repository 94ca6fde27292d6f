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

// LinkControl (ctrl field 60). False for requests of other services.
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap);

}  // namespace fw::links
