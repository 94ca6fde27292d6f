// fw::collectives implementation: the CollectiveSubmit handler, the frame
// client fw::links calls, and the end event.
//
// Frames for a collective id above the last one this chip ran, arriving
// before this chip's submit, are held (not consumed) for kHoldNs; older ids
// and anything past that bound are dropped and counted, so a leftover of a
// failed collective can never block a port for good.
#include "fw/collectives_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/collective.h"
#include "fw/hbm_service.h"
#include "fw/links_service.h"
#include "fw/log.h"
#include "vtrn/link.h"

namespace fw::collectives {
namespace {

constexpr uint64_t kHoldNs = 2'000'000'000;
constexpr uint32_t kDefaultTimeoutMs = 60'000;
constexpr uint32_t kDefaultStepTimeoutMs = 5'000;
constexpr uint32_t kMaxFrame = 4096;

coll::Collective g_coll;
uint64_t g_job_id = 0;
uint32_t g_send_port = 0, g_recv_port = 0;
uint32_t g_last_id = 0;       // highest collective id this chip started
bool g_running = false;
bool g_event_owed = false;
uint64_t g_start_ns = 0, g_end_ns = 0;
uint64_t g_hold_since = 0;    // a future collective's frame at a port head since
bool g_holding = false;
uint64_t g_dropped_idle = 0;  // frames dropped while no collective ran
char g_reason[224] = {};      // the end event's reason: the step, then the ports
alignas(8) uint8_t g_tx[kMaxFrame];

// Ends the job: the event is owed from now on. A failure's reason names the
// step (from the state machine) and the link ports' states, so a timeout on
// a link stuck in Recovery or Detect says so.
void finish(uint64_t now) {
  g_running = false;
  g_event_owed = true;
  g_end_ns = now;
  g_reason[0] = '\0';
  if (g_coll.state() != coll::State::kDone) {
    uint32_t ss = 0, rs = 0;
    char why[96];
    (void)links::port_runs(g_send_port, &ss, why, sizeof why);
    (void)links::port_runs(g_recv_port, &rs, why, sizeof why);
    snprintf(g_reason, sizeof g_reason, "%s; send port %u %s, receive port %u %s", g_coll.reason(),
             unsigned(g_send_port), vtrn::link::to_string(vtrn::link::LinkState(ss)),
             unsigned(g_recv_port), vtrn::link::to_string(vtrn::link::LinkState(rs)));
  }
  if (g_coll.state() == coll::State::kDone) {
    log(kLogInfo, "collectives: job %llu (collective %u) done: %llu bytes sent, %llu received",
        (unsigned long long)g_job_id, unsigned(g_coll.collective_id()),
        (unsigned long long)g_coll.bytes_sent(), (unsigned long long)g_coll.bytes_received());
  } else {
    log(kLogWarn, "collectives: job %llu (collective %u) ended: %s", (unsigned long long)g_job_id,
        unsigned(g_coll.collective_id()), g_reason);
  }
}

bool on_frame(uint32_t port, const uint8_t* data, uint32_t length, uint64_t now) {
  coll::FrameHeader h{};
  if (length >= sizeof h) memcpy(&h, data, sizeof h);
  if (g_running && port == g_recv_port) {
    const coll::Verdict v = g_coll.on_frame(data, length, now);
    if (v == coll::Verdict::kHold) return false;
    if (!g_coll.active()) finish(now);
    return true;
  }
  if (!g_running && length >= sizeof h && h.collective_id > g_last_id) {
    // The neighbour started a collective this chip has not been told of yet.
    if (!g_holding) {
      g_holding = true;
      g_hold_since = now;
    }
    if (now - g_hold_since < kHoldNs) return false;
  }
  g_holding = false;
  if (g_running) g_coll.count_rejected();
  else ++g_dropped_idle;
  return true;
}

bool pump(uint64_t now) {
  if (!g_running) return g_holding;
  g_coll.poll(now);
  while (g_coll.active() && links::tx_space(g_send_port) > 0) {
    const uint32_t len = g_coll.next_frame(g_tx, sizeof g_tx);
    if (len == 0) break;
    if (links::send_frame(g_send_port, g_tx, len) != vtrn::link::LinkStatus::kOk) break;
    g_coll.sent(now);
  }
  if (!g_coll.active()) {
    finish(now);
    return false;
  }
  return true;
}

const links::FrameClient kClient{coll::kFrameMagic, on_frame, pump};

template <typename T>
T* arena_new(pb::Arena& arena) {
  ProtobufCAllocator* a = arena.allocator();
  return static_cast<T*>(a->alloc(a->allocator_data, sizeof(T)));
}

bool reject(Vtrn__Ctrl__Response* resp, Vtrn__Ctrl__Status st, char* error, size_t cap,
            const char* what) {
  resp->status = st;
  snprintf(error, cap, "collective: %s", what);
  return true;
}

}  // namespace

void init() { links::set_frame_client(&kClient); }

bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap) {
  if (req.body_case != VTRN__CTRL__REQUEST__BODY_COLLECTIVE_SUBMIT) return false;
  const Vtrn__Ctrl__CollectiveSubmitRequest* r = req.collective_submit;
  const auto bad = VTRN__CTRL__STATUS__STATUS_BAD_REQUEST;
  if (r == nullptr) return reject(resp, bad, error, error_cap, "no body");
  // Copy, then validate, then use: nothing of the decoded request is kept.
  coll::Plan plan;
  plan.op = coll::Op(r->op);
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
  char why[112];
  if (g_running || g_event_owed) {
    return reject(resp, VTRN__CTRL__STATUS__STATUS_BUSY, error, error_cap,
                  "another collective runs on this chip");
  }
  if (!coll::check_plan(plan, why, sizeof why)) return reject(resp, bad, error, error_cap, why);
  if (plan.collective_id <= g_last_id) {
    snprintf(why, sizeof why, "collective_id: %u is not above the last one, %u",
             unsigned(plan.collective_id), unsigned(g_last_id));
    return reject(resp, bad, error, error_cap, why);
  }
  uint32_t st = 0;
  if (!links::port_runs(send_port, &st, why, sizeof why) ||
      !links::port_runs(recv_port, &st, why, sizeof why)) {
    return reject(resp, bad, error, error_cap, why);
  }
  const uint64_t out_bytes = coll::output_bytes(plan.op, plan.ranks, plan.bytes);
  if (hbm::check(in_addr, plan.bytes) != hbm::Access::kOk) {
    snprintf(why, sizeof why, "in_addr: 0x%llx + %llu is not inside a live allocation",
             (unsigned long long)in_addr, (unsigned long long)plan.bytes);
    return reject(resp, bad, error, error_cap, why);
  }
  if (hbm::check(out_addr, out_bytes) != hbm::Access::kOk) {
    snprintf(why, sizeof why, "out_addr: 0x%llx + %llu is not inside a live allocation",
             (unsigned long long)out_addr, (unsigned long long)out_bytes);
    return reject(resp, bad, error, error_cap, why);
  }
  if (in_addr < out_addr + out_bytes && out_addr < in_addr + plan.bytes) {
    return reject(resp, bad, error, error_cap, "in_addr and out_addr overlap");
  }
  auto* body = arena_new<Vtrn__Ctrl__CollectiveSubmitResponse>(arena);
  if (body == nullptr) {
    return reject(resp, VTRN__CTRL__STATUS__STATUS_INTERNAL, error, error_cap, "out of response memory");
  }
  const uint64_t now = arch::now_ns();
  g_job_id = job_id;
  g_send_port = send_port;
  g_recv_port = recv_port;
  g_last_id = plan.collective_id;
  g_start_ns = now;
  g_running = true;
  g_holding = false;
  g_coll.start(plan, reinterpret_cast<const uint8_t*>(uintptr_t(in_addr)),
               reinterpret_cast<uint8_t*>(uintptr_t(out_addr)), now);
  log(kLogInfo, "collectives: job %llu: %s collective %u, rank %u of %u, %llu bytes, send port %u, "
      "receive port %u", (unsigned long long)job_id,
      plan.op == coll::Op::kAllReduce ? "all-reduce" : "all-gather", unsigned(plan.collective_id),
      unsigned(plan.rank), unsigned(plan.ranks), (unsigned long long)plan.bytes, unsigned(send_port),
      unsigned(recv_port));
  vtrn__ctrl__collective_submit_response__init(body);
  body->state = VTRN__CTRL__JOB_STATE__JOB_STATE_QUEUED;
  resp->status = VTRN__CTRL__STATUS__STATUS_OK;
  resp->body_case = VTRN__CTRL__RESPONSE__BODY_COLLECTIVE_SUBMIT;
  resp->collective_submit = body;
  return true;
}

bool poll(EventSender send) {
  if (!g_event_owed) return false;
  Vtrn__Ctrl__CollectiveEvent ce = VTRN__CTRL__COLLECTIVE_EVENT__INIT;
  ce.job_id = g_job_id;
  const coll::State s = g_coll.state();
  ce.state = s == coll::State::kDone       ? VTRN__CTRL__JOB_STATE__JOB_STATE_DONE
             : s == coll::State::kTimedOut ? VTRN__CTRL__JOB_STATE__JOB_STATE_TIMED_OUT
                                           : VTRN__CTRL__JOB_STATE__JOB_STATE_FAILED;
  ce.reason = s == coll::State::kDone ? const_cast<char*>("") : g_reason;
  ce.failed_step = g_coll.failed_step();
  ce.start_ns = g_start_ns;
  ce.end_ns = g_end_ns;
  ce.bytes_sent = g_coll.bytes_sent();
  ce.bytes_received = g_coll.bytes_received();
  ce.frames_rejected = g_coll.frames_rejected();
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_COLLECTIVE;
  ev.collective = &ce;
  if (!send(ev)) return false;
  g_event_owed = false;
  return true;
}

bool has_work() { return g_event_owed; }

}  // namespace fw::collectives
