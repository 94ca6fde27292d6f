// Unit tests of drv::QemuProcess (qemu_process.h) alone, with /bin/sh
// standing in for QEMU: its output (stdout and stderr) becomes printable
// lines, only the last ones are kept, the child is running until the owner
// says it was reaped, kill() ends it, and a child still running when the
// owner goes away is killed and reaped.
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <string>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"
#include "vtrn/drv/qemu_process.h"

namespace {

// Runs the loop until the child closed its output (bounded: 10 s).
void drain(drv::EventLoop& loop, const drv::QemuProcess& q) {
  const uint64_t until = drv::monotonic_ns() + 10'000'000'000ull;
  while (q.output_open() && drv::monotonic_ns() < until) assert_true(loop.run_once(50).ok());
  assert_false(q.output_open());
}

int reap(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

void test_output_lines_are_kept_printable_until_reaped(void**) {
  drv::EventLoop loop;
  drv::QemuProcess q(&loop, "chip 7");
  std::string err;
  assert_true(q.spawn({"/bin/sh", "-c", "printf 'one\\n\\ntwo\\001\\n'; echo three >&2; exit 3"}, {}).ok());
  assert_true(q.running());
  const pid_t pid = q.pid();
  assert_true(pid > 0);
  drain(loop, q);
  const int status = reap(pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
  assert_true(q.running());  // until the owner says it was reaped
  assert_true(q.exited());
  assert_false(q.running());
  assert_false(q.exited());  // told once
  assert_int_equal(q.pid(), pid);  // still known for messages
  assert_int_equal(q.lines().size(), 3);  // the empty line is dropped
  assert_string_equal(q.lines()[0].c_str(), "one");
  assert_string_equal(q.lines()[1].c_str(), "two?");
  assert_string_equal(q.lines()[2].c_str(), "three");
  q.kill();  // not running: nothing to kill, and nothing happens
}

void test_only_the_last_lines_are_kept(void**) {
  drv::EventLoop loop;
  drv::QemuProcess q(&loop, "chip 0", 4);
  std::string err;
  assert_true(q.spawn({"/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; done"}, {}).ok());
  drain(loop, q);
  reap(q.pid());
  assert_true(q.exited());
  assert_int_equal(q.lines().size(), 4);
  assert_string_equal(q.lines().front().c_str(), "line7");
  assert_string_equal(q.lines().back().c_str(), "line10");
  q.clear_lines();
  assert_true(q.lines().empty());
}

void test_kill_ends_a_running_child(void**) {
  drv::EventLoop loop;
  drv::QemuProcess q(&loop, "chip 0");
  std::string err;
  assert_true(q.spawn({"/bin/sh", "-c", "exec sleep 30"}, {}).ok());
  q.kill();
  const int status = reap(q.pid());
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
  assert_true(q.exited());
}

void test_owner_going_away_kills_and_reaps_the_child(void**) {
  drv::EventLoop loop;
  pid_t pid = -1;
  {
    drv::QemuProcess q(&loop, "chip 0");
    std::string err;
    assert_true(q.spawn({"/bin/sh", "-c", "exec sleep 30"}, {}).ok());
    pid = q.pid();
  }
  // Reaped already: no such child any more.
  errno = 0;
  assert_int_equal(waitpid(pid, nullptr, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_lines_are_kept_printable_until_reaped),
      cmocka_unit_test(test_only_the_last_lines_are_kept),
      cmocka_unit_test(test_kill_ends_a_running_child),
      cmocka_unit_test(test_owner_going_away_kills_and_reaps_the_child),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
