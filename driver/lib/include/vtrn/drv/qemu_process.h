// One chip's QEMU as a child process: spawned with its output (stdout and
// stderr) on a pipe the event loop reads, the last lines of that output
// kept (printable) for error texts ("chip 1: QEMU exited with status 1
// during boot: <last line>"), killed with SIGKILL on request and, as a last
// resort, when the owner goes away with it still running.
//
// What it is not: the reaper. vtrnd reaps its children in one SIGCHLD
// handler and tells the owner, which calls exited(); the pid stays known
// afterwards for messages, but running() is false and kill() does nothing,
// since the number may belong to another process by then.
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include <deque>
#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"

namespace drv {

class QemuProcess {
 public:
  QemuProcess(EventLoop* loop, std::string label, size_t keep_lines = 32);
  ~QemuProcess();
  QemuProcess(const QemuProcess&) = delete;
  QemuProcess& operator=(const QemuProcess&) = delete;

  // Starts argv[0] with the `inherit` fds kept open (spawn_qemu). The lines
  // of an earlier run stay until clear_lines().
  Error spawn(const std::vector<std::string>& argv, const std::vector<int>& inherit);
  // The child was reaped: reads what is left of its output. false when it
  // was not running (already told, or never started).
  bool exited();
  // SIGKILL while running.
  void kill();
  // Reads what output is there and stops watching the pipe.
  void close_output();
  void clear_lines() { lines_.clear(); }

  [[nodiscard]] bool running() const { return pid_ > 0 && !exited_; }
  [[nodiscard]] pid_t pid() const { return pid_; }  // the last child's, -1 before the first spawn
  [[nodiscard]] const std::deque<std::string>& lines() const { return lines_; }
  [[nodiscard]] bool output_open() const { return bool(out_); }

 private:
  void read_output();

  EventLoop* loop_;
  std::string label_;
  size_t keep_;
  pid_t pid_ = -1;
  bool exited_ = false;
  UniqueFd out_;
  std::string partial_;
  std::deque<std::string> lines_;
};

}  // namespace drv
