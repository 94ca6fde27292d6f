// fw::coll::Collective: the ring schedule, framing and reduction (see
// fw/collective.h for the steps and the fixed order of additions).
//
// Floats are loaded and stored with memcpy: frame payloads sit at offsets
// the link layer chooses and the firmware builds with -mstrict-align.
#include "fw/collective.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace fw::coll {
namespace {

uint32_t mod(int64_t v, uint32_t n) {
  const int64_t m = v % int64_t(n);
  return uint32_t(m < 0 ? m + n : m);
}

const char* phase_name(Op op, uint32_t ranks, uint32_t step) {
  if (op == Op::kAllGather) return "all-gather";
  return step < ranks - 1 ? "reduce-scatter" : "all-gather";
}

}  // namespace

uint64_t output_bytes(Op op, uint32_t ranks, uint64_t bytes) {
  return op == Op::kAllGather ? uint64_t(ranks) * bytes : bytes;
}

uint32_t step_count(Op op, uint32_t ranks) {
  if (ranks < 2) return 0;
  return op == Op::kAllReduce ? 2 * (ranks - 1) : ranks - 1;
}

uint32_t send_block(Op op, uint32_t ranks, uint32_t rank, uint32_t step) {
  if (op == Op::kAllReduce && step >= ranks - 1) {
    return mod(int64_t(rank) + 1 - int64_t(step - (ranks - 1)), ranks);
  }
  return mod(int64_t(rank) - int64_t(step), ranks);
}

uint32_t recv_block(Op op, uint32_t ranks, uint32_t rank, uint32_t step) {
  if (op == Op::kAllReduce && step >= ranks - 1) {
    return mod(int64_t(rank) - int64_t(step - (ranks - 1)), ranks);
  }
  return mod(int64_t(rank) - int64_t(step) - 1, ranks);
}

void block_range(Op op, uint32_t ranks, uint64_t bytes, uint32_t block, uint64_t* begin,
                 uint64_t* len) {
  if (op == Op::kAllGather) {
    *begin = uint64_t(block) * bytes;
    *len = bytes;
    return;
  }
  const uint64_t n = bytes / 4;
  const uint64_t b = n * block / ranks;
  const uint64_t e = n * (uint64_t(block) + 1) / ranks;
  *begin = b * 4;
  *len = (e - b) * 4;
}

vtrn::Error check_plan(const Plan& p) {
  using vtrn::Code;
  using vtrn::Error;
  if (p.op != Op::kAllReduce && p.op != Op::kAllGather) {
    return Error(Code::kInvalidArgument, "op: %u is not all-reduce or all-gather", unsigned(p.op));
  }
  if (p.ranks < 2 || p.ranks > kMaxRanks) {
    return Error(Code::kInvalidArgument, "ranks: %u is not in 2..%u", unsigned(p.ranks),
                 unsigned(kMaxRanks));
  }
  if (p.rank >= p.ranks) {
    return Error(Code::kInvalidArgument, "rank: %u is not below ranks %u", unsigned(p.rank),
                 unsigned(p.ranks));
  }
  if (p.bytes == 0 || p.bytes % 4 != 0 || p.bytes > (1ull << 32)) {
    return Error(Code::kInvalidArgument, "bytes: %llu is not a multiple of 4 in 4..4 GiB",
                 (unsigned long long)p.bytes);
  }
  if (p.max_frame < sizeof(FrameHeader) + 4) {
    return Error(Code::kInvalidArgument, "max_frame: %u holds no data", unsigned(p.max_frame));
  }
  return Error();
}

uint32_t Collective::payload_max() const {
  return (plan_.max_frame - uint32_t(sizeof(FrameHeader))) & ~3u;
}

void Collective::start(const Plan& plan, const uint8_t* in, uint8_t* out, uint64_t now_ns) {
  plan_ = plan;
  in_ = in;
  out_ = out;
  steps_ = step_count(plan.op, plan.ranks);
  state_ = State::kRunning;
  send_step_ = recv_step_ = 0;
  send_off_ = recv_off_ = 0;
  pending_len_ = 0;
  start_ns_ = progress_ns_ = now_ns;
  failed_step_ = 0;
  bytes_sent_ = bytes_received_ = frames_rejected_ = 0;
  reason_[0] = '\0';
  const uint64_t at = plan.op == Op::kAllGather ? uint64_t(plan.rank) * plan.bytes : 0;
  memmove(out_ + at, in_, size_t(plan.bytes));
}

void Collective::set_failed(State s, uint32_t step, const char* fmt, ...) {
  if (state_ != State::kRunning) return;
  state_ = s;
  failed_step_ = step;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason_, sizeof reason_, fmt, ap);
  va_end(ap);
}

void Collective::abort_with(const char* reason) {
  const uint32_t step = recv_step_ < send_step_ ? recv_step_ : send_step_;
  set_failed(State::kFailed, step, "step %u: %s", unsigned(step), reason);
}

void Collective::finish_if_done() {
  if (state_ == State::kRunning && send_step_ >= steps_ && recv_step_ >= steps_) {
    state_ = State::kDone;
  }
}

uint32_t Collective::next_frame(uint8_t* buf, uint32_t capacity) {
  if (state_ != State::kRunning || send_step_ >= steps_) return 0;
  // Step s sends what step s-1 received.
  if (send_step_ > recv_step_) return 0;
  uint64_t begin = 0, len = 0;
  block_range(plan_.op, plan_.ranks, plan_.bytes, send_block(plan_.op, plan_.ranks, plan_.rank, send_step_),
              &begin, &len);
  const uint64_t left = len - send_off_;
  const uint32_t chunk = uint32_t(left < payload_max() ? left : payload_max());
  if (capacity < sizeof(FrameHeader) + chunk) return 0;
  const FrameHeader h{kFrameMagic, plan_.collective_id, send_step_, uint32_t(send_off_), chunk, 0};
  memcpy(buf, &h, sizeof h);
  if (chunk > 0) memcpy(buf + sizeof h, out_ + begin + send_off_, chunk);
  pending_len_ = chunk;
  return uint32_t(sizeof h) + chunk;
}

void Collective::sent(uint64_t now_ns) {
  if (state_ != State::kRunning || send_step_ >= steps_) return;
  uint64_t begin = 0, len = 0;
  block_range(plan_.op, plan_.ranks, plan_.bytes, send_block(plan_.op, plan_.ranks, plan_.rank, send_step_),
              &begin, &len);
  send_off_ += pending_len_;
  bytes_sent_ += pending_len_;
  pending_len_ = 0;
  progress_ns_ = now_ns;
  if (send_off_ >= len) {
    ++send_step_;
    send_off_ = 0;
  }
  finish_if_done();
}

Verdict Collective::on_frame(const uint8_t* frame, uint32_t length, uint64_t now_ns) {
  FrameHeader h;
  if (length < sizeof h) {
    ++frames_rejected_;
    return Verdict::kRejected;
  }
  memcpy(&h, frame, sizeof h);
  if (h.magic != kFrameMagic || state_ != State::kRunning || h.collective_id != plan_.collective_id) {
    ++frames_rejected_;
    return Verdict::kRejected;
  }
  if (h.step < recv_step_ || (h.step == recv_step_ && h.offset < recv_off_)) {
    ++frames_rejected_;  // stale: a step (or part) already complete
    return Verdict::kRejected;
  }
  if (h.step > recv_step_ || h.offset != recv_off_) {
    // Frames from one neighbour arrive in order: a gap means the link lost
    // data (it went down and dropped what it held).
    ++frames_rejected_;
    set_failed(State::kFailed, recv_step_,
               "step %u (%s): expected offset %llu, got step %u offset %u: data lost on the link",
               unsigned(recv_step_), phase_name(plan_.op, plan_.ranks, recv_step_),
               (unsigned long long)recv_off_, unsigned(h.step), unsigned(h.offset));
    return Verdict::kRejected;
  }
  // A block is overwritten only after every earlier step that sends it.
  if (send_step_ < recv_step_) return Verdict::kHold;
  uint64_t begin = 0, len = 0;
  block_range(plan_.op, plan_.ranks, plan_.bytes, recv_block(plan_.op, plan_.ranks, plan_.rank, recv_step_),
              &begin, &len);
  if (h.length != length - sizeof h || h.length % 4 != 0 || h.length > len - recv_off_ ||
      (h.length == 0 && len != 0)) {
    ++frames_rejected_;
    set_failed(State::kFailed, recv_step_, "step %u: frame of %u bytes at offset %u does not fit the block of %llu",
               unsigned(recv_step_), unsigned(h.length), unsigned(h.offset), (unsigned long long)len);
    return Verdict::kRejected;
  }
  const uint8_t* src = frame + sizeof h;
  uint8_t* dst = out_ + begin + recv_off_;
  const bool reduce = plan_.op == Op::kAllReduce && recv_step_ < plan_.ranks - 1;
  if (reduce) {
    for (uint32_t i = 0; i < h.length; i += 4) {
      float a, b;
      memcpy(&a, src + i, 4);  // the partial sum so far (ranks before this one)
      memcpy(&b, dst + i, 4);  // this rank's own contribution
      const float s = a + b;
      memcpy(dst + i, &s, 4);
    }
  } else if (h.length > 0) {
    memcpy(dst, src, h.length);
  }
  recv_off_ += h.length;
  bytes_received_ += h.length;
  progress_ns_ = now_ns;
  if (recv_off_ >= len) {
    ++recv_step_;
    recv_off_ = 0;
  }
  finish_if_done();
  return Verdict::kConsumed;
}

void Collective::poll(uint64_t now_ns) {
  if (state_ != State::kRunning) return;
  if (plan_.timeout_ns != 0 && now_ns - start_ns_ >= plan_.timeout_ns) {
    set_failed(State::kTimedOut, recv_step_, "timed out after %llu ms in step %u (sent %u/%u steps)",
               (unsigned long long)(plan_.timeout_ns / 1000000), unsigned(recv_step_),
               unsigned(send_step_), unsigned(steps_));
    return;
  }
  if (plan_.step_timeout_ns != 0 && now_ns - progress_ns_ >= plan_.step_timeout_ns) {
    const bool waiting_rx = recv_step_ < steps_ && recv_step_ <= send_step_;
    const uint32_t step = waiting_rx ? recv_step_ : send_step_;
    set_failed(State::kFailed, step, "step %u (%s): no progress for %llu ms (%s)", unsigned(step),
               phase_name(plan_.op, plan_.ranks, step),
               (unsigned long long)(plan_.step_timeout_ns / 1000000),
               waiting_rx ? "waiting for data from the previous rank" : "cannot send to the next rank");
  }
}

}  // namespace fw::coll
