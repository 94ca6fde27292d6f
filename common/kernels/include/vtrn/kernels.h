// Compute kernels of the jobs (issue 5): GEMM with f32 accumulation over
// inputs in every vtrn::num::DType, elementwise add / multiply / GELU, and
// row softmax and sum. Portable C++20 built into the firmware, where the
// NeuronCores' executors run them, and into the host, where the native
// benchmark runs the very same code.
//
// What it is not: a scheduler or a validator of job buffers. The caller
// (fw::jobs) checks addresses and shapes (num::check_gemm) before a kernel
// runs; the kernels trust their arguments and allocate nothing. Only GELU
// calls a function per element (the C library's erff).
//
// Splitting: every kernel computes a range of rows (GEMM, softmax, sum) or
// elements (add, mul, gelu), so several cores share one step by taking
// disjoint ranges. A row's result does not depend on how the rows were split
// (each C element is accumulated in the same order whatever range it is in).
//
// Same bits on the chip and on the host: the sources are compiled without
// FMA contraction (common/numerics/sources.cmake), so GEMM, add, mul,
// softmax and sum perform the same IEEE f32 operations in the same order on
// AArch64 (the chip, TCG included) and x86-64 (the host) and give
// bit-identical results (NaN payloads aside). GELU calls the C library's
// erff (picolibc on the chip, glibc on the host), which may differ by an
// ulp or two.
//
// GEMM: C[m,n] (f32, row-major) = A[m,k] . B[n,k]^T, storage as numerics.h
// describes. gemm_rows decodes each operand tile once into the caller's
// scratch (a B tile of kGemmNc x kGemmKc, an A panel of kGemmMr x kGemmKc)
// and runs a register-blocked micro-kernel over it. The sum over k is
// accumulated in f32 in chunks of kGemmKc: C holds the partial sum between
// chunks. f32, bf16 and fp8 decode to f32 and add rounded products one by
// one. MXFP4 computes each block's dot product exactly in integers (twice an
// E2M1 element is an integer <= 12, so 32 products sum to <= 4608) and adds
// (isum * X_a/2) * X_b/2 to the f32 sum: one rounding per block instead of
// 32, as the MX spec's block dot product allows, and much faster under TCG.
// Error bound for both: kernels_reference.h.
//
// Special values follow IEEE f32 arithmetic on the decoded inputs: a NaN or
// inf in A row i or B row j reaches C[i,j] (inf * 0 = NaN included). An MXFP4
// block with the NaN scale makes NaN of every C element it contributes to.
// MXFP4 scales above 2^125 (never produced by num::quantize_operand from f32
// data) can overflow f32, in the kernel and in the reference alike, where
// they need not overflow at the same places.
#ifndef VTRN_KERNELS_H
#define VTRN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "vtrn/numerics.h"

namespace vtrn::kern {

using num::DType;

struct GemmArgs {
  DType dtype;
  uint32_t m, n, k;
  const void* a;             // [m, k] in dtype
  const uint8_t* a_scales;   // [m, k/32] E8M0, MXFP4 only
  const void* b;             // [n, k] in dtype
  const uint8_t* b_scales;   // [n, k/32] E8M0, MXFP4 only
  float* c;                  // [m, n] f32
};

// Blocking. Mr x Nr is the register tile of the micro-kernel; a B tile is
// Nc rows of B by Kc values of k (a multiple of 32, so MX blocks never
// straddle a chunk).
inline constexpr uint32_t kGemmMr = 4;
inline constexpr uint32_t kGemmNr = 8;
inline constexpr uint32_t kGemmKc = 256;
inline constexpr uint32_t kGemmNc = 32;
inline constexpr size_t kGemmScratchAlign = 64;
// The most scratch any GEMM needs: (Nc + Mr) x Kc floats plus alignment
// slack, 36,928 bytes.
inline constexpr size_t kGemmScratchMaxBytes =
    size_t(kGemmNc + kGemmMr) * kGemmKc * sizeof(float) + kGemmScratchAlign;

// Scratch bytes gemm_rows needs for these arguments (<= kGemmScratchMaxBytes,
// less for small n or k). Any float-aligned buffer of that size will do.
size_t gemm_scratch_bytes(const GemmArgs& args);

// Computes rows [row_begin, row_end) of C. Returns false, writing nothing,
// when the range is not inside [0, m], the dtype is unknown, an operand
// pointer is null (for MXFP4 the scales too, and k must be a multiple of
// 32), or scratch_bytes < gemm_scratch_bytes(args).
[[nodiscard]] bool gemm_rows(const GemmArgs& args, uint32_t row_begin, uint32_t row_end,
                             float* scratch, size_t scratch_bytes);

// Splitting a GEMM across calls. Each gemm_rows call decodes and packs all
// of B once (n x k elements), so a call should cover enough rows to amortise
// that: under TCG one row per call runs about 10x slower than 16 rows per
// call, and MXFP4, whose compute is cheap, wants more. Rows are computed in
// tiles of kGemmMr, so multiples of kGemmMr waste nothing.
inline constexpr uint32_t kGemmMinRowsPerCall = 16;
// Rows per call for chunks of about the time target_flops take on the f32
// path: target_flops / (2nk) (times kGemmMxSpeedup for MXFP4, whose integer
// path does that many more flops per second under TCG), rounded up to a
// multiple of kGemmMr, at least kGemmMinRowsPerCall, at most m (and >= 1).
inline constexpr uint32_t kGemmMxSpeedup = 8;
uint32_t gemm_rows_per_call(const GemmArgs& args, uint64_t target_flops);

// Floating-point operations of one GEMM: 2 * m * n * k (fits whenever
// num::check_gemm accepts the shape).
constexpr uint64_t gemm_flops(uint32_t m, uint32_t n, uint32_t k) {
  return 2ull * m * n * k;
}

// Elementwise over [begin, end): out[i] = a[i] + b[i], a[i] * b[i],
// gelu(a[i]) = 0.5 a (1 + erf(a / sqrt 2)). out may alias an input.
void add_range(const float* a, const float* b, float* out, size_t begin, size_t end);
void mul_range(const float* a, const float* b, float* out, size_t begin, size_t end);
void gelu_range(const float* a, float* out, size_t begin, size_t end);

// Rows [row_begin, row_end) of a [rows, cols] f32 matrix.
// softmax_rows: out[r, j] = exp(x_j - max) / sum exp(x_i - max), with the row
// max subtracted so large values do not overflow. A row holding a NaN or +inf
// gives all NaN; -inf entries give 0; a row of only -inf gives all NaN
// (0/0: the distribution is undefined). out may alias in.
void softmax_rows(const float* in, float* out, uint32_t cols, uint32_t row_begin, uint32_t row_end);
// sum_rows: out[r] = sum of row r, accumulated in f32 in 8 interleaved
// partial sums (then added pairwise); NaN and inf propagate as in IEEE.
void sum_rows(const float* in, float* out, uint32_t cols, uint32_t row_begin, uint32_t row_end);

// exp(x) in f32 without libm (no errno, no call): max error 2 ulp over the
// f32 range, exact special cases (exp(-inf) = 0, exp(NaN) = NaN, overflow to
// inf, gradual underflow). Exposed for the tests.
float exp_f32(float x);

}  // namespace vtrn::kern

#endif  // VTRN_KERNELS_H
