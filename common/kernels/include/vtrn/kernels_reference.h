// Host reference for the GEMM kernel and the error bound that tests, `vtrn
// run gemm` and the benchmarks verify against. Host only (it allocates); the
// firmware never links it.
//
// The reference decodes A and B with the same numerics.h code the kernels
// use and accumulates in double, so the only difference to a correct kernel
// is the kernel's f32 rounding. Bound, per element of C (u = 2^-24, the unit
// roundoff of f32; S = sum over k of |a_ik| |b_jk| of the decoded inputs):
//
//   |c_kernel - c_ref| <= gamma(k + 1) * S + (k + 1) * 2^-149,
//   gamma(j) = j u / (1 - j u)
//
// The classic bound for a dot product summed in any order (Higham, Accuracy
// and Stability of Numerical Algorithms, 3.1): k - 1 rounded additions (the
// kernel's k chunks and partial sums are an ordering of the same sum) plus one
// rounded product each, and one more addition to C between chunks. For bf16,
// fp8 and MXFP4 inputs the products are exact in f32 (at most 8 + 8
// significant bits), so the bound is one u per term looser than needed; it
// is kept the same for every dtype so one formula serves all. The absolute
// term covers products and sums that fall into the f32 subnormal range (each
// such rounding errs by at most half of 2^-149 more than the relative bound
// allows). The bound assumes nothing overflows f32 (|S| < 2^127).
//
// Non-finite values: when the reference is NaN the kernel must be NaN; when
// it is +-inf the kernel must be the same inf. A finite reference with a
// non-finite kernel value is an error.
#ifndef VTRN_KERNELS_REFERENCE_H
#define VTRN_KERNELS_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "vtrn/kernels.h"

namespace vtrn::kern {

// Reference C in double ([m, n], row-major) and, when abs_sum is not null,
// S for each element (the scale of the bound). Uses args.c not at all.
void gemm_reference(const GemmArgs& args, double* c, double* abs_sum);

// The allowed |kernel - reference| for an element with scale S (see above).
double gemm_error_bound(DType dtype, uint32_t k, double abs_sum);

struct GemmCheck {
  uint64_t elements = 0;      // m * n
  uint64_t bad = 0;           // elements outside the bound or with wrong specials
  uint64_t first_bad = 0;     // row-major index of the first bad element (if bad)
  double max_abs_err = 0;     // max |c - ref| over finite pairs
  double max_rel_err = 0;     // max |c - ref| / max(|ref|, tiny) over finite pairs
  double max_bound_ratio = 0; // max |c - ref| / bound: <= 1 passes
};

// Computes the reference for args (whose c holds the kernel's result) and
// compares every element. True when none is bad.
bool gemm_verify(const GemmArgs& args, GemmCheck* out);

}  // namespace vtrn::kern

#endif  // VTRN_KERNELS_REFERENCE_H
