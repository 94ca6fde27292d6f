// Native eventfd ping-pong between two processes (see native_pingpong.h).
#include "native_pingpong.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace tools {
namespace {

// Owns one fd.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

bool signal_fd(int fd) {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = write(fd, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  return n == sizeof one;
}

bool drain_fd(int fd) {
  uint64_t value = 0;
  ssize_t n;
  do {
    n = read(fd, &value, sizeof value);
  } while (n < 0 && errno == EINTR);
  return n == sizeof value;
}

// The partner: answer every ping, then exit. It never returns.
[[noreturn]] void pong(int ping_fd, int pong_fd, uint64_t rounds) {
  for (uint64_t i = 0; i < rounds; ++i) {
    if (!drain_fd(ping_fd) || !signal_fd(pong_fd)) _exit(1);
  }
  _exit(0);
}

drv::Error system_error(const char* call) {
  return drv::Error(drv::Code::kSystem, std::string(call) + ": " + strerror(errno));
}

}  // namespace

drv::Result<std::vector<uint64_t>> native_eventfd_pingpong(uint32_t count, uint32_t warmup) {
  constexpr int kStallMs = 5000;
  Fd ping(eventfd(0, EFD_CLOEXEC));
  Fd pong_back(eventfd(0, EFD_CLOEXEC));
  if (ping.get() < 0 || pong_back.get() < 0) return system_error("eventfd");
  const uint64_t rounds = uint64_t(count) + warmup;
  const pid_t child = fork();
  if (child < 0) return system_error("fork");
  if (child == 0) pong(ping.get(), pong_back.get(), rounds);

  drv::Error err;
  std::vector<uint64_t> rtt_ns;
  rtt_ns.reserve(count);
  for (uint64_t i = 0; i < rounds; ++i) {
    const uint64_t t0 = now_ns();
    if (!signal_fd(ping.get())) {
      err = system_error("eventfd write");
      break;
    }
    pollfd p{pong_back.get(), POLLIN, 0};
    int r;
    do {
      r = poll(&p, 1, kStallMs);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) {
      err = r == 0 ? drv::Error(drv::Code::kTimeout, "native ping-pong partner stopped answering")
                   : system_error("poll");
      break;
    }
    if (!drain_fd(pong_back.get())) {
      err = system_error("eventfd read");
      break;
    }
    const uint64_t t1 = now_ns();
    if (i >= warmup) rtt_ns.push_back(t1 - t0);
  }
  if (!err.ok()) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!err.ok()) return err;
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return drv::Error(drv::Code::kSystem, "native ping-pong partner failed");
  return rtt_ns;
}

}  // namespace tools
