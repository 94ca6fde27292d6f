// Table and unit rendering for the vtrn CLI (see render.h).
#include "render.h"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <iostream>

#include "vtrn/proto_names.h"

namespace tools {

std::string Table::render() const {
  std::vector<size_t> width(headers_.size(), 0);
  auto widen = [&width](const std::vector<std::string>& row) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  widen(headers_);
  for (const auto& row : rows_) widen(row);

  std::string out;
  auto emit = [&out, &width](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  };
  if (!headers_.empty()) emit(headers_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string fixed_row(const std::vector<FixedColumn>& columns, const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    std::string cell = i < cells.size() ? cells[i] : std::string("-");
    const size_t w = columns[i].width;
    const bool last = i + 1 == columns.size();
    if (!last && cell.size() > w) cell = cell.substr(0, w - 1) + "+";
    if (i > 0) line += ' ';
    if (last) {
      line += columns[i].right && cell.size() < w ? std::string(w - cell.size(), ' ') + cell : cell;
    } else if (columns[i].right) {
      line += std::string(w - cell.size(), ' ') + cell;
    } else {
      line += cell + std::string(w - cell.size(), ' ');
    }
  }
  return line + "\n";
}

std::string fixed_header(const std::vector<FixedColumn>& columns) {
  std::vector<std::string> cells;
  for (const auto& c : columns) cells.emplace_back(c.header);
  return fixed_row(columns, cells);
}

std::string state_name(Vtrn__Api__ChipState state) { return vtrn::proto::chip_state_name(state); }

std::string wait_name(Vtrn__Api__WaitMode mode) {
  return mode == VTRN__API__WAIT_MODE__WAIT_SPIN_BLOCK ? "spin" : "block";
}

namespace {

// Three significant digits of `value` followed by `unit`.
std::string sig3(double value, const char* unit) {
  char buf[48];
  if (value >= 100.0)
    snprintf(buf, sizeof buf, "%.0f %s", value, unit);
  else if (value >= 10.0)
    snprintf(buf, sizeof buf, "%.1f %s", value, unit);
  else
    snprintf(buf, sizeof buf, "%.2f %s", value, unit);
  return buf;
}

}  // namespace

std::string format_ns(double ns) {
  if (ns < 1e3) return sig3(ns, "ns");
  if (ns < 1e6) return sig3(ns / 1e3, "us");
  if (ns < 1e9) return sig3(ns / 1e6, "ms");
  if (ns < 3600e9) return sig3(ns / 1e9, "s");
  const uint64_t s = uint64_t(ns / 1e9);
  char buf[48];
  snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(s / 3600),
           static_cast<unsigned long long>(s / 60 % 60));
  return buf;
}

std::string format_ns(uint64_t ns) { return format_ns(double(ns)); }

std::string hex(uint64_t value) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  double value = double(bytes);
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[48];
  if (value == double(uint64_t(value)))
    snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(value), kUnits[unit]);
  else
    snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string format_ratio(double ratio) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.2fx", ratio);
  return buf;
}

std::string format_log_line(const std::string& line) {
  // "<level digit> <uptime us> <text>"
  if (line.size() < 4 || line[0] < '0' || line[0] > '7' || line[1] != ' ') return line;
  char* end = nullptr;
  const unsigned long long us = strtoull(line.c_str() + 2, &end, 10);
  if (end == line.c_str() + 2 || *end != ' ') return line;
  static const char* const kLevels[] = {"emerg", "alert", "crit", "err",
                                        "warn",  "note",  "info", "debug"};
  char prefix[64];
  snprintf(prefix, sizeof prefix, "[%5llu.%06llu] %-5s ", us / 1000000, us % 1000000,
           kLevels[line[0] - '0']);
  return prefix + std::string(end + 1);
}

void print_json(const nlohmann::json& doc) {
  // Firmware text is not guaranteed UTF-8; replace bad bytes rather than throw.
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
}

}  // namespace tools
