// Name tables of the vtrn.api enums from their protobuf-c descriptors
// (proto_names.h). Kernel names are lowered once into a static table at
// first use; everything else points into the descriptors' own strings.
#include "vtrn/proto_names.h"

#include <array>
#include <string>

#include "vtrn/numerics.h"

namespace vtrn::proto {
namespace {

constexpr std::string_view kKernelPrefix = "JOB_KERNEL_";

// The API dtype is vtrn::num::DType on the wire (the firmware casts the
// ctrl copy to it: fw/job_model.h asserts that side).
static_assert(uint32_t(num::DType::kF32) == VTRN__API__JOB_DTYPE__JOB_DTYPE_F32);
static_assert(uint32_t(num::DType::kBF16) == VTRN__API__JOB_DTYPE__JOB_DTYPE_BF16);
static_assert(uint32_t(num::DType::kFP8E4M3) == VTRN__API__JOB_DTYPE__JOB_DTYPE_FP8_E4M3);
static_assert(uint32_t(num::DType::kFP8E5M2) == VTRN__API__JOB_DTYPE__JOB_DTYPE_FP8_E5M2);
static_assert(uint32_t(num::DType::kMXFP4) == VTRN__API__JOB_DTYPE__JOB_DTYPE_MXFP4);
static_assert(num::kDTypeCount == VTRN__API__JOB_DTYPE__JOB_DTYPE_MXFP4 + 1);

constexpr size_t kMaxKernels = 16;

struct Kernels {
  std::array<std::string, kMaxKernels> name;  // by value; empty: none
  Kernels() {
    const ProtobufCEnumDescriptor& d = vtrn__api__job_kernel__descriptor;
    for (unsigned i = 0; i < d.n_values; ++i) {
      const ProtobufCEnumValue& v = d.values[i];
      if (v.value <= VTRN__API__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED || size_t(v.value) >= kMaxKernels) continue;
      std::string s = enum_suffix(d, v.value, kKernelPrefix, "");
      for (char& c : s) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      name[size_t(v.value)] = std::move(s);
    }
  }
};

const Kernels& kernels() {
  static const Kernels k;
  return k;
}

}  // namespace

const char* enum_suffix(const ProtobufCEnumDescriptor& d, int value, std::string_view prefix,
                        const char* fallback) {
  const ProtobufCEnumValue* v = protobuf_c_enum_descriptor_get_value(&d, value);
  if (!v) return fallback;
  const std::string_view name = v->name;
  return name.starts_with(prefix) ? v->name + prefix.size() : v->name;
}

const char* chip_state_name(Vtrn__Api__ChipState s) {
  return enum_suffix(vtrn__api__chip_state__descriptor, s, "CHIP_STATE_", "UNKNOWN");
}

const char* job_state_name(Vtrn__Api__JobState s) {
  return enum_suffix(vtrn__api__job_state__descriptor, s, "JOB_STATE_", "UNKNOWN");
}

const char* kernel_name(Vtrn__Api__JobKernel k) {
  if (k < 0 || size_t(k) >= kMaxKernels || kernels().name[size_t(k)].empty()) return "unknown";
  return kernels().name[size_t(k)].c_str();
}

const char* dtype_name(Vtrn__Api__JobDType d) {
  if (d < 0 || !num::dtype_valid(uint32_t(d))) return "unknown";
  return num::dtype_name(num::DType(d));
}

bool parse_kernel(std::string_view s, Vtrn__Api__JobKernel* out) {
  for (size_t i = 0; i < kMaxKernels; ++i) {
    if (!kernels().name[i].empty() && s == kernels().name[i]) {
      *out = Vtrn__Api__JobKernel(i);
      return true;
    }
  }
  return false;
}

// Lower-case suffixes of JOB_ENGINE_*, lowered once from the descriptor.
const char* engine_name(Vtrn__Api__JobEngine e) {
  static const std::array<std::string, 3> names = [] {
    std::array<std::string, 3> n;
    for (size_t i = 0; i < n.size(); ++i) {
      n[i] = enum_suffix(vtrn__api__job_engine__descriptor, int(i), "JOB_ENGINE_", "");
      for (char& c : n[i]) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    return n;
  }();
  if (e < 0 || size_t(e) >= names.size() || names[size_t(e)].empty()) return "unknown";
  return names[size_t(e)].c_str();
}

bool parse_engine(std::string_view s, Vtrn__Api__JobEngine* out) {
  for (int e = 0; e < 3; ++e) {
    if (s == engine_name(Vtrn__Api__JobEngine(e))) {
      *out = Vtrn__Api__JobEngine(e);
      return true;
    }
  }
  return false;
}

bool parse_dtype(std::string_view s, Vtrn__Api__JobDType* out) {
  num::DType d{};
  if (!num::parse_dtype(std::string(s).c_str(), &d)) return false;
  *out = Vtrn__Api__JobDType(uint32_t(d));
  return true;
}

}  // namespace vtrn::proto
