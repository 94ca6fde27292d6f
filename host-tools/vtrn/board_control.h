// Bringing a board up and down from the CLI: finding vtrnd and QEMU,
// starting vtrnd detached, waiting until every chip has settled (READY or
// failed), and stopping vtrnd until its process and socket are gone.
// `vtrn up`, `vtrn down` and `vtrn bench boot` share it.
//
// vtrnd owns the chips; this code only owns the vtrnd process it starts, and
// only until the board is up: a failed start is undone here (shutdown
// request, wait, reap) so nothing is left running or behind. The daemon's
// stdout/stderr go to runtime_dir()/vtrnd.log; the CLI keeps its own read
// descriptor on that file so it can quote the daemon's last words even if
// the daemon removes the file as it exits.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <string>

#include "vtrn/drv/client.h"

namespace tools {

struct UpOptions {
  std::string board;              // .dtb or .dts; empty: vtrnd's default board
  uint32_t chips = 0;             // 0: as many as the board has
  bool gdb = false;
  uint32_t gdb_port = 1234;       // chip N listens on gdb_port + N
  uint32_t boot_timeout_ms = 10000;  // each chip's own boot
  uint32_t boot_parallel = 0;       // chips booting at once; 0: vtrnd's default
  std::string group;                // share the board with this group's users (vtrnd --group)
  std::string copy_engine;        // "engines" or "cpu"; empty: vtrnd's default (or VTRN_COPY_ENGINE)
};

struct BoardUp {
  pid_t vtrnd_pid = -1;
  uint64_t wall_ns = 0;           // start of `vtrn up` to every chip READY
  drv::ResponsePtr list;          // the ListResponse that showed every chip READY
};

struct BoardDown {
  pid_t vtrnd_pid = -1;           // -1 when the pid file was unreadable
  uint32_t chips_stopped = 0;
};

// Throws CliError: kFailed when vtrnd already runs, QEMU or vtrnd cannot be
// found, or vtrnd exits early; kChipNotReady when a chip fails to boot (the
// message names the chip and its error, the details hold its last log
// lines); kTimeout when no chip has settled (READY or failed) for
// boot_timeout_ms plus a start-up margin (a big board boots a few chips at a
// time, so the whole wait has no fixed bound). Every failure stops the
// daemon first.
BoardUp start_board(const UpOptions& options);

// Asks vtrnd to shut down and waits until its process has exited and its
// socket is gone. Throws CliError(kNotRunning) when no vtrnd answers,
// CliError(kTimeout) when it outlives `timeout_ms`.
BoardDown stop_board(int timeout_ms = 20000);

// The firmware image gdb should load: $VTRN_FIRMWARE, else the build tree's
// firmware/firmware.elf next to this executable's directory.
std::string firmware_elf_path();

}  // namespace tools
