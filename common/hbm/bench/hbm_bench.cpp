// hbm_bench: native benchmark of the HBM allocator core against glibc
// malloc/free on the same trace in the same run (issue 4's figures).
//
// Trace: buffers of 4 KiB..16 MiB (log-uniform, arbitrary byte counts) with
// about 100 live at a time (90..110), alternating allocate and free of a
// random live buffer. Each allocator replays the identical trace: once to
// warm up, then three timed passes without per-op timers (ops/s, median
// pass reported), then one pass timing every op (percentiles; the
// steady_clock read overhead, printed too, is included in them). glibc is
// told to serve everything from its heap (M_MMAP_THRESHOLD above the
// largest size, M_TRIM_THRESHOLD high) and no buffer is touched.
//
// Fragmentation: a churn trace over 512 MiB of HBM holding occupancy
// between 50% and 70%, sampling 1 - largest_free / total_free every 1000
// operations after a warm-up and at the end.
//
// It prints measurements only; thresholds belong to whoever reads them
// (no pass/fail, so it is not a ctest). --json prints the same data.
#include <malloc.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "vtrn/hbm.h"

using vtrn::hbm::Allocator;
using vtrn::hbm::Category;
using vtrn::hbm::Config;
using vtrn::hbm::Error;
using vtrn::hbm::Stats;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
using Clock = std::chrono::steady_clock;

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

uint64_t random_size(Rng& r) {
  uint32_t shift = 12 + uint32_t(r.below(13));  // 4 KiB .. 16 MiB
  uint64_t hi = 1ull << shift;
  return std::min<uint64_t>(16 * kMiB, hi / 2 + 1 + r.below(hi / 2));
}

// One trace step: allocate `size` into slot, or free slot (size 0).
struct Op {
  uint32_t slot;
  uint64_t size;
};

std::vector<Op> make_trace(uint64_t seed, uint32_t ops) {
  Rng r{seed};
  std::vector<Op> trace;
  trace.reserve(ops);
  std::vector<uint32_t> live, spare;
  uint32_t slots = 0;
  while (trace.size() < ops) {
    bool alloc = live.size() < 90 || (live.size() <= 110 && r.below(2) == 0);
    if (alloc) {
      uint32_t s;
      if (spare.empty()) s = slots++;
      else {
        s = spare.back();
        spare.pop_back();
      }
      live.push_back(s);
      trace.push_back({s, random_size(r)});
    } else {
      size_t i = r.below(live.size());
      uint32_t s = live[i];
      live[i] = live.back();
      live.pop_back();
      spare.push_back(s);
      trace.push_back({s, 0});
    }
  }
  for (uint32_t s : live) trace.push_back({s, 0});  // end empty so passes repeat
  return trace;
}

uint32_t slot_count(const std::vector<Op>& t) {
  uint32_t n = 0;
  for (const Op& op : t) n = std::max(n, op.slot + 1);
  return n;
}

struct HbmRunner {
  Allocator alloc;
  std::vector<uint64_t> arena;
  std::vector<uint64_t> addr;
  uint64_t failures = 0;
  explicit HbmRunner(const Config& c, uint32_t slots)
      : arena(Allocator::arena_bytes(c.limits) / 8 + 1), addr(slots) {
    if (alloc.init(c, arena.data(), arena.size() * 8) != Error::kOk) abort();
  }
  inline void step(const Op& op) {
    if (op.size) {
      if (alloc.allocate(op.slot & 7, Category::kTensors, op.size, 0, &addr[op.slot]) !=
          Error::kOk) {
        addr[op.slot] = 0;
        failures++;
      }
    } else if (addr[op.slot] != 0) {
      if (alloc.free(addr[op.slot]) != Error::kOk) abort();
    }
  }
};

struct MallocRunner {
  std::vector<void*> ptr;
  uint64_t failures = 0;
  explicit MallocRunner(uint32_t slots) : ptr(slots) {}
  inline void step(const Op& op) {
    if (op.size) {
      ptr[op.slot] = malloc(op.size);
      if (ptr[op.slot] == nullptr) failures++;
      // Keep the compiler from pairing the malloc with the free below.
      asm volatile("" : : "r"(ptr[op.slot]) : "memory");
    } else {
      free(ptr[op.slot]);
      ptr[op.slot] = nullptr;
    }
  }
};

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Result {
  const char* name;
  double ops_per_s = 0;       // per second of this thread's CPU time
  double wall_ops_per_s = 0;  // per second of wall time
  double p50 = 0, p99 = 0, p9999 = 0, max = 0;  // ns
  uint64_t failures = 0;
};

template <typename Runner>
Result measure(const char* name, Runner& run, const std::vector<Op>& trace) {
  Result res;
  res.name = name;
  for (const Op& op : trace) run.step(op);  // warm-up: heap grown, metadata hot
  // Three passes of each kind, the median reported: the machine is shared,
  // and CPU time (user + system, this thread only) is immune to being
  // descheduled where wall time is not.
  double cpu[3], wall[3];
  for (int i = 0; i < 3; ++i) {
    double c0 = thread_cpu_s();
    auto t0 = Clock::now();
    for (const Op& op : trace) run.step(op);
    auto t1 = Clock::now();
    double c1 = thread_cpu_s();
    cpu[i] = double(trace.size()) / (c1 - c0);
    wall[i] = double(trace.size()) / std::chrono::duration<double>(t1 - t0).count();
  }
  std::sort(cpu, cpu + 3);
  std::sort(wall, wall + 3);
  res.ops_per_s = cpu[1];
  res.wall_ops_per_s = wall[1];
  std::vector<uint32_t> lat(trace.size());
  double p50[3], p99[3], p9999[3], mx[3];
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < trace.size(); ++i) {
      auto t0 = Clock::now();
      run.step(trace[i]);
      auto t1 = Clock::now();
      lat[i] = uint32_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    }
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double q) { return double(lat[size_t(q * double(lat.size() - 1))]); };
    p50[pass] = pct(0.50);
    p99[pass] = pct(0.99);
    p9999[pass] = pct(0.9999);
    mx[pass] = double(lat.back());
  }
  for (double* v : {p50, p99, p9999, mx}) std::sort(v, v + 3);
  res.p50 = p50[1];
  res.p99 = p99[1];
  res.p9999 = p9999[1];
  res.max = mx[1];
  res.failures = run.failures;
  return res;
}

double timer_overhead_ns() {
  std::vector<uint32_t> v(100000);
  for (auto& x : v) {
    auto t0 = Clock::now();
    auto t1 = Clock::now();
    x = uint32_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Frag {
  double final_frag = 0, mean = 0, median = 0, max = 0;
  double occupancy = 0;
  uint64_t ops = 0, failures = 0, samples = 0;
};

Frag churn(uint64_t seed, uint32_t ops) {
  Config c;
  c.geometry.stacks = 2;
  c.geometry.bytes_per_stack = 256 * kMiB;
  c.geometry.page_bytes = 4 * kKiB;
  c.geometry.channels = 8;
  c.limits.max_allocations = 4096;
  HbmRunner run(c, 4096);
  Rng r{seed};
  std::vector<uint32_t> live, spare;
  for (uint32_t i = 4095; i < 4096; --i) spare.push_back(i);
  const uint64_t total = run.alloc.total_bytes();
  std::vector<double> samples;
  Stats s;
  Frag f;
  for (uint32_t i = 0; i < ops; ++i) {
    run.alloc.stats(&s);
    double occ = double(s.used_bytes) / double(total);
    bool alloc = occ < 0.5 || (occ <= 0.7 && r.below(2) == 0);
    if (alloc && !spare.empty()) {
      uint32_t slot = spare.back();
      uint64_t before = run.failures;
      run.step({slot, random_size(r)});
      if (run.failures == before) {
        spare.pop_back();
        live.push_back(slot);
      }
    } else if (!live.empty()) {
      size_t k = r.below(live.size());
      run.step({live[k], 0});
      spare.push_back(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (i >= ops / 10 && i % 1000 == 0) {
      run.alloc.stats(&s);
      samples.push_back(s.fragmentation);
    }
  }
  run.alloc.stats(&s);
  f.final_frag = s.fragmentation;
  f.occupancy = double(s.used_bytes) / double(total);
  f.ops = ops;
  f.failures = run.failures;
  f.samples = samples.size();
  double sum = 0;
  for (double x : samples) sum += x;
  std::sort(samples.begin(), samples.end());
  f.mean = samples.empty() ? 0 : sum / double(samples.size());
  f.median = samples.empty() ? 0 : samples[samples.size() / 2];
  f.max = samples.empty() ? 0 : samples.back();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  uint64_t seed = 42;
  uint32_t ops = 1000000;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) json = true;
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 0);
    else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) ops = uint32_t(strtoul(argv[++i], nullptr, 0));
    else {
      fprintf(stderr, "usage: hbm_bench [--json] [--seed N] [--ops N]\n");
      return 2;
    }
  }
  // Largest trace buffer is 16 MiB; 32 MiB is glibc's ceiling for this knob.
  if (mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024) != 1 || mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1) {
    fprintf(stderr, "hbm_bench: mallopt refused the heap-only settings\n");
    return 1;
  }
  std::vector<Op> trace = make_trace(seed, ops);
  uint32_t slots = slot_count(trace);

  Config c;
  c.geometry.stacks = 4;
  c.geometry.bytes_per_stack = 256 * kMiB;  // 1 GiB: the trace never runs out
  c.geometry.page_bytes = 4 * kKiB;
  c.geometry.channels = 8;
  c.limits.max_allocations = 1024;
  HbmRunner hbm(c, slots);
  MallocRunner glibc(slots);
  Result rh = measure("vtrn::hbm", hbm, trace);
  Result rg = measure("glibc malloc", glibc, trace);
  double overhead = timer_overhead_ns();
  Frag frag = churn(seed + 1, 200000);
  double load = 0;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &load) != 1) load = 0;
    fclose(f);
  }

  if (json) {
    auto row = [](const Result& r) {
      printf("{\"name\":\"%s\",\"ops_per_s\":%.0f,\"wall_ops_per_s\":%.0f,\"p50_ns\":%.0f,\"p99_ns\":%.0f,"
             "\"p9999_ns\":%.0f,\"max_ns\":%.0f,\"failures\":%llu}",
             r.name, r.ops_per_s, r.wall_ops_per_s, r.p50, r.p99, r.p9999, r.max, (unsigned long long)r.failures);
    };
    printf("{\"trace\":{\"seed\":%llu,\"ops\":%zu,\"min_bytes\":4096,\"max_bytes\":%llu,"
           "\"live\":\"90..110\"},\"loadavg\":%.2f,\"timer_overhead_ns\":%.0f,\"allocators\":[",
           (unsigned long long)seed, trace.size(), (unsigned long long)(16 * kMiB), load, overhead);
    row(rh);
    printf(",");
    row(rg);
    printf("],\"ratios\":{\"ops_per_s\":%.2f,\"wall_ops_per_s\":%.2f,\"p99\":%.2f,\"p9999\":%.2f,\"max\":%.2f},",
           rh.ops_per_s / rg.ops_per_s, rh.wall_ops_per_s / rg.wall_ops_per_s, rg.p99 / rh.p99, rg.p9999 / rh.p9999, rg.max / rh.max);
    printf("\"fragmentation\":{\"hbm_bytes\":%llu,\"ops\":%llu,\"occupancy_band\":\"0.50..0.70\","
           "\"final\":%.4f,\"final_occupancy\":%.3f,\"mean\":%.4f,\"median\":%.4f,\"max\":%.4f,"
           "\"samples\":%llu,\"failures\":%llu}}\n",
           (unsigned long long)(512 * kMiB), (unsigned long long)frag.ops, frag.final_frag,
           frag.occupancy, frag.mean, frag.median, frag.max, (unsigned long long)frag.samples,
           (unsigned long long)frag.failures);
    return 0;
  }
  printf("trace: %zu ops, buffers 4 KiB..16 MiB (log-uniform), 90..110 live, seed %llu\n",
         trace.size(), (unsigned long long)seed);
  printf("ops/s per CPU-second of the thread (wall-clock in brackets); latencies are wall\n"
         "time including one steady_clock read pair (%.0f ns median); load average %.2f;\n"
         "each figure is the median of 3 passes\n\n", overhead, load);
  printf("%-14s %12s %14s %9s %9s %10s %10s %9s\n", "allocator", "ops/s", "(wall ops/s)",
         "p50 ns", "p99 ns", "p99.99 ns", "max ns", "failures");
  for (const Result* r : {&rh, &rg})
    printf("%-14s %12.0f %14.0f %9.0f %9.0f %10.0f %10.0f %9llu\n", r->name, r->ops_per_s,
           r->wall_ops_per_s, r->p50, r->p99, r->p9999, r->max, (unsigned long long)r->failures);
  printf("%-14s %11.2fx %13.2fx %8.2fx %8.2fx %9.2fx %9.2fx\n", "hbm advantage",
         rh.ops_per_s / rg.ops_per_s, rh.wall_ops_per_s / rg.wall_ops_per_s, rg.p50 / rh.p50,
         rg.p99 / rh.p99, rg.p9999 / rh.p9999, rg.max / rh.max);
  printf("\nfragmentation (1 - largest free / free), 512 MiB HBM, occupancy 50..70%%, %llu ops:\n",
         (unsigned long long)frag.ops);
  printf("  final %.2f%% at %.1f%% occupancy; over %llu samples mean %.2f%%, median %.2f%%, "
         "max %.2f%%; %llu failed allocations\n",
         100 * frag.final_frag, 100 * frag.occupancy, (unsigned long long)frag.samples,
         100 * frag.mean, 100 * frag.median, 100 * frag.max, (unsigned long long)frag.failures);
  return 0;
}
