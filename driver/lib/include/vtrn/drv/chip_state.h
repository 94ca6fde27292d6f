// drv::ChipState and drv::ResetCause: libvtrn's own names for where a chip
// is in its life and why it was last reset. vtrnd maps them to vtrn.api's
// ChipState and ResetCause at its edge (driver/vtrnd/api_enums.h), where a
// test checks the mapping and the names against the protocol's descriptors;
// libvtrn itself never sees the API's numbering.
#pragma once

#include <stdint.h>

namespace drv {

enum class ChipState : uint8_t {
  kUnknown,
  kStarting,  // QEMU launching
  kBooting,   // firmware publishing its header
  kReady,
  kFailed,    // boot failed or QEMU died; see the chip's error
  kPanic,     // firmware panic record present
  kHalted,
};
inline constexpr uint32_t kChipStateCount = 7;

// "STARTING" ... "HALTED", as vtrn.api names them (the CLI prints those).
const char* chip_state_name(ChipState s);

enum class ResetCause : uint8_t {
  kNone,
  kManual,    // a client asked (vtrn reset)
  kWatchdog,  // the heartbeat stopped
  kPanic,     // the firmware panicked
  kQemuExit,  // the chip's QEMU died; a new one was launched
  kBroken,    // the chip broke the control-queue protocol
};
inline constexpr uint32_t kResetCauseCount = 6;

}  // namespace drv
