// A QMP (QEMU Machine Protocol) client for one chip, driven by EventLoop.
//
// vtrnd listens on chip<N>/qmp.sock and QEMU connects to it as a chardev
// client (-chardev socket,...,path= + -mon mode=control), so the socket exists
// before QEMU starts and there is no connect-retry race. QMP is newline-
// delimited JSON: the server greets, we send qmp_capabilities, then commands
// are answered in order with {"return":...} or {"error":...}; asynchronous
// {"event":...} lines (SHUTDOWN, RESET, STOP...) may arrive at any time and
// are logged. Writes are small and rare, so they are written blocking.
// One QmpClient outlives the QEMUs it serves: when a chip's QEMU dies and
// vtrnd launches another on the same socket, the new connection gets its own
// capabilities handshake.
#pragma once

#include <functional>
#include <string>
#include <vector>
#include <deque>

#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"

namespace drv {

class QmpClient {
 public:
  // ok: true with the command's "return" value as JSON text; false with the
  // QMP error description (or "QMP connection closed").
  using Reply = std::function<void(bool ok, const std::string& detail)>;

  QmpClient(EventLoop* loop, std::string label) : loop_(loop), label_(std::move(label)) {}
  ~QmpClient() { close(); }
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;

  // Creates the listening socket (mode 0600) and watches it.
  Error listen(const std::string& path);
  // The longest QMP line (one answer) taken: a longer answer fails its
  // command with an error instead of being matched to the next one.
  static constexpr size_t kMaxLineBytes = 2u << 20;

  // Queues a command (sent once the capabilities handshake is done).
  void execute(const std::string& command, Reply reply);
  // The same with its "arguments": `arguments_json` is a JSON object's text
  // (the caller has checked it; anything else fails the command).
  void execute(const std::string& command, const std::string& arguments_json, Reply reply);
  [[nodiscard]] bool ready() const { return negotiated_; }
  // Drops the current QEMU connection (its commands fail) but keeps
  // listening: a relaunched QEMU connects again and is greeted afresh.
  void disconnect();
  void close();

 private:
  void on_accept();
  void on_readable();
  void handle_line(const std::string& line);
  void send_raw(const std::string& json);
  void flush_pending();
  void fail_all(const std::string& why);

  EventLoop* loop_;
  std::string label_;
  std::string path_;
  UniqueFd listen_;
  UniqueFd conn_;
  std::string inbuf_;
  bool negotiated_ = false;
  bool caps_sent_ = false;
  bool skipping_ = false;  // dropping the rest of a line longer than kMaxLineBytes
  std::deque<std::pair<std::string, Reply>> queued_;  // not yet sent, as the JSON line
  std::deque<Reply> awaiting_;                        // sent, in order
};

}  // namespace drv
