// Where libvtrn's own enums meet vtrn.api's: the one mapping of drv::ChipState
// and drv::ResetCause to the protocol's ChipState and ResetCause, for the
// replies vtrnd builds. drv_api_enums checks it against the descriptors
// (every protocol value reached once, the names the CLI prints unchanged).
#pragma once

#include "vtrn/drv/chip_state.h"
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

}  // namespace drv
