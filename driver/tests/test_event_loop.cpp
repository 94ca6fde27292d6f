// Unit tests of drv::EventLoop's errors (driver/lib/event_loop.cpp): a
// watch epoll refuses is kSystem naming the call, the fd and strerror, and
// leaves the loop as it was; a modify without a watch is kNotFound; run()
// ends with success once a callback stops it.
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <string>

#include "vtrn/drv/event_loop.h"

extern "C" {
#include <cmocka.h>
}

namespace {

// Both ends of a pipe, closed at the end of the test.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { assert_int_equal(pipe(fd), 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
};

void test_watch_on_a_closed_fd_is_a_system_error_naming_the_call(void**) {
  drv::EventLoop loop;
  assert_true(loop.ok());
  Pipe p;
  const int fd = p.fd[0];
  close(p.fd[0]);
  p.fd[0] = -1;
  const drv::Error e = loop.add(fd, EPOLLIN, [](uint32_t) {});
  assert_int_equal(e.code(), drv::Code::kSystem);
  const std::string want = "epoll_ctl ADD fd " + std::to_string(fd) + ": " + strerror(EBADF);
  assert_string_equal(e.detail().c_str(), want.c_str());
  // No watch was kept for it.
  assert_int_equal(loop.modify(fd, EPOLLIN).code(), drv::Code::kNotFound);
}

void test_second_watch_on_an_fd_is_refused_and_the_first_still_runs(void**) {
  drv::EventLoop loop;
  Pipe p;
  int first = 0, second = 0;
  assert_true(loop.add(p.fd[0], EPOLLIN, [&](uint32_t) { ++first; }).ok());
  const drv::Error e = loop.add(p.fd[0], EPOLLIN, [&](uint32_t) { ++second; });
  assert_int_equal(e.code(), drv::Code::kSystem);
  assert_non_null(strstr(e.detail().c_str(), strerror(EEXIST)));
  assert_int_equal(write(p.fd[1], "x", 1), 1);
  assert_true(loop.run_once(1000).ok());
  assert_int_equal(first, 1);
  assert_int_equal(second, 0);
}

void test_modify_without_a_watch_is_not_found(void**) {
  drv::EventLoop loop;
  Pipe p;
  const drv::Error e = loop.modify(p.fd[0], EPOLLIN);
  assert_int_equal(e.code(), drv::Code::kNotFound);
  assert_non_null(strstr(e.detail().c_str(), ("fd " + std::to_string(p.fd[0])).c_str()));
  assert_true(loop.add(p.fd[0], EPOLLIN, [](uint32_t) {}).ok());
  assert_true(loop.modify(p.fd[0], EPOLLIN | EPOLLRDHUP).ok());
}

void test_run_succeeds_once_a_callback_stops_it(void**) {
  drv::EventLoop loop;
  bool fired = false;
  loop.add_timer_in(1'000'000, [&] {
    fired = true;
    loop.stop();
  });
  assert_true(loop.run().ok());
  assert_true(fired);
  assert_true(loop.stopped());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_watch_on_a_closed_fd_is_a_system_error_naming_the_call),
      cmocka_unit_test(test_second_watch_on_an_fd_is_refused_and_the_first_still_runs),
      cmocka_unit_test(test_modify_without_a_watch_is_not_found),
      cmocka_unit_test(test_run_succeeds_once_a_callback_stops_it),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
