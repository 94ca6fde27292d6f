// Fuzzes the `vtrn submit` job-file parser (host-tools/vtrn/job_file.cpp):
// parse_job_file on arbitrary text, then check_job_shapes on what it accepted.
//
// The input is the job file's text itself, byte for byte (seeds are JSON job
// files, make_seeds.py). The parser reads no files, so buffers that take
// their bytes from a "file" get a size here before the shape check: the size
// the first step that uses them needs, which makes both outcomes of
// check_job_shapes reachable. It is not a test of the error wording; it checks
// only the form of the messages and the facts an accepted spec must satisfy.
//
// Invariants. On failure: the error is kInvalidArgument and its detail is
// one non-empty line starting with "/" (a JSON pointer) followed by ": ". On
// success: every limit of job_file.h holds
// (counts, ranges, names, kernel and dtype names, operands present exactly
// when the kernel takes them and naming declared buffers, out distinct from
// the inputs), and the spec written back out as canonical JSON parses to the
// same spec. check_job_shapes agrees with operand sizes computed here from
// the documented formulas, and when it refuses, it names the first bad
// operand as "/steps/N/<operand>: ". parse_job_file keeps no state between
// calls, so parsing the same text again gives the same result.
#include <math.h>
#include <string.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "job_file.h"

using namespace tools;

namespace {

struct Need {
  uint64_t a = 0, a_scales = 0, b = 0, b_scales = 0, out = 0;
};

// Operand sizes from the format description, independent of step_bytes.
Need need_of(const JobStepSpec& s) {
  const uint64_t m = s.m, n = s.n, k = s.k;
  Need r;
  switch (s.kernel) {
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM:
      r.out = m * n * 4;
      switch (s.dtype) {
        case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32: r.a = m * k * 4; r.b = n * k * 4; break;
        case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_BF16: r.a = m * k * 2; r.b = n * k * 2; break;
        case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E4M3:
        case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E5M2: r.a = m * k; r.b = n * k; break;
        case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4:
          r.a = m * k / 2; r.a_scales = m * k / 32; r.b = n * k / 2; r.b_scales = n * k / 32;
          break;
        default: FUZZ_CHECK(false, "accepted dtype %d", int(s.dtype));
      }
      break;
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD:
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL: r.a = r.b = r.out = m * n * 4; break;
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GELU:
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SOFTMAX: r.a = r.out = m * n * 4; break;
    case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM: r.a = m * n * 4; r.out = m * 4; break;
    default: FUZZ_CHECK(false, "accepted kernel %d", int(s.kernel));
  }
  return r;
}

struct Operand {
  const char* key;
  const std::string* name;
  uint64_t need;
};

void operands(const JobStepSpec& s, const Need& n, Operand out[5]) {
  out[0] = {"a", &s.a, n.a};
  out[1] = {"a_scales", &s.a_scales, n.a_scales};
  out[2] = {"b", &s.b, n.b};
  out[3] = {"b_scales", &s.b_scales, n.b_scales};
  out[4] = {"out", &s.out, n.out};
}

void check_error_line(const drv::Error& error, const char* what) {
  FUZZ_CHECK(error.code() == drv::Code::kInvalidArgument, "%s failed with code %u", what, unsigned(error.code()));
  const std::string& err = error.detail();
  FUZZ_CHECK(!err.empty(), "%s failed with an empty message", what);
  FUZZ_CHECK(err.find_first_of("\r\n") == std::string::npos, "%s message spans lines: %s", what,
             err.c_str());
  FUZZ_CHECK(err[0] == '/' && err.find(": ") != std::string::npos,
             "%s message does not start with a JSON pointer: %s", what, err.c_str());
}

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

void check_accepted(const JobSpec& j) {
  FUZZ_CHECK(j.name.size() <= 64, "job name of %zu chars", j.name.size());
  FUZZ_CHECK(j.chip >= -1 && j.chip <= (1 << 20), "chip %lld", (long long)j.chip);
  FUZZ_CHECK(j.priority <= 7, "priority %u", j.priority);
  FUZZ_CHECK(j.timeout_ms <= 600000, "timeout_ms %u", j.timeout_ms);
  FUZZ_CHECK(j.max_cores <= 1024, "max_cores %u", j.max_cores);
  FUZZ_CHECK(!j.buffers.empty() && j.buffers.size() <= 32, "%zu buffers", j.buffers.size());
  FUZZ_CHECK(!j.steps.empty() && j.steps.size() <= 16, "%zu steps", j.steps.size());

  std::set<std::string> names;
  for (const JobBufferSpec& b : j.buffers) {
    FUZZ_CHECK(!b.name.empty() && b.name.size() <= 64, "buffer name of %zu chars", b.name.size());
    for (char c : b.name) FUZZ_CHECK(valid_name_char(c), "buffer name holds byte 0x%02x", c & 0xff);
    FUZZ_CHECK(names.insert(b.name).second, "buffer '%s' declared twice", b.name.c_str());
    FUZZ_CHECK(!b.file.empty() || b.has_values || b.bytes_given, "buffer '%s' has no source",
               b.name.c_str());
    FUZZ_CHECK(!(b.has_values && !b.file.empty()), "buffer '%s' has file and values",
               b.name.c_str());
    FUZZ_CHECK(b.has_values == !b.values.empty(), "buffer '%s': has_values %d with %zu values",
               b.name.c_str(), b.has_values, b.values.size());
    if (b.has_values)
      FUZZ_CHECK(b.bytes_given && b.bytes == b.values.size() * 4, "buffer '%s': %llu bytes, %zu values",
                 b.name.c_str(), (unsigned long long)b.bytes, b.values.size());
    if (b.bytes_given)
      FUZZ_CHECK(b.bytes >= 1 && b.bytes <= (1ull << 40), "buffer '%s': %llu bytes", b.name.c_str(),
                 (unsigned long long)b.bytes);
    else
      FUZZ_CHECK(b.bytes == 0, "buffer '%s': size %llu not given", b.name.c_str(),
                 (unsigned long long)b.bytes);
  }

  for (size_t i = 0; i < j.steps.size(); ++i) {
    const JobStepSpec& s = j.steps[i];
    const bool gemm = s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
    FUZZ_CHECK(strcmp(kernel_name(s.kernel), "unknown") != 0, "step %zu: kernel %d", i, int(s.kernel));
    FUZZ_CHECK(strcmp(dtype_name(s.dtype), "unknown") != 0, "step %zu: dtype %d", i, int(s.dtype));
    FUZZ_CHECK(gemm || s.dtype == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32, "step %zu: %s with dtype %s", i,
               kernel_name(s.kernel), dtype_name(s.dtype));
    FUZZ_CHECK(s.m >= 1 && s.m <= 65536 && s.n >= 1 && s.n <= 65536, "step %zu: m %u n %u", i, s.m, s.n);
    if (gemm)
      FUZZ_CHECK(s.k >= 1 && s.k <= 65536, "step %zu: k %u", i, s.k);
    else
      FUZZ_CHECK(s.k == 0, "step %zu: %s with k %u", i, kernel_name(s.kernel), s.k);
    if (s.dtype == VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4)
      FUZZ_CHECK(s.k % 32 == 0, "step %zu: mxfp4 with k %u", i, s.k);
    Operand ops[5];
    operands(s, need_of(s), ops);
    for (const Operand& op : ops) {
      if (op.need == 0) {
        FUZZ_CHECK(op.name->empty(), "step %zu: %s names '%s' but the kernel takes none", i, op.key,
                   op.name->c_str());
        continue;
      }
      FUZZ_CHECK(names.count(*op.name), "step %zu: %s names undeclared buffer '%s'", i, op.key,
                 op.name->c_str());
      if (op.name != &s.out)
        FUZZ_CHECK(*op.name != s.out, "step %zu: out '%s' is also operand %s", i, s.out.c_str(), op.key);
    }
  }
}

// The accepted spec as canonical JSON: every field it holds, nothing else.
std::string write_back(const JobSpec& j) {
  nlohmann::json doc = nlohmann::json::object();
  if (!j.name.empty()) doc["name"] = j.name;
  if (j.chip >= 0) doc["chip"] = j.chip;
  doc["priority"] = j.priority;
  if (j.timeout_ms) doc["timeout_ms"] = j.timeout_ms;
  doc["max_cores"] = j.max_cores;
  for (const JobBufferSpec& b : j.buffers) {
    nlohmann::json o = {{"name", b.name}};
    if (b.bytes_given && !b.has_values) o["bytes"] = b.bytes;
    if (!b.file.empty()) o["file"] = b.file;
    if (!b.output.empty()) o["output"] = b.output;
    if (b.has_values) {
      nlohmann::json v = nlohmann::json::array();
      for (float f : b.values) {
        if (isnan(f)) v.push_back("nan");
        else if (isinf(f)) v.push_back(f > 0 ? "inf" : "-inf");
        else v.push_back(double(f));
      }
      o["values"] = v;
    }
    doc["buffers"].push_back(o);
  }
  for (const JobStepSpec& s : j.steps) {
    nlohmann::json o = {{"kernel", kernel_name(s.kernel)}, {"m", s.m}, {"n", s.n}};
    if (s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM) {
      o["dtype"] = dtype_name(s.dtype);
      o["k"] = s.k;
    }
    const std::pair<const char*, const std::string*> ops[] = {
        {"a", &s.a}, {"a_scales", &s.a_scales}, {"b", &s.b}, {"b_scales", &s.b_scales}, {"out", &s.out}};
    for (const auto& [key, name] : ops)
      if (!name->empty()) o[key] = *name;
    doc["steps"].push_back(o);
  }
  // The parser rejects invalid UTF-8, so what it accepted dumps without error.
  return doc.dump();
}

bool same_float(float x, float y) { return memcmp(&x, &y, sizeof x) == 0; }

void check_same(const JobSpec& x, const JobSpec& y, const char* what) {
  FUZZ_CHECK(x.name == y.name && x.chip == y.chip && x.priority == y.priority &&
                 x.timeout_ms == y.timeout_ms && x.max_cores == y.max_cores,
             "%s: job fields differ", what);
  FUZZ_CHECK(x.buffers.size() == y.buffers.size() && x.steps.size() == y.steps.size(),
             "%s: %zu/%zu buffers, %zu/%zu steps", what, x.buffers.size(), y.buffers.size(),
             x.steps.size(), y.steps.size());
  for (size_t i = 0; i < x.buffers.size(); ++i) {
    const JobBufferSpec& a = x.buffers[i];
    const JobBufferSpec& b = y.buffers[i];
    FUZZ_CHECK(a.name == b.name && a.bytes == b.bytes && a.bytes_given == b.bytes_given &&
                   a.file == b.file && a.has_values == b.has_values && a.output == b.output &&
                   a.values.size() == b.values.size(),
               "%s: buffer %zu differs", what, i);
    for (size_t v = 0; v < a.values.size(); ++v)
      FUZZ_CHECK(same_float(a.values[v], b.values[v]), "%s: buffer %zu value %zu: %a vs %a", what, i,
                 v, double(a.values[v]), double(b.values[v]));
  }
  for (size_t i = 0; i < x.steps.size(); ++i) {
    const JobStepSpec& a = x.steps[i];
    const JobStepSpec& b = y.steps[i];
    FUZZ_CHECK(a.kernel == b.kernel && a.dtype == b.dtype && a.m == b.m && a.n == b.n && a.k == b.k &&
                   a.a == b.a && a.a_scales == b.a_scales && a.b == b.b && a.b_scales == b.b_scales &&
                   a.out == b.out,
               "%s: step %zu differs", what, i);
  }
}

// Sizes the buffers whose bytes would come from a file, then compares
// check_job_shapes with the sizes computed here.
void check_shapes(JobSpec j) {
  std::map<std::string, uint64_t> size;
  for (const JobBufferSpec& b : j.buffers) size[b.name] = b.bytes;
  for (const JobStepSpec& s : j.steps) {
    Operand ops[5];
    operands(s, need_of(s), ops);
    for (const Operand& op : ops)
      if (op.need && size[*op.name] == 0) size[*op.name] = op.need;
  }
  for (JobBufferSpec& b : j.buffers) b.bytes = size[b.name] ? size[b.name] : 1;

  std::string expect;  // the pointer of the first mismatching operand
  for (size_t i = 0; i < j.steps.size() && expect.empty(); ++i) {
    Operand ops[5];
    operands(j.steps[i], need_of(j.steps[i]), ops);
    for (const Operand& op : ops) {
      if (op.need && size[*op.name] != op.need) {
        expect = "/steps/" + std::to_string(i) + "/" + op.key + ": ";
        break;
      }
    }
  }
  const drv::Error err = check_job_shapes(j);
  if (expect.empty()) {
    FUZZ_CHECK(err.ok(), "check_job_shapes refused matching sizes: %s", err.detail().c_str());
  } else {
    FUZZ_CHECK(!err.ok(), "check_job_shapes accepted a mismatch at %s", expect.c_str());
    check_error_line(err, "check_job_shapes");
    FUZZ_CHECK(err.detail().compare(0, expect.size(), expect) == 0, "expected '%s...', got '%s'", expect.c_str(),
               err.detail().c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const drv::Result<JobSpec> parsed = parse_job_file(text);
  const drv::Result<JobSpec> again = parse_job_file(text);
  FUZZ_CHECK(again.ok() == parsed.ok(), "second parse disagrees");

  if (!parsed.ok()) {
    check_error_line(parsed.error(), "parse_job_file");
    FUZZ_CHECK(again.error().code() == parsed.error().code() && again.error().detail() == parsed.error().detail(),
               "second parse: '%s' vs '%s'", parsed.error().detail().c_str(), again.error().detail().c_str());
    return 0;
  }
  const JobSpec& spec = parsed.value();
  check_same(spec, again.value(), "reparse");
  check_accepted(spec);

  const std::string canon = write_back(spec);
  const drv::Result<JobSpec> round = parse_job_file(canon);
  FUZZ_CHECK(round.ok(), "canonical form refused: %s\n%s", round.error().detail().c_str(), canon.c_str());
  check_same(spec, round.value(), "canonical round trip");

  check_shapes(spec);
  return 0;
}
