// The control service: the firmware end of the BAR2 control queue pair.
// It consumes vtrn.ctrl.Request slots from the request ring, hands each to
// the Dispatcher, and produces exactly one Response slot with the request's
// seq in the response ring; it also sends unsolicited Events there.
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
#include "vtrn/ctrl_ring.h"

namespace fw::ctrl {

class Service {
 public:
  Service() = default;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  void init(const vtrn::hostif::RingMemory& requests, const vtrn::hostif::RingMemory& responses,
            Dispatcher* dispatcher);

  // True when poll() could make progress now.
  [[nodiscard]] bool has_work();
  // Serves every request it can. Returns the number of slots it produced
  // (the caller rings the host's control vector when > 0).
  uint32_t poll();
  // Queues Event{boot}. False if the ring is full or broken.
  bool send_boot_event(uint32_t boot_generation, uint64_t boot_ns);
  // ---- HBM (generic: any service's Event) ----
  // Packs and queues an unsolicited Event. False if it does not fit a slot,
  // or the ring is full or broken (the caller logs; events are not retried).
  bool send_event(const Vtrn__Ctrl__Event& event);
  // ---- end HBM ----

  [[nodiscard]] bool shutdown_requested() const { return shutdown_; }
  [[nodiscard]] bool stopped() const { return stopped_; }
  [[nodiscard]] uint64_t events_sent() const { return events_; }

 private:
  void check_broken();

  vtrn::hostif::RingConsumer requests_;
  vtrn::hostif::RingProducer responses_;
  Dispatcher* dispatcher_ = nullptr;
  uint32_t event_seq_ = 0;
  uint64_t events_ = 0;
  bool shutdown_ = false;
  bool stopped_ = false;
  // Copies out of BAR2 (the host may change the slot while we work on it).
  uint8_t request_[vtrn::hostif::kCtrlMaxPayload];
  uint8_t response_[vtrn::hostif::kCtrlMaxPayload];
};

}  // namespace fw::ctrl
