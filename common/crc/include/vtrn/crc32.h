// CRC-32 as used by zlib, Ethernet and the vtrn control-queue slots
// (polynomial 0xEDB88320 reflected, initial value and final xor 0xFFFFFFFF).
// Table-driven, slicing-by-4; portable, built into firmware and host.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace vtrn {

// crc32(data, n) of the concatenation a||b equals crc32(b, nb, crc32(a, na)).
[[nodiscard]] uint32_t crc32(const void* data, size_t length, uint32_t crc = 0);

}  // namespace vtrn
