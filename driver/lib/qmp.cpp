// QMP client (see vtrn/drv/qmp.h).
#include "vtrn/drv/qmp.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <nlohmann/json.hpp>

#include "vtrn/drv/log.h"

namespace drv {

Error QmpClient::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error(Code::kInvalidArgument, "QMP socket path too long: " + path);
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  listen_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  unlink(path.c_str());
  if (!listen_ || bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || ::listen(listen_.get(), 1) != 0) {
    Error e(Code::kSystem, "QMP socket " + path + ": " + strerror(errno));
    listen_.reset();
    unlink(path.c_str());
    return e;
  }
  if (Error e = loop_->add(listen_.get(), EPOLLIN, [this](uint32_t) { on_accept(); }); !e.ok()) {
    listen_.reset();
    unlink(path.c_str());
    return e.prefix("QMP socket " + path + ": ");
  }
  path_ = path;
  return Error();
}

void QmpClient::on_accept() {
  UniqueFd c(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!c) return;
  if (conn_) return;  // one monitor per chip; a second connection is dropped
  if (Error e = loop_->add(c.get(), EPOLLIN | EPOLLRDHUP, [this](uint32_t) { on_readable(); }); !e.ok()) {
    DRV_LOGW("%s: QMP: %s, dropping the connection", label_.c_str(), e.detail().c_str());
    return;
  }
  conn_ = std::move(c);
}

void QmpClient::on_readable() {
  char buf[4096];
  bool closed = false;
  for (;;) {
    ssize_t n = read(conn_.get(), buf, sizeof buf);
    if (n > 0) {
      inbuf_.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // EOF or error: QEMU is gone (or going); what it said last still counts.
    closed = true;
    break;
  }
  size_t pos;
  while ((pos = inbuf_.find('\n')) != std::string::npos) {
    std::string line = inbuf_.substr(0, pos);
    inbuf_.erase(0, pos + 1);
    if (skipping_) {  // the tail of a line already answered as too long
      skipping_ = false;
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) handle_line(line);
  }
  if (inbuf_.size() > kMaxLineBytes) {
    // An answer this long fails its own command; the next answer still
    // goes to the next command.
    inbuf_.clear();
    if (!skipping_) {
      skipping_ = true;
      if (!awaiting_.empty()) {
        Reply reply = std::move(awaiting_.front());
        awaiting_.pop_front();
        reply(false, "QMP answer longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB");
      }
    }
  }
  if (closed) disconnect();
}

void QmpClient::handle_line(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    DRV_LOGW("%s: QMP: unparsable line: %.200s", label_.c_str(), line.c_str());
    return;
  }
  if (j.contains("QMP")) {
    if (!caps_sent_) {
      caps_sent_ = true;
      awaiting_.push_back([this](bool ok, const std::string& detail) {
        if (!ok) {
          DRV_LOGW("%s: QMP capabilities refused: %s", label_.c_str(), detail.c_str());
          return;
        }
        negotiated_ = true;
        flush_pending();
      });
      send_raw(R"({"execute":"qmp_capabilities"})");
    }
    return;
  }
  if (j.contains("event")) {
    std::string ev = j["event"].is_string() ? j["event"].get<std::string>() : "?";
    DRV_LOGI("%s: QMP event %s", label_.c_str(), ev.c_str());
    return;
  }
  if (awaiting_.empty()) return;
  Reply reply = std::move(awaiting_.front());
  awaiting_.pop_front();
  if (j.contains("return")) {
    reply(true, j["return"].dump());
  } else {
    std::string desc = "QMP error";
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("desc") &&
        j["error"]["desc"].is_string())
      desc = j["error"]["desc"].get<std::string>();
    reply(false, desc);
  }
}

void QmpClient::send_raw(const std::string& json) {
  if (!conn_) return;
  std::string msg = json + "\n";
  size_t off = 0;
  while (off < msg.size()) {
    ssize_t n = send(conn_.get(), msg.data() + off, msg.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // QEMU reads its monitor promptly; a full buffer for a one-line
      // command means it is wedged, and the caller's timeout handles that.
      DRV_LOGW("%s: QMP socket full, command dropped", label_.c_str());
      return;
    }
    DRV_LOGW("%s: QMP write: %s", label_.c_str(), strerror(errno));
    return;
  }
}

void QmpClient::execute(const std::string& command, Reply reply) {
  queued_.emplace_back(nlohmann::json{{"execute", command}}.dump(), std::move(reply));
  flush_pending();
}

void QmpClient::execute(const std::string& command, const std::string& arguments_json, Reply reply) {
  nlohmann::json args = nlohmann::json::parse(arguments_json, nullptr, false);
  if (args.is_discarded() || !args.is_object()) {
    reply(false, "QMP arguments are not a JSON object");
    return;
  }
  queued_.emplace_back(nlohmann::json{{"execute", command}, {"arguments", std::move(args)}}.dump(),
                       std::move(reply));
  flush_pending();
}

void QmpClient::flush_pending() {
  if (!negotiated_ || !conn_) return;
  while (!queued_.empty()) {
    auto [line, reply] = std::move(queued_.front());
    queued_.pop_front();
    awaiting_.push_back(std::move(reply));
    send_raw(line);
  }
}

void QmpClient::fail_all(const std::string& why) {
  auto a = std::move(awaiting_);
  auto q = std::move(queued_);
  awaiting_.clear();
  queued_.clear();
  for (auto& r : a) r(false, why);
  for (auto& [cmd, r] : q) r(false, why);
}

void QmpClient::disconnect() {
  if (conn_) loop_->remove(conn_.get());
  conn_.reset();
  inbuf_.clear();
  negotiated_ = false;
  caps_sent_ = false;
  skipping_ = false;
  fail_all("QMP connection closed");
}

void QmpClient::close() {
  if (conn_) loop_->remove(conn_.get());
  if (listen_) loop_->remove(listen_.get());
  conn_.reset();
  listen_.reset();
  if (!path_.empty()) unlink(path_.c_str());
  path_.clear();
  negotiated_ = false;
  fail_all("QMP closed");
}

}  // namespace drv
