// The control queue (ctrl_queue.h): FIFO of packed requests, the one in
// flight with its seq and timer, and the response ring's reaper.
#include "vtrn/drv/ctrl_queue.h"

#include "vtrn/drv/fd.h"
#include "vtrn/drv/log.h"

namespace drv {

using namespace vtrn::hostif;

namespace {
constexpr uint64_t kMs = 1'000'000;
}  // namespace

CtrlQueue::CtrlQueue(EventLoop* loop, HostInterface* hif, std::string label, Hooks hooks)
    : loop_(loop), hif_(hif), label_(std::move(label)), hooks_(std::move(hooks)) {}

CtrlQueue::~CtrlQueue() {
  if (op_timer_ != 0) loop_->cancel_timer(op_timer_);
  if (again_timer_ != 0) loop_->cancel_timer(again_timer_);
}

void CtrlQueue::submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool spin, CtrlDone done, bool front) {
  Op op;
  op.payload.resize(protobuf_c_message_get_packed_size(&req.base));
  protobuf_c_message_pack(&req.base, op.payload.data());
  if (op.payload.size() > kCtrlMaxPayload) {
    CtrlResult r;
    r.error = Error(Code::kInvalidArgument,
                    "request of " + std::to_string(op.payload.size()) + " bytes exceeds a control slot");
    done(r);
    return;
  }
  op.timeout_ms = timeout_ms;
  op.spin = spin;
  op.done = std::move(done);
  if (front) {
    ops_.push_front(std::move(op));
  } else {
    ops_.push_back(std::move(op));
  }
  pump();
}

void CtrlQueue::pump() {
  if (pumping_) {
    repump_ = true;
    return;
  }
  pumping_ = true;
  uint32_t budget = kPopsPerPump;
  bool drained = true;
  do {
    repump_ = false;
    drained = process_responses(&budget);
    if (!inflight_ && !ops_.empty() && hooks_.open()) {
      issue_front();
      repump_ = true;
    }
  } while (repump_ && drained);
  pumping_ = false;
  if (!drained && again_timer_ == 0) {
    again_timer_ = loop_->add_timer_in(0, [this] {
      again_timer_ = 0;
      pump();
    });
  }
}

void CtrlQueue::issue_front() {
  current_ = std::move(ops_.front());
  ops_.pop_front();
  current_seq_ = next_seq_++;
  if (next_seq_ == 0) next_seq_ = 1;
  current_t0_ = monotonic_ns();
  RingStatus s = hif_->push_request(current_seq_, current_.payload.data(), uint32_t(current_.payload.size()));
  if (s != RingStatus::kOk) {
    inflight_ = true;
    if (s == RingStatus::kFull) {
      CtrlResult r;
      r.error = Error(Code::kTimeout, label_ + ": control request ring full (firmware not consuming)");
      complete_inflight(r);
    } else {
      ring_broken(std::string("control request ring broken: ") + ring_error_name(hif_->request_ring_error()));
    }
    return;
  }
  inflight_ = true;
  // Release ordering of the index store is done by push(); the doorbell is
  // a syscall, which orders it after.
  if (hooks_.notify) hooks_.notify();
  const uint32_t seq = current_seq_;
  op_timer_ = loop_->add_timer(current_t0_ + uint64_t(current_.timeout_ms) * kMs, [this, seq] {
    op_timer_ = 0;
    if (!inflight_ || current_seq_ != seq) return;
    pump();  // a response may be sitting there with its doorbell coalesced
    if (!inflight_ || current_seq_ != seq) return;
    CtrlResult r;
    std::string why = label_ + ": no response to control request " + std::to_string(seq) + " within " +
                      std::to_string(current_.timeout_ms) + " ms";
    if (uint32_t e = hif_->fw_ring_error(); e != kCtrlOk)
      why += std::string(" (firmware latched: ") + ring_error_name(e) + ")";
    DRV_LOGW("%s", why.c_str());
    r.error = Error(Code::kTimeout, std::move(why));
    complete_inflight(r);
    pump();
  });
  if (current_.spin) {
    const uint64_t until = current_t0_ + kSpinNs;
    while (!hif_->response_pending() && monotonic_ns() < until) cpu_relax();
  }
}

void CtrlQueue::complete_inflight(const CtrlResult& r) {
  if (!inflight_) return;
  inflight_ = false;
  if (op_timer_ != 0) loop_->cancel_timer(op_timer_);
  op_timer_ = 0;
  CtrlDone done = std::move(current_.done);
  current_ = Op{};
  if (done) done(r);
}

void CtrlQueue::ring_broken(const std::string& reason) {
  CtrlResult r;
  r.error = Error(Code::kChipError, label_ + ": " + reason);
  complete_inflight(r);
  if (hooks_.broken) hooks_.broken(reason);
}

bool CtrlQueue::process_responses(uint32_t* budget) {
  if (!hif_->up()) return true;
  std::vector<uint8_t> payload;
  for (;; --*budget) {
    if (*budget == 0) return false;
    SlotHeader h{};
    RingStatus s = hif_->pop_response(&h, &payload);
    const uint64_t t1 = monotonic_ns();
    if (s == RingStatus::kEmpty) return true;
    if (s != RingStatus::kOk) {
      ring_broken(std::string("response ring broken: ") + ring_error_name(hif_->response_ring_error()));
      return true;
    }
    if (h.kind == kSlotEvent) {
      Vtrn__Ctrl__Event* ev = vtrn__ctrl__event__unpack(nullptr, payload.size(), payload.data());
      if (ev == nullptr) {
        DRV_LOGW("%s: undecodable event (seq %u, %u bytes)", label_.c_str(), h.seq, h.length);
        continue;
      }
      if (hooks_.event) hooks_.event(*ev);
      vtrn__ctrl__event__free_unpacked(ev, nullptr);
      continue;
    }
    if (!inflight_ || h.seq != current_seq_) {
      DRV_LOGD("%s: dropping response seq %u (expected %u)", label_.c_str(), h.seq, inflight_ ? current_seq_ : 0);
      continue;
    }
    CtrlResult r;
    r.rtt_ns = t1 - current_t0_;
    Vtrn__Ctrl__Response* resp = vtrn__ctrl__response__unpack(nullptr, payload.size(), payload.data());
    if (resp == nullptr) {
      r.error = Error(Code::kChipError, label_ + ": firmware response does not decode");
    } else if (resp->status != VTRN__CTRL__STATUS__STATUS_OK) {
      std::string why = label_ + ": firmware status " + std::to_string(int(resp->status));
      if (resp->error && resp->error[0]) why += std::string(": ") + printable(resp->error);
      r.error = Error(Code::kChipError, std::move(why));
      r.response = resp;
    } else {
      r.response = resp;
    }
    complete_inflight(r);
    if (resp != nullptr) vtrn__ctrl__response__free_unpacked(resp, nullptr);
  }
}

void CtrlQueue::fail_all(const Error& why) {
  CtrlResult r;
  r.error = why;
  if (inflight_) complete_inflight(r);
  auto ops = std::move(ops_);
  ops_.clear();
  for (Op& op : ops) {
    if (op.done) op.done(r);
  }
}

}  // namespace drv
