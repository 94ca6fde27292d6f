// gemm_native_bench: GFLOP/s of the chip's GEMM kernel (kern::gemm_rows,
// the very source the firmware runs) compiled natively for the host, per
// dtype and shape, as the reference the chip's figures are divided by in the
// same run (issue 5, item 8: the ratio is the emulation overhead).
//
// What it is not: a tuned host BLAS. It measures our kernel, with the same
// blocking and one scratch tile per thread, as a NeuronCore runs it; with
// --threads N the rows are split into N contiguous ranges like the firmware's
// executors split a job.
//
// Beside it, per shape, OpenBLAS cblas_sgemm on f32 operands on one thread
// (the reference the tensor engines are held to, issue 13; vtrn-hw calls
// the same library the same way), best call: "openblas_sgemm" in the JSON.
//
// Every run is verified against the double host reference (within the
// documented bound, kernels_reference.h) unless --no-verify; a failed
// verification exits 1. Output: a table on stdout, or one JSON object with
// --json. Timing is wall-clock over repetitions until --min-time seconds
// (gflops), plus the process CPU time over the same repetitions
// (gflops_per_cpu: flops per CPU-second summed over threads), which moves
// much less than wall-clock on a loaded machine. Nothing here asserts on
// speed.
//
// Usage: gemm_native_bench [--sizes 256,512,64x48x96] [--dtypes all|fp32,bf16,...]
//                          [--threads N] [--min-time S] [--seed N] [--no-verify] [--json]
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "vtrn/hw/tensor_engine.h"
#include "vtrn/kernels.h"
#include "vtrn/kernels_reference.h"

using namespace vtrn;

namespace {

struct Shape {
  uint32_t m, n, k;
};

struct Options {
  std::vector<Shape> shapes{{256, 256, 256}, {512, 512, 512}};
  std::vector<num::DType> dtypes{num::DType::kF32, num::DType::kBF16, num::DType::kFP8E4M3,
                                 num::DType::kFP8E5M2, num::DType::kMXFP4};
  uint32_t threads = 1;
  double min_time = 0.3;
  uint32_t seed = 1;
  bool verify = true;
  bool json = false;
};

struct Result {
  num::DType dtype;
  Shape shape;
  uint64_t reps = 0;
  double seconds = 0;
  double gflops = 0;
  double cpu_seconds = 0;  // per GEMM, all threads
  double gflops_per_cpu = 0;
  bool verified = false;
  kern::GemmCheck check;
};

[[noreturn]] void usage_error(const char* what) {
  fprintf(stderr, "gemm_native_bench: %s\n", what);
  exit(2);
}

bool parse_u32(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');
  }
  if (v == 0 || v > 0xFFFFFFFFu) return false;
  *out = uint32_t(v);
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error((arg + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--sizes") {
      o.shapes.clear();
      for (const std::string& item : split(value(), ',')) {
        const std::vector<std::string> dims = split(item, 'x');
        Shape s{};
        if (dims.size() == 1 && parse_u32(dims[0], &s.m)) {
          s.n = s.k = s.m;
        } else if (!(dims.size() == 3 && parse_u32(dims[0], &s.m) && parse_u32(dims[1], &s.n) &&
                     parse_u32(dims[2], &s.k))) {
          usage_error(("--sizes: '" + item + "' is not N or MxNxK").c_str());
        }
        o.shapes.push_back(s);
      }
    } else if (arg == "--dtypes") {
      const std::string v = value();
      if (v != "all") {
        o.dtypes.clear();
        for (const std::string& name : split(v, ',')) {
          num::DType d;
          if (!num::parse_dtype(name.c_str(), &d))
            usage_error(("--dtypes: unknown dtype '" + name + "'").c_str());
          o.dtypes.push_back(d);
        }
      }
    } else if (arg == "--threads") {
      if (!parse_u32(value(), &o.threads) || o.threads > 256) usage_error("--threads: 1..256");
    } else if (arg == "--min-time") {
      char* end = nullptr;
      const std::string v = value();
      o.min_time = strtod(v.c_str(), &end);
      if (!end || *end || !(o.min_time >= 0 && o.min_time <= 600)) usage_error("--min-time: 0..600 seconds");
    } else if (arg == "--seed") {
      if (!parse_u32(value(), &o.seed)) usage_error("--seed: a positive integer");
    } else if (arg == "--no-verify") {
      o.verify = false;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--help" || arg == "-h") {
      printf("usage: gemm_native_bench [--sizes 256,512,MxNxK] [--dtypes all|fp32,bf16,fp8-e4m3,"
             "fp8-e5m2,mxfp4] [--threads N] [--min-time S] [--seed N] [--no-verify] [--json]\n");
      exit(0);
    } else {
      usage_error(("unknown option " + arg).c_str());
    }
  }
  return o;
}

struct Operands {
  std::vector<uint8_t> a, b, as, bs;
  std::vector<float> c;
};

Operands make_operands(num::DType d, const Shape& s, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1u;
  auto next = [&x]() {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return float(x % 2000001u) / 1000000.0f - 1.0f;
  };
  std::vector<float> fa(size_t(s.m) * s.k), fb(size_t(s.n) * s.k);
  for (float& v : fa) v = next();
  for (float& v : fb) v = next();
  Operands o;
  o.a.resize(num::operand_bytes(d, s.m, s.k));
  o.b.resize(num::operand_bytes(d, s.n, s.k));
  o.as.resize(num::scale_bytes(d, s.m, s.k) + 1);
  o.bs.resize(num::scale_bytes(d, s.n, s.k) + 1);
  num::quantize_operand(d, fa.data(), s.m, s.k, o.a.data(), o.as.data());
  num::quantize_operand(d, fb.data(), s.n, s.k, o.b.data(), o.bs.data());
  o.c.assign(size_t(s.m) * s.n, 0.0f);
  return o;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// One GEMM, rows split over `threads` workers (each with its own scratch).
bool run_once(const kern::GemmArgs& g, uint32_t threads, std::vector<std::vector<float>>& scratch) {
  if (threads == 1) {
    return kern::gemm_rows(g, 0, g.m, scratch[0].data(), scratch[0].size() * sizeof(float));
  }
  std::vector<std::thread> workers;
  std::vector<char> ok(threads, 0);
  for (uint32_t t = 0; t < threads; ++t) {
    const uint32_t begin = uint32_t(uint64_t(g.m) * t / threads);
    const uint32_t end = uint32_t(uint64_t(g.m) * (t + 1) / threads);
    workers.emplace_back([&, t, begin, end] {
      ok[t] = kern::gemm_rows(g, begin, end, scratch[t].data(), scratch[t].size() * sizeof(float));
    });
  }
  for (std::thread& w : workers) w.join();
  for (char v : ok)
    if (!v) return false;
  return true;
}

Result bench(num::DType d, const Shape& s, const Options& opt) {
  Result r;
  r.dtype = d;
  r.shape = s;
  Operands o = make_operands(d, s, opt.seed);
  const kern::GemmArgs g{d, s.m, s.n, s.k, o.a.data(), o.as.data(), o.b.data(), o.bs.data(),
                         o.c.data()};
  std::vector<std::vector<float>> scratch(
      opt.threads, std::vector<float>(kern::gemm_scratch_bytes(g) / sizeof(float) + 1));
  if (!run_once(g, opt.threads, scratch)) {
    fprintf(stderr, "gemm_native_bench: gemm_rows refused %s %ux%ux%u\n", num::dtype_name(d), s.m,
            s.n, s.k);
    exit(1);
  }
  using Clock = std::chrono::steady_clock;
  const double cpu0 = process_cpu_seconds();
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    if (!run_once(g, opt.threads, scratch)) exit(1);
    ++r.reps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < opt.min_time);
  r.cpu_seconds = (process_cpu_seconds() - cpu0) / double(r.reps);
  r.seconds = elapsed / double(r.reps);
  const double flops = double(kern::gemm_flops(s.m, s.n, s.k));
  r.gflops = flops / r.seconds * 1e-9;
  r.gflops_per_cpu = r.cpu_seconds > 0 ? flops / r.cpu_seconds * 1e-9 : 0;
  if (opt.verify) r.verified = kern::gemm_verify(g, &r.check);
  return r;
}

struct BlasResult {
  Shape shape;
  uint64_t reps = 0;
  double gflops = 0;
};

// OpenBLAS on one thread, f32 A[m, k] . B[n, k]^T: the best call of at
// least 3 over --min-time after one warm-up (the chip figures it is held
// to are best-of runs too; a loaded host makes a mean mostly noise).
BlasResult blas(const Shape& s, const Options& opt) {
  vtrn::hw::blas_single_threaded();
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.n) * s.k), c(size_t(s.m) * s.n);
  uint32_t x = opt.seed | 1;
  for (float& v : a) v = float(int32_t(x = x * 1664525u + 1013904223u) >> 8) * 0x1p-23f;
  for (float& v : b) v = float(int32_t(x = x * 1664525u + 1013904223u) >> 8) * 0x1p-23f;
  vtrn::hw::sgemm_abt(s.m, s.n, s.k, a.data(), b.data(), c.data(), s.n);
  using Clock = std::chrono::steady_clock;
  BlasResult r;
  r.shape = s;
  const auto start = Clock::now();
  double elapsed = 0, best = 0;
  do {
    const auto t0 = Clock::now();
    vtrn::hw::sgemm_abt(s.m, s.n, s.k, a.data(), b.data(), c.data(), s.n);
    const double one = std::chrono::duration<double>(Clock::now() - t0).count();
    best = r.reps == 0 || one < best ? one : best;
    ++r.reps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < opt.min_time || r.reps < 3);
  r.gflops = double(kern::gemm_flops(s.m, s.n, s.k)) / best * 1e-9;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  for (const Shape& s : opt.shapes) {
    for (num::DType d : opt.dtypes) {
      const vtrn::Error err = num::check_gemm(d, s.m, s.n, s.k);
      if (!err.ok()) {
        fprintf(stderr, "gemm_native_bench: %s %ux%ux%u: %s\n", num::dtype_name(d), s.m, s.n, s.k,
                err.detail());
        return 2;
      }
    }
  }
  std::vector<Result> results;
  bool all_ok = true;
  for (const Shape& s : opt.shapes) {
    for (num::DType d : opt.dtypes) {
      results.push_back(bench(d, s, opt));
      if (opt.verify && !results.back().verified) all_ok = false;
    }
  }
  std::vector<BlasResult> blas_results;
  for (const Shape& s : opt.shapes) blas_results.push_back(blas(s, opt));
  if (opt.json) {
    printf("{\"bench\":\"gemm_native\",\"threads\":%u,\"min_time_s\":%g,\"verify\":%s,\"results\":[",
           opt.threads, opt.min_time, opt.verify ? "true" : "false");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      printf("%s{\"dtype\":\"%s\",\"m\":%u,\"n\":%u,\"k\":%u,\"flops\":%llu,\"reps\":%llu,"
             "\"seconds\":%.9g,\"gflops\":%.6g,\"cpu_seconds\":%.9g,\"gflops_per_cpu\":%.6g",
             i ? "," : "", num::dtype_name(r.dtype), r.shape.m, r.shape.n, r.shape.k,
             (unsigned long long)kern::gemm_flops(r.shape.m, r.shape.n, r.shape.k),
             (unsigned long long)r.reps, r.seconds, r.gflops, r.cpu_seconds, r.gflops_per_cpu);
      if (opt.verify) {
        printf(",\"verified\":%s,\"bad\":%llu,\"max_abs_err\":%.6g,\"max_rel_err\":%.6g,"
               "\"max_bound_ratio\":%.6g",
               r.verified ? "true" : "false", (unsigned long long)r.check.bad, r.check.max_abs_err,
               r.check.max_rel_err, r.check.max_bound_ratio);
      }
      printf("}");
    }
    printf("],\"openblas_sgemm\":[");
    for (size_t i = 0; i < blas_results.size(); ++i) {
      const BlasResult& b = blas_results[i];
      printf("%s{\"m\":%u,\"n\":%u,\"k\":%u,\"threads\":1,\"reps\":%llu,\"gflops\":%.6g}", i ? "," : "",
             b.shape.m, b.shape.n, b.shape.k, (unsigned long long)b.reps, b.gflops);
    }
    printf("]}\n");
  } else {
    printf("%-9s %17s %8s %12s %10s %12s %s\n", "dtype", "m x n x k", "reps", "ms/gemm", "GFLOP/s",
           "GFLOP/cpu-s",
           opt.verify ? "verified (max err / bound)" : "");
    for (const Result& r : results) {
      char shape[40];
      snprintf(shape, sizeof shape, "%ux%ux%u", r.shape.m, r.shape.n, r.shape.k);
      printf("%-9s %17s %8llu %12.3f %10.3f %12.3f", num::dtype_name(r.dtype), shape,
             (unsigned long long)r.reps, r.seconds * 1e3, r.gflops, r.gflops_per_cpu);
      if (opt.verify) printf(" %s (%.3g)", r.verified ? "ok" : "FAILED", r.check.max_bound_ratio);
      printf("\n");
    }
    for (const BlasResult& b : blas_results) {
      printf("openblas_sgemm %ux%ux%u, 1 thread: %.3f GFLOP/s\n", b.shape.m, b.shape.n, b.shape.k, b.gflops);
    }
  }
  if (!all_ok) fprintf(stderr, "gemm_native_bench: verification against the host reference failed\n");
  return all_ok ? 0 : 1;
}
