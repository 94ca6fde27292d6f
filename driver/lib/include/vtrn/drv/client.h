// A blocking client of vtrnd's Unix socket, for the vtrn CLI, tests and
// exporters. One Client owns one connection; requests get increasing ids and
// call() pairs each request with the response carrying the same id.
//
// It is not thread-safe and not asynchronous: a program that needs several
// requests in flight opens several Clients (vtrnd serves them concurrently).
// Streaming requests (LogsRequest with follow) use send() once and then
// recv() in a loop until the caller closes the Client.
#pragma once

#include <stdint.h>

#include <memory>
#include <string>

#include "vtrn/drv/error.h"
#include "vtrn/drv/wire.h"
#include "vtrn_api.pb-c.h"

namespace drv {

struct ResponseDeleter {
  void operator()(Vtrn__Api__Response* r) const;
};
using ResponsePtr = std::unique_ptr<Vtrn__Api__Response, ResponseDeleter>;

class Client {
 public:
  Client() = default;
  ~Client();
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Code::kNotRunning "vtrnd is not running (no socket at PATH)" when
  // nothing listens there (ENOENT / ECONNREFUSED); kUntrusted, before
  // anything is sent, when the socket's directory is not a real directory
  // writable only by its owner, owned by us or root (or, when the user named
  // it, by a user of one of our groups: a board shared through vtrnd
  // --group), or when the server's SO_PEERCRED uid is not ours, root's or
  // that owner's; kSystem or kInvalidArgument with a one-line
  // reason otherwise.
  Error connect(const std::string& path);
  // Sends req (its id is set here) and waits up to timeout_ms (< 0: forever)
  // for the response with the same id; frames with other ids are discarded.
  // Code::kTimeout "timed out waiting for vtrnd (N ms)" when none came.
  Result<ResponsePtr> call(Vtrn__Api__Request* req, int timeout_ms = 30000);
  // Streaming: send once (id set here, see last_id()), then recv() frames.
  Error send(Vtrn__Api__Request* req);
  // Next response frame; kClosed "vtrnd closed the connection" on EOF,
  // kTimeout, or kDecode for a malformed frame.
  Result<ResponsePtr> recv(int timeout_ms = -1);
  void close();

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] uint64_t last_id() const { return next_id_ - 1; }

 private:
  int fd_ = -1;
  uint64_t next_id_ = 1;
};

}  // namespace drv
