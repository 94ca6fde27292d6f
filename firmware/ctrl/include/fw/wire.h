// fw::wire: the number a decoded enum field holds. proto3 enums are open:
// protobuf-c stores whatever 32-bit value the bytes carry, which need not be
// one of the C enum's enumerators, and loading such a value as the enum
// type is undefined behaviour (UBSan's -fsanitize=enum reports it; the
// control-request fuzzer found it). Handlers read the raw number and compare
// that with the enumerators.
#pragma once

#include <stdint.h>

namespace fw {

template <typename E>
constexpr uint32_t wire(const E& e) {
  static_assert(sizeof(E) == sizeof(uint32_t), "protobuf-c enums are int sized");
  uint32_t v = 0;
  __builtin_memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace fw
