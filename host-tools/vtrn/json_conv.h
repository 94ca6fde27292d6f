// vtrn.api messages as JSON, with the proto field names (units in the
// names: *_ns, *_ms, *_mc, *_bytes) and enums as their short names
// ("READY", "block"). These documents are what `--json` prints and what
// tables are rendered from; host-tools/README.md shows their shapes.
#pragma once

#include <nlohmann/json.hpp>

#include "vtrn_api.pb-c.h"

namespace tools {

nlohmann::json to_json(const Vtrn__Api__ChipSummary& chip);
nlohmann::json to_json(const Vtrn__Api__ListResponse& list);
nlohmann::json to_json(const Vtrn__Api__ChipInfo& info);
nlohmann::json to_json(const Vtrn__Api__PanicInfo& panic);
nlohmann::json to_json(const Vtrn__Api__Telemetry& telemetry);

}  // namespace tools
