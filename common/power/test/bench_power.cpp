// power_bench: host cost of one PowerManager step (integration, thermal,
// window statistics, governor every 10th step) against a trivial reference
// loop of comparable memory traffic, in the same run so the ratio is
// meaningful on a noisy machine. Prints ns per operation and the ratio.
#include <stdint.h>
#include <stdio.h>

#include <chrono>

#include "vtrn/power.h"
#include "vtrn/seqlock.h"

using namespace vtrn::power;

namespace {

using Clock = std::chrono::steady_clock;

double ns_per(Clock::time_point a, Clock::time_point b, uint64_t n) {
  return std::chrono::duration<double, std::nano>(b - a).count() / static_cast<double>(n);
}

}  // namespace

int main() {
  constexpr uint64_t kN = 200000;
  constexpr uint64_t kTick = 10000000;  // 10 ms simulated: governor every 10 steps
  static PowerManager pm;
  if (!pm.init(dev_board_config(8, 16), nullptr, 0).ok()) return 1;
  for (uint32_t c = 0; c < 8; ++c) (void)pm.set_core_state(c, CoreState::kRunning, 0);

  auto t0 = Clock::now();
  uint64_t now = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    now += kTick;
    (void)pm.set_core_state(i % 8, (i & 1) ? CoreState::kIdle : CoreState::kRunning, now - 1000);
    pm.step(now);
  }
  auto t1 = Clock::now();

  // Reference: sum an array the size of the manager's per-step working set.
  static volatile uint64_t sink;
  static uint64_t words[64];
  for (uint64_t i = 0; i < 64; ++i) words[i] = i;
  auto t2 = Clock::now();
  for (uint64_t i = 0; i < kN; ++i) {
    uint64_t s = 0;
    for (uint64_t w : words) s += w ^ i;
    sink = s;
  }
  auto t3 = Clock::now();

  static PowerTelemetry snap, shared;
  static vtrn::hostif::SeqlockWriter<PowerTelemetry> writer;
  writer.attach(&shared);
  auto t4 = Clock::now();
  for (uint64_t i = 0; i < kN; ++i) {
    pm.snapshot(&snap);
    writer.publish(snap);
  }
  auto t5 = Clock::now();

  const double step = ns_per(t0, t1, kN), ref = ns_per(t2, t3, kN), tel = ns_per(t4, t5, kN);
  printf("power_bench: %llu iterations (8 cores, 16 ports)\n", static_cast<unsigned long long>(kN));
  printf("  model step + state change : %8.1f ns\n", step);
  printf("  snapshot + seqlock write  : %8.1f ns (%zu bytes)\n", tel, sizeof(PowerTelemetry));
  printf("  reference loop (64 words) : %8.1f ns\n", ref);
  printf("  ratio step/reference      : %8.1f\n", step / ref);
  printf("  (final pstate %u, energy %llu uJ, checksum %llu)\n", pm.pstate(),
         static_cast<unsigned long long>(pm.energy_uj()), static_cast<unsigned long long>(sink));
  return 0;
}
