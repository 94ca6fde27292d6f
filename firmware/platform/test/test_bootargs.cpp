// Host unit tests of the firmware's /chosen/bootargs parser
// (firmware/platform/bootargs.cpp, the same file the image compiles).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include "fw/platform.h"

namespace {

struct Parsed {
  uint32_t chip = 0xdead;
  uint64_t addr = 0;
  uint64_t size = 0;
  vtrn::Error err;
  bool ok = false;
};

Parsed parse(const char* args) {
  Parsed p;
  p.err = fw::platform::parse_bootargs(args, &p.chip, &p.addr, &p.size);
  p.ok = p.err.ok();
  return p;
}

void test_bootarg_is_matches_whole_words_only(void**) {
  const char* a = "vtrn.chip=1 vtrn.copy_engine=engines  x=1";
  assert_true(fw::platform::bootarg_is(a, "vtrn.copy_engine", "engines"));
  assert_false(fw::platform::bootarg_is(a, "vtrn.copy_engine", "cpu"));
  assert_false(fw::platform::bootarg_is(a, "vtrn.copy_engine", "engine"));
  assert_false(fw::platform::bootarg_is("vtrn.copy_engine=enginesX", "vtrn.copy_engine", "engines"));
  assert_false(fw::platform::bootarg_is("xvtrn.copy_engine=engines", "vtrn.copy_engine", "engines"));
  assert_true(fw::platform::bootarg_is("vtrn.copy_engine=cpu", "vtrn.copy_engine", "cpu"));
  assert_false(fw::platform::bootarg_is("", "vtrn.copy_engine", "cpu"));
}

void test_bootargs_reads_all_three_keys(void**) {
  const Parsed p = parse("vtrn.chip=3 vtrn.board=0x40100000 vtrn.board_size=2758");
  assert_true(p.ok);
  assert_int_equal(p.chip, 3);
  assert_int_equal(p.addr, 0x40100000);
  assert_int_equal(p.size, 2758);
}

void test_bootargs_ignores_unknown_words_and_extra_spaces(void**) {
  const Parsed p = parse("  console=ttyAMA0 quiet vtrn.board_size=10\tvtrn.chip=0  vtrn.board=4096 ");
  assert_true(p.ok);
  assert_int_equal(p.chip, 0);
  assert_int_equal(p.addr, 4096);
  assert_int_equal(p.size, 10);
}

void test_bootargs_names_the_missing_key(void**) {
  Parsed p = parse("vtrn.chip=0 vtrn.board_size=10");
  assert_false(p.ok);
  assert_string_equal(p.err.detail(), "bootargs: vtrn.board: missing");
  p = parse("");
  assert_false(p.ok);
  assert_string_equal(p.err.detail(), "bootargs: vtrn.chip: missing");
}

void test_bootargs_rejects_non_numeric_value(void**) {
  const Parsed p = parse("vtrn.chip=zero vtrn.board=0x1000 vtrn.board_size=10");
  assert_false(p.ok);
  assert_non_null(strstr(p.err.detail(), "vtrn.chip=zero: not a number"));
}

void test_bootargs_rejects_chip_id_beyond_32_bits(void**) {
  const Parsed p = parse("vtrn.chip=0x100000000 vtrn.board=0x1000 vtrn.board_size=10");
  assert_false(p.ok);
  assert_non_null(strstr(p.err.detail(), "out of range"));
}

void test_bootargs_rejects_empty_vtrn_value(void**) {
  const Parsed p = parse("vtrn.chip= vtrn.board=0x1000 vtrn.board_size=10");
  assert_false(p.ok);
  assert_non_null(strstr(p.err.detail(), "vtrn.chip"));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bootargs_reads_all_three_keys),
      cmocka_unit_test(test_bootarg_is_matches_whole_words_only),
      cmocka_unit_test(test_bootargs_ignores_unknown_words_and_extra_spaces),
      cmocka_unit_test(test_bootargs_names_the_missing_key),
      cmocka_unit_test(test_bootargs_rejects_non_numeric_value),
      cmocka_unit_test(test_bootargs_rejects_chip_id_beyond_32_bits),
      cmocka_unit_test(test_bootargs_rejects_empty_vtrn_value),
  };
  return cmocka_run_group_tests_name("firmware_bootargs", tests, nullptr, nullptr);
}
