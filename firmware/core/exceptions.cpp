// C side of the exception vectors: IRQ dispatch through the GIC, and the
// panic path for everything else. Only "current EL with SP_EL0" IRQs are
// expected (the firmware runs in EL1t and never drops to EL0, and handlers
// run with IRQs masked); any other vector, FIQ included, means the core is
// in a state this firmware never creates, which is a panic with the
// vector's name as the reason. A fault whose address is a stack guard page
// is reported as the stack overflow it is.
//
// Every core takes its IRQs here (the GIC CPU interface is banked, so
// acknowledge/EOI act on the caller's interface); the handler table is
// written by core 0 before any secondary starts and only read afterwards,
// and the counters are atomics.
#include "fw/exceptions.h"

#include "fw/panic.h"
#include "fw/smp.h"
#include "hal/gic.h"

namespace fw {
namespace {

struct Binding {
  uint32_t intid;
  IrqHandler fn;
  void* ctx;
};

hal::gic::Gic* g_gic = nullptr;
Binding g_bindings[irq::kMaxHandlers];
uint32_t g_binding_count = 0;
uint64_t g_irq_count = 0;
uint64_t g_unhandled = 0;

const char* const kVectorNames[16] = {
    "sync exception",   "IRQ",             "FIQ",             "SError",
    "sync exception in a handler", "IRQ in a handler", "FIQ in a handler", "SError in a handler",
    "sync from EL0",    "IRQ from EL0",    "FIQ from EL0",    "SError from EL0",
    "sync from AArch32", "IRQ from AArch32", "FIQ from AArch32", "SError from AArch32",
};

void dispatch_irqs() {
  if (!g_gic) panic(vtrn::hostif::kPanicPlatform, "IRQ taken before the GIC was initialised");
  // Drain everything pending: one exception entry can serve several IRQs.
  for (;;) {
    const hal::gic::Irq irq = g_gic->acknowledge();
    if (irq.spurious) return;
    __atomic_fetch_add(&g_irq_count, 1, __ATOMIC_RELAXED);
    bool handled = false;
    for (uint32_t i = 0; i < g_binding_count; ++i) {
      if (g_bindings[i].intid == irq.intid) {
        g_bindings[i].fn(irq.intid, g_bindings[i].ctx);
        handled = true;
        break;
      }
    }
    // An interrupt nobody registered is disabled so it cannot storm; the
    // count shows up in telemetry through irq::count().
    if (!handled) {
      __atomic_fetch_add(&g_unhandled, 1, __ATOMIC_RELAXED);
      (void)g_gic->disable(irq.intid);
    }
    (void)g_gic->end_of_interrupt(irq);
  }
}
}  // namespace

namespace irq {
void attach_gic(hal::gic::Gic* gic) { g_gic = gic; }

void register_handler(uint32_t intid, IrqHandler fn, void* ctx) {
  if (g_binding_count == kMaxHandlers) {
    panic(vtrn::hostif::kPanicPlatform, "irq: no handler slot left for INTID %u", unsigned(intid));
  }
  g_bindings[g_binding_count++] = Binding{intid, fn, ctx};
}

uint64_t count() { return __atomic_load_n(&g_irq_count, __ATOMIC_RELAXED); }
}  // namespace irq

}  // namespace fw

extern "C" char __boot_stack_guard[];       // boot/firmware.ld
extern "C" char __exception_stack_guard[];

extern "C" void fw_exception(fw::ExceptionFrame* frame, uint32_t kind) {
  if (kind == fw::kVecSp0Irq) {
    fw::dispatch_irqs();
    return;
  }
  const uint64_t far = frame->far;
  auto in_guard = [far](const char* guard) {
    const uint64_t g = reinterpret_cast<uintptr_t>(guard);
    return far >= g && far - g < 4096;
  };
  const char* reason = kind < 16 ? fw::kVectorNames[kind] : "bad vector";
  const uint32_t ec = uint32_t(frame->esr >> 26) & 0x3f;
  const bool data_abort = ec == 0x24 || ec == 0x25;
  if (data_abort && in_guard(__boot_stack_guard)) reason = "boot stack overflow";
  if (data_abort && in_guard(__exception_stack_guard)) reason = "exception stack overflow";
  if (data_abort) {
    for (uint32_t core = 1; core < fw::smp::kMaxCores; ++core) {
      const fw::smp::CoreStacks st = fw::smp::stacks_of(core);
      if (in_guard(reinterpret_cast<const char*>(uintptr_t(st.guard)))) {
        reason = "secondary core stack overflow";
      }
      if (in_guard(reinterpret_cast<const char*>(uintptr_t(st.exception_guard)))) {
        reason = "secondary core exception stack overflow";
      }
    }
  }
  const uint32_t cause = vtrn::hostif::kPanicException;
  fw::panic_exception(*frame, cause, reason);
}
