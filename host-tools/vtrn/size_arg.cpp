// Command-line sizes (see size_arg.h).
#include "size_arg.h"

#include <ctype.h>

namespace tools {

std::string exact_size(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (unit < 6 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

drv::Result<uint64_t> parse_size(const std::string& text, uint64_t lo, uint64_t hi) {
  const std::string range = exact_size(lo) + ".." + exact_size(hi);
  auto not_a_size = [&] {
    return drv::Error(drv::Code::kInvalidArgument, "'" + text +
                                                       "' is not a size (a whole number with an optional K, M, G "
                                                       "or T suffix; " + range + ")");
  };
  size_t i = 0;
  uint64_t value = 0;
  bool overflow = false;
  while (i < text.size() && isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = uint64_t(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) overflow = true;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return not_a_size();
  unsigned shift = 0;
  if (i < text.size()) {
    switch (toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'P': shift = 50; break;
      case 'E': shift = 60; break;
      case 'B': break;
      default: return not_a_size();
    }
    const std::string rest = text.substr(shift == 0 ? i : i + 1);
    if (!(rest.empty() || rest == "B" || rest == "b" || (shift != 0 && (rest == "iB" || rest == "ib"))))
      return not_a_size();
  }
  if (shift != 0 && value > (UINT64_MAX >> shift)) overflow = true;
  if (overflow || (value << shift) < lo || (value << shift) > hi)
    return drv::Error(drv::Code::kInvalidArgument, "'" + text + "' outside " + range);
  return value << shift;
}

}  // namespace tools
