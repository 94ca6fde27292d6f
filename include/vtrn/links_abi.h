// The link-port status block in BAR2 (region kRegionLinks, 16 KiB at
// hostif::kLinksOffset) and the launch contract for link PCIe functions:
// shared by the firmware (the only writer) and vtrnd (a reader).
//
// It is not the link protocol (common/link) and not the per-link shared
// region's layout (vtrn/link_transport.h): it is what the host may know about
// each port of one chip. The firmware rewrites the whole block from private
// state under a seqlock (`seq` odd while writing), so the host takes a copy,
// checks that seq was even and unchanged around it, and retries otherwise;
// then it validates every field it uses (counts, enums) because the block is
// in memory the host could also have scribbled on.
//
// Launch contract: vtrnd puts the ivshmem-plain function of chip port p at
// PCI slot kPortSlotBase + p on bus 0 (the host interface is slot 1), with a
// shared region of kLinkRegionBytes (a power of two, as a BAR must be).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace vtrn::links {

inline constexpr uint32_t kMagic = 0x534b4e4c;  // "LNKS" as little-endian bytes
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxPorts = 16;
inline constexpr uint32_t kPortSlotBase = 0x10;
inline constexpr uint64_t kLinkRegionBytes = 256 * 1024;
// Frame payload every end of a link uses (the chip firmware and vtrnd's
// switch ports): both sides derive the ring geometry from it, so it is part
// of the contract.
inline constexpr uint32_t kLinkMaxPayload = 2048;
inline constexpr uint32_t kStateCount = 9;  // vtrn::link::kLinkStateCount

// Port flags.
inline constexpr uint32_t kPortWired = 1u << 0;        // the board wires this port (/links)
inline constexpr uint32_t kPortFunction = 1u << 1;     // its ivshmem-plain function was found
inline constexpr uint32_t kPortPeerOnBoard = 1u << 2;  // the peer chip is on the board
inline constexpr uint32_t kPortDisabled = 1u << 3;     // held down by `inject --down`
inline constexpr uint32_t kPortBer = 1u << 4;          // a bit-error rate is injected
inline constexpr uint32_t kPortBadRegion = 1u << 5;    // the function's BAR2 cannot hold a link ring

// Peer kinds (vtrn::board::EndKind).
inline constexpr uint8_t kPeerNone = 0;
inline constexpr uint8_t kPeerChip = 1;
inline constexpr uint8_t kPeerSwitch = 2;

struct PortStatus {
  uint32_t index;          // port number on the chip
  uint32_t flags;          // kPort*
  uint8_t state;           // vtrn::link::LinkState
  uint8_t speed;           // vtrn::link::LinkSpeed, negotiated (0 while not trained)
  uint8_t width;           // lanes, negotiated
  uint8_t reason;          // vtrn::link::LinkReason: why not up now
  uint8_t last_down;       // vtrn::link::LinkReason
  uint8_t last_recovery;   // vtrn::link::RecoveryCause
  uint8_t peer_kind;       // kPeer*
  uint8_t side;            // 0/1 in the link's shared region
  uint32_t peer_id;        // chip or switch id
  uint32_t peer_port;
  uint32_t link;           // /links entry
  uint8_t max_speed;       // LinkSpeed the board allows
  uint8_t lanes;           // lanes the port is built with
  uint8_t pci_slot;        // 0 when no function
  uint8_t reserved0;
  uint32_t good_lanes;     // bit n: lane n usable now (board minus faults minus injected)
  uint64_t ber_e12;        // injected bit errors per 10^12 bits (0: none)
  uint64_t bandwidth_mbps; // modeled, for the negotiated speed x width
  uint64_t state_since_ns; // firmware uptime at the last state change
  uint64_t tx_bytes, rx_bytes, tx_frames, rx_frames;
  uint64_t crc_errors, seq_errors, naks_sent, naks_received;
  uint64_t replays, replayed_frames, replay_timeouts, duplicates;
  uint64_t retrains, failed_retrains, downgrades, link_ups, link_downs;
  uint64_t l0s_entries, l1_entries, transport_errors, protocol_errors, tx_dropped;
  uint64_t injected_bit_errors, ts_sent, ts_received;
  uint64_t time_in_state_ns[kStateCount];
  // Test traffic (ctrl LINK_ACTION_SEND): pattern frames this end still has
  // to send, and the pattern frames it received intact / wrong.
  uint64_t gen_pending_bytes;
  uint64_t gen_sent_bytes;
  uint64_t check_good_frames;
  uint64_t check_bad_frames;
  uint64_t check_good_bytes;
  // Round trips (ctrl LINK_ACTION_PING): ping frames this end still has to
  // send one at a time, and the echoes it got back with their times (chip
  // clock, from queueing the ping to reading the echo).
  uint64_t ping_pending;
  uint64_t ping_done;
  uint64_t ping_rtt_total_ns;
  uint64_t ping_rtt_min_ns;  // of the latest batch (reset when a batch starts on an idle port)
  uint64_t ping_rtt_max_ns;
  uint8_t reserved1[512 - 264 - 8 * kStateCount - 80];
};
static_assert(offsetof(PortStatus, peer_id) == 16);
static_assert(offsetof(PortStatus, good_lanes) == 32);
static_assert(offsetof(PortStatus, tx_bytes) == 64);
static_assert(offsetof(PortStatus, time_in_state_ns) == 264);
static_assert(sizeof(PortStatus) == 512);

struct LinksHeader {
  uint32_t magic;        // kMagic
  uint32_t version;      // kVersion
  uint32_t header_size;  // sizeof(LinksHeader)
  uint32_t port_size;    // sizeof(PortStatus)
  uint32_t port_count;   // <= kMaxPorts: the chip's ports from the board, in index order
  uint32_t seq;          // seqlock: odd while the firmware rewrites the block
  uint64_t updates;      // completed rewrites
  uint64_t updated_ns;   // firmware uptime of the last rewrite
  uint8_t reserved[24];
};
static_assert(sizeof(LinksHeader) == 64);
static_assert(offsetof(LinksHeader, seq) == 20);

struct LinksBlock {
  LinksHeader header;
  PortStatus ports[kMaxPorts];
};
static_assert(sizeof(LinksBlock) <= 0x4000, "must fit hostif::kLinksSize");

}  // namespace vtrn::links
