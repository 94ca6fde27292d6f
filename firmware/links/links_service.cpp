// fw::links implementation: port table, polling cadence, the BAR2 status
// block, test traffic and the LinkControl handler. See fw/links_service.h;
// the link timing is vtrn::link::kChipTiming (common/link), shared with
// vtrnd's switch ports.
#include "fw/links_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/power_service.h"
#include "fw/wire.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"

namespace fw::links {
namespace {

using vtrn::Code;
using vtrn::Error;
using vtrn::link::Capabilities;
using vtrn::link::Config;
using vtrn::link::kChipTiming;
using vtrn::link::LinkSpeed;
using vtrn::link::LinkState;
using vtrn::link::LinkStatus;
namespace abi = vtrn::links;

// ivshmem-plain raises no interrupt, so a receiver learns of new frames only
// by polling: after traffic the loop keeps polling without sleeping for this
// long, or a stream would move one window per idle period (the chip
// timing's idle poll), about 1 MB/s. A real idle link stops costing CPU once
// it has passed.
constexpr uint64_t kLingerNs = 3'000'000;
constexpr uint64_t kPublishEveryNs = 10'000'000;
constexpr uint64_t kMaxSendBytes = 1ull << 30;
constexpr uint32_t kPatternMagic = 0x54544c56;     // "VLTT"
constexpr uint32_t kPingMagic = 0x49504c56;        // "VLPI": echo this back
constexpr uint32_t kPongMagic = 0x4f504c56;        // "VLPO": the echo
constexpr uint32_t kPingBytes = 64;
constexpr uint32_t kMaxPings = 100000;

// The link layer's configuration of one port: the chip timing, this
// service's windows, and the board's ASPM idle timers for the port
// (vtrn,l0s-idle-us, vtrn,l1-idle-us; 0 = never; the link core counts
// nanoseconds). poll() reports each running port's state and sent bytes to
// fw::power::report_link; a port never reported counts as down.
Config port_config(const vtrn::board::LinkPort& b) {
  Config c;
  c.max_payload = kMaxPayload;
  c.replay_frames = kReplayFrames;
  c.rx_frames = kRxFrames;
  c.frames_per_poll = 32;
  c.model_bandwidth = true;
  c.max_replays = 4;
  c.burst_errors = 8;
  c.downgrade_after = 2;
  c.l0s_idle_ns = uint64_t(b.l0s_idle_us) * 1000;
  c.l1_idle_ns = uint64_t(b.l1_idle_us) * 1000;
  return vtrn::link::with_chip_timing(c);
}

// Each port's replay and receive frames: memory the service owns, outside
// the service object so that it stays in .bss while the object (constant-
// initialized, with its vtable) is in .data.
constexpr size_t kStorageBytes =
    (kReplayFrames + kRxFrames + 1) * (sizeof(vtrn::link::FrameHeader) + kMaxPayload);
alignas(8) uint8_t g_frames[abi::kMaxPorts][kStorageBytes];

constinit LinksService g_service;

bool training(const PortEntry& p) {
  const LinkState s = p.port.state();
  return s == LinkState::kPolling || s == LinkState::kConfiguration ||
         s == LinkState::kRecovery || s == LinkState::kLoopback;
}

// Data moving either way: the loop polls again at once instead of sleeping,
// as a DMA engine would run while it has work. The receiving end counts too,
// or its ACKs would come one idle period apart and throttle the sender to a
// replay window per period.
bool streaming(const PortEntry& p, uint64_t frames_before) {
  return p.gen_pending > 0 || p.ping_pending > 0 || p.ping_out || p.port.tx_outstanding() > 0 ||
         p.port.rx_pending() > 0 ||
         p.frames_seen != frames_before;
}

uint8_t peer_kind(const vtrn::board::LinkPort& b) {
  if (!b.connected) return abi::kPeerNone;
  return b.peer.kind == vtrn::board::EndKind::kSwitch ? abi::kPeerSwitch : abi::kPeerChip;
}

// Pattern frame n: magic, n, then bytes derived from n (the receiver
// recomputes them).
// Byte i (from 8 on) of pattern frame n is (n * 31 + i) mod 256: a ramp
// starting at (n * 31 + 8) mod 256, cut out of one precomputed ramp with
// memcpy/memcmp. A byte loop here cost more guest time per frame under TCG
// than the link layer itself and capped `vtrn link send` well below what
// the link moves.
struct Ramp {
  uint8_t b[256 + kMaxPayload];
};
constexpr Ramp make_ramp() {
  Ramp r{};
  for (uint32_t i = 0; i < sizeof r.b; ++i) r.b[i] = uint8_t(i);
  return r;
}
constexpr Ramp kRamp = make_ramp();

uint32_t fill_pattern(uint8_t* buf, uint32_t n, uint32_t len) {
  memcpy(buf, &kPatternMagic, 4);
  memcpy(buf + 4, &n, 4);
  if (len > 8) memcpy(buf + 8, &kRamp.b[(n * 31u + 8u) & 0xFFu], len - 8);
  return len;
}

bool check_pattern(const uint8_t* buf, uint32_t len, uint32_t* n) {
  uint32_t magic = 0;
  if (len < 8 || len > kMaxPayload) return false;
  memcpy(&magic, buf, 4);
  memcpy(n, buf + 4, 4);
  if (magic != kPatternMagic) return false;
  return len == 8 || memcmp(buf + 8, &kRamp.b[(*n * 31u + 8u) & 0xFFu], len - 8) == 0;
}

void fill_status(const PortEntry& p, abi::PortStatus* s) {
  memset(s, 0, sizeof *s);
  s->index = p.board.index;
  s->flags = (p.board.connected ? abi::kPortWired : 0) | (p.has_fn ? abi::kPortFunction : 0) |
             (p.board.peer_on_board ? abi::kPortPeerOnBoard : 0) |
             (p.disabled ? abi::kPortDisabled : 0) | (p.ber > 0 ? abi::kPortBer : 0) |
             (p.bad_region ? abi::kPortBadRegion : 0);
  s->peer_kind = peer_kind(p.board);
  s->side = uint8_t(p.board.side);
  s->peer_id = p.board.peer.id;
  s->peer_port = p.board.peer.port;
  s->link = p.board.link;
  s->max_speed = uint8_t(p.max_speed);
  s->lanes = uint8_t(p.board.lanes);
  s->pci_slot = p.has_fn ? uint8_t(p.fn.slot) : 0;
  s->good_lanes = p.good_lanes;
  s->ber_e12 = uint64_t(p.ber * 1e12);
  s->state_since_ns = p.state_since;
  s->gen_pending_bytes = p.gen_pending;
  s->gen_sent_bytes = p.gen_sent;
  s->check_good_frames = p.check_good;
  s->check_bad_frames = p.check_bad;
  s->check_good_bytes = p.check_good_bytes;
  s->ping_pending = p.ping_pending + (p.ping_out ? 1 : 0);
  s->ping_done = p.ping_done;
  s->ping_rtt_total_ns = p.ping_total;
  s->ping_rtt_min_ns = p.ping_min;
  s->ping_rtt_max_ns = p.ping_max;
  if (!p.active) {
    s->state = uint8_t(LinkState::kDetect);
    s->reason = uint8_t(vtrn::link::LinkReason::kPeerAbsent);
    return;
  }
  const vtrn::link::Counters c = p.port.counters();
  s->state = uint8_t(c.state);
  s->speed = uint8_t(c.speed);
  s->width = c.width;
  s->reason = uint8_t(c.reason);
  s->last_down = uint8_t(c.last_down);
  s->last_recovery = uint8_t(c.last_recovery);
  s->bandwidth_mbps = c.bandwidth_mbps;
  s->tx_bytes = c.tx_bytes;
  s->rx_bytes = c.rx_bytes;
  s->tx_frames = c.tx_frames;
  s->rx_frames = c.rx_frames;
  s->crc_errors = c.crc_errors;
  s->seq_errors = c.seq_errors;
  s->naks_sent = c.naks_sent;
  s->naks_received = c.naks_received;
  s->replays = c.replays;
  s->replayed_frames = c.replayed_frames;
  s->replay_timeouts = c.replay_timeouts;
  s->duplicates = c.duplicates;
  s->retrains = c.retrains;
  s->failed_retrains = c.failed_retrains;
  s->downgrades = c.downgrades;
  s->link_ups = c.link_ups;
  s->link_downs = c.link_downs;
  s->l0s_entries = c.l0s_entries;
  s->l1_entries = c.l1_entries;
  s->transport_errors = c.transport_errors;
  s->protocol_errors = c.protocol_errors;
  s->tx_dropped = c.tx_dropped;
  s->injected_bit_errors = c.injected_bit_errors;
  s->ts_sent = c.ts_sent;
  s->ts_received = c.ts_received;
  for (uint32_t i = 0; i < abi::kStateCount; ++i) s->time_in_state_ns[i] = c.time_in_state_ns[i];
}

}  // namespace

LinksService& service() { return g_service; }

const Route kRoutes[] = {
    route<&LinksService::control>(VTRN__CTRL__REQUEST__BODY_LINK_CONTROL,
                                  VTRN__CTRL__RESPONSE__BODY_LINK_CONTROL),
};

std::span<const Route> LinksService::routes() const { return kRoutes; }

// Link functions are ivshmem-plain (no MSI-X capability) at the slots vtrnd
// reserves for link ports (vtrn/links_abi.h); the host interface is
// ivshmem-doorbell and is left alone. BAR2 of each is already inside the
// 64-bit window that boot maps as Normal memory (hal::pcie places
// prefetchable 64-bit BARs there).
uint32_t LinksService::attach_pcie(const Boot& boot) {
  const hal::pcie::Topology& topo = *boot.topology;
  uint32_t taken = 0;
  for (uint32_t i = 0; i < topo.count; ++i) {
    const hal::pcie::Function& fn = topo.functions[i];
    if (!hal::ivshmem::is_ivshmem(fn)) continue;
    hal::ivshmem::Kind kind;
    if (hal::ivshmem::classify(*boot.ecam, fn, &kind) != hal::Status::kOk ||
        kind != hal::ivshmem::Kind::kPlain) {
      continue;
    }
    hal::ivshmem::SharedMemory shm;
    if (hal::ivshmem::shared_memory(fn, &shm) != hal::Status::kOk) {
      log(kLogWarn, "links: %02x:%02x.%x ivshmem-plain without an assigned BAR2, ignored",
          fn.bdf.bus, fn.bdf.dev, fn.bdf.fn);
      continue;
    }
    if (fn.bdf.bus != 0 || fn.bdf.fn != 0 ||
        !add_function(fn.bdf.dev, reinterpret_cast<uint8_t*>(uintptr_t(shm.cpu_base)), shm.size)) {
      log(kLogWarn, "links: %02x:%02x.%x ivshmem-plain outside the link-port slots, ignored",
          fn.bdf.bus, fn.bdf.dev, fn.bdf.fn);
      continue;
    }
    ++taken;
  }
  return taken;
}

bool LinksService::add_function(uint32_t slot, uint8_t* base, uint64_t size) {
  if (slot < abi::kPortSlotBase || slot >= abi::kPortSlotBase + abi::kMaxPorts) return false;
  const uint32_t port = slot - abi::kPortSlotBase;
  functions_[port] = Function{slot, base, size};
  function_present_[port] = true;
  return true;
}

void LinksService::run_traffic(PortEntry& p, uint64_t now) {
  if (!p.port.up() && p.port.state() != LinkState::kRecovery) return;
  if (p.ping_pending > 0 && !p.ping_out && p.port.tx_space() > 0) {
    uint8_t ping[kPingBytes] = {};
    const uint32_t seq = p.ping_seq + 1;
    memcpy(ping, &kPingMagic, 4);
    memcpy(ping + 4, &seq, 4);
    if (p.port.send(ping, kPingBytes) == LinkStatus::kOk) {
      p.ping_seq = seq;
      p.ping_out = true;
      p.ping_sent_ns = now;
      --p.ping_pending;
    }
  }
  while (p.gen_pending > 0 && p.port.tx_space() > 0) {
    const uint32_t len = p.gen_pending < kMaxPayload ? uint32_t(p.gen_pending < 8 ? 8 : p.gen_pending)
                                                      : kMaxPayload;
    fill_pattern(frame_, p.gen_frame, len);
    if (p.port.send(frame_, len) != LinkStatus::kOk) break;
    ++p.gen_frame;
    const uint64_t counted = len > p.gen_pending ? p.gen_pending : len;
    p.gen_pending -= counted;
    p.gen_sent += counted;
    dirty_ = true;
  }
}

// Frames are looked at in place (no copy out of the receive queue); a
// client's frame it wants to keep stops the drain of that port.
void LinksService::drain_rx(PortEntry& p, uint64_t now) {
  const uint8_t* f = nullptr;
  uint32_t len = 0;
  while (p.port.peek(&f, &len) == LinkStatus::kOk) {
    uint32_t magic = 0;
    if (len >= 4) memcpy(&magic, f, 4);
    if (client_ != nullptr && magic == client_->magic) {
      if (!client_->on_frame(p.board.index, f, len, now)) break;
      (void)p.port.discard();
      continue;
    }
    if (magic == kPingMagic) {
      // Echo at once; a full window keeps the ping queued for the next poll.
      uint8_t echo[kPingBytes];
      const uint32_t n = len < kPingBytes ? len : kPingBytes;
      memcpy(echo, f, n);
      memcpy(echo, &kPongMagic, 4);
      if (p.port.send(echo, n) != LinkStatus::kOk) break;
      (void)p.port.discard();
      continue;
    }
    if (magic == kPongMagic) {
      uint32_t seq = 0;
      if (len >= 8) memcpy(&seq, f + 4, 4);
      if (p.ping_out && seq == p.ping_seq) {
        const uint64_t rtt = now - p.ping_sent_ns;
        p.ping_out = false;
        ++p.ping_done;
        p.ping_total += rtt;
        if (p.ping_min == 0 || rtt < p.ping_min) p.ping_min = rtt;
        if (rtt > p.ping_max) p.ping_max = rtt;
        dirty_ = true;
      }
      (void)p.port.discard();
      continue;
    }
    uint32_t n = 0;
    const bool good = check_pattern(f, len, &n);
    (void)p.port.discard();
    if (good && n == p.check_expect) {
      ++p.check_good;
      p.check_good_bytes += len;
    } else {
      ++p.check_bad;
    }
    // Resynchronise on whatever arrived: a link reset drops frames the
    // sender had queued, which is counted there (tx_dropped), not here.
    p.check_expect = n + 1;
    dirty_ = true;
  }
}

void LinksService::publish(uint64_t now) {
  if (!block_.attached()) return;
  abi::LinksBlock& b = scratch_;
  b.header.magic = abi::kMagic;
  b.header.version = abi::kVersion;
  b.header.header_size = sizeof(abi::LinksHeader);
  b.header.port_size = sizeof(abi::PortStatus);
  b.header.port_count = port_count_;
  b.header.updates = ++updates_;
  b.header.updated_ns = now;
  for (uint32_t i = 0; i < port_count_; ++i) fill_status(ports_[i], &b.ports[i]);
  block_.publish(b, offsetof(abi::LinksBlock, ports) + port_count_ * sizeof(abi::PortStatus));
  last_publish_ = now;
  dirty_ = false;
}

PortEntry* LinksService::find_port(uint32_t index) {
  for (uint32_t i = 0; i < port_count_; ++i) {
    if (ports_[i].board.index == index) return &ports_[i];
  }
  return nullptr;
}

const PortEntry* LinksService::find_port(uint32_t index) const {
  return const_cast<LinksService*>(this)->find_port(index);
}

void LinksService::init(const Boot& boot) {
  const uint32_t fns = attach_pcie(boot);
  log(kLogDebug, "links: %u link functions on the bus", unsigned(fns));
  const vtrn::board::Chip& chip = *boot.chip;
  const uint64_t now_ns = arch::now_ns();
  static_assert(sizeof(abi::LinksBlock) <= vtrn::hostif::kLinksSize);
  block_.attach(boot.bar2_size >= vtrn::hostif::kLinksOffset + vtrn::hostif::kLinksSize
                    ? reinterpret_cast<abi::LinksBlock*>(boot.bar2 + vtrn::hostif::kLinksOffset)
                    : nullptr);
  port_count_ = chip.port_count < abi::kMaxPorts ? chip.port_count : abi::kMaxPorts;
  rng_ ^= now_ns * 0x2545f4914f6cdd1dull ^ chip.id;
  now_ = now_ns;
  uint32_t active = 0;
  for (uint32_t i = 0; i < port_count_; ++i) {
    PortEntry& p = ports_[i];
    p.board = chip.ports[i];
    p.max_speed = vtrn::link::speed_from_gtps(p.board.max_speed_gtps);
    p.good_lanes = ((p.board.lanes >= 32 ? 0u : (1u << p.board.lanes)) - 1u) &
                   ~p.board.faulty_lane_mask;
    p.state_since = now_ns;
    const uint32_t idx = p.board.index;
    p.has_fn = idx < abi::kMaxPorts && function_present_[idx];
    if (p.has_fn) p.fn = functions_[idx];
    if (!p.board.connected) {
      if (p.has_fn) log(kLogWarn, "links: port %u has a PCIe function but no link in the board", unsigned(idx));
      continue;
    }
    if (!p.has_fn) {
      log(kLogWarn, "links: port %u is wired (link %u) but has no PCIe function at slot 0x%x",
          unsigned(idx), unsigned(p.board.link), unsigned(abi::kPortSlotBase + idx));
      continue;
    }
    // Epoch: differs per attach so the peer notices a rebooted chip.
    const uint32_t epoch = uint32_t(now_ns) ^ (chip.id << 20) ^ (idx << 16) ^ uint32_t(rng_);
    if (!p.t.attach(p.fn.base, size_t(p.fn.size), p.board.side,
                    uint32_t(sizeof(vtrn::link::FrameHeader)) + kMaxPayload, epoch)) {
      p.bad_region = true;
      log(kLogErr, "links: port %u: BAR2 of %llu bytes at slot 0x%x cannot hold a link ring",
          unsigned(idx), (unsigned long long)p.fn.size, unsigned(p.fn.slot));
      continue;
    }
    const Capabilities caps{p.max_speed, uint8_t(p.board.lanes), p.good_lanes};
    if (p.port.init(&p.t, caps, port_config(p.board),
                    g_frames[i], sizeof g_frames[i], now_ns) != LinkStatus::kOk) {
      p.bad_region = true;
      log(kLogErr, "links: port %u: link layer rejected its configuration", unsigned(idx));
      continue;
    }
    p.active = true;
    ++active;
    const char* kind = p.board.peer.kind == vtrn::board::EndKind::kSwitch ? "switch" : "chip";
    log(kLogInfo, "links: port %u -> %s %u port %u (link %u, side %u, %s x%u%s), slot 0x%x, %llu KiB",
        unsigned(idx), kind, unsigned(p.board.peer.id), unsigned(p.board.peer.port),
        unsigned(p.board.link), unsigned(p.board.side), vtrn::link::to_string(p.max_speed),
        unsigned(p.board.lanes), p.board.peer_on_board ? "" : ", peer not on board",
        unsigned(p.fn.slot), (unsigned long long)(p.fn.size >> 10));
  }
  log(kLogInfo, "links: %u of %u ports active", unsigned(active), unsigned(port_count_));
  next_poll_ = active > 0 ? now_ns : kNever;
  publish(now_ns);
  vtrn::hostif::FwHeader* header = boot.hostif->header();
  header->capabilities = header->capabilities | vtrn::hostif::kCapLinks;
}

void LinksService::step(uint64_t now_ns) {
  now_ = now_ns;
  if (now_ns < next_poll_ && !dirty_) return;
  bool any_active = false;
  bool any_training = false;
  bool any_streaming = false;
  // The client queues its frames before the ports send.
  if (client_ != nullptr && client_->pump(now_ns)) any_streaming = true;
  for (uint32_t i = 0; i < port_count_; ++i) {
    PortEntry& p = ports_[i];
    if (!p.active) continue;
    any_active = true;
    run_traffic(p, now_ns);
    p.port.poll(now_ns);
    drain_rx(p, now_ns);
    run_traffic(p, now_ns);
    const LinkState s = p.port.state();
    if (s != p.last_state) {
      const bool was_up = p.last_state == LinkState::kL0 || p.last_state == LinkState::kL0s ||
                          p.last_state == LinkState::kL1;
      if (s == LinkState::kL0 && !was_up && p.last_state != LinkState::kRecovery) {
        log(kLogInfo, "links: port %u up: %s x%u", unsigned(p.board.index),
            vtrn::link::to_string(p.port.speed()), unsigned(p.port.width()));
      } else if (s == LinkState::kDetect || s == LinkState::kDisabled) {
        log(kLogInfo, "links: port %u %s (%s)", unsigned(p.board.index), vtrn::link::to_string(s),
            vtrn::link::to_string(p.port.reason()));
      } else if (s == LinkState::kL0 && p.last_state == LinkState::kRecovery) {
        log(kLogInfo, "links: port %u recovered: %s x%u", unsigned(p.board.index),
            vtrn::link::to_string(p.port.speed()), unsigned(p.port.width()));
      }
      p.last_state = s;
      p.state_since = now_ns;
      dirty_ = true;
    }
    const uint64_t before = p.frames_seen;
    const vtrn::link::Counters c = p.port.counters();
    p.frames_seen = c.tx_frames + c.rx_frames;
    power::report_link(i, uint32_t(c.state), c.tx_bytes);
    if (training(p)) any_training = true;
    if (streaming(p, before)) any_streaming = true;
  }
  if (dirty_ || now_ns - last_publish_ >= kPublishEveryNs) publish(now_ns);
  if (any_streaming) last_traffic_ = now_ns;
  const bool lingering = now_ns - last_traffic_ < kLingerNs;
  next_poll_ = !any_active                   ? kNever
               : any_streaming || lingering ? now_ns
               : now_ns + (any_training ? kChipTiming.active_poll_ns : kChipTiming.idle_poll_ns);
}

Vectors LinksService::poll(Turn&) {
  step(arch::now_ns());
  return 0;
}

uint64_t LinksService::next_wake_ns() const { return dirty_ ? 0 : next_poll_; }

LinkStatus LinksService::send_frame(uint32_t port, const void* data, uint32_t length) {
  PortEntry* p = find_port(port);
  if (p == nullptr || !p->active) return LinkStatus::kBadArgument;
  const LinkStatus st = p->port.send(data, length);
  if (st == LinkStatus::kOk) next_poll_ = 0;  // transmit on the next turn
  return st;
}

uint32_t LinksService::tx_space(uint32_t port) const {
  const PortEntry* p = find_port(port);
  if (p == nullptr || !p->active) return 0;
  return p->port.tx_space();
}

Error LinksService::port_runs(uint32_t port, uint32_t* state) const {
  const PortEntry* p = find_port(port);
  *state = uint32_t(LinkState::kDetect);
  if (p == nullptr) return Error(Code::kNotFound, "port %u does not exist on this chip", unsigned(port));
  if (p->active) *state = uint32_t(p->port.state());
  if (!p->active || p->board.peer.kind != vtrn::board::EndKind::kChip) {
    return Error(Code::kBusy, "port %u is %s", unsigned(port),
                 !p->board.connected ? "not wired"
                 : p->board.peer.kind != vtrn::board::EndKind::kChip ? "wired to a switch, not a chip"
                 : !p->has_fn ? "wired but has no PCIe function"
                              : "unusable (bad link region)");
  }
  return Error();
}

void set_frame_client(const FrameClient* client) { g_service.set_frame_client(client); }
LinkStatus send_frame(uint32_t port, const void* data, uint32_t length) {
  return g_service.send_frame(port, data, length);
}
uint32_t tx_space(uint32_t port) { return g_service.tx_space(port); }
Error port_runs(uint32_t port, uint32_t* state) { return g_service.port_runs(port, state); }

vtrn::Error LinksService::control(const Vtrn__Ctrl__LinkControlRequest& req,
                                  Vtrn__Ctrl__LinkControlResponse& body, Call&) {
  const Vtrn__Ctrl__LinkControlRequest* r = &req;
  PortEntry* p = find_port(r->port);
  if (p == nullptr) return Error(Code::kInvalidArgument, "link control: no port %u", r->port);
  if (!p->active) {
    return Error(Code::kBusy, "link control: port %u is %s", unsigned(r->port),
                 !p->board.connected ? "not wired on this board"
                 : !p->has_fn        ? "wired but has no PCIe function"
                                     : "unusable (bad link region)");
  }
  const uint64_t now = now_;
  const uint32_t action = wire(r->action);
  switch (action) {
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_RETRAIN:
      p->port.retrain();
      log(kLogInfo, "links: port %u: retrain requested by host", unsigned(r->port));
      break;
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_DOWN:
      p->disabled = true;
      p->port.disable();
      log(kLogInfo, "links: port %u: disabled by host", unsigned(r->port));
      break;
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_UP:
      p->disabled = false;
      p->port.enable();
      log(kLogInfo, "links: port %u: enabled by host", unsigned(r->port));
      break;
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_BER: {
      if (!(r->ber >= 0.0 && r->ber <= 0.01))
        return Error(Code::kInvalidArgument, "link control: ber must be in 0..0.01");
      p->ber = r->ber;
      rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
      p->port.inject_ber(r->ber, r->seed != 0 ? r->seed : rng_);
      log(kLogInfo, "links: port %u: bit-error rate set by host", unsigned(r->port));
      break;
    }
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_LANE_FAULT:
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_LANE_GOOD: {
      const bool good = action == VTRN__TYPES__LINK_ACTION__LINK_ACTION_LANE_GOOD;
      if (r->lane >= p->board.lanes)
        return Error(Code::kInvalidArgument, "link control: lane %u out of range", r->lane);
      if (good && ((p->board.faulty_lane_mask >> r->lane) & 1u))
        return Error(Code::kInvalidArgument, "link control: lane %u is faulty on the board",
                           r->lane);
      if (p->port.set_lane_good(r->lane, good) != LinkStatus::kOk)
        return Error(Code::kInvalidArgument, "link control: lane %u rejected", r->lane);
      if (good) p->good_lanes |= 1u << r->lane;
      else p->good_lanes &= ~(1u << r->lane);
      log(kLogInfo, "links: port %u: lane %u marked %s by host", unsigned(r->port),
          unsigned(r->lane), good ? "good" : "faulty");
      break;
    }
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_RESTORE:
      p->port.restore_capabilities();
      p->port.retrain();
      break;
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_SEND:
      if (r->bytes == 0 || r->bytes > kMaxSendBytes)
        return Error(Code::kInvalidArgument, "link control: bytes must be 1..%u MiB",
                           unsigned(kMaxSendBytes >> 20));
      p->gen_pending += r->bytes;
      break;
    case VTRN__TYPES__LINK_ACTION__LINK_ACTION_PING:
      if (r->count == 0 || r->count > kMaxPings || p->ping_pending + r->count > kMaxPings)
        return Error(Code::kInvalidArgument, "link control: count must be 1..%u",
                           unsigned(kMaxPings));
      // min/max describe the latest batch: a batch on an idle port starts
      // them afresh (done and the total stay cumulative).
      if (p->ping_pending == 0 && !p->ping_out) p->ping_min = p->ping_max = 0;
      p->ping_pending += r->count;
      break;
    default:
      return Error(Code::kInvalidArgument, "link control: unknown action %u",
                         unsigned(action));
  }
  p->port.poll(now);
  dirty_ = true;
  body.state = uint32_t(p->port.state());
  return Error();
}

}  // namespace fw::links
