// vtrnd's runtime directory (driver/vtrnd/runtime_dir.h): what it creates,
// what it refuses (not a directory, another user's, writable by others, a
// live vtrnd in it), what it cleans of a crashed one, and what an orderly
// or failed stop leaves behind.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

extern "C" {
#include <cmocka.h>
}

#include "../vtrnd/runtime_dir.h"

namespace {

using drv::Code;
using drv::RuntimeDir;

std::string g_base;  // a fresh mkdtemp per test; the runtime dir is g_base + "/rt"

int setup(void**) {
  char tmpl[] = "/tmp/vtrn-rtdir-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return -1;
  g_base = tmpl;
  return 0;
}

int teardown(void**) {
  std::string cmd = "rm -rf '" + g_base + "'";
  return system(cmd.c_str()) == 0 ? 0 : -1;
}

bool exists(const std::string& p) {
  struct stat st{};
  return lstat(p.c_str(), &st) == 0;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void touch(const std::string& p, const std::string& text = "x") { std::ofstream(p) << text; }

void test_take_creates_a_private_directory_with_our_pid_and_release_removes_it(void**) {
  const std::string dir = g_base + "/rt";
  RuntimeDir rt;
  drv::Error e = rt.take(dir, -1);
  assert_true(e.ok());
  assert_true(rt.owned());
  struct stat st{};
  assert_int_equal(stat(dir.c_str(), &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_string_equal(slurp(dir + "/vtrnd.pid").c_str(), (std::to_string(getpid()) + "\n").c_str());
  drv::Result<drv::UniqueFd> sock = rt.listen_socket();
  assert_true(sock.ok());
  assert_int_equal(stat(rt.socket_path().c_str(), &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  touch(dir + "/vtrnd.log");
  rt.release(/*keep_log=*/false);
  assert_false(rt.owned());
  assert_false(exists(dir));
}

void test_a_failed_start_keeps_the_log_and_the_directory(void**) {
  const std::string dir = g_base + "/rt";
  RuntimeDir rt;
  assert_true(rt.take(dir, -1).ok());
  touch(dir + "/vtrnd.log", "why it failed\n");
  rt.release(/*keep_log=*/true);
  assert_false(exists(dir + "/vtrnd.pid"));
  assert_string_equal(slurp(dir + "/vtrnd.log").c_str(), "why it failed\n");
}

void test_a_directory_others_can_write_is_refused(void**) {
  const std::string dir = g_base + "/rt";
  assert_int_equal(mkdir(dir.c_str(), 0700), 0);
  assert_int_equal(chmod(dir.c_str(), 0777), 0);
  RuntimeDir rt;
  drv::Error e = rt.take(dir, -1);
  assert_int_equal(int(e.code()), int(Code::kUntrusted));
  assert_non_null(strstr(e.detail().c_str(), "writable by other users"));
  assert_false(rt.owned());
  assert_false(exists(dir + "/vtrnd.pid"));
}

void test_a_symlink_in_place_of_the_directory_is_refused(void**) {
  const std::string real = g_base + "/elsewhere";
  const std::string dir = g_base + "/rt";
  assert_int_equal(mkdir(real.c_str(), 0700), 0);
  assert_int_equal(symlink(real.c_str(), dir.c_str()), 0);
  RuntimeDir rt;
  drv::Error e = rt.take(dir, -1);
  assert_int_equal(int(e.code()), int(Code::kUntrusted));
  assert_non_null(strstr(e.detail().c_str(), "is not a directory"));
  assert_false(exists(real + "/vtrnd.pid"));
}

void test_another_users_directory_is_refused(void**) {
  if (getuid() != 0) {
    skip();  // only root can make a directory someone else's
    return;
  }
  const std::string dir = g_base + "/rt";
  assert_int_equal(mkdir(dir.c_str(), 0700), 0);
  assert_int_equal(chown(dir.c_str(), 65534, 65534), 0);
  RuntimeDir rt;
  drv::Error e = rt.take(dir, -1);
  assert_int_equal(int(e.code()), int(Code::kUntrusted));
  assert_non_null(strstr(e.detail().c_str(), "belongs to another user"));
}

void test_a_crashed_vtrnds_leftovers_are_cleaned(void**) {
  const std::string dir = g_base + "/rt";
  assert_int_equal(mkdir(dir.c_str(), 0700), 0);
  // A pid that is certainly gone: a child we reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  assert_true(dead > 0);
  assert_int_equal(waitpid(dead, nullptr, 0), dead);
  touch(dir + "/vtrnd.pid", std::to_string(dead) + "\n");
  touch(dir + "/vtrnd.sock");
  assert_int_equal(mkdir((dir + "/chip0").c_str(), 0700), 0);
  touch(dir + "/chip0/uart.log");
  RuntimeDir rt;
  assert_true(rt.take(dir, -1).ok());
  assert_false(exists(dir + "/chip0"));
  assert_false(exists(dir + "/vtrnd.sock"));
  assert_string_equal(slurp(dir + "/vtrnd.pid").c_str(), (std::to_string(getpid()) + "\n").c_str());
  rt.release(false);
}

void test_a_live_vtrnd_keeps_its_directory(void**) {
  const std::string dir = g_base + "/rt";
  RuntimeDir first;
  assert_true(first.take(dir, -1).ok());
  drv::Result<drv::UniqueFd> sock = first.listen_socket();
  assert_true(sock.ok());
  RuntimeDir second;
  drv::Error e = second.take(dir, -1);
  assert_int_equal(int(e.code()), int(Code::kBusy));
  assert_non_null(strstr(e.detail().c_str(), "vtrnd is already running"));
  assert_false(second.owned());
  // The first one's files are untouched.
  assert_true(exists(first.socket_path()));
  assert_string_equal(slurp(first.pid_path()).c_str(), (std::to_string(getpid()) + "\n").c_str());
  first.release(false);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_take_creates_a_private_directory_with_our_pid_and_release_removes_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_failed_start_keeps_the_log_and_the_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_directory_others_can_write_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_symlink_in_place_of_the_directory_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_another_users_directory_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_crashed_vtrnds_leftovers_are_cleaned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_live_vtrnd_keeps_its_directory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
