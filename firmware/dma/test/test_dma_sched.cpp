// Host unit tests of the DMA service's portable half (fw/dma_sched.h): HBM
// range derivation, region setup as the host driver will validate it, and
// the round-robin scheduler (fairness, budgets, latched and stalled queues,
// reset reporting, busy-time accounting). The queues are real
// vtrn::dma::Queue objects over a region in ordinary memory, driven from the
// host side with vtrn::dma::HostQueue, exactly as over BAR2.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "fw/dma_sched.h"
#include "vtrn/dma_host.h"

using namespace vtrn::dma;
using fw::dma::Budget;
using fw::dma::HbmInputs;
using fw::dma::HbmRange;
using fw::dma::PassResult;
using fw::dma::Scheduler;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint32_t kDepth = 16;
constexpr uint64_t kWindow = 4 * kMiB;
constexpr uint64_t kHbmBase = 0x44000000ull;
constexpr uint64_t kHbmSize = 8 * kMiB;
constexpr uint32_t kOne = kDescFirst | kDescLast;

uint64_t g_clock = 0;
uint64_t fake_clock() {
  g_clock += 1000;
  return g_clock;
}

struct Recorder final : fw::dma::Observer {
  void on_latched(uint32_t q, QueueError e) override {
    latched_queue = int(q);
    latched_error = e;
    ++latches;
  }
  void on_reset(uint32_t q) override {
    reset_queue = int(q);
    ++resets;
  }
  int latched_queue = -1;
  QueueError latched_error = kQueueOk;
  int latches = 0;
  int reset_queue = -1;
  int resets = 0;
};

struct MemCopier final : Copier {
  void copy(void* dst, const void* src, size_t n) override { memcpy(dst, src, n); }
};

// A DMA region, host window and HBM in host memory, the scheduler over it
// and one HostQueue per queue for the host's side.
struct Rig {
  uint32_t queues;
  uint64_t region_size;
  uint8_t* region;
  std::vector<uint8_t> window = std::vector<uint8_t>(kWindow);
  std::vector<uint8_t> hbm = std::vector<uint8_t>(kHbmSize);
  AddressMap map{};
  Scheduler sched;
  Recorder rec;
  MemCopier copier;
  HostQueue hq[kMaxQueues];

  explicit Rig(uint32_t n, Budget budget = Budget{}) : queues(n) {
    region_size = dma_region_bytes(n, kDepth);
    region = static_cast<uint8_t*>(aligned_alloc(4096, region_size));
    memset(region, 0xA5, region_size);  // stale garbage init must clear
    map = AddressMap{window.data(), kWindow, hbm.data(), kHbmBase, kHbmSize, nullptr};
    vtrn::Error err;
    g_clock = 0;
    const bool ok = (err = sched.init(region, region_size, n, kDepth, HbmRange{kHbmBase, kHbmSize},
                               budget, fake_clock, &rec)).ok();
    if (!ok) fail_msg("init: %s", err.detail());
    for (uint32_t i = 0; i < n; ++i) hq[i] = HostQueue(ctl(i), sq(i), cq(i), kDepth);
  }
  ~Rig() { free(region); }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  uint8_t* block(uint32_t q) const { return region + kDmaQueuesOffset + q * queue_stride(kDepth); }
  QueueControl* ctl(uint32_t q) const { return reinterpret_cast<QueueControl*>(block(q)); }
  QueueStats* stats(uint32_t q) const {
    return reinterpret_cast<QueueStats*>(block(q) + kQueueStatsOffset);
  }
  Descriptor* sq(uint32_t q) const { return reinterpret_cast<Descriptor*>(block(q) + kQueueSqOffset); }
  Completion* cq(uint32_t q) const {
    return reinterpret_cast<Completion*>(block(q) + cq_offset(kDepth));
  }

  // n single-descriptor chains host window -> HBM of `len` bytes each.
  void submit(uint32_t q, uint32_t n, uint32_t len = 64, uint32_t extra_flags = 0) {
    std::vector<Descriptor> d(n);
    for (uint32_t i = 0; i < n; ++i) {
      d[i] = Descriptor{uint64_t(i) * len % (kWindow - len), kHbmBase + uint64_t(i) * len % (kHbmSize - len),
                        len, kOne | kDescSrcHost | extra_flags, 100 + i};
    }
    assert_true(hq[q].submit(d.data(), n));
  }
  uint32_t reap(uint32_t q) {
    Completion c[kDepth];
    uint32_t total = 0;
    for (uint32_t n; (n = hq[q].reap(c, kDepth)) != 0;) {
      for (uint32_t i = 0; i < n; ++i) assert_int_equal(c[i].status, kOk);
      total += n;
    }
    return total;
  }
  PassResult pass(uint64_t wake_gen = 0) { return sched.run_pass(map, copier, wake_gen); }
};

// HBM range

void test_hbm_sits_above_the_firmware_ram(void**) {
  HbmRange r;
  vtrn::Error err;
  const HbmInputs in{kRamBase, 320 * kMiB, 256 * kMiB, 0x40400000ull};
  assert_true((err = fw::dma::derive_hbm(in, &r)).ok());
  assert_int_equal(r.base, kRamBase + 64 * kMiB);
  assert_int_equal(r.size, 256 * kMiB);
}

void test_hbm_rejects_ram_smaller_than_firmware_plus_hbm(void**) {
  HbmRange r{1, 1};
  vtrn::Error err;
  const HbmInputs in{kRamBase, 319 * kMiB, 256 * kMiB, 0x40400000ull};
  assert_false((err = fw::dma::derive_hbm(in, &r)).ok());
  assert_non_null(strstr(err.detail(), "RAM is 319 MiB"));
  assert_int_equal(r.base, 1);
}

void test_hbm_rejects_firmware_reaching_into_it(void**) {
  HbmRange r;
  vtrn::Error err;
  const HbmInputs in{kRamBase, 320 * kMiB, 256 * kMiB, kRamBase + 64 * kMiB + 1};
  assert_false((err = fw::dma::derive_hbm(in, &r)).ok());
  assert_non_null(strstr(err.detail(), "firmware memory ends"));
}

void test_hbm_rejects_zero_size_and_wrapping_ranges(void**) {
  HbmRange r;
  vtrn::Error err;
  assert_false((err = fw::dma::derive_hbm(HbmInputs{kRamBase, 320 * kMiB, 0, 0}, &r)).ok());
  assert_false(
      (err = fw::dma::derive_hbm(HbmInputs{UINT64_MAX - 32 * kMiB, 128 * kMiB, 16 * kMiB, 0}, &r)).ok());
  assert_false(
      (err = fw::dma::derive_hbm(HbmInputs{kRamBase, UINT64_MAX, UINT64_MAX - kRamBase, 0}, &r)).ok());
}

// region setup

void test_region_header_passes_the_host_check(void**) {
  Rig rig(3);
  DmaRegionHeader h;
  memcpy(&h, rig.region, sizeof h);
  assert_true(validate_dma_region(h, rig.region_size).ok());
  assert_int_equal(h.queue_count, 3);
  assert_int_equal(h.depth, kDepth);
  assert_int_equal(h.hbm_base, kHbmBase);
  assert_int_equal(h.hbm_size, kHbmSize);
  assert_int_equal(h.max_desc_bytes, kMaxDescBytes);
  assert_int_equal(h.max_chain_descs, kMaxChainDescs);
  for (uint32_t q = 0; q < 3; ++q) {
    assert_int_equal(rig.ctl(q)->sq_prod.value, 0);
    assert_int_equal(rig.ctl(q)->cq_prod.value, 0);
    assert_int_equal(rig.ctl(q)->error.value, 0);
    assert_int_equal(rig.ctl(q)->reset_ack.value, 0);
    assert_int_equal(rig.ctl(q)->irq_armed.value, 0);
    assert_int_equal(rig.stats(q)->descriptors, 0);
  }
}

void test_init_rejects_bad_geometry_and_short_region(void**) {
  std::vector<uint8_t> buf(dma_region_bytes(2, kDepth));
  Scheduler s;
  vtrn::Error err;
  const HbmRange hbm{kHbmBase, kHbmSize};
  assert_false((err = s.init(buf.data(), buf.size(), 0, kDepth, hbm, Budget{}, nullptr, nullptr)).ok());
  assert_false(
      (err = s.init(buf.data(), buf.size(), kMaxQueues + 1, kDepth, hbm, Budget{}, nullptr, nullptr)).ok());
  assert_false((err = s.init(buf.data(), buf.size(), 1, 24, hbm, Budget{}, nullptr, nullptr)).ok());
  assert_non_null(strstr(err.detail(), "power of two"));
  assert_false((err = s.init(buf.data(), buf.size(), 3, kDepth, hbm, Budget{}, nullptr, nullptr)).ok());
  assert_false(
      (err = s.init(buf.data(), buf.size(), 2, kDepth, hbm, Budget{0, 0, 1}, nullptr, nullptr)).ok());
  assert_int_equal(s.queue_count(), 0);
}

// scheduling

void test_pass_gives_each_busy_queue_the_same_budget(void**) {
  Rig rig(3, Budget{4, 2, 1 << 30});
  for (uint32_t q = 0; q < 3; ++q) rig.submit(q, 10);
  PassResult r = rig.pass();
  assert_int_equal(r.queues_polled, 3);
  assert_int_equal(r.descriptors, 12);
  for (uint32_t q = 0; q < 3; ++q) assert_int_equal(rig.ctl(q)->sq_cons.value, 4);
  r = rig.pass();
  for (uint32_t q = 0; q < 3; ++q) assert_int_equal(rig.ctl(q)->sq_cons.value, 8);
  r = rig.pass();
  assert_int_equal(r.descriptors, 6);
  for (uint32_t q = 0; q < 3; ++q) assert_int_equal(rig.reap(q), 10);
  assert_false(rig.sched.wants_run(0));
}

void test_pass_start_rotates_between_queues(void**) {
  // The byte budget ends each turn after one 1 MiB descriptor; bytes land
  // in HBM in service order, so the order of turns is observable.
  Rig rig(2, Budget{8, 1, kMiB});
  for (uint32_t q = 0; q < 2; ++q) {
    for (uint32_t i = 0; i < 2; ++i) {
      const Descriptor d{0, kHbmBase, uint32_t(kMiB), kOne | kDescSrcHost, i};
      assert_true(rig.hq[q].submit(&d, 1));
    }
  }
  // Queue 1 copies from a second buffer (the host may rewrite descriptors
  // it has not seen consumed yet), so each queue leaves its own byte.
  memset(rig.window.data(), 'a', kMiB);
  memset(rig.window.data() + kMiB, 'b', kMiB);
  for (uint32_t i = 0; i < 2; ++i) rig.sq(1)[i].src = kMiB;
  rig.pass();  // q0 then q1: HBM ends with q1's bytes
  assert_int_equal(rig.hbm[0], 'b');
  rig.pass();  // q1 then q0
  assert_int_equal(rig.hbm[0], 'a');
  assert_int_equal(rig.reap(0), 2);
  assert_int_equal(rig.reap(1), 2);
}

void test_byte_budget_ends_a_turn_between_chunks(void**) {
  Rig rig(1, Budget{32, 1, 2 * kMiB});
  rig.submit(0, 5, uint32_t(kMiB));
  PassResult r = rig.pass();
  assert_int_equal(r.descriptors, 2);
  assert_int_equal(rig.sched.totals().bytes, 2 * kMiB);
  assert_true(rig.sched.wants_run(0));
  assert_false(rig.sched.stalled());
}

void test_latched_queue_is_reported_once_and_others_keep_working(void**) {
  Rig rig(2);
  rig.ctl(0)->sq_prod.value = kDepth + 5;  // the host jumps its index
  rig.submit(1, 3);
  PassResult r = rig.pass();
  assert_int_equal(rig.rec.latches, 1);
  assert_int_equal(rig.rec.latched_queue, 0);
  assert_int_equal(rig.rec.latched_error, kQueueSqIndexJump);
  assert_int_equal(rig.ctl(0)->error.value, kQueueSqIndexJump);
  assert_int_equal(r.descriptors, 3);
  assert_int_equal(rig.reap(1), 3);

  rig.submit(1, 2);
  r = rig.pass();
  assert_int_equal(r.descriptors, 2);
  assert_int_equal(rig.rec.latches, 1);
  assert_false(rig.sched.wants_run(0));
  assert_int_equal(rig.sched.totals().latches, 1);
}

void test_reset_is_reported_and_revives_the_queue(void**) {
  Rig rig(2);
  rig.ctl(0)->sq_prod.value = kDepth + 5;
  rig.pass();
  assert_int_equal(rig.rec.latches, 1);
  rig.hq[0] = HostQueue(rig.ctl(0), rig.sq(0), rig.cq(0), kDepth);
  rig.hq[0].begin_reset();
  assert_true(rig.sched.wants_run(0));
  rig.pass();
  assert_int_equal(rig.rec.resets, 1);
  assert_int_equal(rig.rec.reset_queue, 0);
  assert_true(rig.hq[0].reset_done());
  assert_int_equal(rig.ctl(0)->error.value, kQueueOk);
  rig.submit(0, 4);
  const PassResult r = rig.pass();
  assert_int_equal(r.descriptors, 4);
  assert_int_equal(rig.reap(0), 4);
  assert_int_equal(rig.rec.latches, 1);
}

void test_full_completion_ring_stalls_without_spinning(void**) {
  Rig rig(1, Budget{64, 8, 1 << 30});
  rig.submit(0, kDepth);
  rig.pass(7);
  assert_int_equal(rig.ctl(0)->cq_prod.value, kDepth);
  rig.submit(0, 3);  // sq has room again, cq is full
  PassResult r = rig.pass(7);
  assert_int_equal(r.descriptors, 0);
  assert_true(rig.sched.stalled());
  assert_false(rig.sched.wants_run(7));  // nothing changed: the loop may sleep
  assert_true(rig.sched.wants_run(8));   // an interrupt was taken: look again
  // The host consumes completions: the queue is runnable without a wake-up.
  assert_int_equal(rig.reap(0), kDepth);
  assert_true(rig.sched.wants_run(7));
  r = rig.pass(7);
  assert_int_equal(r.descriptors, 3);
  assert_false(rig.sched.stalled());
  assert_int_equal(rig.reap(0), 3);
}

void test_busy_time_is_charged_only_to_queues_that_worked(void**) {
  Rig rig(2);
  rig.submit(1, 2);
  rig.pass();
  // fake_clock advances 1000 ns per reading; one turn = two readings.
  assert_int_equal(rig.stats(1)->busy_ns, 1000);
  assert_int_equal(rig.stats(0)->busy_ns, 0);
  assert_int_equal(rig.stats(1)->descriptors, 2);
  assert_int_equal(rig.sched.totals().busy_ns, 1000);
  assert_int_equal(rig.sched.totals().descriptors, 2);
  assert_int_equal(rig.sched.totals().completions, 2);
  assert_int_equal(rig.sched.totals().bytes, 128);
}

void test_irq_only_for_flagged_chains_on_armed_queues(void**) {
  Rig rig(2);
  rig.submit(0, 1, 64, kDescIrq);
  assert_false(rig.pass().irq);  // not armed
  rig.hq[1].arm_irq(true);
  rig.submit(1, 1, 64);
  assert_false(rig.pass().irq);  // armed, no kDescIrq
  rig.submit(1, 1, 64, kDescIrq);
  assert_true(rig.pass().irq);
  assert_int_equal(rig.sched.totals().irq_passes, 1);
}

void test_queue_error_names_cover_the_abi(void**) {
  assert_string_equal(fw::dma::queue_error_name(kQueueSqIndexJump), "sq index jump");
  assert_string_equal(fw::dma::queue_error_name(kQueueSqIndexBackward), "sq index backward");
  assert_string_equal(fw::dma::queue_error_name(kQueueCqConsumerAhead), "cq consumer ahead");
  assert_string_equal(fw::dma::queue_error_name(99), "unknown");
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hbm_sits_above_the_firmware_ram),
      cmocka_unit_test(test_hbm_rejects_ram_smaller_than_firmware_plus_hbm),
      cmocka_unit_test(test_hbm_rejects_firmware_reaching_into_it),
      cmocka_unit_test(test_hbm_rejects_zero_size_and_wrapping_ranges),
      cmocka_unit_test(test_region_header_passes_the_host_check),
      cmocka_unit_test(test_init_rejects_bad_geometry_and_short_region),
      cmocka_unit_test(test_pass_gives_each_busy_queue_the_same_budget),
      cmocka_unit_test(test_pass_start_rotates_between_queues),
      cmocka_unit_test(test_byte_budget_ends_a_turn_between_chunks),
      cmocka_unit_test(test_latched_queue_is_reported_once_and_others_keep_working),
      cmocka_unit_test(test_reset_is_reported_and_revives_the_queue),
      cmocka_unit_test(test_full_completion_ring_stalls_without_spinning),
      cmocka_unit_test(test_busy_time_is_charged_only_to_queues_that_worked),
      cmocka_unit_test(test_irq_only_for_flagged_chains_on_armed_queues),
      cmocka_unit_test(test_queue_error_names_cover_the_abi),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
