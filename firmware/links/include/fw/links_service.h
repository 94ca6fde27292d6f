// fw::links::LinksService: the chip's link ports. One vtrn::link::Port per
// port the board defines, each bound to the ivshmem-plain PCIe function
// vtrnd placed at slot links_abi kPortSlotBase + port; the service polls them
// from the event loop, publishes their status and counters into BAR2
// (kRegionLinks, vtrn/links_abi.h, under the host interface's seqlock),
// reports each port's power state to the power service, and serves the
// LinkControl request.
//
// It is not the link protocol (common/link) and not PCIe enumeration
// (hal::pcie): init() picks the link functions out of the bus boot
// enumerated. The loop has no thread of its own: a trained, idle link only
// needs a heartbeat every few tens of milliseconds, training needs about one
// poll per millisecond (vtrn::link::kChipTiming), so next_wake_ns() tells
// the loop when to wake.
//
// Other users of the ports' frames (firmware/collectives) register one
// FrameClient and send through send_frame(); the functions below the class
// are that cross-service API.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/service.h"
#include "vtrn/board.h"
#include "vtrn/error.h"
#include "vtrn/link.h"
#include "vtrn/link_transport.h"
#include "vtrn/links_abi.h"
#include "vtrn/seqlock.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::links {

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

inline constexpr uint32_t kMaxPayload = vtrn::links::kLinkMaxPayload;
// Window: frames in flight per direction before the sender needs an ACK.
// The ring holds 32 slots of a 256 KiB region; a window of 16 keeps a
// sender busy while the peer's loop turn comes around.
inline constexpr uint32_t kReplayFrames = 16;
inline constexpr uint32_t kRxFrames = 16;

// One PCIe function's shared memory, as enumeration found it.
struct Function {
  uint32_t slot = 0;
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

// One board port and the link that runs on it.
struct PortEntry {
  vtrn::board::LinkPort board{};
  Function fn{};
  bool has_fn = false;
  bool active = false;  // wired, function found, region usable: the Port runs
  bool bad_region = false;
  bool disabled = false;
  double ber = 0;
  uint32_t good_lanes = 0;
  vtrn::link::LinkSpeed max_speed = vtrn::link::LinkSpeed::kNone;
  vtrn::link::ShmTransport t;
  vtrn::link::Port port;
  vtrn::link::LinkState last_state = vtrn::link::LinkState::kDetect;
  uint64_t state_since = 0;
  uint64_t frames_seen = 0;  // tx + rx frames at the last poll
  // Test traffic.
  uint64_t gen_pending = 0;
  uint64_t gen_sent = 0;
  uint32_t gen_frame = 0;
  uint32_t check_expect = 0;
  uint64_t check_good = 0, check_bad = 0, check_good_bytes = 0;
  // Round trips: one ping in flight at a time.
  uint64_t ping_pending = 0, ping_done = 0;
  bool ping_out = false;
  uint32_t ping_seq = 0;
  uint64_t ping_sent_ns = 0;
  uint64_t ping_total = 0, ping_min = 0, ping_max = 0;
};

class LinksService final : public Service {
 public:
  constexpr LinksService() : Service("links") {}
  [[nodiscard]] std::span<const Route> routes() const override;

  void init(const Boot& boot) override;
  // Advances every port; publishes the block when something changed or
  // every few milliseconds. Cheap when nothing is due.
  Vectors poll(Turn& turn) override;
  [[nodiscard]] uint64_t next_wake_ns() const override;

  vtrn::Error control(const Vtrn__Ctrl__LinkControlRequest& r,
                      Vtrn__Ctrl__LinkControlResponse& out, Call& c);

  void set_frame_client(const FrameClient* client) { client_ = client; }
  vtrn::link::LinkStatus send_frame(uint32_t port, const void* data, uint32_t length);
  [[nodiscard]] uint32_t tx_space(uint32_t port) const;
  // Ok when `port` runs a link to a chip; else kNotFound or kBusy naming
  // why. Either way *state is the port's LinkState number (Detect when not
  // running).
  vtrn::Error port_runs(uint32_t port, uint32_t* state) const;

 private:
  uint32_t attach_pcie(const Boot& boot);
  bool add_function(uint32_t slot, uint8_t* base, uint64_t size);
  void run_traffic(PortEntry& p, uint64_t now);
  void drain_rx(PortEntry& p, uint64_t now);
  void publish(uint64_t now);
  void step(uint64_t now_ns);
  PortEntry* find_port(uint32_t index);
  const PortEntry* find_port(uint32_t index) const;

  alignas(8) uint8_t frame_[kMaxPayload] = {};
  PortEntry ports_[vtrn::links::kMaxPorts];
  uint32_t port_count_ = 0;
  Function functions_[vtrn::links::kMaxPorts];
  bool function_present_[vtrn::links::kMaxPorts] = {};
  // The BAR2 status block (seqlock writer) and the copy it is built in.
  vtrn::hostif::SeqlockWriter<vtrn::links::LinksBlock, offsetof(vtrn::links::LinksHeader, seq)>
      block_;
  vtrn::links::LinksBlock scratch_{};
  uint64_t updates_ = 0;
  uint64_t last_publish_ = 0;
  bool dirty_ = true;
  uint64_t next_poll_ = kNever;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
  uint64_t now_ = 0;           // time of the last init/poll: what control() advances a port with
  uint64_t last_traffic_ = 0;  // last poll that moved frames or had some pending
  const FrameClient* client_ = nullptr;
};

LinksService& service();

// The cross-service API (boot core only), for the frame client.
void set_frame_client(const FrameClient* client);
// Queues one frame on board port `port` (kOk, kFull: window full, kDown,
// kTooLarge, kBadArgument: no such running port).
vtrn::link::LinkStatus send_frame(uint32_t port, const void* data, uint32_t length);
// Frames port `port` accepts now without kFull (0 for a port not running).
uint32_t tx_space(uint32_t port);
// Largest frame payload of a port.
constexpr uint32_t max_frame_payload() { return kMaxPayload; }
// See LinksService::port_runs.
vtrn::Error port_runs(uint32_t port, uint32_t* state);

}  // namespace fw::links
