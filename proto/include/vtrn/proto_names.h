// The one name table of each vtrn.api enum the host prints: taken from
// protobuf-c's enum descriptors, so a value added to a .proto file is named
// everywhere without another hand-written array. Host only (std::string_view;
// the firmware names its few enums itself).
//
// What the CLI prints is the proto name less the enum's prefix
// (JOB_STATE_QUEUED -> "QUEUED", CHIP_STATE_READY -> "READY"); kernels are
// that suffix in lower case ("gemm", what job files and `vtrn job` take), and
// dtypes are vtrn::num's names ("fp32", "fp8-e4m3"), whose numbers the API
// enum shares (static_asserts in proto_names.cpp). A value the enum does not
// have is "UNKNOWN" (states) or "unknown" (kernel, dtype), as before.
#pragma once

#include <protobuf-c/protobuf-c.h>

#include <string_view>

#include "vtrn_api.pb-c.h"
#include "vtrn_api_jobs.pb-c.h"

namespace vtrn::proto {

// The proto name of `value` less `prefix` (the whole name when it does not
// start with it); `fallback` when the enum has no such value.
const char* enum_suffix(const ProtobufCEnumDescriptor& d, int value, std::string_view prefix,
                        const char* fallback);

const char* chip_state_name(Vtrn__Api__ChipState s);  // "STARTING" ... "HALTED"
const char* job_state_name(Vtrn__Api__JobState s);    // "QUEUED" ... "TIMED_OUT"
const char* kernel_name(Vtrn__Api__JobKernel k);      // "gemm", "add", ..., "sum"
const char* dtype_name(Vtrn__Api__JobDType d);        // "fp32", "bf16", ...
const char* engine_name(Vtrn__Api__JobEngine e);      // "default", "tensor", "cores"

// Exact names as printed; "f32" is also fp32. False and *out untouched for
// anything else (UNSPECIFIED is not a kernel).
bool parse_kernel(std::string_view s, Vtrn__Api__JobKernel* out);
bool parse_dtype(std::string_view s, Vtrn__Api__JobDType* out);
bool parse_engine(std::string_view s, Vtrn__Api__JobEngine* out);

}  // namespace vtrn::proto
