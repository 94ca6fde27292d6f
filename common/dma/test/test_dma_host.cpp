// Host-side DMA queue tests: against the real device-side engine in the same
// process (data and completions end to end, batching, reset), and against a
// hostile device that scribbles the completion indexes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <random>
#include <vector>

#include "vtrn/dma_host.h"
#include "vtrn/dma_queue.h"

using namespace vtrn::dma;

namespace {

constexpr uint32_t kDepth = 32;
constexpr uint64_t kWindow = 1 << 20;
constexpr uint64_t kHbmBase = 0x100000000ull;
constexpr uint64_t kHbmSize = 1 << 20;

struct MemCopier final : Copier {
  void copy(void* dst, const void* src, size_t n) override { memcpy(dst, src, n); }
};

struct Pair {
  QueueControl ctl{};
  Descriptor sq[kDepth]{};
  Completion cq[kDepth]{};
  std::vector<uint8_t> window = std::vector<uint8_t>(kWindow);
  std::vector<uint8_t> hbm = std::vector<uint8_t>(kHbmSize);
  AddressMap map{window.data(), kWindow, hbm.data(), kHbmBase, kHbmSize, nullptr};
  Queue dev{&ctl, sq, cq, kDepth, nullptr};
  HostQueue host{&ctl, sq, cq, kDepth};
  MemCopier copier;
};

void test_random_chains_round_trip_through_hbm(void**) {
  Pair p;
  std::mt19937 rng(1234);
  for (auto& b : p.window) b = uint8_t(rng());
  uint64_t cookie = 0;
  uint32_t completed = 0;
  // Copy window[0, 256K) to HBM and back into window[512K, ...) in random
  // chain shapes and sizes, then compare.
  uint64_t off = 0;
  while (off < 256 * 1024) {
    uint32_t chain = 1 + rng() % 4;
    std::vector<Descriptor> ds;
    for (uint32_t i = 0; i < chain && off < 256 * 1024; ++i) {
      uint32_t len = 1 + rng() % 3000;
      if (off + len > 256 * 1024) len = uint32_t(256 * 1024 - off);
      ds.push_back(Descriptor{off, kHbmBase + off, len, kDescSrcHost, ++cookie});
      off += len;
    }
    ds.front().flags |= kDescFirst;
    ds.back().flags |= kDescLast;
    while (!p.host.submit(ds.data(), uint32_t(ds.size()))) {
      p.dev.poll(p.map, p.copier, 64);
      Completion c[kDepth];
      uint32_t n = p.host.reap(c, kDepth);
      for (uint32_t i = 0; i < n; ++i) assert_int_equal(c[i].status, kOk);
      completed += n;
    }
  }
  for (int spins = 0; p.host.outstanding() && spins < 1000; ++spins) {
    p.dev.poll(p.map, p.copier, 64);
    Completion c[kDepth];
    uint32_t n = p.host.reap(c, kDepth);
    for (uint32_t i = 0; i < n; ++i) assert_int_equal(c[i].status, kOk);
    completed += n;
  }
  assert_true(completed > 0);
  // Back out in one 64-descriptor chain of 4 KiB each.
  for (uint32_t i = 0; i < 64; i += 16) {
    Descriptor ds[16];
    for (uint32_t j = 0; j < 16; ++j) {
      uint64_t o = uint64_t(i + j) * 4096;
      ds[j] = Descriptor{kHbmBase + o, 512 * 1024 + o, 4096, kDescDstHost, 9000 + i + j};
    }
    if (i == 0) ds[0].flags |= kDescFirst;
    if (i == 48) ds[15].flags |= kDescLast;
    assert_true(p.host.submit(ds, 16));
    p.dev.poll(p.map, p.copier, 64);
  }
  Completion c[kDepth];
  assert_int_equal(p.host.reap(c, kDepth), 1);
  assert_int_equal(c[0].status, kOk);
  assert_int_equal(c[0].bytes, 256 * 1024);
  assert_int_equal(c[0].cookie, 9063);
  assert_memory_equal(&p.window[512 * 1024], &p.window[0], 256 * 1024);
}

void test_submit_is_all_or_nothing(void**) {
  Pair p;
  Descriptor d[kDepth + 1];
  for (auto& x : d) x = Descriptor{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_false(p.host.submit(d, kDepth + 1));
  assert_int_equal(p.ctl.sq_prod.value, 0);
  assert_true(p.host.submit(d, kDepth));
  assert_int_equal(p.host.free_slots(), 0);
}

void test_host_rejects_completion_index_jump(void**) {
  Pair p;
  Descriptor d{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_true(p.host.submit(&d, 1));
  p.ctl.cq_prod.value = kDepth + 3;
  Completion c[4];
  assert_int_equal(p.host.reap(c, 4), 0);
  assert_int_equal(p.host.host_error(), HostError::kCqIndexJump);
}

void test_host_rejects_more_completions_than_submitted(void**) {
  Pair p;
  Descriptor d{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_true(p.host.submit(&d, 1));
  p.ctl.cq_prod.value = 2;
  Completion c[4];
  assert_int_equal(p.host.reap(c, 4), 0);
  assert_int_equal(p.host.host_error(), HostError::kTooManyCompletions);
}

void test_host_rejects_completion_index_moving_backwards(void**) {
  Pair p;
  Descriptor d[2];
  for (auto& x : d) x = Descriptor{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_true(p.host.submit(d, 2));
  p.dev.poll(p.map, p.copier, 1);
  Completion c[4];
  assert_int_equal(p.host.reap(c, 4), 1);
  p.ctl.cq_prod.value = 0;
  assert_int_equal(p.host.reap(c, 4), 0);
  assert_int_equal(p.host.host_error(), HostError::kCqIndexBackward);
}

// A reap that takes nothing leaves cq_cons alone: the device's view of it
// (here a consumer index moved ahead on purpose, as `vtrn inject` does) is
// not overwritten by a poll that found no completion, so the device latches.
void test_an_empty_reap_does_not_write_the_consumer_index(void**) {
  Pair p;
  Descriptor d[2];
  for (auto& x : d) x = Descriptor{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_true(p.host.submit(d, 1));
  p.dev.poll(p.map, p.copier, 4);
  Completion c[4];
  assert_int_equal(p.host.reap(c, 4), 1);
  p.ctl.cq_cons.value = p.ctl.cq_prod.value + 1;  // the injected fault
  assert_int_equal(p.host.reap(c, 4), 0);
  assert_int_equal(p.ctl.cq_cons.value, p.ctl.cq_prod.value + 1);
  assert_true(p.host.submit(&d[1], 1));
  p.dev.poll(p.map, p.copier, 4);
  assert_int_equal(p.ctl.error.value, kQueueCqConsumerAhead);
}

void test_reset_recovers_a_latched_queue(void**) {
  Pair p;
  Descriptor d{0, kHbmBase, 8, kDescFirst | kDescLast | kDescSrcHost, 1};
  assert_true(p.host.submit(&d, 1));
  p.ctl.sq_prod.value = 1000;  // a buggy host scribbles its index
  p.dev.poll(p.map, p.copier, 8);
  assert_int_equal(p.host.device_error(), kQueueSqIndexJump);
  p.host.begin_reset();
  assert_false(p.host.reset_done());
  p.dev.poll(p.map, p.copier, 8);
  assert_true(p.host.reset_done());
  assert_int_equal(p.host.device_error(), kQueueOk);
  assert_true(p.host.submit(&d, 1));
  p.dev.poll(p.map, p.copier, 8);
  Completion c[2];
  assert_int_equal(p.host.reap(c, 2), 1);
  assert_int_equal(c[0].status, kOk);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_chains_round_trip_through_hbm),
      cmocka_unit_test(test_submit_is_all_or_nothing),
      cmocka_unit_test(test_host_rejects_completion_index_jump),
      cmocka_unit_test(test_host_rejects_more_completions_than_submitted),
      cmocka_unit_test(test_host_rejects_completion_index_moving_backwards),
      cmocka_unit_test(test_an_empty_reap_does_not_write_the_consumer_index),
      cmocka_unit_test(test_reset_recovers_a_latched_queue),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
