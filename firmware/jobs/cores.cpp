// fw::cores implementation: one record per core under the host interface's
// seqlock (vtrn/seqlock.h; here between cores, not with the host): its
// single writer, the core itself, keeps its own copy and publishes it whole,
// so a reader on another core never sees a torn record. See fw/cores.h.
#include "fw/cores.h"

#include "vtrn/seqlock.h"

namespace fw::cores {
namespace {

struct Record {
  uint32_t seq;
  uint32_t state;
  uint32_t intensity;
  uint32_t pad;
  uint64_t since_ns;  // when `state` was entered
  uint64_t acc_ns[3];  // accumulated per CoreState
};

// One cache line per core: the records are written by different cores.
struct alignas(64) Line {
  Record shared;  // what readers copy
  Record mine;    // the owner's own copy (only the owner touches it)
  vtrn::hostif::SeqlockWriter<Record> writer;
};

Line g_lines[kMaxCores];
uint32_t g_count = 0;
Clock g_clock = nullptr;

uint64_t now() { return g_clock ? g_clock() : 0; }

}  // namespace

void init(uint32_t count, Clock clock) {
  g_clock = clock;
  g_count = count > kMaxCores ? kMaxCores : count;
  const uint64_t t = now();
  for (uint32_t i = 0; i < kMaxCores; ++i) {
    Line& l = g_lines[i];
    l.mine = Record{};
    l.mine.state = kCoreOff;
    l.mine.since_ns = t;
    l.writer.attach(&l.shared);
    l.writer.publish(l.mine);
  }
}

uint32_t count() { return g_count; }

void set_state(uint32_t core, CoreState state, uint32_t intensity_permille) {
  if (core >= g_count || uint32_t(state) > kCoreRunning) return;
  Line& l = g_lines[core];
  Record& r = l.mine;
  const uint64_t t = now();
  if (t > r.since_ns) r.acc_ns[r.state] += t - r.since_ns;
  r.since_ns = t;
  r.state = uint32_t(state);
  r.intensity = state == kCoreRunning ? (intensity_permille > 1000 ? 1000u : intensity_permille) : 0u;
  l.writer.publish(r);
}

void snapshot(uint32_t core, CoreSnapshot* out) {
  *out = CoreSnapshot{};
  out->state = kCoreOff;
  if (core >= g_count) return;
  // The writer is mid-update for a few instructions at most: wait it out.
  Record copy;
  vtrn::hostif::SeqlockAttempts spin(UINT32_MAX);
  if (!vtrn::hostif::seqlock_read(&g_lines[core].shared, &copy, spin)) return;
  const uint32_t st = copy.state <= kCoreRunning ? copy.state : uint32_t(kCoreOff);
  const uint64_t t = now();
  if (t > copy.since_ns) copy.acc_ns[st] += t - copy.since_ns;
  out->state = st;
  out->intensity_permille = copy.intensity;
  out->off_ns = copy.acc_ns[kCoreOff];
  out->idle_ns = copy.acc_ns[kCoreIdle];
  out->busy_ns = copy.acc_ns[kCoreRunning];
}

}  // namespace fw::cores
