// Graphviz DOT rendering of the board topology (see topo_dot.h).
#include "topo_dot.h"

#include <map>
#include <utility>

namespace tools {
namespace {

// A DOT identifier needs no quoting when it is [A-Za-z0-9_]; labels are
// quoted, with " and \ escaped (values come from vtrnd: never trusted to be
// clean).
std::string dot_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string node_id(const nlohmann::json& end) {
  const std::string kind = end.value("kind", "");
  return (kind == "switch" ? "switch" : "chip") + std::to_string(end.value("id", 0u));
}

bool up(const std::string& state) { return state == "L0" || state == "L0s" || state == "L1"; }

}  // namespace

uint64_t link_error_count(const nlohmann::json& c) {
  uint64_t n = 0;
  for (const char* k : {"crc_errors", "seq_errors", "replay_timeouts", "transport_errors", "protocol_errors"}) {
    const nlohmann::json* v = c.contains(k) ? &c.at(k) : nullptr;
    if (v != nullptr && v->is_number_integer() && v->get<int64_t>() >= 0) n += v->get<uint64_t>();
  }
  return n;
}

const char* link_state_colour(const std::string& state) {
  if (up(state)) return "forestgreen";
  if (state == "Recovery" || state == "Polling" || state == "Configuration" || state == "Loopback")
    return "darkorange";
  if (state == "Disabled") return "red3";
  return "grey55";
}

std::string topo_to_dot(const nlohmann::json& topo, const nlohmann::json& ports,
                        const nlohmann::json& chip_states) {
  std::map<std::pair<uint32_t, uint32_t>, const nlohmann::json*> counters;
  for (const auto& p : ports) {
    if (p.contains("counters") && !p.value("on_switch", false))
      counters[{p.value("chip", 0u), p.value("port", 0u)}] = &p.at("counters");
  }
  const uint32_t chips = topo.value("chips", 0u);
  std::string out = "graph vtrn {\n";
  out += "  graph [label=" +
         dot_quoted("board " + topo.value("model", std::string("?")) + ": " + std::to_string(chips) +
                " chips, " + std::to_string(topo.value("links_up", 0u)) + " of " +
                std::to_string(topo.at("links").size()) + " links up") +
         ", labelloc=t, fontname=Helvetica, overlap=false, splines=true];\n";
  out += "  node [fontname=Helvetica, fontsize=10];\n";
  out += "  edge [fontname=Helvetica, fontsize=8];\n";
  for (uint32_t c = 0; c < chips; ++c) {
    const std::string key = std::to_string(c);
    const std::string state = chip_states.is_object() && chip_states.contains(key)
                                  ? chip_states.at(key).get<std::string>()
                                  : std::string();
    out += "  chip" + key + " [shape=box, style=filled, fillcolor=" +
           (state.empty() || state == "READY" ? "lightsteelblue1" : "mistyrose") +
           ", label=" + dot_quoted("chip " + key + (state.empty() ? "" : "\n" + state)) + "];\n";
  }
  for (const auto& s : topo.at("switches")) {
    const std::string id = std::to_string(s.value("id", 0u));
    out += "  switch" + id + " [shape=hexagon, style=filled, fillcolor=khaki1, label=" +
           dot_quoted("switch " + id + "\n" + std::to_string(s.value("ports_up", 0u)) + "/" +
                  std::to_string(s.value("ports", 0u)) + " ports up") +
           "];\n";
  }
  for (const auto& l : topo.at("links")) {
    const nlohmann::json& a = l.at("a");
    const nlohmann::json& b = l.at("b");
    // The chip end tells the link's state (a switch end mirrors it); the
    // speed and width are what was negotiated.
    const nlohmann::json& ref = a.value("kind", "") == "chip" ? a : b;
    const std::string state = ref.value("state", std::string("-"));
    std::string speed = a.value("speed", std::string("-"));
    if (speed == "-") speed = b.value("speed", std::string("-"));
    const uint32_t width = a.value("width", 0u) ? a.value("width", 0u) : b.value("width", 0u);
    uint64_t errors = 0;
    bool have_counts = false;
    for (const nlohmann::json* e : {&a, &b}) {
      if (e->value("kind", "") != "chip") continue;
      auto it = counters.find({e->value("id", 0u), e->value("port", 0u)});
      if (it == counters.end()) continue;
      errors += link_error_count(*it->second);
      have_counts = true;
    }
    std::string label = state;
    if (up(state)) label += " " + speed + (width ? " x" + std::to_string(width) : "");
    if (have_counts) label += "\n" + std::to_string(errors) + (errors == 1 ? " error" : " errors");
    const bool absent = !a.value("on_board", true) || !b.value("on_board", true);
    out += "  " + node_id(a) + " -- " + node_id(b) + " [color=" + link_state_colour(state) +
           ", penwidth=" + (up(state) ? "2" : "1") + (absent || !up(state) ? ", style=dashed" : "") +
           (errors ? ", fontcolor=red3" : "") + ", taillabel=" + dot_quoted(std::to_string(a.value("port", 0u))) +
           ", headlabel=" + dot_quoted(std::to_string(b.value("port", 0u))) + ", label=" + dot_quoted(label) +
           ", tooltip=" + dot_quoted("link " + std::to_string(l.value("index", 0u))) + "];\n";
  }
  out += "}\n";
  return out;
}

}  // namespace tools
