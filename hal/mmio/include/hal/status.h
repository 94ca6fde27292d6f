// hal::Status: the closed error enum every HAL driver returns.
//
// This is not an exception type or an errno: each value has one documented
// meaning and drivers never invent others, so a caller can switch on it and a
// panic message can name it (status_name). Asserts are kept for invariants;
// statuses are for things the hardware, the board description or the caller
// can actually get wrong.
//
// It is the HAL's subset of vtrn::Code (common/error), number for number
// (static_asserts below): a register-level driver has no text to add, so it
// returns the bare code and the caller that knows the context makes the
// vtrn::Error (to_code). hal/README.md says why the HAL keeps its own enum.
#pragma once

#include <stdint.h>

#include "vtrn/error.h"

namespace hal {

enum class [[nodiscard]] Status : uint32_t {
  kOk = 0,
  // A caller-supplied parameter is outside its documented range (zero clock,
  // null base, misaligned window, SGI passed where an SPI is required...).
  kInvalidArgument = 1,
  // A bounded wait on a hardware flag ran out (PL011 TXFF/BUSY).
  kTimeout = 2,
  // An index is valid in type but not on this hardware: INTID beyond
  // GICD_TYPER, MSI vector beyond MSI_TYPER, MSI-X vector beyond the table.
  kOutOfRange = 3,
  // Something the caller asked for is absent: a PCI capability, a device,
  // a BAR the function does not implement.
  kNotFound = 4,
  // A PCI address window has no room left for a BAR of the required size
  // and alignment.
  kNoSpace = 5,
  // A fixed-capacity result container is full (more PCI functions than the
  // Topology can hold).
  kCapacity = 6,
  // The hardware returned a value the driver cannot use: TYPER with zero
  // SPIs, a BAR whose size mask is not a power of two, a capability list
  // that loops, a zero CNTFRQ.
  kBadHardware = 7,
  // The driver object was used before a successful init().
  kNotReady = 8,
};

// A short stable name for logs and panic reasons ("no-space", "timeout"...).
const char* status_name(Status s);

inline bool ok(Status s) { return s == Status::kOk; }

// The same failure as a vtrn::Code (same number).
constexpr vtrn::Code to_code(Status s) { return vtrn::Code(uint32_t(s)); }

static_assert(uint32_t(Status::kOk) == uint32_t(vtrn::Code::kOk));
static_assert(uint32_t(Status::kInvalidArgument) == uint32_t(vtrn::Code::kInvalidArgument));
static_assert(uint32_t(Status::kTimeout) == uint32_t(vtrn::Code::kTimeout));
static_assert(uint32_t(Status::kOutOfRange) == uint32_t(vtrn::Code::kOutOfRange));
static_assert(uint32_t(Status::kNotFound) == uint32_t(vtrn::Code::kNotFound));
static_assert(uint32_t(Status::kNoSpace) == uint32_t(vtrn::Code::kNoSpace));
static_assert(uint32_t(Status::kCapacity) == uint32_t(vtrn::Code::kCapacity));
static_assert(uint32_t(Status::kBadHardware) == uint32_t(vtrn::Code::kBadHardware));
static_assert(uint32_t(Status::kNotReady) == uint32_t(vtrn::Code::kNotReady));

}  // namespace hal

// Early return on error, Pigweed-TRY style: HAL_TRY(uart.init(cfg));
#define HAL_TRY(expr)                          \
  do {                                         \
    ::hal::Status hal_try_status_ = (expr);    \
    if (hal_try_status_ != ::hal::Status::kOk) \
      return hal_try_status_;                  \
  } while (0)
