// vtrn::Error: the one error type of the code that runs on the chip (the
// firmware and the portable common/ code built into it). A closed,
// numbered Code plus one line of detail text in a fixed buffer, so it can
// be returned by value from boot code, the board parser and control-request
// handlers alike without a heap.
//
// What it is not: a status for flow control (a full link window, a queue
// with nothing to do: those keep their own small enums), and not the HBM
// allocator's result list (vtrn::hbm::Error travels in HBM responses as its
// own numbers). HAL drivers return hal::Status, a subset of Code with the
// same numbers (hal/README.md). The host wraps an Error in drv::Error; the
// control dispatcher maps its Code to a vtrn.ctrl Status in one place
// (firmware/ctrl/ctrl_dispatch.cpp).
//
// The detail names what was wrong in the words a user needs
// ("/chips/chip@1: vtrn,neuron-cores: missing"); it never decides anything:
// callers switch on code().
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

namespace vtrn {

// Closed list. The numbers are stable: they appear in logs and tests, and
// 1..8 are hal::Status's numbers.
enum class Code : uint32_t {
  kOk = 0,
  // An argument or request field outside its documented range; the detail
  // names the field.
  kInvalidArgument = 1,
  // A bounded wait ran out.
  kTimeout = 2,
  // An index valid in type but not here (an INTID beyond the GIC, a port
  // the chip does not have).
  kOutOfRange = 3,
  // Something asked for does not exist (a PCI capability, a job id).
  kNotFound = 4,
  // An address window or region has no room left.
  kNoSpace = 5,
  // A fixed-capacity table or queue is full (retry once it drains).
  kCapacity = 6,
  // The hardware returned a value that cannot be used.
  kBadHardware = 7,
  // Used before a successful init, or the service is not up yet.
  kNotReady = 8,
  // A request kind this build does not serve.
  kUnsupported = 9,
  // Valid, but cannot be served now (something else holds it); retry.
  kBusy = 10,
  // Bytes that are not a valid message.
  kDecode = 11,
  // A fault in the code itself: an arena sized for the largest answer ran
  // out, a component refused what validation accepted.
  kInternal = 12,
  // The board DTB (common/board): not a flattened device tree, or
  // truncated or corrupt.
  kBadTree = 16,
  // A required node is absent.
  kMissingNode = 17,
  // A required property is absent.
  kMissingProperty = 18,
  // A property has the wrong length or type, or a value out of range.
  kBadProperty = 19,
  // More entries than the fixed capacity.
  kTooMany = 20,
  // Two nodes claim the same reg.
  kDuplicate = 21,
  // A chip id the board does not have.
  kNoSuchChip = 22,
  // 32 on: the host's (drv::Error, driver/lib); the firmware never returns them.
  // Nothing listens on vtrnd's socket.
  kNotRunning = 32,
  // The other end closed the connection.
  kClosed = 33,
  // A system call failed; the detail has its strerror.
  kSystem = 34,
  // The socket or directory at the runtime path is not one to trust: the
  // directory belongs to someone else or others can write it, or the
  // process serving the socket runs as another user.
  kUntrusted = 35,
  // The chip failed a control request: the firmware answered with an error
  // status, an answer that does not decode or is not the one asked for, or
  // a control ring broke its protocol.
  kChipError = 36,
  // The chip is being stopped; what was queued for it will not be served.
  kStopping = 37,
  // The caller may not act on what it named (another tenant's memory).
  kPermissionDenied = 38,
};

// "invalid_argument", "missing_property", ...; "unknown" outside the list.
const char* code_name(Code c);

class [[nodiscard]] Error {
 public:
  // Detail capacity, NUL included: one line of a log or a control response.
  static constexpr size_t kDetailCap = 160;

  // Success. Only the first detail byte is written: returning success
  // costs two stores, not a 160-byte clear.
  Error() { detail_[0] = '\0'; }
  // A failure with printf-style detail (truncated to kDetailCap - 1).
  Error(Code code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // The same from a va_list (for callers that format their own messages).
  static Error vformat(Code code, const char* fmt, va_list ap)
      __attribute__((format(printf, 2, 0)));

  [[nodiscard]] bool ok() const { return code_ == Code::kOk; }
  [[nodiscard]] Code code() const { return code_; }
  // Empty for success; never null.
  [[nodiscard]] const char* detail() const { return detail_; }

  // Puts `fmt` (printf-style) in front of the detail: the caller adds the
  // context it knows ("power: " + what the parser said). Does nothing to a
  // success.
  Error& prefix(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

 private:
  Code code_ = Code::kOk;
  char detail_[kDetailCap];
};

}  // namespace vtrn

// Early return of a failed Error, Pigweed-TRY style: VTRN_TRY(parse(x));
#define VTRN_TRY(expr)                       \
  do {                                       \
    ::vtrn::Error vtrn_try_error_ = (expr);  \
    if (!vtrn_try_error_.ok())               \
      return vtrn_try_error_;                \
  } while (0)
