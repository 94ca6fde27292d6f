// fw_call: the one typed way the host calls a chip's firmware. The caller
// names the Request member its body goes in and the Response member it
// expects back (as member pointers of the vtrn.ctrl envelopes, so the
// compiler checks both message types; the answer is the Response member of
// the request's name, see vtrn_ctrl.proto); fw_call builds the envelope,
// sends it through the chip's control queue, and hands the callback either
// the typed answer or a drv::Error. A wrong answer (another Response
// member, or none) is kChipError with the same text for every call:
// "chip N: firmware answered <request> with <member>".
//
// What it is not: a transport. Any port with id() and submit(request,
// timeout_ms, spin, CtrlDone) carries it (Chip; the job service's backend);
// the answer body is valid during the callback only, as the port's is.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <type_traits>
#include <utility>

#include "vtrn/drv/ctrl_queue.h"
#include "vtrn/drv/error.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

template <typename Resp>
struct FwReply {
  Error error;                 // the control result's, or kChipError / kInternal (fw_detail::answer_body)
  const Resp* body = nullptr;  // the answer when ok(), else null
  uint64_t rtt_ns = 0;
  [[nodiscard]] bool ok() const { return error.ok(); }
};
template <typename Resp>
using FwDone = std::function<void(const FwReply<Resp>&)>;

namespace fw_detail {

// The Request member a body of message type `d` goes in (request bodies
// are one type per member), null when none.
const ProtobufCFieldDescriptor* request_field(const ProtobufCMessageDescriptor* d);
// The Response member that answers Request member `in`: the member of the
// same name (proto/vtrn_ctrl.proto keeps them paired), null when none or
// when its message is not `resp_bytes` long (the caller named another type).
const ProtobufCFieldDescriptor* response_field(const ProtobufCFieldDescriptor* in, size_t resp_bytes);

// The mapping of one control result onto the member `out` (null: a fault
// of the caller, kInternal): the result's error kept when it failed, else
// the body when it is that member (never null), else kChipError.
Result<const ProtobufCMessage*> answer_body(const CtrlResult& r, const ProtobufCFieldDescriptor* in,
                                            const ProtobufCFieldDescriptor* out, uint32_t chip);

}  // namespace fw_detail

// `body` as the Request member of its type; `in` names the member (the
// compiler checks the body's type against it; the members of a oneof share
// their storage, so the member is found from the body's descriptor). A body
// that is no Request member leaves the envelope empty, which the firmware
// answers with DECODE_ERROR.
template <typename Req>
Vtrn__Ctrl__Request fw_request(Req* Vtrn__Ctrl__Request::*in, Req& body) {
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  if (const ProtobufCFieldDescriptor* f = fw_detail::request_field(body.base.descriptor)) {
    req.body_case = Vtrn__Ctrl__Request__BodyCase(f->id);
    req.*in = &body;
  }
  return req;
}

// The callback of one call with a body of message type `req`: maps the
// port's result to FwReply<Resp>.
template <typename Resp>
CtrlDone fw_answer(uint32_t chip, const ProtobufCMessageDescriptor* req, Resp* Vtrn__Ctrl__Response::*,
                   FwDone<Resp> done) {
  const ProtobufCFieldDescriptor* in = fw_detail::request_field(req);
  const ProtobufCFieldDescriptor* out = fw_detail::response_field(in, sizeof(Resp));
  return [chip, in, out, done = std::move(done)](const CtrlResult& r) {
    FwReply<Resp> a;
    a.rtt_ns = r.rtt_ns;
    Result<const ProtobufCMessage*> body = fw_detail::answer_body(r, in, out, chip);
    if (body.ok()) {
      a.body = reinterpret_cast<const Resp*>(*body);
    } else {
      a.error = body.error();
    }
    done(a);
  };
}

// Sends `body` as the Request member `in` through `port` and answers `done`
// with the Response member of the same name, of the type `out` names.
template <typename Port, typename Req, typename Resp>
void fw_call(Port&& port, Req* Vtrn__Ctrl__Request::*in, Req& body, Resp* Vtrn__Ctrl__Response::*out,
             uint32_t timeout_ms, std::type_identity_t<FwDone<Resp>> done, bool spin = false) {
  port.submit(fw_request(in, body), timeout_ms, spin, fw_answer(port.id(), body.base.descriptor, out, std::move(done)));
}

}  // namespace drv
