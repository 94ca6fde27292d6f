// Unit tests of the fd and mapping helpers (driver/lib/fd.cpp): a shared
// mapping of a memfd is seen through a second mapping, and failed calls come
// back as kSystem naming the call.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "vtrn/drv/fd.h"

// cmocka defines fail() and friends as macros: include it after C++ headers.
extern "C" {
#include <cmocka.h>
}

namespace {

void test_mapping_is_shared_between_maps_of_one_fd(void**) {
  drv::UniqueFd fd(memfd_create("drv-test-fd", MFD_CLOEXEC));
  assert_true(fd.valid());
  assert_int_equal(ftruncate(fd.get(), 4096), 0);
  drv::Mapping a, b;
  assert_true(a.map(fd.get(), 4096).ok());
  assert_true(b.map(fd.get(), 4096).ok());
  a.data()[100] = 0x5a;
  assert_int_equal(b.data()[100], 0x5a);
  assert_int_equal(b.size(), 4096);
}

void test_mapping_a_bad_fd_is_a_system_error(void**) {
  drv::Mapping m;
  const drv::Error e = m.map(-1, 4096);
  assert_int_equal(int(e.code()), int(drv::Code::kSystem));
  assert_string_equal(e.detail().c_str(), (std::string("mmap: ") + strerror(EBADF)).c_str());
  assert_null(m.data());
  assert_int_equal(m.size(), 0);
}

void test_set_nonblocking_sets_the_flag(void**) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  drv::UniqueFd r(p[0]), w(p[1]);
  assert_true(drv::set_nonblocking(r.get()).ok());
  assert_true((fcntl(r.get(), F_GETFL) & O_NONBLOCK) != 0);
  assert_true((fcntl(w.get(), F_GETFL) & O_NONBLOCK) == 0);
}

void test_set_nonblocking_on_a_bad_fd_names_the_call(void**) {
  const drv::Error e = drv::set_nonblocking(-1);
  assert_int_equal(int(e.code()), int(drv::Code::kSystem));
  assert_string_equal(e.detail().c_str(), (std::string("fcntl F_GETFL fd -1: ") + strerror(EBADF)).c_str());
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_mapping_is_shared_between_maps_of_one_fd),
      cmocka_unit_test(test_mapping_a_bad_fd_is_a_system_error),
      cmocka_unit_test(test_set_nonblocking_sets_the_flag),
      cmocka_unit_test(test_set_nonblocking_on_a_bad_fd_names_the_call),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
