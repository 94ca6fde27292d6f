// vtrn::hw::LinkFabric: the link engines of every chip of a board and the
// wires between their ports (engine ABI 1.4, engine_abi.h "Link engines").
//
// Each attached chip contributes its engine region (one LinkEngineBlock per
// link port), its RAM, its Signals and its error ring. The wiring is the
// board DT's /links (board::parse_topology): a link whose two ends are chip
// ports of chips on the board joins those two ports; a port no such link
// names (a switch port, a chip cut off the board, nothing) is unwired.
//
// A pass (run_pass) serves every port of every chip that is not in reset:
// it applies a new LinkConfig, refreshes the port's MPU snapshot and
// acknowledges it, copies new send descriptors out of the ring into the
// port's private pending list (the ring slots are free again at once), and
// completes pending sends in order while it can. A send is validated from
// its private copy (descriptor fields, the wiring, both ends up, the peer
// not in reset, the range in this chip's RAM and inside this chip's MPU),
// then matched with the oldest posted receive buffer of the peer port,
// copied out of the peer's ring and validated in turn (fields, the peer's
// RAM, the peer's MPU, large enough). Only then is the payload copied, one
// memmove from the sender's RAM straight into the receiver's, and both
// sides complete. A send whose peer has no buffer posted (or no room for a
// receive completion) waits at the head of its port: a credit stall,
// counted once per send; the peer posting a buffer rings its own vector,
// which wakes the fabric thread, which then completes the send.
//
// Chip reset (begin_reset / end_reset): while a chip is in reset nothing of
// it is served; sends of other chips waiting on it, or sent to it, complete
// with kLinkPeerReset; its own blocks are zeroed (state down) and its ports'
// private state forgotten, so nothing of it is written after begin_reset.
//
// Modeled time, BER and replays: engine_abi.h. The error pattern is a
// per-port splitmix64 stream seeded from LinkConfig::ber_seed (and the
// port), restarted by each config.
//
// Threads: the model has none; LinkFabricThread (below) runs passes on one
// thread that sleeps in epoll on the ports' doorbell eventfds. One mutex
// serialises passes and resets.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vtrn/board.h"
#include "vtrn/engine_abi.h"
#include "vtrn/hw/engine_context.h"
#include "vtrn/hw/mpu.h"
#include "vtrn/seqlock.h"

namespace vtrn::hw {

// Modeled nanoseconds of `bytes` of payload at `speed_gtps` x `width` lanes
// with `replays` frames sent again (engine_abi.h: frames of
// kLinkFramePayload + kLinkFrameOverhead bytes, 128b/130b, kLinkLatencyNs,
// kLinkReplayNs per replay). 0 for 0 bytes.
uint64_t link_modeled_ns(uint64_t bytes, uint32_t speed_gtps, uint32_t width, uint64_t replays);
// Frames of a transfer of `bytes` (at least one for a nonzero length).
uint64_t link_frames(uint64_t bytes);

class LinkFabric {
 public:
  explicit LinkFabric(Clock clock = monotonic_ns);
  ~LinkFabric();
  LinkFabric(const LinkFabric&) = delete;
  LinkFabric& operator=(const LinkFabric&) = delete;

  // Adds chip `chip` with `link_ports` LinkEngineBlocks (0..kMaxLinkPorts):
  // zeroes them, and publishes kCapLinkEngines and link_ports in its IdBlock.
  // False (err names why) for a chip attached twice or too many ports.
  bool attach(uint32_t chip, const ChipMemory& mem, Signals& signals, ErrorLog& errors, uint32_t link_ports,
              std::string* err);
  // Joins (chip_a, port_a) and (chip_b, port_b): both attached, both ports
  // below their chip's link_ports, neither wired already.
  bool wire(uint32_t chip_a, uint32_t port_a, uint32_t chip_b, uint32_t port_b, std::string* err);
  // wire() for every chip-to-chip link of `t` whose chips are both attached;
  // the others (switch ends, chips not on the board) leave their ports unwired.
  // `wired` (optional) counts the links joined.
  bool wire_topology(const board::Topology& t, std::string* err, uint32_t* wired = nullptr);

  // Serves every port once (see above). True when anything was consumed
  // or completed.
  bool run_pass();
  // Work a pass would do (a new index, config or MPU generation).
  [[nodiscard]] bool has_work();

  void begin_reset(uint32_t chip);
  void end_reset(uint32_t chip);

  [[nodiscard]] uint32_t chips() const { return uint32_t(chips_.size()); }
  // Sends waiting for a buffer at their peer, over every port.
  [[nodiscard]] uint32_t stalled();

 private:
  struct Port;
  struct Chip;
  struct Pending {
    engine::LinkSendDescriptor d;
    bool stalled = false;
  };
  Chip* find(uint32_t chip);
  void apply_config(Chip& c, Port& p);
  void post_error(Chip& c, Port& p, uint32_t code, uint32_t queue, uint32_t status, uint64_t addr, uint64_t len,
                  uint64_t cookie, uint32_t detail);
  void latch(Chip& c, Port& p, uint32_t e);
  // A new producer index of one of p's rings (depth entries, consumer at
  // `cons`, last index seen `seen`): false, with the ring latched, when it
  // went backwards or ran more than a ring ahead.
  bool producer_ok(Chip& c, Port& p, uint32_t prod, uint32_t seen, uint32_t cons, uint32_t depth);
  bool take_sends(Chip& c, Port& p);
  // One attempt at the head send of `p`: true when it completed, false when it waits.
  bool try_send(Chip& c, Port& p);
  void complete_send(Chip& c, Port& p, const engine::LinkSendDescriptor& d, uint32_t status, uint64_t bytes,
                     uint64_t ns, uint32_t replays, uint32_t peer_chip, uint32_t peer_port);
  void complete_recv(Chip& c, Port& p, const engine::LinkRecvBuffer& b, uint32_t status, uint32_t tag,
                     uint64_t bytes, uint64_t ns, uint32_t replays, uint32_t peer_chip, uint32_t peer_port);
  // The peer's receive side has a buffer and room for its completion;
  // latches the peer's ring on an index breach.
  bool peer_ready(Chip& pc, Port& pp);
  uint32_t draw_replays(Port& p, uint64_t bytes, bool* exhausted);
  void reset_port(Chip& c, Port& p);

  Clock clock_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Chip>> chips_;
};

// One thread running a LinkFabric's passes: it blocks in epoll on the
// doorbell eventfds it is given (each chip's kVectorLink0 + p) and a wake
// eventfd of its own, and after a wake-up runs passes until one does
// nothing. No timers: an idle fabric sleeps until a doorbell.
class LinkFabricThread {
 public:
  explicit LinkFabricThread(LinkFabric& fabric) : fabric_(fabric) {}
  ~LinkFabricThread();
  LinkFabricThread(const LinkFabricThread&) = delete;
  LinkFabricThread& operator=(const LinkFabricThread&) = delete;

  // The fds are not owned and must outlive stop().
  bool start(const std::vector<int>& doorbells, std::string* err);
  void stop();
  // Wakes the thread (a reset ended, a config changed by someone else).
  void kick();
  [[nodiscard]] uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

 private:
  void run();
  LinkFabric& fabric_;
  std::thread thread_;
  int epoll_ = -1;
  int wake_ = -1;
  std::vector<int> doorbells_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> wakeups_{0};
};

}  // namespace vtrn::hw
