// The traces shared by hbm_bench and hbm_frag_policies, so both measure the
// same sequence of operations (host-only benchmark code, not part of the
// allocator).
//
// Sizes are log-uniform over 4 KiB..16 MiB (4 KiB * 2^(12u), u uniform in
// [0, 1), an arbitrary byte count; mean 2.0 MiB): the issue names a range of
// four decades and no shape, and log-uniform gives every octave the same
// weight. The speed trace keeps 90..110 buffers live. The churn trace keeps
// the page-rounded live bytes between 50% and 70% of kFragHbm (320 MiB, so
// about 100 buffers are live) and chooses which buffer dies by a lifetime
// model: uniformly random (the churn), oldest first, or newest first.
#pragma once

#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

namespace vtrn::hbm::bench {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kPage = 4 * kKiB;
inline constexpr uint64_t kMinBytes = 4 * kKiB;
inline constexpr uint64_t kMaxBytes = 16 * kMiB;
inline constexpr uint64_t kFragHbm = 320 * kMiB;
// The speed trace's HBM: it never runs out, so every allocator does the
// same work on every op.
inline constexpr uint64_t kSpeedHbm = 1024 * kMiB;
inline constexpr uint64_t kDeviceBase = 0x10'0000'0000ull;  // 2 MiB-aligned, non-zero

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  double unit() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

inline uint64_t random_size(Rng& r) {
  double b = double(kMinBytes) * exp2(12.0 * r.unit());
  return std::min<uint64_t>(kMaxBytes, std::max<uint64_t>(kMinBytes, uint64_t(b)));
}

// One trace step: allocate `size` bytes into slot, or free slot (size 0).
struct Op {
  uint32_t slot;
  uint64_t size;
};

// Slots are handed out lowest first and reused, so slot arrays stay small;
// `live` is in allocation order (oldest first).
struct Slots {
  std::vector<uint32_t> live, spare;
  uint32_t count = 0;
  uint32_t take() {
    if (spare.empty()) return count++;
    uint32_t s = spare.back();
    spare.pop_back();
    return s;
  }
  uint32_t drop(size_t i) {
    uint32_t s = live[i];
    live.erase(live.begin() + long(i));
    spare.push_back(s);
    return s;
  }
};

inline std::vector<Op> make_trace(uint64_t seed, uint32_t ops) {
  Rng r{seed};
  std::vector<Op> trace;
  trace.reserve(ops + 128);
  Slots sl;
  while (trace.size() < ops) {
    bool alloc = sl.live.size() < 90 || (sl.live.size() <= 110 && r.below(2) == 0);
    if (alloc) {
      uint32_t s = sl.take();
      sl.live.push_back(s);
      trace.push_back({s, random_size(r)});
    } else {
      trace.push_back({sl.drop(r.below(sl.live.size())), 0});
    }
  }
  for (uint32_t s : sl.live) trace.push_back({s, 0});  // end empty so replays repeat
  return trace;
}

enum class Lifetime { kRandom, kOldestFirst, kNewestFirst };

// Occupancy is judged on the trace's own page-rounded live bytes, so the
// trace does not depend on the allocator replaying it (an allocation that
// fails on replay leaves its slot empty and its free does nothing).
inline std::vector<Op> make_churn(uint64_t seed, uint32_t ops, Lifetime lifetime) {
  Rng r{seed};
  std::vector<Op> trace;
  trace.reserve(ops);
  Slots sl;
  std::vector<uint64_t> bytes;
  uint64_t live_bytes = 0;
  while (trace.size() < ops) {
    double occ = double(live_bytes) / double(kFragHbm);
    bool alloc = occ < 0.5 || (occ <= 0.7 && r.below(2) == 0);
    if (alloc || sl.live.empty()) {
      uint32_t s = sl.take();
      if (s >= bytes.size()) bytes.resize(s + 1);
      uint64_t size = random_size(r);
      bytes[s] = (size + kPage - 1) / kPage * kPage;
      live_bytes += bytes[s];
      sl.live.push_back(s);
      trace.push_back({s, size});
    } else {
      size_t i = lifetime == Lifetime::kRandom        ? r.below(sl.live.size())
                 : lifetime == Lifetime::kOldestFirst ? 0
                                                      : sl.live.size() - 1;
      uint32_t s = sl.drop(i);
      live_bytes -= bytes[s];
      trace.push_back({s, 0});
    }
  }
  return trace;
}

inline uint32_t slot_count(const std::vector<Op>& t) {
  uint32_t n = 0;
  for (const Op& op : t) n = std::max(n, op.slot + 1);
  return n;
}

// Fragmentation samples are taken every 1000 ops after the first 10%.
inline bool sample_point(size_t i, size_t n) { return i >= n / 10 && i % 1000 == 0; }

}  // namespace vtrn::hbm::bench
