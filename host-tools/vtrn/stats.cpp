// Latency summaries (see stats.h).
#include "stats.h"

#include <math.h>

#include <algorithm>

namespace tools {

uint64_t percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 1.0);
  // Rank ceil(p * n) counted from 1; p = 0 means the minimum.
  size_t rank = size_t(ceil(p * double(sorted.size())));
  if (rank == 0) rank = 1;
  return sorted[rank - 1];
}

LatencyStats summarize(std::vector<uint64_t> samples) {
  LatencyStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  s.min_ns = samples.front();
  s.max_ns = samples.back();
  s.median_ns = percentile(samples, 0.5);
  s.p99_ns = percentile(samples, 0.99);
  s.p999_ns = percentile(samples, 0.999);
  long double sum = 0;
  for (uint64_t v : samples) sum += v;
  s.mean_ns = double(sum / samples.size());
  return s;
}

nlohmann::json to_json(const LatencyStats& stats) {
  return {{"count", stats.count},        {"min_ns", stats.min_ns}, {"median_ns", stats.median_ns},
          {"mean_ns", stats.mean_ns},    {"p99_ns", stats.p99_ns}, {"p999_ns", stats.p999_ns},
          {"max_ns", stats.max_ns}};
}

}  // namespace tools
