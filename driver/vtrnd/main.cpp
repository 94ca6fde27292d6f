// vtrnd: the vtrn host driver service. Parses the command line, resolves
// QEMU, the firmware and the board, then hands over to Daemon (server.h).
//
// vtrnd always runs in the foreground and logs to stderr; `vtrn up` starts it
// detached (setsid, stderr into runtime_dir/vtrnd.log). --foreground is
// accepted for symmetry with that and changes nothing. Exit status: 0 after
// an orderly shutdown, 1 when it cannot start (the reason is the last
// stderr line), 2 for a usage error.
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <tuple>

#include "server.h"
#include "vtrn/drv/board_file.h"
#include "vtrn/drv/log.h"
#include "vtrn/drv/qemu_launch.h"
#include "vtrn/drv/wire.h"
#include "vtrn/hostif.h"

namespace {

// An idle chip beats every kIdleTickMs: a watchdog window holds four beats.
constexpr uint32_t kMinWatchdogMs = 4 * vtrn::hostif::kIdleTickMs;

constexpr const char* kUsage =
    "usage: vtrnd [--board FILE] [--chips N] [--firmware ELF] [--qemu BIN] [--gdb]\n"
    "             [--gdb-port BASE] [--boot-timeout-ms MS] [--runtime-dir DIR]\n"
    "             [--allow-raw-dma] [--metrics-port PORT] [--foreground] [--verbose]\n"
    "             [--watchdog-ms MS] [--no-auto-reset] [--reset-limit N] [--reset-window-ms MS]\n"
    "             [--hbm-quota-mib MIB] [--hbm-dma-unchecked] [--vtrn-hw BIN] [--allow-qmp-write]\n"
    "             [--group NAME]\n"
    "  --board FILE          board .dtb or .dts (default " VTRN_DEFAULT_BOARD_DTB ")\n"
    "  --chips N             resize the board to N chips (first N kept, last cloned)\n"
    "  --firmware ELF        firmware image (default $VTRN_FIRMWARE or " VTRN_DEFAULT_FIRMWARE ")\n"
    "  --qemu BIN            QEMU binary (default $VTRN_QEMU or qemu-system-aarch64 on PATH)\n"
    "  --vtrn-hw BIN         the board's engines process (default $VTRN_HW or " VTRN_DEFAULT_HW ")\n"
    "  --copy-engine E       who serves the host DMA queues: engines (the chip's DMA engines,\n"
    "                        default) or cpu (the firmware's copier); also VTRN_COPY_ENGINE\n"
    "  --gdb                 give chip N a gdbstub on 127.0.0.1:BASE+N\n"
    "  --gdb-port BASE       first gdb port (default 1234; 0: any free port per chip, shown\n"
    "                        by vtrn ls; implies --gdb)\n"
    "  --boot-timeout-ms MS  per-chip boot timeout, from the chip's own launch (default 10000)\n"
    "  --boot-parallel N     chips booting at once, the rest queued in chip order (default:\n"
    "                        2 per host CPU; also VTRN_BOOT_PARALLEL)\n"
    "  --runtime-dir DIR     sockets and state (default $VTRN_RUNTIME_DIR or\n"
    "                        ${XDG_RUNTIME_DIR:-/tmp}/vtrn-UID)\n"
    "  --group NAME          share the board with the users of group NAME: the runtime\n"
    "                        directory becomes 0750 and the socket 0660, both of that\n"
    "                        group; each user is a tenant, vtrnd's own uid and root the admin\n"
    "  --allow-raw-dma       accept raw DmaCopy requests (unvalidated descriptors, for\n"
    "                        hostile-input tests; also VTRN_ALLOW_RAW_DMA=1)\n"
    "  --allow-qmp-write     let `vtrn qmp` send monitor commands beyond the read-only allow\n"
    "                        list (stop, system_reset, memory reads...; also\n"
    "                        VTRN_ALLOW_QMP_WRITE=1)\n"
    "  --watchdog-ms MS      reset a READY chip whose heartbeat stops for MS (default: 10\n"
    "                        telemetry periods, at least 1000; 0 turns the watchdog off;\n"
    "                        else 1000..3600000: an idle chip beats every 250 ms)\n"
    "  --no-auto-reset       leave hung, panicked or dead chips as they are (also with --gdb)\n"
    "  --reset-limit N       automatic resets per chip inside the window before it is FAILED\n"
    "                        (default 3)\n"
    "  --reset-window-ms MS  the give-up window (default 60000)\n"
    "                        (also VTRN_WATCHDOG_MS, VTRN_RESET_LIMIT, VTRN_RESET_WINDOW_MS)\n"
    "  --metrics-port PORT   Prometheus metrics on http://127.0.0.1:PORT/metrics (0 = any free\n"
    "                        port, logged; default $VTRN_METRICS_PORT, else off)\n"
    "  --hbm-quota-mib MIB   HBM one tenant (uid: all its connections and jobs) may hold\n"
    "                        per chip (default none; also VTRN_HBM_QUOTA_MIB)\n"
    "  --hbm-dma-unchecked   let DMA reach HBM outside live allocations (retired pages and\n"
    "                        poisoned allocations stay refused; also VTRN_HBM_DMA_UNCHECKED=1)\n"
    "  --foreground          stay attached (vtrnd never daemonizes itself)\n"
    "  --verbose             debug logging\n";

bool parse_u32(const char* s, uint32_t lo, uint32_t hi, uint32_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = uint32_t(v);
  return true;
}

int usage_error(const std::string& what) {
  fprintf(stderr, "vtrnd: %s\n%s", what.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  enum { kBoard = 1000, kChips, kFirmware, kQemu, kGdb, kGdbPort, kBootTimeout, kRuntimeDir,
         kForeground, kVerbose, kHelp, kAllowRawDma, kMetricsPort, kGroup,
         kWatchdogMs, kNoAutoReset, kResetLimit, kResetWindowMs };  // the last four: recovery
  constexpr int kHbmQuotaMib = 1100, kHbmDmaUnchecked = 1101, kVtrnHw = 1200, kCopyEngine = 1201,
                kAllowQmpWrite = 1300, kBootParallel = 1400;  // clear of the enum above
  static const option kOptions[] = {
      {"board", required_argument, nullptr, kBoard},
      {"chips", required_argument, nullptr, kChips},
      {"firmware", required_argument, nullptr, kFirmware},
      {"qemu", required_argument, nullptr, kQemu},
      {"gdb", no_argument, nullptr, kGdb},
      {"gdb-port", required_argument, nullptr, kGdbPort},
      {"boot-timeout-ms", required_argument, nullptr, kBootTimeout},
      {"boot-parallel", required_argument, nullptr, kBootParallel},
      {"runtime-dir", required_argument, nullptr, kRuntimeDir},
      {"group", required_argument, nullptr, kGroup},
      {"foreground", no_argument, nullptr, kForeground},
      {"allow-raw-dma", no_argument, nullptr, kAllowRawDma},
      {"metrics-port", required_argument, nullptr, kMetricsPort},
      {"watchdog-ms", required_argument, nullptr, kWatchdogMs},
      {"no-auto-reset", no_argument, nullptr, kNoAutoReset},
      {"reset-limit", required_argument, nullptr, kResetLimit},
      {"reset-window-ms", required_argument, nullptr, kResetWindowMs},
      {"hbm-quota-mib", required_argument, nullptr, kHbmQuotaMib},
      {"hbm-dma-unchecked", no_argument, nullptr, kHbmDmaUnchecked},
      {"vtrn-hw", required_argument, nullptr, kVtrnHw},
      {"copy-engine", required_argument, nullptr, kCopyEngine},
      {"allow-qmp-write", no_argument, nullptr, kAllowQmpWrite},
      {"verbose", no_argument, nullptr, kVerbose},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0},
  };
  std::string board_file = VTRN_DEFAULT_BOARD_DTB;
  std::string firmware, qemu_flag, runtime_dir, vtrn_hw;
  int64_t share_gid = -1;
  std::string copy_engine = getenv("VTRN_COPY_ENGINE") != nullptr && getenv("VTRN_COPY_ENGINE")[0] != '\0'
                                ? getenv("VTRN_COPY_ENGINE")
                                : "engines";
  uint32_t chips = 0, gdb_port = 0, boot_timeout = 10000;
  bool gdb = false, gdb_port_given = false;
  uint32_t watchdog_ms = 0, reset_limit = 3, reset_window_ms = 60000, boot_parallel = 0;
  bool watchdog = true, auto_reset = true;
  // The same settings from the environment (`vtrn up` passes it through),
  // flags win. A bad value is a usage error, as for the flag.
  for (auto [name, lo, hi, out] : {std::tuple{"VTRN_WATCHDOG_MS", 0u, 3600000u, &watchdog_ms},
                                   std::tuple{"VTRN_RESET_LIMIT", 1u, 1000u, &reset_limit},
                                   std::tuple{"VTRN_RESET_WINDOW_MS", 1000u, 86400000u, &reset_window_ms},
                                   std::tuple{"VTRN_BOOT_PARALLEL", 1u, uint32_t(vtrn::board::kMaxChips), &boot_parallel}}) {
    const char* v = getenv(name);
    if (v == nullptr || v[0] == '\0') continue;
    if (!parse_u32(v, lo, hi, out))
      return usage_error(std::string(name) + "=" + v + ": expected " + std::to_string(lo) + ".." +
                         std::to_string(hi));
  }
  if (getenv("VTRN_WATCHDOG_MS") != nullptr && getenv("VTRN_WATCHDOG_MS")[0] != '\0') {
    if (watchdog_ms > 0 && watchdog_ms < kMinWatchdogMs)
      return usage_error("VTRN_WATCHDOG_MS=" + std::to_string(watchdog_ms) + ": expected 0 or " +
                         std::to_string(kMinWatchdogMs) + "..3600000");
    watchdog = watchdog_ms != 0;
  }
  uint32_t hbm_quota_mib = 0;
  const char* unchecked_env = getenv("VTRN_HBM_DMA_UNCHECKED");
  bool hbm_dma_unchecked = unchecked_env != nullptr && strcmp(unchecked_env, "1") == 0;
  if (const char* q = getenv("VTRN_HBM_QUOTA_MIB"); q != nullptr && q[0] != '\0') {
    if (!parse_u32(q, 0, 1u << 24, &hbm_quota_mib))
      return usage_error(std::string("VTRN_HBM_QUOTA_MIB=") + q + ": expected 0..16777216");
  }
  const char* raw_env = getenv("VTRN_ALLOW_RAW_DMA");
  bool allow_raw_dma = raw_env != nullptr && strcmp(raw_env, "1") == 0;
  const char* qmp_write_env = getenv("VTRN_ALLOW_QMP_WRITE");
  bool allow_qmp_write = qmp_write_env != nullptr && strcmp(qmp_write_env, "1") == 0;
  // Prometheus exporter port, flag or $VTRN_METRICS_PORT.
  uint32_t metrics_port = 0;
  bool metrics_on = false;
  if (const char* mp = getenv("VTRN_METRICS_PORT"); mp != nullptr && mp[0] != '\0') {
    if (!parse_u32(mp, 0, 65535, &metrics_port))
      return usage_error(std::string("VTRN_METRICS_PORT=") + mp + ": expected 0..65535");
    metrics_on = true;
  }
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, "", kOptions, nullptr)) != -1) {
    switch (opt) {
      case kBoard: board_file = optarg; break;
      case kChips:
        if (!parse_u32(optarg, 1, vtrn::board::kMaxChips, &chips))
          return usage_error(std::string("--chips ") + optarg + ": expected 1.." +
                             std::to_string(vtrn::board::kMaxChips));
        break;
      case kFirmware: firmware = optarg; break;
      case kQemu: qemu_flag = optarg; break;
      case kGdb: gdb = true; break;
      case kGdbPort:
        if (!parse_u32(optarg, 0, 65535 - vtrn::board::kMaxChips, &gdb_port))
          return usage_error(std::string("--gdb-port ") + optarg + ": expected a port number");
        gdb = gdb_port_given = true;
        break;
      case kBootTimeout:
        if (!parse_u32(optarg, 100, 600000, &boot_timeout))
          return usage_error(std::string("--boot-timeout-ms ") + optarg +
                             ": expected 100..600000");
        break;
      case kBootParallel:
        if (!parse_u32(optarg, 1, vtrn::board::kMaxChips, &boot_parallel))
          return usage_error(std::string("--boot-parallel ") + optarg + ": expected 1.." +
                             std::to_string(vtrn::board::kMaxChips));
        break;
      case kRuntimeDir: runtime_dir = optarg; break;
      case kGroup: {
        const group* g = getgrnam(optarg);
        if (g == nullptr) return usage_error(std::string("--group ") + optarg + ": no such group");
        share_gid = int64_t(g->gr_gid);
        break;
      }
      case kForeground: break;
      case kAllowRawDma: allow_raw_dma = true; break;
      case kAllowQmpWrite: allow_qmp_write = true; break;
      case kMetricsPort:
        if (!parse_u32(optarg, 0, 65535, &metrics_port))
          return usage_error(std::string("--metrics-port ") + optarg + ": expected 0..65535");
        metrics_on = true;
        break;
      case kWatchdogMs:
        if (!parse_u32(optarg, 0, 3600000, &watchdog_ms) || (watchdog_ms > 0 && watchdog_ms < kMinWatchdogMs))
          return usage_error(std::string("--watchdog-ms ") + optarg + ": expected 0 or " +
                             std::to_string(kMinWatchdogMs) + "..3600000");
        watchdog = watchdog_ms != 0;
        break;
      case kNoAutoReset: auto_reset = false; break;
      case kResetLimit:
        if (!parse_u32(optarg, 1, 1000, &reset_limit))
          return usage_error(std::string("--reset-limit ") + optarg + ": expected 1..1000");
        break;
      case kResetWindowMs:
        if (!parse_u32(optarg, 1000, 86400000, &reset_window_ms))
          return usage_error(std::string("--reset-window-ms ") + optarg + ": expected 1000..86400000");
        break;
      case kHbmQuotaMib:
        if (!parse_u32(optarg, 0, 1u << 24, &hbm_quota_mib))
          return usage_error(std::string("--hbm-quota-mib ") + optarg + ": expected 0..16777216 (0 = none)");
        break;
      case kHbmDmaUnchecked: hbm_dma_unchecked = true; break;
      case kVtrnHw: vtrn_hw = optarg; break;
      case kCopyEngine: copy_engine = optarg; break;
      case kVerbose: drv::set_log_level(drv::LogLevel::kDebug); break;
      case kHelp: fputs(kUsage, stdout); return 0;
      default:
        return usage_error(std::string("unknown or incomplete option ") +
                           (optind > 0 && optind <= argc ? argv[optind - 1] : "?"));
    }
  }
  if (optind < argc) return usage_error(std::string("unexpected argument ") + argv[optind]);
  if (copy_engine != "cpu" && copy_engine != "engines")
    return usage_error("--copy-engine " + copy_engine + ": expected cpu or engines");
  if (gdb && !gdb_port_given) gdb_port = 1234;

  drv::DaemonOptions opts;
  drv::Result<std::string> qemu = drv::find_qemu(qemu_flag);
  if (!qemu.ok()) {
    DRV_LOGE("%s", qemu.error().detail().c_str());
    return 1;
  }
  opts.qemu = *qemu;
  if (firmware.empty()) {
    const char* env = getenv("VTRN_FIRMWARE");
    firmware = env != nullptr && env[0] != '\0' ? env : VTRN_DEFAULT_FIRMWARE;
  }
  struct stat st{};
  if (stat(firmware.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    DRV_LOGE("firmware %s not found (build the firmware target or set VTRN_FIRMWARE)",
             firmware.c_str());
    return 1;
  }
  opts.firmware = firmware;
  if (vtrn_hw.empty()) {
    const char* env = getenv("VTRN_HW");
    vtrn_hw = env != nullptr && env[0] != '\0' ? env : VTRN_DEFAULT_HW;
  }
  opts.vtrn_hw = vtrn_hw;
  opts.copy_engine = copy_engine;
  drv::Result<drv::BoardSpec> board = drv::load_board(board_file, chips, "dtc");
  if (!board.ok()) {
    DRV_LOGE("%s", board.error().detail().c_str());
    return 1;
  }
  opts.runtime_dir = runtime_dir.empty() ? drv::runtime_dir() : runtime_dir;
  opts.boot_timeout_ms = boot_timeout;
  opts.boot_parallel = boot_parallel;
  opts.gdb = gdb;
  opts.gdb_base_port = gdb_port;
  opts.allow_raw_dma = allow_raw_dma;
  opts.share_gid = share_gid;
  opts.allow_qmp_write = allow_qmp_write;
  opts.hbm_client_quota_bytes = uint64_t(hbm_quota_mib) << 20;
  opts.hbm_dma_unchecked = hbm_dma_unchecked;
  opts.metrics_port = metrics_on ? int32_t(metrics_port) : -1;
  opts.watchdog_ms = watchdog_ms;
  opts.watchdog = watchdog;
  opts.auto_recover = auto_reset && !gdb;
  opts.reset_limit = reset_limit;
  opts.reset_window_ms = reset_window_ms;

  drv::Daemon daemon(std::move(opts), std::move(*board));
  if (const drv::Error e = daemon.start(); !e.ok()) {
    DRV_LOGE("%s", e.detail().c_str());
    return 1;
  }
  return daemon.run();
}
