// Fault injection on request of the host (see fw/reliability.h).
#include "fw/reliability.h"

#include <stdio.h>

#include "fw/arch.h"
#include "fw/log.h"

namespace fw::reliability {
namespace {

// Inside the 40-bit physical map but outside everything mmu::map() covers
// (RAM is at 1 GiB, the high ECAM at 256 GiB, the 64-bit PCIe window at
// 512 GiB): a translation fault, not a device access.
constexpr uintptr_t kUnmappedAddress = 0x7f'dead'0000ull;

volatile uint32_t g_armed = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE;

const char* fault_name(uint32_t f) {
  switch (f) {
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG: return "hang (IRQs masked)";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL: return "stall (WFI forever)";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC: return "panic (data abort)";
    default: return "none";
  }
}

}  // namespace

bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap, uint64_t heartbeat) {
  if (req.body_case != VTRN__CTRL__REQUEST__BODY_RELIABILITY_INJECT) return false;
  const uint32_t fault = uint32_t(req.reliability_inject->fault);
  if (fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC) {
    resp->status = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
    snprintf(error, error_cap, "reliability: unknown fault %u", unsigned(fault));
    return true;
  }
  auto* body = static_cast<Vtrn__Ctrl__ReliabilityInjectResponse*>(arena.allocator()->alloc(
      arena.allocator()->allocator_data, sizeof(Vtrn__Ctrl__ReliabilityInjectResponse)));
  if (body == nullptr) {
    resp->status = VTRN__CTRL__STATUS__STATUS_INTERNAL;
    snprintf(error, error_cap, "reliability: response arena exhausted");
    return true;
  }
  vtrn__ctrl__reliability_inject_response__init(body);
  body->heartbeat = heartbeat;
  resp->status = VTRN__CTRL__STATUS__STATUS_OK;
  resp->body_case = VTRN__CTRL__RESPONSE__BODY_RELIABILITY_INJECT;
  resp->reliability_inject = body;
  g_armed = fault;
  return true;
}

void poll() {
  const uint32_t fault = g_armed;
  if (fault == VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE) return;
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
  g_armed = VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_NONE;
}

}  // namespace fw::reliability
