// Control-request dispatch: decode one vtrn.ctrl.Request payload, find the
// service whose route table has its kind, validate it, run the handler and
// encode exactly one vtrn.ctrl.Response. No hardware in here: the services
// come as a table (fw/service.h), the chip's facts and clock through
// ChipFacts and Backend, so this file builds into the firmware and into
// host tests and the fuzzer unchanged.
//
// The one validator, before any handler: bytes that do not decode ->
// STATUS_DECODE_ERROR; a request whose decode does not fit the arena ->
// STATUS_BAD_REQUEST; a kind no service routes (or none) ->
// STATUS_UNSUPPORTED; a body that is not the message the route was written
// for -> STATUS_INTERNAL; a service that is not ready -> its error (BUSY).
// Then the handler's vtrn::Error becomes the Status (status_of, the only
// place a Code turns into a Status) and its detail the response's error
// line. Side effects that must follow the response (shutdown) come back as
// an Action for the caller to perform after the response is queued.
//
// Also here: the core handlers every chip has (ping, info, log level,
// shutdown) as the service CoreHandlers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <span>

#include "fw/pb_arena.h"
#include "fw/service.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::ctrl {

inline constexpr uint32_t kMaxPingPayload = 1024;  // vtrn_ctrl.proto PingRequest.payload
inline constexpr size_t kTextLen = 48;
// The response's error line, NUL included (what the host has always seen).
inline constexpr size_t kErrorLineCap = 128;

// What InfoResponse reports; filled once at boot from the board DTB, the
// platform DTB, PCIe enumeration and the build.
struct ChipFacts {
  uint32_t chip_id = 0;
  char board_model[kTextLen] = {};
  char chip_name[kTextLen] = {};
  char fw_version[16] = {};
  char build_id[32] = {};
  uint32_t neuron_cores = 0;
  uint32_t hbm_stacks = 0;
  uint64_t hbm_bytes_per_stack = 0;
  uint32_t hbm_page_bytes = 0;
  uint32_t hbm_channels = 0;
  uint32_t link_ports = 0;
  uint32_t power_domains = 0;
  uint32_t thermal_zones = 0;
  uint32_t telemetry_period_ms = 0;
  char pci_address[16] = {};  // "0000:BB:DD.F"
  uint64_t bar2_bytes = 0;
  uint32_t boot_generation = 0;
  char cpu[kTextLen] = {};
  uint64_t timer_hz = 0;
  uint32_t gic_version = 0;
};

// The live state the core handlers need. Non-virtual public methods over
// private virtual hooks, so a test double overrides only the hooks.
class Backend {
 public:
  uint64_t uptime_ns() { return do_uptime_ns(); }
  // Applies a validated level (0..7).
  void set_log_level(uint32_t level) { do_set_log_level(level); }

 protected:
  ~Backend() = default;

 private:
  virtual uint64_t do_uptime_ns() = 0;
  virtual void do_set_log_level(uint32_t level) = 0;
};

// ping, info, set_log_level, shutdown (vtrn_ctrl.proto fields 1-4).
class CoreHandlers : public Service {
 public:
  CoreHandlers(const ChipFacts& facts, Backend& backend) : CoreHandlers(backend) { bind(&facts); }
  ~CoreHandlers() = default;
  [[nodiscard]] std::span<const Route> routes() const override;

  vtrn::Error ping(const Vtrn__Ctrl__PingRequest& r, Vtrn__Ctrl__PingResponse& out, Call& c);
  vtrn::Error info(const Vtrn__Ctrl__InfoRequest& r, Vtrn__Ctrl__InfoResponse& out, Call& c);
  vtrn::Error shutdown(const Vtrn__Ctrl__ShutdownRequest& r, Vtrn__Ctrl__ShutdownResponse& out,
                       Call& c);
  vtrn::Error set_log_level(const Vtrn__Ctrl__SetLogLevelRequest& r,
                            Vtrn__Ctrl__SetLogLevelResponse& out, Call& c);

 protected:
  // The firmware's control service is built before the facts are final and
  // binds them at init.
  explicit constexpr CoreHandlers(Backend& backend) : Service("ctrl"), backend_(backend) {}
  void bind(const ChipFacts* facts) { facts_ = facts; }

 private:
  const ChipFacts* facts_ = nullptr;
  Backend& backend_;
};

using Action = Call::Action;

struct Outcome {
  uint32_t length = 0;  // bytes of packed Response written to `out`
  uint32_t status = 0;  // vtrn.ctrl.Status that was sent
  Action action = Action::kNone;
};

// The Status a Code is answered with: invalid argument, out of range, not
// found -> BAD_REQUEST; unsupported -> UNSUPPORTED; busy, capacity, not
// ready -> BUSY; decode -> DECODE_ERROR; anything else -> INTERNAL.
[[nodiscard]] Vtrn__Ctrl__Status status_of(vtrn::Code code);

// One decoded request through one service: the validator, the handler, the
// Error -> Status mapping and one error line in `error` (capacity
// `error_cap`) when the status is not OK. Returns false, `resp` untouched,
// when `s` has no route for the request's kind. `action` (may be null) gets
// what the handler asked for. Tests drive a service's handlers with this.
bool serve(Service& s, const Vtrn__Ctrl__Request& req, uint64_t now_ns, pb::Arena& arena,
           Vtrn__Ctrl__Response* resp, char* error, size_t error_cap, Action* action = nullptr);

class Dispatcher {
 public:
  // `clock` gives each request its time (the ping response's uptime).
  Dispatcher(std::span<Service* const> services, Backend& clock, pb::Arena& arena)
      : services_(services), clock_(clock), arena_(arena) {}
  // The table to route over, for an owner built before the table is known.
  void route_to(std::span<Service* const> services) { services_ = services; }
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Handles one request payload. `out_cap` must be at least
  // kMinResponseCapacity; the Response always fits (an oversized one is
  // replaced by STATUS_INTERNAL naming its size).
  Outcome dispatch(const uint8_t* request, uint32_t length, uint8_t* out, uint32_t out_cap);

  static constexpr uint32_t kMinResponseCapacity = 256;

  [[nodiscard]] uint64_t requests() const { return requests_; }
  [[nodiscard]] uint64_t errors() const { return errors_; }  // status != OK

 private:
  std::span<Service* const> services_;
  Backend& clock_;
  pb::Arena& arena_;
  uint64_t requests_ = 0;
  uint64_t errors_ = 0;
};

// Packs Event{boot}; returns bytes written, 0 if `cap` is too small.
uint32_t encode_boot_event(uint32_t boot_generation, uint64_t boot_ns, uint8_t* out,
                           uint32_t cap);

}  // namespace fw::ctrl
