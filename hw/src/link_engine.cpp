// The link engines of a board and the wires between them. See
// vtrn/hw/link_engine.h and engine_abi.h ("Link engines").
#include "vtrn/hw/link_engine.h"

#include <errno.h>
#include <algorithm>
#include <math.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vtrn/ctrl_ring.h"
#include "vtrn/dma_abi.h"

namespace vtrn::hw {

using hostif::load_acquire;
using hostif::store_release;
using namespace vtrn::engine;

namespace {

constexpr uint32_t kNoChip = 0xffffffffu;

uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool width_ok(uint32_t w) { return w == 1 || w == 2 || w == 4 || w == 8 || w == 16; }

}  // namespace

uint64_t link_frames(uint64_t bytes) { return (bytes + kLinkFramePayload - 1) / kLinkFramePayload; }

uint64_t link_modeled_ns(uint64_t bytes, uint32_t speed_gtps, uint32_t width, uint64_t replays) {
  if (bytes == 0 || speed_gtps == 0 || width == 0) return 0;
  const uint64_t frames = link_frames(bytes);
  // The last frame of a replay is charged as a full frame: a bound, not a guess.
  const unsigned __int128 wire = (unsigned __int128)bytes + frames * kLinkFrameOverhead +
                                 (unsigned __int128)replays * (kLinkFramePayload + kLinkFrameOverhead);
  // speed_gtps Gbit/s per lane is speed_gtps bits per ns; 128b/130b encoding.
  const unsigned __int128 den = (unsigned __int128)128 * speed_gtps * width;
  const unsigned __int128 ns = (wire * 8 * 130 + den - 1) / den + kLinkLatencyNs +
                               (unsigned __int128)replays * kLinkReplayNs;
  return ns > UINT64_MAX ? UINT64_MAX : uint64_t(ns);
}

struct LinkFabric::Port {
  uint32_t index = 0;
  LinkEngineBlock* blk = nullptr;
  std::unique_ptr<hostif::SeqlockWriter<LinkStats>> stats_writer;
  LinkStats stats{};
  Mpu mpu;
  // Wiring (fixed after wire()).
  uint32_t peer_chip = kNoChip;
  uint32_t peer_port = 0;
  // Private state, forgotten at reset.
  uint32_t sq_cons = 0, sq_prod_seen = 0, scq_prod = 0;
  uint32_t rq_cons = 0, rq_prod_seen = 0, rcq_prod = 0;
  uint32_t error = 0;
  uint32_t config_seen = 0;
  LinkConfig config{};  // the applied copy; state down unless valid
  uint64_t rng = 0;
  std::deque<Pending> pending;
  bool irq = false;     // an interrupt to raise after the pass
  bool dirty = false;   // stats to publish
};

struct LinkFabric::Chip {
  uint32_t id = 0;
  const ChipMemory* mem = nullptr;
  Signals* signals = nullptr;
  ErrorLog* errors = nullptr;
  bool in_reset = false;
  std::vector<std::unique_ptr<Port>> ports;
};

LinkFabric::LinkFabric(Clock clock) : clock_(clock) {}
LinkFabric::~LinkFabric() = default;

LinkFabric::Chip* LinkFabric::find(uint32_t chip) {
  for (auto& c : chips_) {
    if (c->id == chip) return c.get();
  }
  return nullptr;
}

bool LinkFabric::attach(uint32_t chip, const ChipMemory& mem, Signals& signals, ErrorLog& errors,
                        uint32_t link_ports, std::string* err) {
  std::lock_guard<std::mutex> lock(mu_);
  if (find(chip) != nullptr) {
    *err = "chip " + std::to_string(chip) + " attached twice to the link fabric";
    return false;
  }
  if (link_ports > kMaxLinkPorts) {
    *err = "chip " + std::to_string(chip) + ": " + std::to_string(link_ports) + " link ports, the engines serve 0.." +
           std::to_string(kMaxLinkPorts);
    return false;
  }
  auto c = std::make_unique<Chip>();
  c->id = chip;
  c->mem = &mem;
  c->signals = &signals;
  c->errors = &errors;
  for (uint32_t i = 0; i < link_ports; ++i) {
    auto p = std::make_unique<Port>();
    p->index = i;
    p->blk = reinterpret_cast<LinkEngineBlock*>(mem.region + link_engine_offset(i));
    memset(p->blk, 0, sizeof *p->blk);
    p->stats_writer = std::make_unique<hostif::SeqlockWriter<LinkStats>>();
    p->stats_writer->attach(&p->blk->stats);
    p->stats_writer->publish(p->stats);
    c->ports.push_back(std::move(p));
  }
  IdBlock* id = mem.id();
  id->link_ports = link_ports;
  id->capabilities |= kCapLinkEngines;
  chips_.push_back(std::move(c));
  return true;
}

bool LinkFabric::wire(uint32_t chip_a, uint32_t port_a, uint32_t chip_b, uint32_t port_b, std::string* err) {
  std::lock_guard<std::mutex> lock(mu_);
  Chip* a = find(chip_a);
  Chip* b = find(chip_b);
  auto name = [](uint32_t c, uint32_t p) { return "chip " + std::to_string(c) + " port " + std::to_string(p); };
  if (a == nullptr || b == nullptr) {
    *err = "link " + name(chip_a, port_a) + " - " + name(chip_b, port_b) + ": chip not attached";
    return false;
  }
  if (port_a >= a->ports.size() || port_b >= b->ports.size()) {
    *err = "link " + name(chip_a, port_a) + " - " + name(chip_b, port_b) + ": no such link port";
    return false;
  }
  if (chip_a == chip_b && port_a == port_b) {
    *err = "link " + name(chip_a, port_a) + ": both ends are the same port";
    return false;
  }
  Port& pa = *a->ports[port_a];
  Port& pb = *b->ports[port_b];
  if (pa.peer_chip != kNoChip || pb.peer_chip != kNoChip) {
    *err = "link " + name(chip_a, port_a) + " - " + name(chip_b, port_b) + ": a port is wired already";
    return false;
  }
  pa.peer_chip = chip_b;
  pa.peer_port = port_b;
  pb.peer_chip = chip_a;
  pb.peer_port = port_a;
  return true;
}

bool LinkFabric::wire_topology(const board::Topology& t, std::string* err, uint32_t* wired) {
  if (wired != nullptr) *wired = 0;
  for (uint32_t i = 0; i < t.link_count && i < board::kMaxLinks; ++i) {
    const board::Link& l = t.links[i];
    if (l.a.kind != board::EndKind::kChip || l.b.kind != board::EndKind::kChip || !l.a_on_board || !l.b_on_board)
      continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (find(l.a.id) == nullptr || find(l.b.id) == nullptr) continue;
    }
    if (!wire(l.a.id, l.a.port, l.b.id, l.b.port, err)) return false;
    if (wired != nullptr) ++*wired;
  }
  return true;
}

void LinkFabric::post_error(Chip& c, Port& p, uint32_t code, uint32_t queue, uint32_t status, uint64_t addr,
                            uint64_t len, uint64_t cookie, uint32_t detail) {
  ErrorRecord r{};
  r.code = code;
  r.source = kSourceLink;
  r.engine = p.index;
  r.queue = queue;
  r.status = status;
  r.address = addr;
  r.length = len;
  r.cookie = cookie;
  r.mpu_generation = p.mpu.generation();
  r.detail = detail;
  c.errors->post(r);
}

void LinkFabric::latch(Chip& c, Port& p, uint32_t e) {
  if (p.error) return;
  p.error = e;
  store_release(&p.blk->error, e);
  post_error(c, p, kEngineQueueBroken, 0, 0, 0, 0, 0, e);
}

void LinkFabric::apply_config(Chip& c, Port& p) {
  const uint32_t gen = __atomic_load_n(&p.blk->config.config_gen, __ATOMIC_ACQUIRE);
  LinkConfig cfg;
  memcpy(&cfg, &p.blk->config, sizeof cfg);
  p.config_seen = gen;
  bool ok = cfg.state == kLinkStateDown || cfg.state == kLinkStateUp;
  for (uint64_t r : cfg.reserved) ok = ok && r == 0;
  if (ok && cfg.state == kLinkStateUp)
    ok = cfg.speed_gtps >= 1 && cfg.speed_gtps <= 128 && width_ok(cfg.width) && cfg.ber_e12 <= kLinkBerScale;
  if (ok) {
    p.config = cfg;
    p.blk->config_status = kEngineOk;
  } else {
    p.config = LinkConfig{};
    post_error(c, p, kEngineBadConfig, 0, 0, 0, 0, 0, kFieldLink);
    p.blk->config_status = kEngineBadConfig | (kFieldLink << 8);
  }
  p.rng = p.config.ber_seed ^ (uint64_t(c.id) << 40) ^ (uint64_t(p.index) << 32);
  // Release: the status is visible before the ack that says it is final.
  __atomic_store_n(&p.blk->config_ack, gen, __ATOMIC_RELEASE);
}

bool LinkFabric::producer_ok(Chip& c, Port& p, uint32_t prod, uint32_t seen, uint32_t cons, uint32_t depth) {
  if (int32_t(prod - seen) < 0) {
    latch(c, p, dma::kQueueSqIndexBackward);
    return false;
  }
  if (prod - cons > depth) {
    latch(c, p, dma::kQueueSqIndexJump);
    return false;
  }
  return true;
}

bool LinkFabric::take_sends(Chip& c, Port& p) {
  if (p.error) return false;
  const uint32_t prod = load_acquire(&p.blk->sq_prod);
  if (!producer_ok(c, p, prod, p.sq_prod_seen, p.sq_cons, kLinkSendDepth)) return false;
  p.sq_prod_seen = prod;
  bool took = false;
  while (p.sq_cons != prod && p.pending.size() < kLinkSendDepth) {
    Pending q;
    memcpy(&q.d, &p.blk->sq[p.sq_cons % kLinkSendDepth], sizeof q.d);
    p.pending.push_back(q);
    ++p.sq_cons;
    took = true;
  }
  // Release: our reads of the slots are done before the fw may reuse them.
  if (took) store_release(&p.blk->sq_cons, p.sq_cons);
  return took;
}

bool LinkFabric::peer_ready(Chip& pc, Port& pp) {
  if (pp.error) return false;
  const uint32_t prod = load_acquire(&pp.blk->rq_prod);
  if (!producer_ok(pc, pp, prod, pp.rq_prod_seen, pp.rq_cons, kLinkRecvDepth)) return false;
  pp.rq_prod_seen = prod;
  if (prod == pp.rq_cons) return false;
  const uint32_t used = pp.rcq_prod - load_acquire(&pp.blk->rcq_cons);
  if (used > kLinkRecvDepth) {
    latch(pc, pp, dma::kQueueCqConsumerAhead);
    return false;
  }
  return used < kLinkRecvDepth;
}

void LinkFabric::complete_send(Chip& c, Port& p, const LinkSendDescriptor& d, uint32_t status, uint64_t bytes,
                               uint64_t ns, uint32_t replays, uint32_t peer_chip, uint32_t peer_port) {
  LinkCompletion done{};
  done.cookie = d.cookie;
  done.status = status;
  done.tag = d.tag;
  done.bytes = bytes;
  done.modeled_ns = ns;
  done.peer_chip = peer_chip;
  done.peer_port = peer_port;
  done.replays = replays;
  p.blk->scq[p.scq_prod % kLinkSendDepth] = done;
  // Release: the completion is visible before the index that publishes it.
  store_release(&p.blk->scq_prod, ++p.scq_prod);
  ++p.stats.sends;
  if (status != kLinkOk) ++p.stats.errors;
  p.stats.modeled_ns += ns;
  if ((d.flags & kLinkIrq) && load_acquire(&p.blk->irq_armed)) p.irq = true;
  p.dirty = true;
  (void)c;
}

void LinkFabric::complete_recv(Chip& c, Port& p, const LinkRecvBuffer& b, uint32_t status, uint32_t tag,
                               uint64_t bytes, uint64_t ns, uint32_t replays, uint32_t peer_chip,
                               uint32_t peer_port) {
  LinkCompletion done{};
  done.cookie = b.cookie;
  done.status = status;
  done.tag = tag;
  done.bytes = bytes;
  done.modeled_ns = ns;
  done.peer_chip = peer_chip;
  done.peer_port = peer_port;
  done.replays = replays;
  p.blk->rcq[p.rcq_prod % kLinkRecvDepth] = done;
  store_release(&p.blk->rcq_prod, ++p.rcq_prod);
  ++p.stats.recvs;
  if (status != kLinkOk) ++p.stats.errors;
  if ((b.flags & kLinkIrq) && load_acquire(&p.blk->irq_armed)) p.irq = true;
  p.dirty = true;
  (void)c;
}

uint32_t LinkFabric::draw_replays(Port& p, uint64_t bytes, bool* exhausted) {
  *exhausted = false;
  if (p.config.ber_e12 == 0) return 0;
  const double ber = double(p.config.ber_e12) / double(kLinkBerScale);
  const uint64_t frames = link_frames(bytes);
  const uint64_t last = bytes - (frames - 1) * kLinkFramePayload;
  auto p_frame = [&](uint64_t payload) {
    const double bits = double(payload + kLinkFrameOverhead) * 8.0;
    return ber >= 1.0 ? 1.0 : -expm1(bits * log1p(-ber));
  };
  const double full = p_frame(kLinkFramePayload);
  const double tail = p_frame(last);
  uint32_t replays = 0;
  for (uint64_t f = 0; f < frames; ++f) {
    const double pf = f + 1 == frames ? tail : full;
    uint32_t tries = 0;
    // A corrupted frame fails its CRC at the receiver and is replayed.
    while (double(splitmix64(&p.rng) >> 11) * 0x1.0p-53 < pf) {
      ++replays;
      if (++tries == kLinkMaxReplays) {
        *exhausted = true;
        return replays;
      }
    }
  }
  return replays;
}

bool LinkFabric::try_send(Chip& c, Port& p) {
  Pending& head = p.pending.front();
  const LinkSendDescriptor d = head.d;
  // Room for the send completion first: a full ring waits for scq_cons.
  const uint32_t used = p.scq_prod - load_acquire(&p.blk->scq_cons);
  if (used > kLinkSendDepth) {
    latch(c, p, dma::kQueueCqConsumerAhead);
    return false;
  }
  if (used == kLinkSendDepth) return false;
  auto fail = [&](uint32_t s) {
    complete_send(c, p, d, s, 0, 0, 0, p.peer_chip == kNoChip ? 0 : p.peer_chip, p.peer_port);
    p.pending.pop_front();
    return true;
  };
  bool reserved_zero = true;
  for (uint64_t r : d.reserved) reserved_zero = reserved_zero && r == 0;
  if (d.length == 0 || d.length > kLinkMaxTransfer || (d.flags & ~uint32_t(kLinkKnownFlags)) || !reserved_zero ||
      d.addr > UINT64_MAX - d.length)
    return fail(kLinkBadDescriptor);
  if (p.peer_chip == kNoChip) return fail(kLinkUnwired);
  if (d.dest_chip != p.peer_chip || d.dest_port != p.peer_port) return fail(kLinkWrongPeer);
  if (p.config.state != kLinkStateUp) return fail(kLinkDown);
  Chip* pc = find(p.peer_chip);
  if (pc == nullptr || pc->in_reset) return fail(kLinkPeerReset);
  Port& pp = *pc->ports[p.peer_port];
  if (pp.config_seen != __atomic_load_n(&pp.blk->config.config_gen, __ATOMIC_ACQUIRE)) apply_config(*pc, pp);
  if (pp.config.state != kLinkStateUp) return fail(kLinkDown);
  uint8_t* src = c.mem->ram_at(d.addr, d.length);
  if (src == nullptr) {
    post_error(c, p, kEngineBadAddress, kLinkQueueSend, kLinkBadAddress, d.addr, d.length, d.cookie, 0);
    return fail(kLinkBadAddress);
  }
  if (p.mpu.check(d.addr, d.length) != dma::kOk) {
    post_error(c, p, kEngineMpuFault, kLinkQueueSend, kLinkMpuFault, d.addr, d.length, d.cookie, 0);
    return fail(kLinkMpuFault);
  }
  if (!peer_ready(*pc, pp)) {
    if (pp.error) return fail(kLinkPeerFault);  // the peer's receive ring latched: it never takes a buffer
    if (!head.stalled) {
      head.stalled = true;
      ++p.stats.credit_stalls;
      p.dirty = true;
    }
    return false;
  }
  LinkRecvBuffer b;
  memcpy(&b, &pp.blk->rq[pp.rq_cons % kLinkRecvDepth], sizeof b);
  ++pp.rq_cons;
  store_release(&pp.blk->rq_cons, pp.rq_cons);
  auto both = [&](uint32_t send_status, uint32_t recv_status) {
    complete_recv(*pc, pp, b, recv_status, d.tag, 0, 0, 0, c.id, p.index);
    return fail(send_status);
  };
  if (b.length == 0 || b.length > kLinkMaxTransfer || (b.flags & ~uint32_t(kLinkKnownFlags)) || b.reserved != 0 ||
      b.addr > UINT64_MAX - b.length)
    return both(kLinkPeerFault, kLinkBadDescriptor);
  uint8_t* dst = pc->mem->ram_at(b.addr, b.length);
  if (dst == nullptr) {
    post_error(*pc, pp, kEngineBadAddress, kLinkQueueRecv, kLinkBadAddress, b.addr, b.length, b.cookie, 0);
    return both(kLinkPeerFault, kLinkBadAddress);
  }
  pp.mpu.refresh(pc->mem->mpu());
  if (pp.mpu.check(b.addr, b.length) != dma::kOk) {
    post_error(*pc, pp, kEngineMpuFault, kLinkQueueRecv, kLinkMpuFault, b.addr, b.length, b.cookie, 0);
    return both(kLinkPeerFault, kLinkMpuFault);
  }
  if (d.length > b.length) return both(kLinkBufferTooSmall, kLinkBufferTooSmall);

  bool exhausted = false;
  const uint32_t replays = draw_replays(p, d.length, &exhausted);
  const uint64_t frames = link_frames(d.length);
  // The slower end sets the pace (both ends trained together, so they agree
  // unless the fw published different figures).
  const uint32_t speed = std::min(p.config.speed_gtps, pp.config.speed_gtps);
  const uint32_t width = std::min(p.config.width, pp.config.width);
  p.stats.replays += replays;
  pp.stats.crc_errors += replays;
  if (exhausted) {
    const uint64_t ns = link_modeled_ns(d.length, speed, width, replays);
    p.stats.frames_tx += replays;
    complete_recv(*pc, pp, b, kLinkReplayLimit, d.tag, 0, ns, replays, c.id, p.index);
    complete_send(c, p, d, kLinkReplayLimit, 0, ns, replays, pc->id, pp.index);
    p.pending.pop_front();
    return true;
  }
  // The payload, once and correct: replays cost time and counters only.
  memmove(dst, src, d.length);
  const uint64_t ns = link_modeled_ns(d.length, speed, width, replays);
  p.stats.frames_tx += frames + replays;
  p.stats.bytes_tx += d.length;
  pp.stats.frames_rx += frames;
  pp.stats.bytes_rx += d.length;
  complete_recv(*pc, pp, b, kLinkOk, d.tag, d.length, ns, replays, c.id, p.index);
  complete_send(c, p, d, kLinkOk, d.length, ns, replays, pc->id, pp.index);
  p.pending.pop_front();
  return true;
}

bool LinkFabric::run_pass() {
  std::lock_guard<std::mutex> lock(mu_);
  bool moved = false;
  for (auto& cp : chips_) {
    Chip& c = *cp;
    if (c.in_reset) continue;
    for (auto& pp : c.ports) {
      Port& p = *pp;
      if (p.config_seen != __atomic_load_n(&p.blk->config.config_gen, __ATOMIC_ACQUIRE)) apply_config(c, p);
      // Between transfers nothing is in flight: the snapshot taken now is
      // the one every later check uses, so it is acknowledged at once.
      const uint32_t gen = p.mpu.refresh(c.mem->mpu());
      if (load_acquire(&p.blk->mpu_ack) != gen) store_release(&p.blk->mpu_ack, gen);
      if (take_sends(c, p)) moved = true;
      while (!p.pending.empty() && !p.error && try_send(c, p)) moved = true;
      store_release(&p.blk->state, p.pending.empty() ? kEngineIdle : kEngineBusy);
    }
  }
  // Counters and interrupts once per pass, for both ends of every transfer.
  for (auto& cp : chips_) {
    for (auto& pp : cp->ports) {
      Port& p = *pp;
      if (p.irq) {
        ++p.stats.irqs;
        p.dirty = true;
      }
      if (p.dirty) p.stats_writer->publish(p.stats);
      p.dirty = false;
      if (p.irq) cp->signals->chip_irq(uint16_t(kVectorLink0 + p.index));
      p.irq = false;
    }
  }
  return moved;
}

bool LinkFabric::has_work() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& cp : chips_) {
    if (cp->in_reset) continue;
    for (auto& pp : cp->ports) {
      Port& p = *pp;
      if (p.config_seen != __atomic_load_n(&p.blk->config.config_gen, __ATOMIC_ACQUIRE)) return true;
      if (load_acquire(&cp->mem->mpu()->header.generation) != p.mpu.generation()) return true;
      if (p.error) continue;
      if (load_acquire(&p.blk->sq_prod) != p.sq_cons) return true;
      if (!p.pending.empty() && load_acquire(&p.blk->scq_cons) + kLinkSendDepth != p.scq_prod) {
        // A stalled head moves when its peer posts a buffer.
        if (!p.pending.front().stalled) return true;
        Chip* pc = find(p.peer_chip);
        if (pc == nullptr || pc->in_reset) return true;
        if (load_acquire(&pc->ports[p.peer_port]->blk->rq_prod) != pc->ports[p.peer_port]->rq_cons) return true;
      }
    }
  }
  return false;
}

uint32_t LinkFabric::stalled() {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (auto& cp : chips_) {
    for (auto& pp : cp->ports) {
      if (!pp->pending.empty() && pp->pending.front().stalled) ++n;
    }
  }
  return n;
}

void LinkFabric::reset_port(Chip& c, Port& p) {
  (void)c;
  memset(p.blk, 0, sizeof *p.blk);
  p.sq_cons = p.sq_prod_seen = p.scq_prod = 0;
  p.rq_cons = p.rq_prod_seen = p.rcq_prod = 0;
  p.error = 0;
  p.config_seen = 0;
  p.config = LinkConfig{};
  p.pending.clear();
  p.irq = false;
  p.mpu.clear();
  // Counters go on across a reset, as the other engines' do.
  p.stats_writer->publish(p.stats);
  p.dirty = false;
}

void LinkFabric::begin_reset(uint32_t chip) {
  std::lock_guard<std::mutex> lock(mu_);
  Chip* c = find(chip);
  if (c == nullptr) return;
  c->in_reset = true;
  // Sends of other chips waiting on this one complete now, with the reason.
  for (auto& op : chips_) {
    if (op.get() == c || op->in_reset) continue;
    for (auto& pp : op->ports) {
      Port& p = *pp;
      if (p.peer_chip != chip) continue;
      while (!p.pending.empty()) {
        const uint32_t used = p.scq_prod - load_acquire(&p.blk->scq_cons);
        if (used >= kLinkSendDepth) break;  // no room: they complete (kLinkPeerReset) on a later pass
        complete_send(*op, p, p.pending.front().d, kLinkPeerReset, 0, 0, 0, chip, p.peer_port);
        p.pending.pop_front();
      }
    }
  }
  for (auto& pp : c->ports) reset_port(*c, *pp);
  for (auto& op : chips_) {
    for (auto& pp : op->ports) {
      Port& p = *pp;
      if (p.irq) ++p.stats.irqs;
      if (p.dirty || p.irq) p.stats_writer->publish(p.stats);
      p.dirty = false;
      if (p.irq) op->signals->chip_irq(uint16_t(kVectorLink0 + p.index));
      p.irq = false;
    }
  }
}

void LinkFabric::end_reset(uint32_t chip) {
  std::lock_guard<std::mutex> lock(mu_);
  Chip* c = find(chip);
  if (c == nullptr) return;
  c->in_reset = false;
  c->mem->id()->link_ports = uint32_t(c->ports.size());
  c->mem->id()->capabilities |= kCapLinkEngines;
}

// LinkFabricThread: the fabric's thread, asleep on the ports' doorbells.

LinkFabricThread::~LinkFabricThread() { stop(); }

bool LinkFabricThread::start(const std::vector<int>& doorbells, std::string* err) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) {
    *err = std::string("link fabric: ") + strerror(errno);
    return false;
  }
  doorbells_ = doorbells;
  doorbells_.push_back(wake_);
  for (int fd : doorbells_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      *err = std::string("link fabric: epoll_ctl: ") + strerror(errno);
      return false;
    }
  }
  stop_.store(false);
  thread_ = std::thread([this] { run(); });
  return true;
}

void LinkFabricThread::kick() {
  if (wake_ < 0) return;
  const uint64_t one = 1;
  ssize_t n = write(wake_, &one, sizeof one);
  (void)n;
}

void LinkFabricThread::stop() {
  if (thread_.joinable()) {
    stop_.store(true);
    kick();
    thread_.join();
  }
  if (epoll_ >= 0) close(epoll_);
  if (wake_ >= 0) close(wake_);
  epoll_ = wake_ = -1;
}

void LinkFabricThread::run() {
  while (!stop_.load()) {
    while (fabric_.run_pass()) {
    }
    // Sleep until a doorbell (or a kick); re-check after draining, as a
    // doorbell is only a hint.
    epoll_event evs[16];
    const int n = epoll_wait(epoll_, evs, 16, -1);
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      uint64_t v;
      while (read(evs[i].data.fd, &v, sizeof v) == ssize_t(sizeof v)) {
      }
    }
  }
}

}  // namespace vtrn::hw
