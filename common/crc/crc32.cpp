// CRC-32 (reflected 0xEDB88320), slicing-by-4. The tables are computed at
// compile time so the firmware carries them in .rodata without a boot-time
// init step.
#include "vtrn/crc32.h"

namespace vtrn {
namespace {

struct Tables {
  uint32_t t[4][256];
};

constexpr Tables make_tables() {
  Tables tb{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    tb.t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 4; ++s) tb.t[s][i] = (tb.t[s - 1][i] >> 8) ^ tb.t[0][tb.t[s - 1][i] & 0xFF];
  }
  return tb;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32(const void* data, size_t length, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  // Byte loads only: the input may be unaligned and the firmware builds with
  // -mstrict-align.
  while (length >= 4) {
    c ^= uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    c = kTables.t[3][c & 0xFF] ^ kTables.t[2][(c >> 8) & 0xFF] ^ kTables.t[1][(c >> 16) & 0xFF] ^
        kTables.t[0][c >> 24];
    p += 4;
    length -= 4;
  }
  while (length--) c = (c >> 8) ^ kTables.t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

}  // namespace vtrn
