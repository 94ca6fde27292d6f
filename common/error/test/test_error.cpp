// Host unit tests of vtrn::Error (common/error): success is empty, a
// failure keeps its code and its formatted detail, long details are cut at
// the capacity with their NUL, prefix() adds context in front and leaves a
// success alone, VTRN_TRY returns the first failure, and every code has its
// own name (the board codes keep the names the parser's tests knew).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <string>

#include "vtrn/error.h"

namespace {

using vtrn::Code;
using vtrn::Error;

void test_default_error_is_success_with_empty_detail(void**) {
  const Error e;
  assert_true(e.ok());
  assert_int_equal(int(e.code()), int(Code::kOk));
  assert_string_equal(e.detail(), "");
}

void test_failure_keeps_code_and_formatted_detail(void**) {
  const Error e(Code::kBadProperty, "%s: %s: %u out of range", "/chips/chip@1", "vtrn,lanes", 3u);
  assert_false(e.ok());
  assert_int_equal(int(e.code()), int(Code::kBadProperty));
  assert_string_equal(e.detail(), "/chips/chip@1: vtrn,lanes: 3 out of range");
}

void test_long_detail_is_cut_at_capacity(void**) {
  const std::string big(400, 'x');
  const Error e(Code::kInternal, "%s", big.c_str());
  assert_int_equal(strlen(e.detail()), Error::kDetailCap - 1);
}

void test_prefix_adds_context_and_keeps_success_empty(void**) {
  Error e(Code::kInvalidArgument, "level %u", 9u);
  e.prefix("%s: ", "set_log_level");
  assert_string_equal(e.detail(), "set_log_level: level 9");
  Error ok;
  ok.prefix("power: ");
  assert_true(ok.ok());
  assert_string_equal(ok.detail(), "");
  const std::string big(Error::kDetailCap, 'y');
  Error full(Code::kInternal, "%s", big.c_str());
  full.prefix("ctx: ");
  assert_int_equal(strlen(full.detail()), Error::kDetailCap - 1);
  assert_memory_equal(full.detail(), "ctx: yyy", 8);
}

Error step(int i, int fail_at, int* reached) {
  *reached = i;
  if (i == fail_at) return Error(Code::kNotFound, "step %d", i);
  return Error();
}

Error steps(int fail_at, int* reached) {
  for (int i = 0; i < 4; ++i) VTRN_TRY(step(i, fail_at, reached));
  return Error();
}

void test_try_returns_the_first_failure(void**) {
  int reached = -1;
  const Error e = steps(2, &reached);
  assert_int_equal(reached, 2);
  assert_int_equal(int(e.code()), int(Code::kNotFound));
  assert_string_equal(e.detail(), "step 2");
  assert_true(steps(9, &reached).ok());
  assert_int_equal(reached, 3);
}

void test_every_code_has_a_distinct_name(void**) {
  const Code all[] = {Code::kOk,          Code::kInvalidArgument, Code::kTimeout,
                      Code::kOutOfRange,  Code::kNotFound,        Code::kNoSpace,
                      Code::kCapacity,    Code::kBadHardware,     Code::kNotReady,
                      Code::kUnsupported, Code::kBusy,            Code::kDecode,
                      Code::kInternal,    Code::kBadTree,         Code::kMissingNode,
                      Code::kMissingProperty, Code::kBadProperty, Code::kTooMany,
                      Code::kDuplicate,   Code::kNoSuchChip,      Code::kNotRunning,
                      Code::kClosed,      Code::kSystem,          Code::kUntrusted,
                      Code::kChipError,   Code::kStopping,
                      Code::kPermissionDenied};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    assert_string_not_equal(vtrn::code_name(all[i]), "unknown");
    for (size_t j = 0; j < i; ++j) assert_string_not_equal(vtrn::code_name(all[i]), vtrn::code_name(all[j]));
  }
  assert_string_equal(vtrn::code_name(Code::kMissingProperty), "missing_property");
  assert_string_equal(vtrn::code_name(Code(13)), "unknown");
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_error_is_success_with_empty_detail),
      cmocka_unit_test(test_failure_keeps_code_and_formatted_detail),
      cmocka_unit_test(test_long_detail_is_cut_at_capacity),
      cmocka_unit_test(test_prefix_adds_context_and_keeps_success_empty),
      cmocka_unit_test(test_try_returns_the_first_failure),
      cmocka_unit_test(test_every_code_has_a_distinct_name),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
