// A uniform sample of at most k values out of a stream of unknown length
// (reservoir sampling, Li's "Algorithm L", ACM TOMS 20(4), 1994): every
// value seen has the same chance, k / seen, of being in the sample. Where
// Algorithm R draws a random number (and divides) for every value, this one
// draws how many values to skip before the next replacement, so after the
// first k a value costs one compare until the next chosen one: the DMA
// bench feeds it millions of latencies a second, and a division plus a
// store into a random slot of an 8 MiB sample per descriptor was a visible
// part of vtrnd's CPU per descriptor.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cmath>
#include <vector>

namespace drv {

class Reservoir {
 public:
  explicit Reservoir(size_t k, uint64_t seed = 0x9e3779b97f4a7c15ull) : k_(k ? k : 1), rng_(seed ? seed : 1) {}

  void add(uint64_t v) {
    ++seen_;
    if (s_.size() < k_) {
      s_.push_back(v);
      if (s_.size() == k_) {
        w_ = std::exp(std::log(uniform()) / double(k_));
        skip();
      }
      return;
    }
    if (seen_ != next_) return;
    const uint64_t r = next_random();
    s_[(k_ & (k_ - 1)) == 0 ? r & (k_ - 1) : r % k_] = v;
    w_ *= std::exp(std::log(uniform()) / double(k_));
    skip();
  }

  [[nodiscard]] uint64_t seen() const { return seen_; }
  // The sample, in no particular order (callers may reorder it, e.g.
  // nth_element for percentiles, which leaves it a uniform sample).
  [[nodiscard]] std::vector<uint64_t>& sample() { return s_; }
  [[nodiscard]] const std::vector<uint64_t>& sample() const { return s_; }

 private:
  uint64_t next_random() {  // xorshift64
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }
  // Uniform in (0, 1): 53 random bits, never 0 (log(0)).
  double uniform() { return (double(next_random() >> 11) + 0.5) * 0x1.0p-53; }
  // The index (1-based, in values seen) of the next value to replace:
  // the gap is geometric with success probability 1 - w.
  void skip() {
    const double gap = std::floor(std::log(uniform()) / std::log1p(-w_));
    next_ = gap >= 0x1.0p62 ? UINT64_MAX : seen_ + uint64_t(gap) + 1;
  }

  size_t k_;
  std::vector<uint64_t> s_;
  uint64_t seen_ = 0;
  uint64_t next_ = 0;
  double w_ = 0;
  uint64_t rng_;
};

}  // namespace drv
