// Job file parsing and shape checks (see job_file.h).
#include "job_file.h"

#include <ctype.h>
#include <math.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace tools {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxBuffers = 32;
constexpr uint32_t kMaxSteps = 16;
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxNameChars = 64;
constexpr uint64_t kMaxBufferBytes = 1ull << 40;
constexpr size_t kMaxValues = 1u << 20;

// Escapes a key for a JSON pointer (RFC 6901). A key is the user's text:
// control and non-ASCII bytes become '?' and it is cut at 40 characters, so
// an error message stays one readable line.
std::string ptr_key(const std::string& k) {
  std::string o;
  for (char c : k.substr(0, 40)) {
    if (c == '~') o += "~0";
    else if (c == '/') o += "~1";
    else o += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return k.size() > 40 ? o + "..." : o;
}

// Shows at most 40 characters of a user's string in a message.
std::string quote(const std::string& s) {
  std::string o;
  for (char c : s.substr(0, 40)) o += (c >= 0x20 && c < 0x7f) ? c : '?';
  return "'" + o + (s.size() > 40 ? "...'" : "'");
}

class Parser {
 public:
  // Why the last job() refused its document.
  [[nodiscard]] const drv::Error& error() const { return err_; }

  bool fail(const std::string& ptr, const std::string& msg) {
    err_ = drv::Error(drv::Code::kInvalidArgument, (ptr.empty() ? "/" : ptr) + ": " + msg);
    return false;
  }

  bool only_keys(const json& o, const std::string& ptr, std::initializer_list<const char*> keys) {
    for (auto it = o.begin(); it != o.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known |= it.key() == k;
      if (!known) return fail(ptr + "/" + ptr_key(it.key()), "unknown field");
    }
    return true;
  }

  bool u32(const json& o, const char* key, const std::string& ptr, uint32_t lo, uint32_t hi, uint32_t* out,
           bool required) {
    auto it = o.find(key);
    const std::string p = ptr + "/" + key;
    if (it == o.end()) return required ? fail(p, "missing") : true;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
      return fail(p, "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    const uint64_t v = it->get<uint64_t>();
    if (v < lo || v > hi) return fail(p, std::to_string(v) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
    *out = uint32_t(v);
    return true;
  }

  bool str(const json& o, const char* key, const std::string& ptr, std::string* out, bool required) {
    auto it = o.find(key);
    const std::string p = ptr + "/" + key;
    if (it == o.end()) return required ? fail(p, "missing") : true;
    if (!it->is_string()) return fail(p, "must be a string");
    *out = it->get<std::string>();
    if (out->empty()) return fail(p, "must not be empty");
    return true;
  }

  // Files a job file names stay beside it: relative, no "..", no NUL.
  bool relative_path(const std::string& path, const std::string& p) {
    if (path.empty()) return true;
    if (path[0] == '/') return fail(p, quote(path) + " is absolute; paths are relative to the job file");
    if (path.find('\0') != std::string::npos) return fail(p, "holds a NUL byte");
    if (path.back() == '/') return fail(p, quote(path) + " names a directory, not a file");
    size_t start = 0;
    for (;;) {
      const size_t end = path.find('/', start);
      if (path.compare(start, end == std::string::npos ? std::string::npos : end - start, "..") == 0)
        return fail(p, quote(path) + " leaves the job file's directory (\"..\")");
      if (end == std::string::npos) return true;
      start = end + 1;
    }
  }

  bool buffer(const json& b, const std::string& p, JobBufferSpec* out) {
    if (!b.is_object()) return fail(p, "must be an object");
    if (!only_keys(b, p, {"name", "bytes", "file", "values", "output"})) return false;
    if (!str(b, "name", p, &out->name, true)) return false;
    if (out->name.size() > kMaxNameChars) return fail(p + "/name", "longer than 64 characters");
    for (char c : out->name) {
      if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
        return fail(p + "/name", quote(out->name) + " may only hold [A-Za-z0-9_.-]");
    }
    if (auto it = b.find("bytes"); it != b.end()) {
      if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
        return fail(p + "/bytes", "must be a positive integer");
      const uint64_t v = it->get<uint64_t>();
      if (v == 0 || v > kMaxBufferBytes) return fail(p + "/bytes", std::to_string(v) + " outside 1..2^40");
      out->bytes = v;
      out->bytes_given = true;
    }
    if (!str(b, "file", p, &out->file, false) || !relative_path(out->file, p + "/file")) return false;
    if (!str(b, "output", p, &out->output, false) || !relative_path(out->output, p + "/output")) return false;
    if (auto it = b.find("values"); it != b.end()) {
      if (!out->file.empty()) return fail(p + "/values", "a buffer takes \"file\" or \"values\", not both");
      if (!it->is_array() || it->empty()) return fail(p + "/values", "must be a non-empty array of numbers");
      if (it->size() > kMaxValues) return fail(p + "/values", "more than 2^20 values; use a file");
      out->has_values = true;
      for (size_t i = 0; i < it->size(); ++i) {
        const json& v = (*it)[i];
        const std::string vp = p + "/values/" + std::to_string(i);
        if (v.is_number()) {
          out->values.push_back(v.get<float>());
        } else if (v.is_string() && (v == "nan" || v == "inf" || v == "-inf")) {
          const std::string s = v.get<std::string>();
          out->values.push_back(s == "nan" ? NAN : s == "inf" ? INFINITY : -INFINITY);
        } else {
          return fail(vp, "must be a number or \"nan\", \"inf\", \"-inf\"");
        }
      }
      const uint64_t vb = uint64_t(out->values.size()) * 4;
      if (out->bytes_given && out->bytes != vb)
        return fail(p + "/bytes", std::to_string(out->bytes) + " but \"values\" holds " + std::to_string(vb) + " bytes");
      out->bytes = vb;
      out->bytes_given = true;
    }
    if (out->file.empty() && !out->has_values && !out->bytes_given)
      return fail(p, "needs \"file\", \"values\" or \"bytes\"");
    return true;
  }

  bool step(const json& s, const std::string& p, const std::set<std::string>& names, JobStepSpec* out) {
    if (!s.is_object()) return fail(p, "must be an object");
    if (!only_keys(s, p, {"kernel", "dtype", "m", "n", "k", "a", "a_scales", "b", "b_scales", "out"})) return false;
    std::string kname;
    if (!str(s, "kernel", p, &kname, true)) return false;
    if (!parse_kernel(kname, &out->kernel))
      return fail(p + "/kernel", "unknown kernel " + quote(kname) + " (gemm, add, mul, gelu, softmax, sum)");
    const bool gemm = out->kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
    if (s.contains("dtype")) {
      std::string d;
      if (!str(s, "dtype", p, &d, true)) return false;
      if (!parse_dtype(d, &out->dtype))
        return fail(p + "/dtype", "unknown dtype " + quote(d) + " (fp32, bf16, fp8-e4m3, fp8-e5m2, mxfp4)");
      if (!gemm && out->dtype != VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32)
        return fail(p + "/dtype", kname + " takes fp32 only");
    }
    if (!u32(s, "m", p, 1, kMaxDim, &out->m, true) || !u32(s, "n", p, 1, kMaxDim, &out->n, true)) return false;
    if (gemm) {
      if (!u32(s, "k", p, 1, kMaxDim, &out->k, true)) return false;
    } else if (s.contains("k")) {
      return fail(p + "/k", kname + " takes no k");
    }
    const drv::Result<StepBytes> sized = step_bytes(*out);
    if (!sized.ok()) {
      err_ = drv::Error(sized.error()).prefix(p + "/");
      return false;
    }
    const StepBytes& need = sized.value();
    struct Op {
      const char* key;
      std::string* dst;
      uint64_t need;
    };
    const Op ops[] = {{"a", &out->a, need.a},
                      {"a_scales", &out->a_scales, need.a_scales},
                      {"b", &out->b, need.b},
                      {"b_scales", &out->b_scales, need.b_scales},
                      {"out", &out->out, need.out}};
    for (const Op& op : ops) {
      const std::string op_ptr = p + "/" + op.key;
      if (op.need == 0) {
        if (s.contains(op.key)) return fail(op_ptr, kname + (gemm ? std::string(" ") + dtype_name(out->dtype) : "") +
                                                        " takes no " + op.key + " operand");
        continue;
      }
      if (!str(s, op.key, p, op.dst, true)) return false;
      if (!names.count(*op.dst)) return fail(op_ptr, "no buffer named " + quote(*op.dst));
    }
    for (const Op& op : ops) {
      if (op.dst == &out->out || op.dst->empty()) continue;
      if (*op.dst == out->out) return fail(p + "/out", "buffer " + quote(out->out) + " is also operand " + op.key);
    }
    return true;
  }

  bool job(const json& doc, JobSpec* out) {
    if (!doc.is_object()) return fail("", "a job file is a JSON object");
    if (!only_keys(doc, "", {"name", "chip", "priority", "timeout_ms", "max_cores", "engine", "buffers", "steps"}))
      return false;
    if (!str(doc, "name", "", &out->name, false)) return false;
    if (out->name.size() > kMaxNameChars) return fail("/name", "longer than 64 characters");
    if (doc.contains("chip")) {
      uint32_t c = 0;
      if (!u32(doc, "chip", "", 0, 1u << 20, &c, true)) return false;
      out->chip = c;
    }
    if (!u32(doc, "priority", "", 0, 7, &out->priority, false)) return false;
    if (!u32(doc, "timeout_ms", "", 1, 600000, &out->timeout_ms, false)) return false;
    if (!u32(doc, "max_cores", "", 0, 1024, &out->max_cores, false)) return false;
    std::string engine;
    if (!str(doc, "engine", "", &engine, false)) return false;
    if (!engine.empty() && !vtrn::proto::parse_engine(engine, &out->engine))
      return fail("/engine", "unknown engine " + quote(engine) + " (tensor, cores, default)");
    auto bufs = doc.find("buffers");
    if (bufs == doc.end()) return fail("/buffers", "missing");
    if (!bufs->is_array() || bufs->empty() || bufs->size() > kMaxBuffers)
      return fail("/buffers", "must be an array of 1.." + std::to_string(kMaxBuffers) + " buffers");
    std::set<std::string> names;
    for (size_t i = 0; i < bufs->size(); ++i) {
      JobBufferSpec b;
      const std::string p = "/buffers/" + std::to_string(i);
      if (!buffer((*bufs)[i], p, &b)) return false;
      if (!names.insert(b.name).second) return fail(p + "/name", quote(b.name) + " is used twice");
      out->buffers.push_back(std::move(b));
    }
    auto steps = doc.find("steps");
    if (steps == doc.end()) return fail("/steps", "missing");
    if (!steps->is_array() || steps->empty() || steps->size() > kMaxSteps)
      return fail("/steps", "must be an array of 1.." + std::to_string(kMaxSteps) + " steps");
    for (size_t i = 0; i < steps->size(); ++i) {
      JobStepSpec s;
      if (!step((*steps)[i], "/steps/" + std::to_string(i), names, &s)) return false;
      out->steps.push_back(std::move(s));
    }
    return true;
  }

 private:
  drv::Error err_;
};

}  // namespace

drv::Result<StepBytes> step_bytes(const JobStepSpec& s) {
  StepBytes out;
  const uint64_t m = s.m, n = s.n, k = s.k;
  if (s.kernel != VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM) {
    out.a = m * n * 4;
    out.out = s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM ? m * 4 : m * n * 4;
    if (s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD || s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL)
      out.b = m * n * 4;
    return out;
  }
  out.out = m * n * 4;
  switch (s.dtype) {
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32: out.a = m * k * 4; out.b = n * k * 4; return out;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_BF16: out.a = m * k * 2; out.b = n * k * 2; return out;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E4M3:
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_FP8_E5M2: out.a = m * k; out.b = n * k; return out;
    case VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_MXFP4:
      if (k % 32 != 0)
        return drv::Error(drv::Code::kInvalidArgument, "k: " + std::to_string(k) + " is not a multiple of 32 for mxfp4");
      out.a = m * k / 2;
      out.a_scales = m * k / 32;
      out.b = n * k / 2;
      out.b_scales = n * k / 32;
      return out;
    default:
      return drv::Error(drv::Code::kInvalidArgument, "dtype: unknown dtype " + std::to_string(int(s.dtype)));
  }
}

drv::Result<JobSpec> parse_job_file(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return drv::Error(drv::Code::kInvalidArgument, "/: not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    // A number outside the double range ("1e400") is out_of_range, not a
    // parse_error; nothing may escape this function.
    std::string what = e.what();
    for (char& c : what) c = (c >= 0x20 && c < 0x7f) ? c : '?';
    return drv::Error(drv::Code::kInvalidArgument, "/: not valid JSON: " + what);
  }
  try {
    Parser p;
    JobSpec spec;
    if (!p.job(doc, &spec)) return p.error();
    return spec;
  } catch (const std::exception& e) {
    // nlohmann's type errors on a value of an unexpected kind.
    return drv::Error(drv::Code::kInvalidArgument, std::string("/: ") + e.what());
  }
}

drv::Error check_job_shapes(const JobSpec& spec) {
  std::map<std::string, uint64_t> size;
  for (const JobBufferSpec& b : spec.buffers) size[b.name] = b.bytes;
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    const JobStepSpec& s = spec.steps[i];
    const std::string p = "/steps/" + std::to_string(i);
    const drv::Result<StepBytes> sized = step_bytes(s);
    if (!sized.ok()) return drv::Error(sized.error()).prefix(p + "/");
    const StepBytes& need = sized.value();
    std::string shape = std::string(kernel_name(s.kernel)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n);
    if (s.kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM)
      shape += "x" + std::to_string(s.k) + " " + dtype_name(s.dtype);
    const std::pair<const char*, std::pair<const std::string*, uint64_t>> ops[] = {
        {"a", {&s.a, need.a}},
        {"a_scales", {&s.a_scales, need.a_scales}},
        {"b", {&s.b, need.b}},
        {"b_scales", {&s.b_scales, need.b_scales}},
        {"out", {&s.out, need.out}}};
    for (const auto& [key, v] : ops) {
      if (v.second == 0) continue;
      auto it = size.find(*v.first);
      if (it == size.end())
        return drv::Error(drv::Code::kInvalidArgument, p + "/" + key + ": no buffer named " + quote(*v.first));
      if (it->second != v.second)
        return drv::Error(drv::Code::kInvalidArgument, p + "/" + key + ": buffer " + quote(*v.first) + " holds " +
                                                           std::to_string(it->second) + " bytes, " + shape +
                                                           " needs " + std::to_string(v.second));
    }
  }
  return {};
}

}  // namespace tools
