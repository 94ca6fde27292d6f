// Unit tests of the CLI's pure parts: latency statistics, unit formatting,
// log line rendering, tables, and the native eventfd reference. No vtrnd.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "native_pingpong.h"
#include "render.h"
#include "stats.h"

// Last: cmocka defines macros (fail) that collide with libstdc++ names.
extern "C" {
#include <cmocka.h>
}

namespace {

void test_percentile_uses_nearest_rank(void**) {
  std::vector<uint64_t> sorted;
  for (uint64_t i = 1; i <= 100; ++i) sorted.push_back(i * 10);
  assert_int_equal(tools::percentile(sorted, 0.5), 500);
  assert_int_equal(tools::percentile(sorted, 0.99), 990);
  assert_int_equal(tools::percentile(sorted, 0.999), 1000);
  assert_int_equal(tools::percentile(sorted, 0.0), 10);
  assert_int_equal(tools::percentile(sorted, 1.0), 1000);
}

void test_percentile_of_empty_set_is_zero(void**) {
  assert_int_equal(tools::percentile({}, 0.5), 0);
}

void test_summarize_sorts_and_averages_unsorted_samples(void**) {
  const tools::LatencyStats s = tools::summarize({30, 10, 20, 40});
  assert_int_equal(s.count, 4);
  assert_int_equal(s.min_ns, 10);
  assert_int_equal(s.max_ns, 40);
  assert_int_equal(s.median_ns, 20);
  assert_true(s.mean_ns == 25.0);
  assert_int_equal(s.p99_ns, 40);
}

void test_summarize_of_no_samples_is_all_zero(void**) {
  const tools::LatencyStats s = tools::summarize({});
  assert_int_equal(s.count, 0);
  assert_int_equal(s.max_ns, 0);
  assert_true(s.mean_ns == 0.0);
}

void test_stats_json_names_units(void**) {
  const nlohmann::json j = tools::to_json(tools::summarize({5, 7}));
  for (const char* key : {"count", "min_ns", "median_ns", "mean_ns", "p99_ns", "p999_ns", "max_ns"})
    assert_true(j.contains(key));
  assert_int_equal(j["max_ns"].get<uint64_t>(), 7);
}

void test_format_ns_picks_unit_and_three_digits(void**) {
  assert_string_equal(tools::format_ns(uint64_t(850)).c_str(), "850 ns");
  assert_string_equal(tools::format_ns(uint64_t(12345)).c_str(), "12.3 us");
  assert_string_equal(tools::format_ns(uint64_t(4560000)).c_str(), "4.56 ms");
  assert_string_equal(tools::format_ns(uint64_t(1234000000)).c_str(), "1.23 s");
  assert_string_equal(tools::format_ns(uint64_t(3600) * 1000000000u * 3 + uint64_t(120) * 1000000000u).c_str(),
                      "3h02m");
}

void test_format_bytes_uses_binary_units(void**) {
  assert_string_equal(tools::format_bytes(16u << 20).c_str(), "16 MiB");
  assert_string_equal(tools::format_bytes(100).c_str(), "100 B");
  assert_string_equal(tools::format_bytes(1536).c_str(), "1.5 KiB");
}

void test_log_line_renders_like_dmesg(void**) {
  assert_string_equal(tools::format_log_line("6 10234 pcie: bar2 16 MiB").c_str(),
                      "[    0.010234] info  pcie: bar2 16 MiB");
  assert_string_equal(tools::format_log_line("3 2000001 board: bad").c_str(), "[    2.000001] err   board: bad");
}

void test_log_line_in_another_shape_passes_through(void**) {
  assert_string_equal(tools::format_log_line("qemu: could not load kernel").c_str(), "qemu: could not load kernel");
  assert_string_equal(tools::format_log_line("6 notanumber x").c_str(), "6 notanumber x");
  assert_string_equal(tools::format_log_line("").c_str(), "");
}

void test_table_aligns_columns_to_widest_cell(void**) {
  tools::Table t({"A", "LONGER"});
  t.add({"wide cell", "x"});
  assert_string_equal(t.render().c_str(), "A          LONGER\nwide cell  x\n");
}

void test_native_pingpong_returns_one_sample_per_round_trip(void**) {
  std::vector<uint64_t> rtt;
  std::string err;
  assert_true(tools::native_eventfd_pingpong(50, 5, &rtt, &err));
  assert_int_equal(rtt.size(), 50);
  for (uint64_t v : rtt) assert_true(v > 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_percentile_uses_nearest_rank),
      cmocka_unit_test(test_percentile_of_empty_set_is_zero),
      cmocka_unit_test(test_summarize_sorts_and_averages_unsorted_samples),
      cmocka_unit_test(test_summarize_of_no_samples_is_all_zero),
      cmocka_unit_test(test_stats_json_names_units),
      cmocka_unit_test(test_format_ns_picks_unit_and_three_digits),
      cmocka_unit_test(test_format_bytes_uses_binary_units),
      cmocka_unit_test(test_log_line_renders_like_dmesg),
      cmocka_unit_test(test_log_line_in_another_shape_passes_through),
      cmocka_unit_test(test_table_aligns_columns_to_widest_cell),
      cmocka_unit_test(test_native_pingpong_returns_one_sample_per_round_trip),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
