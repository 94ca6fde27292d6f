// fw::jobs job model: copy and validation of a submitted job. See
// fw/job_model.h.
#include "fw/job_model.h"

#include <stdarg.h>
#include <stdio.h>

#include "fw/wire.h"
#include "vtrn/kernels.h"
#include "vtrn/numerics.h"

namespace fw::jobs {
namespace {

using vtrn::Code;
using vtrn::Error;

__attribute__((format(printf, 3, 4))) bool fail(Error* err, Code code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  *err = Error::vformat(code, fmt, ap);
  va_end(ap);
  return false;
}

const char* kernel_name(uint32_t k) {
  switch (k) {
    case kKernelGemm: return "gemm";
    case kKernelAdd: return "add";
    case kKernelMul: return "mul";
    case kKernelGelu: return "gelu";
    case kKernelSoftmax: return "softmax";
    case kKernelSum: return "sum";
    default: return nullptr;
  }
}

uint64_t f32_bytes(uint64_t elems) { return elems * 4; }

bool overlaps(const Buffer& x, const Buffer& y) {
  return x.bytes && y.bytes && x.addr < y.addr + y.bytes && y.addr < x.addr + x.bytes;
}

bool check_shape(const Step& s, uint32_t i, Error* err) {
  const char* name = kernel_name(s.kernel);
  if (!name) return fail(err, Code::kInvalidArgument, "steps[%u].kernel: %u is not a known kernel", i, s.kernel);
  if (!vtrn::num::dtype_valid(s.dtype)) {
    return fail(err, Code::kInvalidArgument, "steps[%u].dtype: %u is not a known dtype", i, s.dtype);
  }
  if (s.kernel == kKernelGemm) {
    const Error why = vtrn::num::check_gemm(vtrn::num::DType(s.dtype), s.m, s.n, s.k);
    if (!why.ok()) return fail(err, Code::kInvalidArgument, "steps[%u].%s", i, why.detail());
    return true;
  }
  if (s.dtype != uint32_t(vtrn::num::DType::kF32)) {
    return fail(err, Code::kInvalidArgument, "steps[%u].dtype: %s takes fp32 only, not %s", i, name,
                vtrn::num::dtype_name(vtrn::num::DType(s.dtype)));
  }
  if (s.m == 0) return fail(err, Code::kInvalidArgument, "steps[%u].m: must be at least 1", i);
  if (s.n == 0) return fail(err, Code::kInvalidArgument, "steps[%u].n: must be at least 1", i);
  if (f32_bytes(uint64_t(s.m) * s.n) > vtrn::num::kMaxOperandBytes) {
    return fail(err, Code::kInvalidArgument, "steps[%u].m: %u x n %u floats exceed %llu bytes", i, s.m, s.n,
                (unsigned long long)vtrn::num::kMaxOperandBytes);
  }
  return true;
}

}  // namespace

uint32_t step_buffers(const Step& s, Buffer* out) {
  using vtrn::num::DType;
  const uint64_t mn = f32_bytes(uint64_t(s.m) * s.n);
  uint32_t n = 0;
  switch (s.kernel) {
    case kKernelGemm: {
      const DType t = DType(s.dtype);
      out[n++] = Buffer{"a_addr", s.a, vtrn::num::operand_bytes(t, s.m, s.k)};
      out[n++] = Buffer{"b_addr", s.b, vtrn::num::operand_bytes(t, s.n, s.k)};
      if (t == DType::kMXFP4) {
        out[n++] = Buffer{"a_scales_addr", s.a_scales, vtrn::num::scale_bytes(t, s.m, s.k)};
        out[n++] = Buffer{"b_scales_addr", s.b_scales, vtrn::num::scale_bytes(t, s.n, s.k)};
      }
      out[n++] = Buffer{"out_addr", s.out, mn};
      break;
    }
    case kKernelAdd:
    case kKernelMul:
      out[n++] = Buffer{"a_addr", s.a, mn};
      out[n++] = Buffer{"b_addr", s.b, mn};
      out[n++] = Buffer{"out_addr", s.out, mn};
      break;
    case kKernelGelu:
    case kKernelSoftmax:
      out[n++] = Buffer{"a_addr", s.a, mn};
      out[n++] = Buffer{"out_addr", s.out, mn};
      break;
    case kKernelSum:
      out[n++] = Buffer{"a_addr", s.a, mn};
      out[n++] = Buffer{"out_addr", s.out, f32_bytes(s.m)};
      break;
    default:
      break;
  }
  return n;
}

uint64_t step_flops(const Step& s) {
  const uint64_t mn = uint64_t(s.m) * s.n;
  switch (s.kernel) {
    case kKernelGemm: return vtrn::kern::gemm_flops(s.m, s.n, s.k);
    case kKernelAdd:
    case kKernelMul:
    case kKernelSum: return mn;
    case kKernelGelu: return 8 * mn;
    case kKernelSoftmax: return 4 * mn;
    default: return 0;
  }
}

uint32_t step_rows(const Step& s) { return s.m; }

uint64_t step_row_cost(const Step& s) {
  const uint64_t rows = s.m ? s.m : 1;
  const uint64_t c = step_flops(s) / rows;
  // Elementwise work costs more per flop than a GEMM's inner loop (a load
  // and a store per element): weight it so chunks take similar time.
  const uint64_t weight = s.kernel == kKernelGemm ? 1 : 4;
  return c ? c * weight : 1;
}

uint32_t kernel_intensity(uint32_t kernel, uint32_t dtype) {
  switch (kernel) {
    case kKernelGemm:
      return dtype == uint32_t(vtrn::num::DType::kF32) ? 1000 : 900;
    case kKernelSoftmax:
    case kKernelGelu: return 700;
    default: return 500;
  }
}

const char* engine_name(uint32_t engine) {
  switch (engine) {
    case kEngineDefault: return "default";
    case kEngineTensor: return "tensor";
    case kEngineCores: return "cores";
    default: return "unknown";
  }
}

Error resolve_engine(uint32_t requested, uint32_t tensor_engines, uint32_t* out) {
  switch (requested) {
    case kEngineDefault: *out = tensor_engines ? kEngineTensor : kEngineCores; return Error();
    case kEngineCores: *out = kEngineCores; return Error();
    case kEngineTensor:
      if (!tensor_engines) {
        return Error(Code::kInvalidArgument, "engine: tensor, but this chip has no tensor engines (see its log)");
      }
      *out = kEngineTensor;
      return Error();
    default: return Error(Code::kInvalidArgument, "engine: %u is not a known engine", unsigned(requested));
  }
}

Error tensor_eligible(const Submit& s, uint32_t dtype_mask, uint64_t limit) {
  for (uint32_t i = 0; i < s.step_count && i < kMaxSteps; ++i) {
    if (s.steps[i].kernel != kKernelGemm) continue;
    if (s.steps[i].dtype >= 32 || !(dtype_mask & (1u << s.steps[i].dtype))) {
      return Error(Code::kInvalidArgument, "steps[%u].dtype: the tensor engines do not take %s (engine cores can)", i,
                   vtrn::num::dtype_valid(s.steps[i].dtype) ? vtrn::num::dtype_name(vtrn::num::DType(s.steps[i].dtype))
                                                            : "it");
    }
    Buffer b[kMaxBuffers];
    const uint32_t n = step_buffers(s.steps[i], b);
    for (uint32_t j = 0; j < n; ++j) {
      if (b[j].addr + b[j].bytes > limit) {
        return Error(Code::kInvalidArgument,
                     "steps[%u].%s: 0x%llx is a stitched allocation the tensor engines cannot reach (engine cores can)",
                     i, b[j].field, (unsigned long long)b[j].addr);
      }
    }
  }
  return Error();
}

void submit_from_proto(const Vtrn__Ctrl__JobSubmitRequest& req, Submit* out) {
  *out = Submit{};
  out->job_id = req.job_id;
  out->owner = req.owner;
  out->client = req.client;
  out->priority = req.priority;
  out->timeout_ms = req.timeout_ms;
  out->max_cores = req.max_cores;
  out->engine = wire(req.engine);
  out->step_count = req.n_steps > 0xffffffffu ? 0xffffffffu : uint32_t(req.n_steps);
  const size_t n = req.n_steps < kMaxSteps ? req.n_steps : kMaxSteps;
  for (size_t i = 0; i < n; ++i) {
    const Vtrn__Ctrl__JobStep* p = req.steps ? req.steps[i] : nullptr;
    if (!p) continue;
    Step& s = out->steps[i];
    s.kernel = wire(p->kernel);
    s.dtype = wire(p->dtype);
    s.m = p->m;
    s.n = p->n;
    s.k = p->k;
    s.a = p->a_addr;
    s.a_scales = p->a_scales_addr;
    s.b = p->b_addr;
    s.b_scales = p->b_scales_addr;
    s.out = p->out_addr;
  }
}

Error check_step_buffers(const Submit& s, uint32_t i, BufferCheck& hbm) {
  Buffer b[kMaxBuffers];
  const uint32_t n = step_buffers(s.steps[i], b);
  for (uint32_t j = 0; j < n; ++j) {
    const unsigned long long addr = b[j].addr, bytes = b[j].bytes;
    if (b[j].addr + b[j].bytes < b[j].addr) {
      return Error(Code::kInvalidArgument, "steps[%u].%s: 0x%llx + %llu wraps around the address space",
                   i, b[j].field, addr, bytes);
    }
    switch (hbm.check(b[j].addr, b[j].bytes, s.owner)) {
      case Access::kOk: break;
      case Access::kNotAllocated:
        return Error(Code::kInvalidArgument, "steps[%u].%s: 0x%llx + %llu is not inside a live allocation",
                     i, b[j].field, addr, bytes);
      case Access::kEccError:
        return Error(Code::kInvalidArgument, "steps[%u].%s: 0x%llx + %llu has an uncorrectable ECC error",
                     i, b[j].field, addr, bytes);
      case Access::kNotOwner:
        return Error(Code::kInvalidArgument,
                     "steps[%u].%s: 0x%llx + %llu belongs to another owner, not job %llu's buffers", i,
                     b[j].field, addr, bytes, (unsigned long long)s.job_id);
    }
  }
  return Error();
}

Error validate(const Submit& s, BufferCheck& hbm) {
  if (s.job_id == 0) return Error(Code::kInvalidArgument, "job_id: 0 is reserved");
  if (s.step_count == 0) return Error(Code::kInvalidArgument, "steps: a job needs at least one step");
  if (s.step_count > kMaxSteps) {
    return Error(Code::kInvalidArgument, "steps: %u steps, at most %u", s.step_count, kMaxSteps);
  }
  for (uint32_t i = 0; i < s.step_count; ++i) {
    const Step& st = s.steps[i];
    Error err;
    if (!check_shape(st, i, &err)) return err;
    Buffer b[kMaxBuffers];
    const uint32_t n = step_buffers(st, b);
    // The output must not overlap what other cores read while they write
    // it. Elementwise kernels and softmax write each row over its own row,
    // so exactly in place (out == input) is fine there; GEMM and sum never.
    const Buffer& out = b[n - 1];
    const bool in_place_ok = st.kernel != kKernelGemm && st.kernel != kKernelSum;
    for (uint32_t j = 0; j + 1 < n; ++j) {
      if (overlaps(out, b[j]) && !(in_place_ok && out.addr == b[j].addr)) {
        return Error(Code::kInvalidArgument, "steps[%u].out_addr: 0x%llx + %llu overlaps %s", i,
                     (unsigned long long)out.addr, (unsigned long long)out.bytes, b[j].field);
      }
    }
    VTRN_TRY(check_step_buffers(s, i, hbm));
  }
  return Error();
}

}  // namespace fw::jobs
