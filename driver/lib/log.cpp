// Timestamped stderr logging for vtrnd (see vtrn/drv/log.h). The line is
// formatted into one buffer and written with a single write() so lines from
// vtrnd and the QEMU stderr it forwards do not interleave mid-line.
#include "vtrn/drv/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

namespace drv {
namespace {
LogLevel g_max = LogLevel::kInfo;
const char* const kNames[] = {"error", "warn", "info", "debug"};
}  // namespace

void set_log_level(LogLevel max) { g_max = max; }

void log(LogLevel level, const char* fmt, ...) {
  if (level > g_max) return;
  char line[1024];
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ vtrnd[%d] %s: ",
                   t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                   ts.tv_nsec / 1000000, int(getpid()), kNames[int(level)]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - size_t(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = size_t(n) + (m < 0 ? 0 : size_t(m));
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;  // nowhere left to report a failed diagnostic write
}

}  // namespace drv
