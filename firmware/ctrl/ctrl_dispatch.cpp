// Control-request dispatch and the core handlers (see fw/ctrl_dispatch.h).
// Portable: no hardware, no heap (protobuf-c allocates only from the
// caller's arena), no libc beyond snprintf/memcpy.
//
// Bodies are found through protobuf-c's descriptors rather than by naming
// each oneof member: the Request field whose number is the body case has
// the decoded body's offset and message type, the Response field of the
// route's answer the type to allocate. So a new service adds rows to its
// own table and nothing here changes.
#include "fw/ctrl_dispatch.h"

#include <stdio.h>
#include <string.h>

#include "vtrn_ctrl.pb-c.h"

namespace fw::ctrl {
namespace {

using vtrn::Code;
using vtrn::Error;

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

const ProtobufCMessageDescriptor* message_of(const ProtobufCFieldDescriptor* f) {
  if (f == nullptr || f->type != PROTOBUF_C_TYPE_MESSAGE) return nullptr;
  return static_cast<const ProtobufCMessageDescriptor*>(f->descriptor);
}

// The validator and the handler call for one routed request. On success the
// response's body is set; on failure nothing of it is.
Error run(Service& s, const Route& r, const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp,
          Call& call) {
  const ProtobufCFieldDescriptor* rf =
      protobuf_c_message_descriptor_get_field(&vtrn__ctrl__request__descriptor, r.request_case);
  const ProtobufCFieldDescriptor* af =
      protobuf_c_message_descriptor_get_field(&vtrn__ctrl__response__descriptor, r.response_case);
  const ProtobufCMessageDescriptor* rd = message_of(rf);
  const ProtobufCMessageDescriptor* ad = message_of(af);
  // The route table against the protocol: the body types the handler was
  // written for must be the ones these field numbers carry.
  if (rd == nullptr || ad == nullptr || rd->sizeof_message != r.request_size ||
      ad->sizeof_message != r.response_size) {
    return Error(Code::kInternal, "%s: the route for request kind %u does not match the protocol",
                 s.name(), unsigned(r.request_case));
  }
  const auto* body = *reinterpret_cast<const ProtobufCMessage* const*>(
      reinterpret_cast<const uint8_t*>(&req) + rf->offset);
  if (body == nullptr) {
    return Error(Code::kInvalidArgument, "%s: %s request without a body", s.name(), rf->name);
  }
  if (body->descriptor != rd) {
    return Error(Code::kInternal, "%s: %s body is not a %s", s.name(), rf->name, rd->name);
  }
  VTRN_TRY(s.ready());
  void* out = call.make_array<uint8_t>(ad->sizeof_message);
  if (out == nullptr) return call.no_memory(af->name);
  protobuf_c_message_init(ad, out);
  VTRN_TRY(r.handle(s, body, out, call));
  resp->body_case = Vtrn__Ctrl__Response__BodyCase(r.response_case);
  *reinterpret_cast<void**>(reinterpret_cast<uint8_t*>(resp) + af->offset) = out;
  return Error();
}

const Route kCoreRoutes[] = {
    route<&CoreHandlers::ping>(VTRN__CTRL__REQUEST__BODY_PING, VTRN__CTRL__RESPONSE__BODY_PING),
    route<&CoreHandlers::info>(VTRN__CTRL__REQUEST__BODY_INFO, VTRN__CTRL__RESPONSE__BODY_INFO),
    route<&CoreHandlers::shutdown>(VTRN__CTRL__REQUEST__BODY_SHUTDOWN,
                                   VTRN__CTRL__RESPONSE__BODY_SHUTDOWN),
    route<&CoreHandlers::set_log_level>(VTRN__CTRL__REQUEST__BODY_SET_LOG_LEVEL,
                                        VTRN__CTRL__RESPONSE__BODY_SET_LOG_LEVEL),
};

}  // namespace

Vtrn__Ctrl__Status status_of(Code code) {
  switch (code) {
    case Code::kOk: return VTRN__CTRL__STATUS__STATUS_OK;
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
    case Code::kNotFound: return VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
    case Code::kUnsupported: return VTRN__CTRL__STATUS__STATUS_UNSUPPORTED;
    case Code::kBusy:
    case Code::kCapacity:
    case Code::kNotReady: return VTRN__CTRL__STATUS__STATUS_BUSY;
    case Code::kDecode: return VTRN__CTRL__STATUS__STATUS_DECODE_ERROR;
    default: return VTRN__CTRL__STATUS__STATUS_INTERNAL;
  }
}

bool serve(Service& s, const Vtrn__Ctrl__Request& req, uint64_t now_ns, pb::Arena& arena,
           Vtrn__Ctrl__Response* resp, char* error, size_t error_cap, Action* action) {
  const Route* r = s.find(uint32_t(req.body_case));
  if (r == nullptr) return false;
  Call call(s, arena, now_ns);
  const Error e = run(s, *r, req, resp, call);
  resp->status = status_of(e.code());
  if (!e.ok()) {
    snprintf(error, error_cap, "%s", e.detail());
    resp->body_case = VTRN__CTRL__RESPONSE__BODY__NOT_SET;
  } else if (action != nullptr) {
    *action = call.action();
  }
  s.served(now_ns);
  return true;
}

std::span<const Route> CoreHandlers::routes() const { return kCoreRoutes; }

Error CoreHandlers::ping(const Vtrn__Ctrl__PingRequest& r, Vtrn__Ctrl__PingResponse& out, Call& c) {
  if (r.payload.len > kMaxPingPayload) {
    return Error(Code::kInvalidArgument, "ping.payload: %zu bytes, at most %u", r.payload.len,
                 unsigned(kMaxPingPayload));
  }
  out.host_time_ns = r.host_time_ns;
  out.chip_uptime_ns = c.now_ns();
  // The payload stays in the arena until the response is packed.
  out.payload = r.payload;
  return Error();
}

Error CoreHandlers::info(const Vtrn__Ctrl__InfoRequest&, Vtrn__Ctrl__InfoResponse& info, Call& c) {
  const ChipFacts& f = *facts_;
  info.chip_id = f.chip_id;
  info.board_model = text(f.board_model);
  info.chip_name = text(f.chip_name);
  info.fw_version = text(f.fw_version);
  info.build_id = text(f.build_id);
  info.neuron_cores = f.neuron_cores;
  info.hbm_stacks = f.hbm_stacks;
  info.hbm_bytes_per_stack = f.hbm_bytes_per_stack;
  info.hbm_page_bytes = f.hbm_page_bytes;
  info.hbm_channels = f.hbm_channels;
  info.link_ports = f.link_ports;
  info.power_domains = f.power_domains;
  info.thermal_zones = f.thermal_zones;
  info.telemetry_period_ms = f.telemetry_period_ms;
  info.pci_address = text(f.pci_address);
  info.bar2_bytes = f.bar2_bytes;
  info.uptime_ns = c.now_ns();
  info.boot_generation = f.boot_generation;
  info.cpu = text(f.cpu);
  info.timer_hz = f.timer_hz;
  info.gic_version = f.gic_version;
  return Error();
}

Error CoreHandlers::shutdown(const Vtrn__Ctrl__ShutdownRequest&, Vtrn__Ctrl__ShutdownResponse&,
                             Call& c) {
  c.set_action(Action::kShutdown);
  return Error();
}

Error CoreHandlers::set_log_level(const Vtrn__Ctrl__SetLogLevelRequest& r,
                                  Vtrn__Ctrl__SetLogLevelResponse&, Call&) {
  if (r.level > 7) {
    return Error(Code::kInvalidArgument, "set_log_level.level: %u, must be 0..7",
                 unsigned(r.level));
  }
  backend_.set_log_level(r.level);
  return Error();
}

Outcome Dispatcher::dispatch(const uint8_t* request, uint32_t length, uint8_t* out,
                             uint32_t out_cap) {
  ++requests_;
  arena_.reset();
  Outcome outcome;
  Vtrn__Ctrl__Response resp = VTRN__CTRL__RESPONSE__INIT;
  char error[kErrorLineCap] = {};

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
    bool routed = false;
    for (Service* s : services_) {
      if (s->find(uint32_t(req->body_case)) == nullptr) continue;
      routed = serve(*s, *req, clock_.uptime_ns(), arena_, &resp, error, sizeof error,
                     &outcome.action);
      break;
    }
    if (!routed) {
      resp.status = VTRN__CTRL__STATUS__STATUS_UNSUPPORTED;
      snprintf(error, sizeof error, "request kind %u is not supported by this firmware",
               unsigned(req->body_case));
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
