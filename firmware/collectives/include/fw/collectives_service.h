// fw::collectives::CollectivesService: the chip's part of ring collectives
// (all-reduce, all-gather) run as jobs. vtrnd sends one
// CollectiveSubmitRequest per chip (vtrn.ctrl field 42) naming the HBM
// buffers, this chip's rank and the two link ports of the ring; the service
// runs the portable state machine (fw/collective.h) on core 0 over
// fw::links' ports and ends every accepted submit with exactly one
// CollectiveEvent.
//
// It is not the link layer and not the kernel scheduler: collectives move
// data between chips, so they run where the link ports are polled (core 0's
// event loop), one at a time per chip, while kernel jobs run on the
// executor cores. Frames of a collective whose submit has not arrived yet
// (the neighbour started first) are held at the head of the port's queue
// for a bounded time, so chips may start in any order.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/collective.h"
#include "fw/service.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::collectives {

class CollectivesService final : public Service {
 public:
  constexpr CollectivesService() : Service("collectives") {}
  [[nodiscard]] std::span<const Route> routes() const override;

  // Registers with fw::links as its frame client (after the links service).
  void init(const Boot& boot) override;
  // Sends the end event of a finished collective (kept for the next turn
  // when the ring is full).
  Vectors poll(Turn& turn) override;
  // A collective's end event is owed.
  [[nodiscard]] bool has_work() override { return event_owed_; }

  vtrn::Error submit(const Vtrn__Ctrl__CollectiveSubmitRequest& r,
                     Vtrn__Ctrl__CollectiveSubmitResponse& out, Call& c);

  // The frame client's two hooks (fw::links calls them from its poll).
  bool on_frame(uint32_t port, const uint8_t* data, uint32_t length, uint64_t now);
  bool pump(uint64_t now);

 private:
  static constexpr uint32_t kMaxFrame = 4096;

  void finish(uint64_t now);

  coll::Collective coll_;
  uint64_t job_id_ = 0;
  uint32_t send_port_ = 0, recv_port_ = 0;
  uint32_t last_id_ = 0;      // highest collective id this chip started
  bool running_ = false;
  bool event_owed_ = false;
  uint64_t start_ns_ = 0, end_ns_ = 0;
  uint64_t hold_since_ = 0;   // a future collective's frame at a port head since
  bool holding_ = false;
  char reason_[224] = {};      // the end event's reason: the step, then the ports
  alignas(8) uint8_t tx_[kMaxFrame] = {};
};

CollectivesService& service();

}  // namespace fw::collectives
