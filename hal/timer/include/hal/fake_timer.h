// hal::timer::fake: the fake backend of the generic-timer sysreg functions,
// for host tests. The "registers" are plain variables; a test sets the
// frequency and counter, runs the driver, and reads back CTL and CVAL.
// ISTATUS is derived like the hardware does it (enabled and CVAL <= CNTVCT).
// Host only; reset() in every test's setup.
#pragma once

#include <stdint.h>

namespace hal::timer::fake {

struct State {
  uint64_t cntfrq = 62500000;
  uint64_t cntvct = 0;
  uint64_t cntv_cval = 0;
  uint32_t cntv_ctl = 0;       // ENABLE and IMASK as last written
  uint64_t vct_step = 0;       // added to cntvct after each read (time passing)
  uint32_t ctl_writes = 0;     // number of CTL writes
  uint32_t cval_writes = 0;    // number of CVAL writes
  bool cval_before_ctl = false;  // last CTL write came after a CVAL write
};

State& state();
void reset();

}  // namespace hal::timer::fake
