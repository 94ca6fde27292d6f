// Frame encoding and blocking frame I/O for the vtrnd client socket (see
// vtrn/drv/wire.h). Writes use send(MSG_NOSIGNAL) so a client that went away
// surfaces as kClosed instead of killing the writer with SIGPIPE.
#include "vtrn/drv/wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

namespace drv {
namespace {

int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Remaining milliseconds to a deadline; -1 for "no deadline".
int remaining(int64_t deadline) {
  if (deadline < 0) return -1;
  int64_t left = deadline - now_ms();
  return left < 0 ? 0 : int(left);
}

// A failed call's errno as an Error: kClosed when the peer hung up, else
// kSystem with the call and its strerror. Read errno before anything else.
Error io_error(const char* call) {
  const int err = errno;
  const Code code = (err == EPIPE || err == ECONNRESET) ? Code::kClosed : Code::kSystem;
  return Error(code, std::string(call) + ": " + strerror(err));
}

Error wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, remaining(deadline));
    if (r > 0) return Error();
    if (r == 0) return Error(Code::kTimeout, "no frame before the deadline");
    if (errno != EINTR) return io_error("poll");
  }
}

Error write_all(int fd, const uint8_t* data, size_t length) {
  while (length > 0) {
    ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
    const char* call = "send";
    if (n < 0 && errno == ENOTSOCK) {
      n = write(fd, data, length);
      call = "write";
    }
    if (n > 0) {
      data += n;
      length -= size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Error e = wait_fd(fd, POLLOUT, -1); !e.ok()) return e;
      continue;
    }
    if (n < 0) return io_error(call);
    return Error(Code::kClosed, std::string(call) + " wrote nothing");
  }
  return Error();
}

// Reads exactly `length` bytes. An EOF before the first byte is kClosed when
// `at_boundary` (nothing of the frame has come yet), kDecode otherwise.
Error read_all(int fd, uint8_t* data, size_t length, int64_t deadline, bool at_boundary) {
  size_t got = 0;
  while (got < length) {
    ssize_t n = read(fd, data + got, length - got);
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    if (n == 0) {
      if (got == 0 && at_boundary) return Error(Code::kClosed, "the peer closed the connection");
      return Error(Code::kDecode, "EOF inside a frame");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Error e = wait_fd(fd, POLLIN, deadline); !e.ok()) return e;
      continue;
    }
    return io_error("read");
  }
  return Error();
}

uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

Error frame_too_long(uint32_t length) {
  return Error(Code::kDecode, "frame of " + std::to_string(length) + " bytes announced, above the " +
                                  std::to_string(kMaxFrame) + "-byte limit");
}

}  // namespace

std::string runtime_dir() {
  const char* dir = getenv("VTRN_RUNTIME_DIR");
  if (dir != nullptr && dir[0] != '\0') return dir;
  return default_runtime_dir();
}

std::string default_runtime_dir() {
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  std::string base = (xdg != nullptr && xdg[0] != '\0') ? xdg : "/tmp";
  return base + "/vtrn-" + std::to_string(getuid());
}

std::string socket_path() { return runtime_dir() + "/vtrnd.sock"; }

Error encode_frame(const ProtobufCMessage* msg, std::vector<uint8_t>* out) {
  size_t size = protobuf_c_message_get_packed_size(msg);
  if (size > kMaxFrame)
    return Error(Code::kInvalidArgument, "message of " + std::to_string(size) + " bytes is above the " +
                                             std::to_string(kMaxFrame) + "-byte frame limit");
  size_t base = out->size();
  out->resize(base + kFrameHeader + size);
  uint8_t* p = out->data() + base;
  p[0] = uint8_t(size);
  p[1] = uint8_t(size >> 8);
  p[2] = uint8_t(size >> 16);
  p[3] = uint8_t(size >> 24);
  protobuf_c_message_pack(msg, p + kFrameHeader);
  return Error();
}

Error send_frame(int fd, const ProtobufCMessage* msg) {
  std::vector<uint8_t> buf;
  if (Error e = encode_frame(msg, &buf); !e.ok()) return e;
  return write_all(fd, buf.data(), buf.size());
}

Error recv_frame(int fd, std::vector<uint8_t>* payload, int timeout_ms) {
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  uint8_t hdr[kFrameHeader];
  // Wait first: a blocking fd would otherwise ignore the timeout in read().
  if (Error e = wait_fd(fd, POLLIN, deadline); !e.ok()) return e;
  if (Error e = read_all(fd, hdr, sizeof hdr, deadline, true); !e.ok()) return e;
  uint32_t length = load_le32(hdr);
  if (length > kMaxFrame) return frame_too_long(length);
  payload->resize(length);
  if (length == 0) return Error();
  return read_all(fd, payload->data(), length, deadline, false);
}

void FrameDecoder::feed(const uint8_t* data, size_t length) {
  // Compact lazily so a stream of small frames does not copy on every feed.
  if (start_ > 0 && start_ >= buf_.size() / 2) {
    buf_.erase(buf_.begin(), buf_.begin() + ptrdiff_t(start_));
    start_ = 0;
  }
  buf_.insert(buf_.end(), data, data + length);
}

Result<bool> FrameDecoder::next(std::vector<uint8_t>* payload) {
  if (broken_) return Error(Code::kDecode, "the stream announced a frame above the limit earlier");
  size_t avail = buf_.size() - start_;
  if (avail < kFrameHeader) return false;
  uint32_t length = load_le32(buf_.data() + start_);
  if (length > kMaxFrame) {
    broken_ = true;
    return frame_too_long(length);
  }
  if (avail < kFrameHeader + length) return false;
  const uint8_t* p = buf_.data() + start_ + kFrameHeader;
  payload->assign(p, p + length);
  start_ += kFrameHeader + length;
  if (start_ == buf_.size()) {
    buf_.clear();
    start_ = 0;
  }
  return true;
}

}  // namespace drv
