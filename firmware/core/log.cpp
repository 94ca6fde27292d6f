// fw::log implementation. See fw/log.h.
//
// The boot buffer holds complete lines only; if it fills before the ring
// attaches, later boot lines still reach the UART but the ring gets a single
// "lines lost" marker instead of a torn line.
#include "fw/log.h"

#include <stdarg.h>
#include <stdio.h>

#include "fw/arch.h"
#include "fw/console.h"

namespace fw {
namespace {

constexpr size_t kLineMax = 240;
constexpr size_t kBootBufferSize = 8192;

uint32_t g_level = kLogInfo;
vtrn::hostif::LogWriter g_writer;
bool g_ring = false;
char g_boot[kBootBufferSize];
size_t g_boot_len = 0;
uint32_t g_boot_lost = 0;
uint64_t g_ring_bytes = 0;
uint64_t g_signalled_bytes = 0;
// Any core may log: a spin lock, taken with IRQs masked on the caller, keeps
// lines whole on the UART and in the ring. It is held for one line's copy,
// never across anything that waits for another core.
uint32_t g_lock = 0;

void lock() {
  while (__atomic_exchange_n(&g_lock, 1u, __ATOMIC_ACQUIRE) != 0) {
    while (__atomic_load_n(&g_lock, __ATOMIC_RELAXED) != 0) asm volatile("yield");
  }
}
void unlock() { __atomic_store_n(&g_lock, 0u, __ATOMIC_RELEASE); }

void ring_write(const char* text, size_t n) {
  g_writer.write(text, n);
  __atomic_store_n(&g_ring_bytes, g_ring_bytes + n, __ATOMIC_RELAXED);
}

}  // namespace

void log(uint32_t level, const char* fmt, ...) {
  if (level > 7) level = 7;
  if (level > g_level) return;
  char line[kLineMax];
  const uint64_t us = arch::now_ns() / 1000;
  int n = snprintf(line, sizeof line, "%u %llu ", unsigned(level), (unsigned long long)us);
  va_list ap;
  va_start(ap, fmt);
  const int t = vsnprintf(line + n, sizeof line - size_t(n), fmt, ap);
  va_end(ap);
  // Truncated text keeps its line structure: the newline always fits.
  size_t len = size_t(n) + (t < 0 ? 0 : size_t(t));
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  line[len] = '\0';

  const uint64_t daif = arch::irq_save();
  lock();
  console::write(line, len);
  if (g_ring) {
    ring_write(line, len);
  } else if (g_boot_len + len <= sizeof g_boot) {
    for (size_t i = 0; i < len; ++i) g_boot[g_boot_len + i] = line[i];
    g_boot_len += len;
  } else {
    ++g_boot_lost;
  }
  unlock();
  arch::irq_restore(daif);
}

namespace logging {

bool set_level(uint32_t max_level) {
  if (max_level > 7) return false;
  g_level = max_level;
  return true;
}

uint32_t level() { return g_level; }

void console_attached() { console::write(g_boot, g_boot_len); }

void attach_ring(vtrn::hostif::LogRingHeader* header, uint64_t data_size) {
  const uint64_t daif = arch::irq_save();
  g_writer = vtrn::hostif::LogWriter(header, data_size);
  g_ring = true;
  ring_write(g_boot, g_boot_len);
  if (g_boot_lost) {
    char line[kLineMax];
    const int n = snprintf(line, sizeof line, "%u %llu log: %u boot lines lost (boot buffer full)\n",
                           unsigned(kLogWarn), (unsigned long long)(arch::now_ns() / 1000),
                           unsigned(g_boot_lost));
    if (n > 0) ring_write(line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1);
  }
  arch::irq_restore(daif);
}

void panic_line(const char* reason) {
  if (!g_ring) return;
  char line[kLineMax];
  int n = snprintf(line, sizeof line, "0 %llu panic: %s", (unsigned long long)(arch::now_ns() / 1000),
                   reason);
  if (n < 0) return;
  size_t len = size_t(n) < sizeof line - 2 ? size_t(n) : sizeof line - 2;
  line[len++] = '\n';
  ring_write(line, len);
}

uint64_t ring_bytes() { return __atomic_load_n(&g_ring_bytes, __ATOMIC_RELAXED); }

bool take_new_lines() {
  const uint64_t bytes = ring_bytes();
  if (bytes == g_signalled_bytes) return false;
  g_signalled_bytes = bytes;
  return true;
}

}  // namespace logging
}  // namespace fw
