// Host fake backend of the generic-timer sysreg functions: the registers are
// the variables of hal::timer::fake::State. ISTATUS is computed the way the
// architecture defines it (enabled and CNTVCT >= CVAL), so a test moves time
// by setting cntvct and the driver observes the timer firing.
#include "hal/fake_timer.h"
#include "hal/timer.h"

namespace hal::timer::fake {

State& state() {
  static State s;
  return s;
}

void reset() { state() = State{}; }

}  // namespace hal::timer::fake

namespace hal::timer::sysreg {

using fake::state;

uint64_t read_cntfrq() { return state().cntfrq; }

uint64_t read_cntvct() {
  uint64_t v = state().cntvct;
  state().cntvct += state().vct_step;
  return v;
}

uint32_t read_cntv_ctl() {
  uint32_t ctl = state().cntv_ctl & (kCtlEnable | kCtlImask);
  if ((ctl & kCtlEnable) && state().cntvct >= state().cntv_cval)
    ctl |= kCtlIstatus;
  return ctl;
}

void write_cntv_ctl(uint32_t value) {
  state().cntv_ctl = value & (kCtlEnable | kCtlImask);
  ++state().ctl_writes;
  state().cval_before_ctl = state().cval_writes > 0;
}

uint64_t read_cntv_cval() { return state().cntv_cval; }

void write_cntv_cval(uint64_t value) {
  state().cntv_cval = value;
  ++state().cval_writes;
  state().cval_before_ctl = false;
}

}  // namespace hal::timer::sysreg
