// Unit tests of drv::LogStream (log_stream.h) alone: only the last `keep`
// lines are kept, oldest first; text from the chip is made printable before
// anyone sees it; listeners get every batch with the bytes lost before it
// (a batch of nothing that lost nothing is not one), and one may leave from
// inside its own call without the others missing the batch.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/drv/log_stream.h"

namespace {

void test_keeps_the_last_lines_oldest_first(void**) {
  drv::LogStream s(3);
  s.add({"a", "b"}, 0);
  s.add({"c", "d", "e"}, 0);
  assert_int_equal(s.history().size(), 3);
  assert_string_equal(s.history().front().c_str(), "c");
  assert_string_equal(s.history().back().c_str(), "e");
  const std::vector<std::string> two = s.last(2);
  assert_int_equal(two.size(), 2);
  assert_string_equal(two[0].c_str(), "d");
  assert_string_equal(two[1].c_str(), "e");
  assert_int_equal(s.last(10).size(), 3);
}

void test_untrusted_bytes_become_printable_for_everyone(void**) {
  drv::LogStream s;
  std::vector<std::string> seen;
  s.subscribe([&](const std::vector<std::string>& l, uint64_t) { seen = l; });
  s.add({std::string("ok\x1b[2J\xff\ttab", 11)}, 0);
  assert_string_equal(s.history().back().c_str(), "ok?[2J?\ttab");
  assert_int_equal(seen.size(), 1);
  assert_string_equal(seen[0].c_str(), "ok?[2J?\ttab");
}

void test_listeners_get_batches_and_losses(void**) {
  drv::LogStream s;
  int calls = 0;
  uint64_t lost = 0;
  size_t lines = 0;
  s.subscribe([&](const std::vector<std::string>& l, uint64_t n) {
    ++calls;
    lines += l.size();
    lost += n;
  });
  s.add({}, 0);  // nothing: no call
  assert_int_equal(calls, 0);
  s.add({"x", "y"}, 0);
  s.add({}, 512);  // only a loss is still news
  assert_int_equal(calls, 2);
  assert_int_equal(lines, 2);
  assert_int_equal(lost, 512);
}

void test_a_listener_may_leave_from_inside_its_call(void**) {
  drv::LogStream s;
  int first = 0, second = 0;
  int id = 0;
  id = s.subscribe([&](const std::vector<std::string>&, uint64_t) {
    ++first;
    s.unsubscribe(id);
  });
  s.subscribe([&](const std::vector<std::string>&, uint64_t) { ++second; });
  s.add({"one"}, 0);
  s.add({"two"}, 0);
  assert_int_equal(first, 1);
  assert_int_equal(second, 2);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keeps_the_last_lines_oldest_first),
      cmocka_unit_test(test_untrusted_bytes_become_printable_for_everyone),
      cmocka_unit_test(test_listeners_get_batches_and_losses),
      cmocka_unit_test(test_a_listener_may_leave_from_inside_its_call),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
