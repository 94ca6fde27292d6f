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

  // false + *err = "vtrnd is not running (no socket at PATH)" when nothing
  // listens there (ENOENT / ECONNREFUSED), or another one-line reason.
  bool connect(const std::string& path, std::string* err);
  // Sends req (its id is set here) and waits up to timeout_ms (< 0: forever)
  // for the response with the same id; frames with other ids are discarded.
  bool call(Vtrn__Api__Request* req, ResponsePtr* out, std::string* err, int timeout_ms = 30000);
  // Streaming: send once (id set here, see last_id()), then recv() frames.
  bool send(Vtrn__Api__Request* req, std::string* err);
  // Next response frame; false + *err on EOF ("vtrnd closed the connection"),
  // timeout or a malformed frame.
  bool recv(ResponsePtr* out, std::string* err, int timeout_ms = -1);
  void close();

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] uint64_t last_id() const { return next_id_ - 1; }

 private:
  int fd_ = -1;
  uint64_t next_id_ = 1;
};

}  // namespace drv
