// fw::links implementation: port table, polling cadence, the BAR2 status
// block (seqlock writer), test traffic and the LinkControl handler.
//
// Timeouts are much longer than the link core's defaults because the time
// here is the guest's wall clock under TCG on an oversubscribed host: a
// chip's vCPU can be descheduled for a good fraction of a second when tens of
// QEMUs share two cores, and that must not look like a dead peer. Training
// still completes in a few polls when both chips get to run.
#include "fw/links_service.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fw/log.h"
#include "fw/pb_arena.h"
#include "fw/power_service.h"  // ---- power: report_link ----
#include "vtrn/link.h"
#include "vtrn/links_abi.h"

namespace fw::links {
namespace {

using vtrn::link::Capabilities;
using vtrn::link::Config;
using vtrn::link::LinkSpeed;
using vtrn::link::LinkState;
using vtrn::link::LinkStatus;
namespace abi = vtrn::links;

constexpr uint32_t kMaxPayload = abi::kLinkMaxPayload;
// Window: frames in flight per direction before the sender needs an ACK.
// The ring holds 32 slots of a 256 KiB region; a window of 16 keeps a
// sender busy while the peer's loop turn comes around.
constexpr uint32_t kReplayFrames = 16;
constexpr uint32_t kRxFrames = 16;
constexpr uint64_t kActivePollNs = 1'000'000;      // training, recovery
// ivshmem-plain raises no interrupt, so a receiver learns of new frames only
// by polling: after traffic the loop keeps polling without sleeping for this
// long, or a stream would move one window per idle period (kIdlePollNs),
// about 1 MB/s. A real idle link stops costing CPU once it has passed.
constexpr uint64_t kLingerNs = 3'000'000;
constexpr uint64_t kIdlePollNs = 20'000'000;       // Detect, idle L0: heartbeat only
constexpr uint64_t kPublishEveryNs = 10'000'000;
constexpr uint64_t kMaxSendBytes = 1ull << 30;
constexpr uint32_t kPatternMagic = 0x54544c56;     // "VLTT"
constexpr uint32_t kPingMagic = 0x49504c56;        // "VLPI": echo this back
constexpr uint32_t kPongMagic = 0x4f504c56;        // "VLPO": the echo
constexpr uint32_t kPingBytes = 64;
constexpr uint32_t kMaxPings = 100000;

Config port_config() {
  Config c;
  c.max_payload = kMaxPayload;
  c.replay_frames = kReplayFrames;
  c.rx_frames = kRxFrames;
  c.frames_per_poll = 32;
  c.model_bandwidth = true;
  c.peer_timeout_ns = 1'500'000'000;
  c.ts_interval_ns = 1'000'000;
  c.training_timeout_ns = 3'000'000'000;
  c.recovery_timeout_ns = 3'000'000'000;
  c.detect_quiet_ns = 20'000'000;
  c.replay_timeout_ns = 30'000'000;
  c.ack_refresh_ns = 10'000'000;
  c.max_replays = 4;
  c.burst_errors = 8;
  c.burst_window_ns = 100'000'000;
  c.retrain_fail_window_ns = 300'000'000;
  c.downgrade_after = 2;
  return c;
}

// ---- power (firmware/power): link power states ----
// ASPM idle timers come from the board per port (vtrn,l0s-idle-us,
// vtrn,l1-idle-us; 0 = never); the link core counts nanoseconds. poll()
// reports each running port's state and sent bytes to fw::power::report_link
// (power model, BAR2 power block); a port never reported counts as down.
Config with_idle_timers(Config c, const vtrn::board::LinkPort& b) {
  c.l0s_idle_ns = uint64_t(b.l0s_idle_us) * 1000;
  c.l1_idle_ns = uint64_t(b.l1_idle_us) * 1000;
  return c;
}
// ---- end power ----

struct Function {
  uint32_t slot = 0;
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

struct PortEntry {
  vtrn::board::LinkPort board{};
  Function fn{};
  bool has_fn = false;
  bool active = false;  // wired, function found, region usable: the Port runs
  bool bad_region = false;
  bool disabled = false;
  double ber = 0;
  uint32_t good_lanes = 0;
  LinkSpeed max_speed = LinkSpeed::kNone;
  vtrn::link::ShmTransport t;
  vtrn::link::Port port;
  LinkState last_state = LinkState::kDetect;
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

alignas(8) uint8_t g_storage[abi::kMaxPorts][(kReplayFrames + kRxFrames + 1) *
                                             (sizeof(vtrn::link::FrameHeader) + kMaxPayload)];
alignas(8) uint8_t g_frame[kMaxPayload];
PortEntry g_ports[abi::kMaxPorts];
uint32_t g_port_count = 0;
Function g_functions[abi::kMaxPorts];
bool g_function_present[abi::kMaxPorts] = {};
uint8_t* g_block = nullptr;
uint32_t g_seq = 0;
uint64_t g_updates = 0;
uint64_t g_last_publish = 0;
bool g_dirty = true;
uint64_t g_next_poll = UINT64_MAX;
uint32_t g_chip_id = 0;
uint64_t g_rng = 0x9e3779b97f4a7c15ull;
uint64_t g_now = 0;  // time of the last init/poll: what serve() advances the port with
uint64_t g_last_traffic = 0;  // last poll that moved frames or had some pending

LinkSpeed speed_from_gtps(uint32_t g) {
  if (g >= 64) return LinkSpeed::k64GT;
  if (g >= 32) return LinkSpeed::k32GT;
  if (g >= 16) return LinkSpeed::k16GT;
  if (g >= 8) return LinkSpeed::k8GT;
  if (g >= 5) return LinkSpeed::k5GT;
  return LinkSpeed::k2_5GT;
}

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

void run_traffic(PortEntry& p, uint64_t now) {
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
    fill_pattern(g_frame, p.gen_frame, len);
    if (p.port.send(g_frame, len) != LinkStatus::kOk) break;
    ++p.gen_frame;
    const uint64_t counted = len > p.gen_pending ? p.gen_pending : len;
    p.gen_pending -= counted;
    p.gen_sent += counted;
    g_dirty = true;
  }
}

const FrameClient* g_client = nullptr;  // ---- collectives ----

// Frames are looked at in place (no copy out of the receive queue); a
// client's frame it wants to keep stops the drain of that port.
void drain_rx(PortEntry& p, uint64_t now) {
  const uint8_t* f = nullptr;
  uint32_t len = 0;
  while (p.port.peek(&f, &len) == LinkStatus::kOk) {
    uint32_t magic = 0;
    if (len >= 4) memcpy(&magic, f, 4);
    // ---- collectives ----
    if (g_client != nullptr && magic == g_client->magic) {
      if (!g_client->on_frame(p.board.index, f, len, now)) break;
      (void)p.port.discard();
      continue;
    }
    // ---- end collectives ----
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
        g_dirty = true;
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
    g_dirty = true;
  }
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

void publish(uint64_t now) {
  if (g_block == nullptr) return;
  auto* blk = reinterpret_cast<abi::LinksBlock*>(g_block);
  // Seqlock writer: odd, barrier, body, barrier, even. The host retries a
  // copy that saw an odd or changed seq.
  ++g_seq;
  __atomic_store_n(&blk->header.seq, g_seq, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  abi::LinksHeader h{};
  h.magic = abi::kMagic;
  h.version = abi::kVersion;
  h.header_size = sizeof(abi::LinksHeader);
  h.port_size = sizeof(abi::PortStatus);
  h.port_count = g_port_count;
  h.seq = g_seq;
  h.updates = ++g_updates;
  h.updated_ns = now;
  memcpy(&blk->header, &h, sizeof h);
  for (uint32_t i = 0; i < g_port_count; ++i) {
    abi::PortStatus s;
    fill_status(g_ports[i], &s);
    memcpy(&blk->ports[i], &s, sizeof s);
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  ++g_seq;
  __atomic_store_n(&blk->header.seq, g_seq, __ATOMIC_RELAXED);
  g_last_publish = now;
  g_dirty = false;
}

PortEntry* find_port(uint32_t index) {
  for (uint32_t i = 0; i < g_port_count; ++i) {
    if (g_ports[i].board.index == index) return &g_ports[i];
  }
  return nullptr;
}

template <typename T>
T* arena_new(pb::Arena& arena) {
  ProtobufCAllocator* a = arena.allocator();
  return static_cast<T*>(a->alloc(a->allocator_data, sizeof(T)));
}

__attribute__((format(printf, 4, 5))) bool bad_request(Vtrn__Ctrl__Response* resp, char* error,
                                                        size_t cap, const char* fmt, ...) {
  resp->status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, cap, fmt, ap);
  va_end(ap);
  return true;
}

}  // namespace

bool add_function(uint32_t slot, uint8_t* base, uint64_t size) {
  if (slot < abi::kPortSlotBase || slot >= abi::kPortSlotBase + abi::kMaxPorts) return false;
  const uint32_t port = slot - abi::kPortSlotBase;
  g_functions[port] = Function{slot, base, size};
  g_function_present[port] = true;
  return true;
}

void init(const vtrn::board::Chip& chip, uint8_t* block, uint64_t block_size, uint64_t now_ns) {
  g_chip_id = chip.id;
  g_block = block_size >= sizeof(abi::LinksBlock) ? block : nullptr;
  g_port_count = chip.port_count < abi::kMaxPorts ? chip.port_count : abi::kMaxPorts;
  g_rng ^= now_ns * 0x2545f4914f6cdd1dull ^ chip.id;
  g_now = now_ns;
  const Config cfg = port_config();
  uint32_t active = 0;
  for (uint32_t i = 0; i < g_port_count; ++i) {
    PortEntry& p = g_ports[i];
    p.board = chip.ports[i];
    p.max_speed = speed_from_gtps(p.board.max_speed_gtps);
    p.good_lanes = ((p.board.lanes >= 32 ? 0u : (1u << p.board.lanes)) - 1u) &
                   ~p.board.faulty_lane_mask;
    p.state_since = now_ns;
    const uint32_t idx = p.board.index;
    p.has_fn = idx < abi::kMaxPorts && g_function_present[idx];
    if (p.has_fn) p.fn = g_functions[idx];
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
    const uint32_t epoch = uint32_t(now_ns) ^ (chip.id << 20) ^ (idx << 16) ^ uint32_t(g_rng);
    if (!p.t.attach(p.fn.base, size_t(p.fn.size), p.board.side,
                    uint32_t(sizeof(vtrn::link::FrameHeader)) + kMaxPayload, epoch)) {
      p.bad_region = true;
      log(kLogErr, "links: port %u: BAR2 of %llu bytes at slot 0x%x cannot hold a link ring",
          unsigned(idx), (unsigned long long)p.fn.size, unsigned(p.fn.slot));
      continue;
    }
    const Capabilities caps{p.max_speed, uint8_t(p.board.lanes), p.good_lanes};
    if (p.port.init(&p.t, caps, with_idle_timers(cfg, p.board),  // ---- power ----
                    g_storage[i], sizeof g_storage[i], now_ns) != LinkStatus::kOk) {
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
  log(kLogInfo, "links: %u of %u ports active", unsigned(active), unsigned(g_port_count));
  g_next_poll = active > 0 ? now_ns : UINT64_MAX;
  publish(now_ns);
}

void poll(uint64_t now_ns) {
  g_now = now_ns;
  if (now_ns < g_next_poll && !g_dirty) return;
  bool any_active = false;
  bool any_training = false;
  bool any_streaming = false;
  // ---- collectives: queue the client's frames before the ports send ----
  if (g_client != nullptr && g_client->pump(now_ns)) any_streaming = true;
  for (uint32_t i = 0; i < g_port_count; ++i) {
    PortEntry& p = g_ports[i];
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
      g_dirty = true;
    }
    const uint64_t before = p.frames_seen;
    const vtrn::link::Counters c = p.port.counters();
    p.frames_seen = c.tx_frames + c.rx_frames;
    fw::power::report_link(i, uint32_t(c.state), c.tx_bytes);  // ---- power ----
    if (training(p)) any_training = true;
    if (streaming(p, before)) any_streaming = true;
  }
  if (g_dirty || now_ns - g_last_publish >= kPublishEveryNs) publish(now_ns);
  if (any_streaming) g_last_traffic = now_ns;
  const bool lingering = now_ns - g_last_traffic < kLingerNs;
  g_next_poll = !any_active                    ? UINT64_MAX
                : any_streaming || lingering ? now_ns
                : now_ns + (any_training ? kActivePollNs : kIdlePollNs);
}

uint64_t next_poll_ns() { return g_dirty ? 0 : g_next_poll; }

// ---- collectives ----
void set_frame_client(const FrameClient* client) { g_client = client; }

LinkStatus send_frame(uint32_t port, const void* data, uint32_t length) {
  PortEntry* p = find_port(port);
  if (p == nullptr || !p->active) return LinkStatus::kBadArgument;
  const LinkStatus st = p->port.send(data, length);
  if (st == LinkStatus::kOk) g_next_poll = 0;  // transmit on the next turn
  return st;
}

uint32_t tx_space(uint32_t port) {
  PortEntry* p = find_port(port);
  if (p == nullptr || !p->active) return 0;
  return p->port.tx_space();
}

uint32_t max_frame_payload() { return kMaxPayload; }

bool port_runs(uint32_t port, uint32_t* state, char* why, size_t cap) {
  PortEntry* p = find_port(port);
  *state = uint32_t(LinkState::kDetect);
  if (p == nullptr) {
    snprintf(why, cap, "port %u does not exist on this chip", unsigned(port));
    return false;
  }
  if (p->active) *state = uint32_t(p->port.state());
  if (!p->active || p->board.peer.kind != vtrn::board::EndKind::kChip) {
    snprintf(why, cap, "port %u is %s", unsigned(port),
             !p->board.connected ? "not wired"
             : p->board.peer.kind != vtrn::board::EndKind::kChip ? "wired to a switch, not a chip"
             : !p->has_fn ? "wired but has no PCIe function"
                          : "unusable (bad link region)");
    return false;
  }
  return true;
}
// ---- end collectives ----

uint32_t ports_up() {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g_port_count; ++i) {
    if (g_ports[i].active && g_ports[i].port.up()) ++n;
  }
  return n;
}

bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap) {
  if (req.body_case != VTRN__CTRL__REQUEST__BODY_LINK_CONTROL) return false;
  const Vtrn__Ctrl__LinkControlRequest* r = req.link_control;
  if (r == nullptr) return bad_request(resp, error, error_cap, "link control: no body");
  PortEntry* p = find_port(r->port);
  if (p == nullptr) return bad_request(resp, error, error_cap, "link control: no port %u", r->port);
  if (!p->active) {
    resp->status = VTRN__CTRL__STATUS__STATUS_BUSY;
    snprintf(error, error_cap, "link control: port %u is %s", unsigned(r->port),
             !p->board.connected ? "not wired on this board"
             : !p->has_fn        ? "wired but has no PCIe function"
                                 : "unusable (bad link region)");
    return true;
  }
  const uint64_t now = g_now;
  switch (r->action) {
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_RETRAIN:
      p->port.retrain();
      log(kLogInfo, "links: port %u: retrain requested by host", unsigned(r->port));
      break;
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_DOWN:
      p->disabled = true;
      p->port.disable();
      log(kLogInfo, "links: port %u: disabled by host", unsigned(r->port));
      break;
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_UP:
      p->disabled = false;
      p->port.enable();
      log(kLogInfo, "links: port %u: enabled by host", unsigned(r->port));
      break;
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_BER: {
      if (!(r->ber >= 0.0 && r->ber <= 0.01))
        return bad_request(resp, error, error_cap, "link control: ber must be in 0..0.01");
      p->ber = r->ber;
      g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
      p->port.inject_ber(r->ber, r->seed != 0 ? r->seed : g_rng);
      log(kLogInfo, "links: port %u: bit-error rate set by host", unsigned(r->port));
      break;
    }
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_LANE_FAULT:
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_LANE_GOOD: {
      const bool good = r->action == VTRN__CTRL__LINK_ACTION__LINK_ACTION_LANE_GOOD;
      if (r->lane >= p->board.lanes)
        return bad_request(resp, error, error_cap, "link control: lane %u out of range", r->lane);
      if (good && ((p->board.faulty_lane_mask >> r->lane) & 1u))
        return bad_request(resp, error, error_cap, "link control: lane %u is faulty on the board",
                           r->lane);
      if (p->port.set_lane_good(r->lane, good) != LinkStatus::kOk)
        return bad_request(resp, error, error_cap, "link control: lane %u rejected", r->lane);
      if (good) p->good_lanes |= 1u << r->lane;
      else p->good_lanes &= ~(1u << r->lane);
      log(kLogInfo, "links: port %u: lane %u marked %s by host", unsigned(r->port),
          unsigned(r->lane), good ? "good" : "faulty");
      break;
    }
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_RESTORE:
      p->port.restore_capabilities();
      p->port.retrain();
      break;
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_SEND:
      if (r->bytes == 0 || r->bytes > kMaxSendBytes)
        return bad_request(resp, error, error_cap, "link control: bytes must be 1..%u MiB",
                           unsigned(kMaxSendBytes >> 20));
      p->gen_pending += r->bytes;
      break;
    case VTRN__CTRL__LINK_ACTION__LINK_ACTION_PING:
      if (r->count == 0 || r->count > kMaxPings || p->ping_pending + r->count > kMaxPings)
        return bad_request(resp, error, error_cap, "link control: count must be 1..%u",
                           unsigned(kMaxPings));
      // min/max describe the latest batch: a batch on an idle port starts
      // them afresh (done and the total stay cumulative).
      if (p->ping_pending == 0 && !p->ping_out) p->ping_min = p->ping_max = 0;
      p->ping_pending += r->count;
      break;
    default:
      return bad_request(resp, error, error_cap, "link control: unknown action %u",
                         unsigned(r->action));
  }
  p->port.poll(now);
  g_dirty = true;
  auto* body = arena_new<Vtrn__Ctrl__LinkControlResponse>(arena);
  if (body == nullptr) {
    resp->status = VTRN__CTRL__STATUS__STATUS_INTERNAL;
    snprintf(error, error_cap, "link control: out of response memory");
    return true;
  }
  vtrn__ctrl__link_control_response__init(body);
  body->state = uint32_t(p->port.state());
  resp->status = VTRN__CTRL__STATUS__STATUS_OK;
  resp->body_case = VTRN__CTRL__RESPONSE__BODY_LINK_CONTROL;
  resp->link_control = body;
  return true;
}

}  // namespace fw::links
