// pace() and device_active(): the two cross-core entry points of the power
// service (fw/power_service.h), and the word they read.
//
// The clock word packs the current and the maximum NeuronCore frequency in
// MHz; the boot core's power service publishes it with a release store after
// every governor step, executors on any core read it with an acquire load.
// Zero means "not initialized": no pacing, the device counts as active.
//
// The sleep is the quirk: a secondary core may or may not have its banked
// GIC CPU interface and timer PPI set up (the jobs service brings cores
// up). WFI only returns on an interrupt the GIC forwards, so pace() checks
// the PPI's banked enable bit from the calling core and sleeps in WFI on its
// own virtual timer only then; otherwise it waits in WFE (which QEMU 7.2
// treats as a yield of the vCPU, not a spin on the counter). The core's
// timer registers are saved and restored around the wait, so an executor's
// own tick deadline survives (it fires as soon as IRQs are unmasked again).
#include <stdint.h>

#include "fw/arch.h"
#include "fw/power_service.h"
#include "fw/power_shared.h"
#include "hal/gic.h"
#include "hal/timer.h"

namespace fw::power {
namespace {

uint64_t g_clock_word = 0;     // freq_mhz | max_mhz << 32
uint32_t g_active = 1;         // device_active()
const hal::gic::Gic* g_gic = nullptr;
uint32_t g_timer_intid = 0;
uint64_t g_paced_ns[vtrn::power::kMaxCores] = {};  // per core, single writer: that core

// While the device is not clocked (D3hot, resuming) a chunk that was already
// under way waits in slices of this length for D0.
constexpr uint64_t kGatedSliceNs = 1000000;

void sleep_until(uint64_t deadline_ticks) {
  const bool use_timer = g_gic != nullptr && g_gic->is_enabled(g_timer_intid);
  const uint64_t daif = arch::irq_save();
  const uint32_t saved_ctl = hal::timer::sysreg::read_cntv_ctl();
  const uint64_t saved_cval = hal::timer::sysreg::read_cntv_cval();
  if (use_timer) {
    hal::timer::sysreg::write_cntv_cval(deadline_ticks);
    hal::timer::sysreg::write_cntv_ctl(hal::timer::kCtlEnable);
  }
  while (arch::now_ticks() < deadline_ticks) {
    if (use_timer) {
      // Masked IRQs still end WFI; the timer line stays asserted until CTL
      // changes, so the loop re-checks the counter and leaves.
      arch::wait_for_interrupt();
    } else {
      asm volatile("wfe" ::: "memory");
    }
  }
  hal::timer::sysreg::write_cntv_cval(saved_cval);
  hal::timer::sysreg::write_cntv_ctl(saved_ctl);
  arch::irq_restore(daif);
}

}  // namespace

void publish_clock(uint32_t frequency_mhz, uint32_t max_frequency_mhz) {
  __atomic_store_n(&g_clock_word, uint64_t{frequency_mhz} | uint64_t{max_frequency_mhz} << 32,
                   __ATOMIC_RELEASE);
}

void publish_active(bool active) { __atomic_store_n(&g_active, active ? 1u : 0u, __ATOMIC_RELEASE); }

void attach_wakeup(const hal::gic::Gic* gic, uint32_t timer_intid) {
  g_timer_intid = timer_intid;
  g_gic = gic;
}

uint64_t paced_ns(uint32_t core) {
  return core < vtrn::power::kMaxCores ? __atomic_load_n(&g_paced_ns[core], __ATOMIC_RELAXED) : 0;
}

bool device_active() { return __atomic_load_n(&g_active, __ATOMIC_ACQUIRE) != 0; }

void pace(uint32_t core, uint64_t busy_ns) {
  const uint64_t t_call = arch::now_ticks();
  uint64_t w = __atomic_load_n(&g_clock_word, __ATOMIC_ACQUIRE);
  // Not clocked: the chunk is over but the next one may not start until the
  // device is back in D0 (the chip is gated, not the core's own choice).
  while (w != 0 && uint32_t(w) == 0) {
    sleep_until(arch::now_ticks() + hal::timer::ns_to_ticks(kGatedSliceNs, arch::counter_hz()));
    w = __atomic_load_n(&g_clock_word, __ATOMIC_ACQUIRE);
  }
  const uint64_t delay = delay_for(busy_ns, uint32_t(w), uint32_t(w >> 32));
  if (delay != 0) {
    sleep_until(arch::now_ticks() + hal::timer::ns_to_ticks(delay, arch::counter_hz()));
  }
  if (core < vtrn::power::kMaxCores) {
    const uint64_t spent = arch::ticks_to_ns(arch::now_ticks() - t_call);
    __atomic_store_n(&g_paced_ns[core], g_paced_ns[core] + spent, __ATOMIC_RELAXED);
  }
}

}  // namespace fw::power
