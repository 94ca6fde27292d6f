// Text rendering shared by the vtrn subcommands: aligned tables for people,
// unit formatting, enum names, and the one JSON printer. Every command builds
// one nlohmann::json document first and renders its table from the same
// data, so `--json` and the table can never disagree.
//
// Not a general formatting library: only what the subcommands print.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vtrn_api.pb-c.h"

namespace tools {

// Columns sized to their widest cell, two spaces apart; numbers are not
// right-aligned because most cells carry units.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  [[nodiscard]] std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Rows of fixed-width columns for views that redraw in place (`vtrn top`):
// a column keeps its position however its cells change from frame to
// frame. Numbers align right, words left, one space apart; the last column
// is not padded. A cell wider than its column is cut and ends in '+', so
// one wild value cannot move the rest of the row.
struct FixedColumn {
  const char* header;
  size_t width;
  bool right;  // align right (numbers with units)
};
std::string fixed_row(const std::vector<FixedColumn>& columns, const std::vector<std::string>& cells);
std::string fixed_header(const std::vector<FixedColumn>& columns);

// "READY", "FAILED", ... (the proto name without its CHIP_STATE_ prefix).
std::string state_name(Vtrn__Api__ChipState state);
// "block" / "spin".
std::string wait_name(Vtrn__Api__WaitMode mode);

// 850 ns, 12.3 us, 4.56 ms, 1.234 s, 3h02m: three significant digits.
std::string format_ns(uint64_t ns);
std::string format_ns(double ns);
// 16 MiB, 512 KiB, 100 B.
std::string format_bytes(uint64_t bytes);
// 1.23x
std::string format_ratio(double ratio);
// 0x40000000: addresses and other device values.
std::string hex(uint64_t value);

// A firmware log ring line "<level> <uptime us> <text>" as dmesg shows it:
// "[    0.010234] info  <text>". Lines in another shape (UART text) pass
// through unchanged.
std::string format_log_line(const std::string& line);

// Pretty-printed, one document, newline-terminated, on stdout.
void print_json(const nlohmann::json& doc);

}  // namespace tools
