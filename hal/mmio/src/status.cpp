// Names for hal::Status values, for log lines and panic reasons. A switch
// with no default so the compiler flags a value added without a name.
#include "hal/status.h"

namespace hal {

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kInvalidArgument: return "invalid-argument";
    case Status::kTimeout: return "timeout";
    case Status::kOutOfRange: return "out-of-range";
    case Status::kNotFound: return "not-found";
    case Status::kNoSpace: return "no-space";
    case Status::kCapacity: return "capacity";
    case Status::kBadHardware: return "bad-hardware";
    case Status::kNotReady: return "not-ready";
  }
  return "unknown";
}

}  // namespace hal
