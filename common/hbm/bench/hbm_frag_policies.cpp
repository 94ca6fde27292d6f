// hbm_frag_policies: how much of issue 4's fragmentation figure
// (1 - largest free / total free, churn at 50..70% occupancy) is the
// allocator's placement policy and how much is the trace. It replays the
// hbm_bench churn trace (hbm_bench_traces.h) under three lifetime models on
// the real vtrn::hbm allocator (TLSF good fit) and on reference placement
// policies over an exact free-block map: address-ordered first fit, best
// fit (ties to the lower address), next fit, worst fit, two-ended
// (buffers under 1 MiB from the top of the highest block that fits, the
// rest first fit), segregated best fit (buffers under 1 MiB best fit from
// the top end of their block, so small holes gather apart from the large
// ones), and best fit with requests of 32 pages and more rounded up to a
// coarse size class (8, 4 or 1 classes per octave, so a freed hole is
// exactly reusable by the next request of its class). The reference
// policies are a plain std::map, host-only and not bounded-time: they show
// what a placement would achieve, not how fast. For them it also counts
// why free space scatters: the share of frees that merge into the largest
// free block, the share of freed bytes that do, the share of allocated
// bytes taken from it, and how much of the free space the second-largest
// block alone holds (the fragmentation can never be below that share).
// It prints measurements only (not a ctest).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

#include "hbm_bench_traces.h"
#include "vtrn/hbm.h"

using namespace vtrn::hbm::bench;

namespace {

enum class Policy { kFirstFit, kBestFit, kNextFit, kWorstFit, kTwoEnded, kSegregated };

struct Summary {
  double mean = 0, median = 0, p90 = 0;
  uint64_t failures = 0;
  double frees_into_largest = -1, bytes_from_largest = -1;  // -1: not measured
  double freed_bytes_into_largest = -1, second_share = -1;
  double occupancy = 0;  // used pages (rounding included) / total, mean over samples
};

Summary summarise(std::vector<double> s, uint64_t failures) {
  Summary out;
  out.failures = failures;
  if (s.empty()) return out;
  double sum = 0;
  for (double x : s) sum += x;
  std::sort(s.begin(), s.end());
  out.mean = sum / double(s.size());
  out.median = s[s.size() / 2];
  out.p90 = s[s.size() * 9 / 10];
  return out;
}

// Free blocks in pages, keyed by first page; neighbours always merged.
class Reference {
 public:
  // classes_per_octave: 0 = exact page counts, else requests of 32 pages
  // and more are rounded up to one of that many classes per power of two.
  Reference(Policy p, uint32_t pages, uint32_t classes_per_octave = 0)
      : policy_(p), classes_(classes_per_octave) {
    free_[0] = pages;
  }

  uint32_t rounded(uint32_t n) const {
    if (classes_ == 0 || n < 32) return n;
    uint32_t width = (1u << (31 - __builtin_clz(n))) / classes_;
    return (n + width - 1) / width * width;
  }

  // Returns the first page, or -1.
  int64_t allocate(uint32_t n, bool* from_largest) {
    auto it = choose(n);
    if (it == free_.end()) return -1;
    *from_largest = it->second == largest();
    uint32_t start = it->first, size = it->second;
    free_.erase(it);
    bool top = (policy_ == Policy::kTwoEnded || policy_ == Policy::kSegregated) &&
               uint64_t(n) * kPage < kMiB;
    uint32_t a = top ? start + size - n : start;
    if (size > n) free_[top ? start : start + n] = size - n;
    rover_ = a + n;
    return a;
  }

  // Returns whether the freed range merged into the largest free block.
  bool release(uint32_t a, uint32_t n) {
    uint32_t big = largest();
    bool touched = false;
    auto next = free_.lower_bound(a);
    if (next != free_.end() && next->first == a + n) {
      touched |= next->second == big;
      n += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == a) {
        touched |= prev->second == big;
        prev->second += n;
        return touched;
      }
    }
    free_[a] = n;
    return touched;
  }

  double fragmentation(double* second_share) const {
    uint64_t total = 0, big = 0, second = 0;
    for (auto& [s, z] : free_) {
      total += z;
      if (z > big) {
        second = big;
        big = z;
      } else if (z > second) {
        second = z;
      }
    }
    *second_share = total == 0 ? 0.0 : double(second) / double(total);
    return total == 0 ? 0.0 : 1.0 - double(big) / double(total);
  }

 private:
  uint32_t largest() const {
    uint32_t big = 0;
    for (auto& [s, z] : free_) big = std::max(big, z);
    return big;
  }

  std::map<uint32_t, uint32_t>::iterator choose(uint32_t n) {
    auto best = free_.end();
    switch (policy_) {
      case Policy::kFirstFit:
        for (auto it = free_.begin(); it != free_.end(); ++it)
          if (it->second >= n) return it;
        return best;
      case Policy::kBestFit:
      case Policy::kSegregated:
        for (auto it = free_.begin(); it != free_.end(); ++it)
          if (it->second >= n && (best == free_.end() || it->second < best->second)) best = it;
        return best;
      case Policy::kWorstFit:
        for (auto it = free_.begin(); it != free_.end(); ++it)
          if (it->second >= n && (best == free_.end() || it->second > best->second)) best = it;
        return best;
      case Policy::kNextFit: {
        for (auto it = free_.lower_bound(rover_); it != free_.end(); ++it)
          if (it->second >= n) return it;
        for (auto it = free_.begin(); it != free_.end(); ++it)
          if (it->second >= n) return it;
        return best;
      }
      case Policy::kTwoEnded:
        if (uint64_t(n) * kPage < kMiB) {
          for (auto it = free_.rbegin(); it != free_.rend(); ++it)
            if (it->second >= n) return std::prev(it.base());
          return best;
        }
        for (auto it = free_.begin(); it != free_.end(); ++it)
          if (it->second >= n) return it;
        return best;
    }
    return best;
  }

  Policy policy_;
  uint32_t classes_;
  std::map<uint32_t, uint32_t> free_;
  uint32_t rover_ = 0;
};

Summary run_reference(Policy p, uint32_t classes, const std::vector<Op>& churn) {
  const uint32_t total = uint32_t(kFragHbm / kPage);
  Reference ref(p, total, classes);
  std::vector<int64_t> at(slot_count(churn), -1);
  std::vector<uint32_t> pages(at.size(), 0);
  std::vector<double> samples;
  uint64_t failures = 0, frees = 0, frees_in = 0, bytes = 0, bytes_from = 0;
  uint64_t freed = 0, freed_in = 0, used = 0;
  double second_sum = 0, occupancy_sum = 0;
  for (size_t i = 0; i < churn.size(); ++i) {
    const Op& op = churn[i];
    if (op.size) {
      uint32_t n = ref.rounded(uint32_t((op.size + kPage - 1) / kPage));
      bool from = false;
      at[op.slot] = ref.allocate(n, &from);
      pages[op.slot] = n;
      if (at[op.slot] < 0) {
        failures++;
      } else {
        bytes += n;
        used += n;
        if (from) bytes_from += n;
      }
    } else if (at[op.slot] >= 0) {
      frees++;
      freed += pages[op.slot];
      used -= pages[op.slot];
      if (ref.release(uint32_t(at[op.slot]), pages[op.slot])) {
        frees_in++;
        freed_in += pages[op.slot];
      }
      at[op.slot] = -1;
    }
    if (sample_point(i, churn.size())) {
      double second = 0;
      samples.push_back(ref.fragmentation(&second));
      second_sum += second;
      occupancy_sum += double(used) / double(total);
    }
  }
  Summary s = summarise(samples, failures);
  s.frees_into_largest = double(frees_in) / double(frees);
  s.freed_bytes_into_largest = double(freed_in) / double(freed);
  s.bytes_from_largest = double(bytes_from) / double(bytes);
  s.second_share = second_sum / double(samples.size());
  s.occupancy = occupancy_sum / double(samples.size());
  return s;
}

// The two largest free blocks, from the allocator's own address map.
struct Second {
  uint64_t first = 0, second = 0;
};
void note_free(const vtrn::hbm::BlockInfo& b, void* ctx) {
  auto* t = static_cast<Second*>(ctx);
  if (b.state != vtrn::hbm::BlockState::kFree) return;
  if (b.bytes > t->first) {
    t->second = t->first;
    t->first = b.bytes;
  } else if (b.bytes > t->second) {
    t->second = b.bytes;
  }
}

Summary run_tlsf(const std::vector<Op>& churn) {
  vtrn::hbm::Config c;
  c.geometry.stacks = 2;
  c.geometry.bytes_per_stack = kFragHbm / 2;
  c.geometry.page_bytes = kPage;
  c.geometry.channels = 8;
  // Not 0: the runners use address 0 for "no buffer in this slot".
  c.base = kDeviceBase;
  c.limits.max_allocations = 1024;
  std::vector<uint64_t> arena(vtrn::hbm::Allocator::arena_bytes(c) / 8 + 1);
  static vtrn::hbm::Allocator alloc;
  if (alloc.init(c, arena.data(), arena.size() * 8) != vtrn::hbm::Error::kOk) abort();
  std::vector<uint64_t> addr(slot_count(churn), 0);
  std::vector<double> samples;
  uint64_t failures = 0;
  vtrn::hbm::Stats st;
  double second_sum = 0, occupancy_sum = 0;
  for (size_t i = 0; i < churn.size(); ++i) {
    const Op& op = churn[i];
    if (op.size) {
      if (alloc.allocate(1, vtrn::hbm::Category::kTensors, op.size, 0, &addr[op.slot]) !=
          vtrn::hbm::Error::kOk) {
        addr[op.slot] = 0;
        failures++;
      }
    } else if (addr[op.slot] != 0) {
      if (alloc.free(addr[op.slot]) != vtrn::hbm::Error::kOk) abort();
      addr[op.slot] = 0;
    }
    if (sample_point(i, churn.size())) {
      alloc.stats(&st);
      samples.push_back(st.fragmentation);
      Second t;
      alloc.for_each_block(note_free, &t);
      if (st.free_bytes) second_sum += double(t.second) / double(st.free_bytes);
      occupancy_sum += double(st.used_bytes) / double(st.total_bytes);
    }
  }
  Summary out = summarise(samples, failures);
  out.second_share = second_sum / double(samples.size());
  out.occupancy = occupancy_sum / double(samples.size());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 43;  // hbm_bench's churn seed (its --seed + 1)
  uint32_t ops = 200000;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 0);
    else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) ops = uint32_t(strtoul(argv[++i], nullptr, 0));
    else {
      fprintf(stderr, "usage: hbm_frag_policies [--seed N] [--ops N]\n");
      return 2;
    }
  }
  if (ops < 10000) {
    fprintf(stderr, "hbm_frag_policies: --ops must be >= 10000\n");
    return 2;
  }
  struct Model {
    Lifetime lifetime;
    const char* name;
  };
  const Model models[] = {{Lifetime::kRandom, "random victim (hbm_bench)"},
                          {Lifetime::kOldestFirst, "oldest first"},
                          {Lifetime::kNewestFirst, "newest first"}};
  struct Named {
    Policy policy;
    uint32_t classes;
    const char* name;
  };
  const Named policies[] = {{Policy::kFirstFit, 0, "first fit"},
                            {Policy::kBestFit, 0, "best fit"},
                            {Policy::kNextFit, 0, "next fit"},
                            {Policy::kWorstFit, 0, "worst fit"},
                            {Policy::kTwoEnded, 0, "two-ended"},
                            {Policy::kSegregated, 0, "segregated best fit"},
                            {Policy::kBestFit, 8, "best fit, 8 classes/oct"},
                            {Policy::kBestFit, 4, "best fit, 4 classes/oct"},
                            {Policy::kBestFit, 1, "best fit, pow2 classes"},
                            {Policy::kSegregated, 4, "segregated, 4 cl/oct"}};
  printf("fragmentation (1 - largest free / free), %u-op churn at 50..70%% of %llu MiB, seed %llu,"
         "\nsampled every 1000 ops after 10%%; 'into largest' = frees (and freed bytes) that merge"
         "\ninto the largest free block, 'from largest' = allocated bytes taken from it, '2nd' ="
         "\nthe second-largest free block's share of the free bytes (a floor for the"
         "\nfragmentation), 'occ' = used pages / total, size-class rounding included\n",
         ops, (unsigned long long)(kFragHbm / kMiB), (unsigned long long)seed);
  for (const Model& m : models) {
    std::vector<Op> churn = make_churn(seed, ops, m.lifetime);
    printf("\nlifetimes: %s\n", m.name);
    printf("  %-24s %7s %7s %7s %7s %7s %9s %14s %13s\n", "policy", "mean", "median", "p90", "2nd",
           "occ", "failures", "into largest", "from largest");
    Summary t = run_tlsf(churn);
    printf("  %-24s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %9llu %14s %13s\n", "vtrn::hbm (TLSF)",
           100 * t.mean, 100 * t.median, 100 * t.p90, 100 * t.second_share, 100 * t.occupancy,
           (unsigned long long)t.failures, "-", "-");
    for (const Named& p : policies) {
      Summary s = run_reference(p.policy, p.classes, churn);
      printf("  %-24s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %9llu %5.1f%%/%5.1f%% %12.1f%%\n",
             p.name, 100 * s.mean, 100 * s.median, 100 * s.p90, 100 * s.second_share,
             100 * s.occupancy, (unsigned long long)s.failures, 100 * s.frees_into_largest,
             100 * s.freed_bytes_into_largest, 100 * s.bytes_from_largest);
    }
  }
  return 0;
}
