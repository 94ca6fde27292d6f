// fw::panic and the exception-record path. See fw/panic.h.
//
// The record is built in firmware RAM first, then copied to BAR2 in one go;
// the host only reads it after it sees state == kStatePanic, which is
// stored last, with release semantics.
// A panic inside a panic (a fault while formatting, say) skips straight to
// the park loop: the first record is the one that matters.
#include "fw/panic.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/console.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "fw/smp.h"
#include "hal/gic.h"
#include "hal/mmio.h"
#include "hal/timer.h"

namespace fw {

vtrn::hostif::PanicRecord g_panic_record;

namespace {
vtrn::hostif::FwHeader* g_header = nullptr;
vtrn::hostif::PanicRecord* g_bar2_record = nullptr;
uintptr_t g_gicc = 0;
uint32_t g_in_panic = 0;  // atomic: the first core to set it writes the record

const char* ec_name(uint32_t ec) {
  switch (ec) {
    case 0x00: return "unknown reason";
    case 0x01: return "WFI/WFE trap";
    case 0x07: return "FP/SIMD access trap";
    case 0x0e: return "illegal execution state";
    case 0x15: return "SVC";
    case 0x16: return "HVC";
    case 0x18: return "system register trap";
    case 0x20: return "instruction abort, lower EL";
    case 0x21: return "instruction abort, same EL";
    case 0x22: return "PC alignment fault";
    case 0x24: return "data abort, lower EL";
    case 0x25: return "data abort, same EL";
    case 0x26: return "SP alignment fault";
    case 0x2c: return "FP exception";
    case 0x2f: return "SError";
    case 0x3c: return "BRK";
    default: return "other";
  }
}

void print_record(const vtrn::hostif::PanicRecord& r) {
  if (!console::ready()) return;
  char line[256];
  snprintf(line, sizeof line, "\n*** PANIC (%s) cpu %u at %llu ns: %s\n",
           vtrn::hostif::panic_cause_name(r.cause), unsigned(r.cpu), (unsigned long long)r.uptime_ns, r.reason);
  console::puts(line);
  if (r.cause == vtrn::hostif::kPanicException) {
    snprintf(line, sizeof line,
             "  EC 0x%02x (%s) ESR 0x%016llx ELR 0x%016llx FAR 0x%016llx\n"
             "  SPSR 0x%016llx SP 0x%016llx\n",
             unsigned(r.ec), ec_name(r.ec), (unsigned long long)r.esr,
             (unsigned long long)r.elr, (unsigned long long)r.far, (unsigned long long)r.spsr,
             (unsigned long long)r.sp);
    console::puts(line);
    for (int i = 0; i < 31; i += 3) {
      int n = 0;
      for (int j = i; j < i + 3 && j < 31; ++j) {
        n += snprintf(line + n, sizeof line - size_t(n), "  x%-2d 0x%016llx", j,
                      (unsigned long long)r.x[j]);
      }
      snprintf(line + n, sizeof line - size_t(n), "\n");
      console::puts(line);
    }
  }
  console::puts("*** firmware stopped\n");
}

[[noreturn]] void park() {
  asm volatile("msr daifset, #0xf" ::: "memory");
  // Stop the periodic timer and the GIC CPU interface: a pending
  // edge-triggered MSI would otherwise wake WFI forever and spin the core.
  hal::timer::sysreg::write_cntv_ctl(hal::timer::kCtlImask);
  if (g_gicc) {
    hal::mmio::write32(&hal::mmio::block_at<hal::gic::GiccRegs>(g_gicc)->CTLR, 0);
  }
  for (;;) arch::wait_for_interrupt();
}

[[noreturn]] void finish(vtrn::hostif::PanicRecord& r) {
  r.magic = vtrn::hostif::kPanicMagic;
  r.cpu = arch::current_cpu();
  r.uptime_ns = arch::now_ns();
  if (g_bar2_record && g_header) {
    logging::panic_line(r.reason);
    memcpy(g_bar2_record, &r, sizeof r);
    // Release: the record is complete before the host can see kStatePanic.
    __atomic_store_n(&g_header->state, uint32_t(vtrn::hostif::kStatePanic), __ATOMIC_RELEASE);
  }
  print_record(r);
  park();
}

bool enter() {
  asm volatile("msr daifset, #0xf" ::: "memory");
  if (__atomic_exchange_n(&g_in_panic, 1u, __ATOMIC_ACQ_REL) != 0) return false;
  smp::stop_others();
  return true;
}
}  // namespace

void panic_park_this_core() { park(); }

bool panic_in_progress() { return __atomic_load_n(&g_in_panic, __ATOMIC_ACQUIRE) != 0; }

void panic_attach(vtrn::hostif::FwHeader* header, vtrn::hostif::PanicRecord* record) {
  g_header = header;
  g_bar2_record = record;
}

void panic_set_gicc(uintptr_t gicc_base) { g_gicc = gicc_base; }

void panic(uint32_t cause, const char* fmt, ...) {
  if (!enter()) park();
  vtrn::hostif::PanicRecord& r = g_panic_record;
  memset(&r, 0, sizeof r);
  r.cause = cause;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r.reason, sizeof r.reason, fmt, ap);
  va_end(ap);
  uint64_t sp;
  asm volatile("mov %0, sp" : "=r"(sp));
  r.sp = sp;
  r.elr = uint64_t(uintptr_t(__builtin_return_address(0)));
  finish(r);
}

void panic_exception(const ExceptionFrame& f, uint32_t cause, const char* reason) {
  if (!enter()) park();
  vtrn::hostif::PanicRecord& r = g_panic_record;
  memset(&r, 0, sizeof r);
  r.cause = cause;
  r.esr = f.esr;
  r.ec = uint32_t(f.esr >> 26) & 0x3f;
  r.elr = f.elr;
  r.far = f.far;
  r.spsr = f.spsr;
  r.sp = f.sp;
  memcpy(r.x, f.x, sizeof r.x);
  snprintf(r.reason, sizeof r.reason, "%s: %s at 0x%llx", reason, ec_name(r.ec),
           (unsigned long long)f.elr);
  finish(r);
}

}  // namespace fw
