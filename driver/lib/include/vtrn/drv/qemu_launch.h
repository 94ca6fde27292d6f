// Building and starting one chip's QEMU. The command line is a template
// (qemu/chip.args, compiled in) with {placeholders} filled from the board
// DTB and the chip's runtime directory; this file knows the placeholders,
// not the machine options, so qemu/ stays the one place to change them.
//
// spawn_qemu() forks and execs with stdin on /dev/null, stdout and stderr
// into a pipe vtrnd reads (QEMU prints its own failures there), every other
// fd closed by CLOEXEC, and PR_SET_PDEATHSIG so a crashed vtrnd never leaves
// a QEMU running.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "vtrn/drv/error.h"

namespace drv {

struct QemuParams {
  uint32_t chip = 0;
  uint32_t cores = 1;
  uint64_t mem_mib = 0;
  std::string firmware;
  std::string board_dtb;
  uint64_t board_size = 0;
  std::string ivshmem_sock;
  std::string qmp_sock;
  std::string uart_log;
  uint32_t vectors = 4;
  int ram_fd = -1;           // the chip's RAM memfd, inherited (memory-backend-file via /proc/self/fd)
  std::string engines_sock;  // vtrn-hw's engine function socket
  uint32_t engine_vectors = 0;
  std::string copy_engine = "engines";
  bool gdb = false;       // a gdbstub on 127.0.0.1:gdb_port
  uint32_t gdb_port = 0;  // 0: any free port
};

// The compiled-in qemu/chip.args.
const char* chip_args_template();

// Fills the template; a bad template is kDecode naming the line.
Result<std::vector<std::string>> build_qemu_argv(const char* tmpl, const std::string& qemu,
                                                const QemuParams& p);

// The QEMU binary: `flag` if non-empty, else $VTRN_QEMU, else
// qemu-system-aarch64 on PATH. Otherwise kNotFound:
// "qemu-system-aarch64 not found (install qemu-system-arm or set VTRN_QEMU)".
Result<std::string> find_qemu(const std::string& flag);

// Starts argv[0] with `inherit` fds kept open across exec (CLOEXEC cleared
// in the child only); *stderr_read receives the read end of the output
// pipe. Returns the pid.
Result<pid_t> spawn_qemu(const std::vector<std::string>& argv, const std::vector<int>& inherit,
                         int* stderr_read);

// Shell-quoted command line, for logs and `vtrn info`.
std::string join_command(const std::vector<std::string>& argv);

}  // namespace drv
