// Per-chip ivshmem server (see vtrn/drv/ivshmem_server.h). The handshake is
// written in one go right after accept(): it is a dozen 8-byte messages,
// far below the socket buffer, and QEMU reads the first three synchronously
// while realizing the device, so QEMU blocks until we answer. That is why
// the socket must be listening before QEMU starts.
#include "vtrn/drv/ivshmem_server.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "vtrn/hostif.h"

namespace drv {

Error ivshmem_send_msg(int sock, int64_t value, int attach_fd) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(uint64_t(value) >> (8 * i));
  iovec iov{bytes, sizeof bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (attach_fd >= 0) {
    memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &attach_fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n == ssize_t(sizeof bytes)) return Error();
    if (n < 0 && errno == EINTR) continue;
    // The socket is blocking and the message tiny: a short write is a
    // broken peer, not back-pressure.
    return Error(Code::kSystem, strerror(n < 0 ? errno : EIO));
  }
}

IvshmemServer::~IvshmemServer() { close(); }

Error IvshmemServer::create(const std::string& path, uint64_t bar2_bytes, uint32_t vectors) {
  close();
  auto fail = [&](const std::string& what) {
    Error e(Code::kSystem, what + ": " + strerror(errno));
    close();
    return e;
  };
  memfd_.reset(memfd_create("vtrn-bar2", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd_) return fail("memfd_create");
  if (ftruncate(memfd_.get(), off_t(bar2_bytes)) != 0) return fail("ftruncate BAR2");
  // Neither QEMU nor we may resize BAR2 under the other's mapping (a shrink
  // would turn accesses into SIGBUS).
  if (fcntl(memfd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail("seal BAR2");
  if (Error e = bar2_.map(memfd_.get(), size_t(bar2_bytes)); !e.ok()) {
    close();
    return e.prefix("BAR2 ");
  }
  for (uint32_t v = 0; v < vectors; ++v) {
    host_efd_.emplace_back(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    chip_efd_.emplace_back(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!host_efd_.back() || !chip_efd_.back()) return fail("eventfd");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    close();
    return Error(Code::kInvalidArgument, "ivshmem socket path too long: " + path);
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  listen_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) return fail("socket");
  unlink(path.c_str());
  if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return fail("bind " + path);
  path_ = path;
  if (chmod(path.c_str(), 0600) != 0) return fail("chmod " + path);
  if (listen(listen_.get(), 2) != 0) return fail("listen " + path);
  return Error();
}

Error IvshmemServer::accept_peer() {
  UniqueFd conn(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Error(Code::kNotReady, "no pending connection");
    return Error(Code::kSystem, std::string("accept: ") + strerror(errno));
  }
  if (peer_) return Error(Code::kBusy, "second ivshmem peer refused (one chip per server)");
  using vtrn::hostif::kChipPeerId;
  using vtrn::hostif::kHostPeerId;
  // The handshake in the spec's order: version, our id, the memory, then
  // every vector's eventfd of each peer.
  std::vector<std::pair<int64_t, int>> msgs = {{kIvshmemProtocolVersion, -1}, {kChipPeerId, -1}, {-1, memfd_.get()}};
  for (auto& fd : host_efd_) msgs.emplace_back(kHostPeerId, fd.get());
  for (auto& fd : chip_efd_) msgs.emplace_back(kChipPeerId, fd.get());
  for (auto [value, fd] : msgs) {
    if (Error e = ivshmem_send_msg(conn.get(), value, fd); !e.ok()) return e.prefix("ivshmem handshake: ");
  }
  peer_ = std::move(conn);
  return Error();
}

Error IvshmemServer::notify_chip(uint32_t vector) {
  if (vector >= chip_efd_.size())
    return Error(Code::kOutOfRange, "vector " + std::to_string(vector) + " of " + std::to_string(chip_efd_.size()));
  const uint64_t one = 1;
  for (;;) {
    ssize_t n = write(chip_efd_[vector].get(), &one, sizeof one);
    if (n == ssize_t(sizeof one)) return Error();
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN means the counter is saturated: the chip has a wake-up pending
    // already, which is all a doorbell promises.
    if (n < 0 && errno == EAGAIN) return Error();
    return Error(Code::kSystem, std::string("doorbell: ") + (n < 0 ? strerror(errno) : "short write"));
  }
}

uint64_t IvshmemServer::drain_host(uint32_t vector) {
  if (vector >= host_efd_.size()) return 0;
  uint64_t total = 0;
  for (;;) {
    uint64_t v = 0;
    ssize_t n = read(host_efd_[vector].get(), &v, sizeof v);
    if (n == ssize_t(sizeof v)) {
      total += v;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return total;  // EAGAIN: drained
  }
}

void IvshmemServer::close() {
  peer_.reset();
  listen_.reset();
  if (!path_.empty()) unlink(path_.c_str());
  path_.clear();
  host_efd_.clear();
  chip_efd_.clear();
  bar2_.reset();
  memfd_.reset();
}

}  // namespace drv
