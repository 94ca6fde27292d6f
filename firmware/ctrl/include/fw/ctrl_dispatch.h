// Control-request dispatch: decode one vtrn.ctrl.Request payload, handle it,
// encode exactly one vtrn.ctrl.Response. No hardware in here: everything the
// handlers need from the chip comes through ChipFacts (fixed at boot) and
// the Backend interface, so this file builds into the firmware and into a
// host CMocka test unchanged.
//
// Outcomes (vtrn_ctrl.proto Status): bytes that do not decode ->
// STATUS_DECODE_ERROR; a request whose decode does not fit the arena ->
// STATUS_BAD_REQUEST; a oneof this firmware does not know (or none) ->
// STATUS_UNSUPPORTED; a field out of range -> STATUS_BAD_REQUEST naming it.
// Side effects that must follow the response (shutdown) are returned as an
// Action for the caller to perform after the response is queued.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/pb_arena.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::ctrl {

inline constexpr uint32_t kMaxPingPayload = 1024;  // vtrn_ctrl.proto PingRequest.payload
inline constexpr size_t kTextLen = 48;

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

// The live state handlers need. Non-virtual public methods over private
// virtual hooks, so a test double overrides only the hooks.
class Backend {
 public:
  uint64_t uptime_ns() { return do_uptime_ns(); }
  // Applies a validated level (0..7).
  void set_log_level(uint32_t level) { do_set_log_level(level); }
  // Requests of the chip's services (HBM, jobs, links, power, reliability:
  // the oneof ranges in proto/vtrn_ctrl.proto). Returns false when no
  // service knows `req`'s kind (the dispatcher answers UNSUPPORTED).
  // Otherwise the service has filled `resp` (status, body_case and a body it
  // allocated from `arena`, which outlives packing) and, when the status is
  // not OK, one line in `error` (capacity `error_cap`).
  bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
             char* error, size_t error_cap) {
    return do_serve(req, resp, arena, error, error_cap);
  }

 protected:
  ~Backend() = default;

 private:
  virtual uint64_t do_uptime_ns() = 0;
  virtual void do_set_log_level(uint32_t level) = 0;
  virtual bool do_serve(const Vtrn__Ctrl__Request&, Vtrn__Ctrl__Response*, pb::Arena&, char*,
                        size_t) {
    return false;
  }
};

enum class Action : uint8_t {
  kNone = 0,
  kShutdown = 1,  // response says OK; the caller halts after queueing it
};

struct Outcome {
  uint32_t length = 0;  // bytes of packed Response written to `out`
  uint32_t status = 0;  // vtrn.ctrl.Status that was sent
  Action action = Action::kNone;
};

class Dispatcher {
 public:
  Dispatcher(const ChipFacts& facts, Backend& backend, pb::Arena& arena)
      : facts_(facts), backend_(backend), arena_(arena) {}
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
  const ChipFacts& facts_;
  Backend& backend_;
  pb::Arena& arena_;
  uint64_t requests_ = 0;
  uint64_t errors_ = 0;
};

// Packs Event{boot}; returns bytes written, 0 if `cap` is too small.
uint32_t encode_boot_event(uint32_t boot_generation, uint64_t boot_ns, uint8_t* out,
                           uint32_t cap);

}  // namespace fw::ctrl
