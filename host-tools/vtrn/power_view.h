// The power/thermal part of a chip's telemetry as the CLI shows it, shared
// by `vtrn telemetry` and `vtrn top` (both in cmd_power.cpp /
// cmd_telemetry.cpp). JSON keys carry their unit: the firmware's integer
// milli-units (_mc, _mw, _uj, _ns) are kept and the everyday units are added
// next to them (_c, _w, _j, _ratio).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "vtrn_api.pb-c.h"

namespace tools {

nlohmann::json power_to_json(const Vtrn__Api__PowerTelemetry& p);
// One short word per clock event reason ("thermal", "cap", "host",
// "idle"), comma-separated; "-" when none.
std::string short_reasons(const nlohmann::json& power);

}  // namespace tools
