// The board's topology as a Graphviz DOT graph (`vtrn topo --dot`): one
// node per chip and per switch, one edge per link, coloured by the link's
// live state and labelled with its speed, width and error count. Built from
// the documents `vtrn topo --json` and `vtrn link ls --json` print, so the
// picture and the tables cannot disagree, and so it can be unit tested
// without a board.
//
// Not a layout engine: Graphviz (`dot`, `neato`) places the nodes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tools {

// `topo`: {"model", "chips", "links": [{"index", "a": {kind, id, port, on_board,
// state, speed, width}, "b": {...}}], "switches": [{"id", "ports", "ports_up", ...}]}.
// `ports`: the "ports" array of `link ls --json` (counters per chip port);
// may be empty, then edges carry no error counts. `chip_states`: chip id ->
// "READY", ... (may be empty).
std::string topo_to_dot(const nlohmann::json& topo, const nlohmann::json& ports,
                        const nlohmann::json& chip_states);

// Link errors of one port's counters, as the edge label counts them: CRC,
// sequence, replay timeouts, transport and protocol errors.
uint64_t link_error_count(const nlohmann::json& counters);

// The colour an edge gets for a link state: L0/L0s/L1 (up) green, Recovery,
// Polling, Configuration (training) orange, Disabled red, else grey.
const char* link_state_colour(const std::string& state);

}  // namespace tools
