// vtrnd link service implementation: regions, QEMU arguments, switch ports,
// status reads and LinkControl forwarding (see link_service.h).
#include "link_service.h"
#include "proto_arena.h"
#include "vtrn/seqlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <dirent.h>
#include <signal.h>

#include <chrono>
#include <cmath>

#include "api_enums.h"
#include "vtrn/drv/log.h"
#include "vtrn/hostif.h"

namespace drv {
namespace {

namespace abi = vtrn::links;
using vtrn::link::LinkSpeed;
using vtrn::link::LinkState;

constexpr uint64_t kSwitchBusyPollNs = 1'000'000;
constexpr uint64_t kSwitchIdlePollNs = 10'000'000;
constexpr uint32_t kControlTimeoutMs = 3000;

uint64_t mono_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// The firmware's link timing (vtrn::link::kChipTiming), so a switch port is
// as patient with a descheduled chip as a chip is with its peer.
vtrn::link::Config switch_config() {
  vtrn::link::Config c;
  c.max_payload = abi::kLinkMaxPayload;
  c.replay_frames = 4;
  c.rx_frames = 4;
  c.frames_per_poll = 16;
  c.model_bandwidth = true;
  return vtrn::link::with_chip_timing(c);
}

// Enum values from shared memory are untrusted: anything out of range reads "?".
const char* state_name(uint8_t v) {
  return v < vtrn::link::kLinkStateCount ? vtrn::link::to_string(LinkState(v)) : "?";
}
const char* speed_name(uint8_t v) {
  return v <= uint8_t(LinkSpeed::k64GT) ? vtrn::link::to_string(LinkSpeed(v)) : "?";
}
const char* reason_name(uint8_t v) {
  return v <= uint8_t(vtrn::link::LinkReason::kDisabled)
             ? vtrn::link::to_string(vtrn::link::LinkReason(v))
             : "?";
}
const char* recovery_name(uint8_t v) {
  return v <= uint8_t(vtrn::link::RecoveryCause::kL1Exit)
             ? vtrn::link::to_string(vtrn::link::RecoveryCause(v))
             : "?";
}


// A vtrnd killed with SIGKILL cannot remove its /dev/shm region directory;
// the next vtrnd of the same user removes those whose owner is gone.
void sweep_dead_region_dirs() {
  const std::string prefix = "vtrn-links-" + std::to_string(::getuid()) + "-";
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = pid_t(std::stol(pid_text));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string dir = "/dev/shm/" + name;
    if (DIR* sub = ::opendir(dir.c_str())) {
      while (dirent* f = ::readdir(sub)) {
        const std::string file = f->d_name;
        if (file.size() > 4 && file.compare(file.size() - 4, 4, ".shm") == 0)
          ::unlink((dir + "/" + file).c_str());
      }
      ::closedir(sub);
    }
    if (::rmdir(dir.c_str()) == 0) DRV_LOGI("links: removed %s left by a vtrnd that died", dir.c_str());
  }
  ::closedir(d);
}

}  // namespace

// ShmFileMedium.

Error ShmFileMedium::create() {
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error(Code::kSystem, "link region " + path_ + ": " + strerror(errno));
  created_ = true;
  const bool ok = ::ftruncate(fd, off_t(bytes_)) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) return Error(Code::kSystem, "link region " + path_ + ": ftruncate: " + strerror(saved));
  return Error();
}

std::vector<std::string> ShmFileMedium::qemu_args(const std::string& tag, uint32_t slot) const {
  char addr[16];
  snprintf(addr, sizeof addr, "0x%x", slot);
  return {"-object",
          "memory-backend-file,id=" + tag + ",share=on,mem-path=" + path_ +
              ",size=" + std::to_string(bytes_),
          "-device", "ivshmem-plain,memdev=" + tag + ",bus=pcie.0,addr=" + addr};
}

uint8_t* ShmFileMedium::host_map() {
  if (map_ != nullptr || !created_) return map_;
  const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  map_ = static_cast<uint8_t*>(p);
  return map_;
}

void ShmFileMedium::destroy() {
  if (map_ != nullptr) {
    ::munmap(map_, bytes_);
    map_ = nullptr;
  }
  if (created_) {
    ::unlink(path_.c_str());
    created_ = false;
  }
}

// LinkService.

struct LinkService::SwitchPort {
  uint32_t sw = 0;
  uint32_t port = 0;
  uint32_t link = 0;
  uint32_t side = 0;
  vtrn::board::LinkEnd peer;
  vtrn::link::ShmTransport t;
  vtrn::link::Port p;
  std::vector<uint64_t> storage;
  bool active = false;
};

LinkService::LinkService(EventLoop* loop, const BoardSpec& board, std::string runtime_dir,
                         ReplyFn reply)
    : loop_(loop), board_(board), runtime_dir_(std::move(runtime_dir)), reply_(std::move(reply)) {}

LinkService::~LinkService() { stop(); }

Error LinkService::prepare() {
  topo_ = std::make_unique<vtrn::board::Topology>();
  const vtrn::Error r =
      vtrn::board::parse_topology(board_.dtb.data(), board_.dtb.size(), topo_.get());
  if (!r.ok()) return Error(r).prefix("board wiring: ");
  if (topo_->link_count == 0) return Error();
  sweep_dead_region_dirs();
  // Regions must be on tmpfs: a disk-backed file would write every ring
  // update back to the disk. The runtime directory usually is tmpfs
  // (XDG_RUNTIME_DIR); when it is not, /dev/shm is.
  struct statfs fs{};
  const bool runtime_tmpfs =
      ::statfs(runtime_dir_.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  dir_ = runtime_tmpfs ? runtime_dir_ + "/links"
                       : "/dev/shm/vtrn-links-" + std::to_string(::getuid()) + "-" +
                             std::to_string(::getpid());
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Error(Code::kSystem, "link regions: mkdir " + dir_ + ": " + strerror(errno));
  own_dir_ = true;
  media_.resize(topo_->link_count);
  for (uint32_t i = 0; i < topo_->link_count; ++i) {
    const vtrn::board::Link& l = topo_->links[i];
    auto m = std::make_unique<ShmFileMedium>(dir_ + "/link" + std::to_string(l.index) + ".shm",
                                             abi::kLinkRegionBytes);
    if (Error e = m->create(); !e.ok()) return e;
    media_[i] = std::move(m);
  }
  DRV_LOGI("links: %u links, %u switches, regions in %s", topo_->link_count,
           topo_->switch_count, dir_.c_str());
  return Error();
}

std::vector<std::string> LinkService::qemu_args(uint32_t chip_id) const {
  std::vector<std::string> args;
  if (!topo_) return args;
  for (uint32_t i = 0; i < topo_->link_count; ++i) {
    const vtrn::board::Link& l = topo_->links[i];
    for (const vtrn::board::LinkEnd* e : {&l.a, &l.b}) {
      if (e->kind != vtrn::board::EndKind::kChip || e->id != chip_id || !media_[i]) continue;
      const std::vector<std::string> a =
          media_[i]->qemu_args("link" + std::to_string(l.index) + "p" + std::to_string(e->port),
                               abi::kPortSlotBase + e->port);
      args.insert(args.end(), a.begin(), a.end());
    }
  }
  return args;
}

void LinkService::add_chip(Chip* chip) { chips_.push_back(chip); }

void LinkService::start() {
  if (!topo_) return;
  const uint64_t now = mono_ns();
  const vtrn::link::Config cfg = switch_config();
  for (uint32_t i = 0; i < topo_->link_count; ++i) {
    const vtrn::board::Link& l = topo_->links[i];
    for (uint32_t side = 0; side < 2; ++side) {
      const vtrn::board::LinkEnd& e = side == 0 ? l.a : l.b;
      if (e.kind != vtrn::board::EndKind::kSwitch) continue;
      const vtrn::board::Switch* sw = nullptr;
      for (uint32_t k = 0; k < topo_->switch_count; ++k) {
        if (topo_->switches[k].id == e.id) sw = &topo_->switches[k];
      }
      uint8_t* mem = media_[i] ? media_[i]->host_map() : nullptr;
      if (sw == nullptr || mem == nullptr) {
        DRV_LOGE("links: switch %u port %u: no region mapping", e.id, e.port);
        continue;
      }
      auto sp = std::make_unique<SwitchPort>();
      sp->sw = e.id;
      sp->port = e.port;
      sp->link = l.index;
      sp->side = side;
      sp->peer = side == 0 ? l.b : l.a;
      const uint32_t lanes = sw->lanes;
      const vtrn::link::Capabilities caps{vtrn::link::speed_from_gtps(sw->max_speed_gtps), uint8_t(lanes),
                                          lanes >= 32 ? 0xFFFFFFFFu : (1u << lanes) - 1u};
      const uint32_t epoch = uint32_t(now) ^ (e.id << 24) ^ (e.port << 8) ^ uint32_t(::getpid());
      if (!sp->t.attach(mem, media_[i]->bytes(), side,
                        uint32_t(sizeof(vtrn::link::FrameHeader)) + cfg.max_payload, epoch)) {
        DRV_LOGE("links: switch %u port %u: region cannot hold a link ring", e.id, e.port);
        continue;
      }
      sp->storage.assign(vtrn::link::Port::storage_bytes(cfg) / 8 + 1, 0);
      if (sp->p.init(&sp->t, caps, cfg, reinterpret_cast<uint8_t*>(sp->storage.data()),
                     sp->storage.size() * 8, now) != vtrn::link::LinkStatus::kOk) {
        DRV_LOGE("links: switch %u port %u: link layer rejected its configuration", e.id, e.port);
        continue;
      }
      sp->active = true;
      switch_ports_.push_back(std::move(sp));
    }
  }
  if (!switch_ports_.empty()) {
    DRV_LOGI("links: running %zu switch ports", switch_ports_.size());
    poll_switches();
  }
}

void LinkService::poll_switches() {
  timer_armed_ = false;
  const uint64_t now = mono_ns();
  bool busy = false;
  uint8_t sink[abi::kLinkMaxPayload];
  for (auto& sp : switch_ports_) {
    if (!sp->active) continue;
    sp->p.poll(now);
    // Frames are not forwarded between switch ports: what a chip sends to
    // the switch is delivered (acknowledged) and dropped here.
    uint32_t len = 0;
    while (sp->p.receive(sink, sizeof sink, &len) == vtrn::link::LinkStatus::kOk) {
    }
    const LinkState s = sp->p.state();
    if (s == LinkState::kPolling || s == LinkState::kConfiguration || s == LinkState::kRecovery ||
        sp->p.rx_pending() > 0 || sp->p.tx_outstanding() > 0) {
      busy = true;
    }
  }
  timer_ = loop_->add_timer_in(busy ? kSwitchBusyPollNs : kSwitchIdlePollNs,
                               [this] { poll_switches(); });
  timer_armed_ = true;
}

void LinkService::stop() {
  if (timer_armed_) {
    loop_->cancel_timer(timer_);
    timer_armed_ = false;
  }
  switch_ports_.clear();
  for (auto& m : media_) {
    if (m) m->destroy();
  }
  media_.clear();
  if (own_dir_) {
    ::rmdir(dir_.c_str());
    own_dir_ = false;
  }
}

Error LinkService::read_chip(Chip* chip, abi::LinksBlock* out) const {
  return read_links_block(*chip, out);
}

Error read_links_block(const Chip& chip, abi::LinksBlock* out) {
  const uint8_t* bar2 = chip.links_block();
  if (bar2 == nullptr) return Error(Code::kNotReady, chip.not_ready_reason());
  vtrn::hostif::SeqlockRetry retry;
  if (vtrn::hostif::seqlock_read<offsetof(abi::LinksHeader, seq)>(
          reinterpret_cast<const abi::LinksBlock*>(bar2), out, retry)) {
    const abi::LinksHeader& h = out->header;
    if (h.magic != abi::kMagic || h.version != abi::kVersion ||
        h.header_size != sizeof(abi::LinksHeader) || h.port_size != sizeof(abi::PortStatus) ||
        h.port_count > abi::kMaxPorts)
      return Error(Code::kBadHardware, "link status block is invalid (magic/version/geometry)");
    return Error();
  }
  return Error(Code::kBusy, "link status block is being rewritten continuously");
}

void LinkService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st,
                              const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

namespace {

void fill_port(ProtoArena& k, uint32_t chip, const abi::PortStatus& s, const std::string& error,
               Vtrn__Api__LinkPortStatus* p) {
  vtrn__api__link_port_status__init(p);
  p->chip = chip;
  p->port = s.index;
  p->error = k.str(error);
  if (!error.empty()) {
    p->state = k.str("-");
    p->speed = k.str("-");
    p->reason = k.str("");
    p->last_down = k.str("");
    p->last_recovery = k.str("");
    p->peer_kind = k.str("");
    p->max_speed = k.str("-");
    return;
  }
  p->state = k.str(state_name(s.state));
  p->speed = k.str(s.speed == 0 ? "-" : speed_name(s.speed));
  p->width = s.width;
  p->reason = k.str(reason_name(s.reason));
  p->last_down = k.str(reason_name(s.last_down));
  p->last_recovery = k.str(recovery_name(s.last_recovery));
  p->wired = (s.flags & abi::kPortWired) != 0;
  p->function = (s.flags & abi::kPortFunction) != 0;
  p->peer_kind = k.str(s.peer_kind == abi::kPeerChip     ? "chip"
                       : s.peer_kind == abi::kPeerSwitch ? "switch"
                                                         : "");
  p->peer_id = s.peer_id;
  p->peer_port = s.peer_port;
  p->peer_on_board = (s.flags & abi::kPortPeerOnBoard) != 0;
  p->link = s.link;
  p->side = s.side;
  p->max_speed = k.str(speed_name(s.max_speed));
  p->lanes = s.lanes;
  p->good_lanes = s.good_lanes;
  p->disabled = (s.flags & abi::kPortDisabled) != 0;
  p->ber = double(s.ber_e12) / 1e12;
  p->bandwidth_mbps = s.bandwidth_mbps;
  auto* c = k.make(Vtrn__Api__LinkCounters(VTRN__API__LINK_COUNTERS__INIT));
  c->tx_bytes = s.tx_bytes;
  c->rx_bytes = s.rx_bytes;
  c->tx_frames = s.tx_frames;
  c->rx_frames = s.rx_frames;
  c->crc_errors = s.crc_errors;
  c->seq_errors = s.seq_errors;
  c->naks_sent = s.naks_sent;
  c->naks_received = s.naks_received;
  c->replays = s.replays;
  c->replayed_frames = s.replayed_frames;
  c->replay_timeouts = s.replay_timeouts;
  c->duplicates = s.duplicates;
  c->retrains = s.retrains;
  c->failed_retrains = s.failed_retrains;
  c->downgrades = s.downgrades;
  c->link_ups = s.link_ups;
  c->link_downs = s.link_downs;
  c->transport_errors = s.transport_errors;
  c->protocol_errors = s.protocol_errors;
  c->tx_dropped = s.tx_dropped;
  c->injected_bit_errors = s.injected_bit_errors;
  c->ts_sent = s.ts_sent;
  c->ts_received = s.ts_received;
  c->l0s_entries = s.l0s_entries;
  c->l1_entries = s.l1_entries;
  c->gen_pending_bytes = s.gen_pending_bytes;
  c->gen_sent_bytes = s.gen_sent_bytes;
  c->check_good_frames = s.check_good_frames;
  c->check_bad_frames = s.check_bad_frames;
  c->check_good_bytes = s.check_good_bytes;
  c->ping_pending = s.ping_pending;
  c->ping_done = s.ping_done;
  c->ping_rtt_total_ns = s.ping_rtt_total_ns;
  c->ping_rtt_min_ns = s.ping_rtt_min_ns;
  c->ping_rtt_max_ns = s.ping_rtt_max_ns;
  p->counters = c;
}

void fill_switch_port(ProtoArena& k, uint32_t sw, uint32_t port, const vtrn::board::LinkEnd& peer,
                      uint32_t link, uint32_t side, const vtrn::link::Port& lp,
                      Vtrn__Api__LinkPortStatus* p) {
  abi::PortStatus s{};
  const vtrn::link::Counters c = lp.counters();
  s.index = port;
  s.flags = abi::kPortWired | abi::kPortFunction | abi::kPortPeerOnBoard;
  s.state = uint8_t(c.state);
  s.speed = uint8_t(c.speed);
  s.width = c.width;
  s.reason = uint8_t(c.reason);
  s.last_down = uint8_t(c.last_down);
  s.last_recovery = uint8_t(c.last_recovery);
  s.peer_kind = abi::kPeerChip;
  s.peer_id = peer.id;
  s.peer_port = peer.port;
  s.link = link;
  s.side = uint8_t(side);
  s.bandwidth_mbps = c.bandwidth_mbps;
  s.tx_bytes = c.tx_bytes;
  s.rx_bytes = c.rx_bytes;
  s.tx_frames = c.tx_frames;
  s.rx_frames = c.rx_frames;
  s.crc_errors = c.crc_errors;
  s.replays = c.replays;
  s.retrains = c.retrains;
  s.link_ups = c.link_ups;
  s.link_downs = c.link_downs;
  s.ts_sent = c.ts_sent;
  s.ts_received = c.ts_received;
  fill_port(k, sw, s, "", p);
  p->on_switch = true;
}

}  // namespace

void LinkService::list(uint64_t cid, uint64_t id, const Vtrn__Api__LinkListRequest& r) {
  ProtoArena k;
  std::vector<Vtrn__Api__LinkPortStatus*> ports;
  bool matched = false;
  for (Chip* chip : chips_) {
    if (!r.all_chips && chip->id() != r.chip) continue;
    matched = true;
    abi::LinksBlock blk{};
    if (const Error err = read_chip(chip, &blk); !err.ok()) {
      // One row per port the board gives the chip, each carrying the reason.
      const vtrn::board::Chip& bc = chip->options().board;
      for (uint32_t i = 0; i < bc.port_count; ++i) {
        abi::PortStatus s{};
        s.index = bc.ports[i].index;
        auto* p = k.make(Vtrn__Api__LinkPortStatus{});
        fill_port(k, chip->id(), s, err.detail(), p);
        ports.push_back(p);
      }
      continue;
    }
    for (uint32_t i = 0; i < blk.header.port_count; ++i) {
      auto* p = k.make(Vtrn__Api__LinkPortStatus{});
      fill_port(k, chip->id(), blk.ports[i], "", p);
      p->state_ms = blk.header.updated_ns >= blk.ports[i].state_since_ns
                        ? (blk.header.updated_ns - blk.ports[i].state_since_ns) / 1'000'000
                        : 0;
      ports.push_back(p);
    }
  }
  if (!matched) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_UNKNOWN_CHIP,
                no_chip_text(r.chip));
    return;
  }
  if (r.switches) {
    for (auto& sp : switch_ports_) {
      auto* p = k.make(Vtrn__Api__LinkPortStatus{});
      fill_switch_port(k, sp->sw, sp->port, sp->peer, sp->link, sp->side, sp->p, p);
      ports.push_back(p);
    }
  }
  Vtrn__Api__LinkListResponse body = VTRN__API__LINK_LIST_RESPONSE__INIT;
  body.n_ports = ports.size();
  body.ports = ports.data();
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_LINK_LIST, &body.base);
}

void LinkService::control(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__LinkControlRequest& r) {
  if (r.action == VTRN__TYPES__LINK_ACTION__LINK_ACTION_NONE) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "link control: no action");
    return;
  }
  if (r.action == VTRN__TYPES__LINK_ACTION__LINK_ACTION_BER && !(r.ber >= 0.0 && r.ber <= 0.01)) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "link control: ber must be in 0..0.01");
    return;
  }
  Vtrn__Ctrl__LinkControlRequest body = VTRN__CTRL__LINK_CONTROL_REQUEST__INIT;
  body.port = r.port;
  body.action = r.action;  // one enum for both protocols (vtrn_types.proto)
  body.ber = r.ber;
  body.lane = r.lane;
  body.bytes = r.bytes;
  body.count = r.count;
  fw_call(*chip, &Vtrn__Ctrl__Request::link_control, body, &Vtrn__Ctrl__Response::link_control, kControlTimeoutMs,
          [this, cid, id](const FwReply<Vtrn__Ctrl__LinkControlResponse>& res) {
    if (!res.ok()) {
      reply_error(cid, id, to_api(res.error), res.error.detail());
      return;
    }
    Vtrn__Api__LinkControlResponse lr = VTRN__API__LINK_CONTROL_RESPONSE__INIT;
    std::string st = state_name(uint8_t(res.body->state > 255 ? 255 : res.body->state));
    lr.state = st.data();
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_LINK_CONTROL, &lr.base);
  });
}

void LinkService::topo(uint64_t cid, uint64_t id) {
  ProtoArena k;
  // One read per chip, then every link end looks its port up.
  std::vector<std::unique_ptr<abi::LinksBlock>> blocks(chips_.size());
  std::vector<bool> ok(chips_.size(), false);
  for (size_t i = 0; i < chips_.size(); ++i) {
    blocks[i] = std::make_unique<abi::LinksBlock>();
    ok[i] = read_chip(chips_[i], blocks[i].get()).ok();
  }
  auto chip_port = [&](uint32_t chip, uint32_t port) -> const abi::PortStatus* {
    for (size_t i = 0; i < chips_.size(); ++i) {
      if (chips_[i]->id() != chip || !ok[i]) continue;
      for (uint32_t j = 0; j < blocks[i]->header.port_count; ++j) {
        if (blocks[i]->ports[j].index == port) return &blocks[i]->ports[j];
      }
    }
    return nullptr;
  };
  auto switch_port = [&](uint32_t sw, uint32_t port) -> const vtrn::link::Port* {
    for (auto& sp : switch_ports_) {
      if (sp->sw == sw && sp->port == port) return &sp->p;
    }
    return nullptr;
  };
  auto end = [&](const vtrn::board::LinkEnd& e, bool on_board, bool* up) {
    auto* t = k.make(Vtrn__Api__TopoEnd(VTRN__API__TOPO_END__INIT));
    t->kind = k.str(e.kind == vtrn::board::EndKind::kSwitch ? "switch" : "chip");
    t->id = e.id;
    t->port = e.port;
    t->on_board = on_board;
    std::string state = on_board ? "-" : "absent";
    std::string speed = "-";
    if (e.kind == vtrn::board::EndKind::kChip) {
      if (const abi::PortStatus* s = chip_port(e.id, e.port)) {
        state = state_name(s->state);
        if (s->speed != 0) speed = speed_name(s->speed);
        t->width = s->width;
        // An idle link in L0s or L1 (ASPM) is up too.
        *up = *up && (s->state == uint8_t(LinkState::kL0) || s->state == uint8_t(LinkState::kL0s) ||
                      s->state == uint8_t(LinkState::kL1));
      } else {
        *up = false;
      }
    } else if (const vtrn::link::Port* p = switch_port(e.id, e.port)) {
      state = vtrn::link::to_string(p->state());
      if (p->speed() != LinkSpeed::kNone) speed = vtrn::link::to_string(p->speed());
      t->width = p->width();
      *up = *up && p->state() == LinkState::kL0;
    } else {
      *up = false;
    }
    t->state = k.str(state);
    t->speed = k.str(speed);
    return t;
  };
  std::vector<Vtrn__Api__TopoLink*> links;
  uint32_t links_up = 0;
  const uint32_t n_links = topo_ ? topo_->link_count : 0;
  for (uint32_t i = 0; i < n_links; ++i) {
    const vtrn::board::Link& l = topo_->links[i];
    auto* tl = k.make(Vtrn__Api__TopoLink(VTRN__API__TOPO_LINK__INIT));
    tl->index = l.index;
    bool up = true;
    tl->a = end(l.a, l.a_on_board, &up);
    tl->b = end(l.b, l.b_on_board, &up);
    if (up) ++links_up;
    links.push_back(tl);
  }
  std::vector<Vtrn__Api__TopoSwitch*> switches;
  const uint32_t n_sw = topo_ ? topo_->switch_count : 0;
  for (uint32_t i = 0; i < n_sw; ++i) {
    const vtrn::board::Switch& s = topo_->switches[i];
    auto* ts = k.make(Vtrn__Api__TopoSwitch(VTRN__API__TOPO_SWITCH__INIT));
    ts->id = s.id;
    ts->ports = s.ports;
    ts->max_speed_gtps = s.max_speed_gtps;
    ts->lanes = s.lanes;
    for (auto& sp : switch_ports_) {
      if (sp->sw == s.id && sp->p.state() == LinkState::kL0) ++ts->ports_up;
    }
    switches.push_back(ts);
  }
  Vtrn__Api__TopoResponse body = VTRN__API__TOPO_RESPONSE__INIT;
  std::string model = board_.board.model;
  body.model = model.data();
  body.chips = board_.board.chip_count;
  body.n_links = links.size();
  body.links = links.data();
  body.n_switches = switches.size();
  body.switches = switches.data();
  body.links_up = links_up;
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_TOPO, &body.base);
}

std::span<const Route> LinkService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_LINK_CONTROL, true, true},
      {VTRN__API__REQUEST__BODY_LINK_LIST, false},
      {VTRN__API__REQUEST__BODY_TOPO, false},
  };
  return kRoutes;
}

void LinkService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_LINK_LIST: return list(cid, req.id, *req.link_list);
    case VTRN__API__REQUEST__BODY_LINK_CONTROL: return control(cid, req.id, chip, *req.link_control);
    case VTRN__API__REQUEST__BODY_TOPO: return topo(cid, req.id);
    default: return;
  }
}

}  // namespace drv
