// Control service over the BAR2 rings. See fw/ctrl_service.h.
#include "fw/ctrl_service.h"

#include "fw/log.h"

namespace fw::ctrl {

using namespace vtrn::hostif;

namespace {
const char* ctrl_error_name(CtrlError e) {
  switch (e) {
    case kCtrlOk: return "ok";
    case kCtrlIndexJump: return "producer index jumped";
    case kCtrlIndexBackward: return "producer index moved backwards";
    case kCtrlBadLength: return "slot length too large";
    case kCtrlBadCrc: return "slot CRC mismatch";
    case kCtrlBadKind: return "wrong slot kind";
    case kCtrlConsumerAhead: return "consumer index beyond producer";
  }
  return "unknown";
}
}  // namespace

void Service::init(const RingMemory& requests, const RingMemory& responses,
                   Dispatcher* dispatcher) {
  requests_ = RingConsumer(requests, 1u << kSlotRequest);
  responses_ = RingProducer(responses);
  dispatcher_ = dispatcher;
}

void Service::check_broken() {
  if (stopped_) return;
  const CtrlError req = requests_.error();
  const CtrlError resp = responses_.error();
  if (req == kCtrlOk && resp == kCtrlOk) return;
  stopped_ = true;
  if (req != kCtrlOk) {
    log(kLogErr, "ctrl: request ring broken at index %u: %s (error %u); control service stopped",
        unsigned(requests_.index()), ctrl_error_name(req), unsigned(req));
  } else {
    log(kLogErr, "ctrl: response ring broken at index %u: %s (error %u); control service stopped",
        unsigned(responses_.index()), ctrl_error_name(resp), unsigned(resp));
  }
}

bool Service::has_work() {
  if (stopped_ || shutdown_) return false;
  if (!requests_.has_pending()) return false;
  // A full response ring means: wait, the request stays where it is.
  const bool space = responses_.in_flight() < kCtrlSlots;
  check_broken();
  return space && !stopped_;
}

uint32_t Service::poll() {
  uint32_t produced = 0;
  while (!stopped_ && !shutdown_) {
    if (!requests_.has_pending()) break;
    if (responses_.in_flight() >= kCtrlSlots) break;
    if (responses_.error() != kCtrlOk) break;
    SlotHeader hdr;
    const RingStatus st = requests_.pop(&hdr, request_, sizeof request_);
    if (st != RingStatus::kOk) break;
    const Outcome o = dispatcher_->dispatch(request_, hdr.length, response_, sizeof response_);
    const RingStatus ps = responses_.push(kSlotResponse, hdr.seq, response_, o.length);
    if (ps != RingStatus::kOk) {
      // Space was checked before consuming; only a broken ring gets here.
      break;
    }
    ++produced;
    if (o.action == Action::kShutdown) shutdown_ = true;
  }
  check_broken();
  return produced;
}

bool Service::send_boot_event(uint32_t boot_generation, uint64_t boot_ns) {
  const uint32_t n = encode_boot_event(boot_generation, boot_ns, response_, sizeof response_);
  if (n == 0) return false;
  if (responses_.push(kSlotEvent, event_seq_ + 1, response_, n) != RingStatus::kOk) {
    check_broken();
    return false;
  }
  ++event_seq_;
  ++events_;
  return true;
}

// ---- HBM (generic: any service's Event) ----
bool Service::send_event(const Vtrn__Ctrl__Event& event) {
  if (stopped_) return false;
  const size_t n = vtrn__ctrl__event__get_packed_size(&event);
  if (n > sizeof response_) return false;
  vtrn__ctrl__event__pack(&event, response_);
  if (responses_.push(kSlotEvent, event_seq_ + 1, response_, uint32_t(n)) != RingStatus::kOk) {
    check_broken();
    return false;
  }
  ++event_seq_;
  ++events_;
  return true;
}
// ---- end HBM ----

}  // namespace fw::ctrl
