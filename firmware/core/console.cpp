// UART console and picolibc stdio binding. picolibc's tinystdio calls a
// per-FILE put function for every character; one FILE serves stdin, stdout
// and stderr (reads return EOF: the console is output only).
#include "fw/console.h"

#include "hal/uart.h"

// After hal/uart.h: picolibc's putc macro would rewrite Pl011::putc.
#include <stdio.h>

namespace fw::console {
namespace {
hal::uart::Pl011 g_uart;
bool g_ready = false;

void put_raw(char c) {
  // A wedged UART times out inside the HAL; the character is lost, which is
  // all a console can do without stalling the firmware.
  (void)(g_uart.putc)(c);  // parenthesised: not the putc macro
}

int stdio_put(char c, FILE*) {
  if (!g_ready) return (unsigned char)c;
  if (c == '\n') put_raw('\r');
  put_raw(c);
  return (unsigned char)c;
}

int stdio_get(FILE*) { return EOF; }

FILE g_stdio = FDEV_SETUP_STREAM(stdio_put, stdio_get, nullptr, _FDEV_SETUP_RW);
}  // namespace

hal::Status init(uintptr_t base, uint32_t clock_hz) {
  hal::uart::Pl011Config cfg;
  cfg.base = base;
  cfg.clock_hz = clock_hz;
  const hal::Status s = g_uart.init(cfg);
  g_ready = s == hal::Status::kOk;
  return s;
}

bool ready() { return g_ready; }

void write(const char* text, size_t length) {
  if (!g_ready) return;
  for (size_t i = 0; i < length; ++i) {
    if (text[i] == '\n') put_raw('\r');
    put_raw(text[i]);
  }
}

void puts(const char* text) {
  size_t n = 0;
  while (text[n]) ++n;
  write(text, n);
}

}  // namespace fw::console

// picolibc declares these outside its extern "C" block; global variables
// are not name-mangled, so these definitions satisfy the C library too.
FILE* const stdin = &fw::console::g_stdio;
FILE* const stdout = &fw::console::g_stdio;
FILE* const stderr = &fw::console::g_stdio;
