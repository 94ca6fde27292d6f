// vtrnd's QMP service: `vtrn qmp CHIP COMMAND...`, a chip's QEMU monitor
// reached through vtrnd's own QMP connection (QEMU connects to vtrnd's
// socket, so there is no second QMP client; the gdbstub would pause the
// chip). The admin only; the read-only allow list of qmp_policy.h unless
// vtrnd runs with --allow-qmp-write.
//
// What it is not: a way around the chip's owner. It never sends a command
// of its own and keeps no state; the monitor session and its ordering are
// QmpClient's (driver/lib/qmp.cpp).
#pragma once

#include <stdint.h>

#include <functional>

#include "reply.h"
#include "service.h"

namespace drv {

struct QmpServiceOptions {
  bool allow_write = false;  // --allow-qmp-write: commands beyond the read-only allow list
};

class QmpService final : public Service {
 public:
  // `is_admin(cid)`: the connection's peer is vtrnd's own uid or root.
  QmpService(QmpServiceOptions opts, ReplyFn reply, std::function<bool(uint64_t cid)> is_admin)
      : opts_(opts), reply_(std::move(reply)), is_admin_(std::move(is_admin)) {}

  [[nodiscard]] std::span<const RequestBody> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;

 private:
  QmpServiceOptions opts_;
  ReplyFn reply_;
  std::function<bool(uint64_t)> is_admin_;
};

}  // namespace drv
