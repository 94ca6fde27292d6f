// The QEMU monitor allow list and request parsing (see qmp_policy.h).
#include "qmp_policy.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

namespace drv {
namespace {

// HMP `info` subcommands that print state and neither change it nor show
// guest memory contents (QEMU 7.2's list, `help info`). `info mem` and
// `info tlb` print the page tables' mappings, not the memory.
constexpr std::array<std::string_view, 27> kReadOnlyInfo = {
    "accel", "block", "blockstats", "chardev", "cpus", "history", "hotpluggable-cpus", "iothreads", "irq",
    "jit", "kvm", "mem", "memdev", "mtree", "name", "network", "numa", "pci", "pic", "qom-tree", "qtree",
    "ramblock", "registers", "roms", "status", "tlb", "version"};

// QMP readers besides the query-* family.
constexpr std::array<std::string_view, 4> kReadOnlyQmp = {"qom-get", "qom-list", "qom-list-types",
                                                          "qom-list-properties"};

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
           ch == '_';
  });
}

Result<std::string> normalise_line(std::string_view line) {
  if (line.size() > kMaxHmpLineBytes)
    return Error(Code::kInvalidArgument, "monitor command longer than " + std::to_string(kMaxHmpLineBytes) +
                                             " bytes");
  std::string out;
  bool space = false;
  for (char ch : line) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == ' ' || ch == '\t') {
      space = !out.empty();
      continue;
    }
    if (u < 0x20 || u == 0x7f) return Error(Code::kInvalidArgument, "monitor command holds a control character");
    if (space) out += ' ';
    space = false;
    out += ch;
  }
  if (out.empty()) return Error(Code::kInvalidArgument, "empty monitor command");
  return out;
}

bool hmp_read_only(const std::string& line) {
  if (line == "info" || line == "help" || line == "help info") return true;
  if (line.rfind("info ", 0) != 0) return false;
  const std::string_view rest = std::string_view(line).substr(5);
  const std::string_view sub = rest.substr(0, rest.find(' '));
  return std::find(kReadOnlyInfo.begin(), kReadOnlyInfo.end(), sub) != kReadOnlyInfo.end();
}

}  // namespace

Result<MonitorCommand> hmp_command(std::string_view line) {
  Result<std::string> l = normalise_line(line);
  if (!l.ok()) return l.error();
  MonitorCommand c;
  c.execute = "human-monitor-command";
  c.hmp = std::move(*l);
  c.arguments_json = nlohmann::json{{"command-line", c.hmp}}.dump();
  return c;
}

Result<MonitorCommand> qmp_command(std::string_view json) {
  if (json.size() > kMaxQmpJsonBytes)
    return Error(Code::kInvalidArgument,
                 "QMP command longer than " + std::to_string(kMaxQmpJsonBytes / 1024) + " KiB");
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Error(Code::kInvalidArgument, "QMP command is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "execute" && it.key() != "arguments")
      return Error(Code::kInvalidArgument, "QMP command has a member '" + it.key().substr(0, 64) +
                                               "' (only \"execute\" and \"arguments\")");
  }
  if (!j.contains("execute") || !j["execute"].is_string() || !is_name(j["execute"].get<std::string>()))
    return Error(Code::kInvalidArgument, "QMP command needs \"execute\": a command name");
  MonitorCommand c;
  c.execute = j["execute"].get<std::string>();
  if (j.contains("arguments")) {
    if (!j["arguments"].is_object()) return Error(Code::kInvalidArgument, "QMP \"arguments\" is not an object");
    if (c.execute == "human-monitor-command") {
      const nlohmann::json& a = j["arguments"];
      if (!a.contains("command-line") || !a["command-line"].is_string())
        return Error(Code::kInvalidArgument, "human-monitor-command needs \"command-line\": a string");
      Result<MonitorCommand> h = hmp_command(a["command-line"].get<std::string>());
      if (!h.ok()) return h.error();
      if (a.size() > 1) {
        // cpu-index and the like stay as they were given.
        nlohmann::json args = a;
        args["command-line"] = h->hmp;
        h->arguments_json = args.dump();
      }
      return h;
    }
    c.arguments_json = j["arguments"].dump();
  } else if (c.execute == "human-monitor-command") {
    return Error(Code::kInvalidArgument, "human-monitor-command needs \"command-line\": a string");
  }
  return c;
}

Error check_read_only(const MonitorCommand& c) {
  if (c.execute == "human-monitor-command") {
    if (hmp_read_only(c.hmp)) return {};
    return Error(Code::kInvalidArgument, "'" + c.hmp.substr(0, 80) + "' is not on the read-only monitor allow list");
  }
  if (c.execute.rfind("query-", 0) == 0 ||
      std::find(kReadOnlyQmp.begin(), kReadOnlyQmp.end(), c.execute) != kReadOnlyQmp.end())
    return {};
  return Error(Code::kInvalidArgument, "'" + c.execute + "' is not on the read-only QMP allow list");
}

}  // namespace drv
