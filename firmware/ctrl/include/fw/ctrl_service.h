// fw::ctrl::ControlService: the control service, the firmware end of the
// BAR2 control queue pair and the first row of the service table. It
// consumes vtrn.ctrl.Request slots from the request ring, hands each to the
// Dispatcher (which routes it to the service that owns its kind), and
// produces exactly one Response slot with the request's seq in the response
// ring; it also sends every service's unsolicited Events there (send_event)
// and the boot Event when the chip is READY. It serves the core requests
// itself (ping, info, log level, shutdown: CoreHandlers).
//
// State-based, so no response is ever lost: a request is only consumed when
// the response ring has a free slot for its answer; otherwise it waits in
// the request ring until the host frees a slot (re-checked on every wake-up,
// at the latest on the next timer tick). When either ring latches an error
// (the host broke the protocol), the error is already published in
// CtrlIndexes::fw_error by the ring; the service logs it once and stops
// consuming for the rest of this boot.
#pragma once

#include <stdint.h>

#include "fw/ctrl_dispatch.h"
#include "fw/pb_arena.h"
#include "fw/service.h"
#include "vtrn/ctrl_ring.h"

namespace fw::ctrl {

// Packs and queues an unsolicited Event from any service (boot core only).
// False if it does not fit a slot, or the ring is full or broken (the caller
// logs; events are not retried by the ring).
bool send_event(const Vtrn__Ctrl__Event& event);

class ControlService final : public CoreHandlers, private Backend {
 public:
  ControlService();

  void init(const Boot& boot) override;
  Vectors on_ready(uint64_t ready_ns) override;
  Vectors poll(Turn& turn) override;
  [[nodiscard]] bool has_work() override;
  void fill_telemetry(vtrn::hostif::Telemetry* t) const override;

  bool send_event(const Vtrn__Ctrl__Event& event);

 private:
  uint64_t do_uptime_ns() override;
  void do_set_log_level(uint32_t level) override;
  void check_broken();
  bool push_event(uint32_t length);

  vtrn::hostif::RingConsumer requests_;
  vtrn::hostif::RingProducer responses_;
  uint32_t boot_generation_ = 0;
  uint32_t event_seq_ = 0;
  uint64_t events_ = 0;
  bool shutdown_ = false;
  bool stopped_ = false;
  // Decode arena of one request and the response bodies it produces.
  alignas(16) uint8_t arena_buffer_[16384];
  pb::Arena arena_;
  Dispatcher dispatcher_;
  // Copies out of BAR2 (the host may change the slot while we work on it).
  uint8_t request_[vtrn::hostif::kCtrlMaxPayload];
  uint8_t response_[vtrn::hostif::kCtrlMaxPayload];
};

ControlService& service();

}  // namespace fw::ctrl
