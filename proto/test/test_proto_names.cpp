// Host unit tests of the vtrn.api name tables (vtrn/proto_names.h): the
// texts the CLI and vtrnd print for every state, kernel and dtype, the
// fallbacks for a value the enum does not have, and that parsing a printed
// name gives the value back for every value the descriptors list.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <string>

#include "vtrn/proto_names.h"

namespace {

using namespace vtrn::proto;

void test_chip_states_print_without_prefix(void**) {
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_STARTING), "STARTING");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_BOOTING), "BOOTING");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_READY), "READY");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_FAILED), "FAILED");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_PANIC), "PANIC");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_HALTED), "HALTED");
  assert_string_equal(chip_state_name(VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN), "UNKNOWN");
  assert_string_equal(chip_state_name(Vtrn__Api__ChipState(77)), "UNKNOWN");
}

void test_job_states_print_without_prefix(void**) {
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_QUEUED), "QUEUED");
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_RUNNING), "RUNNING");
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_DONE), "DONE");
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_FAILED), "FAILED");
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_CANCELLED), "CANCELLED");
  assert_string_equal(job_state_name(VTRN__API__JOB_STATE__JOB_STATE_TIMED_OUT), "TIMED_OUT");
  assert_string_equal(job_state_name(Vtrn__Api__JobState(-3)), "UNKNOWN");
}

void test_kernels_print_in_lower_case(void**) {
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_GEMM), "gemm");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_ADD), "add");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_MUL), "mul");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_GELU), "gelu");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_SOFTMAX), "softmax");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_SUM), "sum");
  assert_string_equal(kernel_name(VTRN__API__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED), "unknown");
  assert_string_equal(kernel_name(Vtrn__Api__JobKernel(99)), "unknown");
}

void test_engines_print_in_lower_case_and_parse_back(void**) {
  assert_string_equal(engine_name(VTRN__API__JOB_ENGINE__JOB_ENGINE_DEFAULT), "default");
  assert_string_equal(engine_name(VTRN__API__JOB_ENGINE__JOB_ENGINE_TENSOR), "tensor");
  assert_string_equal(engine_name(VTRN__API__JOB_ENGINE__JOB_ENGINE_CORES), "cores");
  assert_string_equal(engine_name(Vtrn__Api__JobEngine(7)), "unknown");
  Vtrn__Api__JobEngine e = VTRN__API__JOB_ENGINE__JOB_ENGINE_DEFAULT;
  assert_true(parse_engine("cores", &e));
  assert_int_equal(e, VTRN__API__JOB_ENGINE__JOB_ENGINE_CORES);
  assert_true(parse_engine("tensor", &e));
  assert_int_equal(e, VTRN__API__JOB_ENGINE__JOB_ENGINE_TENSOR);
  assert_false(parse_engine("gpsimd", &e));
  assert_int_equal(e, VTRN__API__JOB_ENGINE__JOB_ENGINE_TENSOR);
}

void test_dtypes_print_as_numerics_names(void**) {
  assert_string_equal(dtype_name(VTRN__API__JOB_DTYPE__JOB_DTYPE_F32), "fp32");
  assert_string_equal(dtype_name(VTRN__API__JOB_DTYPE__JOB_DTYPE_BF16), "bf16");
  assert_string_equal(dtype_name(VTRN__API__JOB_DTYPE__JOB_DTYPE_FP8_E4M3), "fp8-e4m3");
  assert_string_equal(dtype_name(VTRN__API__JOB_DTYPE__JOB_DTYPE_FP8_E5M2), "fp8-e5m2");
  assert_string_equal(dtype_name(VTRN__API__JOB_DTYPE__JOB_DTYPE_MXFP4), "mxfp4");
  assert_string_equal(dtype_name(Vtrn__Api__JobDType(5)), "unknown");
  assert_string_equal(dtype_name(Vtrn__Api__JobDType(-1)), "unknown");
}

void test_every_listed_kernel_and_dtype_parses_back(void**) {
  const ProtobufCEnumDescriptor& k = vtrn__api__job_kernel__descriptor;
  unsigned kernels = 0;
  for (unsigned i = 0; i < k.n_values; ++i) {
    const auto v = Vtrn__Api__JobKernel(k.values[i].value);
    if (v == VTRN__API__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED) continue;
    Vtrn__Api__JobKernel back = VTRN__API__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED;
    assert_true(parse_kernel(kernel_name(v), &back));
    assert_int_equal(back, v);
    ++kernels;
  }
  assert_int_equal(kernels, 6);
  const ProtobufCEnumDescriptor& d = vtrn__api__job_dtype__descriptor;
  for (unsigned i = 0; i < d.n_values; ++i) {
    const auto v = Vtrn__Api__JobDType(d.values[i].value);
    Vtrn__Api__JobDType back = Vtrn__Api__JobDType(-1);
    assert_true(parse_dtype(dtype_name(v), &back));
    assert_int_equal(back, v);
  }
  assert_int_equal(d.n_values, 5);
}

void test_parse_takes_exact_names_only(void**) {
  Vtrn__Api__JobKernel k = VTRN__API__JOB_KERNEL__JOB_KERNEL_ADD;
  assert_false(parse_kernel("GEMM", &k));
  assert_false(parse_kernel("unknown", &k));
  assert_false(parse_kernel("", &k));
  assert_false(parse_kernel("unspecified", &k));
  assert_int_equal(k, VTRN__API__JOB_KERNEL__JOB_KERNEL_ADD);
  Vtrn__Api__JobDType d = VTRN__API__JOB_DTYPE__JOB_DTYPE_BF16;
  assert_true(parse_dtype("f32", &d));
  assert_int_equal(d, VTRN__API__JOB_DTYPE__JOB_DTYPE_F32);
  d = VTRN__API__JOB_DTYPE__JOB_DTYPE_BF16;
  assert_false(parse_dtype("FP32", &d));
  assert_false(parse_dtype("fp8", &d));
  assert_int_equal(d, VTRN__API__JOB_DTYPE__JOB_DTYPE_BF16);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chip_states_print_without_prefix),
      cmocka_unit_test(test_job_states_print_without_prefix),
      cmocka_unit_test(test_kernels_print_in_lower_case),
      cmocka_unit_test(test_engines_print_in_lower_case_and_parse_back),
      cmocka_unit_test(test_dtypes_print_as_numerics_names),
      cmocka_unit_test(test_every_listed_kernel_and_dtype_parses_back),
      cmocka_unit_test(test_parse_takes_exact_names_only),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
