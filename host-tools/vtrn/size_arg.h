// Sizes and counts typed on the vtrn command line ("4K", "64M", "1G"):
// parsed with overflow checks into a range the command names, so a user
// sees "--size: '1T' outside 1 B..1 GiB" and exit 2, never a wrapped value
// or a C++ allocation error. commands.h wraps it in a CLI11 validator.
//
// Suffixes are binary (K = 1024), optionally followed by "iB" or "B"; a
// bare number is bytes (or a count). No sign, no fraction, no hex.
#pragma once

#include <stdint.h>

#include <string>

#include "vtrn/drv/error.h"

namespace tools {

// What the CLI holds in its own memory at once (dma copy, mem read/write).
inline constexpr uint64_t kMaxCliBuffer = uint64_t(1) << 30;
// The most HBM one command asks for; the board's size is vtrnd's check.
inline constexpr uint64_t kMaxHbmBytes = uint64_t(1) << 40;
// `dma bench --total`: a run of minutes at emulated speed, not of years.
inline constexpr uint64_t kMaxBenchTotal = uint64_t(64) << 30;

// "1 GiB", "4 KiB", "4097 B": exact, in the largest unit that divides it.
std::string exact_size(uint64_t bytes);

// The size `text` names when it lies in lo..hi; otherwise kInvalidArgument
// with the user's text and the range ("'1T' outside 1 B..1 GiB", "'-1' is
// not a size ...").
drv::Result<uint64_t> parse_size(const std::string& text, uint64_t lo, uint64_t hi);

}  // namespace tools
