// Unit tests of the job file parser (host-tools/vtrn/job_file.cpp): a valid
// file becomes the JobSpec it describes, and each kind of mistake is refused
// with a message that starts with the JSON pointer of the bad field.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <string>

#include "job_file.h"

extern "C" {
#include <cmocka.h>
}

namespace {

using tools::JobSpec;

// The detail of the refusal, or "(accepted)". Every refusal of a job file
// is kInvalidArgument: the user's file, not the CLI, is at fault.
std::string parse_error(const std::string& text) {
  const drv::Result<JobSpec> spec = tools::parse_job_file(text);
  if (spec.ok()) return "(accepted)";
  assert_int_equal(spec.error().code(), drv::Code::kInvalidArgument);
  return spec.error().detail();
}

const char* kBuffers =
    R"("buffers": [{"name": "a", "values": [1, 2, 3, 4]}, {"name": "b", "file": "b.bin"},
                   {"name": "c", "bytes": 16, "output": "c.bin"}])";

std::string with_step(const std::string& step) {
  return std::string("{") + kBuffers + R"(, "steps": [)" + step + "]}";
}

void test_valid_file_becomes_its_spec(void**) {
  const std::string text =
      std::string(R"({"name": "demo", "chip": 1, "priority": 2, "timeout_ms": 500, "engine": "cores", )") + kBuffers +
                           R"(, "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "a", "b": "b", "out": "c"},
                                         {"kernel": "gemm", "dtype": "mxfp4", "m": 1, "n": 1, "k": 32,
                                          "a": "a", "a_scales": "b", "b": "a", "b_scales": "b", "out": "c"}]})";
  const drv::Result<JobSpec> parsed = tools::parse_job_file(text);
  if (!parsed.ok()) fail_msg("%s", parsed.error().detail().c_str());
  const JobSpec& spec = parsed.value();
  assert_string_equal(spec.name.c_str(), "demo");
  assert_int_equal(spec.chip, 1);
  assert_int_equal(spec.priority, 2);
  assert_int_equal(spec.timeout_ms, 500);
  assert_int_equal(spec.engine, VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_CORES);
  assert_int_equal(spec.buffers.size(), 3);
  assert_int_equal(spec.buffers[0].bytes, 16);
  assert_true(spec.buffers[0].has_values);
  assert_string_equal(spec.buffers[1].file.c_str(), "b.bin");
  assert_false(spec.buffers[1].bytes_given);
  assert_string_equal(spec.buffers[2].output.c_str(), "c.bin");
  assert_int_equal(spec.steps.size(), 2);
  assert_int_equal(spec.steps[1].kernel, VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM);
  assert_int_equal(spec.steps[1].dtype, VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4);
  assert_string_equal(spec.steps[1].b_scales.c_str(), "b");
}

void test_mistakes_name_their_field(void**) {
  struct Case {
    std::string text;
    const char* want;
  } cases[] = {
      {"{", "/: not valid JSON"},
      {"[]", "/: a job file is a JSON object"},
      {R"({"steps": []})", "/buffers: missing"},
      {with_step(R"({"kernel": "gemm", "dtype": "fp16", "m": 1, "n": 1, "k": 1, "a": "a", "b": "b", "out": "c"})"),
       "/steps/0/dtype: unknown dtype 'fp16'"},
      {with_step(R"({"kernel": "conv", "m": 1, "n": 1})"), "/steps/0/kernel: unknown kernel 'conv'"},
      {with_step(R"({"kernel": "add", "m": 1, "n": 1, "a": "a", "b": "zz", "out": "c"})"),
       "/steps/0/b: no buffer named 'zz'"},
      {with_step(R"({"kernel": "add", "m": -1, "n": 1, "a": "a", "b": "b", "out": "c"})"), "/steps/0/m: must be"},
      {with_step(R"({"kernel": "add", "m": 1.5, "n": 1, "a": "a", "b": "b", "out": "c"})"), "/steps/0/m: must be"},
      {with_step(R"({"kernel": "add", "m": 1, "n": 1, "k": 4, "a": "a", "b": "b", "out": "c"})"),
       "/steps/0/k: add takes no k"},
      {with_step(R"({"kernel": "gelu", "m": 1, "n": 1, "a": "a", "b": "b", "out": "c"})"),
       "/steps/0/b: gelu takes no b operand"},
      {with_step(R"({"kernel": "add", "m": 1, "n": 1, "a": "a", "b": "c", "out": "c"})"), "/steps/0/out: buffer 'c'"},
      {with_step(R"({"kernel": "gemm", "dtype": "mxfp4", "m": 1, "n": 1, "k": 33, "a": "a", "b": "b", "out": "c"})"),
       "/steps/0/k: 33 is not a multiple of 32"},
      {with_step(R"({"kernel": "add", "m": 1, "n": 1, "a": "a", "b": "b", "out": "c", "extra": 1})"),
       "/steps/0/extra: unknown field"},
      {R"({"buffers": [{"name": "a b", "bytes": 4}], "steps": [{"kernel": "sum", "m": 1, "n": 1}]})",
       "/buffers/0/name"},
      {R"({"buffers": [{"name": "a"}], "steps": []})", "/buffers/0: needs"},
      {R"({"buffers": [{"name": "a", "values": [1, "x"]}], "steps": []})", "/buffers/0/values/1: must be"},
      {R"({"buffers": [{"name": "a", "bytes": 8, "values": [1]}], "steps": []})", "/buffers/0/bytes: 8 but"},
      {R"({"buffers": [{"name": "a", "bytes": 4}, {"name": "a", "bytes": 4}], "steps": []})",
       "/buffers/1/name: 'a' is used twice"},
      {R"({"buffers": [{"name": "a", "file": "/etc/shadow"}], "steps": []})",
       "/buffers/0/file: '/etc/shadow' is absolute"},
      {R"({"buffers": [{"name": "a", "file": "in/../../x.bin"}], "steps": []})",
       "/buffers/0/file: 'in/../../x.bin' leaves the job file's directory"},
      {R"({"buffers": [{"name": "a", "bytes": 4, "output": "/tmp/x.bin"}], "steps": []})",
       "/buffers/0/output: '/tmp/x.bin' is absolute"},
      {R"({"buffers": [{"name": "a", "bytes": 4, "output": ".."}], "steps": []})",
       "/buffers/0/output: '..' leaves"},
      {R"({"buffers": [{"name": "a", "bytes": 4, "output": "out/.."}], "steps": []})",
       "/buffers/0/output: 'out/..' leaves"},
      {R"({"buffers": [{"name": "a", "bytes": 4}], "steps": [], "prio": 1})", "/prio: unknown field"},
      {R"({"buffers": [{"name": "a", "bytes": 4}], "steps": [], "priority": 9})", "/priority: 9 outside 0..7"},
      {R"({"buffers": [{"name": "a", "bytes": 4}], "steps": [], "engine": "gpu"})",
       "/engine: unknown engine 'gpu' (tensor, cores, default)"},
  };
  for (const Case& c : cases) {
    const std::string err = parse_error(c.text);
    if (err.rfind(c.want, 0) != 0) fail_msg("for %s\n  got  '%s'\n  want '%s...'", c.text.c_str(), err.c_str(), c.want);
  }
}

void test_shapes_are_checked_once_sizes_are_known(void**) {
  drv::Result<JobSpec> parsed = tools::parse_job_file(
      with_step(R"({"kernel": "gemm", "dtype": "bf16", "m": 2, "n": 2, "k": 4, "a": "a", "b": "b", "out": "c"})"));
  if (!parsed.ok()) fail_msg("%s", parsed.error().detail().c_str());
  JobSpec& spec = parsed.value();
  spec.buffers[1].bytes = 16;  // as if b.bin held 16 bytes: 2x4 bf16, correct
  const drv::Error fits = tools::check_job_shapes(spec);
  if (!fits.ok()) fail_msg("%s", fits.detail().c_str());
  spec.buffers[1].bytes = 12;
  const drv::Error err = tools::check_job_shapes(spec);
  assert_int_equal(err.code(), drv::Code::kInvalidArgument);
  assert_string_equal(err.detail().c_str(), "/steps/0/b: buffer 'b' holds 12 bytes, gemm 2x2x4 bf16 needs 16");
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_file_becomes_its_spec),
      cmocka_unit_test(test_mistakes_name_their_field),
      cmocka_unit_test(test_shapes_are_checked_once_sizes_are_known),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
