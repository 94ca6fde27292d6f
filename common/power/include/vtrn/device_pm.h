// Device power-state machine of one chip: D0 <-> D3hot with the two
// transitional states in between, host requests, and runtime autosuspend.
//
//   D0 --(host D3 request | idle >= autosuspend delay)--> Quiescing
//   Quiescing --quiesce_done(ok)--> D3hot     Quiescing --quiesce_done(fail)--> D0
//   D3hot --(host D0 request | get() after an autosuspend)--> Resuming
//   Resuming --resume_done--> D0
//
// It decides; the firmware acts. Entering Quiescing calls
// DeviceHooks::start_quiesce(): the firmware stops taking new work, lets DMA
// and jobs reach a safe point (queued work is kept, not failed), saves what
// D3hot loses, gates clocks, then calls quiesce_done(). Entering Resuming
// calls start_resume(): ungate, restore, then resume_done(). The hooks must
// not block; they may call *_done() before returning. All calls come from
// one context (the firmware's power service); nothing here is thread-safe.
//
// Usage counting as in Linux runtime PM: get() when a request or job
// starts, put() when it ends. Autosuspend needs usage 0 for the whole delay.
// A get() after an autosuspend resumes the device transparently (the work
// waits for D0); after a host D3 request it does not: the host asked for
// D3hot and the work waits until the host requests D0. Requests that arrive
// during a transition are remembered and run when it completes.
#pragma once

#include <stdint.h>

#include "vtrn/power_config.h"

namespace vtrn::power {

enum class DeviceState : uint32_t {
  kD0 = 0,
  kQuiescing = 1,
  kD3hot = 2,
  kResuming = 3,
};
inline constexpr uint32_t kDeviceStateCount = 4;
const char* device_state_name(DeviceState s);

enum class SuspendCause : uint32_t {
  kNone = 0,
  kHostRequest = 1,
  kAutosuspend = 2,
};

class DeviceHooks {
 public:
  virtual void start_quiesce() = 0;
  virtual void start_resume() = 0;

 protected:
  ~DeviceHooks() = default;
};

class DeviceStateMachine {
 public:
  void init(DeviceHooks* hooks, uint32_t autosuspend_delay_ms, uint64_t now_ns);
  // 0 disables autosuspend. Re-arms the idle timer from now.
  void set_autosuspend_delay_ms(uint32_t ms, uint64_t now_ns);

  // Host requests.
  Status request_d3hot(uint64_t now_ns);
  Status request_d0(uint64_t now_ns);
  // Work accounting.
  void get(uint64_t now_ns);
  void put(uint64_t now_ns);
  // Autosuspend check; call periodically.
  void tick(uint64_t now_ns);
  // Firmware completions. kBadState when not in the matching state.
  Status quiesce_done(uint64_t now_ns, bool ok);
  Status resume_done(uint64_t now_ns);

  [[nodiscard]] DeviceState state() const { return state_; }
  [[nodiscard]] SuspendCause suspend_cause() const { return cause_; }
  [[nodiscard]] uint32_t usage() const { return usage_; }
  [[nodiscard]] uint32_t autosuspend_delay_ms() const { return delay_ms_; }
  [[nodiscard]] uint64_t residency_ns(DeviceState s, uint64_t now_ns) const;
  [[nodiscard]] uint32_t entries(DeviceState s) const { return entries_[idx(s)]; }
  [[nodiscard]] uint32_t autosuspends() const { return autosuspends_; }
  [[nodiscard]] uint32_t failed_suspends() const { return failed_suspends_; }

 private:
  static uint32_t idx(DeviceState s) { return static_cast<uint32_t>(s); }
  void enter(DeviceState s, uint64_t now_ns);
  void begin_suspend(SuspendCause cause, uint64_t now_ns);
  void begin_resume(uint64_t now_ns);

  DeviceHooks* hooks_ = nullptr;
  DeviceState state_ = DeviceState::kD0;
  SuspendCause cause_ = SuspendCause::kNone;
  uint32_t delay_ms_ = 0;
  uint32_t usage_ = 0;
  uint64_t last_busy_ns_ = 0;
  uint64_t since_ns_ = 0;
  bool pending_resume_ = false;
  bool pending_suspend_ = false;
  uint64_t residency_ns_[kDeviceStateCount] = {};
  uint32_t entries_[kDeviceStateCount] = {};
  uint32_t autosuspends_ = 0;
  uint32_t failed_suspends_ = 0;
};

}  // namespace vtrn::power
