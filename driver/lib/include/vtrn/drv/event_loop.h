// A single-threaded epoll loop with fd watches and one-shot timers, the only
// scheduler in vtrnd. Everything (client sockets, every chip's eventfds, QMP,
// QEMU stderr, signals) is a watch; every timeout is a timer driven by one
// timerfd armed at the earliest deadline (microsecond precision, which ping
// intervals need and epoll_wait's millisecond timeout would not give).
//
// Callbacks may add or remove any watch or timer, their own included: a
// watch removed during a dispatch round is never called again, even if its
// fd number is reused in the same round (watches carry a generation).
// Not thread-safe; not a general-purpose library.
#pragma once

#include <stdint.h>

#include <functional>
#include <map>
#include <unordered_map>

#include "vtrn/drv/error.h"
#include "vtrn/drv/fd.h"

namespace drv {

class EventLoop {
 public:
  using FdCallback = std::function<void(uint32_t events)>;
  using TimerCallback = std::function<void()>;
  using TimerId = uint64_t;

  EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  [[nodiscard]] bool ok() const { return epfd_.valid() && timerfd_.valid(); }

  // One watch per fd. kSystem when epoll refuses it (the detail names the
  // call, the fd and strerror).
  Error add(int fd, uint32_t events, FdCallback cb);
  // kNotFound for an fd without a watch, kSystem when epoll refuses.
  Error modify(int fd, uint32_t events);
  void remove(int fd);

  // Runs `cb` once at CLOCK_MONOTONIC `deadline_ns`. Returns a non-zero id.
  TimerId add_timer(uint64_t deadline_ns, TimerCallback cb);
  TimerId add_timer_in(uint64_t delay_ns, TimerCallback cb);
  void cancel_timer(TimerId id);

  // Dispatches until stop(); kSystem when epoll_wait fails.
  Error run();
  // One round: waits at most timeout_ms (-1: until something happens).
  // kSystem when epoll_wait fails; a signal (EINTR) is a round without
  // events.
  Error run_once(int timeout_ms);
  void stop() { stopped_ = true; }
  [[nodiscard]] bool stopped() const { return stopped_; }

 private:
  struct Watch {
    uint32_t gen;
    FdCallback cb;
  };
  void arm_timerfd();
  void fire_timers();

  UniqueFd epfd_;
  UniqueFd timerfd_;
  std::unordered_map<int, Watch> watches_;
  uint32_t next_gen_ = 1;
  std::multimap<uint64_t, TimerId> deadlines_;
  std::unordered_map<TimerId, std::pair<uint64_t, TimerCallback>> timers_;
  TimerId next_timer_ = 1;
  uint64_t armed_for_ = 0;
  bool stopped_ = false;
};

}  // namespace drv
