// Host reference GEMM and its verification (kernels_reference.h). Decodes
// both operands once with num::dequantize_operand (the kernels' own decode
// rules) and accumulates in double; O(m n k), so callers keep shapes modest.
#include "vtrn/kernels_reference.h"

#include <math.h>

#include <vector>

namespace vtrn::kern {

void gemm_reference(const GemmArgs& g, double* c, double* abs_sum) {
  std::vector<float> a(size_t(g.m) * g.k), b(size_t(g.n) * g.k);
  num::dequantize_operand(g.dtype, g.a, g.a_scales, g.m, g.k, a.data());
  num::dequantize_operand(g.dtype, g.b, g.b_scales, g.n, g.k, b.data());
  std::vector<double> arow(g.k);
  for (uint32_t i = 0; i < g.m; ++i) {
    for (uint32_t p = 0; p < g.k; ++p) arow[p] = a[size_t(i) * g.k + p];
    // Four columns at a time: independent sums the CPU can overlap; each is
    // still a plain sequential double sum.
    uint32_t j = 0;
    for (; j + 4 <= g.n; j += 4) {
      const float* b0 = b.data() + size_t(j) * g.k;
      const float* b1 = b0 + g.k;
      const float* b2 = b1 + g.k;
      const float* b3 = b2 + g.k;
      double s[4] = {0, 0, 0, 0}, sa[4] = {0, 0, 0, 0};
      for (uint32_t p = 0; p < g.k; ++p) {
        const double x = arow[p];
        const double t0 = x * b0[p], t1 = x * b1[p], t2 = x * b2[p], t3 = x * b3[p];
        s[0] += t0;
        s[1] += t1;
        s[2] += t2;
        s[3] += t3;
        sa[0] += fabs(t0);
        sa[1] += fabs(t1);
        sa[2] += fabs(t2);
        sa[3] += fabs(t3);
      }
      for (int q = 0; q < 4; ++q) {
        c[size_t(i) * g.n + j + q] = s[q];
        if (abs_sum) abs_sum[size_t(i) * g.n + j + q] = sa[q];
      }
    }
    for (; j < g.n; ++j) {
      const float* brow = b.data() + size_t(j) * g.k;
      double s = 0, sa = 0;
      for (uint32_t p = 0; p < g.k; ++p) {
        const double t = arow[p] * double(brow[p]);
        s += t;
        sa += fabs(t);
      }
      c[size_t(i) * g.n + j] = s;
      if (abs_sum) abs_sum[size_t(i) * g.n + j] = sa;
    }
  }
}

double gemm_error_bound(DType, uint32_t k, double abs_sum) {
  const double u = 0x1p-24;
  const double j = double(k) + 1.0;
  const double gamma = j * u / (1.0 - j * u);
  return gamma * abs_sum + j * 0x1p-149;
}

bool gemm_verify(const GemmArgs& g, GemmCheck* out) {
  GemmCheck r;
  const size_t count = size_t(g.m) * g.n;
  r.elements = count;
  std::vector<double> ref(count), sabs(count);
  gemm_reference(g, ref.data(), sabs.data());
  for (size_t i = 0; i < count; ++i) {
    const double want = ref[i];
    const double got = g.c[i];
    bool ok;
    if (isnan(want)) {
      ok = isnan(got);
    } else if (isinf(want)) {
      ok = got == want;
    } else if (!isfinite(got)) {
      ok = false;
    } else {
      const double err = fabs(got - want);
      const double bound = gemm_error_bound(g.dtype, g.k, sabs[i]);
      ok = err <= bound;
      if (err > r.max_abs_err) r.max_abs_err = err;
      const double rel = err / fmax(fabs(want), 0x1p-126);
      if (rel > r.max_rel_err) r.max_rel_err = rel;
      const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
      if (ratio > r.max_bound_ratio) r.max_bound_ratio = ratio;
    }
    if (!ok) {
      if (r.bad == 0) r.first_bad = i;
      ++r.bad;
    }
  }
  *out = r;
  return r.bad == 0;
}

}  // namespace vtrn::kern
