// epoll + timerfd event loop (see vtrn/drv/event_loop.h).
#include "vtrn/drv/event_loop.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include <vector>

namespace drv {
namespace {
constexpr int kTimerFdTag = -1;

// The failed call's errno, read before anything else can change it.
Error epoll_error(const char* call, int fd) {
  const int err = errno;
  return Error(Code::kSystem, std::string(call) + " fd " + std::to_string(fd) + ": " + strerror(err));
}
}  // namespace

EventLoop::EventLoop()
    : epfd_(epoll_create1(EPOLL_CLOEXEC)),
      timerfd_(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
  if (!ok()) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = uint32_t(kTimerFdTag);
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, timerfd_.get(), &ev) != 0) epfd_.reset();
}

Error EventLoop::add(int fd, uint32_t events, FdCallback cb) {
  uint32_t gen = next_gen_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = uint64_t(gen) << 32 | uint32_t(fd);
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return epoll_error("epoll_ctl ADD", fd);
  watches_[fd] = Watch{gen, std::move(cb)};
  return Error();
}

Error EventLoop::modify(int fd, uint32_t events) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return Error(Code::kNotFound, "event loop: no watch on fd " + std::to_string(fd));
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = uint64_t(it->second.gen) << 32 | uint32_t(fd);
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) return epoll_error("epoll_ctl MOD", fd);
  return Error();
}

void EventLoop::remove(int fd) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  watches_.erase(it);
}

EventLoop::TimerId EventLoop::add_timer(uint64_t deadline_ns, TimerCallback cb) {
  TimerId id = next_timer_++;
  deadlines_.emplace(deadline_ns, id);
  timers_.emplace(id, std::make_pair(deadline_ns, std::move(cb)));
  arm_timerfd();
  return id;
}

EventLoop::TimerId EventLoop::add_timer_in(uint64_t delay_ns, TimerCallback cb) {
  return add_timer(monotonic_ns() + delay_ns, std::move(cb));
}

void EventLoop::cancel_timer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto range = deadlines_.equal_range(it->second.first);
  for (auto d = range.first; d != range.second; ++d) {
    if (d->second == id) {
      deadlines_.erase(d);
      break;
    }
  }
  timers_.erase(it);
  // A timerfd armed for a cancelled deadline only causes a harmless early
  // wake-up; fire_timers() re-arms for the real earliest one.
}

void EventLoop::arm_timerfd() {
  uint64_t next = deadlines_.empty() ? 0 : deadlines_.begin()->first;
  if (next == armed_for_) return;
  itimerspec its{};
  if (next != 0) {
    its.it_value.tv_sec = time_t(next / 1000000000u);
    its.it_value.tv_nsec = long(next % 1000000000u);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  }
  timerfd_settime(timerfd_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  armed_for_ = next;
}

void EventLoop::fire_timers() {
  uint64_t expirations;
  while (read(timerfd_.get(), &expirations, sizeof expirations) > 0) {
  }
  armed_for_ = 0;
  const uint64_t now = monotonic_ns();
  // Collect first: callbacks may add timers that are already due, and those
  // run in the next round rather than starving fd watches.
  std::vector<TimerId> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now;) {
    due.push_back(it->second);
    it = deadlines_.erase(it);
  }
  for (TimerId id : due) {
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    TimerCallback cb = std::move(it->second.second);
    timers_.erase(it);
    cb();
  }
  arm_timerfd();
}

Error EventLoop::run_once(int timeout_ms) {
  epoll_event events[32];
  int n = epoll_wait(epfd_.get(), events, 32, timeout_ms);
  if (n < 0) return errno == EINTR ? Error() : epoll_error("epoll_wait", epfd_.get());
  for (int i = 0; i < n; ++i) {
    const uint64_t tag = events[i].data.u64;
    if (uint32_t(tag) == uint32_t(kTimerFdTag) && (tag >> 32) == 0) {
      fire_timers();
      continue;
    }
    const int fd = int(uint32_t(tag));
    const uint32_t gen = uint32_t(tag >> 32);
    auto it = watches_.find(fd);
    if (it == watches_.end() || it->second.gen != gen) continue;
    // Copy: the callback may remove (and destroy) its own watch.
    FdCallback cb = it->second.cb;
    cb(events[i].events);
  }
  return Error();
}

Error EventLoop::run() {
  while (!stopped_) {
    if (Error e = run_once(-1); !e.ok()) return e;
  }
  return Error();
}

}  // namespace drv
