// The launcher's side of vtrn-hw (hw/README.md, "The process boundary"):
// what a chip hands the board's hardware and the vtrn-hw child process.
// vtrnd and hw/test/hw_chip_test both launch through this file.
//
// It is not a driver of the engines: nothing here programs an engine. The
// launcher creates the fds (chip RAM as a sparse memfd QEMU maps through
// /proc/self/fd, the host DMA doorbell eventfd), passes them to vtrn-hw by
// inheritance, waits for its "ready" (QEMU must find every engine socket
// listening), and learns of its death from the control socket's EOF or
// SIGCHLD, whichever comes first, so the chips can fail with a reason that
// names it. Nothing is created in /dev/shm: a memfd disappears with its
// last fd, so neither a `vtrn down` nor a crash leaves one behind.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"

namespace drv {

// A chip's RAM (firmware + HBM) and its DMA doorbell, created once per
// chip and kept across QEMU relaunches: a new QEMU maps the same RAM
// memfd, which vtrn-hw keeps mapped.
class ChipHwLink {
 public:
  // A sparse memfd of `ram_bytes` (size sealed: neither side can shrink
  // it under the other's mapping) and a non-blocking doorbell eventfd;
  // the engine function's socket is `chip_dir`/engines.sock.
  Error create(const std::string& chip_dir, uint64_t ram_bytes);
  void close();
  [[nodiscard]] int ram_fd() const { return ram_.get(); }
  [[nodiscard]] uint64_t ram_bytes() const { return ram_bytes_; }
  [[nodiscard]] int doorbell_fd() const { return doorbell_.get(); }
  [[nodiscard]] const std::string& engines_socket() const { return socket_; }
  // Host -> DMA engines after publishing descriptors or a queue reset.
  void ring_doorbell() const;

 private:
  UniqueFd ram_;
  UniqueFd doorbell_;
  uint64_t ram_bytes_ = 0;
  std::string socket_;
};

// One chip as vtrn-hw's --chip argument names it (fds the launcher owns).
struct HwChipSpec {
  uint32_t id = 0;
  int ram_fd = -1;
  int bar2_fd = -1;       // the host interface BAR2 memfd
  int doorbell_fd = -1;   // host -> engines after DMA submits
  int host_irq_fd = -1;   // engines -> host: the host's kVectorDma eventfd
  std::string socket;     // engine function ivshmem socket vtrn-hw listens on
};

// "killed by signal 9 (Killed)", "exited with status 1".
std::string describe_wait_status(int status);

// The vtrn-hw child: spawned with the board DTB (an inherited memfd read
// through /proc/self/fd, so no file is left behind) and every chip's fds,
// with PR_SET_PDEATHSIG SIGKILL and EOF on its control socket both ending
// it when the launcher dies.
class HwProcess {
 public:
  HwProcess() = default;
  ~HwProcess();  // a child still running is killed and reaped
  HwProcess(const HwProcess&) = delete;
  HwProcess& operator=(const HwProcess&) = delete;

  // Starts `exe` and waits up to `timeout_ms` for "ready". kNotFound (no
  // such executable), kTimeout, kNotRunning ("vtrn-hw exited with status 1
  // before it was ready"), kDecode (another first line), kSystem.
  Error start(const std::string& exe, const std::vector<uint8_t>& dtb, const std::vector<HwChipSpec>& chips,
              uint32_t timeout_ms);
  [[nodiscard]] pid_t pid() const { return reaped_ ? -1 : pid_; }
  [[nodiscard]] bool running() const { return pid_ > 0 && !reaped_; }
  [[nodiscard]] int control_fd() const { return ctl_.get(); }
  // For a launcher that reaps with waitpid(-1): true if `pid` was vtrn-hw.
  bool on_child_exit(pid_t pid, int status);
  // Reads the control socket (non-blocking), handing each complete line to
  // on_line. false once it reached EOF or failed: vtrn-hw is gone, and it
  // has been reaped (blocking, it is exiting).
  bool read_control();
  // Writes one command line ("reset 3"); false if it could not be sent.
  bool send(const std::string& line);
  std::function<void(const std::string& line)> on_line;
  // Why it is gone: "vtrn-hw (pid 123) killed by signal 9 (Killed)".
  [[nodiscard]] std::string exit_reason() const;
  [[nodiscard]] int wait_status() const { return status_; }
  // Orderly stop: "quit", up to `grace_ms` for it to exit, then SIGKILL.
  // Blocking; true when it exited by itself with status 0.
  bool stop(uint32_t grace_ms);

 private:
  void reap_blocking();

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  UniqueFd ctl_;
  UniqueFd output_;      // vtrn-hw's stderr, kept for the error of a failed start
  std::string pending_;  // a partial control line
};

class Chip;

// vtrnd's board hardware: one HwProcess for every chip of the board, its
// control socket watched on the event loop. on_lost runs once, with the
// reason, when vtrn-hw dies while the board is up (not after stop()).
class HwBoard {
 public:
  explicit HwBoard(EventLoop* loop) : loop_(loop) {}
  ~HwBoard();
  HwBoard(const HwBoard&) = delete;
  HwBoard& operator=(const HwBoard&) = delete;

  // After every chip's prepare(): starts vtrn-hw with the chips that
  // prepared and waits for it to be ready (HwProcess::start's errors).
  Error start(const std::string& exe, const std::vector<uint8_t>& dtb, const std::vector<Chip*>& chips,
              uint32_t timeout_ms);
  // SIGCHLD: true if `pid` was vtrn-hw (on_lost has run then).
  bool on_child_exit(pid_t pid, int status);
  // After the last chip stopped. Pending engine resets are dropped.
  void stop();
  [[nodiscard]] pid_t pid() const { return proc_.pid(); }

  std::function<void(const std::string& why)> on_lost;

  // A chip reset quiesces the chip's engines first: asks vtrn-hw to stop
  // and restart them ("reset N": every engine thread finishes its current
  // unit and resets its model, the shared blocks are reinitialised) and
  // calls done(true, ns) once it answered "reset N ok <us>": from then on
  // no engine of that chip writes anything until its firmware programs
  // them again. done(false, 0, why) when vtrn-hw answered an error, did
  // not answer within timeout_ms, or is gone (on_lost runs as well).
  using ResetDone = std::function<void(bool ok, uint64_t ns, const std::string& why)>;
  void reset_chip(uint32_t chip, uint32_t timeout_ms, ResetDone done);

 private:
  struct PendingReset {
    uint32_t chip = 0;
    EventLoop::TimerId timer = 0;
    ResetDone done;
  };
  void lost();
  void on_control_line(const std::string& line);
  // Takes the pending reset of `chip` out (the oldest), if any.
  bool take_reset(uint32_t chip, PendingReset* out);

  EventLoop* loop_;
  HwProcess proc_;
  std::vector<PendingReset> resets_;
  bool watching_ = false;
  bool stopped_ = false;
};

}  // namespace drv
