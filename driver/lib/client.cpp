// vtrnd client (see vtrn/drv/client.h). Errors are returned as one line of
// text because every user ends up printing them as "vtrn: <reason>".
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

std::string describe(int neg_errno) {
  switch (neg_errno) {
    case -ENODATA: return "vtrnd closed the connection";
    case -EPROTO: return "malformed frame from vtrnd";
    case -ETIMEDOUT: return "timed out waiting for vtrnd";
    case -EPIPE:
    case -ECONNRESET: return "vtrnd closed the connection";
    default: return std::string("vtrnd socket: ") + strerror(-neg_errno);
  }
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

bool Client::connect(const std::string& path, std::string* err) {
  close();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *err = "socket path too long: " + path;
    return false;
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = std::string("socket: ") + strerror(errno);
    return false;
  }
  int r;
  do {
    r = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    int e = errno;
    ::close(fd);
    if (e == ENOENT || e == ECONNREFUSED)
      *err = "vtrnd is not running (no socket at " + path + ")";
    else
      *err = "cannot connect to " + path + ": " + strerror(e);
    return false;
  }
  fd_ = fd;
  return true;
}

bool Client::send(Vtrn__Api__Request* req, std::string* err) {
  if (fd_ < 0) {
    *err = "not connected to vtrnd";
    return false;
  }
  req->id = next_id_++;
  int r = send_frame(fd_, &req->base);
  if (r < 0) {
    *err = r == -EMSGSIZE ? "request larger than the frame limit" : describe(r);
    return false;
  }
  return true;
}

bool Client::recv(ResponsePtr* out, std::string* err, int timeout_ms) {
  if (fd_ < 0) {
    *err = "not connected to vtrnd";
    return false;
  }
  std::vector<uint8_t> payload;
  int r = recv_frame(fd_, &payload, timeout_ms);
  if (r < 0) {
    *err = describe(r);
    return false;
  }
  Vtrn__Api__Response* resp = vtrn__api__response__unpack(nullptr, payload.size(), payload.data());
  if (resp == nullptr) {
    *err = "vtrnd sent a response that does not decode";
    return false;
  }
  out->reset(resp);
  return true;
}

bool Client::call(Vtrn__Api__Request* req, ResponsePtr* out, std::string* err, int timeout_ms) {
  if (!send(req, err)) return false;
  const uint64_t id = req->id;
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    int left = -1;
    if (deadline >= 0) {
      int64_t l = deadline - now_ms();
      left = l < 0 ? 0 : int(l);
    }
    ResponsePtr resp;
    if (!recv(&resp, err, left)) {
      if (*err == "timed out waiting for vtrnd")
        *err += " (" + std::to_string(timeout_ms) + " ms)";
      return false;
    }
    if (resp->id == id) {
      *out = std::move(resp);
      return true;
    }
  }
}

}  // namespace drv
