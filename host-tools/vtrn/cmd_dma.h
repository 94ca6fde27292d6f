// `vtrn dma ...`: the DMA subcommands (copy, bench, stats, reset), registered
// like the others in commands.h; kept in its own header while commands.h has
// another owner.
#pragma once

#include "commands.h"

namespace tools {

void add_dma_command(CLI::App& app, Action* action);

}  // namespace tools
