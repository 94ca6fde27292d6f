// hal::link: the firmware's driver for one link engine (engine ABI 1.4,
// kCapLinkEngines: one per link port of the chip), reached through the
// engine region hal/copy_engine.h discovers. send() copies a send descriptor
// (HBM range, the destination chip + port as the board wires this port, tag,
// cookie) into the port's send queue and publishes it; post() does the same
// for a receive buffer the peer's next send may land in; ring() wakes the
// engine; poll_send() and poll_recv() copy out one completion each (status,
// bytes, tag, cookie, peer, modeled ns, replays). configure() publishes what
// the firmware's link management trained (state, speed, width, injected
// BER); config_done() tells when the engine answered.
//
// What to send where, and what a status means for a transfer, is the
// caller's (the firmware's link service) business; this driver checks only
// what keeps the queues well-formed. Same access rules as
// hal/copy_engine.h: index words through hal::mmio, entries before the
// index that publishes them, completions copied out after the index that
// covers them, and a completion index that runs ahead of what was
// submitted is the engine breaking the ABI (kBadHardware).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/copy_engine.h"
#include "hal/status.h"
#include "vtrn/engine_abi.h"

namespace hal::link {

struct Send {
  uint64_t addr = 0;     // chip physical (HBM)
  uint64_t length = 0;   // 1..kLinkMaxTransfer
  uint32_t dest_chip = 0;
  uint32_t dest_port = 0;
  uint32_t tag = 0;
  uint64_t cookie = 0;
  bool irq = true;       // interrupt on completion (when armed)
};

struct Buffer {
  uint64_t addr = 0;
  uint64_t length = 0;   // 1..kLinkMaxTransfer
  uint64_t cookie = 0;
  bool irq = true;
};

class LinkEngine {
 public:
  LinkEngine() = default;
  LinkEngine(const LinkEngine&) = delete;
  LinkEngine& operator=(const LinkEngine&) = delete;

  // kNotReady: region not initialised; kNotFound: the engines lack
  // kCapLinkEngines (an ABI < 1.4 vtrn-hw, or one that does not serve the
  // links); kOutOfRange: no link port `port`. Picks the queues up where
  // they are (index 0 after a chip engine reset).
  Status init(copy::EngineRegion& region, uint32_t port);

  // Writes every field, then the generation that publishes them, and rings
  // the engine. kInvalidArgument: reserved words not zero.
  Status configure(const vtrn::engine::LinkConfig& config);
  // True once the engine answered the last configure() (*status:
  // EngineError | ConfigField << 8, kEngineOk when applied).
  [[nodiscard]] bool config_done(uint32_t* status) const;

  // kCapacity: kLinkSendDepth sends (kLinkRecvDepth buffers) not yet
  // polled; kInvalidArgument: length 0 or beyond kLinkMaxTransfer, or a
  // range that wraps (the engine would refuse it anyway).
  Status send(const Send& s);
  Status post(const Buffer& b);
  Status ring();
  // kNotFound: nothing completed since the last poll.
  Status poll_send(vtrn::engine::LinkCompletion* out);
  Status poll_recv(vtrn::engine::LinkCompletion* out);

  void arm_irq(bool on);
  [[nodiscard]] uint32_t sends_in_flight() const { return sq_prod_ - scq_cons_; }
  [[nodiscard]] uint32_t buffers_posted() const { return rq_prod_ - rcq_cons_; }
  // The port's latched ring error (dma::QueueError values), 0 if healthy.
  [[nodiscard]] uint32_t error() const;
  [[nodiscard]] uint32_t port() const { return port_; }
  [[nodiscard]] uint16_t vector() const { return uint16_t(vtrn::engine::kVectorLink0 + port_); }

 private:
  copy::EngineRegion* region_ = nullptr;
  vtrn::engine::LinkEngineBlock* blk_ = nullptr;
  uint32_t port_ = 0;
  uint32_t sq_prod_ = 0, scq_cons_ = 0;
  uint32_t rq_prod_ = 0, rcq_cons_ = 0;
  uint32_t config_gen_ = 0;
};

}  // namespace hal::link
