// vtrnd service implementation (see server.h).
#include "server.h"

#include "proto_arena.h"

// The services of the registry rows in Daemon::start.
#include "chip_service.h"
#include "collective_service.h"
#include "dma_service.h"
#include "hbm_service.h"
#include "job_service.h"
#include "power_service.h"
#include "qmp_service.h"
#include "reliability_service.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "vtrn/drv/client.h"
#include "vtrn/drv/log.h"
#include "retired_store.h"

namespace drv {
namespace {

constexpr size_t kMaxClientBacklog = 16u << 20;  // unread output before a client is dropped

// The `chip` field of a request's body, read through protobuf-c's
// descriptors (every body that names a chip calls it that); -1 when the
// body has none, names every chip (-1), or leaves a oneof `chip` unset
// (TelemetryRequest: every chip).
int64_t request_chip(const Vtrn__Api__Request& req) {
  const ProtobufCFieldDescriptor* f =
      protobuf_c_message_descriptor_get_field(&vtrn__api__request__descriptor, int(req.body_case));
  if (f == nullptr || f->type != PROTOBUF_C_TYPE_MESSAGE) return -1;
  const auto* body = *reinterpret_cast<const ProtobufCMessage* const*>(
      reinterpret_cast<const uint8_t*>(&req) + f->offset);
  if (body == nullptr) return -1;
  const ProtobufCFieldDescriptor* c = protobuf_c_message_descriptor_get_field_by_name(body->descriptor, "chip");
  if (c == nullptr || c->label == PROTOBUF_C_LABEL_REPEATED) return -1;
  if ((c->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0 &&
      *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(body) + c->quantifier_offset) != c->id)
    return -1;
  const uint8_t* at = reinterpret_cast<const uint8_t*>(body) + c->offset;
  switch (c->type) {
    case PROTOBUF_C_TYPE_UINT32: return *reinterpret_cast<const uint32_t*>(at);
    case PROTOBUF_C_TYPE_INT32: return *reinterpret_cast<const int32_t*>(at);
    default: return -1;
  }
}

// The requests Daemon answers itself, about the daemon (the rest go to
// the registry): the handshake and stopping.
bool is_daemon_request(Vtrn__Api__Request__BodyCase body) {
  return body == VTRN__API__REQUEST__BODY_HELLO || body == VTRN__API__REQUEST__BODY_SHUTDOWN;
}


}  // namespace

Daemon::Daemon(DaemonOptions opts, BoardSpec board)
    : opts_(std::move(opts)), board_(std::move(board)) {}

Daemon::~Daemon() {
  // Services hold chip pointers; chips kill and reap any QEMU still running
  // in their destructors.
  metrics_.reset();  // it reads the job service
  hbm_ = nullptr;
  chip_service_ = nullptr;
  jobs_ = nullptr;
  services_.clear();
  links_ = nullptr;
  job_backend_.reset();
  chips_.clear();
}

// Start-up.

Error Daemon::start() {
  if (!loop_.ok()) return Error(Code::kSystem, std::string("epoll/timerfd: ") + strerror(errno));
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal_fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) return Error(Code::kSystem, std::string("signalfd: ") + strerror(errno));
  if (Error e = loop_.add(signal_fd_.get(), EPOLLIN, [this](uint32_t) { on_signal(); }); !e.ok()) return e;

  if (Error e = runtime_.take(opts_.runtime_dir, opts_.share_gid); !e.ok()) return e;
  Result<UniqueFd> sock = runtime_.listen_socket();
  if (!sock.ok()) {
    remove_runtime_files(/*keep_log=*/true);
    return sock.error();
  }
  listen_ = std::move(*sock);
  if (Error e = loop_.add(listen_.get(), EPOLLIN, [this](uint32_t) { on_accept(); }); !e.ok()) {
    remove_runtime_files(/*keep_log=*/true);
    return e;
  }
  DRV_LOGI("serving %s (board %s \"%s\", %u chips)", runtime_.socket_path().c_str(),
           board_.file.c_str(), board_.board.model, board_.board.chip_count);

  // The registry: one row per service, in start order (a service may use
  // the ones above it). The link regions exist before any QEMU maps them.
  const ReplyFn& to_client = reply_fn_;
  links_ = services_.add(std::make_unique<LinkService>(&loop_, board_, opts_.runtime_dir, to_client));
  if (Error e = links_->prepare(); !e.ok()) {
    links_->stop();
    remove_runtime_files(/*keep_log=*/true);
    return e;
  }
  for (const vtrn::board::Chip& bc : board_.chips) {
    ChipOptions co;
    co.runtime_dir = opts_.runtime_dir;
    co.qemu = opts_.qemu;
    co.firmware = opts_.firmware;
    co.board_model = board_.board.model;
    co.dtb = board_.dtb;
    co.board = bc;
    co.gdb = opts_.gdb;
    co.gdb_port = opts_.gdb && opts_.gdb_base_port ? opts_.gdb_base_port + bc.id : 0;
    co.boot_timeout_ms = opts_.boot_timeout_ms;
    co.copy_engine = opts_.copy_engine;
    co.watchdog_ms = opts_.watchdog_ms;
    co.watchdog = opts_.watchdog;
    co.auto_recover = opts_.auto_recover;
    co.reset_limit = opts_.reset_limit;
    co.reset_window_ms = opts_.reset_window_ms;
    co.extra_qemu_args = links_->qemu_args(bc.id);
    chips_.push_back(std::make_unique<Chip>(&loop_, std::move(co)));
  }
  ChipServiceOptions copts;
  copts.board_model = board_.board.model;
  copts.board_file = board_.file;
  copts.client_alive = [this](uint64_t cid) { return conns_.count(cid) != 0; };
  copts.fill_telemetry = [this](Chip& c, Vtrn__Api__Telemetry& t, ProtoArena& a) {
    services_.each([&c, &t, &a](Service& svc) { svc.fill_telemetry(c, t, a); });
  };
  chip_service_ = services_.add(std::make_unique<ChipService>(&loop_, &chips_, std::move(copts), to_client));
  DmaServiceOptions dopts;
  dopts.allow_raw = opts_.allow_raw_dma;
  dopts.tenant_of = [this](uint64_t cid) { return client_uid(cid); };
  dopts.hbm_claim = [this](uint64_t cid, Chip* chip, uint64_t addr, uint64_t len,
                           const std::string& what) -> Result<uint64_t> {
    if (hbm_ == nullptr) return uint64_t(0);
    return hbm_->claim_dma(cid, chip, addr, len, what);
  };
  dopts.hbm_release = [this](Chip* chip, uint64_t claim) {
    if (hbm_ != nullptr) hbm_->release_dma(chip, claim);
  };
  DmaService* dma = services_.add(std::make_unique<DmaService>(&loop_, dopts, to_client));
  for (auto& c : chips_) dma->add_chip(c.get());
  HbmServiceOptions hopts;
  hopts.client_quota_bytes = opts_.hbm_client_quota_bytes;
  hopts.store_root = retired_store_root();
  hopts.board_model = board_.board.model;
  hopts.dma_unchecked = opts_.hbm_dma_unchecked;
  hopts.tenant_of = [this](uint64_t cid) { return client_uid(cid); };
  hopts.is_admin = [this](uint64_t cid) { return client_is_admin(cid); };
  hopts.job_tenant = [this](uint64_t job_id) {
    return jobs_ != nullptr ? jobs_->job_tenant(job_id) : JobService::kNoTenant;
  };
  HbmService* hbm = services_.add(std::make_unique<HbmService>(&loop_, hopts, to_client));
  hbm_ = hbm;
  for (auto& c : chips_) hbm->add_chip(c.get());
  job_backend_ = std::make_unique<DaemonJobBackend>(&loop_, &chips_, dma, hbm);
  JobServiceOptions jopts;
  jopts.tenant_of = [this](uint64_t cid) { return client_uid(cid); };
  jopts.is_admin = [this](uint64_t cid) { return client_is_admin(cid); };
  JobService* jobs = services_.add(std::make_unique<JobService>(&loop_, job_backend_.get(), jopts, to_client));
  jobs_ = jobs;
  // Ring collectives as one job per chip.
  (void)services_.add(std::make_unique<CollectiveService>(&loop_, job_backend_.get(), board_.chips,
                                                          board_.board.model, to_client));
  PowerService* power = services_.add(std::make_unique<PowerService>(&loop_, to_client));
  for (auto& c : chips_) power->add_chip(c.get());
  (void)services_.add(std::make_unique<ReliabilityService>(to_client));
  (void)services_.add(std::make_unique<QmpService>(QmpServiceOptions{opts_.allow_qmp_write}, to_client,
                                                   [this](uint64_t cid) { return client_is_admin(cid); }));
  for (auto& c : chips_) {
    // After the per-chip hooks the services set in add_chip.
    auto prev = c->on_state_change;
    c->on_state_change = [this, prev](Chip& ch) {
      if (prev) prev(ch);
      on_boot_settled(ch);
      services_.each([&ch](Service& s) { s.on_chip_state(ch); });
    };
    const uint32_t id = c->id();
    c->subscribe_events([this, id](const Vtrn__Ctrl__Event& ev) {
      services_.each([id, &ev](Service& s) { s.on_event(id, ev); });
    });
  }
  if (opts_.metrics_port >= 0) {
    metrics_ = std::make_unique<MetricsServer>(&loop_, [this, jobs] {
      std::vector<ChipMetrics> m;
      for (auto& c : chips_) {
        m.push_back(collect_chip_metrics(*c));
        m.back().jobs = jobs->counters(c->id());
        m.back().have_jobs = true;
      }
      return render_metrics(m);
    });
    if (Error e = metrics_->start(uint16_t(opts_.metrics_port)); !e.ok()) {
      remove_runtime_files(/*keep_log=*/true);
      return e;
    }
    DRV_LOGI("metrics: serving http://127.0.0.1:%u/metrics", unsigned(metrics_->port()));
  }
  for (auto& c : chips_) links_->add_chip(c.get());
  links_->start();
  // A chip that cannot prepare or launch is FAILED with the reason; the
  // others still start, and clients see which one failed and why.
  std::vector<Chip*> board_chips;
  for (auto& c : chips_) {
    (void)c->prepare();
    board_chips.push_back(c.get());
  }
  if (Error e = start_board_hw(board_chips); !e.ok()) return e;
  boot_parallel_ = opts_.boot_parallel;
  if (boot_parallel_ == 0) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    boot_parallel_ = uint32_t(cpus > 1 ? 2 * cpus : 2);
  }
  boot_queue_ = board_chips;
  if (boot_queue_.size() > boot_parallel_)
    DRV_LOGI("booting %zu chips, %u at a time", boot_queue_.size(), unsigned(boot_parallel_));
  boot_more();
  return Error();
}

void Daemon::boot_more() {
  while (!shutting_down_ && booting_.size() < boot_parallel_ && boot_next_ < boot_queue_.size()) {
    Chip* c = boot_queue_[boot_next_++];
    // Failed to prepare, or launched already (a reset asked for while it
    // waited launches it itself).
    if (c->state() != ChipState::kStarting || c->launched()) continue;
    booting_.push_back(c);
    (void)c->start();  // a failed launch is FAILED with the reason, and settles at once
  }
}

// A launched chip's first boot settles when it leaves STARTING and BOOTING.
void Daemon::on_boot_settled(Chip& c) {
  if (c.state() == ChipState::kStarting ||
      c.state() == ChipState::kBooting)
    return;
  auto it = std::find(booting_.begin(), booting_.end(), &c);
  if (it == booting_.end()) return;
  booting_.erase(it);
  boot_more();
}

// vtrn-hw needs every chip's fds and must listen before any QEMU starts.
Error Daemon::start_board_hw(const std::vector<Chip*>& chips) {
  hw_ = std::make_unique<HwBoard>(&loop_);
  hw_->on_lost = [this](const std::string& why) {
    for (auto& c : chips_) c->hardware_lost(why);
  };
  if (Error e = hw_->start(opts_.vtrn_hw, board_.dtb, chips, opts_.boot_timeout_ms); !e.ok()) {
    remove_runtime_files(/*keep_log=*/true);
    return e;
  }
  for (Chip* c : chips) c->set_hw_board(hw_.get());
  return Error();
}

int Daemon::run() {
  if (Error e = loop_.run(); !e.ok()) {
    DRV_LOGE("event loop: %s", e.detail().c_str());
    exit_status_ = 1;
  }
  return exit_status_;
}

// Clients.

void Daemon::on_accept() {
  for (;;) {
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;
    // The socket is 0600 in a 0700 directory; this is the second wall, for
    // a socket or directory whose mode was loosened: only our own uid talks
    // to the chips, unless the board is shared with a group (--group), whose
    // members the directory's mode lets in as tenants.
    ucred cred{};
    socklen_t cred_len = sizeof cred;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
        (cred.uid != getuid() && opts_.share_gid < 0)) {
      DRV_LOGW("refused a client with uid %d (pid %d): vtrnd serves only uid %d",
               int(cred.uid), int(cred.pid), int(getuid()));
      continue;
    }
    uint64_t cid = next_conn_++;
    int raw = fd.get();
    Conn& c = conns_[cid];
    c.fd = std::move(fd);
    c.uid = cred.uid;
    if (Error e = loop_.add(raw, EPOLLIN | EPOLLRDHUP, [this, cid](uint32_t ev) { on_conn_event(cid, ev); });
        !e.ok()) {
      DRV_LOGW("client %llu: %s, dropping it", (unsigned long long)cid, e.detail().c_str());
      close_conn(cid);
    }
  }
}

// Requests that change the board for every tenant are the admin's alone:
// stopping vtrnd here, and the routes a service marks `admin` (resets and
// fault injection, DMA queue resets, power and link control). Read-only
// requests, and what a tenant does with its own memory and jobs, are open to
// every tenant.
bool Daemon::admin_only(Vtrn__Api__Request__BodyCase body) const {
  return body == VTRN__API__REQUEST__BODY_SHUTDOWN || services_.admin_only(body);
}

// A client's tenant: its uid. A connection already gone is nobody's
// (uid -1), so nothing it left behind is charged to a real tenant.
uint32_t Daemon::client_uid(uint64_t cid) const {
  auto it = conns_.find(cid);
  return it == conns_.end() ? UINT32_MAX : uint32_t(it->second.uid);
}

// The admin identity: vtrnd's own uid, or root.
bool Daemon::client_is_admin(uint64_t cid) const {
  auto it = conns_.find(cid);
  return it != conns_.end() && (it->second.uid == getuid() || it->second.uid == 0);
}

void Daemon::on_conn_event(uint64_t cid, uint32_t events) {
  auto it = conns_.find(cid);
  if (it == conns_.end()) return;
  if (events & EPOLLOUT) flush(cid);
  if (conns_.find(cid) == conns_.end()) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    uint8_t buf[65536];
    for (;;) {
      auto c = conns_.find(cid);
      if (c == conns_.end()) return;
      ssize_t n = read(c->second.fd.get(), buf, sizeof buf);
      if (n > 0) {
        c->second.decoder.feed(buf, size_t(n));
        std::vector<uint8_t> payload;
        for (;;) {
          Result<bool> got = c->second.decoder.next(&payload);
          if (!got.ok()) {
            DRV_LOGW("client %llu: frame above %u bytes, closing", (unsigned long long)cid,
                     kMaxFrame);
            close_conn(cid);
            return;
          }
          if (!got.value()) break;
          handle_frame(cid, payload);
          c = conns_.find(cid);
          if (c == conns_.end()) return;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_conn(cid);  // EOF or error
      return;
    }
  }
}

void Daemon::close_conn(uint64_t cid) {
  auto it = conns_.find(cid);
  if (it == conns_.end()) return;
  loop_.remove(it->second.fd.get());
  conns_.erase(it);
  services_.each([cid](Service& s) { s.client_gone(cid); });
}

void Daemon::reply(uint64_t cid, Vtrn__Api__Response* resp) {
  auto it = conns_.find(cid);
  if (it == conns_.end()) return;  // the client left; its answer goes nowhere
  Conn& c = it->second;
  if (!encode_frame(&resp->base, &c.out).ok()) {
    Vtrn__Api__Response small = VTRN__API__RESPONSE__INIT;
    small.id = resp->id;
    small.status = VTRN__API__STATUS__STATUS_INTERNAL;
    small.error = const_cast<char*>("response larger than the frame limit");
    (void)encode_frame(&small.base, &c.out);
  }
  if (c.out.size() - c.out_off > kMaxClientBacklog) {
    DRV_LOGW("client %llu: not reading (%zu bytes queued), dropping it",
             (unsigned long long)cid, c.out.size() - c.out_off);
    close_conn(cid);
    return;
  }
  flush(cid);
}

void Daemon::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err) {
  drv::reply_error([this](uint64_t c, Vtrn__Api__Response* r) { reply(c, r); }, cid, id, st, err);
}

void Daemon::flush(uint64_t cid) {
  auto it = conns_.find(cid);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  while (c.out_off < c.out.size()) {
    ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_conn(cid);
    return;
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  } else if (c.out_off > (1u << 20)) {
    c.out.erase(c.out.begin(), c.out.begin() + ptrdiff_t(c.out_off));
    c.out_off = 0;
  }
  bool want = !c.out.empty();
  if (want != c.want_write) {
    c.want_write = want;
    if (Error e = loop_.modify(c.fd.get(), EPOLLIN | EPOLLRDHUP | (want ? uint32_t(EPOLLOUT) : 0u)); !e.ok()) {
      DRV_LOGW("client %llu: %s, dropping it", (unsigned long long)cid, e.detail().c_str());
      close_conn(cid);
    }
  }
}

Chip* Daemon::find_chip(uint32_t id) {
  for (auto& c : chips_) {
    if (c->id() == id) return c.get();
  }
  return nullptr;
}

void Daemon::handle_frame(uint64_t cid, const std::vector<uint8_t>& payload) {
  Vtrn__Api__Request* req = vtrn__api__request__unpack(nullptr, payload.size(), payload.data());
  if (req == nullptr) {
    DRV_LOGW("client %llu: %zu-byte request does not decode, rejected", (unsigned long long)cid,
             payload.size());
    reply_error(cid, 0, VTRN__API__STATUS__STATUS_BAD_REQUEST, "request does not decode");
    return;
  }
  const uint64_t id = req->id;
  Chip* chip = nullptr;
  const bool names_chip = services_.names_chip(req->body_case);
  const int64_t chip_id = names_chip ? request_chip(*req) : -1;
  if (chip_id >= 0) chip = find_chip(uint32_t(chip_id));
  if (shutting_down_ && req->body_case != VTRN__API__REQUEST__BODY_LIST &&
      req->body_case != VTRN__API__REQUEST__BODY_SHUTDOWN && req->body_case != VTRN__API__REQUEST__BODY_HELLO) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_SHUTTING_DOWN, "vtrnd is shutting down");
  } else if (chip_id >= 0 && chip == nullptr) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_UNKNOWN_CHIP,
                no_chip_text(uint64_t(chip_id)));
  } else if (admin_only(req->body_case) && !client_is_admin(cid)) {
    const ProtobufCFieldDescriptor* f =
        protobuf_c_message_descriptor_get_field(&vtrn__api__request__descriptor, unsigned(req->body_case));
    reply_error(cid, id, VTRN__API__STATUS__STATUS_PERMISSION_DENIED,
                std::string(f != nullptr ? f->name : "this request") +
                    " changes the board for every tenant: only its admin (uid " + std::to_string(getuid()) +
                    " or root) may send it");
  } else {
    switch (req->body_case) {
      case VTRN__API__REQUEST__BODY_HELLO: do_hello(cid, id, *req->hello); break;
      case VTRN__API__REQUEST__BODY_SHUTDOWN: do_shutdown(cid, id); break;
      default:
        if (Service* svc = services_.route(req->body_case))
          svc->handle(cid, *req, chip);
        else
          reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "request has no body");
        break;
    }
  }
  vtrn__api__request__free_unpacked(req, nullptr);
}

// Requests.

void Daemon::do_hello(uint64_t cid, uint64_t id, const Vtrn__Api__HelloRequest& r) {
  DRV_LOGI("client %llu: hello from %.64s (API %u.%u)", (unsigned long long)cid, r.client ? r.client : "",
           r.client_api_major, r.client_api_minor);
  // Every body this daemon answers: its own and the registry's.
  std::vector<std::string> names;
  const ProtobufCMessageDescriptor& d = vtrn__api__request__descriptor;
  for (unsigned i = 0; i < d.n_fields; ++i) {
    const ProtobufCFieldDescriptor& f = d.fields[i];
    if ((f.flags & PROTOBUF_C_FIELD_FLAG_ONEOF) == 0) continue;
    const auto body = Vtrn__Api__Request__BodyCase(f.id);
    if (is_daemon_request(body) || services_.route(body) != nullptr) names.emplace_back(f.name);
  }
  ProtoArena a;
  Vtrn__Api__HelloResponse hr = VTRN__API__HELLO_RESPONSE__INIT;
  hr.api_major = kApiMajor;
  hr.api_minor = kApiMinor;
  hr.vtrnd_version = a.str(VTRN_VERSION_STRING);
  hr.max_frame_bytes = kMaxFrame;
  hr.n_requests = names.size();
  hr.requests = a.strv(names);
  hr.board = a.str(board_.board.model);
  hr.chips = uint32_t(chips_.size());
  reply_body(reply_fn_, cid, id, VTRN__API__RESPONSE__BODY_HELLO, &hr.base);
}

void Daemon::do_shutdown(uint64_t cid, uint64_t id) {
  shutdown_waiters_.emplace_back(cid, id);
  begin_shutdown();
}

// Signals and shutdown.

void Daemon::on_signal() {
  signalfd_siginfo si;
  while (read(signal_fd_.get(), &si, sizeof si) == ssize_t(sizeof si)) {
    if (si.ssi_signo == SIGCHLD) {
      reap_children();
      continue;
    }
    if (!shutting_down_) {
      DRV_LOGI("%s: shutting down", strsignal(int(si.ssi_signo)));
      begin_shutdown();
    } else {
      // A second request to stop: no more grace periods.
      DRV_LOGW("%s again: killing every QEMU now", strsignal(int(si.ssi_signo)));
      for (auto& c : chips_) {
        if (c->pid() > 0) kill(c->pid(), SIGKILL);
      }
    }
  }
}

void Daemon::reap_children() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (hw_ && hw_->on_child_exit(pid, status)) continue;
    for (auto& c : chips_) {
      if (c->pid() > 0 && c->pid() == pid) c->on_child_exit(status);
    }
  }
}

void Daemon::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  if (chip_service_ != nullptr) chip_service_->end_log_streams("vtrnd is stopping");
  chips_to_stop_ = uint32_t(chips_.size());
  chips_stopped_ = 0;
  if (chips_.empty()) {
    finish_shutdown();
    return;
  }
  for (auto& c : chips_) {
    c->stop([this] {
      if (++chips_stopped_ == chips_to_stop_) finish_shutdown();
    });
  }
}

void Daemon::finish_shutdown() {
  for (auto [cid, id] : shutdown_waiters_) {
    Vtrn__Api__ShutdownResponse sr = VTRN__API__SHUTDOWN_RESPONSE__INIT;
    sr.chips_stopped = chips_stopped_;
    reply_body(reply_fn_, cid, id, VTRN__API__RESPONSE__BODY_SHUTDOWN, &sr.base);
  }
  shutdown_waiters_.clear();
  // Give the answers a moment to drain to clients that are slow to read;
  // the socket is already unlinked, so no new client can arrive.
  remove_runtime_files();
  const int64_t until = monotonic_ms() + 500;
  for (;;) {
    bool pending = false;
    for (auto& [cid, c] : conns_) pending |= c.out_off < c.out.size();
    if (!pending || monotonic_ms() >= until) break;
    if (Error e = loop_.run_once(50); !e.ok()) {
      DRV_LOGE("event loop: %s", e.detail().c_str());
      break;
    }
  }
  DRV_LOGI("stopped %u chip(s); bye", chips_stopped_);
  loop_.stop();
}

void Daemon::remove_runtime_files(bool keep_log) {
  if (listen_) {
    loop_.remove(listen_.get());
    listen_.reset();
  }
  if (hw_) hw_->stop();  // after the QEMUs: it unlinks the engine sockets
  for (auto& c : chips_) c->cleanup();
  if (links_) links_->stop();  // regions removed
  // The log the CLI redirected us into goes too after an orderly stop, so
  // nothing is left behind (its fd stays open for the last lines).
  runtime_.release(keep_log);
}

}  // namespace drv
