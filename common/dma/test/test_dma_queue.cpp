// Host unit tests of the DMA queue engine: data moves correctly, every
// hostile descriptor gets its documented status, protocol violations latch
// only the offending queue, and reset brings it back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "vtrn/dma_queue.h"

using namespace vtrn::dma;

namespace {

constexpr uint32_t kDepth = 16;
constexpr uint64_t kWindow = 64 * 1024;
constexpr uint64_t kHbmBase = 0x80000000ull;
constexpr uint64_t kHbmSize = 256 * 1024;

struct MemCopier final : Copier {
  void copy(void* dst, const void* src, size_t n) override {
    memcpy(dst, src, n);
    ++calls;
  }
  int calls = 0;
};

struct Rig {
  QueueControl ctl{};
  Descriptor sq[kDepth]{};
  Completion cq[kDepth]{};
  QueueStats stats{};
  std::vector<uint8_t> window = std::vector<uint8_t>(kWindow);
  std::vector<uint8_t> hbm = std::vector<uint8_t>(kHbmSize);
  AddressMap map{};
  Queue q;
  MemCopier copier;
  uint32_t cq_cons = 0;

  Rig() {
    map = AddressMap{window.data(), kWindow, hbm.data(), kHbmBase, kHbmSize, nullptr};
    q = Queue(&ctl, sq, cq, kDepth, &stats);
  }
  void submit(const Descriptor& d) {
    sq[ctl.sq_prod.value & (kDepth - 1)] = d;
    ctl.sq_prod.value++;
  }
  PollResult poll(uint32_t budget = 1000) { return q.poll(map, copier, budget); }
  // Pops one completion; fails the test when there is none.
  Completion pop() {
    assert_true(ctl.cq_prod.value != cq_cons);
    Completion c = cq[cq_cons & (kDepth - 1)];
    ctl.cq_cons.value = ++cq_cons;
    return c;
  }
  bool cq_empty() const { return ctl.cq_prod.value == cq_cons; }
};

Descriptor desc(uint64_t src, uint64_t dst, uint32_t len, uint32_t flags, uint64_t cookie) {
  return Descriptor{src, dst, len, flags, cookie};
}

constexpr uint32_t kOne = kDescFirst | kDescLast;

void test_copies_host_to_hbm_and_back(void**) {
  Rig r;
  for (uint32_t i = 0; i < 4096; ++i) r.window[i] = uint8_t(i * 7);
  r.submit(desc(0, kHbmBase + 8192, 4096, kOne | kDescSrcHost, 1));
  r.submit(desc(kHbmBase + 8192, 16384, 4096, kOne | kDescDstHost, 2));
  PollResult p = r.poll();
  assert_int_equal(p.descriptors, 2);
  assert_int_equal(p.completions, 2);
  Completion c1 = r.pop(), c2 = r.pop();
  assert_int_equal(c1.cookie, 1);
  assert_int_equal(c1.status, kOk);
  assert_int_equal(c1.bytes, 4096);
  assert_int_equal(c2.cookie, 2);
  assert_memory_equal(&r.window[16384], &r.window[0], 4096);
  assert_int_equal(r.ctl.sq_cons.value, 2);
  assert_int_equal(r.stats.bytes, 8192);
  assert_int_equal(r.stats.seq % 2, 0);
}

void test_chain_completes_once_with_total_bytes_and_last_cookie(void**) {
  Rig r;
  r.submit(desc(0, kHbmBase, 100, kDescFirst | kDescSrcHost, 10));
  r.submit(desc(100, kHbmBase + 100, 200, kDescSrcHost, 11));
  r.submit(desc(300, kHbmBase + 300, 300, kDescLast | kDescSrcHost, 12));
  PollResult p = r.poll();
  assert_int_equal(p.completions, 1);
  Completion c = r.pop();
  assert_int_equal(c.cookie, 12);
  assert_int_equal(c.status, kOk);
  assert_int_equal(c.bytes, 600);
  assert_true(r.cq_empty());
}

void test_chain_split_across_polls_stays_open(void**) {
  Rig r;
  r.submit(desc(0, kHbmBase, 64, kDescFirst | kDescSrcHost, 1));
  assert_int_equal(r.poll().completions, 0);
  r.submit(desc(64, kHbmBase + 64, 64, kDescLast | kDescSrcHost, 2));
  assert_int_equal(r.poll().completions, 1);
  assert_int_equal(r.pop().bytes, 128);
}

struct BadCase {
  Descriptor d;
  Status want;
};

void test_each_hostile_descriptor_gets_its_status(void**) {
  const BadCase cases[] = {
      {desc(0, kHbmBase, 0, kOne | kDescSrcHost, 1), kErrZeroLength},
      {desc(0, kHbmBase, kMaxDescBytes + 1, kOne | kDescSrcHost, 2), kErrTooLong},
      {desc(UINT64_MAX - 10, kHbmBase, 64, kOne | kDescSrcHost, 3), kErrAddrOverflow},
      {desc(kWindow - 32, kHbmBase, 64, kOne | kDescSrcHost, 4), kErrSrcRange},
      {desc(0, kHbmBase + kHbmSize - 32, 64, kOne | kDescSrcHost, 5), kErrDstRange},
      {desc(0, kHbmBase - 64, 64, kOne | kDescSrcHost, 6), kErrDstRange},
      {desc(0, 64, 64, kOne | 0x80000, 7), kErrBadFlags},
      {desc(0, 32, 64, kOne | kDescSrcHost | kDescDstHost, 8), kErrOverlap},
      {desc(kHbmBase, kHbmBase + 63, 64, kOne, 9), kErrOverlap},
      {desc(0, kHbmBase, 64, kDescLast | kDescSrcHost, 10), kErrChainNoFirst},
  };
  for (const BadCase& bc : cases) {
    Rig r;
    r.submit(bc.d);
    r.poll();
    Completion c = r.pop();
    assert_int_equal(c.cookie, bc.d.cookie);
    assert_int_equal(c.status, bc.want);
    assert_int_equal(c.bytes, 0);
    assert_int_equal(r.copier.calls, 0);
    assert_int_equal(r.q.error(), kQueueOk);  // bad data never breaks the queue
    assert_int_equal(r.stats.errors_by_status[bc.want], 1);
    // ... and the queue keeps serving.
    r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 99));
    r.poll();
    assert_int_equal(r.pop().status, kOk);
  }
}

void test_unterminated_chain_is_closed_by_next_first(void**) {
  Rig r;
  r.submit(desc(0, kHbmBase, 64, kDescFirst | kDescSrcHost, 1));
  r.submit(desc(64, kHbmBase + 64, 64, kDescSrcHost, 2));
  r.submit(desc(128, kHbmBase + 128, 64, kOne | kDescSrcHost, 3));
  r.poll();
  Completion a = r.pop(), b = r.pop();
  assert_int_equal(a.cookie, 2);
  assert_int_equal(a.status, kErrChainUnterminated);
  assert_int_equal(a.bytes, 128);  // what moved before the violation
  assert_int_equal(b.cookie, 3);
  assert_int_equal(b.status, kOk);
}

void test_chain_longer_than_limit_fails_without_copying_the_excess(void**) {
  Rig r;
  uint32_t n = 0;
  // Submit in rounds: the ring is shorter than the chain.
  for (uint32_t i = 0; i < kMaxChainDescs + 2; ++i) {
    uint32_t f = kDescSrcHost | (i == 0 ? uint32_t(kDescFirst) : 0u) | (i == kMaxChainDescs + 1 ? uint32_t(kDescLast) : 0u);
    r.submit(desc(i * 8, kHbmBase + i * 8, 8, f, 500 + i));
    if (r.ctl.sq_prod.value - r.ctl.sq_cons.value == kDepth) r.poll();
    ++n;
  }
  r.poll();
  Completion c = r.pop();
  assert_int_equal(c.status, kErrChainTooLong);
  assert_int_equal(c.cookie, 500 + kMaxChainDescs + 1);
  assert_int_equal(r.copier.calls, kMaxChainDescs);
  assert_int_equal(r.ctl.sq_cons.value, n);
}

void test_index_jump_latches_only_this_queue_until_reset(void**) {
  Rig bad, good;
  bad.submit(desc(0, kHbmBase, 64, kDescFirst | kDescSrcHost, 1));
  bad.poll();
  bad.ctl.sq_prod.value += kDepth + 5;  // host skips far ahead
  PollResult p = bad.poll();
  assert_int_equal(bad.q.error(), kQueueSqIndexJump);
  assert_int_equal(bad.ctl.error.value, kQueueSqIndexJump);
  // The open chain is not silently dropped.
  assert_int_equal(p.completions, 1);
  assert_int_equal(bad.pop().status, kErrQueueBroken);
  assert_int_equal(bad.poll().descriptors, 0);

  good.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 7));
  good.poll();
  assert_int_equal(good.pop().status, kOk);

  // Host-driven reset: zero its indexes, then ask.
  bad.ctl.sq_prod.value = 0;
  bad.ctl.cq_cons.value = 0;
  bad.cq_cons = 0;
  bad.ctl.reset_req.value = 1;
  assert_true(bad.q.has_work());
  bad.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 8));
  bad.poll();
  assert_int_equal(bad.ctl.reset_ack.value, 1);
  assert_int_equal(bad.ctl.error.value, kQueueOk);
  Completion c = bad.pop();
  assert_int_equal(c.cookie, 8);
  assert_int_equal(c.status, kOk);
}

void test_producer_index_moving_backwards_latches(void**) {
  Rig r;
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 1));
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 2));
  r.poll();
  r.ctl.sq_prod.value = 1;
  r.poll();
  assert_int_equal(r.q.error(), kQueueSqIndexBackward);
}

void test_completion_consumer_ahead_latches(void**) {
  Rig r;
  r.ctl.cq_cons.value = 3;  // claims completions never written
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 1));
  r.poll();
  assert_int_equal(r.q.error(), kQueueCqConsumerAhead);
}

void test_full_completion_ring_applies_backpressure(void**) {
  Rig r;
  for (uint32_t i = 0; i < kDepth; ++i) r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, i));
  r.poll();
  assert_int_equal(r.ctl.cq_prod.value, kDepth);
  for (uint32_t i = 0; i < 4; ++i) r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 100 + i));
  assert_int_equal(r.poll().descriptors, 0);  // nowhere to complete: wait
  for (uint32_t i = 0; i < 2; ++i) r.pop();
  assert_int_equal(r.poll().descriptors, 2);
  assert_int_equal(r.q.error(), kQueueOk);
}

void test_budget_bounds_one_poll(void**) {
  Rig r;
  for (uint32_t i = 0; i < 10; ++i) r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, i));
  assert_int_equal(r.poll(3).descriptors, 3);
  assert_int_equal(r.ctl.sq_cons.value, 3);
  assert_true(r.q.has_work());
}

void test_byte_budget_stops_a_poll_after_the_descriptor_that_reaches_it(void**) {
  Rig r;
  for (uint32_t i = 0; i < 4; ++i) r.submit(desc(0, kHbmBase + i * 4096, 4096, kOne | kDescSrcHost, i));
  const PollResult p = r.q.poll(r.map, r.copier, 1000, 5000);
  assert_int_equal(p.descriptors, 2);
  assert_int_equal(p.completions, 2);
  assert_int_equal(r.poll().descriptors, 2);
}

// Records what the host could see of the completion ring at each copy, and
// can play a host that reaps while the engine works.
struct WatchingCopier final : Copier {
  explicit WatchingCopier(Rig* rig) : r(rig) {}
  void copy(void* dst, const void* src, size_t n) override {
    memcpy(dst, src, n);
    cq_prod_seen.push_back(r->ctl.cq_prod.value);
    if (reap_at_first_copy && cq_prod_seen.size() == 1) {
      while (!r->cq_empty()) r->pop();
    }
  }
  Rig* r;
  std::vector<uint32_t> cq_prod_seen;
  bool reap_at_first_copy = false;
};

void test_small_chains_publish_their_completions_once_per_poll(void**) {
  Rig r;
  WatchingCopier w(&r);
  for (uint32_t i = 0; i < 4; ++i) r.submit(desc(0, kHbmBase + i * 64, 64, kOne | kDescSrcHost, i));
  const PollResult p = r.q.poll(r.map, w, 1000);
  assert_int_equal(p.completions, 4);
  assert_int_equal(w.cq_prod_seen.size(), 4);
  for (uint32_t seen : w.cq_prod_seen) assert_int_equal(seen, 0);
  assert_int_equal(r.ctl.cq_prod.value, 4);
  for (uint64_t i = 0; i < 4; ++i) assert_int_equal(r.pop().cookie, i);
}

void test_completions_are_published_before_a_long_copy(void**) {
  Rig r;
  WatchingCopier w(&r);
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 1));
  r.submit(desc(0, kHbmBase + 8192, 4096, kOne | kDescSrcHost, 2));
  r.submit(desc(0, kHbmBase + 16384, 4096, kOne | kDescSrcHost, 3));
  r.q.poll(r.map, w, 1000);
  assert_int_equal(w.cq_prod_seen.size(), 3);
  assert_int_equal(w.cq_prod_seen[1], 1);  // the 64 B chain, before the first 4 KiB copy
  assert_int_equal(w.cq_prod_seen[2], 2);
  assert_int_equal(r.ctl.cq_prod.value, 3);
}

void test_poll_rereads_the_consumer_index_when_the_ring_looks_full(void**) {
  Rig r;
  for (uint32_t i = 0; i < kDepth - 1; ++i) r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, i));
  assert_int_equal(r.poll().completions, kDepth - 1);
  // One slot left as the engine reads cq_cons; the host empties the ring
  // during the first copy, so the rest of the batch fits after all.
  WatchingCopier w(&r);
  w.reap_at_first_copy = true;
  for (uint32_t i = 0; i < 3; ++i) r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 100 + i));
  const PollResult p = r.q.poll(r.map, w, 1000);
  assert_int_equal(p.descriptors, 3);
  assert_int_equal(p.completions, 3);
  assert_int_equal(r.q.error(), kQueueOk);
  for (uint64_t i = 0; i < 3; ++i) assert_int_equal(r.pop().cookie, 100 + i);
}

void test_irq_reported_only_when_flagged_and_armed(void**) {
  Rig r;
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost | kDescIrq, 1));
  assert_false(r.poll().irq);  // not armed
  r.ctl.irq_armed.value = 1;
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 2));
  assert_false(r.poll().irq);  // not flagged
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost | kDescIrq, 3));
  assert_true(r.poll().irq);
}

struct DenyPolicy final : HbmPolicy {
  Status check(uint64_t addr, uint64_t len) const override {
    return addr >= kHbmBase + 4096 ? kErrNotAllocated : kOk;
  }
};

void test_hbm_policy_can_refuse_a_range(void**) {
  Rig r;
  DenyPolicy pol;
  r.map.policy = &pol;
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 1));
  r.submit(desc(0, kHbmBase + 8192, 64, kOne | kDescSrcHost, 2));
  r.poll();
  assert_int_equal(r.pop().status, kOk);
  assert_int_equal(r.pop().status, kErrNotAllocated);
}

// An uncorrectable ECC error retired the page at kHbmBase + 8192: any
// range touching it is refused, as fw::hbm::DmaPolicy does.
struct RetiredPagePolicy final : HbmPolicy {
  Status check(uint64_t addr, uint64_t len) const override {
    const uint64_t page = kHbmBase + 8192, page_end = page + 4096;
    return addr < page_end && page < addr + len ? kErrEcc : kOk;
  }
};

void test_chain_touching_a_retired_page_ends_ecc_and_writes_nothing_there(void**) {
  Rig r;
  RetiredPagePolicy pol;
  r.map.policy = &pol;
  memset(r.window.data(), 0xAB, 256);
  // A two-descriptor chain: the first lands below the page, the second
  // runs into it by one byte. The chain ends ECC with only the first
  // descriptor's bytes moved; the page is untouched.
  r.submit(desc(0, kHbmBase + 4096, 128, kDescFirst | kDescSrcHost, 1));
  r.submit(desc(128, kHbmBase + 8192 - 127, 128, kDescLast | kDescSrcHost, 2));
  // A chain after it on the same queue is served normally.
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 3));
  r.poll();
  Completion c = r.pop();
  assert_int_equal(c.status, kErrEcc);
  assert_int_equal(c.cookie, 2);
  assert_int_equal(c.bytes, 128);
  assert_int_equal(r.hbm[4096], 0xAB);
  for (uint32_t i = 8192 - 127; i < 8192 + 1; ++i) assert_int_equal(r.hbm[i], 0);
  c = r.pop();
  assert_int_equal(c.status, kOk);
  assert_int_equal(c.cookie, 3);
  assert_int_equal(r.stats.errors_by_status[kErrEcc], 1);
  assert_int_equal(r.stats.errors, 1);
  assert_int_equal(r.q.error(), kQueueOk);
}

void test_descriptor_is_copied_before_validation(void**) {
  // The engine must act on one consistent snapshot of the descriptor. A
  // copier that rewrites the ring slot mid-copy cannot change the outcome.
  struct Rewriter final : Copier {
    Descriptor* slot;
    void copy(void* dst, const void* src, size_t n) override {
      slot->length = 0xFFFFFFFF;
      slot->dst = 0;
      memcpy(dst, src, n);
    }
  };
  Rig r;
  Rewriter rw;
  rw.slot = &r.sq[0];
  r.submit(desc(0, kHbmBase, 64, kDescFirst | kDescSrcHost, 1));
  r.submit(desc(64, kHbmBase + 64, 64, kDescLast | kDescSrcHost, 2));
  r.q.poll(r.map, rw, 100);
  Completion c = r.pop();
  assert_int_equal(c.status, kOk);
  assert_int_equal(c.bytes, 128);
}

}  // namespace

struct HookRecorder final : ErrorHook {
  void on_descriptor_error(const Descriptor& d, Status s) override {
    cookies.push_back(d.cookie);
    statuses.push_back(s);
  }
  std::vector<uint64_t> cookies;
  std::vector<Status> statuses;
};

void test_error_hook_sees_each_failing_descriptor_once(void**) {
  Rig r;
  HookRecorder hook;
  r.q.set_error_hook(&hook);
  r.submit(desc(0, kHbmBase, 64, kOne | kDescSrcHost, 1));
  r.submit(desc(0, kHbmBase + kHbmSize - 32, 64, kOne | kDescSrcHost, 2));
  r.submit(desc(0, kHbmBase, 0, kOne | kDescSrcHost, 3));
  // A chain whose first descriptor fails: the rest are not validated again.
  r.submit(desc(kWindow, kHbmBase, 64, kDescFirst | kDescSrcHost, 4));
  r.submit(desc(0, kHbmBase, 64, kDescLast | kDescSrcHost, 5));
  r.poll();
  assert_int_equal(hook.cookies.size(), 3);
  assert_int_equal(hook.cookies[0], 2);
  assert_int_equal(hook.statuses[0], kErrDstRange);
  assert_int_equal(hook.cookies[1], 3);
  assert_int_equal(hook.statuses[1], kErrZeroLength);
  assert_int_equal(hook.cookies[2], 4);
  assert_int_equal(hook.statuses[2], kErrSrcRange);
}

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copies_host_to_hbm_and_back),
      cmocka_unit_test(test_error_hook_sees_each_failing_descriptor_once),
      cmocka_unit_test(test_chain_completes_once_with_total_bytes_and_last_cookie),
      cmocka_unit_test(test_chain_split_across_polls_stays_open),
      cmocka_unit_test(test_each_hostile_descriptor_gets_its_status),
      cmocka_unit_test(test_unterminated_chain_is_closed_by_next_first),
      cmocka_unit_test(test_chain_longer_than_limit_fails_without_copying_the_excess),
      cmocka_unit_test(test_index_jump_latches_only_this_queue_until_reset),
      cmocka_unit_test(test_producer_index_moving_backwards_latches),
      cmocka_unit_test(test_completion_consumer_ahead_latches),
      cmocka_unit_test(test_full_completion_ring_applies_backpressure),
      cmocka_unit_test(test_budget_bounds_one_poll),
      cmocka_unit_test(test_byte_budget_stops_a_poll_after_the_descriptor_that_reaches_it),
      cmocka_unit_test(test_small_chains_publish_their_completions_once_per_poll),
      cmocka_unit_test(test_completions_are_published_before_a_long_copy),
      cmocka_unit_test(test_poll_rereads_the_consumer_index_when_the_ring_looks_full),
      cmocka_unit_test(test_irq_reported_only_when_flagged_and_armed),
      cmocka_unit_test(test_hbm_policy_can_refuse_a_range),
      cmocka_unit_test(test_chain_touching_a_retired_page_ends_ecc_and_writes_nothing_there),
      cmocka_unit_test(test_descriptor_is_copied_before_validation),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
