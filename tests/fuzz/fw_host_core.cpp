// The fake core under which the firmware's services run on the host for the
// control-request fuzzer (ctrl_decode.cpp): what firmware/core, power's
// cross-core pacing and fw::smp give the services on the chip, with no
// hardware. The clock is a counter that advances on every read, log lines
// are formatted (so a bad format argument is found) and dropped, a panic is
// a finding (the harness aborts with its reason), the MMU accepts every
// mapping, no secondary core ever comes online, and the device is always
// active at full speed.
//
// Not a model of the chip: nothing here is asserted on except that the
// services never panic and never ask for an invalid log level.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/power_shared.h"
#include "fw/power_service.h"
#include "fw/smp.h"

namespace fw {

vtrn::hostif::PanicRecord g_panic_record;

void panic(uint32_t cause, const char* fmt, ...) {
  char reason[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  fprintf(stderr, "firmware panic (cause %u): %s\n", unsigned(cause), reason);
  abort();
}

bool panic_in_progress() { return false; }
void panic_attach(vtrn::hostif::FwHeader*, vtrn::hostif::PanicRecord*) {}
void panic_set_gicc(uintptr_t) {}

void log(uint32_t, const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
}

namespace logging {
bool set_level(uint32_t max_level) {
  if (max_level > 7) {
    fprintf(stderr, "a service asked for log level %u\n", unsigned(max_level));
    abort();
  }
  return true;
}
}  // namespace logging

namespace arch {
namespace {
uint64_t g_ticks = 0;
}
uint64_t irq_save() { return 0; }
void irq_restore(uint64_t) {}
void irq_enable() {}
void irq_disable() {}
void wait_for_interrupt() {}
uint64_t counter_hz() { return 62'500'000; }
uint64_t now_ticks() { return g_ticks += 625; }
uint64_t ticks_to_ns(uint64_t ticks) { return ticks * 16; }
uint64_t now_ns() { return ticks_to_ns(now_ticks()); }
}  // namespace arch

namespace irq {
uint64_t count() { return 0; }
void register_handler(uint32_t, IrqHandler, void*) {}
}  // namespace irq

namespace mmu {
void map(uint64_t, uint64_t, Memory, const char*) {}
uint64_t g_remap_base = 0, g_remap_size = 0;
void reserve_remap(uint64_t base, uint64_t size) { g_remap_base = base, g_remap_size = size; }
uint64_t remap_base() { return g_remap_base; }
uint64_t remap_size() { return g_remap_size; }
bool remap(uint64_t, uint64_t, uint64_t) { return true; }
void unmap_remap(uint64_t, uint64_t) {}
}  // namespace mmu

namespace smp {
uint32_t start(const platform::Platform&, hal::gic::Gic*, uint32_t, Entry) { return 0; }
uint32_t collect_online(uint64_t) { return 1; }
bool all_reported() { return true; }
void wake(uint32_t) {}
}  // namespace smp

namespace power {
void publish_clock(uint32_t, uint32_t) {}
void publish_active(bool) {}
void attach_wakeup(const hal::gic::Gic*, uint32_t) {}
uint64_t paced_ns(uint32_t) { return 0; }
bool device_active() { return true; }
void pace(uint32_t, uint64_t) {}
}  // namespace power

}  // namespace fw
