// vtrnd's edge between libvtrn's enums and vtrn.api's (driver/vtrnd/api_enums.h):
// every libvtrn value maps to its own protocol value, every protocol value is
// reached, and the state names libvtrn prints are the protocol's; every error
// code maps to a protocol status, and each code a control result carries
// (ctrl_queue, fw_call, Chip, the job backend) to the status clients have
// always seen for that failure.
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
using drv::Code;
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

void test_every_error_code_maps_to_an_api_status(void**) {
  size_t codes = 0;
  for (uint32_t i = 0; i < 256; ++i) {
    const auto c = Code(i);
    if (strcmp(vtrn::code_name(c), "unknown") == 0) continue;
    ++codes;
    assert_non_null(protobuf_c_enum_descriptor_get_value(&vtrn__api__status__descriptor, int(drv::to_api(c))));
    assert_int_equal(drv::to_api(drv::Error(c, "x")), drv::to_api(c));
  }
  assert_int_equal(codes, 27);  // every code vtrn/error.h lists was reached
  assert_int_equal(drv::to_api(drv::Error()), VTRN__API__STATUS__STATUS_OK);
}

void test_control_result_codes_keep_the_status_clients_saw(void**) {
  const struct {
    Code code;
    Vtrn__Api__Status status;
  } kSeen[] = {
      {Code::kOk, VTRN__API__STATUS__STATUS_OK},
      {Code::kInvalidArgument, VTRN__API__STATUS__STATUS_BAD_REQUEST},  // a request too large for a slot
      {Code::kTimeout, VTRN__API__STATUS__STATUS_TIMEOUT},              // no answer, request ring full
      {Code::kChipError, VTRN__API__STATUS__STATUS_CHIP_ERROR},         // firmware status, wrong answer, broken ring
      {Code::kNotReady, VTRN__API__STATUS__STATUS_CHIP_NOT_READY},      // chip not READY, left READY
      {Code::kStopping, VTRN__API__STATUS__STATUS_SHUTTING_DOWN},       // chip stopping
      {Code::kInternal, VTRN__API__STATUS__STATUS_INTERNAL},            // a caller's wrong answer type
      {Code::kNoSuchChip, VTRN__API__STATUS__STATUS_UNKNOWN_CHIP},      // the job backend's unknown chip
      {Code::kPermissionDenied, VTRN__API__STATUS__STATUS_PERMISSION_DENIED},  // HbmService::claim_dma
  };
  for (const auto& s : kSeen) assert_int_equal(drv::to_api(s.code), s.status);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_chip_state_maps_to_its_own_api_value_with_the_same_name),
      cmocka_unit_test(test_every_reset_cause_maps_to_its_own_api_value),
      cmocka_unit_test(test_every_error_code_maps_to_an_api_status),
      cmocka_unit_test(test_control_result_codes_keep_the_status_clients_saw),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
