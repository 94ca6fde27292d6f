// Loading the board description vtrnd launches chips from: a .dtb, or a
// .dts compiled with dtc, optionally resized to N chips
// (vtrn::board::resize_board), then every chip decoded with the same parser
// the firmware uses. Errors are one line that starts with "board FILE: ", so
// `vtrn up` can print them as they are; the code says what kind (kNotFound,
// kBadTree and the parser's own, kSystem).
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/board.h"
#include "vtrn/drv/error.h"

namespace drv {

struct BoardSpec {
  std::string file;           // as given
  std::vector<uint8_t> dtb;   // the tree chips are launched with (resized, packed)
  vtrn::board::Board board;
  std::vector<vtrn::board::Chip> chips;  // indexed like board.chip_ids
};

// `chips` == 0 keeps the board's own chip count.
Result<BoardSpec> load_board(const std::string& file, uint32_t chips, const std::string& dtc);

// Exposed for tests: decode an in-memory DTB (label names it in errors).
Result<BoardSpec> decode_board(const std::string& label, std::vector<uint8_t> dtb, uint32_t chips);

}  // namespace drv
