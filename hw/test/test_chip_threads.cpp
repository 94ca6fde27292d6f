// Host tests of vtrn::hw::ChipHw's engine threads, without QEMU: the chip's
// RAM and BAR2 are memfds as the launcher creates them, this test plays the
// firmware (DmaConfig, the chip's doorbell vectors) and the host (common/dma
// HostQueue over BAR2, the DMA doorbell eventfd). With no spin after work
// every round finds the engines asleep, so each one is a wake-up: a lost one
// shows up as a completion that never comes (the wait gives up after 5 s;
// how long a round takes is not asserted).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "vtrn/dma_host.h"
#include "vtrn/drv/fd.h"
#include "vtrn/hw/chip.h"

extern "C" {
#include <cmocka.h>
}

using namespace vtrn;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 32ull << 20;
constexpr uint64_t kBar2Size = 4ull << 20;
constexpr uint64_t kDmaRegion = 0x100000;
constexpr uint32_t kQueues = 2;
constexpr uint32_t kDepth = 16;
constexpr uint64_t kWindowOffset = 0x200000;
constexpr uint64_t kWindowSize = 0x200000;
constexpr uint64_t kGiveUpNs = 5'000'000'000ull;

void ring(int fd) {
  const uint64_t one = 1;
  assert_int_equal(write(fd, &one, sizeof one), sizeof one);
}

struct Chip {
  char dir[32] = "/tmp/vtrn-chip-threads-XXXXXX";
  drv::Mapping ram, bar2;
  drv::UniqueFd doorbell, host_irq;
  hw::ChipHw hw;
  dma::HostQueue host[kQueues];

  // Two DMA engines, engine e serving host queue e; `spin_ns` after work.
  explicit Chip(uint64_t spin_ns) {
    assert_non_null(mkdtemp(dir));
    const int ram_fd = memfd_create("ram", MFD_CLOEXEC), bar2_fd = memfd_create("bar2", MFD_CLOEXEC);
    assert_int_equal(ftruncate(ram_fd, kRamSize), 0);
    assert_int_equal(ftruncate(bar2_fd, kBar2Size), 0);
    assert_true(ram.map(ram_fd, kRamSize).ok());
    assert_true(bar2.map(bar2_fd, kBar2Size).ok());
    doorbell.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    host_irq.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    hw::ChipFds f;
    f.ram_fd = ram_fd;
    f.ram_base = kRamBase;
    f.bar2_fd = bar2_fd;
    f.doorbell_fd = dup(doorbell.get());
    f.host_irq_fd = dup(host_irq.get());
    f.socket = std::string(dir) + "/engines.sock";
    hw::EngineProps props;
    props.dma_engines = 2;
    props.tensor_engines = 0;
    props.dma_bytes_per_s = 100ull * 1000000000ull;
    std::string err;
    assert_true(hw.start(f, props, spin_ns, &err));
    for (uint32_t e = 0; e < 2; ++e) configure(e);
    for (uint32_t q = 0; q < kQueues; ++q) {
      uint8_t* b = bar2.data() + kDmaRegion + dma::kDmaQueuesOffset + q * dma::queue_stride(kDepth);
      host[q] = dma::HostQueue(reinterpret_cast<dma::QueueControl*>(b),
                               reinterpret_cast<dma::Descriptor*>(b + dma::kQueueSqOffset),
                               reinterpret_cast<dma::Completion*>(b + dma::cq_offset(kDepth)), kDepth);
    }
  }
  ~Chip() {
    hw.stop();
    unlink((std::string(dir) + "/engines.sock").c_str());
    rmdir(dir);
  }

  void configure(uint32_t e) {
    engine::DmaEngineBlock* b = hw.memory().dma(e);
    engine::DmaConfig c{};
    c.host_queue_mask = 1u << e;
    c.dma_region_offset = kDmaRegion;
    c.queue_count = kQueues;
    c.depth = kDepth;
    c.host_window_offset = kWindowOffset;
    c.host_window_size = kWindowSize;
    c.hbm_base = kRamBase;
    c.hbm_size = kRamSize;
    memcpy(&b->config, &c, sizeof c);
    __atomic_store_n(&b->config.config_gen, 1u, __ATOMIC_RELEASE);
    const uint64_t t0 = hw::monotonic_ns();
    while (__atomic_load_n(&b->config_ack, __ATOMIC_ACQUIRE) != 1) {
      assert_true(hw::monotonic_ns() - t0 < kGiveUpNs);
      ring(hw.chip_doorbell_fd(uint16_t(engine::kVectorDma0 + e)));
      usleep(1000);
    }
    assert_int_equal(b->config_status, engine::kEngineOk);
  }

  // One 64 B host -> HBM copy on queue q, one doorbell; its completion.
  dma::Completion copy(uint32_t q, uint32_t round) {
    uint8_t* window = bar2.data() + kWindowOffset;
    for (uint32_t i = 0; i < 64; ++i) window[q * 4096 + i] = uint8_t(round * 7 + i + q);
    const dma::Descriptor d{q * 4096ull, kRamBase + (1u << 20) + q * 4096ull, 64,
                            dma::kDescFirst | dma::kDescLast | dma::kDescSrcHost, round};
    assert_true(host[q].submit(&d, 1));
    ring(doorbell.get());
    dma::Completion c{};
    const uint64_t t0 = hw::monotonic_ns();
    while (host[q].reap(&c, 1) == 0) {
      assert_true(hw::monotonic_ns() - t0 < kGiveUpNs);
      const timespec nap{0, 20'000};
      nanosleep(&nap, nullptr);
    }
    assert_memory_equal(ram.data() + (1u << 20) + q * 4096, window + q * 4096, 64);
    return c;
  }
};

void test_host_doorbell_wakes_the_sleeping_engine_that_serves_the_queue(void**) {
  Chip chip(0);
  for (uint32_t round = 0; round < 300; ++round) {
    const uint32_t q = round % kQueues;
    const dma::Completion c = chip.copy(q, round);
    assert_int_equal(c.cookie, round);
    assert_int_equal(c.status, dma::kOk);
    assert_int_equal(c.bytes, 64);
  }
  for (uint32_t e = 0; e < 2; ++e) assert_int_equal(chip.hw.memory().dma(e)->stats.descriptors, 150);
}

void test_doorbells_rung_while_the_engines_spin_are_not_lost_when_they_sleep(void**) {
  // Spinning 2 ms after work: rounds alternate between doorbells that land
  // while the engine spins and (after the pause) ones that must wake it.
  Chip chip(2'000'000);
  for (uint32_t round = 0; round < 40; ++round) {
    const uint32_t q = round % kQueues;
    assert_int_equal(chip.copy(q, round).status, dma::kOk);
    if (round % 4 == 3) usleep(5000);
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_doorbell_wakes_the_sleeping_engine_that_serves_the_queue),
      cmocka_unit_test(test_doorbells_rung_while_the_engines_spin_are_not_lost_when_they_sleep),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
