// drv::TelemetryHistory: the last two distinct telemetry blocks a chip
// published, and the idle ratio between them. The firmware rewrites its
// block every telemetry period (or on demand); a reading with the same
// uptime as the last one is the same block and is not kept twice.
//
// What it is not: the reading of the block (Chip reads it under the
// seqlock) or the on-demand request; pure logic, unit tested alone.
#pragma once

#include "vtrn/hostif.h"

namespace drv {

class TelemetryHistory {
 public:
  using Telemetry = vtrn::hostif::Telemetry;

  // A block just read: kept when it is a new one.
  void add(const Telemetry& t) {
    if (t.uptime_ns == last_.uptime_ns) return;
    prev_ = last_;
    have_prev_ = last_.uptime_ns != 0;
    last_ = t;
  }
  // The chip rebooted: its counters start over.
  void clear() { *this = TelemetryHistory{}; }

  // Nothing kept yet.
  [[nodiscard]] bool empty() const { return last_.uptime_ns == 0 && last_.seq == 0; }
  [[nodiscard]] const Telemetry& last() const { return last_; }

  // The share of the time between the last two blocks the chip spent idle;
  // with only one block (or counters that went backwards, as after a
  // reset), the share since boot of `current`. Clamped to [0, 1].
  [[nodiscard]] double idle_ratio(const Telemetry& current) const {
    double r = 0;
    if (have_prev_ && last_.uptime_ns > prev_.uptime_ns && last_.idle_ns >= prev_.idle_ns) {
      r = double(last_.idle_ns - prev_.idle_ns) / double(last_.uptime_ns - prev_.uptime_ns);
    } else if (current.uptime_ns > 0) {
      r = double(current.idle_ns) / double(current.uptime_ns);
    }
    return r < 0 ? 0 : r > 1 ? 1 : r;
  }

 private:
  bool have_prev_ = false;
  Telemetry prev_{}, last_{};
};

}  // namespace drv
