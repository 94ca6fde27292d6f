// vtrnd's power service: PowerSet requests of vtrn.api (device state, power
// cap, pstate limit, autosuspend delay) forwarded to the chip's firmware as
// vtrn.ctrl power requests, and the decoding of the chip's power/thermal
// block (BAR2 kRegionPower, read and validated by HostInterface::read_power)
// into vtrn.api PowerTelemetry for `vtrn telemetry`, `vtrn top` and the
// metrics exporter.
//
// It keeps no per-client state: a request is one control round trip whose
// answer goes to the client if it is still connected (Daemon::reply drops
// answers to departed clients), so client_gone has nothing to release.
//
// A D3hot request is answered as soon as the firmware accepted it, with the
// state it reached (QUIESCING while in-flight work drains); work that
// arrives while the chip is in D3hot (DMA, jobs) waits in its queues until
// D0, it is neither failed nor timed out here.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/power_telemetry.h"
#include "vtrn_api.pb-c.h"

namespace drv {

// The block as a vtrn.api PowerTelemetry message, its storage owned by `a`.
Vtrn__Api__PowerTelemetry* power_telemetry_message(const vtrn::power::PowerTelemetry& p, ProtoArena& a);

// Names of the enumerations as the API and the metrics use them.
const char* power_device_state_name(uint32_t s);  // "D0", "quiescing", "D3hot", "resuming"
const char* power_core_state_name(uint32_t s);    // "running", "idle", "gated"
const char* power_link_state_name(uint32_t s);    // "down", "L0", "L0s", "L1"
// NVML-style names of the set bits of clock_event_reasons, in bit order.
std::vector<const char*> clock_event_reason_names(uint64_t reasons);

class PowerService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;
  static constexpr uint32_t kTimeoutMs = 5000;

  PowerService(EventLoop* loop, ReplyFn reply);
  PowerService(const PowerService&) = delete;
  PowerService& operator=(const PowerService&) = delete;

  void add_chip(Chip* chip) { chips_.push_back(chip); }
  void set(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__PowerSetRequest& r);

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;
  // The chip's power block, when it has a valid one.
  void fill_telemetry(Chip& chip, Vtrn__Api__Telemetry& t, ProtoArena& a) override;

 private:
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);

  EventLoop* loop_;
  ReplyFn reply_;
  std::vector<Chip*> chips_;
};

}  // namespace drv
