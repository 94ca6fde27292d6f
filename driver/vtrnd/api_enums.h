// Where libvtrn's own enums meet vtrn.api's: the one mapping of drv::ChipState
// and drv::ResetCause to the protocol's ChipState and ResetCause, and of a
// drv::Error's code to the protocol's Status, for the replies vtrnd builds.
// drv_api_enums checks it against the descriptors (every protocol value
// reached once, the names the CLI prints unchanged, every code a control
// result carries on the status clients have always seen for it).
#pragma once

#include "vtrn/drv/chip_state.h"
#include "vtrn/drv/error.h"
#include "vtrn_api.pb-c.h"

namespace drv {

inline Vtrn__Api__ChipState to_api(ChipState s) {
  switch (s) {
    case ChipState::kUnknown: return VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN;
    case ChipState::kStarting: return VTRN__API__CHIP_STATE__CHIP_STATE_STARTING;
    case ChipState::kBooting: return VTRN__API__CHIP_STATE__CHIP_STATE_BOOTING;
    case ChipState::kReady: return VTRN__API__CHIP_STATE__CHIP_STATE_READY;
    case ChipState::kFailed: return VTRN__API__CHIP_STATE__CHIP_STATE_FAILED;
    case ChipState::kPanic: return VTRN__API__CHIP_STATE__CHIP_STATE_PANIC;
    case ChipState::kHalted: return VTRN__API__CHIP_STATE__CHIP_STATE_HALTED;
  }
  return VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN;
}

inline Vtrn__Api__ResetCause to_api(ResetCause c) {
  switch (c) {
    case ResetCause::kNone: return VTRN__API__RESET_CAUSE__RESET_CAUSE_NONE;
    case ResetCause::kManual: return VTRN__API__RESET_CAUSE__RESET_CAUSE_MANUAL;
    case ResetCause::kWatchdog: return VTRN__API__RESET_CAUSE__RESET_CAUSE_WATCHDOG;
    case ResetCause::kPanic: return VTRN__API__RESET_CAUSE__RESET_CAUSE_PANIC;
    case ResetCause::kQemuExit: return VTRN__API__RESET_CAUSE__RESET_CAUSE_QEMU_EXIT;
    case ResetCause::kBroken: return VTRN__API__RESET_CAUSE__RESET_CAUSE_BROKEN;
  }
  return VTRN__API__RESET_CAUSE__RESET_CAUSE_NONE;
}

// The status a client sees for a failure of `c`; the error text goes with
// it unchanged (the detail). Every code is listed, so a new one is a
// compile warning here until it is given its status.
inline Vtrn__Api__Status to_api(Code c) {
  switch (c) {
    case Code::kOk: return VTRN__API__STATUS__STATUS_OK;
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
    case Code::kNotFound:
    case Code::kDecode:
    case Code::kUnsupported: return VTRN__API__STATUS__STATUS_BAD_REQUEST;
    case Code::kNoSuchChip: return VTRN__API__STATUS__STATUS_UNKNOWN_CHIP;
    case Code::kNotReady: return VTRN__API__STATUS__STATUS_CHIP_NOT_READY;
    case Code::kTimeout: return VTRN__API__STATUS__STATUS_TIMEOUT;
    case Code::kChipError:
    case Code::kBadHardware: return VTRN__API__STATUS__STATUS_CHIP_ERROR;
    case Code::kStopping: return VTRN__API__STATUS__STATUS_SHUTTING_DOWN;
    case Code::kPermissionDenied: return VTRN__API__STATUS__STATUS_PERMISSION_DENIED;
    case Code::kBusy:
    case Code::kCapacity: return VTRN__API__STATUS__STATUS_BUSY;
    case Code::kNoSpace:
    case Code::kInternal:
    case Code::kBadTree:
    case Code::kMissingNode:
    case Code::kMissingProperty:
    case Code::kBadProperty:
    case Code::kTooMany:
    case Code::kDuplicate:
    case Code::kNotRunning:
    case Code::kClosed:
    case Code::kSystem:
    case Code::kUntrusted: return VTRN__API__STATUS__STATUS_INTERNAL;
  }
  return VTRN__API__STATUS__STATUS_INTERNAL;
}

inline Vtrn__Api__Status to_api(const Error& e) { return to_api(e.code()); }

}  // namespace drv
