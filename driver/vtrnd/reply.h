// How a vtrnd service answers a client: the daemon hands each service a
// ReplyFn that packs the response and queues it on the client's connection
// (cid). The two builders every answer goes through: reply_body (a response
// message as the Response's oneof member, placed through protobuf-c's
// descriptors, so no caller names the member) and reply_error (a status and
// a one-line reason, no body).
#pragma once

#include <stdint.h>

#include <functional>
#include <string>

#include "vtrn_api.pb-c.h"

namespace drv {

using ReplyFn = std::function<void(uint64_t cid, Vtrn__Api__Response* resp)>;

inline void reply_error(const ReplyFn& reply, uint64_t cid, uint64_t id, Vtrn__Api__Status status,
                        const std::string& error) {
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  resp.id = id;
  resp.status = status;
  std::string text = error;  // protobuf-c wants a mutable char*
  resp.error = text.data();
  reply(cid, &resp);
}

// `body` as the Response member `body_case`, with `status` and `error`. A
// body that is not the member's message type is a fault of the caller:
// answered STATUS_INTERNAL instead of packing the wrong type.
inline void reply_body(const ReplyFn& reply, uint64_t cid, uint64_t id, Vtrn__Api__Response__BodyCase body_case,
                       ProtobufCMessage* body, Vtrn__Api__Status status = VTRN__API__STATUS__STATUS_OK,
                       const std::string& error = "") {
  const ProtobufCFieldDescriptor* f =
      protobuf_c_message_descriptor_get_field(&vtrn__api__response__descriptor, int(body_case));
  if (f == nullptr || f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor != body->descriptor)
    return reply_error(reply, cid, id, VTRN__API__STATUS__STATUS_INTERNAL, "reply body does not match its kind");
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  resp.id = id;
  resp.status = status;
  std::string text = error;  // protobuf-c wants a mutable char*
  resp.error = text.data();
  resp.body_case = body_case;
  *reinterpret_cast<ProtobufCMessage**>(reinterpret_cast<uint8_t*>(&resp) + f->offset) = body;
  reply(cid, &resp);
}

}  // namespace drv
