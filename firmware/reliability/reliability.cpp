// Fault injection on request of the host (see fw/reliability.h).
#include "fw/reliability.h"

#include "fw/arch.h"
#include "fw/dma_service.h"
#include "fw/engines_service.h"
#include "fw/host_interface.h"
#include "fw/jobs_service.h"
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
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_TENSOR_ENGINE: return "tensor engine fault";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_DMA_ENGINE: return "DMA engine fault";
    case VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_JOB_STUCK: return "job stuck";
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
  if (fault == VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_TENSOR_ENGINE) return inject_tensor(r.engine, body);
  if (fault == VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_DMA_ENGINE) {
    return inject_dma(r.engine, r.halt != 0, body);
  }
  if (fault == VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_JOB_STUCK) return inject_job_stuck(body);
  if (fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_HANG &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_STALL &&
      fault != VTRN__CTRL__RELIABILITY_FAULT__RELIABILITY_FAULT_PANIC) {
    return Error(Code::kInvalidArgument, "reliability: unknown fault %u", unsigned(fault));
  }
  body.heartbeat = hostif_ != nullptr ? hostif_->heartbeat() : 0;
  armed_ = fault;
  return Error();
}

// The engines' own fault injection (engine_abi.h ControlBlock): the engine
// fails its next command, which ends the job that sent it with a reason
// naming the engine. Nothing in the firmware breaks.
Error ReliabilityService::inject_tensor(uint32_t engine, Vtrn__Ctrl__ReliabilityInjectResponse& body) {
  engines::EnginesService& es = engines::service();
  const uint32_t n = es.present() ? es.region().tensor_engines() : 0;
  if (n == 0) return Error(Code::kInvalidArgument, "engine: this chip has no tensor engines (see its log)");
  if (engine >= n) {
    return Error(Code::kInvalidArgument, "engine: %u, but this chip has %u tensor engines", unsigned(engine),
                 unsigned(n));
  }
  if (!(es.region().id().capabilities & vtrn::engine::kCapFaultInject)) {
    return Error(Code::kUnsupported, "engine: the engines do not take injected faults");
  }
  const hal::Status s = es.region().inject(vtrn::engine::kInjectTensor, engine);
  if (s != hal::Status::kOk) {
    return Error(Code::kInternal, "engine: fault injection refused: %s", hal::status_name(s));
  }
  log(kLogWarn, "reliability: tensor engine %u fails its next command (injected)", unsigned(engine));
  body.heartbeat = hostif_ != nullptr ? hostif_->heartbeat() : 0;
  return Error();
}

// The same for a DMA engine that serves the host queues: it fails the next
// descriptor it takes (the chain's completion says kErrEngine, the error
// record is logged by fw::engines) or halts until the chip reset.
Error ReliabilityService::inject_dma(uint32_t engine, bool halt, Vtrn__Ctrl__ReliabilityInjectResponse& body) {
  engines::EnginesService& es = engines::service();
  const uint32_t n = dma::service().dma_engines_serving();
  if (n == 0) {
    return Error(Code::kInvalidArgument,
                 "engine: the host DMA queues are not served by DMA engines on this chip (--copy-engine cpu, or "
                 "no engines: see its log)");
  }
  if (engine >= n) {
    return Error(Code::kInvalidArgument, "engine: %u, but %u DMA engines serve this chip's host queues",
                 unsigned(engine), unsigned(n));
  }
  if (!(es.region().id().capabilities & vtrn::engine::kCapFaultInject)) {
    return Error(Code::kUnsupported, "engine: the engines do not take injected faults");
  }
  const hal::Status s =
      es.region().inject(halt ? vtrn::engine::kInjectDma : vtrn::engine::kInjectDmaFail, engine);
  if (s != hal::Status::kOk) {
    return Error(Code::kInternal, "engine: fault injection refused: %s", hal::status_name(s));
  }
  log(kLogWarn, "reliability: DMA engine %u %s (injected)", unsigned(engine),
      halt ? "halts before its next descriptor until the chip reset" : "fails the next descriptor it takes");
  body.heartbeat = hostif_ != nullptr ? hostif_->heartbeat() : 0;
  return Error();
}

// Armed, not committed: the next chunk an executor core runs never returns
// and ignores stop (fw::jobs); the chip panics with kPanicJobStuck once
// that job's stop (cancel, timeout) is older than the jobs service's bound.
Error ReliabilityService::inject_job_stuck(Vtrn__Ctrl__ReliabilityInjectResponse& body) {
  if (!jobs::service().arm_stuck()) {
    return Error(Code::kInvalidArgument, "job stuck: this chip has no executor core besides core 0");
  }
  log(kLogWarn, "reliability: the next chunk an executor core runs ignores stop and never returns (injected)");
  body.heartbeat = hostif_ != nullptr ? hostif_->heartbeat() : 0;
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
