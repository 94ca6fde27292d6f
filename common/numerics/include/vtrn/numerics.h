// Number formats of the jobs' kernels (issue 5): the element types a GEMM
// operand can have, their conversions to and from f32, and the storage of a
// whole operand. Portable C++20 built into the firmware (freestanding: no
// heap, no exceptions, no libstdc++ runtime) and into the host, so the chip's
// kernels, vtrnd's data generation and the host reference decode the same
// bits the same way.
//
// What it is not: arithmetic in these formats. Kernels decode to f32 and
// compute in f32 (common/kernels); nothing here rounds a sum.
//
// The formats, as their specifications define them (all encoders round to
// nearest, ties to even, and keep the sign of zero):
//  - bf16: the top half of an f32. NaN stays NaN (made quiet), +-inf stays.
//  - OCP 8-bit floating point (OFP8) rev 1.0:
//      E4M3 bias 7: no infinities, NaN = S.1111.111 only, max 448
//      (S.1111.110), min normal 2^-6, min subnormal 2^-9.
//      E5M2 bias 15, IEEE-like: inf S.11111.00, NaN S.11111.{01,10,11},
//      max 57344, min normal 2^-14, min subnormal 2^-16.
//    Conversion from f32 has the spec's two modes. Saturating: a finite
//    value that rounds past the max, and +-inf, become +-max. Non-saturating:
//    they become +-inf (E5M2) or NaN (E4M3, which has no inf). NaN always
//    gives NaN (E4M3 S.1111.111, E5M2 S.11111.10, the sign kept).
//  - OCP Microscaling (MX) v1.0:
//      E2M1 (FP4) elements: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no inf or NaN;
//      conversion saturates to +-6 (inf included); NaN has no code and gives
//      +0 (in MX blocks a NaN is carried by the scale, see below).
//      E8M0 scales: 2^(e-127) for e = 0..254 (0 is 2^-127), 0xFF = NaN.
//    A block of 32 values V_i is quantized per the spec's conversion: shared
//    exponent = floor(log2(max|V_i|)) - emax_elem (emax_elem = 2 for E2M1),
//    clamped to the E8M0 range [-127, 127]; X = 2^shared;
//    P_i = E2M1(V_i / X) with saturation to +-6. A block of zeros (amax = 0)
//    gets the smallest scale, 2^-127, and zero elements. A block holding a
//    NaN or an infinity gets the NaN scale 0xFF (its shared exponent is out
//    of the E8M0 range), and every value of a block whose scale is NaN
//    decodes as NaN, whatever its elements.
//
// Storage of GEMM operands (C[m,n] = A[m,k] . B[n,k]^T): both operands are
// row-major with k contiguous. f32 4 bytes an element, bf16 2 (host byte
// order, little-endian on both sides), fp8 1. MXFP4 packs two elements a byte,
// the even k in the low nibble, and keeps its E8M0 scales in a separate
// array, one byte per row and block of 32 along k ([rows, k/32]); k must be a
// multiple of 32.
#ifndef VTRN_NUMERICS_H
#define VTRN_NUMERICS_H

#include <stddef.h>
#include <stdint.h>

#include "vtrn/error.h"

namespace vtrn::num {

// Values are those of vtrn.ctrl.JobDType (proto/vtrn_ctrl_jobs.proto).
enum class DType : uint32_t {
  kF32 = 0,
  kBF16 = 1,
  kFP8E4M3 = 2,
  kFP8E5M2 = 3,
  kMXFP4 = 4,
};
inline constexpr uint32_t kDTypeCount = 5;

// True for the raw values above (for checking a wire value before the cast).
constexpr bool dtype_valid(uint32_t raw) { return raw < kDTypeCount; }
// "fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"; "unknown" otherwise.
const char* dtype_name(DType dtype);
// Accepts "fp32", "f32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4" (exact,
// lower case). False and *out untouched otherwise.
bool parse_dtype(const char* text, DType* out);

inline constexpr uint32_t kMxBlock = 32;       // elements per MX block
inline constexpr uint8_t kE8M0Nan = 0xFF;
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr float kE2M1Max = 6.0f;

namespace detail {

constexpr uint32_t bits(float f) { return __builtin_bit_cast(uint32_t, f); }
constexpr float from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }

// Rounds the magnitude bits `a` of a finite f32 (sign cleared) to a small
// binary format with `mbits` fraction bits and exponent bias `bias`
// (subnormals included), ties to even. Returns the magnitude code, which may
// exceed the format's largest finite code: the caller decides what overflow
// means. Integer-only so it is exact and the same on every FPU.
constexpr uint32_t round_small(uint32_t a, uint32_t mbits, int32_t bias) {
  const int32_t e = int32_t(a >> 23) - 127;
  const int32_t emin = 1 - bias;
  if (e >= emin) {
    // Normal in the target: round the fraction from 23 to mbits bits; a
    // carry out of the fraction correctly bumps the exponent.
    const uint32_t shift = 23 - mbits;
    const uint32_t r = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1u);
    return (r >> shift) - (uint32_t(127 - bias) << mbits);
  }
  // Below half the smallest subnormal (or exactly half: a tie to the even
  // zero): zero. Everything that gets past this is an f32 normal for the
  // formats used here (emin - mbits - 1 >= -18).
  if (e < emin - int32_t(mbits) - 1) return 0;
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  // value = mant * 2^(e-23); subnormal unit = 2^(emin-mbits).
  const uint32_t s = uint32_t(23 + emin - int32_t(mbits) - e);  // 24-mbits .. 24
  uint32_t q = mant >> s;
  const uint32_t rem = mant & ((1u << s) - 1);
  const uint32_t half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return q;  // q == 1 << mbits is the smallest normal, as it should be
}

}  // namespace detail

// bf16
constexpr float bf16_to_f32(uint16_t h) { return detail::from_bits(uint32_t(h) << 16); }
constexpr uint16_t f32_to_bf16(float f) {
  const uint32_t u = detail::bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// OFP8 E4M3
constexpr float e4m3_to_f32(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu, m = c & 7u;
  if (e == 15 && m == 7) return detail::from_bits(sign | 0x7FC00000u);
  if (e == 0) {
    const float v = float(m) * 0.001953125f;  // m * 2^-9, exact
    return sign ? -v : v;
  }
  return detail::from_bits(sign | ((e - 7 + 127) << 23) | (m << 20));
}
constexpr uint8_t f32_to_e4m3(float f, bool saturate) {
  const uint32_t u = detail::bits(f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7Fu;                                // NaN
  if (a == 0x7F800000u) return sign | (saturate ? 0x7Eu : 0x7Fu);          // inf
  const uint32_t c = detail::round_small(a, 3, 7);
  if (c > 0x7Eu) return sign | (saturate ? 0x7Eu : 0x7Fu);                 // overflow
  return uint8_t(sign | c);
}

// OFP8 E5M2
constexpr float e5m2_to_f32(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24;
  const uint32_t e = (c >> 2) & 0x1Fu, m = c & 3u;
  if (e == 31) return detail::from_bits(sign | (m == 0 ? 0x7F800000u : 0x7FC00000u));
  if (e == 0) {
    const float v = float(m) * 0.0000152587890625f;  // m * 2^-16, exact
    return sign ? -v : v;
  }
  return detail::from_bits(sign | ((e - 15 + 127) << 23) | (m << 21));
}
constexpr uint8_t f32_to_e5m2(float f, bool saturate) {
  const uint32_t u = detail::bits(f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7Eu;                                // NaN
  if (a == 0x7F800000u) return sign | (saturate ? 0x7Bu : 0x7Cu);          // inf
  const uint32_t c = detail::round_small(a, 2, 15);
  if (c > 0x7Bu) return sign | (saturate ? 0x7Bu : 0x7Cu);                 // overflow
  return uint8_t(sign | c);
}

// MX: E2M1 elements (low nibble of the code) and E8M0 scales
constexpr float e2m1_to_f32(uint8_t c) {
  const uint32_t e = (c >> 1) & 3u, m = c & 1u;
  const float v = e == 0 ? 0.5f * float(m) : detail::from_bits(((e - 1 + 127) << 23) | (m << 22));
  return (c & 8u) ? -v : v;
}
constexpr uint8_t f32_to_e2m1(float f) {
  const uint32_t u = detail::bits(f);
  const uint8_t sign = uint8_t((u >> 28) & 0x8u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;                       // no NaN in E2M1
  if (a == 0x7F800000u) return sign | 0x7u;
  const uint32_t c = detail::round_small(a, 1, 1);
  return uint8_t(sign | (c > 0x7u ? 0x7u : c));
}
constexpr float e8m0_to_f32(uint8_t e) {
  if (e == kE8M0Nan) return detail::from_bits(0x7FC00000u);
  return e == 0 ? detail::from_bits(0x00400000u) : detail::from_bits(uint32_t(e) << 23);
}

// Quantizes one MX block: 32 values into 16 bytes of E2M1 pairs (element 2i
// in the low nibble of byte i) and returns its E8M0 scale (rules above).
uint8_t mx_quantize_block(const float* v, uint8_t* packed);
// Decodes one block back to 32 floats (P_i * X; all NaN when the scale is).
void mx_dequantize_block(uint8_t scale, const uint8_t* packed, float* out);

// GEMM operand storage
// Bytes of an operand of `rows` rows of k elements (MXFP4: the elements only).
size_t operand_bytes(DType dtype, uint32_t rows, uint32_t k);
// Bytes of its scale array: rows * k/32 for MXFP4, 0 for the other types.
size_t scale_bytes(DType dtype, uint32_t rows, uint32_t k);
// Validates a GEMM's dtype and shape; a failure is kInvalidArgument with one
// line naming the field (e.g. "k: 33 is not a multiple of 32 for mxfp4").
// Rejects zero dimensions, unknown dtypes, and shapes with a buffer (a, b
// or c) over kMaxOperandBytes (which keeps 2*m*n*k <= 2^61).
inline constexpr uint64_t kMaxOperandBytes = uint64_t(1) << 40;
vtrn::Error check_gemm(DType dtype, uint32_t m, uint32_t n, uint32_t k);

// Encodes `rows` x k f32 values (row-major) into dst (operand_bytes) and,
// for MXFP4, scales (scale_bytes; may be null otherwise). fp8 conversions
// saturate (the usual choice for operands: an outlier clips instead of
// becoming inf/NaN). k must be valid for the dtype (check_gemm).
void quantize_operand(DType dtype, const float* src, uint32_t rows, uint32_t k, void* dst,
                      uint8_t* scales);
// Decodes an operand back to f32 (the exact values the kernels compute with).
void dequantize_operand(DType dtype, const void* src, const uint8_t* scales, uint32_t rows,
                        uint32_t k, float* dst);

}  // namespace vtrn::num

#endif  // VTRN_NUMERICS_H
