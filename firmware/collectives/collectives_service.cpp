// fw::collectives implementation: the CollectiveSubmit handler, the frame
// client fw::links calls, and the end event.
//
// Frames for a collective id above the last one this chip ran, arriving
// before this chip's submit, are held (not consumed) for kHoldNs; older ids
// and anything past that bound are dropped (counted as rejected while a
// collective runs), so a leftover of a failed collective can never block a
// port for good.
#include "fw/collectives_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/ctrl_service.h"
#include "fw/hbm_service.h"
#include "fw/links_service.h"
#include "fw/log.h"
#include "fw/wire.h"
#include "vtrn/link.h"

namespace fw::collectives {
namespace {

using vtrn::Code;
using vtrn::Error;

constexpr uint64_t kHoldNs = 2'000'000'000;
constexpr uint32_t kDefaultTimeoutMs = 60'000;
constexpr uint32_t kDefaultStepTimeoutMs = 5'000;

constinit CollectivesService g_service;

bool on_frame(uint32_t port, const uint8_t* data, uint32_t length, uint64_t now) {
  return g_service.on_frame(port, data, length, now);
}
bool pump(uint64_t now) { return g_service.pump(now); }

Error check_buffer(const char* field, uint64_t addr, uint64_t bytes, uint64_t owner) {
  switch (hbm::check(addr, bytes, owner)) {
    case hbm::Access::kOk: return Error();
    case hbm::Access::kNotOwner:
      return Error(Code::kInvalidArgument,
                   "collective: %s: 0x%llx + %llu belongs to another owner, not the collective's (0x%llx)",
                   field, (unsigned long long)addr, (unsigned long long)bytes, (unsigned long long)owner);
    case hbm::Access::kNotAllocated:
    case hbm::Access::kEccError: break;
  }
  return Error(Code::kInvalidArgument, "collective: %s: 0x%llx + %llu is not inside a live allocation", field,
               (unsigned long long)addr, (unsigned long long)bytes);
}

const links::FrameClient kClient{coll::kFrameMagic, on_frame, pump};

const Route kRoutes[] = {
    route<&CollectivesService::submit>(VTRN__CTRL__REQUEST__BODY_COLLECTIVE_SUBMIT,
                                       VTRN__CTRL__RESPONSE__BODY_COLLECTIVE_SUBMIT),
};

// The LinkState name of a port, running or not.
const char* port_state(uint32_t port) {
  uint32_t state = 0;
  (void)links::port_runs(port, &state);
  return vtrn::link::to_string(vtrn::link::LinkState(state));
}

}  // namespace

CollectivesService& service() { return g_service; }

std::span<const Route> CollectivesService::routes() const { return kRoutes; }

void CollectivesService::init(const Boot&) { links::set_frame_client(&kClient); }

// Ends the job: the event is owed from now on. A failure's reason names the
// step (from the state machine) and the link ports' states, so a timeout on
// a link stuck in Recovery or Detect says so.
void CollectivesService::finish(uint64_t now) {
  running_ = false;
  event_owed_ = true;
  end_ns_ = now;
  reason_[0] = '\0';
  if (coll_.state() != coll::State::kDone) {
    snprintf(reason_, sizeof reason_, "%s; send port %u %s, receive port %u %s", coll_.reason(),
             unsigned(send_port_), port_state(send_port_), unsigned(recv_port_),
             port_state(recv_port_));
  }
  if (coll_.state() == coll::State::kDone) {
    log(kLogInfo, "collectives: job %llu (collective %u) done: %llu bytes sent, %llu received",
        (unsigned long long)job_id_, unsigned(coll_.collective_id()),
        (unsigned long long)coll_.bytes_sent(), (unsigned long long)coll_.bytes_received());
  } else {
    log(kLogWarn, "collectives: job %llu (collective %u) ended: %s", (unsigned long long)job_id_,
        unsigned(coll_.collective_id()), reason_);
  }
}

bool CollectivesService::on_frame(uint32_t port, const uint8_t* data, uint32_t length,
                                  uint64_t now) {
  coll::FrameHeader h{};
  if (length >= sizeof h) memcpy(&h, data, sizeof h);
  if (running_ && port == recv_port_) {
    const coll::Verdict v = coll_.on_frame(data, length, now);
    if (v == coll::Verdict::kHold) return false;
    if (!coll_.active()) finish(now);
    return true;
  }
  if (!running_ && length >= sizeof h && h.collective_id > last_id_) {
    // The neighbour started a collective this chip has not been told of yet.
    if (!holding_) {
      holding_ = true;
      hold_since_ = now;
    }
    if (now - hold_since_ < kHoldNs) return false;
  }
  holding_ = false;
  if (running_) coll_.count_rejected();
  return true;
}

bool CollectivesService::pump(uint64_t now) {
  if (!running_) return holding_;
  coll_.poll(now);
  while (coll_.active() && links::tx_space(send_port_) > 0) {
    const uint32_t len = coll_.next_frame(tx_, sizeof tx_);
    if (len == 0) break;
    if (links::send_frame(send_port_, tx_, len) != vtrn::link::LinkStatus::kOk) break;
    coll_.sent(now);
  }
  if (!coll_.active()) {
    finish(now);
    return false;
  }
  return true;
}

Error CollectivesService::submit(const Vtrn__Ctrl__CollectiveSubmitRequest& req,
                                 Vtrn__Ctrl__CollectiveSubmitResponse& body, Call&) {
  const Vtrn__Ctrl__CollectiveSubmitRequest* r = &req;
  // Copy, then validate, then use: nothing of the decoded request is kept.
  coll::Plan plan;
  plan.op = coll::Op(wire(r->op));
  plan.collective_id = r->collective_id;
  plan.ranks = r->ranks;
  plan.rank = r->rank;
  plan.bytes = r->bytes;
  plan.max_frame = links::max_frame_payload() < kMaxFrame ? links::max_frame_payload() : kMaxFrame;
  plan.timeout_ns = uint64_t(r->timeout_ms != 0 ? r->timeout_ms : kDefaultTimeoutMs) * 1'000'000;
  plan.step_timeout_ns =
      uint64_t(r->step_timeout_ms != 0 ? r->step_timeout_ms : kDefaultStepTimeoutMs) * 1'000'000;
  const uint64_t job_id = r->job_id;
  const uint32_t send_port = r->send_port, recv_port = r->recv_port;
  const uint64_t in_addr = r->in_addr, out_addr = r->out_addr;
  const uint64_t owner = r->owner;
  if (running_ || event_owed_) {
    return Error(Code::kBusy, "collective: another collective runs on this chip");
  }
  Error why = coll::check_plan(plan);
  if (!why.ok()) return Error(Code::kInvalidArgument, "collective: %s", why.detail());
  if (plan.collective_id <= last_id_) {
    return Error(Code::kInvalidArgument, "collective: collective_id: %u is not above the last one, %u",
                 unsigned(plan.collective_id), unsigned(last_id_));
  }
  uint32_t st = 0;
  why = links::port_runs(send_port, &st);
  if (why.ok()) why = links::port_runs(recv_port, &st);
  if (!why.ok()) return Error(Code::kInvalidArgument, "collective: %s", why.detail());
  const uint64_t out_bytes = coll::output_bytes(plan.op, plan.ranks, plan.bytes);
  // Both buffers must be the collective's own (vtrnd allocates them as its
  // job owner), as a job step's are.
  VTRN_TRY(check_buffer("in_addr", in_addr, plan.bytes, owner));
  VTRN_TRY(check_buffer("out_addr", out_addr, out_bytes, owner));
  if (in_addr < out_addr + out_bytes && out_addr < in_addr + plan.bytes) {
    return Error(Code::kInvalidArgument, "collective: in_addr and out_addr overlap");
  }
  const uint64_t now = arch::now_ns();
  job_id_ = job_id;
  send_port_ = send_port;
  recv_port_ = recv_port;
  last_id_ = plan.collective_id;
  start_ns_ = now;
  running_ = true;
  holding_ = false;
  coll_.start(plan, reinterpret_cast<const uint8_t*>(uintptr_t(in_addr)),
              reinterpret_cast<uint8_t*>(uintptr_t(out_addr)), now);
  log(kLogInfo, "collectives: job %llu: %s collective %u, rank %u of %u, %llu bytes, send port %u, "
      "receive port %u", (unsigned long long)job_id,
      plan.op == coll::Op::kAllReduce ? "all-reduce" : "all-gather", unsigned(plan.collective_id),
      unsigned(plan.rank), unsigned(plan.ranks), (unsigned long long)plan.bytes, unsigned(send_port),
      unsigned(recv_port));
  body.state = VTRN__TYPES__JOB_STATE__JOB_STATE_QUEUED;
  return Error();
}

Vectors CollectivesService::poll(Turn&) {
  if (!event_owed_) return 0;
  Vtrn__Ctrl__CollectiveEvent ce = VTRN__CTRL__COLLECTIVE_EVENT__INIT;
  ce.job_id = job_id_;
  const coll::State s = coll_.state();
  ce.state = s == coll::State::kDone       ? VTRN__TYPES__JOB_STATE__JOB_STATE_DONE
             : s == coll::State::kTimedOut ? VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT
                                           : VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED;
  ce.reason = s == coll::State::kDone ? const_cast<char*>("") : reason_;
  ce.failed_step = coll_.failed_step();
  ce.start_ns = start_ns_;
  ce.end_ns = end_ns_;
  ce.bytes_sent = coll_.bytes_sent();
  ce.bytes_received = coll_.bytes_received();
  ce.frames_rejected = coll_.frames_rejected();
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_COLLECTIVE;
  ev.collective = &ce;
  if (!ctrl::send_event(ev)) return 0;
  event_owed_ = false;
  return vector(vtrn::hostif::kVectorControl);
}

}  // namespace fw::collectives
