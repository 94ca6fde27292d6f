// The control service over the BAR2 rings. See fw/ctrl_service.h.
#include "fw/ctrl_service.h"

#include "fw/arch.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/power_service.h"

namespace fw::ctrl {

using namespace vtrn::hostif;

namespace {
ControlService g_service;
}  // namespace

ControlService& service() { return g_service; }

bool send_event(const Vtrn__Ctrl__Event& event) { return g_service.send_event(event); }

ControlService::ControlService()
    : CoreHandlers(static_cast<Backend&>(*this)),
      arena_(arena_buffer_, sizeof arena_buffer_),
      dispatcher_({}, *this, arena_) {}

uint64_t ControlService::do_uptime_ns() { return arch::now_ns(); }

void ControlService::do_set_log_level(uint32_t level) {
  (void)logging::set_level(level);
  log(kLogInfo, "log: level set to %u by host", unsigned(level));
}

void ControlService::init(const Boot& boot) {
  bind(boot.facts);
  dispatcher_.route_to(boot.services);
  requests_ = RingConsumer(boot.hostif->request_ring(), 1u << kSlotRequest);
  responses_ = RingProducer(boot.hostif->response_ring());
  boot_generation_ = boot.hostif->boot_generation();
}

void ControlService::check_broken() {
  if (stopped_) return;
  const CtrlError req = requests_.error();
  const CtrlError resp = responses_.error();
  if (req == kCtrlOk && resp == kCtrlOk) return;
  stopped_ = true;
  if (req != kCtrlOk) {
    log(kLogErr, "ctrl: request ring broken at index %u: %s (error %u); control service stopped",
        unsigned(requests_.index()), ring_error_name(req), unsigned(req));
  } else {
    log(kLogErr, "ctrl: response ring broken at index %u: %s (error %u); control service stopped",
        unsigned(responses_.index()), ring_error_name(resp), unsigned(resp));
  }
}

bool ControlService::has_work() {
  if (stopped_ || shutdown_) return false;
  if (!requests_.has_pending()) return false;
  // A full response ring means: wait, the request stays where it is.
  const bool space = responses_.in_flight() < kCtrlSlots;
  check_broken();
  return space && !stopped_;
}

Vectors ControlService::poll(Turn& turn) {
  // A request is a resume trigger: an autosuspended device wakes before it
  // is served.
  if (has_work()) power::note_activity();
  uint32_t produced = 0;
  while (!stopped_ && !shutdown_) {
    if (!requests_.has_pending()) break;
    if (responses_.in_flight() >= kCtrlSlots) break;
    if (responses_.error() != kCtrlOk) break;
    SlotHeader hdr;
    const RingStatus st = requests_.pop(&hdr, request_, sizeof request_);
    if (st != RingStatus::kOk) break;
    const Outcome o = dispatcher_.dispatch(request_, hdr.length, response_, sizeof response_);
    const RingStatus ps = responses_.push(kSlotResponse, hdr.seq, response_, o.length);
    if (ps != RingStatus::kOk) {
      // Space was checked before consuming; only a broken ring gets here.
      break;
    }
    ++produced;
    if (o.action == Action::kShutdown) shutdown_ = true;
  }
  check_broken();
  if (shutdown_) turn.halt = "shutdown requested by the host";
  return produced > 0 ? vector(kVectorControl) : 0;
}

bool ControlService::push_event(uint32_t length) {
  if (responses_.push(kSlotEvent, event_seq_ + 1, response_, length) != RingStatus::kOk) {
    check_broken();
    return false;
  }
  ++event_seq_;
  ++events_;
  return true;
}

Vectors ControlService::on_ready(uint64_t ready_ns) {
  const uint32_t n = encode_boot_event(boot_generation_, ready_ns, response_, sizeof response_);
  if (n == 0 || !push_event(n)) log(kLogErr, "ctrl: could not queue the boot event");
  return vector(kVectorControl);
}

bool ControlService::send_event(const Vtrn__Ctrl__Event& event) {
  if (stopped_) return false;
  const size_t n = vtrn__ctrl__event__get_packed_size(&event);
  if (n > sizeof response_) return false;
  vtrn__ctrl__event__pack(&event, response_);
  return push_event(uint32_t(n));
}

void ControlService::fill_telemetry(Telemetry* t) const {
  t->ctrl_requests = dispatcher_.requests();
  t->ctrl_errors = dispatcher_.errors();
  t->events_sent = events_;
}

}  // namespace fw::ctrl
