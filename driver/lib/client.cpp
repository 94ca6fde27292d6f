// vtrnd client (see vtrn/drv/client.h). Errors are drv::Error: the code
// says what happened (the CLI's exit status follows it), the detail is the
// one line every user ends up printing as "vtrn: <reason>".
#include "vtrn/drv/client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <utility>

namespace drv {
namespace {

int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Error describe(int neg_errno) {
  switch (neg_errno) {
    case -ENODATA:
    case -EPIPE:
    case -ECONNRESET: return Error(Code::kClosed, "vtrnd closed the connection");
    case -EPROTO: return Error(Code::kDecode, "malformed frame from vtrnd");
    case -ETIMEDOUT: return Error(Code::kTimeout, "timed out waiting for vtrnd");
    case -EMSGSIZE: return Error(Code::kInvalidArgument, "request larger than the frame limit");
    default: return Error(Code::kSystem, std::string("vtrnd socket: ") + strerror(-neg_errno));
  }
}

Error not_connected() { return Error(Code::kNotReady, "not connected to vtrnd"); }

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
  fd_ = fd;
  return {};
}

Error Client::send(Vtrn__Api__Request* req) {
  if (fd_ < 0) return not_connected();
  req->id = next_id_++;
  const int r = send_frame(fd_, &req->base);
  return r < 0 ? describe(r) : Error{};
}

Result<ResponsePtr> Client::recv(int timeout_ms) {
  if (fd_ < 0) return not_connected();
  std::vector<uint8_t> payload;
  const int r = recv_frame(fd_, &payload, timeout_ms);
  if (r < 0) return describe(r);
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
