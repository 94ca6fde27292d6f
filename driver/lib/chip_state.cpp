// drv::ChipState's names (see vtrn/drv/chip_state.h).
#include "vtrn/drv/chip_state.h"

namespace drv {

const char* chip_state_name(ChipState s) {
  switch (s) {
    case ChipState::kUnknown: return "UNKNOWN";
    case ChipState::kStarting: return "STARTING";
    case ChipState::kBooting: return "BOOTING";
    case ChipState::kReady: return "READY";
    case ChipState::kFailed: return "FAILED";
    case ChipState::kPanic: return "PANIC";
    case ChipState::kHalted: return "HALTED";
  }
  return "UNKNOWN";
}

}  // namespace drv
