// The register frame boot/vectors.S saves on every exception, and the IRQ
// dispatch table the firmware's drivers register with.
//
// Interrupt handlers run with IRQs masked, on the interrupted stack, and do
// as little as possible (count, re-arm, set a flag): the main loop does the
// work. That keeps every handler reentrancy-free without locks.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace hal::gic {
class Gic;
}

namespace fw {

struct ExceptionFrame {
  uint64_t x[31];
  uint64_t sp;  // SP at the moment of the exception
  uint64_t elr;
  uint64_t spsr;
  uint64_t esr;
  uint64_t far;
  uint64_t fpsr;
  uint64_t fpcr;
  uint64_t q[32][2];
};
// Offsets used by boot/vectors.S.
static_assert(offsetof(ExceptionFrame, sp) == 248);
static_assert(offsetof(ExceptionFrame, elr) == 256);
static_assert(offsetof(ExceptionFrame, esr) == 272);
static_assert(offsetof(ExceptionFrame, fpsr) == 288);
static_assert(offsetof(ExceptionFrame, q) == 304);
static_assert(sizeof(ExceptionFrame) == 816);

// Vector index as passed by vectors.S.
enum VectorKind : uint32_t {
  kVecSp0Sync = 0,  // fault in normal code
  kVecSp0Irq = 1,   // the only expected interrupt entry
  kVecSp0Fiq = 2,
  kVecSp0SError = 3,
  kVecSpxSync = 4,  // fault inside an exception handler
};

using IrqHandler = void (*)(uint32_t intid, void* ctx);

namespace irq {
inline constexpr uint32_t kMaxHandlers = 48;  // host interface 4 + engine function 17 + timer + SGIs
// The initialised GIC the IRQ vector acknowledges and completes through.
void attach_gic(hal::gic::Gic* gic);
// Binds `intid` to `fn`; panics (kPanicPlatform) when the table is full.
// Core 0 only, before secondary cores start (they read the table unlocked).
void register_handler(uint32_t intid, IrqHandler fn, void* ctx);
// Interrupts taken since boot on all cores (spurious acknowledgements excluded).
uint64_t count();
}  // namespace irq

}  // namespace fw

extern "C" void fw_exception(fw::ExceptionFrame* frame, uint32_t kind);
