// How a vtrnd service answers a client: the daemon hands each service a
// ReplyFn that packs the response and queues it on the client's connection
// (cid). reply_error builds the one kind of answer every service sends the
// same way: a status and a one-line reason, no body.
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

}  // namespace drv
