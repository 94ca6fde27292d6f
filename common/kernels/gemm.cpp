// GEMM kernel (kernels.h): C[m,n] = A[m,k] . B[n,k]^T with f32 accumulation,
// for every input dtype, over a range of C rows.
//
// Shape of the code. Both operands are contiguous along k, which suits dot
// products but not a register-blocked kernel; and four of the five dtypes
// need decoding anyway. So each tile is decoded once (to f32; MXFP4 to
// int16, see its section) and packed into the caller's scratch in the layout
// the micro-kernel streams: a B tile as panels of Nr columns ([kc][Nr]
// each), an A panel as [kc][Mr]. The micro-kernel then does outer
// products: per k step one A vector (Mr values) and Nr/4 B vectors give
// Mr*Nr multiply-adds into Mr*Nr/4 vector accumulators that stay in
// registers for the whole chunk. Vectors are GCC vector extensions, so the
// same source becomes NEON on the chip and SSE on the host; scratch is
// 64-byte aligned so every vector access is aligned (the firmware builds
// with -mstrict-align).
//
// Under TCG every guest instruction costs host time and each float lane goes
// through softfloat, so what matters on the chip is few instructions per
// multiply-add: no calls, no per-element branches, table decodes, and loads
// amortised over a 4x8 register tile. FMUL+FADD rather than FMLA (see
// common/numerics/sources.cmake). Measured on QEMU 7.2 (cortex-a53, 128^3,
// one vCPU): MXFP4's integer path (below) runs about 12x faster than the f32
// path the other dtypes take.
#include <string.h>

#include "vtrn/kernels.h"

namespace vtrn::kern {
namespace {

using v4f = float __attribute__((vector_size(16), aligned(16), may_alias));
using v8s = int16_t __attribute__((vector_size(16), aligned(16), may_alias));
using v4s = int16_t __attribute__((vector_size(8), aligned(8), may_alias));
using v4i = int32_t __attribute__((vector_size(16)));

constexpr uint32_t kMr = kGemmMr;
constexpr uint32_t kNr = kGemmNr;
static_assert(kMr == 4 && kNr == 8, "the micro-kernel below is written for 4x8");
static_assert(kGemmKc % num::kMxBlock == 0, "an MX block must not straddle a k chunk");

struct Tables {
  float e4m3[256];
  float e5m2[256];
  float e8m0[256];
  int16_t e2m1_x2[16];  // E2M1 values times 2: exact integers, |v| <= 12
};

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    t.e4m3[i] = num::e4m3_to_f32(uint8_t(i));
    t.e5m2[i] = num::e5m2_to_f32(uint8_t(i));
    t.e8m0[i] = num::e8m0_to_f32(uint8_t(i));
  }
  for (uint32_t i = 0; i < 16; ++i) t.e2m1_x2[i] = int16_t(num::e2m1_to_f32(uint8_t(i)) * 2.0f);
  return t;
}

// Decoded at compile time: read-only data, shared by every core, no init race.
constexpr Tables kTables = make_tables();

uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Decodes k values [k0, k0 + kc) of operand row `row` to f32, writing value
// kk to out[kk * stride].
template <DType D>
void decode_row(const void* base, const uint8_t* scales, uint32_t k, uint32_t row, uint32_t k0,
                uint32_t kc, float* out, uint32_t stride) {
  if constexpr (D == DType::kF32) {
    const float* s = static_cast<const float*>(base) + size_t(row) * k + k0;
    for (uint32_t kk = 0; kk < kc; ++kk) out[kk * stride] = s[kk];
  } else if constexpr (D == DType::kBF16) {
    const uint16_t* s = static_cast<const uint16_t*>(base) + size_t(row) * k + k0;
    for (uint32_t kk = 0; kk < kc; ++kk) out[kk * stride] = num::bf16_to_f32(s[kk]);
  } else {
    static_assert(D == DType::kFP8E4M3 || D == DType::kFP8E5M2,
                  "MXFP4 has its own integer path (pack_b_mx)");
    const float* table = D == DType::kFP8E4M3 ? kTables.e4m3 : kTables.e5m2;
    const uint8_t* s = static_cast<const uint8_t*>(base) + size_t(row) * k + k0;
    for (uint32_t kk = 0; kk < kc; ++kk) out[kk * stride] = table[s[kk]];
  }
}

using DecodeFn = void (*)(const void*, const uint8_t*, uint32_t, uint32_t, uint32_t, uint32_t,
                          float*, uint32_t);

DecodeFn decoder(DType d) {
  switch (d) {
    case DType::kF32: return decode_row<DType::kF32>;
    case DType::kBF16: return decode_row<DType::kBF16>;
    case DType::kFP8E4M3: return decode_row<DType::kFP8E4M3>;
    case DType::kFP8E5M2: return decode_row<DType::kFP8E5M2>;
    case DType::kMXFP4: return nullptr;  // integer path, see pack_b_mx
  }
  return nullptr;
}

// Packs B rows [n0, n0 + nc) x k [k0, k0 + kc) as ceil(nc/Nr) panels of
// [kc][Nr]; columns past nc are zero.
void pack_b(DecodeFn dec, const GemmArgs& g, uint32_t n0, uint32_t nc, uint32_t k0, uint32_t kc,
            float* bp) {
  for (uint32_t j0 = 0; j0 < nc; j0 += kNr) {
    float* panel = bp + size_t(j0) * kc;
    for (uint32_t jj = 0; jj < kNr; ++jj) {
      if (j0 + jj < nc) {
        dec(g.b, g.b_scales, g.k, n0 + j0 + jj, k0, kc, panel + jj, kNr);
      } else {
        for (uint32_t kk = 0; kk < kc; ++kk) panel[kk * kNr + jj] = 0.0f;
      }
    }
  }
}

// Packs A rows [i0, i0 + rows) x k [k0, k0 + kc) as [kc][Mr]; rows past
// `rows` are zero.
void pack_a(DecodeFn dec, const GemmArgs& g, uint32_t i0, uint32_t rows, uint32_t k0, uint32_t kc,
            float* ap) {
  for (uint32_t ii = 0; ii < kMr; ++ii) {
    if (ii < rows) {
      dec(g.a, g.a_scales, g.k, i0 + ii, k0, kc, ap + ii, kMr);
    } else {
      for (uint32_t kk = 0; kk < kc; ++kk) ap[kk * kMr + ii] = 0.0f;
    }
  }
}

// Writes the valid part of a register tile to C: stored for the first k
// chunk, added for the next ones.
inline void store_tile(const float (*tile)[kNr], float* __restrict c, size_t ldc, uint32_t rows,
                       uint32_t cols, bool accumulate) {
  for (uint32_t r = 0; r < rows; ++r) {
    float* crow = c + r * ldc;
    if (accumulate) {
      for (uint32_t j = 0; j < cols; ++j) crow[j] += tile[r][j];
    } else {
      for (uint32_t j = 0; j < cols; ++j) crow[j] = tile[r][j];
    }
  }
}

// C[rows x cols] (= or +=) A panel [kc][4] . B panel [kc][8]. Every C element
// is a plain sequential f32 sum over the chunk, the same wherever its row
// sits in the panel.
void micro_4x8(const float* __restrict ap, const float* __restrict bp, uint32_t kc,
               float* __restrict c, size_t ldc, uint32_t rows, uint32_t cols, bool accumulate) {
  v4f c00 = {0, 0, 0, 0}, c01 = c00, c10 = c00, c11 = c00;
  v4f c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const v4f* a = reinterpret_cast<const v4f*>(__builtin_assume_aligned(ap, 16));
  const v4f* b = reinterpret_cast<const v4f*>(__builtin_assume_aligned(bp, 16));
  for (uint32_t p = 0; p < kc; ++p) {
    const v4f av = a[p];
    const v4f b0 = b[2 * p];
    const v4f b1 = b[2 * p + 1];
    c00 += b0 * av[0];
    c01 += b1 * av[0];
    c10 += b0 * av[1];
    c11 += b1 * av[1];
    c20 += b0 * av[2];
    c21 += b1 * av[2];
    c30 += b0 * av[3];
    c31 += b1 * av[3];
  }
  // Through an aligned array, not memcpy: the firmware builds with
  // -ffreestanding, where memcpy is a real call.
  alignas(16) v4f tile_v[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  store_tile(reinterpret_cast<const float(*)[kNr]>(tile_v), c, ldc, rows, cols, accumulate);
}

// The same for the last 1..3 rows of a range: computing a padded 4-row tile
// would cost a full tile of float ops (each a softfloat helper under TCG) for
// one row. Each element sees exactly the operations of micro_4x8.
template <uint32_t R>
void micro_rx8(const float* __restrict ap, const float* __restrict bp, uint32_t kc,
               float* __restrict c, size_t ldc, uint32_t cols, bool accumulate) {
  static_assert(R >= 1 && R < kMr);
  v4f acc[R][2];
#pragma GCC unroll 4
  for (uint32_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = v4f{0, 0, 0, 0};
  const float* a = static_cast<const float*>(__builtin_assume_aligned(ap, 16));
  const v4f* b = reinterpret_cast<const v4f*>(__builtin_assume_aligned(bp, 16));
  for (uint32_t p = 0; p < kc; ++p) {
    const v4f b0 = b[2 * p];
    const v4f b1 = b[2 * p + 1];
#pragma GCC unroll 4
    for (uint32_t r = 0; r < R; ++r) {
      const float x = a[p * kMr + r];
      acc[r][0] += b0 * x;
      acc[r][1] += b1 * x;
    }
  }
  alignas(16) v4f tile_v[kMr][2];
#pragma GCC unroll 4
  for (uint32_t r = 0; r < R; ++r) {
    tile_v[r][0] = acc[r][0];
    tile_v[r][1] = acc[r][1];
  }
  store_tile(reinterpret_cast<const float(*)[kNr]>(tile_v), c, ldc, R, cols, accumulate);
}

void micro_f32(const float* ap, const float* bp, uint32_t kc, float* c, size_t ldc, uint32_t rows,
               uint32_t cols, bool accumulate) {
  switch (rows) {
    case 1: micro_rx8<1>(ap, bp, kc, c, ldc, cols, accumulate); return;
    case 2: micro_rx8<2>(ap, bp, kc, c, ldc, cols, accumulate); return;
    case 3: micro_rx8<3>(ap, bp, kc, c, ldc, cols, accumulate); return;
    default: micro_4x8(ap, bp, kc, c, ldc, rows, cols, accumulate); return;
  }
}

// MXFP4: integer products per block
//
// E2M1 elements are multiples of 0.5 up to 6, so twice an element is an
// integer up to 12, a product of two is at most 144 and the sum of a block's
// 32 products at most 4608: exact in int16. So the MXFP4 path keeps elements
// as int16 and computes each block's dot product in integers (the MX spec's
// Dot(A, B) = X_A X_B sum(P_A P_B)), then adds (isum * X_A/2) * X_B/2 to the
// f32 accumulators: one exact integer sum and one rounding per block instead
// of 32. Under TCG integer vector ops are host SIMD code, while every float
// vector op is a softfloat helper call, so this path is several times faster
// on the chip (and faster natively too).
//
// Scratch layout (all 16-byte aligned): B panels of [kc][8] int16, their
// scales as [kc/32][8] f32 (X/2), then the A panel [kc][4] int16 and its
// scales [kc/32][4] f32. Smaller than the f32 path's.

void pack_b_mx(const GemmArgs& g, uint32_t n0, uint32_t nc, uint32_t k0, uint32_t kc,
               int16_t* bi, float* bs) {
  const uint32_t blocks = kc / num::kMxBlock;
  for (uint32_t j0 = 0; j0 < nc; j0 += kNr) {
    int16_t* panel = bi + size_t(j0) * kc;
    float* pscale = bs + size_t(j0) * blocks;
    for (uint32_t jj = 0; jj < kNr; ++jj) {
      if (j0 + jj < nc) {
        const uint32_t row = n0 + j0 + jj;
        const uint8_t* p = static_cast<const uint8_t*>(g.b) + size_t(row) * (g.k / 2) + k0 / 2;
        for (uint32_t kk = 0; kk < kc; kk += 2) {
          const uint8_t byte = p[kk / 2];
          panel[kk * kNr + jj] = kTables.e2m1_x2[byte & 0xFu];
          panel[(kk + 1) * kNr + jj] = kTables.e2m1_x2[byte >> 4];
        }
        const uint8_t* sc = g.b_scales + size_t(row) * (g.k / num::kMxBlock) + k0 / num::kMxBlock;
        for (uint32_t blk = 0; blk < blocks; ++blk) pscale[blk * kNr + jj] = kTables.e8m0[sc[blk]] * 0.5f;
      } else {
        for (uint32_t kk = 0; kk < kc; ++kk) panel[kk * kNr + jj] = 0;
        for (uint32_t blk = 0; blk < blocks; ++blk) pscale[blk * kNr + jj] = 0.0f;
      }
    }
  }
}

void pack_a_mx(const GemmArgs& g, uint32_t i0, uint32_t rows, uint32_t k0, uint32_t kc,
               int16_t* ai, float* as) {
  const uint32_t blocks = kc / num::kMxBlock;
  for (uint32_t ii = 0; ii < kMr; ++ii) {
    if (ii < rows) {
      const uint32_t row = i0 + ii;
      const uint8_t* p = static_cast<const uint8_t*>(g.a) + size_t(row) * (g.k / 2) + k0 / 2;
      for (uint32_t kk = 0; kk < kc; kk += 2) {
        const uint8_t byte = p[kk / 2];
        ai[kk * kMr + ii] = kTables.e2m1_x2[byte & 0xFu];
        ai[(kk + 1) * kMr + ii] = kTables.e2m1_x2[byte >> 4];
      }
      const uint8_t* sc = g.a_scales + size_t(row) * (g.k / num::kMxBlock) + k0 / num::kMxBlock;
      for (uint32_t blk = 0; blk < blocks; ++blk) as[blk * kMr + ii] = kTables.e8m0[sc[blk]] * 0.5f;
    } else {
      for (uint32_t kk = 0; kk < kc; ++kk) ai[kk * kMr + ii] = 0;
      for (uint32_t blk = 0; blk < blocks; ++blk) as[blk * kMr + ii] = 0.0f;
    }
  }
}

// Widen to int32 first: int16 -> f32 in one step is scalarised by GCC on
// AArch64 (a softfloat call per lane under TCG); int32 -> f32 is one SCVTF.
inline v4f lo_f32(v8s v) {
  return __builtin_convertvector(__builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), v4i), v4f);
}
inline v4f hi_f32(v8s v) {
  return __builtin_convertvector(__builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), v4i), v4f);
}

// C[rows x cols] (= or +=) the MX blocks of one A panel and one B panel. Per
// C element and chunk: s = 0; per block s = s + (float(isum) * xa) * xb.
void micro_mx_4x8(const int16_t* __restrict ai, const float* __restrict as,
                  const int16_t* __restrict bi, const float* __restrict bs, uint32_t kc,
                  float* __restrict c, size_t ldc, uint32_t rows, uint32_t cols, bool accumulate) {
  v4f c00 = {0, 0, 0, 0}, c01 = c00, c10 = c00, c11 = c00;
  v4f c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const v4s* a = reinterpret_cast<const v4s*>(__builtin_assume_aligned(ai, 16));
  const v8s* b = reinterpret_cast<const v8s*>(__builtin_assume_aligned(bi, 16));
  const v4f* sa = reinterpret_cast<const v4f*>(__builtin_assume_aligned(as, 16));
  const v4f* sb = reinterpret_cast<const v4f*>(__builtin_assume_aligned(bs, 16));
  for (uint32_t blk = 0; blk < kc / num::kMxBlock; ++blk) {
    v8s s0 = {0, 0, 0, 0, 0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
    const v4s* ap = a + blk * num::kMxBlock;
    const v8s* bp = b + blk * num::kMxBlock;
    for (uint32_t p = 0; p < num::kMxBlock; ++p) {
      const v8s bv = bp[p];
      const v4s av = ap[p];
      s0 += bv * av[0];
      s1 += bv * av[1];
      s2 += bv * av[2];
      s3 += bv * av[3];
    }
    const v4f xa = sa[blk];
    const v4f xb0 = sb[2 * blk];
    const v4f xb1 = sb[2 * blk + 1];
    c00 += (lo_f32(s0) * xa[0]) * xb0;
    c01 += (hi_f32(s0) * xa[0]) * xb1;
    c10 += (lo_f32(s1) * xa[1]) * xb0;
    c11 += (hi_f32(s1) * xa[1]) * xb1;
    c20 += (lo_f32(s2) * xa[2]) * xb0;
    c21 += (hi_f32(s2) * xa[2]) * xb1;
    c30 += (lo_f32(s3) * xa[3]) * xb0;
    c31 += (hi_f32(s3) * xa[3]) * xb1;
  }
  alignas(16) v4f tile_v[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  store_tile(reinterpret_cast<const float(*)[kNr]>(tile_v), c, ldc, rows, cols, accumulate);
}

struct Blocking {
  uint32_t kc_max;  // k values per chunk actually used
  uint32_t nc_max;  // B tile rows, rounded up to whole panels
};

Blocking blocking(const GemmArgs& g) {
  const uint32_t kc = min_u32(g.k, kGemmKc);
  const uint32_t n_panels = (min_u32(g.n, kGemmNc) + kNr - 1) / kNr;
  return {kc, n_panels * kNr};
}

}  // namespace

uint32_t gemm_rows_per_call(const GemmArgs& g, uint64_t target_flops) {
  const uint64_t row_flops = 2ull * g.n * g.k;
  const uint32_t m = g.m;
  uint64_t rows = row_flops ? target_flops / row_flops : m;
  if (g.dtype == DType::kMXFP4) rows *= kGemmMxSpeedup;
  rows = (rows + kMr - 1) / kMr * kMr;
  if (rows < kGemmMinRowsPerCall) rows = kGemmMinRowsPerCall;
  if (rows > m) rows = m;
  return rows ? uint32_t(rows) : 1;
}

size_t gemm_scratch_bytes(const GemmArgs& args) {
  const Blocking b = blocking(args);
  return size_t(b.nc_max + kMr) * b.kc_max * sizeof(float) + kGemmScratchAlign;
}

bool gemm_rows(const GemmArgs& g, uint32_t row_begin, uint32_t row_end, float* scratch,
               size_t scratch_bytes) {
  if (!num::dtype_valid(uint32_t(g.dtype)) || row_begin > row_end || row_end > g.m) return false;
  if (!g.a || !g.b || !g.c || !scratch) return false;
  if (g.dtype == DType::kMXFP4 && (!g.a_scales || !g.b_scales || g.k % num::kMxBlock != 0))
    return false;
  if (scratch_bytes < gemm_scratch_bytes(g)) return false;
  if (row_begin == row_end || g.n == 0) return true;

  const DecodeFn dec = decoder(g.dtype);
  const Blocking blk = blocking(g);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(scratch);
  float* const bp = reinterpret_cast<float*>((raw + kGemmScratchAlign - 1) & ~uintptr_t(kGemmScratchAlign - 1));
  float* const ap = bp + size_t(blk.nc_max) * blk.kc_max;

  if (g.k == 0) {
    // An empty sum: C rows are zero (check_gemm rejects k = 0 for jobs).
    for (uint32_t i = row_begin; i < row_end; ++i) memset(g.c + size_t(i) * g.n, 0, size_t(g.n) * 4);
    return true;
  }
  if (g.dtype == DType::kMXFP4) {
    // Same loop nest as below over the integer layout (see pack_b_mx).
    int16_t* const bi = reinterpret_cast<int16_t*>(bp);
    float* const bsc = reinterpret_cast<float*>(bi + size_t(blk.nc_max) * blk.kc_max);
    int16_t* const ai = reinterpret_cast<int16_t*>(bsc + size_t(blk.nc_max) * (blk.kc_max / num::kMxBlock));
    float* const asc = reinterpret_cast<float*>(ai + size_t(kMr) * blk.kc_max);
    for (uint32_t k0 = 0; k0 < g.k; k0 += kGemmKc) {
      const uint32_t kc = min_u32(kGemmKc, g.k - k0);
      const uint32_t blocks = kc / num::kMxBlock;
      for (uint32_t n0 = 0; n0 < g.n; n0 += kGemmNc) {
        const uint32_t nc = min_u32(kGemmNc, g.n - n0);
        pack_b_mx(g, n0, nc, k0, kc, bi, bsc);
        for (uint32_t i0 = row_begin; i0 < row_end; i0 += kMr) {
          const uint32_t rows = min_u32(kMr, row_end - i0);
          pack_a_mx(g, i0, rows, k0, kc, ai, asc);
          float* crow = g.c + size_t(i0) * g.n + n0;
          for (uint32_t j0 = 0; j0 < nc; j0 += kNr) {
            micro_mx_4x8(ai, asc, bi + size_t(j0) * kc, bsc + size_t(j0) * blocks, kc, crow + j0,
                         g.n, rows, min_u32(kNr, nc - j0), k0 != 0);
          }
        }
      }
    }
    return true;
  }
  for (uint32_t k0 = 0; k0 < g.k; k0 += kGemmKc) {
    const uint32_t kc = min_u32(kGemmKc, g.k - k0);
    const bool accumulate = k0 != 0;
    for (uint32_t n0 = 0; n0 < g.n; n0 += kGemmNc) {
      const uint32_t nc = min_u32(kGemmNc, g.n - n0);
      pack_b(dec, g, n0, nc, k0, kc, bp);
      for (uint32_t i0 = row_begin; i0 < row_end; i0 += kMr) {
        const uint32_t rows = min_u32(kMr, row_end - i0);
        pack_a(dec, g, i0, rows, k0, kc, ap);
        float* crow = g.c + size_t(i0) * g.n + n0;
        for (uint32_t j0 = 0; j0 < nc; j0 += kNr) {
          micro_f32(ap, bp + size_t(j0) * kc, kc, crow + j0, g.n, rows, min_u32(kNr, nc - j0),
                    accumulate);
        }
      }
    }
  }
  return true;
}

}  // namespace vtrn::kern
