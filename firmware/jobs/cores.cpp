// fw::cores implementation: one record per core, a sequence counter per
// record (odd while its single writer updates it), acquire/release atomics
// so a reader on another core never sees a torn record. See fw/cores.h.
#include "fw/cores.h"

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
  Record r;
};

Line g_lines[kMaxCores];
uint32_t g_count = 0;
Clock g_clock = nullptr;

uint64_t now() { return g_clock ? g_clock() : 0; }

template <typename T>
T load(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <typename T>
void store(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

}  // namespace

void init(uint32_t count, Clock clock) {
  g_clock = clock;
  g_count = count > kMaxCores ? kMaxCores : count;
  const uint64_t t = now();
  for (uint32_t i = 0; i < kMaxCores; ++i) {
    g_lines[i].r = Record{};
    g_lines[i].r.state = kCoreOff;
    g_lines[i].r.since_ns = t;
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

uint32_t count() { return g_count; }

void set_state(uint32_t core, CoreState state, uint32_t intensity_permille) {
  if (core >= g_count || uint32_t(state) > kCoreRunning) return;
  Record& r = g_lines[core].r;
  const uint64_t t = now();
  const uint32_t seq = load(&r.seq);
  store(&r.seq, seq + 1);
  // The odd sequence is visible before any field changes.
  __atomic_thread_fence(__ATOMIC_RELEASE);
  const uint32_t old = load(&r.state);
  const uint64_t since = load(&r.since_ns);
  if (t > since) store(&r.acc_ns[old], load(&r.acc_ns[old]) + (t - since));
  store(&r.since_ns, t);
  store(&r.state, uint32_t(state));
  store(&r.intensity, state == kCoreRunning ? (intensity_permille > 1000 ? 1000u : intensity_permille)
                                            : 0u);
  // Every field is written before the sequence turns even again.
  __atomic_store_n(&r.seq, seq + 2, __ATOMIC_RELEASE);
}

void snapshot(uint32_t core, CoreSnapshot* out) {
  *out = CoreSnapshot{};
  out->state = kCoreOff;
  if (core >= g_count) return;
  const Record& r = g_lines[core].r;
  Record copy;
  for (;;) {
    const uint32_t s0 = __atomic_load_n(&r.seq, __ATOMIC_ACQUIRE);
    if (s0 & 1) continue;  // the writer is mid-update: a few instructions
    copy.state = load(&r.state);
    copy.intensity = load(&r.intensity);
    copy.since_ns = load(&r.since_ns);
    for (int i = 0; i < 3; ++i) copy.acc_ns[i] = load(&r.acc_ns[i]);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&r.seq, __ATOMIC_RELAXED) == s0) break;
  }
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
