// One chip: QEMU process, ivshmem server, boot handshake and control queue
// (see vtrn/drv/chip.h).
#include "vtrn/drv/chip.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "vtrn/drv/fw_call.h"
#include "vtrn/drv/log.h"
#include "vtrn/engine_abi.h"
#include "vtrn/drv/qemu_launch.h"

namespace drv {

using namespace vtrn::hostif;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kBootPollNs = 10 * kMs;     // re-check while booting (doorbells may coalesce)
// vtrn-hw stops a chip's engines once each finished its current unit (a
// DMA piece of 1 MiB, a GEMM tile): milliseconds; beyond this it is stuck.
constexpr uint32_t kEngineQuiesceMs = 5000;
constexpr uint64_t kReadyPollNs = 200 * kMs;   // logs, telemetry, panic watch once READY
// How long a telemetry reader waits for the refresh it asked for.
constexpr uint64_t kTelemetryWaitNs = 50 * kMs;
constexpr uint64_t kStopGraceNs = 1500 * kMs;  // firmware Shutdown -> QEMU exit
constexpr uint64_t kQuitGraceNs = 1000 * kMs;  // QMP quit -> QEMU exit
constexpr size_t kResetLogLines = 12;

uint64_t unix_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

Error write_file(const std::string& path, const std::vector<uint8_t>& data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return Error(Code::kSystem, path + ": " + strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(Code::kSystem, path + ": " + strerror(errno));
    off += size_t(n);
  }
  return Error();
}

// Last `n` lines of a file, reading at most its last 8 KiB.
std::vector<std::string> tail_file(const std::string& path, size_t n) {
  std::vector<std::string> lines;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return lines;
  off_t size = lseek(fd.get(), 0, SEEK_END);
  off_t start = size > 8192 ? size - 8192 : 0;
  std::string text(size_t(size - start), '\0');
  ssize_t got = pread(fd.get(), text.data(), text.size(), start);
  if (got <= 0) return lines;
  text.resize(size_t(got));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(pos, e - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(printable(line));
    pos = e + 1;
  }
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // first one is cut
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - ptrdiff_t(n));
  return lines;
}

std::string version_string(uint32_t v) {
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "unknown status";
}

}  // namespace

Chip::Chip(EventLoop* loop, ChipOptions opts)
    : loop_(loop),
      opts_(std::move(opts)),
      dir_(opts_.runtime_dir + "/chip" + std::to_string(opts_.board.id)),
      label_("chip " + std::to_string(opts_.board.id)),
      qemu_(loop_, label_),
      ctrl_(loop_, &hif_, label_,
            CtrlQueue::Hooks{[this] { return state_ == ChipState::kReady; },
                             [this] {
                               if (!test_mode_) (void)ivshmem_.notify_chip(kVectorControl);
                             },
                             [this](const Vtrn__Ctrl__Event& ev) { on_ctrl_event(ev); },
                             [this](const std::string& reason) { on_ctrl_broken(reason); }}) {}

Chip::~Chip() {
  for (EventLoop::TimerId t : {boot_timer_, poll_timer_, stop_timer_, reset_timer_})
    if (t != 0) loop_->cancel_timer(t);
  if (ivshmem_.listen_fd() >= 0) loop_->remove(ivshmem_.listen_fd());
  if (ivshmem_.peer_fd() >= 0) loop_->remove(ivshmem_.peer_fd());
  for (uint32_t v = 0; v < ivshmem_.vectors(); ++v) loop_->remove(ivshmem_.host_eventfd(v));
}

bool Chip::settled() const {
  return state_ == ChipState::kReady ||
         state_ == ChipState::kFailed ||
         state_ == ChipState::kPanic ||
         state_ == ChipState::kHalted;
}

std::string Chip::not_ready_reason() const {
  if (!leaving_reason_.empty()) return leaving_reason_;
  if (stopping_) return label_ + " is stopping";
  return label_ + " is " + chip_state_name(state_) + (error_.empty() ? "" : " (" + error_ + ")");
}

void Chip::set_state(ChipState s, const std::string& error) {
  if (state_ == s && error.empty()) return;
  state_ = s;
  if (!error.empty()) error_ = error;
  if (s != ChipState::kReady) {
    // What is pending learns why the chip left READY: a reset in progress
    // names itself (not_ready_reason), otherwise the error that moved it.
    ctrl_.fail_all(Error(Code::kNotReady, leaving_reason_.empty() && !error.empty() ? error : not_ready_reason()));
    if (dma_.attached()) {
      dma_.detach();
      if (on_dma_event) on_dma_event();
    }
  }
  if (on_state_change) on_state_change(*this);
}

void Chip::fail(const std::string& why) {
  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = 0;
  fail_lines_ = last_lines(10);
  DRV_LOGE("%s", why.c_str());
  for (const std::string& l : fail_lines_) DRV_LOGE("%s:   %s", label_.c_str(), l.c_str());
  set_state(ChipState::kFailed, why);
  if (recovering_) finish_reset(false, why);
}

Error Chip::start() {
  if (!prepared_) {
    if (Error e = prepare(); !e.ok()) return e;
  }
  if (state_ == ChipState::kFailed) return Error(Code::kNotReady, error_);
  if (Error e = launch(); !e.ok()) {
    e.prefix(label_ + ": ");
    fail(e.detail());
    return e;
  }
  return Error();
}

Error Chip::prepare() {
  auto bail = [&](const std::string& why) {
    Error e(Code::kSystem, label_ + ": " + why);
    fail(e.detail());
    return e;
  };
  set_state(ChipState::kStarting);
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) return bail(dir_ + ": " + strerror(errno));
  const std::string dtb_path = dir_ + "/board.dtb";
  if (Error e = write_file(dtb_path, opts_.dtb); !e.ok()) return bail(e.detail());

  const uint64_t bar2_bytes = uint64_t(opts_.board.bar2_mib) << 20;
  if (Error e = ivshmem_.create(dir_ + "/ivshmem.sock", bar2_bytes, kVectorCount); !e.ok())
    return bail(e.detail());
  hif_.attach(ivshmem_.bar2(), ivshmem_.bar2_size());
  const Error watched = loop_->add(ivshmem_.listen_fd(), EPOLLIN, [this](uint32_t) {
    if (Error e = ivshmem_.accept_peer(); !e.ok()) {
      DRV_LOGW("%s: ivshmem: %s", label_.c_str(), e.detail().c_str());
      return;
    }
    DRV_LOGD("%s: QEMU connected to the ivshmem server", label_.c_str());
    if (Error e = loop_->add(ivshmem_.peer_fd(), EPOLLRDHUP, [this](uint32_t) {
          // QEMU closed its end: it is exiting; SIGCHLD tells the rest.
          loop_->remove(ivshmem_.peer_fd());
          ivshmem_.drop_peer();
        });
        !e.ok())
      DRV_LOGW("%s: ivshmem: %s", label_.c_str(), e.detail().c_str());
    if (state_ == ChipState::kStarting)
      set_state(ChipState::kBooting);
  });
  if (!watched.ok()) return bail("ivshmem: " + watched.detail());
  for (uint32_t v = 0; v < kVectorCount; ++v) {
    if (Error e = loop_->add(ivshmem_.host_eventfd(v), EPOLLIN, [this, v](uint32_t) { on_host_doorbell(v); });
        !e.ok())
      return bail("ivshmem: " + e.detail());
  }
  qmp_ = std::make_unique<QmpClient>(loop_, label_);
  if (Error e = qmp_->listen(dir_ + "/qmp.sock"); !e.ok()) return bail(e.detail());
  const uint64_t mem_mib = 64 + (opts_.board.hbm.total_bytes() >> 20);
  if (Error e = hw_link_.create(dir_, mem_mib << 20); !e.ok()) return bail(e.detail());

  QemuParams p;
  p.chip = opts_.board.id;
  p.cores = opts_.board.neuron_cores;
  p.mem_mib = mem_mib;
  p.ram_fd = hw_link_.ram_fd();
  p.engines_sock = hw_link_.engines_socket();
  p.firmware = opts_.firmware;
  p.board_dtb = dtb_path;
  p.board_size = opts_.dtb.size();
  p.ivshmem_sock = ivshmem_.path();
  p.qmp_sock = dir_ + "/qmp.sock";
  p.uart_log = dir_ + "/uart.log";
  p.vectors = kVectorCount;
  p.engine_vectors = vtrn::engine::kVectorCount;
  p.copy_engine = opts_.copy_engine;
  p.gdb = opts_.gdb;
  p.gdb_port = opts_.gdb_port;
  Result<std::vector<std::string>> argv = build_qemu_argv(chip_args_template(), opts_.qemu, p);
  if (!argv.ok()) return bail(argv.error().detail());
  argv->insert(argv->end(), opts_.extra_qemu_args.begin(), opts_.extra_qemu_args.end());
  argv_ = std::move(*argv);
  cmdline_ = join_command(argv_);
  prepared_ = true;
  return Error();
}

// Spawns QEMU with argv_ (first start and relaunch after QEMU died) and arms
// the boot timeout.
Error Chip::launch() {
  DRV_LOGI("%s: launching %s", label_.c_str(), cmdline_.c_str());
  launch_ns_ = monotonic_ns();
  if (Error e = qemu_.spawn(argv_, {hw_link_.ram_fd()}); !e.ok()) return e;
  gdb_port_ = opts_.gdb ? opts_.gdb_port : 0;
  if (opts_.gdb && opts_.gdb_port == 0) learn_gdb_port();

  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = loop_->add_timer(launch_ns_ + uint64_t(opts_.boot_timeout_ms) * kMs,
                                 [this] {
                                   boot_timer_ = 0;
                                   on_boot_timeout();
                                 });
  schedule_poll(kBootPollNs);
  return Error();
}

void Chip::attach_for_test(uint8_t* bar2, uint64_t size) {
  test_mode_ = true;
  hif_.attach(bar2, size);
  launch_ns_ = monotonic_ns();
  set_state(ChipState::kBooting);
}

void Chip::schedule_poll(uint64_t delay_ns) {
  if (test_mode_) return;
  if (poll_timer_ != 0) loop_->cancel_timer(poll_timer_);
  poll_timer_ = loop_->add_timer_in(delay_ns, [this] {
    poll_timer_ = 0;
    check_firmware();
    if (state_ == ChipState::kStarting ||
        state_ == ChipState::kBooting) {
      schedule_poll(kBootPollNs);
    } else if (state_ == ChipState::kReady) {
      poll_logs();
      sample_telemetry();
      check_watchdog();
      if (state_ == ChipState::kReady) schedule_poll(kReadyPollNs);
    }
  });
}

void Chip::on_host_doorbell(uint32_t vector) {
  uint64_t n = ivshmem_.drain_host(vector);
  host_rx_events_ += n;
  if (vector == kVectorControl) {
    // Responses first: a firmware that answers and then breaks (an injected
    // fault) has still answered.
    if (state_ == ChipState::kReady) pump();
    check_firmware();
    pump();
  } else if (vector == kVectorLog) {
    poll_logs();
  } else if (vector == kVectorDma) {
    if (on_dma_event) on_dma_event();
  }
}

void Chip::check_firmware() {
  const uint32_t fw = hif_.fw_state();
  switch (state_) {
    case ChipState::kStarting:
    case ChipState::kBooting:
      if (recovering_) {
        // Until the rebooted firmware rewrites the header, BAR2 still holds
        // the state of the boot that went down (READY, or PANIC).
        const FwHeader h = hif_.header_snapshot();
        if (h.magic != kMagic || h.boot_generation == reset_generation_) break;
      }
      if (fw == kStateReady) {
        on_ready();
      } else if (fw == kStatePanic) {
        on_panic();
      } else if (fw == kStateBooting && state_ == ChipState::kStarting) {
        set_state(ChipState::kBooting);
      }
      break;
    case ChipState::kReady:
      if (fw == kStatePanic) {
        on_panic();
      } else if (fw == kStateHalted) {
        poll_logs();
        set_state(ChipState::kHalted, stopping_ ? "" : label_ + ": firmware halted");
      } else if (fw != kStateReady) {
        const std::string why = std::string("firmware left READY (state ") + fw_state_name(fw) + ")";
        if (recovery_allowed()) {
          begin_reset(ResetCause::kBroken, why);
        } else {
          fail(label_ + ": " + why);
        }
      }
      break;
    default:
      break;
  }
}

void Chip::on_ready() {
  if (Error e = hif_.bring_up(); !e.ok()) {
    fail(label_ + ": " + e.detail());
    return;
  }
  std::string why;
  if (hif_.header().capabilities & kCapDma) {
    DmaEngine::Hooks hooks;
    const bool engines = (hif_.header().capabilities & kCapDmaEngines) != 0;
    hooks.ring_chip = [this, engines] {
      if (test_mode_) return;
      if (engines) {
        hw_link_.ring_doorbell();
      } else {
        (void)ivshmem_.notify_chip(kVectorDma);
      }
    };
    // vtrnd's loop watches and drains the kVectorDma eventfd itself; the
    // engine never sleeps on it here.
    hooks.irq_fd = -1;
    if (Error e = dma_.attach(hif_.bar2(), hif_.layout(), std::move(hooks)); !e.ok()) {
      fail(label_ + ": " + e.detail());
      return;
    }
    dma_.arm_irq(true);
    DRV_LOGI("%s: DMA: %u queues of depth %u, HBM [0x%llx, +%llu MiB), window %llu KiB, served by %s", label_.c_str(),
             dma_.queue_count(), dma_.depth(), (unsigned long long)dma_.hbm_base(),
             (unsigned long long)(dma_.hbm_size() >> 20), (unsigned long long)(dma_.window_size() >> 10),
             engines ? "the DMA engines" : "the firmware");
  }
  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = 0;
  boot_ns_ = monotonic_ns() - launch_ns_;
  ever_ready_ = true;
  watchdog_.rearm(hif_.heartbeat(), monotonic_ns());
  error_.clear();
  leaving_reason_.clear();
  // Logged before the state change, so that what the change sets off
  // (the next paced boot, a reset's waiters) logs after it.
  const FwHeader& h = hif_.header();
  DRV_LOGI("%s: READY in %.1f ms (firmware %s, build %s, boot generation %u)", label_.c_str(),
           double(boot_ns_) / 1e6, version_string(h.fw_version).c_str(), h.build_id,
           h.boot_generation);
  set_state(ChipState::kReady);
  if (recovering_) {
    reset_.last_recover_ns = monotonic_ns() - detect_ns_;
    DRV_LOGI("%s: recovered %.1f ms after the fault was detected (%s)", label_.c_str(),
             double(reset_.last_recover_ns) / 1e6, reset_.last_reason.c_str());
    finish_reset(true, "");
  }
  poll_logs();
  sample_telemetry();
  schedule_poll(kReadyPollNs);
  // Cache what the firmware says about itself for `vtrn ls`.
  Vtrn__Ctrl__InfoRequest info = VTRN__CTRL__INFO_REQUEST__INIT;
  fw_call(*this, &Vtrn__Ctrl__Request::info, info, &Vtrn__Ctrl__Response::info, 2000,
          [this](const FwReply<Vtrn__Ctrl__InfoResponse>& r) {
    if (!r.ok()) {
      DRV_LOGW("%s: firmware Info after boot failed: %s", label_.c_str(), r.error.detail().c_str());
      return;
    }
    const Vtrn__Ctrl__InfoResponse* i = r.body;
    info_.valid = true;
    info_.fw_version = printable(i->fw_version);
    info_.build_id = printable(i->build_id);
    info_.chip_name = printable(i->chip_name);
    info_.board_model = printable(i->board_model);
    info_.pci_address = printable(i->pci_address);
    info_.cpu = printable(i->cpu);
    info_.timer_hz = i->timer_hz;
    info_.gic_version = i->gic_version;
  });
  pump();
}

void Chip::on_panic() {
  has_panic_ = hif_.read_panic(&panic_);
  if (!hif_.up()) {
    (void)hif_.bring_up();  // for the log ring, if the layout made it out
  }
  poll_logs();
  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = 0;
  std::string reason = "firmware panic";
  if (has_panic_) reason += std::string(": ") + printable(panic_.reason);
  const std::string why = label_ + ": " + reason;
  if (recovery_allowed()) {
    DRV_LOGE("%s", why.c_str());
    begin_reset(ResetCause::kPanic, reason);
    return;
  }
  fail_lines_ = last_lines(10);
  DRV_LOGE("%s", why.c_str());
  for (const std::string& l : fail_lines_) DRV_LOGE("%s:   %s", label_.c_str(), l.c_str());
  set_state(ChipState::kPanic, why);
  if (recovering_) finish_reset(false, why);
}

void Chip::on_boot_timeout() {
  if (settled()) return;
  check_firmware();
  if (settled()) return;
  if (recovering_ && recovery_allowed()) {
    poll_logs();
    std::string why = "reboot timed out after " + std::to_string(opts_.boot_timeout_ms) + " ms";
    const std::string last = last_line();
    if (!last.empty()) why += ": " + last;
    begin_reset(reset_.last_cause, why);
    return;
  }
  const uint32_t fw = hif_.fw_state();
  if (fw != kStateOff && !hif_.up()) (void)hif_.bring_up();
  poll_logs();
  std::string why = label_ + ": boot timed out after " + std::to_string(opts_.boot_timeout_ms) +
                    " ms in state " + fw_state_name(fw);
  std::string last = last_line();
  if (!last.empty()) why += ": " + last;
  fail(why);
  if (opts_.gdb) {
    DRV_LOGI("%s: QEMU left running for the debugger (gdb port %u)", label_.c_str(), gdb_port_);
  } else {
    qemu_.kill();  // a hung firmware would only burn a host core
  }
}

void Chip::learn_gdb_port() {
  // Sent once QMP is negotiated, long before the firmware is READY. The
  // gdbstub's chardev is labelled "gdb"; its filename names the bound
  // address: "disconnected:tcp:127.0.0.1:PORT,server=on".
  qmp_->execute("query-chardev", [this](bool ok, const std::string& ret) {
    if (!ok) {
      DRV_LOGW("%s: query-chardev: %s", label_.c_str(), ret.c_str());
      return;
    }
    const nlohmann::json devs = nlohmann::json::parse(ret, nullptr, false);
    if (!devs.is_array()) return;
    for (const auto& d : devs) {
      if (!d.is_object() || d.value("label", "") != "gdb" || !d.contains("filename") ||
          !d["filename"].is_string())
        continue;
      const std::string f = d["filename"].get<std::string>();
      const size_t tcp = f.find("tcp:");
      if (tcp == std::string::npos) continue;
      const size_t end = std::min(f.find(',', tcp), f.size());
      const size_t colon = f.rfind(':', end - 1);
      const unsigned long port = colon > tcp + 3 ? strtoul(f.c_str() + colon + 1, nullptr, 10) : 0;
      if (port == 0 || port > 65535) continue;
      gdb_port_ = uint32_t(port);
      DRV_LOGI("%s: gdbstub on 127.0.0.1:%u", label_.c_str(), gdb_port_);
    }
  });
}

void Chip::on_child_exit(int wait_status) {
  if (!qemu_.exited()) return;
  const bool booting = state_ == ChipState::kStarting ||
                       state_ == ChipState::kBooting;
  DRV_LOGI("%s: QEMU (pid %d) exited with %s", label_.c_str(), int(qemu_.pid()),
           exit_text(wait_status).c_str());
  if (stopping_) {
    if (state_ != ChipState::kFailed &&
        state_ != ChipState::kPanic)
      set_state(ChipState::kHalted);
    finish_stop();
    return;
  }
  if (recovering_) {
    // Killed by us (system_reset refused) or died while rebooting: a new
    // QEMU takes over once the back-off timer (if any) fires.
    if (reset_timer_ == 0) do_reset();
    return;
  }
  if (state_ == ChipState::kReady && recovery_allowed()) {
    begin_reset(ResetCause::kQemuExit,
                "QEMU (pid " + std::to_string(qemu_.pid()) + ") exited with " + exit_text(wait_status));
    return;
  }
  if (booting) {
    check_firmware();  // it may have panicked and then exited
    if (settled()) return;
  }
  if (state_ == ChipState::kReady ||
      state_ == ChipState::kStarting ||
      state_ == ChipState::kBooting) {
    std::string why = label_ + ": QEMU exited with " + exit_text(wait_status) +
                      (booting ? " during boot" : "");
    std::string last = last_line();
    if (!last.empty()) why += ": " + last;
    fail(why);
  }
}

// Reset and recovery.

bool Chip::recovery_allowed() const {
  return hw_lost_.empty() && opts_.auto_recover && ever_ready_ && !stopping_ && !test_mode_ && !opts_.gdb;
}

uint32_t Chip::watchdog_ms() const {
  // Off under a debugger too (recovery_allowed): a chip held at a breakpoint
  // is not hung, and vtrn info says so instead of naming a timeout that never fires.
  if (!opts_.watchdog || opts_.gdb || !hif_.up() || state_ != ChipState::kReady) return 0;
  return HeartbeatWatchdog::timeout_ms(opts_.watchdog_ms, opts_.watchdog_min_ms, opts_.watchdog_periods,
                                       samples_.last().period_ms);
}

void Chip::note_fault_injected() { inject_ns_ = monotonic_ns(); }

void Chip::check_watchdog() {
  if (!opts_.watchdog || !recovery_allowed() || state_ != ChipState::kReady)
    return;
  const uint64_t now = monotonic_ns();
  const uint64_t beat = hif_.heartbeat();
  const uint64_t limit_ns = uint64_t(watchdog_ms()) * kMs;
  if (!watchdog_.expired(beat, now, limit_ns)) return;
  begin_reset(ResetCause::kWatchdog,
              "watchdog: no heartbeat for " + std::to_string(watchdog_.silent_ns(now) / kMs) +
                  " ms (stuck at " + std::to_string(beat) + ", limit " +
                  std::to_string(limit_ns / kMs) + " ms)");
}

std::string Chip::panic_summary() const {
  if (!has_panic_) return "";
  char buf[160];
  if (panic_.cause == kPanicException) {
    snprintf(buf, sizeof buf, "exception on cpu %u: ec 0x%x esr 0x%llx elr 0x%llx far 0x%llx: ",
             unsigned(panic_.cpu), unsigned(panic_.ec), (unsigned long long)panic_.esr,
             (unsigned long long)panic_.elr, (unsigned long long)panic_.far);
  } else if (const char* name = vtrn::hostif::panic_cause_name(panic_.cause); strcmp(name, "unknown") != 0) {
    snprintf(buf, sizeof buf, "%s on cpu %u: ", name, unsigned(panic_.cpu));
  } else {
    snprintf(buf, sizeof buf, "cause %u on cpu %u: ", unsigned(panic_.cause), unsigned(panic_.cpu));
  }
  return buf + printable(panic_.reason);
}

std::string host_pci_bus_id(uint32_t id) {
  char buf[24];  // board chip ids are < 256 (vtrn::board::kMaxChips): buses 0x10..0x17
  snprintf(buf, sizeof buf, "0000:%02x:%02x.0", unsigned(0x10 + id / 32), unsigned(id % 32));
  return buf;
}

Error Chip::monitor_ready() const {
  if (qmp_ && qmp_->ready()) return Error();
  return Error(Code::kNotReady, label_ + " has no QEMU monitor connected (" + chip_state_name(state_) + ")");
}

void Chip::monitor(const std::string& command, const std::string& arguments_json,
                   QmpClient::Reply reply) {
  if (Error e = monitor_ready(); !e.ok()) {
    reply(false, e.detail());
    return;
  }
  if (arguments_json.empty()) qmp_->execute(command, std::move(reply));
  else qmp_->execute(command, arguments_json, std::move(reply));
}

void Chip::reset(ResetCause cause, const std::string& reason, ResetDone done) {
  if (stopping_) {
    if (done) done(false, label_ + " is stopping");
    return;
  }
  if (!ever_ready_ && !settled()) {
    if (done) done(false, label_ + " is still in its first boot (" + chip_state_name(state_) + ")");
    return;
  }
  if (test_mode_) {
    if (done) done(false, label_ + " has no QEMU to reset (test attachment)");
    return;
  }
  if (!hw_lost_.empty()) {
    if (done) done(false, label_ + ": " + hw_lost_ + "; restart the board (vtrn down, vtrn up)");
    return;
  }
  if (done) reset_waiters_.push_back(std::move(done));
  if (recovering_) return;  // joins the reset in progress
  // An operator asking for a reset starts a fresh give-up window.
  recovery_.restart();
  begin_reset(cause, reason);
}

void Chip::begin_reset(ResetCause cause, const std::string& reason) {
  if (in_begin_reset_) return;
  in_begin_reset_ = true;
  // Answers the firmware published before it went down are still answers.
  if (state_ == ChipState::kReady && hif_.up()) pump();
  in_begin_reset_ = false;
  const uint64_t now = monotonic_ns();
  const bool automatic = cause != ResetCause::kManual;
  uint64_t detect = 0;
  if (inject_ns_ != 0) {
    detect = now - inject_ns_;
  } else if (cause == ResetCause::kWatchdog) {
    detect = watchdog_.silent_ns(now);
  }
  inject_ns_ = 0;
  detect_ns_ = now;

  // What the chip looked like when it went down: read the rest of its log
  // and its panic record before the reboot wipes them.
  if (hif_.up()) poll_logs();
  if (!has_panic_ && hif_.fw_state() == kStatePanic) has_panic_ = hif_.read_panic(&panic_);
  ++reset_.count;
  reset_.last_cause = cause;
  reset_.last_reason = reason;
  reset_.last_unix_ms = unix_ms();
  reset_.last_detect_ns = detect;
  reset_.last_recover_ns = 0;
  reset_.last_panic = panic_summary();
  reset_.last_log = last_lines(kResetLogLines);
  DRV_LOGW("%s: resetting: %s", label_.c_str(), reason.c_str());
  if (!reset_.last_panic.empty()) DRV_LOGW("%s:   panic: %s", label_.c_str(), reset_.last_panic.c_str());

  if (automatic) recovery_.record(now);
  reset_.recent = recovery_.recent();

  const uint32_t gen = hif_.up() ? hif_.header().boot_generation : hif_.header_snapshot().boot_generation;
  // A reboot that has not published its header yet leaves the old
  // generation in place; keep the first one that went down.
  if (!recovering_ || gen != 0) reset_generation_ = gen;
  recovering_ = true;
  leaving_reason_ = label_ + " was reset: " + reason;
  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = 0;
  if (poll_timer_ != 0) loop_->cancel_timer(poll_timer_);
  poll_timer_ = 0;
  // Fails control requests in flight or queued and detaches DMA (chains in
  // flight complete locally with kErrReset); both carry leaving_reason_.
  set_state(ChipState::kBooting, "");
  has_panic_ = false;
  panic_ = PanicRecord{};
  info_ = FwInfo{};
  fail_lines_.clear();
  hif_.attach(ivshmem_.bar2(), ivshmem_.bar2_size());
  samples_.clear();

  if (automatic && recovery_.exhausted()) {
    give_up("gave up after " + std::to_string(recovery_.recent()) + " resets within " +
            std::to_string(opts_.reset_window_ms / 1000) + " s; last: " + reason);
    return;
  }
  const uint64_t delay = recovery_.backoff_ns();
  if (delay != 0) {
    DRV_LOGI("%s: reset %u within the window, backing off %.0f ms", label_.c_str(), recovery_.recent(),
             double(delay) / 1e6);
  }
  if (reset_timer_ != 0) loop_->cancel_timer(reset_timer_);
  reset_timer_ = 0;
  if (delay == 0) {
    do_reset();
  } else {
    reset_timer_ = loop_->add_timer_in(delay, [this] {
      reset_timer_ = 0;
      do_reset();
    });
  }
}

void Chip::drop_qemu_connections() {
  qemu_.close_output();
  if (ivshmem_.peer_fd() >= 0) {
    loop_->remove(ivshmem_.peer_fd());
    ivshmem_.drop_peer();
  }
  if (qmp_) qmp_->disconnect();
}

void Chip::do_reset() {
  if (stopping_ || !recovering_) return;
  // The engines first: vtrn-hw stops them (each finishes its current unit,
  // nothing of this chip runs after that) before QEMU resets or restarts,
  // so no engine write of the boot that went down lands after the reset.
  // DMA chains in flight were completed locally with kErrReset above.
  if (hw_board_ != nullptr && hw_lost_.empty() && !engines_quiesced_) {
    const uint32_t gen = ++quiesce_gen_;
    hw_board_->reset_chip(id(), kEngineQuiesceMs, [this, gen](bool ok, uint64_t ns, const std::string& why) {
      if (gen != quiesce_gen_ || stopping_ || !recovering_) return;
      if (ok) {
        ++reset_.engines_quiesced;
        reset_.last_engines_quiesce_ns = ns;
        DRV_LOGI("%s: engines stopped by vtrn-hw in %.2f ms", label_.c_str(), double(ns) / 1e6);
      } else {
        // vtrn-hw gone: hardware_lost() gives up on the chip; otherwise
        // the firmware still resets its engines when it boots.
        DRV_LOGW("%s: engines not stopped before the reset: %s", label_.c_str(), why.c_str());
      }
      if (!hw_lost_.empty()) return;
      engines_quiesced_ = true;
      do_reset();
    });
    return;
  }
  engines_quiesced_ = false;
  if (!qemu_.running()) {
    // The old QEMU is gone: a new one on the same sockets and BAR2.
    drop_qemu_connections();
    qemu_.clear_lines();
    ++reset_.qemu_relaunches;
    if (Error e = launch(); !e.ok()) {
      give_up("cannot relaunch QEMU: " + e.detail());
      return;
    }
    set_state(ChipState::kStarting, "");
    return;
  }
  launch_ns_ = monotonic_ns();
  boot_timer_ = loop_->add_timer(launch_ns_ + uint64_t(opts_.boot_timeout_ms) * kMs, [this] {
    boot_timer_ = 0;
    on_boot_timeout();
  });
  schedule_poll(kBootPollNs);
  const pid_t pid = qemu_.pid();
  auto kill_it = [this, pid](const std::string& why) {
    DRV_LOGW("%s: %s; killing QEMU (pid %d) to start a new one", label_.c_str(), why.c_str(), int(pid));
    if (qemu_.pid() == pid) qemu_.kill();  // on_child_exit relaunches
  };
  if (!qmp_ || !qmp_->ready()) {
    kill_it("QMP is not connected");
    return;
  }
  DRV_LOGI("%s: QMP system_reset", label_.c_str());
  qmp_->execute("system_reset", [this, kill_it](bool ok, const std::string& detail) {
    if (!ok && recovering_ && !stopping_) kill_it("QMP system_reset failed: " + detail);
  });
}

void Chip::give_up(const std::string& why) {
  recovering_ = false;
  engines_quiesced_ = false;
  ++quiesce_gen_;  // an engine reset still owed is no longer waited for
  if (reset_timer_ != 0) loop_->cancel_timer(reset_timer_);
  reset_timer_ = 0;
  leaving_reason_.clear();
  // A chip that keeps failing would only burn a host core.
  qemu_.kill();
  fail(label_ + ": " + why);
  finish_reset(false, label_ + ": " + why);
}

void Chip::hardware_lost(const std::string& why) {
  if (!hw_lost_.empty() || stopping_ || test_mode_) return;
  hw_lost_ = why;
  give_up(why);
}

void Chip::finish_reset(bool ok, const std::string& why) {
  recovering_ = false;
  if (reset_timer_ != 0) loop_->cancel_timer(reset_timer_);
  reset_timer_ = 0;
  auto waiters = std::move(reset_waiters_);
  reset_waiters_.clear();
  for (auto& w : waiters) w(ok, why);
}

// Control queue.

void Chip::submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool spin, CtrlDone done) {
  if (state_ != ChipState::kReady || stopping_) {
    CtrlResult r;
    r.error = Error(Code::kNotReady, not_ready_reason());
    done(r);
    return;
  }
  ctrl_.submit(req, timeout_ms, spin, std::move(done));
}

void Chip::pump() { ctrl_.pump(); }

void Chip::on_ctrl_event(const Vtrn__Ctrl__Event& ev) {
  if (ev.body_case == VTRN__CTRL__EVENT__BODY_BOOT) {
    DRV_LOGI("%s: boot event: generation %u, firmware boot %.3f ms", label_.c_str(), ev.boot->boot_generation,
             double(ev.boot->boot_ns) / 1e6);
  } else if (!event_listeners_.empty()) {
    // Copy: a listener may subscribe or unsubscribe while we iterate.
    const auto listeners = event_listeners_;
    for (const auto& [id, l] : listeners) l(ev);
  } else {
    DRV_LOGD("%s: event %d with no listener", label_.c_str(), int(ev.body_case));
  }
}

void Chip::on_ctrl_broken(const std::string& reason) {
  if (recovery_allowed()) {
    begin_reset(ResetCause::kBroken, reason);
  } else {
    fail(label_ + ": " + reason);
  }
}

// Logs and telemetry.

void Chip::poll_logs() {
  if (!hif_.up()) return;
  std::vector<std::string> lines;
  uint64_t lost = 0;
  hif_.read_log_lines(&lines, &lost);
  logs_.add(std::move(lines), lost);
}

int Chip::subscribe_events(EventListener l) {
  const int id = next_event_listener_++;
  event_listeners_.emplace_back(id, std::move(l));
  return id;
}

void Chip::unsubscribe_events(int id) {
  std::erase_if(event_listeners_, [id](const auto& e) { return e.first == id; });
}


void Chip::sample_telemetry() {
  Telemetry t{};
  if (hif_.read_telemetry(&t)) samples_.add(t);
}

void Chip::ask_telemetry() {
  if (telemetry_asked_ || test_mode_ || !hif_.up() ||
      state_ != ChipState::kReady ||
      !(hif_.header().capabilities & vtrn::hostif::kCapTelemetryOnDemand)) {
    return;
  }
  Telemetry t{};
  if (!hif_.read_telemetry(&t)) return;
  if (!ivshmem_.notify_chip(vtrn::hostif::kVectorAux).ok()) return;
  telemetry_asked_ = true;
  telemetry_asked_ns_ = monotonic_ns();
  telemetry_asked_up_ = t.uptime_ns;
}

void Chip::await_telemetry() {
  if (!telemetry_asked_) return;
  telemetry_asked_ = false;
  // The firmware answers within its loop turn (tens of microseconds when
  // idle); a short sleep per look keeps the wait off a host core.
  const timespec pause{0, 100'000};
  for (;;) {
    Telemetry t{};
    if (hif_.read_telemetry(&t) && t.uptime_ns > telemetry_asked_up_) return;
    if (monotonic_ns() - telemetry_asked_ns_ >= kTelemetryWaitNs) return;
    nanosleep(&pause, nullptr);
  }
}

bool Chip::telemetry(TelemetrySample* out) {
  if (!hif_.up()) return false;
  ask_telemetry();
  await_telemetry();
  sample_telemetry();
  if (samples_.empty()) {
    if (!hif_.read_telemetry(&out->t)) return false;
  } else {
    out->t = samples_.last();
  }
  out->idle_ratio = samples_.idle_ratio(out->t);
  out->host_rx_events = host_rx_events_;
  return true;
}

std::vector<std::string> Chip::last_lines(size_t n) const {
  std::vector<std::string> out;
  if (!logs_.history().empty()) {
    out = logs_.last(n);
  } else if (!test_mode_) {
    out = tail_file(dir_ + "/uart.log", n);
  }
  for (const std::string& q : qemu_.lines()) out.push_back("qemu: " + q);
  if (out.size() > n) out.erase(out.begin(), out.end() - ptrdiff_t(n));
  return out;
}

std::string Chip::last_line() const {
  // QEMU's own complaint ("could not load kernel ...") explains more than
  // the firmware's last words, so it wins.
  if (!qemu_.lines().empty()) return qemu_.lines().back();
  std::vector<std::string> l = last_lines(1);
  return l.empty() ? "" : l.back();
}

ChipStatus Chip::status() const {
  ChipStatus s;
  s.id = id();
  s.state = state_;
  s.error = error_;
  if (state_ == ChipState::kFailed ||
      state_ == ChipState::kPanic)
    s.last_log = fail_lines_;
  s.pid = qemu_.running() ? int(qemu_.pid()) : 0;
  s.gdb_port = gdb_port_;
  s.boot_ns = boot_ns_;
  s.bar2_bytes = uint64_t(opts_.board.bar2_mib) << 20;
  s.header_valid = hif_.up();
  if (hif_.up()) {
    s.header = hif_.header();
    s.heartbeat = hif_.heartbeat();
    s.uptime_ns = samples_.last().uptime_ns;
  }
  s.has_panic = has_panic_;
  s.panic = panic_;
  s.info = info_;
  s.qemu_cmdline = cmdline_;
  s.reset = reset_;
  s.reset.recovering = recovering_;
  s.reset.recent = recovery_.recent();
  s.watchdog_ms = watchdog_ms();
  return s;
}

// Stop.

void Chip::stop(std::function<void()> done) {
  if (done) stop_done_.push_back(std::move(done));
  if (stopping_) return;
  stopping_ = true;
  if (reset_timer_ != 0) loop_->cancel_timer(reset_timer_);
  reset_timer_ = 0;
  if (!qemu_.running()) {
    finish_stop();
    return;
  }
  auto kill_phase = [this] {
    stop_timer_ = 0;
    DRV_LOGW("%s: QEMU did not quit, sending SIGKILL", label_.c_str());
    qemu_.kill();
  };
  auto quit_phase = [this, kill_phase] {
    stop_timer_ = 0;
    if (!qemu_.running()) return;
    if (qmp_ && qmp_->ready()) {
      DRV_LOGI("%s: asking QEMU to quit (QMP)", label_.c_str());
      qmp_->execute("quit", [](bool, const std::string&) {});
      stop_timer_ = loop_->add_timer_in(kQuitGraceNs, kill_phase);
    } else {
      kill_phase();
    }
  };
  if (state_ == ChipState::kReady) {
    // Ask the firmware first: it answers, then powers off (PSCI SYSTEM_OFF).
    // Queue-wise this bypasses submit(), which refuses work once stopping.
    Vtrn__Ctrl__ShutdownRequest sd = VTRN__CTRL__SHUTDOWN_REQUEST__INIT;
    ctrl_.submit(fw_request(&Vtrn__Ctrl__Request::shutdown, sd), uint32_t(kStopGraceNs / kMs), false,
                 fw_answer(id(), sd.base.descriptor, &Vtrn__Ctrl__Response::shutdown,
                           FwDone<Vtrn__Ctrl__ShutdownResponse>([this](const FwReply<Vtrn__Ctrl__ShutdownResponse>& r) {
                             if (!r.ok()) DRV_LOGW("%s: firmware shutdown: %s", label_.c_str(), r.error.detail().c_str());
                           })),
                 true);
    stop_timer_ = loop_->add_timer_in(kStopGraceNs, quit_phase);
  } else {
    quit_phase();
  }
}

void Chip::finish_stop() {
  if (stop_timer_ != 0) loop_->cancel_timer(stop_timer_);
  stop_timer_ = 0;
  if (poll_timer_ != 0) loop_->cancel_timer(poll_timer_);
  poll_timer_ = 0;
  if (boot_timer_ != 0) loop_->cancel_timer(boot_timer_);
  boot_timer_ = 0;
  ctrl_.fail_all(Error(Code::kStopping, label_ + " is stopping"));
  if (recovering_) finish_reset(false, label_ + " stopped while being reset");
  auto done = std::move(stop_done_);
  stop_done_.clear();
  for (auto& d : done) d();
}

void Chip::cleanup() {
  dma_.detach();  // the BAR2 mapping goes away below
  qemu_.close_output();
  if (ivshmem_.peer_fd() >= 0) loop_->remove(ivshmem_.peer_fd());
  if (ivshmem_.listen_fd() >= 0) loop_->remove(ivshmem_.listen_fd());
  for (uint32_t v = 0; v < ivshmem_.vectors(); ++v) loop_->remove(ivshmem_.host_eventfd(v));
  hif_.attach(nullptr, 0);
  ivshmem_.close();
  if (qmp_) qmp_->close();
  qmp_.reset();
  if (test_mode_) return;
  hw_link_.close();
  for (const char* f : {"board.dtb", "uart.log", "ivshmem.sock", "qmp.sock", "engines.sock"})
    unlink((dir_ + "/" + f).c_str());
  if (rmdir(dir_.c_str()) != 0 && errno != ENOENT)
    DRV_LOGW("%s: cannot remove %s: %s", label_.c_str(), dir_.c_str(), strerror(errno));
}

}  // namespace drv
