// The job file of `vtrn submit FILE`: a human-written JSON description of
// one job (its HBM buffers, where their bytes come from and go to on this
// host, and its kernel steps), parsed into a JobSpec.
//
// Two stages, both without exceptions escaping and both naming the bad field
// with a JSON pointer ("/steps/1/dtype: unknown dtype 'fp16'"):
//  - parse_job_file: syntax, types, ranges, kernel and dtype names, unknown
//    fields (a typo is an error, not a silently ignored key), references from
//    steps to buffers. Reads no file, so it can be fuzzed on text alone.
//  - check_job_shapes: once every buffer's size is known (files read), each
//    step's operands must be exactly the bytes its shape needs.
// vtrnd validates the same rules again (it trusts no client); these exist so
// a person gets the message in terms of their own file.
//
// Format (paths are relative to the job file's directory):
//   { "name": "demo", "chip": 0, "priority": 0, "timeout_ms": 10000, "max_cores": 0, "engine": "tensor",
//     "buffers": [ { "name": "a", "file": "a.bin" },             // input bytes from a file
//                  { "name": "x", "values": [1.0, 2.5, -3] },    // input f32 values
//                  { "name": "c", "bytes": 4096, "output": "c.bin" } ],  // zero-filled; read back
//     "steps": [ { "kernel": "gemm", "dtype": "bf16", "m": 16, "n": 16, "k": 32,
//                  "a": "a", "b": "b", "out": "c" } ] }
// kernel: gemm add mul gelu softmax sum; dtype (gemm only, default fp32):
// fp32 bf16 fp8-e4m3 fp8-e5m2 mxfp4 (which adds a_scales and b_scales).
// engine (where GEMM steps run): tensor, cores or default (the chip's
// choice: its tensor engines when it has them); max_cores then limits the
// NeuronCores, and so the tensor engines (one each), the job may use.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/proto_names.h"
#include "vtrn_api.pb-c.h"

namespace tools {

struct JobBufferSpec {
  std::string name;
  uint64_t bytes = 0;        // 0 until known (from "bytes", "values" or the file)
  bool bytes_given = false;
  std::string file;          // input file, as written in the job file
  std::vector<float> values; // inline f32 input
  bool has_values = false;
  std::string output;        // where to write it after the job, as written
  std::vector<uint8_t> data; // the input bytes once loaded
};

struct JobStepSpec {
  Vtrn__Types__JobKernel kernel = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_UNSPECIFIED;
  Vtrn__Types__JobDType dtype = VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32;
  uint32_t m = 0, n = 0, k = 0;
  std::string a, a_scales, b, b_scales, out;
};

struct JobSpec {
  std::string name;
  int64_t chip = -1;  // -1: not in the file
  uint32_t priority = 0;
  uint32_t timeout_ms = 0;
  uint32_t max_cores = 0;
  Vtrn__Types__JobEngine engine = VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_DEFAULT;
  std::vector<JobBufferSpec> buffers;
  std::vector<JobStepSpec> steps;
};

// The job the text describes, or kInvalidArgument with one line of detail
// starting with a JSON pointer when it is not a valid job description.
// Never throws.
drv::Result<JobSpec> parse_job_file(const std::string& text);

// Bytes each operand of a step needs (0: the kernel takes no such operand);
// kInvalidArgument for an invalid shape, its detail starting with the step's
// field at fault ("k: 31 is not a multiple of 32 for mxfp4").
struct StepBytes {
  uint64_t a = 0, a_scales = 0, b = 0, b_scales = 0, out = 0;
};
drv::Result<StepBytes> step_bytes(const JobStepSpec& s);

// Every buffer's size must be known. kInvalidArgument, the detail naming
// the step operand, when a buffer does not hold what its step needs.
drv::Error check_job_shapes(const JobSpec& spec);

// Kernel and dtype names, one table each (vtrn/proto_names.h).
using vtrn::proto::dtype_name;
using vtrn::proto::kernel_name;
using vtrn::proto::parse_dtype;
using vtrn::proto::parse_kernel;

}  // namespace tools
