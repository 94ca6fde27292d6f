// fw::coll: one rank's part of a ring collective (all-reduce of f32 sums,
// all-gather), as a state machine over frames. It plans the ring steps,
// cuts each step's block into frames with a small header, reduces or copies
// what arrives, and says when it is done or why it failed.
//
// It is not the link: the caller moves frames (fw::links in the firmware,
// a loop between several Collectives in host tests) and passes the clock.
// No heap, no hardware: the input and output are plain memory.
//
// Ring steps (n ranks, rank r, blocks numbered mod n):
//  - all-reduce, N = bytes / 4 floats, block c = elements [c*N/n, (c+1)*N/n):
//    reduce-scatter steps s = 0..n-2: send block r-s, receive block r-s-1
//    and store recv + out; all-gather steps s = n-1..2n-3, t = s-(n-1):
//    send block r+1-t, receive block r-t and store it.
//    The order of additions is therefore fixed: block c is summed along the
//    ring starting at rank c, ((x[c] + x[c+1]) + x[c+2]) + ... + x[c+n-1]
//    (ranks mod n, left to right, one fp32 rounding per addition), which is
//    what a host reference computes bit for bit.
//  - all-gather, out = n blocks of `bytes`, out[r] = in at the start:
//    steps s = 0..n-2: send block r-s, receive block r-s-1 and store it.
// A rank sends step s once it has received all of step s-1 (what it sends
// depends on it) and receives step s once it has sent all of step s-1 (so a
// block is never overwritten while an earlier step still has to send it).
// Frames from one neighbour arrive in order (the link layer guarantees it),
// so a frame whose collective id, step or offset is not the next expected
// one is rejected and counted, never mixed into the result.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/error.h"

namespace fw::coll {

enum class Op : uint32_t { kAllReduce = 1, kAllGather = 2 };

inline constexpr uint32_t kFrameMagic = 0x4f434c56;  // "VLCO" as little-endian bytes
inline constexpr uint32_t kMaxRanks = 64;

// Header at the start of every collective frame (little-endian).
struct FrameHeader {
  uint32_t magic;          // kFrameMagic
  uint32_t collective_id;
  uint32_t step;
  uint32_t offset;         // bytes into the step's block
  uint32_t length;         // payload bytes after the header, a multiple of 4
  uint32_t reserved;
};
static_assert(sizeof(FrameHeader) == 24);

struct Plan {
  Op op = Op::kAllReduce;
  uint32_t collective_id = 0;
  uint32_t ranks = 0;
  uint32_t rank = 0;
  uint64_t bytes = 0;             // input bytes per rank
  uint32_t max_frame = 0;         // header + payload the link carries per frame
  uint64_t step_timeout_ns = 0;   // no progress in a step for this long: failed
  uint64_t timeout_ns = 0;        // whole collective
};

enum class State : uint8_t { kIdle, kRunning, kDone, kFailed, kTimedOut };

// What to do with a frame the link delivered.
enum class Verdict : uint8_t {
  kConsumed,  // used
  kHold,      // ours but not yet: leave it queued and offer it again later
  kRejected,  // another collective or a stale step: drop it (counted)
};

// Output bytes of a plan (all-reduce: bytes; all-gather: ranks * bytes).
uint64_t output_bytes(Op op, uint32_t ranks, uint64_t bytes);
// Steps of a collective over `ranks` ranks.
uint32_t step_count(Op op, uint32_t ranks);
// The block a rank sends / receives in a step, and its byte range in `out`.
uint32_t send_block(Op op, uint32_t ranks, uint32_t rank, uint32_t step);
uint32_t recv_block(Op op, uint32_t ranks, uint32_t rank, uint32_t step);
void block_range(Op op, uint32_t ranks, uint64_t bytes, uint32_t block, uint64_t* begin,
                 uint64_t* len);
// Checks a plan; fails (kInvalidArgument) with one line naming the field.
vtrn::Error check_plan(const Plan& p);

class Collective {
 public:
  // Starts: copies `in` into its place in `out` and plans the steps. The
  // plan must pass check_plan; in and out stay owned by the caller.
  void start(const Plan& plan, const uint8_t* in, uint8_t* out, uint64_t now_ns);

  // The next frame to send, built into buf (capacity >= max_frame); 0 when
  // nothing may be sent now. After the caller handed it to the link it
  // calls sent(); a frame the link refused is simply built again later.
  uint32_t next_frame(uint8_t* buf, uint32_t capacity);
  void sent(uint64_t now_ns);
  // A frame whose first 4 bytes are kFrameMagic.
  Verdict on_frame(const uint8_t* frame, uint32_t length, uint64_t now_ns);
  // Checks the timeouts; call every turn.
  void poll(uint64_t now_ns);
  // Ends the collective as failed (the caller's reason, e.g. link down).
  void abort_with(const char* reason);

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] bool active() const { return state_ == State::kRunning; }
  [[nodiscard]] const char* reason() const { return reason_; }
  [[nodiscard]] uint32_t collective_id() const { return plan_.collective_id; }
  [[nodiscard]] uint32_t failed_step() const { return failed_step_; }
  [[nodiscard]] uint32_t send_step() const { return send_step_; }
  [[nodiscard]] uint32_t recv_step() const { return recv_step_; }
  [[nodiscard]] uint64_t bytes_sent() const { return bytes_sent_; }
  [[nodiscard]] uint64_t bytes_received() const { return bytes_received_; }
  [[nodiscard]] uint64_t frames_rejected() const { return frames_rejected_; }
  // Counts a frame rejected by the caller (e.g. no collective was running).
  void count_rejected() { ++frames_rejected_; }

 private:
  void finish_if_done();
  void set_failed(State s, uint32_t step, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
  [[nodiscard]] uint32_t payload_max() const;

  Plan plan_{};
  const uint8_t* in_ = nullptr;
  uint8_t* out_ = nullptr;
  uint32_t steps_ = 0;
  State state_ = State::kIdle;
  uint32_t send_step_ = 0;
  uint64_t send_off_ = 0;
  uint32_t pending_len_ = 0;  // payload of the frame built by next_frame, not yet sent()
  uint32_t recv_step_ = 0;
  uint64_t recv_off_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t progress_ns_ = 0;
  uint32_t failed_step_ = 0;
  uint64_t bytes_sent_ = 0, bytes_received_ = 0, frames_rejected_ = 0;
  char reason_[128] = {};
};

}  // namespace fw::coll
