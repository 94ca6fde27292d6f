// Number formats (numerics.h): dtype names, MX block quantization, GEMM
// operand sizes, shape checks and whole-operand conversion. The scalar
// conversions are constexpr in the header so kernels inline them; this file
// holds what loops over blocks and rows. Built into the firmware too, so no
// heap: a bad shape is a vtrn::Error (common/error) naming the field.
#include "vtrn/numerics.h"

#include <string.h>

namespace vtrn::num {
namespace {

// Whole-operand decode goes through tables built at compile time from the
// scalar conversions (so every value is bit-identical to them): a load per
// element instead of the branches of e4m3_to_f32 / e2m1_to_f32. For MXFP4 a
// packed byte decodes to its pair at once. Measured in tensor_engine_bench
// (release, 512^3, load ~4): mxfp4 decode was ~1.5x the sgemm it feeds.
struct DecodeTables {
  float e4m3[256];
  float e5m2[256];
  float e2m1_pair[256][2];  // [byte] = {low nibble, high nibble}
};

constexpr DecodeTables make_decode_tables() {
  DecodeTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    t.e4m3[i] = e4m3_to_f32(uint8_t(i));
    t.e5m2[i] = e5m2_to_f32(uint8_t(i));
    t.e2m1_pair[i][0] = e2m1_to_f32(uint8_t(i & 0xFu));
    t.e2m1_pair[i][1] = e2m1_to_f32(uint8_t(i >> 4));
  }
  return t;
}

constexpr DecodeTables kDecode = make_decode_tables();

struct Name {
  const char* text;
  DType dtype;
};
constexpr Name kNames[] = {
    {"fp32", DType::kF32},         {"f32", DType::kF32},          {"bf16", DType::kBF16},
    {"fp8-e4m3", DType::kFP8E4M3}, {"fp8-e5m2", DType::kFP8E5M2}, {"mxfp4", DType::kMXFP4},
};

size_t elem_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kFP8E4M3:
    case DType::kFP8E5M2: return 1;
    case DType::kMXFP4: return 0;  // two a byte: handled by the callers
  }
  return 0;
}

// floor(log2(a)) of a positive finite f32 given its magnitude bits.
int32_t floor_log2(uint32_t a) {
  if (a >= 0x00800000u) return int32_t(a >> 23) - 127;
  return 31 - __builtin_clz(a) - 149;  // subnormal: a * 2^-149
}

}  // namespace

const char* dtype_name(DType dtype) {
  for (const Name& n : kNames) {
    if (n.dtype == dtype) return n.text;  // the first name of each is the one printed
  }
  return "unknown";
}

bool parse_dtype(const char* text, DType* out) {
  if (!text) return false;
  for (const Name& n : kNames) {
    if (strcmp(text, n.text) == 0) {
      *out = n.dtype;
      return true;
    }
  }
  return false;
}

uint8_t mx_quantize_block(const float* v, uint8_t* packed) {
  uint32_t amax = 0;
  for (uint32_t i = 0; i < kMxBlock; ++i) {
    const uint32_t a = detail::bits(v[i]) & 0x7FFFFFFFu;
    amax = a > amax ? a : amax;  // magnitude bits order like the values
  }
  if (amax >= 0x7F800000u) {
    // NaN or inf: the shared exponent leaves the E8M0 range; the block is NaN.
    memset(packed, 0, kMxBlock / 2);
    return kE8M0Nan;
  }
  // emax_elem of E2M1 is 2 (6 = 1.5 * 2^2). amax = 0 clamps to the minimum.
  int32_t shared = amax == 0 ? -127 : floor_log2(amax) - 2;
  if (shared < -127) shared = -127;
  if (shared > 127) shared = 127;
  // V / X = V * 2^-shared; 2^-shared is in [2^-127, 2^127], a normal f32,
  // so the product is exact wherever it can matter to E2M1 (>= 2^-126).
  const float inv = detail::from_bits(uint32_t(127 - shared) << 23);
  for (uint32_t i = 0; i < kMxBlock; i += 2) {
    const uint8_t lo = f32_to_e2m1(v[i] * inv);
    const uint8_t hi = f32_to_e2m1(v[i + 1] * inv);
    packed[i / 2] = uint8_t(lo | (hi << 4));
  }
  return uint8_t(shared + 127);
}

void mx_dequantize_block(uint8_t scale, const uint8_t* packed, float* out) {
  const float x = e8m0_to_f32(scale);
  for (uint32_t i = 0; i < kMxBlock; i += 2) {
    const float* pair = kDecode.e2m1_pair[packed[i / 2]];
    // A NaN scale makes every product NaN (0 * NaN included).
    out[i] = pair[0] * x;
    out[i + 1] = pair[1] * x;
  }
}

size_t operand_bytes(DType dtype, uint32_t rows, uint32_t k) {
  if (dtype == DType::kMXFP4) return size_t(rows) * (k / 2);
  return size_t(rows) * k * elem_bytes(dtype);
}

size_t scale_bytes(DType dtype, uint32_t rows, uint32_t k) {
  return dtype == DType::kMXFP4 ? size_t(rows) * (k / kMxBlock) : 0;
}

vtrn::Error check_gemm(DType dtype, uint32_t m, uint32_t n, uint32_t k) {
  using vtrn::Code;
  using vtrn::Error;
  if (!dtype_valid(uint32_t(dtype))) {
    return Error(Code::kInvalidArgument,
                 "dtype: %u is not a known dtype (fp32, bf16, fp8-e4m3, fp8-e5m2, mxfp4)",
                 unsigned(dtype));
  }
  const char* names[3] = {"m", "n", "k"};
  const uint32_t dims[3] = {m, n, k};
  for (int i = 0; i < 3; ++i) {
    if (dims[i] == 0) return Error(Code::kInvalidArgument, "%s: must be at least 1", names[i]);
  }
  if (dtype == DType::kMXFP4 && k % kMxBlock != 0) {
    return Error(Code::kInvalidArgument, "k: %u is not a multiple of 32 for mxfp4", unsigned(k));
  }
  // Elements in 64 bits (each factor < 2^32, so no overflow), compared with
  // the cap divided by the element size so the byte count cannot overflow
  // either. The cap also bounds the work: m k, n k <= 2^41 (MXFP4) and
  // 4 m n <= 2^40 give m n k <= 2^60, so gemm_flops fits in 64 bits.
  struct Buf {
    const char* name;
    uint64_t rows, cols, elem;
  };
  const uint64_t eb = dtype == DType::kMXFP4 ? 1 : elem_bytes(dtype);
  const uint64_t kcols = dtype == DType::kMXFP4 ? k / 2 : k;
  const Buf bufs[3] = {{"a", m, kcols, eb}, {"b", n, kcols, eb}, {"c", m, n, 4}};
  for (const Buf& b : bufs) {
    const uint64_t elems = b.rows * b.cols;
    if (elems > kMaxOperandBytes / b.elem) {
      return Error(Code::kInvalidArgument, "%s: %llu x %llu elements exceed the %llu GiB operand limit",
                   b.name, (unsigned long long)b.rows, (unsigned long long)b.cols,
                   (unsigned long long)(kMaxOperandBytes >> 30));
    }
  }
  return Error();
}

void quantize_operand(DType dtype, const float* src, uint32_t rows, uint32_t k, void* dst,
                      uint8_t* scales) {
  const size_t count = size_t(rows) * k;
  switch (dtype) {
    case DType::kF32:
      memcpy(dst, src, count * 4);
      return;
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kFP8E4M3: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_e4m3(src[i], true);
      return;
    }
    case DType::kFP8E5M2: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_e5m2(src[i], true);
      return;
    }
    case DType::kMXFP4: {
      uint8_t* d = static_cast<uint8_t*>(dst);
      const size_t blocks = count / kMxBlock;
      for (size_t b = 0; b < blocks; ++b)
        scales[b] = mx_quantize_block(src + b * kMxBlock, d + b * (kMxBlock / 2));
      return;
    }
  }
}

void dequantize_operand(DType dtype, const void* src, const uint8_t* scales, uint32_t rows,
                        uint32_t k, float* dst) {
  const size_t count = size_t(rows) * k;
  switch (dtype) {
    case DType::kF32:
      memcpy(dst, src, count * 4);
      return;
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kFP8E4M3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kDecode.e4m3[s[i]];
      return;
    }
    case DType::kFP8E5M2: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kDecode.e5m2[s[i]];
      return;
    }
    case DType::kMXFP4: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      const size_t blocks = count / kMxBlock;
      for (size_t b = 0; b < blocks; ++b)
        mx_dequantize_block(scales[b], s + b * (kMxBlock / 2), dst + b * kMxBlock);
      return;
    }
  }
}

}  // namespace vtrn::num
