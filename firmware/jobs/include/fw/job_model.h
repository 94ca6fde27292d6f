// fw::jobs job model: a submitted job as the firmware keeps it (copied out
// of the decoded vtrn.ctrl.JobSubmitRequest), and its validation.
//
// The rule is copy, then validate everything, then use: submit_from_proto
// copies every field into a fixed-size Submit (no pointer into the decode
// arena survives), validate() checks the copy and writes one line naming the
// first bad field ("steps[1].b_addr: 0x... + 4096 is not inside a live
// allocation"). A step touches only its own job's buffers: each must lie in
// one allocation of Submit::owner, so a job can never be pointed at another
// tenant's memory even if the host's checks were bypassed. Shapes go
// through vtrn::num::check_gemm and the buffer sizes
// through num::operand_bytes / scale_bytes, the same functions the host
// uses to size the buffers. The HBM allocator is reached through the
// BufferCheck hook so host tests can fake it.
//
// Portable: built into the firmware and into host unit tests.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/dtype_wire.h"  // a step's dtype is a JobDType carried as num::DType
#include "vtrn/error.h"
#include "vtrn/numerics.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::jobs {

inline constexpr uint32_t kMaxSteps = 16;

// The kernels, by their vtrn.ctrl.JobKernel numbers (the wire values are
// the only definition).
enum Kernel : uint32_t {
  kKernelGemm = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM,
  kKernelAdd = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD,
  kKernelMul = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL,
  kKernelGelu = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GELU,
  kKernelSoftmax = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SOFTMAX,
  kKernelSum = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM,
};

// Where a job's GEMM steps run, by their vtrn.types.JobEngine numbers.
// Elementwise, softmax and sum always run on the cores (hw/README.md).
enum Engine : uint32_t {
  kEngineDefault = VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_DEFAULT,
  kEngineTensor = VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_TENSOR,
  kEngineCores = VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_CORES,
};
const char* engine_name(uint32_t engine);  // "tensor", "cores", "default"

struct Step {
  uint32_t kernel = 0;
  uint32_t dtype = 0;
  uint32_t m = 0, n = 0, k = 0;
  uint64_t a = 0, a_scales = 0, b = 0, b_scales = 0, out = 0;
};

struct Submit {
  uint64_t job_id = 0;
  uint64_t owner = 0;
  uint32_t client = 0;
  uint32_t priority = 0;
  uint32_t timeout_ms = 0;
  uint32_t max_cores = 0;   // cores path: executor cores; tensor path: tensor engines
  uint32_t engine = 0;      // Engine as sent; resolve_engine() makes it tensor or cores
  uint32_t step_count = 0;  // as sent (may exceed kMaxSteps: validate rejects it)
  Step steps[kMaxSteps];
};

// A buffer a step reads or writes: which field names it, where, how long.
struct Buffer {
  const char* field;  // "a_addr", "a_scales_addr", "b_addr", "b_scales_addr", "out_addr"
  uint64_t addr;
  uint64_t bytes;
};
inline constexpr uint32_t kMaxBuffers = 5;

// The buffers of a step whose kernel and shape are valid; returns the count.
uint32_t step_buffers(const Step& s, Buffer* out);

// Floating-point operations of a step (GEMM 2mnk; others one per element,
// softmax and GELU counted as a few).
uint64_t step_flops(const Step& s);

// Rows the step is split by (GEMM, softmax, sum: m; add/mul/gelu: m rows of
// n elements) and the relative cost of one row, in "flops".
uint32_t step_rows(const Step& s);
uint64_t step_row_cost(const Step& s);

// How hard a kernel drives a core, for the power model (0..1000).
uint32_t kernel_intensity(uint32_t kernel, uint32_t dtype);

// kNotOwner: inside one live allocation, but not one of `owner`'s.
enum class Access : uint8_t { kOk, kNotAllocated, kEccError, kNotOwner };

// The HBM allocator as validation sees it (fw::hbm::check with the job's
// owner in the firmware): is [addr, addr + bytes) inside one live
// allocation owned by `owner`, with no retired page?
class BufferCheck {
 public:
  Access check(uint64_t addr, uint64_t bytes, uint64_t owner) { return do_check(addr, bytes, owner); }

 protected:
  ~BufferCheck() = default;

 private:
  virtual Access do_check(uint64_t addr, uint64_t bytes, uint64_t owner) = 0;
};

// The engine a job runs its GEMM steps on: DEFAULT becomes tensor when the
// chip has tensor engines (`tensor_engines` > 0, kCapTensorGemm), else cores.
// kInvalidArgument (one line naming "engine") for an unknown value or
// tensor on a chip without tensor engines.
vtrn::Error resolve_engine(uint32_t requested, uint32_t tensor_engines, uint32_t* out);

// Whether the tensor engines can run every GEMM step of `s`: its dtype in
// `dtype_mask` (the ID block's bit per num::DType) and every buffer below
// `limit`, where the engines' reach ends (fw::engines tensor_reach: the
// start of the remap window of stitched HBM allocations when the engines do
// not translate it, its end when they do, engine ABI 1.3). The first that is
// not, as one line naming the step and field.
vtrn::Error tensor_eligible(const Submit& s, uint32_t dtype_mask, uint64_t limit);

// Copies the decoded request. Steps beyond kMaxSteps are not copied but
// step_count keeps the number sent.
void submit_from_proto(const Vtrn__Ctrl__JobSubmitRequest& req, Submit* out);

// Everything a job needs before it may be queued: 1..kMaxSteps steps, known
// kernel and dtype, a shape check_gemm accepts (elementwise kernels: m, n
// >= 1 and m*n within limits), every buffer inside a live allocation of
// the job's owner (Submit::owner), no ECC-poisoned buffer. Fails
// (kInvalidArgument) with one line naming the field.
vtrn::Error validate(const Submit& s, BufferCheck& hbm);

// The first buffer of step `i` that is not usable now (ECC error, freed, or
// not the job owner's), checked before the step runs (kInvalidArgument,
// one line).
vtrn::Error check_step_buffers(const Submit& s, uint32_t i, BufferCheck& hbm);

}  // namespace fw::jobs
