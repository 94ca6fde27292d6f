// hbm_bench: native benchmark of the HBM allocator core against two
// references on the same traces in the same run: glibc malloc/free, and a
// power-of-two segregated free list over the same HBM range
// (hbm_bench_pow2.h, the simplest constant-time allocator: what vtrn::hbm
// spends above it is the price of its features).
//
// Traces (hbm_bench_traces.h): sizes log-uniform over 4 KiB..16 MiB, about
// 100 live (allocate below 90, free a uniformly random live buffer above
// 110, a coin toss between). Each allocator replays the identical trace,
// which ends empty so every replay starts from the same state.
//
//  - ops/s: a warm-up replay, then --passes whole replays timed as one batch
//    each (no clock read per op); CPU time of this thread, so being
//    descheduled does not count. The allocators take turns pass by pass, so
//    a noisy stretch of the shared machine hits all of them. Best and
//    median pass are printed; the ratios use the best of each (noise only
//    ever slows a pass down). A round is one pass of each allocator back to
//    back; the ratio within each round is printed too (median, best and
//    worst over the rounds), the figure least moved by load that comes and
//    goes between rounds.
//    The replay loop alone (the same walk of the trace and slot stores, no
//    allocator) is timed the same way after them: its ns per op are part of
//    every allocator's figure.
//  - latency: --lat-passes further replays timing every op, in turns too (one
//    steady_clock pair per op, overhead printed). The shared machine
//    preempts often, so two summaries: each percentile's minimum over the
//    passes, and percentiles of each op's minimum over the passes (op i
//    does the same work in every replay; a preemption rarely hits the same
//    op in every pass). The ops over 5 us of each pass are counted with the
//    spacing of their starts: on the shared VM they come 1000 us apart, the
//    kernel's 1 kHz timer tick, ~150..180 of them in a pass of ~170 ms, so
//    the p99.99 of a pass (its 100th slowest op of 1,000,000) is a tick's
//    cost (~13 us) whatever the allocator does; the per-op minimum is the
//    allocator's own tail. Its max (~2 us) is the first op of a pass, on
//    caches the sort of the previous pass's times has just flushed; the
//    next slowest (~400 ns) are ops whose trace entry is the last of a
//    4 KiB page of the trace.
//  - fragmentation: the churn trace (page-rounded live bytes held at 50% to
//    70% of 320 MiB, ~100 live, random lifetimes), 200,000 ops, sampled
//    every 1,000 ops after the first 10%. The vtrn allocator manages
//    320 MiB of HBM; glibc replays the same ops on its heap, and its free
//    space is measured from outside: the gaps between live buffers within
//    [lowest buffer ever returned, sbrk(0)), so both report
//    1 - largest free / total free over the same live set. glibc's churn
//    runs first, on a fresh heap, so nothing else lives in that window.
//    The samples are also split by the occupancy at the sample (bands of
//    five points over 50..70%), and for vtrn::hbm the second-largest free
//    block's share of the free bytes is printed: the fragmentation can
//    never be below it (see the fragmentation note in vtrn/hbm.h).
//    With stitching (vtrn/hbm.h) two figures: "allocatable" (the largest
//    request that would succeed now, the definition) and
//    "contiguous" (the largest single free block), from the same run.
//    Every churn op is also timed: ops that stitch or free a stitched
//    allocation are their own latency row, with the mapper's page-table
//    writes included (a flat table of 8-byte entries, one per page, as
//    the firmware's level-3 table).
//    The power-of-two lists replay the churn too, in the same 320 MiB:
//    their failures are what rounding up and never coalescing cost.
//  - worst case: Allocator::worst_case_hbm_bytes for the churn's own
//    maxima (live bytes, live count) and its largest request, next to the
//    HBM the churn actually ran in, with the remap window the sizing rule
//    asks for and the bound without stitching.
//
// glibc is told to serve everything from its heap (M_MMAP_THRESHOLD above
// the largest size, M_TRIM_THRESHOLD maximal); no buffer is ever touched.
// --only hbm|glibc|pow2 replays the trace --passes times with no timing at
// all, for `valgrind --tool=callgrind` instruction counts per op.
// It prints measurements only, no pass/fail (so it is not a ctest); --json
// prints the same data.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>  // sbrk

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "hbm_bench_pow2.h"
#include "hbm_bench_traces.h"
#include "vtrn/hbm.h"

using vtrn::hbm::Allocator;
using vtrn::hbm::Category;
using vtrn::hbm::Config;
using vtrn::hbm::Error;
using vtrn::hbm::Stats;

namespace {

using namespace vtrn::hbm::bench;
using Clock = std::chrono::steady_clock;

// The bench's page tables: one 8-byte entry per page of the remap window,
// written on map and cleared on unmap (the work the firmware's MMU does,
// without the TLB maintenance).
struct FlatTable {
  std::vector<uint64_t> pte;
  uint64_t base = 0;
  static bool map(void* ctx, uint64_t va, uint64_t pa, uint64_t bytes) {
    auto* t = static_cast<FlatTable*>(ctx);
    uint64_t* e = t->pte.data() + (va - t->base) / kPage;
    for (uint64_t off = 0; off < bytes; off += kPage) *e++ = (pa + off) | 3;
    return true;
  }
  static void unmap(void* ctx, uint64_t va, uint64_t bytes) {
    auto* t = static_cast<FlatTable*>(ctx);
    memset(t->pte.data() + (va - t->base) / kPage, 0, bytes / kPage * sizeof(uint64_t));
  }
};

Config hbm_config(uint64_t total, FlatTable* table, vtrn::hbm::Mapper* mapper) {
  Config c;
  c.geometry.stacks = 2;
  c.geometry.bytes_per_stack = total / 2;
  c.geometry.page_bytes = kPage;
  c.geometry.channels = 8;
  // Not 0: the runners use address 0 for "no buffer in this slot".
  c.base = kDeviceBase;
  c.limits.max_allocations = 1024;
  // The remap window right after 64 GiB of device addresses: far from the
  // HBM, 4x its size (the default).
  c.remap_base = kDeviceBase + 64 * 1024 * kMiB;
  table->base = c.remap_base;
  table->pte.assign(4 * total / kPage, 0);
  *mapper = vtrn::hbm::Mapper{table, &FlatTable::map, &FlatTable::unmap};
  c.mapper = mapper;
  return c;
}

struct HbmRunner {
  Allocator alloc;
  std::vector<uint64_t> arena;
  std::vector<uint64_t> addr;
  uint64_t failures = 0;
  HbmRunner(const Config& c, uint32_t slots)
      : arena(Allocator::arena_bytes(c) / 8 + 1), addr(slots) {
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
      addr[op.slot] = 0;
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

struct Pow2Runner {
  Pow2Lists lists;
  std::vector<uint64_t> addr;
  uint64_t failures = 0;
  Pow2Runner(uint64_t bytes, uint32_t slots) : lists(kDeviceBase, bytes, kPage), addr(slots) {}
  inline void step(const Op& op) {
    if (op.size) {
      addr[op.slot] = lists.allocate(op.size);
      if (addr[op.slot] == 0) failures++;
    } else if (addr[op.slot] != 0) {
      lists.free(addr[op.slot]);
      addr[op.slot] = 0;
    }
  }
};

// The harness alone: the same walk of the trace, the same branch between
// allocate and free and the same slot stores, with no allocator behind them.
// Its time per op is inside every allocator's figure above (and bounds how
// far any ratio to glibc can go: an allocator that took no time at all would
// show glibc's ns/op divided by this).
struct ReplayOnlyRunner {
  std::vector<uint64_t> addr;
  uint64_t failures = 0;
  explicit ReplayOnlyRunner(uint32_t slots) : addr(slots) {}
  inline void step(const Op& op) {
    if (op.size) {
      addr[op.slot] = op.size;
      asm volatile("" : : "r"(addr[op.slot]) : "memory");
    } else if (addr[op.slot] != 0) {
      asm volatile("" : : "r"(addr[op.slot]) : "memory");
      addr[op.slot] = 0;
    }
  }
};

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Pcts {
  double p50 = 0, p99 = 0, p9999 = 0, max = 0;
};

Pcts percentiles(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return double(v[size_t(q * double(v.size() - 1))]); };
  return Pcts{at(0.50), at(0.99), at(0.9999), double(v.back())};
}

// An op slower than this in a latency pass is counted with its start time
// (Result::slow_ops): 5 us is far above anything the allocators' own work
// takes on this trace (the per-op minima) and below an interrupt's cost.
constexpr uint32_t kSlowNs = 5000;

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Result {
  const char* name = "";
  double best_ops = 0, median_ops = 0;  // per CPU-second of this thread
  double best_wall_ops = 0;
  std::vector<double> rounds;  // ops per CPU-second of each timed pass, in order
  Pcts pass_min;  // each percentile's minimum over the latency passes
  Pcts op_min;    // percentiles of each op's minimum over the passes
  // Ops over kSlowNs in a latency pass, and the spacing of their starts
  // (medians over the passes): what a periodic interruption looks like.
  double slow_ops = 0, slow_gap_us = 0, lat_pass_ms = 0;
  uint64_t failures = 0;
};

// One allocator under measurement: its runner behind plain functions, so
// that passes of different allocators interleave with one indirect call
// per pass and none per op.
struct Subject {
  const char* name;
  void* runner;
  void (*replay)(void* runner, const std::vector<Op>& trace);
  void (*replay_timed)(void* runner, const std::vector<Op>& trace, std::vector<uint32_t>* ns,
                       std::vector<double>* slow_at_us);
  uint64_t (*failures)(void* runner);
};

template <typename Runner>
Subject subject(const char* name, Runner& run) {
  return Subject{
      name, &run,
      [](void* r, const std::vector<Op>& t) {
        for (const Op& op : t) static_cast<Runner*>(r)->step(op);
      },
      [](void* r, const std::vector<Op>& t, std::vector<uint32_t>* ns,
         std::vector<double>* slow_at_us) {
        slow_at_us->clear();
        auto start = Clock::now();
        for (size_t i = 0; i < t.size(); ++i) {
          auto t0 = Clock::now();
          static_cast<Runner*>(r)->step(t[i]);
          auto t1 = Clock::now();
          (*ns)[i] =
              uint32_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
          if ((*ns)[i] > kSlowNs) [[unlikely]]
            slow_at_us->push_back(std::chrono::duration<double, std::micro>(t0 - start).count());
        }
        slow_at_us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      },
      [](void* r) { return static_cast<Runner*>(r)->failures; }};
}

// Pass k of every subject runs before pass k + 1 of any, so a stretch of
// machine noise slows all of them alike instead of one allocator's passes.
std::vector<Result> measure(const std::vector<Subject>& subjects, const std::vector<Op>& trace,
                            int passes, int lat_passes) {
  size_t n = subjects.size();
  for (const Subject& s : subjects) s.replay(s.runner, trace);  // warm-up: heap grown, metadata hot
  std::vector<std::vector<double>> cpu(n), wall(n);
  for (int i = 0; i < passes; ++i)
    for (size_t k = 0; k < n; ++k) {
      double c0 = thread_cpu_s();
      auto t0 = Clock::now();
      subjects[k].replay(subjects[k].runner, trace);
      auto t1 = Clock::now();
      double c1 = thread_cpu_s();
      cpu[k].push_back(double(trace.size()) / (c1 - c0));
      wall[k].push_back(double(trace.size()) / std::chrono::duration<double>(t1 - t0).count());
    }
  std::vector<Result> res(n);
  std::vector<uint32_t> lat(trace.size());
  std::vector<std::vector<uint32_t>> op_min(n, std::vector<uint32_t>(trace.size(), UINT32_MAX));
  for (size_t k = 0; k < n; ++k) {
    res[k].rounds = cpu[k];
    std::sort(cpu[k].begin(), cpu[k].end());
    std::sort(wall[k].begin(), wall[k].end());
    res[k].name = subjects[k].name;
    res[k].best_ops = cpu[k].back();
    res[k].median_ops = cpu[k][cpu[k].size() / 2];
    res[k].best_wall_ops = wall[k].back();
    res[k].pass_min = Pcts{1e30, 1e30, 1e30, 1e30};
  }
  std::vector<double> slow_at;
  slow_at.reserve(1 << 16);
  std::vector<std::vector<double>> slow_n(n), slow_gap(n), pass_ms(n);
  for (int pass = 0; pass < lat_passes; ++pass)
    for (size_t k = 0; k < n; ++k) {
      subjects[k].replay_timed(subjects[k].runner, trace, &lat, &slow_at);
      // slow_at: the slow ops' start times, then the pass's end.
      pass_ms[k].push_back(slow_at.back() / 1000.0);
      slow_at.pop_back();
      std::vector<double> gaps;
      for (size_t i = 1; i < slow_at.size(); ++i) gaps.push_back(slow_at[i] - slow_at[i - 1]);
      slow_n[k].push_back(double(slow_at.size()));
      slow_gap[k].push_back(median_of(gaps));
      for (size_t i = 0; i < trace.size(); ++i) op_min[k][i] = std::min(op_min[k][i], lat[i]);
      Pcts p = percentiles(lat);
      Pcts& m = res[k].pass_min;
      m.p50 = std::min(m.p50, p.p50);
      m.p99 = std::min(m.p99, p.p99);
      m.p9999 = std::min(m.p9999, p.p9999);
      m.max = std::min(m.max, p.max);
    }
  for (size_t k = 0; k < n; ++k) {
    res[k].slow_ops = median_of(slow_n[k]);
    res[k].slow_gap_us = median_of(slow_gap[k]);
    res[k].lat_pass_ms = median_of(pass_ms[k]);
    res[k].op_min = percentiles(op_min[k]);
    res[k].failures = subjects[k].failures(subjects[k].runner);
  }
  return res;
}

// a / b within each round: the median, best and worst over the rounds.
struct RoundRatio {
  double median = 0, best = 0, worst = 0;
};
RoundRatio round_ratio(const Result& a, const Result& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.rounds.size() && i < b.rounds.size(); ++i)
    r.push_back(a.rounds[i] / b.rounds[i]);
  std::sort(r.begin(), r.end());
  return RoundRatio{r[r.size() / 2], r.back(), r.front()};
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

// Occupancy bands the fragmentation samples are split into (used / total
// for vtrn::hbm, live / heap window for glibc): below 50%, five-point bands
// over the 50..70%, above 70%.
constexpr int kBands = 6;
const char* const kBandNames[kBands] = {"<50%", "50-55%", "55-60%", "60-65%", "65-70%", ">=70%"};
int band_of(double occupancy) {
  if (occupancy < 0.50) return 0;
  if (occupancy >= 0.70) return 5;
  return 1 + int((occupancy - 0.50) / 0.05);
}

struct Frag {
  double final_frag = 0, mean = 0, median = 0, p90 = 0, max = 0;
  double mean_occupancy = 0, mean_live = 0;
  double mean_second = -1;  // second-largest free block / free; -1 = not measured
  uint64_t failures = 0, samples = 0;
  double band_sum[kBands] = {};
  uint64_t band_n[kBands] = {};
  uint64_t max_live_bytes = 0;  // page-rounded, for the worst-case bound
  uint32_t max_live = 0;
};

// The two largest free blocks of the allocator's address map.
struct TopTwo {
  uint64_t first = 0, second = 0;
};
void top_two(const vtrn::hbm::BlockInfo& b, void* ctx) {
  auto* t = static_cast<TopTwo*>(ctx);
  if (b.state != vtrn::hbm::BlockState::kFree) return;
  if (b.bytes > t->first) {
    t->second = t->first;
    t->first = b.bytes;
  } else if (b.bytes > t->second) {
    t->second = b.bytes;
  }
}

void summarise(std::vector<double>& samples, Frag* f) {
  double sum = 0;
  for (double x : samples) sum += x;
  std::sort(samples.begin(), samples.end());
  f->samples = samples.size();
  if (samples.empty()) return;
  f->mean = sum / double(samples.size());
  f->median = samples[samples.size() / 2];
  f->p90 = samples[samples.size() * 9 / 10];
  f->max = samples.back();
}

struct ChurnHbm {
  Frag alloc;   // allocatable: the largest request that would succeed
  Frag contig;  // the largest single free block
  Pcts lat_plain, lat_stitched;  // ns per churn op, stitched ones apart
  uint64_t plain_ops = 0, stitched_ops = 0;
  Stats last;
  uint32_t max_stitched_live = 0;
};

ChurnHbm churn_hbm(const std::vector<Op>& churn) {
  FlatTable table;
  vtrn::hbm::Mapper mapper;
  Config c = hbm_config(kFragHbm, &table, &mapper);
  HbmRunner run(c, slot_count(churn));
  std::vector<double> samples, samples_c;
  std::vector<uint32_t> plain, stitched;
  ChurnHbm r;
  Frag& f = r.alloc;
  Stats s;
  double occ = 0, live = 0, second = 0;
  for (size_t i = 0; i < churn.size(); ++i) {
    const Op& op = churn[i];
    bool was_stitched = op.size == 0 && run.alloc.in_remap_window(run.addr[op.slot]);
    auto t0 = Clock::now();
    run.step(op);
    auto t1 = Clock::now();
    uint32_t ns = uint32_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (was_stitched || (op.size != 0 && run.alloc.in_remap_window(run.addr[op.slot])))
      stitched.push_back(ns);
    else
      plain.push_back(ns);
    run.alloc.stats(&s);
    f.max_live_bytes = std::max(f.max_live_bytes, s.used_bytes);
    f.max_live = std::max(f.max_live, s.live_allocations);
    r.max_stitched_live = std::max(r.max_stitched_live, s.stitched_allocations);
    if (sample_point(i, churn.size())) {
      samples.push_back(s.fragmentation);
      samples_c.push_back(s.contiguous_fragmentation);
      double o = double(s.used_bytes) / double(s.total_bytes);
      occ += o;
      live += s.live_allocations;
      f.band_sum[band_of(o)] += s.fragmentation;
      f.band_n[band_of(o)]++;
      r.contig.band_sum[band_of(o)] += s.contiguous_fragmentation;
      r.contig.band_n[band_of(o)]++;
      TopTwo t;
      run.alloc.for_each_block(top_two, &t);
      if (s.free_bytes) second += double(t.second) / double(s.free_bytes);
    }
  }
  f.mean_second = second / double(samples.size());
  run.alloc.stats(&s);
  r.last = s;
  f.final_frag = s.fragmentation;
  f.failures = run.failures;
  summarise(samples, &f);
  f.mean_occupancy = occ / double(f.samples);
  f.mean_live = live / double(f.samples);
  r.contig.final_frag = s.contiguous_fragmentation;
  r.contig.failures = run.failures;
  summarise(samples_c, &r.contig);
  r.contig.mean_occupancy = f.mean_occupancy;
  r.contig.mean_live = f.mean_live;
  r.plain_ops = plain.size();
  r.stitched_ops = stitched.size();
  if (!plain.empty()) r.lat_plain = percentiles(plain);
  if (!stitched.empty()) r.lat_stitched = percentiles(stitched);
  return r;
}

// glibc's fragmentation from outside: free space is what lies between live
// buffers in [lo, sbrk(0)), the window only this churn's buffers occupy.
Frag churn_glibc(const std::vector<Op>& churn) {
  uint32_t slots = slot_count(churn);
  std::vector<void*> ptr(slots, nullptr);
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  spans.reserve(slots);
  std::vector<double> samples;
  samples.reserve(churn.size() / 1000 + 2);
  uintptr_t lo = UINTPTR_MAX;
  Frag f;
  double occ = 0, live_sum = 0;
  auto measure_now = [&](double* occupancy, double* live_count) {
    spans.clear();
    uint64_t live = 0;
    for (void* p : ptr)
      if (p) {
        uintptr_t a = reinterpret_cast<uintptr_t>(p);
        size_t n = malloc_usable_size(p);
        spans.push_back({a, a + n});
        live += n;
      }
    std::sort(spans.begin(), spans.end());
    uintptr_t hi = reinterpret_cast<uintptr_t>(sbrk(0));
    uintptr_t cur = lo;
    uint64_t free_total = 0, largest = 0;
    for (auto& sp : spans) {
      // A chunk's header (16 bytes) sits before its pointer: not free space.
      uint64_t gap = sp.first - 16 > cur ? sp.first - 16 - cur : 0;
      free_total += gap;
      largest = std::max(largest, gap);
      cur = std::max(cur, sp.second);
    }
    uint64_t tail = hi > cur ? hi - cur : 0;
    free_total += tail;
    largest = std::max(largest, tail);
    double frag = free_total == 0 ? 0.0 : 1.0 - double(largest) / double(free_total);
    if (occupancy) {
      double o = double(live) / double(hi - lo);
      *occupancy += o;
      f.band_sum[band_of(o)] += frag;
      f.band_n[band_of(o)]++;
    }
    if (live_count) *live_count += double(spans.size());
    return frag;
  };
  for (size_t i = 0; i < churn.size(); ++i) {
    const Op& op = churn[i];
    if (op.size) {
      ptr[op.slot] = malloc(op.size);
      if (ptr[op.slot] == nullptr) f.failures++;
      else lo = std::min(lo, reinterpret_cast<uintptr_t>(ptr[op.slot]) - 16);
    } else {
      free(ptr[op.slot]);
      ptr[op.slot] = nullptr;
    }
    if (sample_point(i, churn.size())) samples.push_back(measure_now(&occ, &live_sum));
  }
  f.final_frag = measure_now(nullptr, nullptr);
  for (void*& p : ptr) {
    free(p);
    p = nullptr;
  }
  summarise(samples, &f);
  f.mean_occupancy = occ / double(f.samples);
  f.mean_live = live_sum / double(f.samples);
  return f;
}

void print_frag_json(const char* name, const Frag& f) {
  printf("{\"name\":\"%s\",\"final\":%.4f,\"mean\":%.4f,\"median\":%.4f,\"p90\":%.4f,\"max\":%.4f,"
         "\"mean_occupancy\":%.3f,\"mean_live\":%.1f,\"samples\":%llu,\"failures\":%llu,",
         name, f.final_frag, f.mean, f.median, f.p90, f.max, f.mean_occupancy, f.mean_live,
         (unsigned long long)f.samples, (unsigned long long)f.failures);
  if (f.mean_second >= 0) printf("\"mean_second_largest_share\":%.4f,", f.mean_second);
  printf("\"by_occupancy\":[");
  for (int b = 0; b < kBands; ++b)
    printf("%s{\"band\":\"%s\",\"samples\":%llu,\"mean\":%.4f}", b ? "," : "", kBandNames[b],
           (unsigned long long)f.band_n[b], f.band_n[b] ? f.band_sum[b] / double(f.band_n[b]) : 0.0);
  printf("]}");
}

void print_pcts_json(const char* key, const Pcts& p) {
  printf("\"%s\":{\"p50_ns\":%.0f,\"p99_ns\":%.0f,\"p9999_ns\":%.0f,\"max_ns\":%.0f}", key, p.p50,
         p.p99, p.p9999, p.max);
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  uint64_t seed = 42;
  uint32_t ops = 1000000, churn_ops = 200000;
  int passes = 7, lat_passes = 5;
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) json = true;
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 0);
    else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) ops = uint32_t(strtoul(argv[++i], nullptr, 0));
    else if (strcmp(argv[i], "--churn-ops") == 0 && i + 1 < argc) churn_ops = uint32_t(strtoul(argv[++i], nullptr, 0));
    else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc) passes = atoi(argv[++i]);
    else if (strcmp(argv[i], "--lat-passes") == 0 && i + 1 < argc) lat_passes = atoi(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr,
              "usage: hbm_bench [--json] [--seed N] [--ops N] [--churn-ops N] [--passes N]\n"
              "                 [--lat-passes N] [--only hbm|glibc|pow2]\n");
      return 2;
    }
  }
  if (passes < 1 || lat_passes < 1 || ops < 1000 || churn_ops < 10000 ||
      (only && strcmp(only, "hbm") != 0 && strcmp(only, "glibc") != 0 &&
       strcmp(only, "pow2") != 0)) {
    fprintf(stderr, "hbm_bench: --passes/--lat-passes >= 1, --ops >= 1000, --churn-ops >= 10000, "
                    "--only hbm, glibc or pow2\n");
    return 2;
  }
  // Largest trace buffer is 16 MiB; 32 MiB is glibc's ceiling for this knob.
  if (mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024) != 1 || mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1) {
    fprintf(stderr, "hbm_bench: mallopt refused the heap-only settings\n");
    return 1;
  }
  FlatTable speed_table;
  vtrn::hbm::Mapper speed_mapper;
  Config speed_config = hbm_config(kSpeedHbm, &speed_table, &speed_mapper);

  if (only) {
    std::vector<Op> trace = make_trace(seed, ops);
    uint32_t slots = slot_count(trace);
    uint64_t failures = 0;
    if (strcmp(only, "hbm") == 0) {
      HbmRunner hbm(speed_config, slots);
      for (int p = 0; p < passes; ++p)
        for (const Op& op : trace) hbm.step(op);
      failures = hbm.failures;
    } else if (strcmp(only, "pow2") == 0) {
      Pow2Runner pow2(kSpeedHbm, slots);
      for (int p = 0; p < passes; ++p)
        for (const Op& op : trace) pow2.step(op);
      failures = pow2.failures;
    } else {
      MallocRunner glibc(slots);
      for (int p = 0; p < passes; ++p)
        for (const Op& op : trace) glibc.step(op);
      failures = glibc.failures;
    }
    printf("%s: %d replays of %zu ops, %llu failures\n", only, passes, trace.size(),
           (unsigned long long)failures);
    return 0;
  }

  std::vector<Op> churn = make_churn(seed + 1, churn_ops, Lifetime::kRandom);
  Frag frag_glibc = churn_glibc(churn);  // first: a fresh heap (see the top)
  ChurnHbm ch = churn_hbm(churn);
  const Frag& frag_hbm = ch.alloc;
  uint64_t pow2_churn_failures = 0;
  {
    Pow2Runner pow2(kFragHbm, slot_count(churn));
    for (const Op& op : churn) pow2.step(op);
    pow2_churn_failures = pow2.failures;
  }

  std::vector<Op> trace = make_trace(seed, ops);
  uint32_t slots = slot_count(trace);
  HbmRunner hbm(speed_config, slots);
  MallocRunner glibc(slots);
  Pow2Runner pow2(kSpeedHbm, slots);
  std::vector<Result> results = measure(
      {subject("vtrn::hbm", hbm), subject("glibc malloc", glibc), subject("pow2 lists", pow2)},
      trace, passes, lat_passes);
  const Result& rh = results[0];
  const Result& rg = results[1];
  const Result& rp = results[2];
  // The harness alone, best of as many passes (after the warm-up replay).
  double replay_best = 0;
  {
    ReplayOnlyRunner replay(slots);
    for (const Op& op : trace) replay.step(op);
    for (int i = 0; i < passes; ++i) {
      double c0 = thread_cpu_s();
      for (const Op& op : trace) replay.step(op);
      double c1 = thread_cpu_s();
      replay_best = std::max(replay_best, double(trace.size()) / (c1 - c0));
    }
  }
  const RoundRatio round_glibc = round_ratio(rh, rg);
  const RoundRatio round_pow2 = round_ratio(rh, rp);
  double overhead = timer_overhead_ns();
  double load = 0;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &load) != 1) load = 0;
    fclose(f);
  }

  // The published worst case for what the churn promised: its largest live
  // bytes and count, its largest request, page alignment, nothing retired.
  vtrn::hbm::WorstCase wc;
  wc.max_live_bytes = frag_hbm.max_live_bytes;
  wc.max_live_allocations = frag_hbm.max_live;
  wc.max_request_bytes = kMaxBytes;
  uint64_t bound = Allocator::worst_case_hbm_bytes(kPage, wc);
  uint64_t bound_contig = Allocator::worst_case_contiguous_hbm_bytes(kPage, wc);
  uint64_t bound_remap = Allocator::worst_case_remap_bytes(kPage, wc);
  const Stats& ls = ch.last;
  double mean_extents = ls.stitches ? double(ls.stitch_extents_total) / double(ls.stitches) : 0;

  if (json) {
    auto row = [](const Result& r) {
      printf("{\"name\":\"%s\",\"best_ops_per_s\":%.0f,\"median_ops_per_s\":%.0f,"
             "\"best_wall_ops_per_s\":%.0f,",
             r.name, r.best_ops, r.median_ops, r.best_wall_ops);
      print_pcts_json("latency_min_per_percentile", r.pass_min);
      printf(",");
      print_pcts_json("latency_of_per_op_min", r.op_min);
      printf(",\"slow_ops_per_lat_pass\":%.0f,\"slow_op_spacing_us\":%.0f,\"lat_pass_ms\":%.1f",
             r.slow_ops, r.slow_gap_us, r.lat_pass_ms);
      printf(",\"failures\":%llu}", (unsigned long long)r.failures);
    };
    printf("{\"trace\":{\"seed\":%llu,\"ops\":%zu,\"min_bytes\":%llu,\"max_bytes\":%llu,"
           "\"sizes\":\"log-uniform\",\"live\":\"90..110\",\"passes\":%d,\"lat_passes\":%d},"
           "\"loadavg\":%.2f,\"timer_overhead_ns\":%.0f,\"allocators\":[",
           (unsigned long long)seed, trace.size(), (unsigned long long)kMinBytes,
           (unsigned long long)kMaxBytes, passes, lat_passes, load, overhead);
    row(rh);
    printf(",");
    row(rg);
    printf(",");
    row(rp);
    printf("],\"ratio_best_ops_per_s\":%.2f,\"ratio_median_ops_per_s\":%.2f,"
           "\"ratio_to_pow2_best_ops_per_s\":%.3f,\"ratio_to_pow2_median_ops_per_s\":%.3f,"
           "\"replay_only_best_ops_per_s\":%.0f,",
           rh.best_ops / rg.best_ops, rh.median_ops / rg.median_ops, rh.best_ops / rp.best_ops,
           rh.median_ops / rp.median_ops, replay_best);
    printf("\"ratio_in_round\":{\"glibc\":{\"median\":%.2f,\"best\":%.2f,\"worst\":%.2f},"
           "\"pow2\":{\"median\":%.3f,\"best\":%.3f,\"worst\":%.3f}},",
           round_glibc.median, round_glibc.best, round_glibc.worst, round_pow2.median,
           round_pow2.best, round_pow2.worst);
    printf("\"fragmentation\":{\"hbm_bytes\":%llu,\"ops\":%zu,\"occupancy_band\":\"0.50..0.70\","
           "\"allocators\":[",
           (unsigned long long)kFragHbm, churn.size());
    print_frag_json("vtrn::hbm", frag_hbm);
    printf(",");
    print_frag_json("vtrn::hbm contiguous", ch.contig);
    printf(",");
    print_frag_json("glibc malloc", frag_glibc);
    printf("],\"pow2_churn_failures\":%llu,\"stitches\":%llu,\"stitch_extents_mean\":%.2f,"
           "\"stitch_extents_max\":%u,\"stitched_live_max\":%u,\"churn_ops_plain\":%llu,"
           "\"churn_ops_stitched\":%llu,",
           (unsigned long long)pow2_churn_failures, (unsigned long long)ls.stitches, mean_extents,
           ls.stitch_extents_max, ch.max_stitched_live, (unsigned long long)ch.plain_ops,
           (unsigned long long)ch.stitched_ops);
    print_pcts_json("churn_latency_plain", ch.lat_plain);
    printf(",");
    print_pcts_json("churn_latency_stitched", ch.lat_stitched);
    printf(",\"worst_case_hbm_bytes\":%llu,\"worst_case_contiguous_hbm_bytes\":%llu,"
           "\"worst_case_remap_bytes\":%llu}}\n",
           (unsigned long long)bound, (unsigned long long)bound_contig,
           (unsigned long long)bound_remap);
    return 0;
  }
  printf("trace: %zu ops, sizes log-uniform 4 KiB..16 MiB, 90..110 live, seed %llu; load %.2f\n",
         trace.size(), (unsigned long long)seed, load);
  printf("\nthroughput, ops per CPU-second of this thread over %d timed replays\n", passes);
  printf("%-14s %12s %12s %14s %9s\n", "allocator", "best", "median", "best wall", "failures");
  for (const Result* r : {&rh, &rg, &rp})
    printf("%-14s %12.0f %12.0f %14.0f %9llu\n", r->name, r->best_ops, r->median_ops,
           r->best_wall_ops, (unsigned long long)r->failures);
  printf("%-14s %11.2fx %11.2fx\n", "hbm / glibc", rh.best_ops / rg.best_ops,
         rh.median_ops / rg.median_ops);
  printf("%-14s %11.2fx %11.2fx\n", "hbm / pow2", rh.best_ops / rp.best_ops,
         rh.median_ops / rp.median_ops);
  printf("ratio within each round (one pass of each, back to back): hbm / glibc median %.2fx, "
         "best %.2fx, worst %.2fx;\nhbm / pow2 median %.3fx, best %.3fx, worst %.3fx\n",
         round_glibc.median, round_glibc.best, round_glibc.worst, round_pow2.median,
         round_pow2.best, round_pow2.worst);
  printf("the replay loop alone (no allocator): %.0f ops/s best, %.1f ns of each op above; per op "
         "best: hbm %.1f ns, glibc %.1f ns, pow2 %.1f ns\n",
         replay_best, 1e9 / replay_best, 1e9 / rh.best_ops, 1e9 / rg.best_ops, 1e9 / rp.best_ops);
  printf("\nlatency ns over %d replays (timer pair overhead %.0f ns included)\n", lat_passes,
         overhead);
  printf("%-14s %-22s %8s %8s %9s %10s\n", "allocator", "summary", "p50", "p99", "p99.99", "max");
  for (const Result* r : {&rh, &rg, &rp}) {
    printf("%-14s %-22s %8.0f %8.0f %9.0f %10.0f\n", r->name, "min over passes", r->pass_min.p50,
           r->pass_min.p99, r->pass_min.p9999, r->pass_min.max);
    printf("%-14s %-22s %8.0f %8.0f %9.0f %10.0f\n", "", "of per-op minimum", r->op_min.p50,
           r->op_min.p99, r->op_min.p9999, r->op_min.max);
  }
  printf("ops over %u us in a latency pass, and the median spacing of their starts (medians over "
         "passes):\n", kSlowNs / 1000);
  for (const Result* r : {&rh, &rg, &rp})
    printf("%-14s %6.0f ops in a %.0f ms pass, %.0f us apart\n", r->name, r->slow_ops,
           r->lat_pass_ms, r->slow_gap_us);
  printf("(p99.99 is the %.0fth slowest op of a pass: once a pass has more slow ops than that, the\n"
         "\"min over passes\" tail is whatever makes them slow, not the op's own work)\n",
         double(trace.size()) * 1e-4);
  printf("\nfragmentation (1 - largest free / free), churn of %zu ops at 50..70%% of %llu MiB, "
         "sampled every 1000 ops after 10%%\n",
         churn.size(), (unsigned long long)(kFragHbm / kMiB));
  printf("%-14s %8s %8s %8s %8s %8s %10s %9s %9s\n", "allocator", "final", "mean", "median", "p90",
         "max", "occupancy", "live", "failures");
  for (auto [name, f] : {std::pair<const char*, const Frag*>{"hbm allocatable", &frag_hbm},
                         std::pair<const char*, const Frag*>{"hbm contiguous", &ch.contig},
                         std::pair<const char*, const Frag*>{"glibc malloc", &frag_glibc}})
    printf("%-15s%7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %9.1f%% %9.1f %9llu\n", name,
           100 * f->final_frag, 100 * f->mean, 100 * f->median, 100 * f->p90, 100 * f->max,
           100 * f->mean_occupancy, f->mean_live, (unsigned long long)f->failures);
  printf("\nmean fragmentation by occupancy at the sample (samples in brackets)\n%-14s", "allocator");
  for (int b = 0; b < kBands; ++b) printf(" %14s", kBandNames[b]);
  printf("\n");
  for (auto [name, f] : {std::pair<const char*, const Frag*>{"hbm allocatable", &frag_hbm},
                         std::pair<const char*, const Frag*>{"hbm contiguous", &ch.contig},
                         std::pair<const char*, const Frag*>{"glibc malloc", &frag_glibc}}) {
    printf("%-15s", name);
    for (int b = 0; b < kBands; ++b) {
      if (f->band_n[b] == 0) printf(" %14s", "-");
      else printf("  %6.1f%% (%4llu)", 100 * f->band_sum[b] / double(f->band_n[b]),
                  (unsigned long long)f->band_n[b]);
    }
    printf("\n");
  }
  printf("pow2 lists on the same churn in %llu MiB: %llu failed allocations (no split, no "
         "coalescing)\n",
         (unsigned long long)(kFragHbm / kMiB), (unsigned long long)pow2_churn_failures);
  printf("vtrn::hbm: the second-largest free block alone holds %.1f%% of the free bytes on average\n"
         "(the floor of the contiguous figure; stitching is what lifts the allocatable one above it)\n",
         100 * frag_hbm.mean_second);
  printf("\nstitching in the churn: %llu allocations stitched (%.2f%% of the churn's ops), "
         "extents mean %.2f, max %u (limit %u); at most %u stitched live at once\n",
         (unsigned long long)ls.stitches, 100.0 * double(ch.stitched_ops) / double(churn.size()),
         mean_extents, ls.stitch_extents_max, vtrn::hbm::kMaxExtents, ch.max_stitched_live);
  printf("churn op latency ns (one clock pair per op, mapper included)\n%-22s %9s %8s %8s %9s %10s\n",
         "ops", "count", "p50", "p99", "p99.99", "max");
  printf("%-22s %9llu %8.0f %8.0f %9.0f %10.0f\n", "contiguous", (unsigned long long)ch.plain_ops,
         ch.lat_plain.p50, ch.lat_plain.p99, ch.lat_plain.p9999, ch.lat_plain.max);
  printf("%-22s %9llu %8.0f %8.0f %9.0f %10.0f\n", "stitched (alloc+free)",
         (unsigned long long)ch.stitched_ops, ch.lat_stitched.p50, ch.lat_stitched.p99,
         ch.lat_stitched.p9999, ch.lat_stitched.max);
  printf("\nworst case (vtrn/hbm.h): HBM that no order of these requests can exhaust, for at most\n"
         "%llu MiB and %u allocations live (the churn's maxima) and requests up to %llu MiB:\n"
         "%llu MiB (%.1fx the live bytes) with stitching, with a remap window of %llu MiB;\n"
         "%llu MiB without stitching; the churn ran in %llu MiB\n",
         (unsigned long long)(wc.max_live_bytes / kMiB), wc.max_live_allocations,
         (unsigned long long)(kMaxBytes / kMiB), (unsigned long long)(bound / kMiB),
         double(bound) / double(wc.max_live_bytes), (unsigned long long)(bound_remap / kMiB),
         (unsigned long long)(bound_contig / kMiB), (unsigned long long)(kFragHbm / kMiB));
  return 0;
}
