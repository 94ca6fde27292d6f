// Fault injection on request of the host (see fw/reliability.h).
#include "fw/reliability.h"

#include "fw/arch.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/wire.h"

namespace fw::reliability {
namespace {

using vtrn::Code;
using vtrn::Error;

// Inside the 40-bit physical map but outside everything mmu::map() covers
// (RAM is at 1 GiB, the high ECAM at 256 GiB, the 64-bit PCIe window at
// 512 GiB): a translation fault, not a device access.
constexpr uintptr_t kUnmappedAddress = 0x7f'dead'0000ull;

const Route kRoutes[] = {
    route<&ReliabilityService::inject>(VTRN__CTRL__REQUEST__BODY_RELIABILITY_INJECT,
                                       VTRN__CTRL__RESPONSE__BODY_RELIABILITY_INJECT),
};

constinit ReliabilityService g_service;

const char* fault_name(uint32_t f) {
  switch (f) {
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG: return "hang (IRQs masked)";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL: return "stall (WFI forever)";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC: return "panic (data abort)";
    default: return "none";
  }
}

}  // namespace

ReliabilityService& service() { return g_service; }

std::span<const Route> ReliabilityService::routes() const { return kRoutes; }

void ReliabilityService::init(const Boot& boot) { hostif_ = boot.hostif; }

Error ReliabilityService::inject(const Vtrn__Ctrl__ReliabilityInjectRequest& r,
                                 Vtrn__Ctrl__ReliabilityInjectResponse& body, Call&) {
  const uint32_t fault = wire(r.fault);
  if (fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC) {
    return Error(Code::kInvalidArgument, "reliability: unknown fault %u", unsigned(fault));
  }
  body.heartbeat = hostif_ != nullptr ? hostif_->heartbeat() : 0;
  armed_ = fault;
  return Error();
}

bool ReliabilityService::has_work() {
  return armed_ != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE;
}

Vectors ReliabilityService::poll(Turn&) {
  const uint32_t fault = armed_;
  if (fault == VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE) return 0;
  log(kLogWarn, "reliability: committing injected fault: %s", fault_name(fault));
  switch (fault) {
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG:
      arch::irq_disable();
      for (;;) asm volatile("" ::: "memory");
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL:
      arch::irq_enable();
      for (;;) arch::wait_for_interrupt();
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC: {
      volatile const uint64_t* p = reinterpret_cast<volatile const uint64_t*>(kUnmappedAddress);
      (void)*p;
      break;
    }
    default:
      break;
  }
  armed_ = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE;
  return 0;
}

}  // namespace fw::reliability
