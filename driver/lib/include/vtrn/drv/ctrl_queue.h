// The result of one control request to a chip's firmware, as the chip's
// control queue hands it back: a host status with one line of text, the
// decoded vtrn.ctrl.Response (valid during the callback only) and the
// round-trip time. fw_call.h maps it to a typed answer.
#pragma once

#include <stdint.h>

#include <functional>
#include <string>

#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

struct CtrlResult {
  Vtrn__Api__Status status = VTRN__API__STATUS__STATUS_OK;
  std::string error;
  const Vtrn__Ctrl__Response* response = nullptr;  // valid during the callback only
  uint64_t rtt_ns = 0;
};
using CtrlDone = std::function<void(const CtrlResult&)>;

}  // namespace drv
