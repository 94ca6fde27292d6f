// fw::panic: the one way the firmware stops on a fatal error.
//
// It fills a vtrn::hostif::PanicRecord (cause, exception syndrome, registers,
// a one-line reason), copies it into BAR2 and sets the header state to
// kStatePanic once the host interface is mapped, prints it on the UART once
// the console is up, then parks the core in WFI forever with interrupts off
// at the GIC CPU interface (so a pending edge-triggered MSI cannot turn the
// park into a spin). Before BAR2 or the UART exist the record still lands in
// fw::g_panic_record, where gdb can read it.
//
// Any core may panic. The first one wins (an atomic exchange) and writes
// the record with its core number; it then stops every other core with an
// SGI (fw::smp::stop_others), so a chip in panic runs no code. A second
// panic, on the same or another core, just parks.
#pragma once

#include <stdint.h>

#include "vtrn/hostif.h"

namespace fw {

struct ExceptionFrame;

[[noreturn]] void panic(uint32_t cause, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
// From the exception vectors: the frame supplies ESR, ELR, FAR, SPSR, SP and
// x0-x30.
[[noreturn]] void panic_exception(const ExceptionFrame& frame, uint32_t cause,
                                  const char* reason);

// Parks the calling core the way a panic does (IRQs off, timer and GIC CPU
// interface quiet, WFI forever) without writing a record: how the other
// cores stop when one of them panics (fw::smp's stop SGI).
[[noreturn]] void panic_park_this_core();
// True once any core has entered panic.
bool panic_in_progress();

// Where the record and the state word go once BAR2 is mapped.
void panic_attach(vtrn::hostif::FwHeader* header, vtrn::hostif::PanicRecord* record);
// Lets the panic path silence the GIC CPU interface (0 = not yet known).
void panic_set_gicc(uintptr_t gicc_base);

extern vtrn::hostif::PanicRecord g_panic_record;

// Invariant check that stays on in release builds.
#define FW_CHECK(cond, ...)                                          \
  do {                                                               \
    if (!(cond)) ::fw::panic(::vtrn::hostif::kPanicAssert, __VA_ARGS__); \
  } while (0)

}  // namespace fw
