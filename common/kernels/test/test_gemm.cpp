// Unit tests of the GEMM kernel (vtrn/kernels.h) against the double host
// reference (vtrn/kernels_reference.h): every dtype on odd shapes (m = 1,
// n = 3, k = 32/64, sizes that are not multiples of the tiles, k spanning
// several chunks), within the documented bound; identical bits whatever the
// row split; NaN and inf propagation; argument checks; and that the bound is
// tight enough to catch a kernel that drops one term of a sum.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// cmocka 1.1 ships no extern "C" guards.
extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "vtrn/kernels.h"
#include "vtrn/kernels_reference.h"

using namespace vtrn;
using kern::GemmArgs;
using num::DType;

namespace {

constexpr DType kAll[] = {DType::kF32, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2,
                          DType::kMXFP4};

uint32_t g_rng;
float rand_unit() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return float(g_rng % 2000001u) / 1000000.0f - 1.0f;  // [-1, 1]
}

// Operands of one GEMM in a dtype, built from random f32 data.
struct Problem {
  DType dtype;
  uint32_t m, n, k;
  std::vector<float> fa, fb;
  std::vector<uint8_t> a, b, as, bs;
  std::vector<float> c;

  Problem(DType d, uint32_t m_, uint32_t n_, uint32_t k_, float scale = 1.0f)
      : dtype(d), m(m_), n(n_), k(k_), fa(size_t(m_) * k_), fb(size_t(n_) * k_) {
    for (float& x : fa) x = rand_unit() * scale;
    for (float& x : fb) x = rand_unit() * scale;
    encode();
  }
  void encode() {
    a.assign(num::operand_bytes(dtype, m, k), 0);
    b.assign(num::operand_bytes(dtype, n, k), 0);
    as.assign(num::scale_bytes(dtype, m, k) + 1, 0);
    bs.assign(num::scale_bytes(dtype, n, k) + 1, 0);
    num::quantize_operand(dtype, fa.data(), m, k, a.data(), as.data());
    num::quantize_operand(dtype, fb.data(), n, k, b.data(), bs.data());
    c.assign(size_t(m) * n, -12345.0f);
  }
  GemmArgs args() {
    return GemmArgs{dtype, m, n, k, a.data(), as.data(), b.data(), bs.data(), c.data()};
  }
};

std::vector<float> g_scratch(kern::kGemmScratchMaxBytes / sizeof(float));

bool run(GemmArgs g, uint32_t begin, uint32_t end) {
  return kern::gemm_rows(g, begin, end, g_scratch.data(), g_scratch.size() * sizeof(float));
}

int setup(void**) {
  g_rng = 0x9E3779B9u;
  return 0;
}

void expect_verified(Problem& p) {
  GemmArgs g = p.args();
  assert_true(run(g, 0, p.m));
  kern::GemmCheck chk;
  const bool ok = kern::gemm_verify(g, &chk);
  if (!ok) {
    print_error("%s %ux%ux%u: %llu bad, first %llu, max ratio %g\n", num::dtype_name(p.dtype),
                p.m, p.n, p.k, (unsigned long long)chk.bad, (unsigned long long)chk.first_bad,
                chk.max_bound_ratio);
  }
  assert_true(ok);
  assert_int_equal(chk.elements, uint64_t(p.m) * p.n);
}

void test_every_dtype_matches_the_reference_on_odd_shapes(void**) {
  struct Shape {
    uint32_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 32},  {1, 3, 32},   {1, 3, 64},   {5, 3, 64},   {7, 9, 96},
                          {13, 37, 32}, {4, 8, 256},  {17, 33, 288}, {3, 70, 544}, {9, 41, 800}};
  for (DType d : kAll) {
    for (const Shape& s : shapes) {
      Problem p(d, s.m, s.n, s.k);
      expect_verified(p);
    }
  }
}

void test_random_shapes_and_magnitudes_stay_within_the_bound(void**) {
  for (int iter = 0; iter < 60; ++iter) {
    const DType d = kAll[iter % 5];
    rand_unit();  // advance the generator: the shape comes from its state
    const uint32_t m = 1 + g_rng % 23;
    const uint32_t n = 1 + (g_rng >> 8) % 41;
    uint32_t k = 1 + (g_rng >> 16) % 600;
    if (d == DType::kMXFP4) k = 32 * (1 + k % 19);
    const float scale = ldexpf(1.0f, int((g_rng >> 4) % 21) - 10);  // 2^-10 .. 2^10
    Problem p(d, m, n, k, scale);
    expect_verified(p);
  }
}

void test_non_mx_dtypes_accept_any_k(void**) {
  const uint32_t ks[] = {1, 3, 31, 33, 255, 257, 513};
  for (DType d : kAll) {
    if (d == DType::kMXFP4) continue;
    for (uint32_t k : ks) {
      Problem p(d, 6, 11, k);
      expect_verified(p);
    }
  }
}

void test_results_match_exactly_for_exact_small_integers(void**) {
  // Small integers are exact in every dtype (E2M1 holds 0..4 as +-{0,1,2,3,4}
  // when the block amax is 4) and so are all partial sums: the kernel must
  // give the exact answer, not just one within the bound.
  for (DType d : kAll) {
    Problem p(d, 5, 7, 64);
    for (size_t i = 0; i < p.fa.size(); ++i) p.fa[i] = float(int(i % 9) - 4);
    for (size_t i = 0; i < p.fb.size(); ++i) p.fb[i] = float(int((i * 7) % 9) - 4);
    p.encode();
    GemmArgs g = p.args();
    assert_true(run(g, 0, p.m));
    std::vector<double> ref(size_t(p.m) * p.n);
    kern::gemm_reference(g, ref.data(), nullptr);
    for (size_t i = 0; i < ref.size(); ++i) assert_true(double(p.c[i]) == ref[i]);
  }
}

void test_row_ranges_give_identical_bits(void**) {
  for (DType d : kAll) {
    Problem p(d, 23, 45, 320);
    GemmArgs g = p.args();
    assert_true(run(g, 0, p.m));
    const std::vector<float> whole = p.c;
    std::fill(p.c.begin(), p.c.end(), -1.0f);
    // Uneven split points that cut through register tiles: ranges of 1, 2,
    // 3, 7 (4 + 3), 1, 3 and 6 (4 + 2) rows reach every tail kernel.
    const uint32_t cuts[] = {0, 1, 3, 6, 13, 14, 17, 23};
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; ++i)
      assert_true(run(g, cuts[i], cuts[i + 1]));
    assert_memory_equal(whole.data(), p.c.data(), whole.size() * sizeof(float));
  }
}

void test_a_row_range_writes_only_its_rows(void**) {
  Problem p(DType::kBF16, 9, 10, 64);
  GemmArgs g = p.args();
  assert_true(run(g, 3, 6));
  for (uint32_t i = 0; i < p.m; ++i) {
    for (uint32_t j = 0; j < p.n; ++j) {
      const bool inside = i >= 3 && i < 6;
      assert_true((p.c[size_t(i) * p.n + j] == -12345.0f) != inside);
    }
  }
  assert_true(run(g, 4, 4));  // an empty range is fine and writes nothing
}

void test_nan_and_inf_propagate_to_their_row_and_column(void**) {
  for (DType d : kAll) {
    Problem p(d, 6, 5, 64);
    p.fa[size_t(2) * p.k + 17] = NAN;              // row 2 of A
    p.fb[size_t(3) * p.k + 40] = INFINITY;          // row 3 of B = column 3 of C
    p.encode();
    GemmArgs g = p.args();
    assert_true(run(g, 0, p.m));
    kern::GemmCheck chk;
    assert_true(kern::gemm_verify(g, &chk));
    for (uint32_t i = 0; i < p.m; ++i) {
      for (uint32_t j = 0; j < p.n; ++j) {
        const float v = p.c[size_t(i) * p.n + j];
        if (i == 2) {
          assert_true(isnan(v));
        } else if (j == 3) {
          // fp8 operands are quantized saturating: the inf becomes the max
          // finite value. MX makes the whole block NaN through the scale;
          // f32 and bf16 keep the inf (or NaN when it meets a zero).
          if (d == DType::kFP8E4M3 || d == DType::kFP8E5M2) {
            assert_true(isfinite(v));
          } else if (d == DType::kMXFP4) {
            assert_true(isnan(v));
          } else {
            assert_false(isfinite(v));
          }
        } else {
          assert_true(isfinite(v));
        }
      }
    }
  }
}

void test_mx_nan_scale_from_the_wire_poisons_its_block_only(void**) {
  Problem p(DType::kMXFP4, 3, 4, 64);
  p.bs[size_t(1) * (p.k / 32) + 1] = num::kE8M0Nan;  // B row 1, second block
  GemmArgs g = p.args();
  assert_true(run(g, 0, p.m));
  for (uint32_t i = 0; i < p.m; ++i) {
    for (uint32_t j = 0; j < p.n; ++j) assert_true(isnan(p.c[size_t(i) * p.n + j]) == (j == 1));
  }
}

void test_large_magnitudes_stay_within_the_bound(void**) {
  // Values near the top of each format's range, and tiny ones near the bottom.
  Problem big(DType::kFP8E5M2, 4, 6, 128, 5e4f);
  expect_verified(big);
  Problem tiny(DType::kMXFP4, 4, 6, 128, 1e-30f);
  expect_verified(tiny);
  Problem f32big(DType::kF32, 4, 6, 128, 1e15f);
  expect_verified(f32big);
}

void test_the_bound_catches_a_kernel_off_by_one_term(void**) {
  // A correct result passes; dropping the last product of one dot product
  // (an off-by-one in the k loop) must fail, so the bound is not vacuous.
  for (DType d : kAll) {
    Problem p(d, 4, 4, 64);
    GemmArgs g = p.args();
    assert_true(run(g, 0, p.m));
    std::vector<float> a(size_t(p.m) * p.k), b(size_t(p.n) * p.k);
    num::dequantize_operand(d, p.a.data(), p.as.data(), p.m, p.k, a.data());
    num::dequantize_operand(d, p.b.data(), p.bs.data(), p.n, p.k, b.data());
    // Pick an element whose last term is not negligible.
    size_t at = 0;
    float term = 0;
    for (size_t i = 0; i < p.c.size() && term == 0; ++i) {
      const size_t r = i / p.n, cidx = i % p.n;
      term = a[r * p.k + p.k - 1] * b[cidx * p.k + p.k - 1];
      at = i;
    }
    assert_true(term != 0);
    p.c[at] -= term;
    kern::GemmCheck chk;
    assert_false(kern::gemm_verify(g, &chk));
    assert_int_equal(chk.bad, 1);
    assert_int_equal(chk.first_bad, at);
  }
}

void test_bad_arguments_are_refused_without_writing(void**) {
  Problem p(DType::kMXFP4, 4, 4, 64);
  GemmArgs g = p.args();
  const size_t need = kern::gemm_scratch_bytes(g);
  assert_true(need <= kern::kGemmScratchMaxBytes);
  assert_false(kern::gemm_rows(g, 0, 4, g_scratch.data(), need - 1));
  assert_false(run(g, 3, 2));
  assert_false(run(g, 0, 5));
  GemmArgs bad = g;
  bad.dtype = DType(9);
  assert_false(run(bad, 0, 4));
  bad = g;
  bad.k = 48;
  assert_false(run(bad, 0, 4));
  bad = g;
  bad.b_scales = nullptr;
  assert_false(run(bad, 0, 4));
  bad = g;
  bad.c = nullptr;
  assert_false(run(bad, 0, 4));
  for (float v : p.c) assert_true(v == -12345.0f);
  assert_true(kern::gemm_rows(g, 0, 4, g_scratch.data(), need));
}

void test_scratch_is_small_and_any_float_alignment_works(void**) {
  Problem p(DType::kFP8E4M3, 5, 100, 1000);
  GemmArgs g = p.args();
  assert_true(kern::gemm_scratch_bytes(g) == kern::kGemmScratchMaxBytes);
  assert_true(kern::kGemmScratchMaxBytes <= 64 * 1024);
  // Small problems need less.
  Problem small(DType::kF32, 1, 3, 32);
  assert_true(kern::gemm_scratch_bytes(small.args()) < 2048);
  // Offset the scratch by one float: still correct.
  std::vector<float> buf(kern::kGemmScratchMaxBytes / 4 + 1);
  assert_true(kern::gemm_rows(g, 0, p.m, buf.data() + 1, kern::kGemmScratchMaxBytes));
  kern::GemmCheck chk;
  assert_true(kern::gemm_verify(g, &chk));
}

// The kernel's order of operations, written as plain scalar code: per chunk
// of kGemmKc values of k a sequential f32 sum of rounded products, stored in
// C for the first chunk and added to it for the next ones (MXFP4: per block,
// below). Both this file
// and the kernels are built without FMA contraction, so the kernel must
// match it bit for bit; the chip (same source, same IEEE operations) then
// matches the host too.
void sequential_gemm(const GemmArgs& g, const float* a, const float* b, float* c) {
  for (uint32_t i = 0; i < g.m; ++i) {
    for (uint32_t j = 0; j < g.n; ++j) {
      float cij = 0;
      for (uint32_t k0 = 0; k0 < g.k; k0 += kern::kGemmKc) {
        float s = 0;
        for (uint32_t p = k0; p < g.k && p < k0 + kern::kGemmKc; ++p) {
          const float prod = a[size_t(i) * g.k + p] * b[size_t(j) * g.k + p];
          s = s + prod;
        }
        cij = k0 == 0 ? s : cij + s;
      }
      c[size_t(i) * g.n + j] = cij;
    }
  }
}

// MXFP4's order: per k chunk, s = 0, then per block of 32
// s = s + (float(exact integer sum of 2a * 2b) * X_a/2) * X_b/2.
void sequential_mx_gemm(const Problem& p, float* c) {
  auto elem_x2 = [](const std::vector<uint8_t>& v, uint32_t row, uint32_t k, uint32_t kk) {
    const uint8_t byte = v[size_t(row) * (k / 2) + kk / 2];
    return int(num::e2m1_to_f32(uint8_t(kk % 2 ? byte >> 4 : byte & 0xF)) * 2.0f);
  };
  const uint32_t blocks_per_row = p.k / 32;
  for (uint32_t i = 0; i < p.m; ++i) {
    for (uint32_t j = 0; j < p.n; ++j) {
      float cij = 0;
      for (uint32_t k0 = 0; k0 < p.k; k0 += kern::kGemmKc) {
        float s = 0;
        for (uint32_t b0 = k0; b0 < p.k && b0 < k0 + kern::kGemmKc; b0 += 32) {
          int isum = 0;
          for (uint32_t kk = b0; kk < b0 + 32; ++kk) isum += elem_x2(p.a, i, p.k, kk) * elem_x2(p.b, j, p.k, kk);
          const float xa = num::e8m0_to_f32(p.as[size_t(i) * blocks_per_row + b0 / 32]) * 0.5f;
          const float xb = num::e8m0_to_f32(p.bs[size_t(j) * blocks_per_row + b0 / 32]) * 0.5f;
          s = s + (float(isum) * xa) * xb;
        }
        cij = k0 == 0 ? s : cij + s;
      }
      c[size_t(i) * p.n + j] = cij;
    }
  }
}

void test_gemm_equals_the_sequential_f32_sum_bit_for_bit(void**) {
  for (DType d : kAll) {
    Problem p(d, 11, 19, 576);
    GemmArgs g = p.args();
    assert_true(run(g, 0, p.m));
    std::vector<float> a(size_t(p.m) * p.k), b(size_t(p.n) * p.k), c(size_t(p.m) * p.n);
    num::dequantize_operand(d, p.a.data(), p.as.data(), p.m, p.k, a.data());
    num::dequantize_operand(d, p.b.data(), p.bs.data(), p.n, p.k, b.data());
    if (d == DType::kMXFP4) {
      sequential_mx_gemm(p, c.data());
    } else {
      sequential_gemm(g, a.data(), b.data(), c.data());
    }
    assert_memory_equal(c.data(), p.c.data(), c.size() * sizeof(float));
  }
}

void test_an_empty_sum_gives_zero_rows(void**) {
  Problem p(DType::kF32, 3, 5, 32);
  GemmArgs g = p.args();
  g.k = 0;
  assert_true(run(g, 1, 3));
  for (uint32_t i = 0; i < p.m; ++i) {
    for (uint32_t j = 0; j < p.n; ++j) assert_true(p.c[size_t(i) * p.n + j] == (i == 0 ? -12345.0f : 0.0f));
  }
}

void test_rows_per_call_amortise_b_and_follow_the_tile(void**) {
  auto shape = [](DType d, uint32_t m, uint32_t n, uint32_t k) {
    return GemmArgs{d, m, n, k, nullptr, nullptr, nullptr, nullptr, nullptr};
  };
  // 512^3 at 2^19 flops per chunk would be one row: raised to the minimum.
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kBF16, 512, 512, 512), 1u << 19),
                   kern::kGemmMinRowsPerCall);
  // Large targets round up to whole register tiles.
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kF32, 1000, 64, 64), 2ull * 64 * 64 * 37), 40);
  // MXFP4's faster path gets proportionally more rows.
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kMXFP4, 1000, 64, 64), 2ull * 64 * 64 * 5),
                   40);
  // Never more than m, never zero.
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kF32, 5, 64, 64), 1ull << 40), 5);
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kF32, 1, 1, 1), 0), 1);
  assert_int_equal(kern::gemm_rows_per_call(shape(DType::kF32, 0, 1, 1), 0), 1);
}

void test_flops_are_two_m_n_k(void**) {
  assert_true(kern::gemm_flops(256, 256, 256) == 2ull * 256 * 256 * 256);
  assert_true(kern::gemm_flops(1u << 19, 1u << 19, 1u << 21) == 1ull << 60);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_every_dtype_matches_the_reference_on_odd_shapes, setup),
      cmocka_unit_test_setup(test_random_shapes_and_magnitudes_stay_within_the_bound, setup),
      cmocka_unit_test_setup(test_non_mx_dtypes_accept_any_k, setup),
      cmocka_unit_test_setup(test_results_match_exactly_for_exact_small_integers, setup),
      cmocka_unit_test_setup(test_row_ranges_give_identical_bits, setup),
      cmocka_unit_test_setup(test_a_row_range_writes_only_its_rows, setup),
      cmocka_unit_test_setup(test_nan_and_inf_propagate_to_their_row_and_column, setup),
      cmocka_unit_test_setup(test_mx_nan_scale_from_the_wire_poisons_its_block_only, setup),
      cmocka_unit_test_setup(test_large_magnitudes_stay_within_the_bound, setup),
      cmocka_unit_test_setup(test_the_bound_catches_a_kernel_off_by_one_term, setup),
      cmocka_unit_test_setup(test_bad_arguments_are_refused_without_writing, setup),
      cmocka_unit_test_setup(test_scratch_is_small_and_any_float_alignment_works, setup),
      cmocka_unit_test_setup(test_gemm_equals_the_sequential_f32_sum_bit_for_bit, setup),
      cmocka_unit_test_setup(test_an_empty_sum_gives_zero_rows, setup),
      cmocka_unit_test_setup(test_rows_per_call_amortise_b_and_follow_the_tile, setup),
      cmocka_unit_test_setup(test_flops_are_two_m_n_k, setup),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
