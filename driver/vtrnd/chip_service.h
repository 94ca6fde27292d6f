// vtrnd's chip service: List, Info, Ping, Logs and Telemetry, the requests
// about the chips themselves (see chip_service.cpp for what each answers).
// Its only state is the follow streams of `vtrn logs -f`, per connection.
#pragma once

#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reply.h"
#include "service.h"
#include "vtrn/drv/event_loop.h"

namespace drv {

struct ChipServiceOptions {
  std::string board_model;
  std::string board_file;
  // Whether the connection is still there (a ping series or a long log
  // answer stops for a client that went away).
  std::function<bool(uint64_t cid)> client_alive;
  // Every service's fields of one chip's telemetry entry.
  std::function<void(Chip&, Vtrn__Api__Telemetry&, ProtoArena&)> fill_telemetry;
};

class ChipService final : public Service {
 public:
  // `chips`: the daemon's chips, read at each request (filled after the
  // service is registered, outlives it).
  ChipService(EventLoop* loop, const std::vector<std::unique_ptr<Chip>>* chips, ChipServiceOptions opts,
              ReplyFn reply)
      : loop_(loop),
        chips_(*chips),
        opts_(std::move(opts)),
        reply_(std::move(reply)),
        client_alive_(opts_.client_alive),
        fill_telemetry_(opts_.fill_telemetry) {}

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;
  void client_gone(uint64_t cid) override;

  // The end frame ("reason") of every follow stream; vtrnd is stopping.
  void end_log_streams(const std::string& reason);

 private:
  struct LogClient {
    std::vector<std::pair<Chip*, int>> subs;  // (chip, listener id)
    std::vector<uint64_t> streams;            // request ids of its follow streams
  };

  void list(uint64_t cid, uint64_t id);
  void info(uint64_t cid, uint64_t id, Chip* chip);
  void ping(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__PingRequest& r);
  void logs(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__LogsRequest& r);
  // `chip` null: every READY chip.
  void telemetry(uint64_t cid, uint64_t id, Chip* chip);

  EventLoop* loop_;
  const std::vector<std::unique_ptr<Chip>>& chips_;
  ChipServiceOptions opts_;
  ReplyFn reply_;
  std::function<bool(uint64_t)> client_alive_;
  std::function<void(Chip&, Vtrn__Api__Telemetry&, ProtoArena&)> fill_telemetry_;
  std::map<uint64_t, LogClient> log_clients_;
};

}  // namespace drv
