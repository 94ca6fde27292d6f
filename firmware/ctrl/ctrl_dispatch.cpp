// Control-request dispatch (see fw/ctrl_dispatch.h). Portable: no hardware,
// no heap (protobuf-c allocates only from the caller's arena), no libc
// beyond snprintf/memcpy.
#include "fw/ctrl_dispatch.h"

#include <stdio.h>
#include <string.h>

#include "vtrn_ctrl.pb-c.h"

namespace fw::ctrl {
namespace {

char* text(const char* s) { return const_cast<char*>(s); }

// Packs `resp` into out; if it does not fit, packs a STATUS_INTERNAL reply
// that names the size instead (always small enough for kMinResponseCapacity).
uint32_t pack_response(Vtrn__Ctrl__Response* resp, uint8_t* out, uint32_t cap) {
  const size_t need = vtrn__ctrl__response__get_packed_size(resp);
  if (need <= cap) return uint32_t(vtrn__ctrl__response__pack(resp, out));
  char msg[96];
  snprintf(msg, sizeof msg, "response of %zu bytes exceeds the %u-byte slot", need,
           unsigned(cap));
  Vtrn__Ctrl__Response fallback = VTRN__CTRL__RESPONSE__INIT;
  fallback.status = VTRN__CTRL__STATUS__STATUS_INTERNAL;
  fallback.error = msg;
  resp->status = fallback.status;
  return uint32_t(vtrn__ctrl__response__pack(&fallback, out));
}

}  // namespace

Outcome Dispatcher::dispatch(const uint8_t* request, uint32_t length, uint8_t* out,
                             uint32_t out_cap) {
  ++requests_;
  arena_.reset();
  Outcome outcome;
  Vtrn__Ctrl__Response resp = VTRN__CTRL__RESPONSE__INIT;
  char error[128] = {};

  // Response bodies live on this frame until they are packed.
  Vtrn__Ctrl__PingResponse ping = VTRN__CTRL__PING_RESPONSE__INIT;
  Vtrn__Ctrl__InfoResponse info = VTRN__CTRL__INFO_RESPONSE__INIT;
  Vtrn__Ctrl__ShutdownResponse shutdown = VTRN__CTRL__SHUTDOWN_RESPONSE__INIT;
  Vtrn__Ctrl__SetLogLevelResponse set_level = VTRN__CTRL__SET_LOG_LEVEL_RESPONSE__INIT;

  Vtrn__Ctrl__Request* req = vtrn__ctrl__request__unpack(arena_.allocator(), length, request);
  if (!req) {
    if (arena_.exhausted()) {
      resp.status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
      snprintf(error, sizeof error, "request of %u bytes needs more than the decode arena",
               unsigned(length));
    } else {
      resp.status = VTRN__CTRL__STATUS__STATUS_DECODE_ERROR;
      snprintf(error, sizeof error, "%u bytes are not a valid vtrn.ctrl.Request",
               unsigned(length));
    }
  } else {
    switch (req->body_case) {
      case VTRN__CTRL__REQUEST__BODY_PING:
        if (req->ping->payload.len > kMaxPingPayload) {
          resp.status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
          snprintf(error, sizeof error, "ping.payload: %zu bytes, at most %u",
                   req->ping->payload.len, unsigned(kMaxPingPayload));
          break;
        }
        ping.host_time_ns = req->ping->host_time_ns;
        ping.chip_uptime_ns = backend_.uptime_ns();
        // The payload stays in the arena until the response is packed.
        ping.payload = req->ping->payload;
        resp.body_case = VTRN__CTRL__RESPONSE__BODY_PING;
        resp.ping = &ping;
        break;
      case VTRN__CTRL__REQUEST__BODY_INFO:
        info.chip_id = facts_.chip_id;
        info.board_model = text(facts_.board_model);
        info.chip_name = text(facts_.chip_name);
        info.fw_version = text(facts_.fw_version);
        info.build_id = text(facts_.build_id);
        info.neuron_cores = facts_.neuron_cores;
        info.hbm_stacks = facts_.hbm_stacks;
        info.hbm_bytes_per_stack = facts_.hbm_bytes_per_stack;
        info.hbm_page_bytes = facts_.hbm_page_bytes;
        info.hbm_channels = facts_.hbm_channels;
        info.link_ports = facts_.link_ports;
        info.power_domains = facts_.power_domains;
        info.thermal_zones = facts_.thermal_zones;
        info.telemetry_period_ms = facts_.telemetry_period_ms;
        info.pci_address = text(facts_.pci_address);
        info.bar2_bytes = facts_.bar2_bytes;
        info.uptime_ns = backend_.uptime_ns();
        info.boot_generation = facts_.boot_generation;
        info.cpu = text(facts_.cpu);
        info.timer_hz = facts_.timer_hz;
        info.gic_version = facts_.gic_version;
        resp.body_case = VTRN__CTRL__RESPONSE__BODY_INFO;
        resp.info = &info;
        break;
      case VTRN__CTRL__REQUEST__BODY_SHUTDOWN:
        resp.body_case = VTRN__CTRL__RESPONSE__BODY_SHUTDOWN;
        resp.shutdown = &shutdown;
        outcome.action = Action::kShutdown;
        break;
      case VTRN__CTRL__REQUEST__BODY_SET_LOG_LEVEL:
        if (req->set_log_level->level > 7) {
          resp.status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
          snprintf(error, sizeof error, "set_log_level.level: %u, must be 0..7",
                   unsigned(req->set_log_level->level));
          break;
        }
        backend_.set_log_level(req->set_log_level->level);
        resp.body_case = VTRN__CTRL__RESPONSE__BODY_SET_LOG_LEVEL;
        resp.set_log_level = &set_level;
        break;
      default:
        if (backend_.serve(*req, &resp, arena_, error, sizeof error)) break;
        resp.status = VTRN__CTRL__STATUS__STATUS_UNSUPPORTED;
        snprintf(error, sizeof error, "request kind %u is not supported by this firmware",
                 unsigned(req->body_case));
        break;
    }
  }
  if (resp.status != VTRN__CTRL__STATUS__STATUS_OK) {
    resp.error = error;
    resp.body_case = VTRN__CTRL__RESPONSE__BODY__NOT_SET;
  }
  outcome.length = pack_response(&resp, out, out_cap);
  outcome.status = uint32_t(resp.status);
  if (outcome.status != VTRN__CTRL__STATUS__STATUS_OK) {
    ++errors_;
    outcome.action = Action::kNone;
  }
  // Nothing decoded may outlive this call: the next request reuses the arena.
  arena_.reset();
  return outcome;
}

uint32_t encode_boot_event(uint32_t boot_generation, uint64_t boot_ns, uint8_t* out,
                           uint32_t cap) {
  Vtrn__Ctrl__BootEvent boot = VTRN__CTRL__BOOT_EVENT__INIT;
  boot.boot_generation = boot_generation;
  boot.boot_ns = boot_ns;
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_BOOT;
  ev.boot = &boot;
  if (vtrn__ctrl__event__get_packed_size(&ev) > cap) return 0;
  return uint32_t(vtrn__ctrl__event__pack(&ev, out));
}

}  // namespace fw::ctrl
