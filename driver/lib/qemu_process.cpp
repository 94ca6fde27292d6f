// A chip's QEMU child and its output (qemu_process.h).
#include "vtrn/drv/qemu_process.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtrn/drv/host_interface.h"
#include "vtrn/drv/log.h"
#include "vtrn/drv/qemu_launch.h"

namespace drv {

QemuProcess::QemuProcess(EventLoop* loop, std::string label, size_t keep_lines)
    : loop_(loop), label_(std::move(label)), keep_(keep_lines) {}

QemuProcess::~QemuProcess() {
  if (running()) {
    // Last resort (vtrnd normally stops chips first): never leave QEMU behind.
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_) loop_->remove(out_.get());
}

Error QemuProcess::spawn(const std::vector<std::string>& argv, const std::vector<int>& inherit) {
  close_output();
  int out_fd = -1;
  Result<pid_t> pid = spawn_qemu(argv, inherit, &out_fd);
  if (!pid.ok()) return pid.error();
  pid_ = *pid;
  exited_ = false;
  out_.reset(out_fd);
  partial_.clear();
  // QEMU runs from here on; a failure leaves it to the owner's stop, as
  // any failure after the spawn does.
  if (Error e = loop_->add(out_.get(), EPOLLIN, [this](uint32_t) { read_output(); }); !e.ok())
    return e.prefix("QEMU output: ");
  return Error();
}

bool QemuProcess::exited() {
  if (!running()) return false;
  exited_ = true;
  if (out_) read_output();
  return true;
}

void QemuProcess::kill() {
  if (running()) ::kill(pid_, SIGKILL);
}

void QemuProcess::close_output() {
  if (!out_) return;
  read_output();
  if (out_) loop_->remove(out_.get());
  out_.reset();
}

void QemuProcess::read_output() {
  char buf[4096];
  for (;;) {
    ssize_t n = read(out_.get(), buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, size_t(n));
      size_t pos;
      while ((pos = partial_.find('\n')) != std::string::npos) {
        std::string line = printable(partial_.substr(0, pos));
        partial_.erase(0, pos + 1);
        if (line.empty()) continue;
        DRV_LOGW("%s: qemu: %s", label_.c_str(), line.c_str());
        lines_.push_back(line);
        if (lines_.size() > keep_) lines_.pop_front();
      }
      if (partial_.size() > 4096) partial_.clear();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EOF: QEMU closed its output (it is exiting).
    loop_->remove(out_.get());
    out_.reset();
    return;
  }
}

}  // namespace drv
