// Unit tests of the CLI's pure parts: latency statistics, unit formatting,
// log line rendering, tables, exit-code names and the --json error
// document, the topology as DOT (rendered by Graphviz), and the native eventfd
// reference. No vtrnd.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "cli_error.h"
#include "native_pingpong.h"
#include "render.h"
#include "size_arg.h"
#include "stats.h"
#include "topo_dot.h"

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

void test_fixed_columns_keep_their_place_when_cells_change_width(void**) {
  const std::vector<tools::FixedColumn> cols = {{"ID", 3, false}, {"NUM", 6, true}, {"TAIL", 4, false}};
  assert_string_equal(tools::fixed_header(cols).c_str(), "ID     NUM TAIL\n");
  assert_string_equal(tools::fixed_row(cols, {"0", "1.5W", "a"}).c_str(), "0     1.5W a\n");
  assert_string_equal(tools::fixed_row(cols, {"12", "100.5W", "longer tail"}).c_str(),
                      "12  100.5W longer tail\n");
  // Too wide for its column: cut, marked, and the next column stays put.
  assert_string_equal(tools::fixed_row(cols, {"1234", "12345678", "t"}).c_str(), "12+ 12345+ t\n");
  // Missing cells render as "-".
  assert_string_equal(tools::fixed_row(cols, {"7"}).c_str(), "7        - -\n");
}

void test_error_document_names_the_code_and_keeps_the_context(void**) {
  const auto doc = nlohmann::json::parse(
      tools::error_document(tools::Exit::kUnknownChip, "unknown chip 7 (board has chips 0-1)"));
  assert_int_equal(doc.at("error").at("code").get<int>(), 4);
  assert_string_equal(doc.at("error").at("name").get<std::string>().c_str(), "unknown_chip");
  assert_string_equal(doc.at("error").at("message").get<std::string>().c_str(),
                      "unknown chip 7 (board has chips 0-1)");
  assert_int_equal(doc.size(), 1);
  const std::string line =
      tools::error_document(tools::Exit::kTimeout, "job 3 TIMED_OUT", {{"job", 3}, {"state", "TIMED_OUT"}});
  assert_null(strchr(line.c_str(), '\n'));  // one line: JSON Lines streams stay line per document
  const auto ctx = nlohmann::json::parse(line);
  assert_int_equal(ctx.at("job").get<int>(), 3);
  assert_string_equal(ctx.at("error").at("name").get<std::string>().c_str(), "timeout");
}

void test_every_exit_code_has_a_distinct_name(void**) {
  std::set<std::string> names;
  for (int c = 0; c <= 9; ++c) names.insert(tools::exit_name(tools::Exit(c)));
  assert_int_equal(names.size(), 10);
  assert_string_equal(tools::exit_name(tools::Exit::kBusy), "busy");
  assert_string_equal(tools::exit_name(tools::Exit::kUntrusted), "untrusted");
  assert_string_equal(tools::exit_name(tools::Exit::kNotRunning), "not_running");
  assert_string_equal(tools::exit_name(tools::Exit::kChipNotReady), "chip_not_ready");
}

void test_sizes_parse_with_binary_suffixes(void**) {
  struct Case {
    const char* text;
    uint64_t want;
  } cases[] = {{"1", 1},           {"4096", 4096},          {"4K", 4096},          {"4k", 4096},
               {"4KiB", 4096},     {"4KB", 4096},           {"64M", 64ull << 20},  {"1G", 1ull << 30},
               {"1T", 1ull << 40}, {"16E", 0},              {"7B", 7}};
  for (const Case& c : cases) {
    const drv::Result<uint64_t> v = tools::parse_size(c.text, 0, UINT64_MAX);
    if (c.want == 0) {
      if (v.ok()) fail_msg("'%s' accepted as %llu", c.text, (unsigned long long)v.value());
      continue;
    }
    if (!v.ok()) fail_msg("'%s': refused (%s), want %llu", c.text, v.error().detail().c_str(), (unsigned long long)c.want);
    if (v.value() != c.want)
      fail_msg("'%s': got %llu, want %llu", c.text, (unsigned long long)v.value(), (unsigned long long)c.want);
  }
}

void test_sizes_out_of_range_name_the_range(void**) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"1T", "'1T' outside 1 B..1 GiB"},
      {"0", "'0' outside 1 B..1 GiB"},
      {"1025M", "'1025M' outside 1 B..1 GiB"},
      {"18446744073709551616", "'18446744073709551616' outside 1 B..1 GiB"},
      {"17179869184G", "'17179869184G' outside"},  // 2^64: wraps to 0 without the check
      {"-1", "'-1' is not a size"},
      {"+4", "'+4' is not a size"},
      {"1.5M", "'1.5M' is not a size"},
      {"0x10", "'0x10' is not a size"},
      {"4Q", "'4Q' is not a size"},
      {"4KK", "'4KK' is not a size"},
      {"", "'' is not a size"},
  };
  for (const Case& c : cases) {
    const drv::Result<uint64_t> v = tools::parse_size(c.text, 1, 1ull << 30);
    if (v.ok()) fail_msg("'%s' accepted as %llu", c.text, (unsigned long long)v.value());
    // A bad size is the user's argument: the code the CLI turns into a usage error.
    assert_int_equal(v.error().code(), drv::Code::kInvalidArgument);
    const std::string& err = v.error().detail();
    if (err.rfind(c.want, 0) != 0) fail_msg("'%s': got '%s', want '%s...'", c.text, err.c_str(), c.want);
  }
  const drv::Result<uint64_t> v = tools::parse_size("-1", 1, 1ull << 30);
  assert_false(v.ok());
  assert_non_null(strstr(v.error().detail().c_str(), "1 B..1 GiB"));
}

void test_exact_size_uses_the_largest_dividing_unit(void**) {
  assert_string_equal(tools::exact_size(1).c_str(), "1 B");
  assert_string_equal(tools::exact_size(4097).c_str(), "4097 B");
  assert_string_equal(tools::exact_size(4096).c_str(), "4 KiB");
  assert_string_equal(tools::exact_size(3ull << 30).c_str(), "3 GiB");
  assert_string_equal(tools::exact_size(UINT64_MAX).c_str(), "18446744073709551615 B");
}

// An UltraServer-sized topology: 144 chips, each port p to switch p.
nlohmann::json ultra_topology(uint32_t chips, uint32_t switches) {
  nlohmann::json links = nlohmann::json::array();
  uint32_t index = 0;
  for (uint32_t s = 0; s < switches; ++s) {
    for (uint32_t c = 0; c < chips; ++c) {
      const bool down = s == 1 && c == 7;
      links.push_back({{"index", index++},
                       {"a", {{"kind", "chip"}, {"id", c}, {"port", s}, {"on_board", true},
                              {"state", down ? "Disabled" : "L0"}, {"speed", down ? "-" : "32GT/s"},
                              {"width", down ? 0 : 4}}},
                       {"b", {{"kind", "switch"}, {"id", s}, {"port", c}, {"on_board", true},
                              {"state", down ? "Disabled" : "L0"}, {"speed", down ? "-" : "32GT/s"},
                              {"width", down ? 0 : 4}}}});
    }
  }
  nlohmann::json sw = nlohmann::json::array();
  for (uint32_t s = 0; s < switches; ++s) sw.push_back({{"id", s}, {"ports", chips}, {"ports_up", chips - (s == 1)}});
  return {{"model", "vtrn-ultra144"}, {"chips", chips}, {"links_up", chips * switches - 1},
          {"links", links}, {"switches", sw}};
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void test_topo_dot_draws_every_chip_switch_and_link_of_an_ultraserver(void**) {
  const nlohmann::json topo = ultra_topology(144, 2);
  nlohmann::json ports = nlohmann::json::array();
  ports.push_back({{"chip", 3}, {"port", 0}, {"on_switch", false},
                   {"counters", {{"crc_errors", 5}, {"seq_errors", 1}, {"replays", 9}}}});
  const std::string dot = tools::topo_to_dot(topo, ports, {{"3", "READY"}, {"4", "FAILED"}});
  assert_int_equal(dot.rfind("graph vtrn {\n", 0), 0);
  assert_int_equal(dot.back(), '\n');
  assert_int_equal(count_of(dot, "[shape=box"), 144);
  assert_int_equal(count_of(dot, "[shape=hexagon"), 2);
  assert_int_equal(count_of(dot, " -- "), 288);
  assert_non_null(strstr(dot.c_str(), "chip143 [shape=box"));
  assert_non_null(strstr(dot.c_str(), "chip0 -- switch0 [color=forestgreen"));
  // The disabled link: red, dashed, no speed in its label.
  assert_non_null(strstr(dot.c_str(), "chip7 -- switch1 [color=red3, penwidth=1, style=dashed"));
  // Error counts: CRC + sequence (replays are recoveries, not errors).
  assert_non_null(strstr(dot.c_str(), "label=\"L0 32GT/s x4\\n6 errors\""));
  assert_non_null(strstr(dot.c_str(), "label=\"chip 4\\nFAILED\""));
  assert_non_null(strstr(dot.c_str(), "label=\"switch 1\\n143/144 ports up\""));
}

// Graphviz lays out and renders all 146 nodes and 288 edges (Debian's
// graphviz is a build dependency: scripts/install-deps.sh).
void test_graphviz_renders_the_ultraserver_graph(void**) {
  const std::string dot = tools::topo_to_dot(ultra_topology(144, 2), nlohmann::json::array(), nlohmann::json::object());
  char dir[] = "/tmp/vtrn-topo-XXXXXX";
  assert_non_null(mkdtemp(dir));
  const std::string in = std::string(dir) + "/ultra.dot", out = std::string(dir) + "/ultra.svg";
  FILE* f = fopen(in.c_str(), "w");
  assert_non_null(f);
  fputs(dot.c_str(), f);
  fclose(f);
  const std::string cmd = "dot -Tsvg -o " + out + " " + in;
  const int rc = system(cmd.c_str());
  std::string svg;
  if (FILE* g = fopen(out.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, g)) > 0) svg.append(buf, n);
    fclose(g);
  }
  unlink(in.c_str());
  unlink(out.c_str());
  rmdir(dir);
  assert_int_equal(rc, 0);
  assert_int_equal(count_of(svg, "class=\"node\""), 146);
  assert_int_equal(count_of(svg, "class=\"edge\""), 288);
  assert_non_null(strstr(svg.c_str(), ">chip 143</text>"));
}

void test_topo_dot_quotes_what_vtrnd_sends(void**) {
  nlohmann::json topo = ultra_topology(1, 1);
  topo["model"] = "evil\" ]; x -- y; [\\";
  const std::string dot = tools::topo_to_dot(topo, nlohmann::json::array(), nlohmann::json::object());
  assert_non_null(strstr(dot.c_str(), "board evil\\\" ]; x -- y; [\\\\: 1 chips"));
  assert_int_equal(count_of(dot, " -- "), 1 + 1);  // the link, and the text inside the quoted label
}

void test_link_state_colours(void**) {
  assert_string_equal(tools::link_state_colour("L1"), "forestgreen");
  assert_string_equal(tools::link_state_colour("Recovery"), "darkorange");
  assert_string_equal(tools::link_state_colour("Disabled"), "red3");
  assert_string_equal(tools::link_state_colour("Detect"), "grey55");
}

void test_native_pingpong_returns_one_sample_per_round_trip(void**) {
  const drv::Result<std::vector<uint64_t>> rtt = tools::native_eventfd_pingpong(50, 5);
  if (!rtt.ok()) fail_msg("%s", rtt.error().detail().c_str());
  assert_int_equal(rtt.value().size(), 50);
  for (uint64_t v : rtt.value()) assert_true(v > 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_percentile_uses_nearest_rank),
      cmocka_unit_test(test_sizes_parse_with_binary_suffixes),
      cmocka_unit_test(test_sizes_out_of_range_name_the_range),
      cmocka_unit_test(test_exact_size_uses_the_largest_dividing_unit),
      cmocka_unit_test(test_percentile_of_empty_set_is_zero),
      cmocka_unit_test(test_summarize_sorts_and_averages_unsorted_samples),
      cmocka_unit_test(test_summarize_of_no_samples_is_all_zero),
      cmocka_unit_test(test_stats_json_names_units),
      cmocka_unit_test(test_format_ns_picks_unit_and_three_digits),
      cmocka_unit_test(test_format_bytes_uses_binary_units),
      cmocka_unit_test(test_log_line_renders_like_dmesg),
      cmocka_unit_test(test_log_line_in_another_shape_passes_through),
      cmocka_unit_test(test_table_aligns_columns_to_widest_cell),
      cmocka_unit_test(test_fixed_columns_keep_their_place_when_cells_change_width),
      cmocka_unit_test(test_error_document_names_the_code_and_keeps_the_context),
      cmocka_unit_test(test_every_exit_code_has_a_distinct_name),
      cmocka_unit_test(test_topo_dot_draws_every_chip_switch_and_link_of_an_ultraserver),
      cmocka_unit_test(test_graphviz_renders_the_ultraserver_graph),
      cmocka_unit_test(test_topo_dot_quotes_what_vtrnd_sends),
      cmocka_unit_test(test_link_state_colours),
      cmocka_unit_test(test_native_pingpong_returns_one_sample_per_round_trip),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
