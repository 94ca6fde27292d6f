// fw::log: the firmware's dmesg. Each line is "<level> <uptime_us> <text>\n"
// (level = syslog severity digit) and goes to the UART and to the BAR2 log
// ring (vtrn::hostif::LogWriter).
//
// Lines logged before the console or the ring exist are kept in a small
// boot buffer and replayed into each when it attaches, so the host sees the
// whole boot. Callable with IRQs on or off and from any core; it masks IRQs
// and takes a spin lock while it writes one line.
// Not for the panic path (that writes the UART directly).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/log_ring.h"

namespace fw {

enum LogLevel : uint32_t {
  kLogErr = 3,
  kLogWarn = 4,
  kLogInfo = 6,
  kLogDebug = 7,
};

void log(uint32_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

namespace logging {
// Lines with a level above `max_level` are dropped. Returns false for > 7.
bool set_level(uint32_t max_level);
uint32_t level();
// Starts writing the ring (replays the boot buffer into it).
void attach_ring(vtrn::hostif::LogRingHeader* header, uint64_t data_size);
// Console came up: replays the boot buffer on it.
void console_attached();
// Panic path: appends "0 <uptime_us> panic: <reason>" to the ring only (the
// panic path prints its own, longer report on the UART).
void panic_line(const char* reason);
// Bytes written to the ring so far.
uint64_t ring_bytes();
// True once per batch of new ring bytes since the previous call: the caller
// rings the host's log vector when it returns true.
bool take_new_lines();
}  // namespace logging

}  // namespace fw
