// The per-chip persistent store of retired HBM pages, as a card keeps its
// bad-page list in flash: one small text file per chip under
// ${VTRN_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/vtrn}/<board model>/chip<N>.retired,
// so the list survives a chip reset, `vtrn down` / `vtrn up` and a vtrnd
// restart. vtrnd pushes it to the firmware right after the chip is READY.
//
// The file is outside input like any other: it is read with a size cap,
// every line is checked (version, geometry, page alignment, range,
// duplicates, count) and a CRC32 over the body must match. Anything wrong
// rejects the whole file with a reason for the log; a half-trusted list
// would be worse than none. Writes go to a temporary file in the same
// directory, are fsynced, then renamed over the old one, so a crash leaves
// the old list or the new one, never a torn file.
//
// Not the firmware's retired table (common/hbm): offsets here are from the
// start of HBM, so the store does not depend on where a chip maps HBM.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/drv/error.h"

namespace drv {

inline constexpr size_t kRetiredStoreMaxBytes = 64 * 1024;

struct RetiredGeometry {
  uint64_t page_bytes = 0;
  uint64_t hbm_bytes = 0;
  uint32_t max_pages = 256;
};

// ${VTRN_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/vtrn}; empty when
// none of them is set (no HOME): the store is then off.
std::string retired_store_root();
// root/<board>/chip<N>.retired; the board model is reduced to [A-Za-z0-9._-]
// so a hostile DTB model cannot point the path elsewhere.
std::string retired_store_path(const std::string& root, const std::string& board_model,
                               uint32_t chip);

// What a store holds: no file yet (present false, no offsets), or a valid
// file's offsets, strictly ascending.
struct RetiredList {
  bool present = false;
  std::vector<uint64_t> offsets;
};
// Reads and validates the file. A failure rejects the whole file and its
// detail says why (the caller logs it and starts from an empty list):
// kSystem when it cannot be opened or read, kDecode for anything wrong with
// what it holds (including a geometry that is not a valid chip's).
Result<RetiredList> load_retired(const std::string& path, const RetiredGeometry& g);
// Writes offsets (sorted, unique, validated against g) atomically, creating
// the directories. kInvalidArgument for an invalid geometry or an offset
// that is not one of its pages, kTooMany beyond g.max_pages, kSystem when a
// directory or the file cannot be written.
Error save_retired(const std::string& path, const RetiredGeometry& g,
                   const std::vector<uint64_t>& offsets, const std::string& comment);

}  // namespace drv
