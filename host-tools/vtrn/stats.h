// Latency summaries for `vtrn ping` and `vtrn bench`: min, median, mean,
// p99, p99.9 and max of a set of round-trip samples.
//
// Percentiles use the nearest-rank definition (the smallest sample with at
// least p of the samples at or below it), so every reported value is a real
// measurement and p99.9 of 200 samples is simply the maximum; no
// interpolation invents latencies nobody saw.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include <nlohmann/json.hpp>

namespace tools {

struct LatencyStats {
  size_t count = 0;
  uint64_t min_ns = 0;
  uint64_t median_ns = 0;
  double mean_ns = 0.0;
  uint64_t p99_ns = 0;
  uint64_t p999_ns = 0;
  uint64_t max_ns = 0;
};

// Nearest-rank percentile of ascending `sorted`; p in [0, 1]; 0 when empty.
uint64_t percentile(const std::vector<uint64_t>& sorted, double p);

// All zeros for an empty sample set.
LatencyStats summarize(std::vector<uint64_t> samples);

// {"count","min_ns","median_ns","mean_ns","p99_ns","p999_ns","max_ns"}
nlohmann::json to_json(const LatencyStats& stats);

}  // namespace tools
