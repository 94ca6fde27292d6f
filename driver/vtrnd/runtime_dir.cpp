// vtrnd's runtime directory (see runtime_dir.h).
#include "runtime_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "vtrn/drv/client.h"
#include "vtrn/drv/log.h"

namespace drv {
namespace {

Error sys_error(const std::string& what) { return Error(Code::kSystem, what + ": " + strerror(errno)); }

// Another vtrnd owns the directory if its pid is alive and its socket
// answers; anything else is the leftover of a crash.
Error check_no_live_owner(const std::string& pidfile, const std::string& sock, const std::string& dir) {
  UniqueFd fd(open(pidfile.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error();
  char buf[32] = {};
  ssize_t n = read(fd.get(), buf, sizeof buf - 1);
  int pid = n > 0 ? atoi(buf) : 0;
  bool alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
  Client probe;
  if (alive && probe.connect(sock).ok())
    return Error(Code::kBusy, "vtrnd is already running (pid " + std::to_string(pid) + ", socket " + sock + ")");
  DRV_LOGW("removing stale runtime state of vtrnd pid %d in %s", pid, dir.c_str());
  return Error();
}

// What a crashed vtrnd left of its chips' directories.
void remove_stale_chip_dirs(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("chip", 0) != 0) continue;
    std::string cdir = dir + "/" + name;
    for (const char* f : {"board.dtb", "uart.log", "ivshmem.sock", "qmp.sock"}) unlink((cdir + "/" + f).c_str());
    rmdir(cdir.c_str());
  }
  closedir(d);
}

}  // namespace

Error RuntimeDir::take(const std::string& dir, int share_gid) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sys_error("cannot create runtime directory " + dir);
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error(Code::kUntrusted, "runtime directory " + dir + " is not a directory");
  if (st.st_uid != getuid()) return Error(Code::kUntrusted, "runtime directory " + dir + " belongs to another user");
  // Someone else could have put anything in a directory they can write
  // (a socket clients would trust, a symlink where a file is created).
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return Error(Code::kUntrusted, "runtime directory " + dir + " is writable by other users; refusing it");
  if (share_gid >= 0) {
    if (chown(dir.c_str(), uid_t(-1), gid_t(share_gid)) != 0 || chmod(dir.c_str(), 0750) != 0)
      return sys_error("cannot share runtime directory " + dir + " with gid " + std::to_string(share_gid));
  } else {
    chmod(dir.c_str(), 0700);
  }

  const std::string pidfile = dir + "/vtrnd.pid";
  const std::string sock = dir + "/vtrnd.sock";
  if (Error e = check_no_live_owner(pidfile, sock, dir); !e.ok()) return e;
  unlink(sock.c_str());
  unlink(pidfile.c_str());
  remove_stale_chip_dirs(dir);
  UniqueFd pf(open(pidfile.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!pf) return sys_error("cannot create " + pidfile);
  std::string pid = std::to_string(getpid()) + "\n";
  if (write(pf.get(), pid.data(), pid.size()) != ssize_t(pid.size())) {
    Error e = sys_error("cannot write " + pidfile);
    unlink(pidfile.c_str());
    return e;
  }
  dir_ = dir;
  share_gid_ = share_gid;
  owned_ = true;
  return Error();
}

Result<UniqueFd> RuntimeDir::listen_socket() const {
  const std::string path = socket_path();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error(Code::kInvalidArgument, "socket path too long: " + path);
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  // umask makes the socket 0600 from its creation, with no window in which
  // another user could connect.
  mode_t old = umask(0177);
  int r = fd ? bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) : -1;
  int e = errno;
  umask(old);
  if (r != 0 || ::listen(fd.get(), 64) != 0)
    return Error(Code::kSystem, "cannot listen on " + path + ": " + strerror(r != 0 ? e : errno));
  // Shared (--group): the group may connect; the directory is 0750, so no
  // one else reaches the socket, and nobody but us can replace it.
  if (share_gid_ >= 0 &&
      (chown(path.c_str(), uid_t(-1), gid_t(share_gid_)) != 0 || chmod(path.c_str(), 0660) != 0))
    return sys_error("cannot share " + path + " with gid " + std::to_string(share_gid_));
  return fd;
}

void RuntimeDir::release(bool keep_log) {
  if (!owned_) return;
  unlink(socket_path().c_str());
  unlink(pid_path().c_str());
  if (!keep_log) unlink((dir_ + "/vtrnd.log").c_str());
  if (rmdir(dir_.c_str()) != 0 && errno != ENOENT)
    DRV_LOGW("runtime directory %s not removed: %s", dir_.c_str(), strerror(errno));
  owned_ = false;
}

}  // namespace drv
