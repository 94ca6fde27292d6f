// dma_engine_bench: vtrn-hw's DMA engine model (hw/) serving a host DMA
// queue in a BAR2-shaped buffer, with this process playing the host
// (common/dma HostQueue), against native memcpy of the same sizes between
// the same buffers in the same run. The engine runs on its own thread and
// spins, as vtrn-hw's engine threads do after activity; the host submits
// and reaps by polling. It prints GB/s and the ratio to memcpy for
// host -> HBM, HBM -> host and HBM -> HBM at 1 and 4 MiB, and the 64 B
// descriptor rate in batches of 32.
//
// Goals (issue 13): copies >= 0.5x memcpy; >= 5 M descriptors/s. Printed,
// not asserted. `--seconds S` per case (default 0.5).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <thread>
#include <vector>

#include "vtrn/dma_host.h"
#include "vtrn/hw/dma_engine.h"

using namespace vtrn;
using namespace vtrn::engine;

namespace {

struct NoSignals final : hw::Signals {
  void chip_irq(uint16_t) override {}
  void host_irq() override {}
};

constexpr uint64_t kRamBase = 0x40000000;
constexpr uint64_t kDmaRegion = 0x100000;
constexpr uint32_t kDepth = 256;
constexpr uint64_t kWindow = 0x400000;

uint8_t* page_align(std::vector<uint8_t>& v) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + 4095) & ~uintptr_t(4095));
}

}  // namespace

int main(int argc, char** argv) {
  double secs = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seconds")) secs = atof(argv[i + 1]);
  }
  std::vector<uint8_t> region_buf(kRegionBytes + 4096), bar2_buf((kWindow + (24u << 20)) + 4096),
      ram_buf((64u << 20) + 4096);
  hw::ChipMemory mem;
  mem.region = page_align(region_buf);
  mem.bar2 = page_align(bar2_buf);
  mem.bar2_size = bar2_buf.size() - 4096;
  mem.ram = page_align(ram_buf);
  mem.ram_base = kRamBase;
  mem.ram_size = ram_buf.size() - 4096;
  memset(mem.bar2, 1, mem.bar2_size);
  memset(mem.ram, 2, mem.ram_size);
  NoSignals sig;
  hw::ErrorLog log(mem, sig);
  hw::EngineProps props;
  props.dma_engines = 1;
  props.dma_bytes_per_s = 100ull * 1000000000ull;
  hw::DmaEngine eng(mem, 0, props, sig, log, hw::monotonic_ns);

  memset(mem.bar2 + kDmaRegion, 0, dma::dma_region_bytes(1, kDepth));
  DmaConfig& c = mem.dma(0)->config;
  c.host_queue_mask = 1;
  c.dma_region_offset = kDmaRegion;
  c.queue_count = 1;
  c.depth = kDepth;
  c.host_window_offset = kWindow;
  c.host_window_size = mem.bar2_size - kWindow;
  c.hbm_base = kRamBase;
  c.hbm_size = mem.ram_size;
  __atomic_store_n(&c.config_gen, 1, __ATOMIC_RELEASE);

  std::atomic<bool> stop{false};
  std::thread engine([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      if (!eng.run_pass().worked) __builtin_ia32_pause();
    }
  });
  while (__atomic_load_n(&mem.dma(0)->config_ack, __ATOMIC_ACQUIRE) != 1) {
  }
  uint8_t* q = mem.bar2 + kDmaRegion + dma::kDmaQueuesOffset;
  dma::HostQueue hq(reinterpret_cast<dma::QueueControl*>(q), reinterpret_cast<dma::Descriptor*>(q + dma::kQueueSqOffset),
                    reinterpret_cast<dma::Completion*>(q + dma::cq_offset(kDepth)), kDepth);

  // Runs batches of `batch` descriptors built by `make` until `secs` passed;
  // returns descriptors per second and bytes per second.
  auto run = [&](uint32_t batch, auto make, uint64_t bytes_per_desc, double* bps) {
    std::vector<dma::Descriptor> d(batch);
    dma::Completion done[kDepth];
    uint64_t descs = 0;
    const uint64_t t0 = hw::monotonic_ns(), until = t0 + uint64_t(secs * 1e9);
    uint32_t bad = 0;
    while (hw::monotonic_ns() < until) {
      for (uint32_t i = 0; i < batch; ++i) d[i] = make(i);
      while (!hq.submit(d.data(), batch)) {
      }
      uint32_t got = 0;
      while (got < batch) {
        const uint32_t n = hq.reap(done, kDepth);
        for (uint32_t i = 0; i < n; ++i) bad += done[i].status != dma::kOk;
        got += n;
      }
      descs += batch;
    }
    const double s = double(hw::monotonic_ns() - t0) / 1e9;
    if (bad) fprintf(stderr, "dma_engine_bench: %u completions failed\n", bad);
    *bps = double(descs * bytes_per_desc) / s;
    return bad ? -1.0 : double(descs) / s;
  };
  auto memcpy_gbps = [&](uint8_t* dst, const uint8_t* src, uint32_t n) {
    uint64_t bytes = 0;
    const uint64_t t0 = hw::monotonic_ns(), until = t0 + uint64_t(secs * 1e9);
    while (hw::monotonic_ns() < until) {
      memcpy(dst, src, n);
      bytes += n;
    }
    return double(bytes) / double(hw::monotonic_ns() - t0);
  };
  int failed = 0;
  const uint32_t one = dma::kDescFirst | dma::kDescLast;
  for (uint32_t size : {1u << 20, 4u << 20}) {
    struct Dir {
      const char* name;
      uint64_t src, dst;
      uint32_t flags;
      uint8_t* psrc;
      uint8_t* pdst;
    } dirs[] = {
        {"host_to_hbm", 0, kRamBase + (8u << 20), dma::kDescSrcHost, mem.bar2 + kWindow, mem.ram + (8u << 20)},
        {"hbm_to_host", kRamBase + (8u << 20), 8u << 20, dma::kDescDstHost, mem.ram + (8u << 20), mem.bar2 + kWindow + (8u << 20)},
        {"hbm_to_hbm", kRamBase + (8u << 20), kRamBase + (32u << 20), 0, mem.ram + (8u << 20), mem.ram + (32u << 20)},
    };
    for (const Dir& dir : dirs) {
      double bps = 0;
      const double dps = run(4, [&](uint32_t) { return dma::Descriptor{dir.src, dir.dst, size, one | dir.flags, 1}; },
                             size, &bps);
      if (dps < 0) ++failed;
      const double ref = memcpy_gbps(dir.pdst, dir.psrc, size);
      printf("dma_engine dir=%s size=%u engine_gbps=%.2f memcpy_gbps=%.2f ratio=%.3f\n", dir.name, size, bps / 1e9,
             ref, bps / 1e9 / ref);
    }
  }
  double bps = 0;
  const double rate = run(32, [&](uint32_t i) {
    return dma::Descriptor{uint64_t(i) * 64, kRamBase + (8u << 20) + uint64_t(i) * 64, 64, one | dma::kDescSrcHost, i};
  }, 64, &bps);
  if (rate < 0) ++failed;
  printf("dma_engine desc_bytes=64 batch=32 descriptors_per_s=%.0f mdesc_per_s=%.2f\n", rate, rate / 1e6);
  stop = true;
  engine.join();
  printf("dma_engine_bench: done cases=7 failed=%d\n", failed);
  return failed ? 1 : 0;
}
