// The UART console: the PL011 the platform DTB names, bound to picolibc's
// stdout/stderr. (This header does not include hal/uart.h: picolibc's
// <stdio.h> defines putc as a macro, which clashes with Pl011::putc.)
// Output before console_init() is discarded (fw::log keeps
// its own boot buffer and replays it). Not buffered, not interrupt driven:
// each write waits (bounded, in the HAL) for FIFO space.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/status.h"

namespace fw::console {

// `base` and `clock_hz` from the platform DTB's "arm,pl011" node.
[[nodiscard]] hal::Status init(uintptr_t base, uint32_t clock_hz);
bool ready();
// Writes bytes; '\n' becomes "\r\n" on the wire.
void write(const char* text, size_t length);
void puts(const char* text);

}  // namespace fw::console
