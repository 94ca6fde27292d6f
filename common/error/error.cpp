// vtrn::Error (vtrn/error.h): formatting and the code names. Portable: only
// vsnprintf and memmove, so it links into the bare-metal image unchanged.
#include "vtrn/error.h"

#include <stdio.h>
#include <string.h>

namespace vtrn {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kTimeout: return "timeout";
    case Code::kOutOfRange: return "out_of_range";
    case Code::kNotFound: return "not_found";
    case Code::kNoSpace: return "no_space";
    case Code::kCapacity: return "capacity";
    case Code::kBadHardware: return "bad_hardware";
    case Code::kNotReady: return "not_ready";
    case Code::kUnsupported: return "unsupported";
    case Code::kBusy: return "busy";
    case Code::kDecode: return "decode";
    case Code::kInternal: return "internal";
    case Code::kBadTree: return "bad_tree";
    case Code::kMissingNode: return "missing_node";
    case Code::kMissingProperty: return "missing_property";
    case Code::kBadProperty: return "bad_property";
    case Code::kTooMany: return "too_many";
    case Code::kDuplicate: return "duplicate";
    case Code::kNoSuchChip: return "no_such_chip";
    case Code::kNotRunning: return "not_running";
    case Code::kClosed: return "closed";
    case Code::kSystem: return "system";
    case Code::kUntrusted: return "untrusted";
    case Code::kChipError: return "chip_error";
    case Code::kStopping: return "stopping";
    case Code::kPermissionDenied: return "permission_denied";
  }
  return "unknown";
}

Error::Error(Code code, const char* fmt, ...) : code_(code) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail_, sizeof detail_, fmt, ap);
  va_end(ap);
}

Error Error::vformat(Code code, const char* fmt, va_list ap) {
  Error e;
  e.code_ = code;
  vsnprintf(e.detail_, sizeof e.detail_, fmt, ap);
  return e;
}

Error& Error::prefix(const char* fmt, ...) {
  if (ok()) return *this;
  char head[kDetailCap];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  if (n <= 0) return *this;
  const size_t h = size_t(n) < sizeof head ? size_t(n) : sizeof head - 1;
  const size_t d = strlen(detail_);
  const size_t keep = d < kDetailCap - 1 - h ? d : kDetailCap - 1 - h;
  memmove(detail_ + h, detail_, keep);
  memcpy(detail_, head, h);
  detail_[h + keep] = '\0';
  return *this;
}

}  // namespace vtrn
