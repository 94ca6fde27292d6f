// vtrn_power_snapshot_bench: how many power-telemetry snapshots a client can
// read per second through libvtrn (drv::HostInterface::read_power: seqlock
// copy of the kRegionPower block plus validation) against a plain memcpy of
// the same number of bytes, in the same run, over a BAR2 image in ordinary
// memory laid out exactly as the firmware publishes it. Two cases: a quiet
// block (the firmware refreshes it every 100 ms, so almost every read is
// uncontended) and a writer thread rewriting it back to back (worst case:
// retries). Prints one JSON object; no thresholds.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "vtrn/drv/host_interface.h"
#include "vtrn/hostif.h"
#include "vtrn/layout.h"
#include "vtrn/power.h"
#include "vtrn/seqlock.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace vh = vtrn::hostif;
namespace vp = vtrn::power;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

vp::PowerTelemetry sample_block() {
  vp::PowerManager pm;
  if (!pm.init(vp::dev_board_config(2, 4), nullptr, 0).ok()) return {};
  for (uint64_t t = 1; t <= 50; ++t) pm.step(t * 100000000ull);
  vp::PowerTelemetry b;
  pm.snapshot(&b);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const double run_s = argc > 1 ? atof(argv[1]) : 0.5;
  constexpr uint64_t kBar2 = 16ull << 20;
  std::vector<uint8_t> bar2(kBar2);
  auto* hdr = reinterpret_cast<vh::FwHeader*>(bar2.data());
  hdr->magic = vh::kMagic;
  hdr->abi_major = vh::kAbiMajor;
  hdr->abi_minor = vh::kAbiMinor;
  hdr->bar2_size = kBar2;
  if (!vh::publish_layout(hdr, kBar2)) return 1;
  hdr->capabilities = vh::kCapControlQueue | vh::kCapLogRing | vh::kCapTelemetry |
                      vh::kCapPanicRecord | vh::kCapPower;
  hdr->state = vh::kStateReady;
  auto* block = reinterpret_cast<vp::PowerTelemetry*>(bar2.data() + vh::kPowerOffset);
  const vp::PowerTelemetry src = sample_block();
  vh::SeqlockWriter<vp::PowerTelemetry> publisher;
  publisher.attach(block);
  publisher.publish(src);

  drv::HostInterface hif;
  hif.attach(bar2.data(), kBar2);
  if (const drv::Error err = hif.bring_up(); !err.ok()) {
    fprintf(stderr, "bring_up: %s\n", err.detail().c_str());
    return 1;
  }

  auto measure_read = [&](uint64_t* failures) {
    vp::PowerTelemetry out;
    uint64_t n = 0;
    const auto t0 = Clock::now();
    auto t1 = t0;
    do {
      for (int i = 0; i < 1000; ++i) {
        if (!hif.read_power(&out).ok()) ++*failures;
      }
      n += 1000;
      t1 = Clock::now();
    } while (seconds(t0, t1) < run_s);
    return double(n) / seconds(t0, t1);
  };
  auto measure_memcpy = [&] {
    static vp::PowerTelemetry out;
    uint64_t n = 0;
    const auto t0 = Clock::now();
    auto t1 = t0;
    do {
      for (int i = 0; i < 1000; ++i) {
        memcpy(&out, block, sizeof out);
        asm volatile("" ::"r"(&out) : "memory");  // keep every copy
      }
      n += 1000;
      t1 = Clock::now();
    } while (seconds(t0, t1) < run_s);
    return double(n) / seconds(t0, t1);
  };

  uint64_t fail_quiet = 0, fail_busy = 0;
  const double memcpy_rate = measure_memcpy();
  const double quiet_rate = measure_read(&fail_quiet);
  std::atomic<bool> stop{false};
  uint64_t writes = 0;
  std::thread writer([&] {
    vp::PowerTelemetry v = src;
    while (!stop.load(std::memory_order_relaxed)) {
      ++v.timestamp_ns;
      publisher.publish(v);
      ++writes;
    }
  });
  const double busy_rate = measure_read(&fail_busy);
  stop = true;
  writer.join();
  printf("{\"block_bytes\": %zu, \"memcpy_per_s\": %.0f, \"read_power_per_s\": %.0f, "
         "\"read_power_vs_memcpy\": %.3f, \"read_power_contended_per_s\": %.0f, "
         "\"contended_vs_memcpy\": %.3f, \"contended_writes\": %llu, \"failed_reads\": %llu, "
         "\"failed_reads_contended\": %llu}\n",
         sizeof(vp::PowerTelemetry), memcpy_rate, quiet_rate, quiet_rate / memcpy_rate, busy_rate,
         busy_rate / memcpy_rate, (unsigned long long)writes,
         (unsigned long long)fail_quiet, (unsigned long long)fail_busy);
  return 0;
}
