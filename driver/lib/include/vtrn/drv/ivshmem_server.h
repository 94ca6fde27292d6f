// The ivshmem server for one chip. QEMU's ivshmem-doorbell device connects to
// it (chardev socket) and receives, per docs/specs/ivshmem-spec.rst, int64
// little-endian messages with an optional fd attached by SCM_RIGHTS:
//   1. protocol version 0
//   2. its own peer id (hostif::kChipPeerId)
//   3. -1 with the BAR2 shared memory fd
//   4. for each other peer (here only the host, hostif::kHostPeerId): the
//      peer id once per vector, each with the eventfd that interrupts that
//      peer on that vector
//   5. its own id once per vector, each with the eventfd it listens on.
// vtrnd is the host peer: it keeps both sets of eventfds, so host -> chip is
// a write to the chip's eventfd and chip -> host arrives on the host's.
//
// It is not a general multi-peer server: exactly one peer (the chip's QEMU)
// at a time, and it never sends disconnect notifications. QEMU sets
// O_NONBLOCK on the eventfds it receives, a flag shared with our copies, so
// every eventfd here is non-blocking from the start and EAGAIN is normal.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/drv/fd.h"

namespace drv {

inline constexpr int64_t kIvshmemProtocolVersion = 0;

// Sends one protocol message: `value` as int64 LE, plus `attach_fd` (>= 0) by
// SCM_RIGHTS.
Error ivshmem_send_msg(int sock, int64_t value, int attach_fd);

class IvshmemServer {
 public:
  IvshmemServer() = default;
  ~IvshmemServer();
  IvshmemServer(const IvshmemServer&) = delete;
  IvshmemServer& operator=(const IvshmemServer&) = delete;

  // Creates the zero-filled, size-sealed BAR2 memfd of `bar2_bytes`, maps
  // it, creates 2 x `vectors` eventfds and listens at `path` (mode 0600).
  Error create(const std::string& path, uint64_t bar2_bytes, uint32_t vectors);

  // Accepts the pending connection and sends the whole handshake. A second
  // peer while one is connected is refused (kBusy, its connection closed);
  // kNotReady when nobody is waiting.
  Error accept_peer();
  void drop_peer() { peer_.reset(); }

  // Host -> chip doorbell on `vector` (kOutOfRange past the last vector).
  Error notify_chip(uint32_t vector);
  // Chip -> host: the eventfd to watch for `vector`, and a drain that
  // returns how many doorbells were coalesced into it (0 if none).
  [[nodiscard]] int host_eventfd(uint32_t vector) const { return host_efd_[vector].get(); }
  uint64_t drain_host(uint32_t vector);

  [[nodiscard]] int listen_fd() const { return listen_.get(); }
  [[nodiscard]] int peer_fd() const { return peer_.get(); }
  [[nodiscard]] int memfd() const { return memfd_.get(); }
  [[nodiscard]] uint8_t* bar2() const { return bar2_.data(); }
  [[nodiscard]] uint64_t bar2_size() const { return bar2_.size(); }
  [[nodiscard]] uint32_t vectors() const { return uint32_t(host_efd_.size()); }
  [[nodiscard]] const std::string& path() const { return path_; }

  // Closes everything and unlinks the socket path.
  void close();

 private:
  std::string path_;
  UniqueFd listen_;
  UniqueFd peer_;
  UniqueFd memfd_;
  Mapping bar2_;
  std::vector<UniqueFd> host_efd_;  // QEMU writes: chip -> host
  std::vector<UniqueFd> chip_efd_;  // we write: host -> chip
};

}  // namespace drv
