// Name tables of the enums the host prints (vtrn.api's and the shared
// vtrn.types ones) from their protobuf-c descriptors
// (proto_names.h). Kernel names are lowered once into a static table at
// first use; everything else points into the descriptors' own strings.
#include "vtrn/proto_names.h"

#include <array>
#include <string>

#include "vtrn/dtype_wire.h"
#include "vtrn/numerics.h"

namespace vtrn::proto {
namespace {

constexpr std::string_view kKernelPrefix = "JOB_KERNEL_";

constexpr size_t kMaxKernels = 16;

struct Kernels {
  std::array<std::string, kMaxKernels> name;  // by value; empty: none
  Kernels() {
    const ProtobufCEnumDescriptor& d = vtrn__types__job_kernel__descriptor;
    for (unsigned i = 0; i < d.n_values; ++i) {
      const ProtobufCEnumValue& v = d.values[i];
      if (v.value <= VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED || size_t(v.value) >= kMaxKernels) continue;
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

const char* job_state_name(Vtrn__Types__JobState s) {
  return enum_suffix(vtrn__types__job_state__descriptor, s, "JOB_STATE_", "UNKNOWN");
}

const char* kernel_name(Vtrn__Types__JobKernel k) {
  if (k < 0 || size_t(k) >= kMaxKernels || kernels().name[size_t(k)].empty()) return "unknown";
  return kernels().name[size_t(k)].c_str();
}

const char* dtype_name(Vtrn__Types__JobDType d) {
  if (d < 0 || !num::dtype_valid(uint32_t(d))) return "unknown";
  return num::dtype_name(num::DType(d));
}

bool parse_kernel(std::string_view s, Vtrn__Types__JobKernel* out) {
  for (size_t i = 0; i < kMaxKernels; ++i) {
    if (!kernels().name[i].empty() && s == kernels().name[i]) {
      *out = Vtrn__Types__JobKernel(i);
      return true;
    }
  }
  return false;
}

// Lower-case suffixes of JOB_ENGINE_*, lowered once from the descriptor.
const char* engine_name(Vtrn__Types__JobEngine e) {
  static const std::array<std::string, 3> names = [] {
    std::array<std::string, 3> n;
    for (size_t i = 0; i < n.size(); ++i) {
      n[i] = enum_suffix(vtrn__types__job_engine__descriptor, int(i), "JOB_ENGINE_", "");
      for (char& c : n[i]) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    return n;
  }();
  if (e < 0 || size_t(e) >= names.size() || names[size_t(e)].empty()) return "unknown";
  return names[size_t(e)].c_str();
}

bool parse_engine(std::string_view s, Vtrn__Types__JobEngine* out) {
  for (int e = 0; e < 3; ++e) {
    if (s == engine_name(Vtrn__Types__JobEngine(e))) {
      *out = Vtrn__Types__JobEngine(e);
      return true;
    }
  }
  return false;
}

bool parse_dtype(std::string_view s, Vtrn__Types__JobDType* out) {
  num::DType d{};
  if (!num::parse_dtype(std::string(s).c_str(), &d)) return false;
  *out = Vtrn__Types__JobDType(uint32_t(d));
  return true;
}

}  // namespace vtrn::proto
