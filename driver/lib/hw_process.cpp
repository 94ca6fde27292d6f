// The launcher's side of vtrn-hw (see vtrn/drv/hw_process.h).
#include "vtrn/drv/hw_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtrn/drv/chip.h"
#include "vtrn/drv/log.h"

namespace drv {

Error ChipHwLink::create(const std::string& chip_dir, uint64_t ram_bytes) {
  close();
  ram_.reset(memfd_create("vtrn-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!ram_ || ftruncate(ram_.get(), off_t(ram_bytes)) != 0 ||
      fcntl(ram_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Error e(Code::kSystem, std::string("chip RAM memfd: ") + strerror(errno));
    close();
    return e;
  }
  doorbell_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!doorbell_) {
    Error e(Code::kSystem, std::string("DMA doorbell eventfd: ") + strerror(errno));
    close();
    return e;
  }
  ram_bytes_ = ram_bytes;
  socket_ = chip_dir + "/engines.sock";
  return Error();
}

void ChipHwLink::ring_doorbell() const {
  const uint64_t one = 1;
  // EAGAIN only when the counter is saturated: a wake-up is pending anyway.
  ssize_t w = write(doorbell_.get(), &one, sizeof one);
  (void)w;
}

void ChipHwLink::close() {
  ram_.reset();
  doorbell_.reset();
  ram_bytes_ = 0;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

HwProcess::~HwProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    reap_blocking();
  }
}

Error HwProcess::start(const std::string& exe, const std::vector<uint8_t>& dtb, const std::vector<HwChipSpec>& chips,
                       uint32_t timeout_ms) {
  if (access(exe.c_str(), X_OK) != 0)
    return Error(Code::kNotFound, exe + " not found or not executable (build the vtrn-hw target or set VTRN_HW)");
  UniqueFd dtb_fd(memfd_create("vtrn-board-dtb", MFD_CLOEXEC));
  if (!dtb_fd || write(dtb_fd.get(), dtb.data(), dtb.size()) != ssize_t(dtb.size()))
    return Error(Code::kSystem, std::string("board DTB memfd: ") + strerror(errno));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Error(Code::kSystem, std::string("socketpair: ") + strerror(errno));
  ctl_.reset(sv[0]);
  UniqueFd child_end(sv[1]);

  std::vector<int> keep = {dtb_fd.get(), child_end.get()};
  std::vector<std::string> argv = {exe, "--board", "/proc/self/fd/" + std::to_string(dtb_fd.get()), "--control-fd",
                                   std::to_string(child_end.get())};
  for (const HwChipSpec& c : chips) {
    argv.push_back("--chip");
    argv.push_back("id=" + std::to_string(c.id) + ",ram-fd=" + std::to_string(c.ram_fd) +
                   ",bar2-fd=" + std::to_string(c.bar2_fd) + ",doorbell-fd=" + std::to_string(c.doorbell_fd) +
                   ",host-irq-fd=" + std::to_string(c.host_irq_fd) + ",socket=" + c.socket);
    keep.insert(keep.end(), {c.ram_fd, c.bar2_fd, c.doorbell_fd, c.host_irq_fd});
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Error(Code::kSystem, std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    // Child: async-signal-safe calls only until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    for (int fd : keep) fcntl(fd, F_SETFD, 0);
    execv(args[0], args.data());
    const char msg[] = "vtrnd: exec of vtrn-hw failed\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  pid_ = pid;
  reaped_ = false;
  child_end.reset();

  // "ready" comes once every engine socket listens.
  const uint64_t deadline = monotonic_ns() + uint64_t(timeout_ms) * 1000000u;
  std::string got;
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) {
      Error e(Code::kTimeout,
              "vtrn-hw (pid " + std::to_string(pid_) + ") not ready after " + std::to_string(timeout_ms) + " ms");
      kill(pid_, SIGKILL);
      reap_blocking();
      return e;
    }
    pollfd p{ctl_.get(), POLLIN, 0};
    const int n = poll(&p, 1, int((deadline - now) / 1000000u) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[256];
    const ssize_t r = read(ctl_.get(), buf, sizeof buf);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) {
      reap_blocking();
      return Error(Code::kNotRunning, "vtrn-hw " + describe_wait_status(status_) + " before it was ready");
    }
    got.append(buf, size_t(r));
    const size_t nl = got.find('\n');
    if (nl == std::string::npos) continue;
    if (got.compare(0, nl, "ready") != 0) {
      Error e(Code::kDecode, "vtrn-hw said \"" + got.substr(0, nl) + "\" instead of ready");
      kill(pid_, SIGKILL);
      reap_blocking();
      return e;
    }
    pending_ = got.substr(nl + 1);
    break;
  }
  if (Error e = set_nonblocking(ctl_.get()); !e.ok()) {
    kill(pid_, SIGKILL);
    reap_blocking();
    return e.prefix("vtrn-hw control pipe: ");
  }
  return Error();
}

void HwProcess::reap_blocking() {
  if (pid_ <= 0 || reaped_) return;
  while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

bool HwProcess::on_child_exit(pid_t pid, int status) {
  if (pid_ <= 0 || reaped_ || pid != pid_) return false;
  status_ = status;
  reaped_ = true;
  return true;
}

bool HwProcess::read_control() {
  if (!ctl_) return false;
  char buf[512];
  for (;;) {
    const ssize_t r = read(ctl_.get(), buf, sizeof buf);
    if (r > 0) {
      pending_.append(buf, size_t(r));
      size_t nl;
      while ((nl = pending_.find('\n')) != std::string::npos) {
        const std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        DRV_LOGD("vtrn-hw: %s", line.c_str());
        if (on_line) on_line(line);
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return true;
    // EOF (or a broken socket): vtrn-hw is gone or going; it cannot take long.
    ctl_.reset();
    reap_blocking();
    return false;
  }
}

bool HwProcess::send(const std::string& line) {
  if (!ctl_) return false;
  const std::string l = line + "\n";
  // A few bytes on a socketpair nobody else writes: all or nothing.
  for (;;) {
    const ssize_t w = write(ctl_.get(), l.data(), l.size());
    if (w < 0 && errno == EINTR) continue;
    return w == ssize_t(l.size());
  }
}

std::string HwProcess::exit_reason() const {
  if (!reaped_) return "vtrn-hw (pid " + std::to_string(pid_) + ") closed its control socket";
  return "vtrn-hw (pid " + std::to_string(pid_) + ") " + describe_wait_status(status_);
}

bool HwProcess::stop(uint32_t grace_ms) {
  if (!running()) return reaped_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
  if (ctl_) {
    const char q[] = "quit\n";
    ssize_t w = write(ctl_.get(), q, sizeof q - 1);
    (void)w;
  }
  const uint64_t deadline = monotonic_ns() + uint64_t(grace_ms) * 1000000u;
  while (monotonic_ns() < deadline) {
    const pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (r < 0 && errno != EINTR) break;
    usleep(2000);
  }
  const bool clean = reaped_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
  if (!reaped_) {
    kill(pid_, SIGKILL);
    reap_blocking();
  }
  ctl_.reset();
  return clean;
}

HwBoard::~HwBoard() {
  if (watching_) loop_->remove(proc_.control_fd());
  for (PendingReset& p : resets_) loop_->cancel_timer(p.timer);
}

Error HwBoard::start(const std::string& exe, const std::vector<uint8_t>& dtb, const std::vector<Chip*>& chips,
                     uint32_t timeout_ms) {
  std::vector<HwChipSpec> specs;
  for (Chip* c : chips) {
    if (!c->hw_prepared()) continue;  // FAILED already, with its reason
    const ChipHwLink& l = c->hw_link();
    specs.push_back(HwChipSpec{c->id(), l.ram_fd(), c->bar2_fd(), l.doorbell_fd(), c->dma_irq_fd(),
                               l.engines_socket()});
  }
  if (specs.empty()) return Error();
  if (Error e = proc_.start(exe, dtb, specs, timeout_ms); !e.ok()) return e;
  DRV_LOGI("vtrn-hw (pid %d) ready: engines of %zu chip(s)", int(proc_.pid()), specs.size());
  proc_.on_line = [this](const std::string& line) { on_control_line(line); };
  if (Error e = loop_->add(proc_.control_fd(), EPOLLIN | EPOLLRDHUP, [this](uint32_t) {
        if (!proc_.read_control()) lost();
      });
      !e.ok())
    return e.prefix("vtrn-hw control: ");
  watching_ = true;
  return Error();
}

bool HwBoard::on_child_exit(pid_t pid, int status) {
  if (!proc_.on_child_exit(pid, status)) return false;
  lost();
  return true;
}

void HwBoard::lost() {
  if (watching_) {
    loop_->remove(proc_.control_fd());
    watching_ = false;
  }
  if (stopped_) return;
  stopped_ = true;
  const std::string why = proc_.exit_reason();
  DRV_LOGE("%s: every chip of the board fails", why.c_str());
  std::vector<PendingReset> pending = std::move(resets_);
  resets_.clear();
  for (PendingReset& p : pending) {
    loop_->cancel_timer(p.timer);
    p.done(false, 0, why);
  }
  if (on_lost) on_lost(why);
}

bool HwBoard::take_reset(uint32_t chip, PendingReset* out) {
  for (auto it = resets_.begin(); it != resets_.end(); ++it) {
    if (it->chip != chip) continue;
    *out = std::move(*it);
    resets_.erase(it);
    return true;
  }
  return false;
}

void HwBoard::reset_chip(uint32_t chip, uint32_t timeout_ms, ResetDone done) {
  if (stopped_ || !proc_.running()) {
    done(false, 0, stopped_ ? proc_.exit_reason() : "vtrn-hw is not running");
    return;
  }
  if (!proc_.send("reset " + std::to_string(chip))) {
    done(false, 0, "cannot write to vtrn-hw's control socket");
    return;
  }
  PendingReset p;
  p.chip = chip;
  p.done = std::move(done);
  p.timer = loop_->add_timer_in(uint64_t(timeout_ms) * 1000000u, [this, chip, timeout_ms] {
    PendingReset t;
    if (!take_reset(chip, &t)) return;
    t.done(false, 0, "vtrn-hw did not answer \"reset " + std::to_string(chip) + "\" within " +
                         std::to_string(timeout_ms) + " ms");
  });
  resets_.push_back(std::move(p));
}

void HwBoard::on_control_line(const std::string& line) {
  unsigned chip = 0;
  unsigned long long us = 0;
  int used = 0;
  if (sscanf(line.c_str(), "reset %u ok %llu%n", &chip, &us, &used) == 2 && size_t(used) == line.size()) {
    PendingReset p;
    if (!take_reset(chip, &p)) return;  // answered after its timeout
    loop_->cancel_timer(p.timer);
    p.done(true, uint64_t(us) * 1000u, "");
    return;
  }
  if (sscanf(line.c_str(), "reset %u %n", &chip, &used) == 1 && used > 0) {
    PendingReset p;
    if (!take_reset(chip, &p)) return;
    loop_->cancel_timer(p.timer);
    p.done(false, 0, "vtrn-hw: " + line);
  }
}

void HwBoard::stop() {
  if (watching_) {
    loop_->remove(proc_.control_fd());
    watching_ = false;
  }
  for (PendingReset& p : resets_) loop_->cancel_timer(p.timer);
  resets_.clear();
  if (stopped_) return;
  stopped_ = true;
  if (!proc_.running()) return;
  if (proc_.stop(2000)) {
    DRV_LOGI("vtrn-hw stopped");
  } else {
    DRV_LOGW("vtrn-hw %s on quit", describe_wait_status(proc_.wait_status()).c_str());
  }
}

}  // namespace drv
