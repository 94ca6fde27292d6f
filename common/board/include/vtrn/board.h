// Board description: what a board DTB (board/*.dts, bindings in
// board/bindings/) says about the board and each chip, decoded with libfdt.
//
// One parser serves both sides: the firmware decodes its own chip at boot
// (a bad tree stops boot with a panic whose reason names the node and
// property), and vtrnd decodes every chip to decide how to launch it. It is
// plain portable C++ over libfdt: no heap, no exceptions, fixed capacities,
// every value range-checked; it must survive arbitrary bytes (it is fuzzed).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/error.h"

namespace vtrn::board {

inline constexpr uint32_t kMaxChips = 256;
inline constexpr uint32_t kMaxPorts = 16;
inline constexpr uint32_t kMaxPowerDomains = 8;
inline constexpr uint32_t kMaxThermalZones = 8;
inline constexpr uint32_t kMaxNeuronCores = 8;
inline constexpr uint32_t kMaxDmaQueues = 16;
inline constexpr uint32_t kDefaultDmaQueues = 4;
inline constexpr uint32_t kDefaultDmaQueueDepth = 1024;
inline constexpr size_t kNameLen = 48;
inline constexpr uint32_t kMaxSwitches = 16;
inline constexpr uint32_t kMaxSwitchPorts = 256;
inline constexpr uint32_t kMaxLinks = 2048;
// Link idle timers (vtrn,link-port). The defaults are sized for the
// firmware, whose idle links are polled every 20 ms (vtrn::link::kChipTiming
// idle_poll_ns, common/link): L0s after 1 ms is
// entered at the first idle poll after traffic, so a few back-to-back
// transfers never leave L0 in between but an idle link saves power at once;
// L1 after 100 ms costs a Recovery (a few ms of training sets) to leave, so
// it waits until the link has been quiet for several polls and a burst of
// commands typed or scripted one after another does not pay that exit each
// time. Real PCIe ASPM uses microseconds; the ratio (L1 about 100x the L0s
// delay) is what matters here.
inline constexpr uint32_t kDefaultL0sIdleUs = 1000;
inline constexpr uint32_t kDefaultL1IdleUs = 100000;
inline constexpr uint32_t kMaxLinkIdleUs = 10000000;  // 10 s

struct HbmGeometry {
  uint32_t stacks = 0;          // vtrn,stacks: 1..8
  uint64_t bytes_per_stack = 0; // vtrn,stack-bytes (64-bit): multiple of page_bytes, >= 16 MiB
  uint32_t page_bytes = 0;      // vtrn,page-bytes: power of two, 4 KiB..2 MiB
  uint32_t channels = 0;        // vtrn,channels: 1..32 per stack
  [[nodiscard]] uint64_t total_bytes() const { return bytes_per_stack * stacks; }
};

// One end of a link in /links (binding vtrn,link): a chip's port or a
// switch's port.
enum class EndKind : uint32_t {
  kNone = 0,
  kChip = 1,    // vtrn,a-chip / vtrn,b-chip = <chip port>
  kSwitch = 2,  // vtrn,a-switch / vtrn,b-switch = <switch port>
};

struct LinkEnd {
  EndKind kind = EndKind::kNone;
  uint32_t id = 0;    // chip id or switch id
  uint32_t port = 0;  // port index on that chip or switch
};

struct LinkPort {
  uint32_t index = 0;            // reg
  uint32_t max_speed_gtps = 0;   // vtrn,max-speed-gtps: 1..128 GT/s per lane
  uint32_t lanes = 0;            // vtrn,lanes: 1, 2, 4, 8 or 16
  uint32_t faulty_lane_mask = 0; // vtrn,faulty-lanes (optional, default 0): bit n = lane n bad
  // Link power management (ASPM style): idle time before the port enters
  // L0s / L1, in microseconds; 0 = never. vtrn,l0s-idle-us and
  // vtrn,l1-idle-us (optional, defaults below): 0..kMaxLinkIdleUs, and L1
  // not sooner than L0s when both are on.
  uint32_t l0s_idle_us = 0;
  uint32_t l1_idle_us = 0;
  // Wiring, from /links (parse_chip fills it; all false/zero for a port no
  // link names, which then never leaves Detect).
  bool connected = false;        // a /links entry names this port
  uint32_t link = 0;             // that entry's reg
  uint32_t side = 0;             // 0: this port is the entry's `a` end, 1: its `b` end
  LinkEnd peer;                  // the other end
  bool peer_on_board = false;    // false when the peer chip id is not on this board
                                 // (a board cut down by resize_board)
};

struct PowerDomain {
  uint32_t index = 0;            // reg
  char name[kNameLen] = {};      // vtrn,name
  uint32_t core_mask = 0;        // vtrn,cores: NeuronCores in this domain (bit n = core n)
};

struct ThermalZone {
  uint32_t index = 0;            // reg
  char name[kNameLen] = {};      // vtrn,name
  int32_t throttle_mc = 0;       // vtrn,throttle-millicelsius
  int32_t critical_mc = 0;       // vtrn,critical-millicelsius, > throttle
};

struct Chip {
  uint32_t id = 0;                  // reg of /chips/chip@N
  char name[kNameLen] = {};         // node name, "chip@0"
  uint32_t neuron_cores = 0;        // vtrn,neuron-cores: 1..kMaxNeuronCores
  uint32_t telemetry_period_ms = 0; // vtrn,telemetry-period-ms: 10..10000
  uint32_t bar2_mib = 0;            // vtrn,bar2-mib: power of two, 4..1024
  uint32_t dma_queues = 0;          // vtrn,dma-queues (optional, default 4): 1..kMaxDmaQueues
  uint32_t dma_queue_depth = 0;     // vtrn,dma-queue-depth (optional, default 1024): power of two, 16..4096
  HbmGeometry hbm;                  // hbm child, compatible "vtrn,hbm"
  uint32_t port_count = 0;
  LinkPort ports[kMaxPorts];        // ports/port@N, compatible "vtrn,link-port"
  uint32_t power_domain_count = 0;
  PowerDomain power_domains[kMaxPowerDomains];  // power-domains/domain@N
  uint32_t thermal_zone_count = 0;
  ThermalZone thermal_zones[kMaxThermalZones];  // thermal-zones/zone@N
};

struct Board {
  char model[kNameLen] = {};   // root "model"
  uint32_t chip_count = 0;     // chips under /chips, ids 0..chip_count-1, dense
  uint32_t chip_ids[kMaxChips] = {};
};

// A switch (binding vtrn,switch): a crossbar whose ports connect to chips,
// NeuronSwitch style. It runs on the host (vtrnd), not as a chip.
struct Switch {
  uint32_t id = 0;               // reg of /switches/switch@N
  uint32_t ports = 0;            // vtrn,ports: 1..kMaxSwitchPorts
  uint32_t max_speed_gtps = 0;   // vtrn,max-speed-gtps: 1..128, every port
  uint32_t lanes = 0;            // vtrn,lanes: 1, 2, 4, 8 or 16, every port
};

// One entry of /links: a point-to-point link between two ends. End `a` is
// side 0 of the link's shared region, `b` side 1.
struct Link {
  uint32_t index = 0;  // reg of /links/link@N
  LinkEnd a;
  LinkEnd b;
  bool a_on_board = true;  // false when a chip end names a chip not on the board
  bool b_on_board = true;
};

// The board's wiring: switches and links.
struct Topology {
  uint32_t switch_count = 0;
  Switch switches[kMaxSwitches];
  uint32_t link_count = 0;
  Link links[kMaxLinks];  // sorted by index
};

// Checks the header, the root compatible ("vtrn,board"), model, and that
// /chips holds 1..kMaxChips chip nodes with distinct reg values.
// Failures are vtrn::Error with a board code (kBadTree .. kNoSuchChip) and
// one line naming the node path and the property, e.g.
// "/chips/chip@1: vtrn,neuron-cores: missing".
[[nodiscard]] Error parse_board(const void* fdt, size_t size, Board* out);

// Decodes and validates chip `chip_id` completely (all children included).
[[nodiscard]] Error parse_chip(const void* fdt, size_t size, uint32_t chip_id, Chip* out);

// Decodes /switches and /links (both optional) and checks the wiring as a
// whole: every chip end names a port that chip defines, every switch end a
// port below the switch's vtrn,ports, no port is used twice, at least one
// end of each link is a chip. A chip end whose chip id is not on the board
// is allowed (marked *_on_board = false): resize_board keeps /links as is.
[[nodiscard]] Error parse_topology(const void* fdt, size_t size, Topology* out);

// Host side: writes into `out` (capacity out_cap) a copy of the board tree
// with exactly `chips` chip nodes: the first `chips` kept when there are more,
// the last chip node cloned (reg and node name renumbered) when there are
// fewer. Used by `vtrn up --chips N`.
[[nodiscard]] Error resize_board(const void* fdt, size_t size, uint32_t chips, void* out,
                                  size_t out_cap);


}  // namespace vtrn::board
