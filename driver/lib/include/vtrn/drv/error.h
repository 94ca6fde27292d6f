// drv::Error and drv::Result<T>: the one error type of the host side
// (libvtrn, vtrnd, the vtrn CLI). A closed, numbered code, the same list as
// the firmware's vtrn::Code (common/error: the host adds its own codes from
// 32 on), plus one line of detail text of any length.
//
// What it is not: a status for flow control, and not text to decide on.
// Callers switch on code(); the detail is what a user reads ("vtrnd is not
// running (no socket at /run/...)"). The CLI maps the code to its exit
// status in one place (host-tools/vtrn/daemon.cpp).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "vtrn/error.h"

namespace drv {

using vtrn::Code;

class [[nodiscard]] Error {
 public:
  Error() = default;  // success
  Error(Code code, std::string detail) : code_(code), detail_(std::move(detail)) {}
  // The firmware-side error a portable common/ function returned.
  explicit Error(const vtrn::Error& e) : code_(e.code()), detail_(e.detail()) {}

  [[nodiscard]] bool ok() const { return code_ == Code::kOk; }
  [[nodiscard]] Code code() const { return code_; }
  // Empty for success.
  [[nodiscard]] const std::string& detail() const { return detail_; }

  // Puts context in front of a failure's detail; a success stays empty.
  Error& prefix(const std::string& context) {
    if (!ok()) detail_.insert(0, context);
    return *this;
  }

 private:
  Code code_ = Code::kOk;
  std::string detail_;
};

// A value or the Error that kept it from being made.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like a return value
  Result(Error error) : error_(std::move(error)) {
    if (error_.ok()) error_ = Error(Code::kInternal, "Result built from a success without a value");
  }

  [[nodiscard]] bool ok() const { return error_.ok(); }
  [[nodiscard]] const Error& error() const { return error_; }
  // Only when ok().
  [[nodiscard]] T& value() { return *value_; }
  [[nodiscard]] const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Error error_;
};

}  // namespace drv
