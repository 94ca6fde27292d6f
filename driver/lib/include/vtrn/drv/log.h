// vtrnd's own diagnostics: one line per event on stderr, prefixed with a
// wall-clock timestamp and a severity, e.g.
//   2024-05-01T10:00:00.123Z vtrnd[4242] info: chip 0: READY in 84 ms
// stderr is all there is: in the background the CLI redirects it into
// runtime_dir/vtrnd.log. Results for clients never go here.
#pragma once

namespace drv {

enum class LogLevel { kError, kWarn, kInfo, kDebug };

void set_log_level(LogLevel max);
[[gnu::format(printf, 2, 3)]] void log(LogLevel level, const char* fmt, ...);

#define DRV_LOGE(...) ::drv::log(::drv::LogLevel::kError, __VA_ARGS__)
#define DRV_LOGW(...) ::drv::log(::drv::LogLevel::kWarn, __VA_ARGS__)
#define DRV_LOGI(...) ::drv::log(::drv::LogLevel::kInfo, __VA_ARGS__)
#define DRV_LOGD(...) ::drv::log(::drv::LogLevel::kDebug, __VA_ARGS__)

}  // namespace drv
