// D0/D3hot state machine with autosuspend (see vtrn/device_pm.h).
#include "vtrn/device_pm.h"

namespace vtrn::power {

const char* device_state_name(DeviceState s) {
  switch (s) {
    case DeviceState::kD0: return "D0";
    case DeviceState::kQuiescing: return "quiescing";
    case DeviceState::kD3hot: return "D3hot";
    case DeviceState::kResuming: return "resuming";
  }
  return "?";
}

void DeviceStateMachine::init(DeviceHooks* hooks, uint32_t autosuspend_delay_ms, uint64_t now_ns) {
  *this = DeviceStateMachine{};
  hooks_ = hooks;
  delay_ms_ = autosuspend_delay_ms;
  last_busy_ns_ = now_ns;
  since_ns_ = now_ns;
  entries_[idx(DeviceState::kD0)] = 1;
}

void DeviceStateMachine::set_autosuspend_delay_ms(uint32_t ms, uint64_t now_ns) {
  delay_ms_ = ms;
  last_busy_ns_ = now_ns;
}

void DeviceStateMachine::enter(DeviceState s, uint64_t now_ns) {
  if (now_ns > since_ns_) residency_ns_[idx(state_)] += now_ns - since_ns_;
  since_ns_ = now_ns > since_ns_ ? now_ns : since_ns_;
  state_ = s;
  ++entries_[idx(s)];
}

uint64_t DeviceStateMachine::residency_ns(DeviceState s, uint64_t now_ns) const {
  uint64_t r = residency_ns_[idx(s)];
  if (s == state_ && now_ns > since_ns_) r += now_ns - since_ns_;
  return r;
}

void DeviceStateMachine::begin_suspend(SuspendCause cause, uint64_t now_ns) {
  cause_ = cause;
  if (cause == SuspendCause::kAutosuspend) ++autosuspends_;
  enter(DeviceState::kQuiescing, now_ns);
  // The state is already Quiescing, so a hook that completes synchronously
  // through quiesce_done() finds the machine where it expects it.
  if (hooks_ != nullptr) hooks_->start_quiesce();
}

void DeviceStateMachine::begin_resume(uint64_t now_ns) {
  enter(DeviceState::kResuming, now_ns);
  if (hooks_ != nullptr) hooks_->start_resume();
}

Status DeviceStateMachine::request_d3hot(uint64_t now_ns) {
  switch (state_) {
    case DeviceState::kD0:
      begin_suspend(SuspendCause::kHostRequest, now_ns);
      break;
    case DeviceState::kQuiescing:
    case DeviceState::kD3hot:
      // Already going down or down: the host now owns the wake-up.
      cause_ = SuspendCause::kHostRequest;
      pending_resume_ = false;
      break;
    case DeviceState::kResuming:
      pending_suspend_ = true;
      break;
  }
  return Status::kOk;
}

Status DeviceStateMachine::request_d0(uint64_t now_ns) {
  switch (state_) {
    case DeviceState::kD0:
      break;
    case DeviceState::kQuiescing:
      pending_resume_ = true;
      break;
    case DeviceState::kD3hot:
      begin_resume(now_ns);
      break;
    case DeviceState::kResuming:
      pending_suspend_ = false;
      break;
  }
  return Status::kOk;
}

void DeviceStateMachine::get(uint64_t now_ns) {
  ++usage_;
  last_busy_ns_ = now_ns;
  if (cause_ == SuspendCause::kHostRequest) return;
  if (state_ == DeviceState::kD3hot) {
    begin_resume(now_ns);
  } else if (state_ == DeviceState::kQuiescing) {
    pending_resume_ = true;
  }
}

void DeviceStateMachine::put(uint64_t now_ns) {
  if (usage_ > 0) --usage_;
  last_busy_ns_ = now_ns;
}

void DeviceStateMachine::tick(uint64_t now_ns) {
  if (state_ != DeviceState::kD0 || delay_ms_ == 0 || usage_ != 0) return;
  if (now_ns < last_busy_ns_) return;
  if (now_ns - last_busy_ns_ >= static_cast<uint64_t>(delay_ms_) * 1000000) {
    begin_suspend(SuspendCause::kAutosuspend, now_ns);
  }
}

Status DeviceStateMachine::quiesce_done(uint64_t now_ns, bool ok) {
  if (state_ != DeviceState::kQuiescing) return Status::kBadState;
  if (!ok) {
    ++failed_suspends_;
    cause_ = SuspendCause::kNone;
    pending_resume_ = false;
    last_busy_ns_ = now_ns;
    enter(DeviceState::kD0, now_ns);
    return Status::kOk;
  }
  enter(DeviceState::kD3hot, now_ns);
  if (pending_resume_) {
    pending_resume_ = false;
    begin_resume(now_ns);
  }
  return Status::kOk;
}

Status DeviceStateMachine::resume_done(uint64_t now_ns) {
  if (state_ != DeviceState::kResuming) return Status::kBadState;
  cause_ = SuspendCause::kNone;
  last_busy_ns_ = now_ns;
  enter(DeviceState::kD0, now_ns);
  if (pending_suspend_) {
    pending_suspend_ = false;
    begin_suspend(SuspendCause::kHostRequest, now_ns);
  }
  return Status::kOk;
}

}  // namespace vtrn::power
