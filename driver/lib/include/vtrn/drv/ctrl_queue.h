// One chip's control queue as the host runs it: vtrn.ctrl Requests in FIFO
// order, one in flight at a time, each with a sequence number (from 1,
// never 0) and its own timeout; a response is matched to the request in
// flight by seq, a late one (its request timed out) is recognised and
// dropped; unsolicited events in the response ring go to a hook in ring
// order. The round-trip time runs from just before the request slot is
// published to just after its response is popped (CLOCK_MONOTONIC).
//
// What it is not: the chip. It knows nothing of QEMU, states or resets:
// the owner says when requests may be issued (Hooks::open), rings the
// doorbell (Hooks::notify), and decides what a broken ring means
// (Hooks::broken, after the request in flight was failed). It never blocks
// the event loop except for the optional spin of WAIT_SPIN_BLOCK (bounded
// by kSpinNs).
#pragma once

#include <stdint.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/host_interface.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

inline constexpr uint64_t kSpinNs = 50'000;
// Responses and events one pump() takes from the ring at most; a firmware
// that keeps producing gets the rest on a later turn of the event loop, so
// it cannot hold vtrnd inside one call (issue 15: bounded work per call).
inline constexpr uint32_t kPopsPerPump = 64;

// A failure's code says what went wrong: kInvalidArgument (a request too
// large for a slot), kTimeout (no answer in time, or a request ring the
// firmware does not drain), kChipError (an error status from the firmware,
// an answer that does not decode, a ring that broke its protocol), or what
// the owner fails the queue with (fail_all).
struct CtrlResult {
  Error error;
  const Vtrn__Ctrl__Response* response = nullptr;  // valid during the callback only
  uint64_t rtt_ns = 0;
  [[nodiscard]] bool ok() const { return error.ok(); }
};
using CtrlDone = std::function<void(const CtrlResult&)>;

class CtrlQueue {
 public:
  struct Hooks {
    std::function<bool()> open;                           // requests may be issued now
    std::function<void()> notify;                         // a request slot was published
    std::function<void(const Vtrn__Ctrl__Event&)> event;  // an event popped (valid during the call)
    std::function<void(const std::string& reason)> broken;  // a ring broke its protocol
  };
  // `label` ("chip N") prefixes every error text.
  CtrlQueue(EventLoop* loop, HostInterface* hif, std::string label, Hooks hooks);
  ~CtrlQueue();
  CtrlQueue(const CtrlQueue&) = delete;
  CtrlQueue& operator=(const CtrlQueue&) = delete;

  // Packs `req` and queues it (behind everything queued, or ahead of it with
  // `front`), then pumps. A request too large for a slot is answered
  // kInvalidArgument at once.
  void submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool spin, CtrlDone done, bool front = false);
  // Reaps responses and events (at most kPopsPerPump; more left in the
  // ring are reaped on a later loop turn), and issues the next request
  // while open.
  void pump();
  // Ends the request in flight and every queued one with `why`.
  void fail_all(const Error& why);
  [[nodiscard]] bool idle() const { return !inflight_ && ops_.empty(); }

 private:
  struct Op {
    std::vector<uint8_t> payload;
    uint32_t timeout_ms = 0;
    bool spin = false;
    CtrlDone done;
  };
  void issue_front();
  // false when the pump's budget ran out with the ring not known empty.
  bool process_responses(uint32_t* budget);
  void complete_inflight(const CtrlResult& r);
  // Fails the request in flight and hands the reason to Hooks::broken.
  void ring_broken(const std::string& reason);

  EventLoop* loop_;
  HostInterface* hif_;
  std::string label_;
  Hooks hooks_;
  std::deque<Op> ops_;
  bool inflight_ = false;
  Op current_;
  uint32_t current_seq_ = 0;
  uint64_t current_t0_ = 0;
  EventLoop::TimerId op_timer_ = 0;
  uint32_t next_seq_ = 1;
  bool pumping_ = false;
  bool repump_ = false;
  EventLoop::TimerId again_timer_ = 0;  // the pump the budget put off
};

}  // namespace drv
