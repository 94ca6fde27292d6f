// vtrnd: the vtrn host driver service. Parses the command line, resolves
// QEMU, the firmware and the board, then hands over to Daemon (server.h).
//
// vtrnd always runs in the foreground and logs to stderr; `vtrn up` starts it
// detached (setsid, stderr into runtime_dir/vtrnd.log). --foreground is
// accepted for symmetry with that and changes nothing. Exit status: 0 after
// an orderly shutdown, 1 when it cannot start (the reason is the last
// stderr line), 2 for a usage error.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "server.h"
#include "vtrn/drv/board_file.h"
#include "vtrn/drv/log.h"
#include "vtrn/drv/qemu_launch.h"
#include "vtrn/drv/wire.h"

namespace {

constexpr const char* kUsage =
    "usage: vtrnd [--board FILE] [--chips N] [--firmware ELF] [--qemu BIN] [--gdb]\n"
    "             [--gdb-port BASE] [--boot-timeout-ms MS] [--runtime-dir DIR]\n"
    "             [--allow-raw-dma] [--foreground] [--verbose]\n"
    "  --board FILE          board .dtb or .dts (default " VTRN_DEFAULT_BOARD_DTB ")\n"
    "  --chips N             resize the board to N chips (first N kept, last cloned)\n"
    "  --firmware ELF        firmware image (default $VTRN_FIRMWARE or " VTRN_DEFAULT_FIRMWARE ")\n"
    "  --qemu BIN            QEMU binary (default $VTRN_QEMU or qemu-system-aarch64 on PATH)\n"
    "  --gdb                 give chip N a gdbstub on 127.0.0.1:BASE+N\n"
    "  --gdb-port BASE       first gdb port (default 1234; implies --gdb)\n"
    "  --boot-timeout-ms MS  per-chip boot timeout (default 10000)\n"
    "  --runtime-dir DIR     sockets and state (default $VTRN_RUNTIME_DIR or\n"
    "                        ${XDG_RUNTIME_DIR:-/tmp}/vtrn-UID)\n"
    "  --allow-raw-dma       accept raw DmaCopy requests (unvalidated descriptors, for\n"
    "                        hostile-input tests; also VTRN_ALLOW_RAW_DMA=1)\n"
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
         kForeground, kVerbose, kHelp, kAllowRawDma };
  static const option kOptions[] = {
      {"board", required_argument, nullptr, kBoard},
      {"chips", required_argument, nullptr, kChips},
      {"firmware", required_argument, nullptr, kFirmware},
      {"qemu", required_argument, nullptr, kQemu},
      {"gdb", no_argument, nullptr, kGdb},
      {"gdb-port", required_argument, nullptr, kGdbPort},
      {"boot-timeout-ms", required_argument, nullptr, kBootTimeout},
      {"runtime-dir", required_argument, nullptr, kRuntimeDir},
      {"foreground", no_argument, nullptr, kForeground},
      {"allow-raw-dma", no_argument, nullptr, kAllowRawDma},
      {"verbose", no_argument, nullptr, kVerbose},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0},
  };
  std::string board_file = VTRN_DEFAULT_BOARD_DTB;
  std::string firmware, qemu_flag, runtime_dir;
  uint32_t chips = 0, gdb_port = 0, boot_timeout = 10000;
  bool gdb = false;
  const char* raw_env = getenv("VTRN_ALLOW_RAW_DMA");
  bool allow_raw_dma = raw_env != nullptr && strcmp(raw_env, "1") == 0;
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
        if (!parse_u32(optarg, 1, 65535 - vtrn::board::kMaxChips, &gdb_port))
          return usage_error(std::string("--gdb-port ") + optarg + ": expected a port number");
        gdb = true;
        break;
      case kBootTimeout:
        if (!parse_u32(optarg, 100, 600000, &boot_timeout))
          return usage_error(std::string("--boot-timeout-ms ") + optarg +
                             ": expected 100..600000");
        break;
      case kRuntimeDir: runtime_dir = optarg; break;
      case kForeground: break;
      case kAllowRawDma: allow_raw_dma = true; break;
      case kVerbose: drv::set_log_level(drv::LogLevel::kDebug); break;
      case kHelp: fputs(kUsage, stdout); return 0;
      default:
        return usage_error(std::string("unknown or incomplete option ") +
                           (optind > 0 && optind <= argc ? argv[optind - 1] : "?"));
    }
  }
  if (optind < argc) return usage_error(std::string("unexpected argument ") + argv[optind]);
  if (gdb && gdb_port == 0) gdb_port = 1234;

  std::string err;
  drv::DaemonOptions opts;
  if (!drv::find_qemu(qemu_flag, &opts.qemu, &err)) {
    DRV_LOGE("%s", err.c_str());
    return 1;
  }
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
  drv::BoardSpec board;
  if (!drv::load_board(board_file, chips, "dtc", &board, &err)) {
    DRV_LOGE("%s", err.c_str());
    return 1;
  }
  opts.runtime_dir = runtime_dir.empty() ? drv::runtime_dir() : runtime_dir;
  opts.boot_timeout_ms = boot_timeout;
  opts.gdb_base_port = gdb ? gdb_port : 0;
  opts.allow_raw_dma = allow_raw_dma;

  drv::Daemon daemon(std::move(opts), std::move(board));
  if (!daemon.start(&err)) {
    DRV_LOGE("%s", err.c_str());
    return 1;
  }
  return daemon.run();
}
