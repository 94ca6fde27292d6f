// vtrnd's edge between libvtrn's enums and vtrn.api's (driver/vtrnd/api_enums.h):
// every libvtrn value maps to its own protocol value, every protocol value is
// reached, and the state names libvtrn prints are the protocol's.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <set>

extern "C" {
#include <cmocka.h>
}

#include "../vtrnd/api_enums.h"
#include "vtrn/proto_names.h"

namespace {

using drv::ChipState;
using drv::ResetCause;

void test_every_chip_state_maps_to_its_own_api_value_with_the_same_name(void**) {
  std::set<int> seen;
  for (uint32_t i = 0; i < drv::kChipStateCount; ++i) {
    const auto s = ChipState(i);
    const Vtrn__Api__ChipState a = drv::to_api(s);
    assert_true(seen.insert(int(a)).second);
    assert_string_equal(drv::chip_state_name(s), vtrn::proto::chip_state_name(a));
  }
  assert_int_equal(seen.size(), vtrn__api__chip_state__descriptor.n_values);
}

void test_every_reset_cause_maps_to_its_own_api_value(void**) {
  std::set<int> seen;
  for (uint32_t i = 0; i < drv::kResetCauseCount; ++i) {
    const Vtrn__Api__ResetCause a = drv::to_api(ResetCause(i));
    assert_non_null(protobuf_c_enum_descriptor_get_value(&vtrn__api__reset_cause__descriptor, int(a)));
    assert_true(seen.insert(int(a)).second);
  }
  assert_int_equal(seen.size(), vtrn__api__reset_cause__descriptor.n_values);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_chip_state_maps_to_its_own_api_value_with_the_same_name),
      cmocka_unit_test(test_every_reset_cause_maps_to_its_own_api_value),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
