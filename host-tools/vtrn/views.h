// Tables shared by more than one subcommand: the chip list (`vtrn ls`,
// `vtrn up`) rendered from the JSON document of a ListResponse.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tools {

// CHIP STATE FIRMWARE UPTIME PCI BAR2 BOARD BOOT, then one line per chip
// that carries an error.
std::string render_chip_table(const nlohmann::json& list);

}  // namespace tools
