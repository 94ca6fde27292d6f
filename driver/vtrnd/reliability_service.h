// vtrnd's reliability requests: ChipReset (`vtrn reset`) and FaultInject
// (`vtrn inject hang|stall|panic|dma-corrupt|qemu-kill|tensor-engine|
// dma-engine|job-stuck`), plus the one place that turns a chip's ResetInfo
// into the vtrn.api ResetHistory message for Info, List and Telemetry.
//
// The watchdog, the reset itself and the re-attach live in Chip
// (driver/lib/chip.cpp); this is only the client-facing side. Firmware faults
// (hang, stall, panic) are committed by the firmware after it has answered
// the control request, so a successful FaultInject means "the fault is in",
// and detection is Chip's job from there. dma-corrupt breaks the host's side
// of one DMA queue's ring in BAR2 (its submission index), which the firmware
// must latch; qemu-kill is a SIGKILL to the chip's QEMU.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/drv/chip.h"
#include "vtrn_api.pb-c.h"

namespace drv {

// The reset history as a vtrn.api ResetHistory message, its storage owned by `a`.
Vtrn__Api__ResetHistory* reset_history_message(const ResetInfo& r, ProtoArena& a);

class ReliabilityService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;

  static constexpr uint32_t kInjectTimeoutMs = 2000;

  explicit ReliabilityService(ReplyFn reply) : reply_(std::move(reply)) {}

  void chip_reset(uint64_t cid, uint64_t id, Chip* chip);
  void fault_inject(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__FaultInjectRequest& r);

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;

 private:
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);
  void reply_inject(uint64_t cid, uint64_t id, const std::string& detail, uint64_t heartbeat,
                    int32_t pid);

  ReplyFn reply_;
};

const char* fault_kind_name(Vtrn__Api__FaultKind k);

}  // namespace drv
