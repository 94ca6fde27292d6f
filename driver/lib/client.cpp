// vtrnd client (see vtrn/drv/client.h). Errors are drv::Error: the code
// says what happened (the CLI's exit status follows it), the detail is the
// one line every user ends up printing as "vtrn: <reason>".
#include "vtrn/drv/client.h"

#include <errno.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <utility>
#include <vector>

namespace drv {
namespace {

int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The wire's failure in the words of a vtrnd client; the code stays.
Error describe(const Error& wire) {
  switch (wire.code()) {
    case Code::kClosed: return Error(Code::kClosed, "vtrnd closed the connection");
    case Code::kDecode: return Error(Code::kDecode, "malformed frame from vtrnd");
    case Code::kTimeout: return Error(Code::kTimeout, "timed out waiting for vtrnd");
    case Code::kInvalidArgument: return Error(Code::kInvalidArgument, "request larger than the frame limit");
    default: return Error(wire.code(), "vtrnd socket: " + wire.detail());
  }
}

Error not_connected() { return Error(Code::kNotReady, "not connected to vtrnd"); }

bool in_our_groups(gid_t gid) {
  if (gid == getegid() || gid == getgid()) return true;
  const int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = getgroups(n, groups.data());
  for (int i = 0; i < got; ++i)
    if (groups[size_t(i)] == gid) return true;
  return false;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whom a vtrnd socket in `dir` may be served by, decided before anything is
// sent: `dir` must be a real directory (not a symlink) that only its owner
// can write, owned by this user or root. A directory the user named (not
// default_runtime_dir()) may belong to another user when its group is one
// of ours: a board shared through `vtrnd --group`. kUntrusted names the
// rule that failed.
Result<uid_t> trusted_server_uid(const std::string& dir, const std::string& path) {
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Error(Code::kNotRunning, "vtrnd is not running (no socket at " + path + ")");
    return Error(Code::kSystem, "cannot stat " + dir + ": " + strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return Error(Code::kUntrusted, "runtime directory " + dir + " is not a directory (a symlink or file)");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return Error(Code::kUntrusted, "runtime directory " + dir + " is writable by other users (mode " +
                                       std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                                       std::to_string(st.st_mode & 7) + ")");
  const uid_t me = getuid();
  if (st.st_uid == me || st.st_uid == 0) return st.st_uid;
  // Another user's directory is a board shared through a group (vtrnd
  // --group): only when the user named it and its group is one of ours.
  if (dir != default_runtime_dir() && in_our_groups(st.st_gid)) return st.st_uid;
  return Error(Code::kUntrusted, "runtime directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                                     ", not to you (uid " + std::to_string(me) + ")");
}

Error check_peer(int fd, uid_t dir_owner, const std::string& path) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Error(Code::kSystem, "cannot read the credentials of " + path + ": " + strerror(errno));
  if (cred.uid == getuid() || cred.uid == 0 || cred.uid == dir_owner) return {};
  return Error(Code::kUntrusted, "the server at " + path + " runs as uid " + std::to_string(cred.uid) +
                                     " (pid " + std::to_string(cred.pid) + "), not as uid " +
                                     std::to_string(dir_owner) + " who owns its directory");
}

}  // namespace

void ResponseDeleter::operator()(Vtrn__Api__Response* r) const {
  if (r != nullptr) vtrn__api__response__free_unpacked(r, nullptr);
}

Client::~Client() { close(); }

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), next_id_(other.next_id_) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    next_id_ = other.next_id_;
  }
  return *this;
}

void Client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Error Client::connect(const std::string& path) {
  close();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error(Code::kInvalidArgument, "socket path too long: " + path);
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  Result<uid_t> owner = trusted_server_uid(parent_dir(path), path);
  if (!owner.ok()) return owner.error();
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(Code::kSystem, std::string("socket: ") + strerror(errno));
  int r;
  do {
    r = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    int e = errno;
    ::close(fd);
    if (e == ENOENT || e == ECONNREFUSED)
      return Error(Code::kNotRunning, "vtrnd is not running (no socket at " + path + ")");
    return Error(Code::kSystem, "cannot connect to " + path + ": " + strerror(e));
  }
  if (Error e = check_peer(fd, owner.value(), path); !e.ok()) {
    ::close(fd);
    return e;
  }
  fd_ = fd;
  return {};
}

Error Client::send(Vtrn__Api__Request* req) {
  if (fd_ < 0) return not_connected();
  req->id = next_id_++;
  if (Error e = send_frame(fd_, &req->base); !e.ok()) return describe(e);
  return Error{};
}

Result<ResponsePtr> Client::recv(int timeout_ms) {
  if (fd_ < 0) return not_connected();
  std::vector<uint8_t> payload;
  if (Error e = recv_frame(fd_, &payload, timeout_ms); !e.ok()) return describe(e);
  Vtrn__Api__Response* resp = vtrn__api__response__unpack(nullptr, payload.size(), payload.data());
  if (resp == nullptr) return Error(Code::kDecode, "vtrnd sent a response that does not decode");
  return ResponsePtr(resp);
}

Result<ResponsePtr> Client::call(Vtrn__Api__Request* req, int timeout_ms) {
  if (Error e = send(req); !e.ok()) return e;
  const uint64_t id = req->id;
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    int left = -1;
    if (deadline >= 0) {
      int64_t l = deadline - now_ms();
      left = l < 0 ? 0 : int(l);
    }
    Result<ResponsePtr> resp = recv(left);
    if (!resp.ok()) {
      if (resp.error().code() != Code::kTimeout) return resp;
      return Error(Code::kTimeout, resp.error().detail() + " (" + std::to_string(timeout_ms) + " ms)");
    }
    if (resp.value()->id == id) return resp;
  }
}

}  // namespace drv
