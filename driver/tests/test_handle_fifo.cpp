// Unit tests of drv::HandleFifo (DmaEngine's pending/done storage) and
// drv::Reservoir (the DMA bench's latency sample): order and lookups
// through compactions, middle erases and inserts; the sample's size and
// uniformity.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "vtrn/drv/handle_fifo.h"
#include "vtrn/drv/reservoir.h"

extern "C" {
#include <cmocka.h>
}

namespace {

struct Entry {
  uint64_t handle;
  uint64_t payload;
};

void expect_same(drv::HandleFifo<Entry>& f, const std::deque<Entry>& ref) {
  assert_int_equal(f.size(), ref.size());
  assert_int_equal(f.empty(), ref.empty());
  size_t i = 0;
  for (const Entry* it = f.begin(); it != f.end(); ++it, ++i) {
    assert_int_equal(it->handle, ref[i].handle);
    assert_int_equal(it->payload, ref[i].payload);
  }
}

// A long in-order run, as a 64 B benchmark does: many compactions, always
// the same contents as a deque doing the same.
void test_fifo_matches_a_deque_through_compactions(void**) {
  drv::HandleFifo<Entry> f;
  std::deque<Entry> ref;
  uint64_t next = 1;
  for (int round = 0; round < 20000; ++round) {
    const int in = 1 + round % 7, out = round % 5;
    for (int i = 0; i < in; ++i, ++next) {
      f.push_back(Entry{next, next * 3});
      ref.push_back(Entry{next, next * 3});
    }
    for (int i = 0; i < out && !ref.empty(); ++i) {
      assert_int_equal(f.front().handle, ref.front().handle);
      f.pop_front();
      ref.pop_front();
    }
    if (round % 997 == 0) expect_same(f, ref);
  }
  expect_same(f, ref);
  assert_true(ref.size() > 2048);  // the run left enough in flight to compact around
  while (!ref.empty()) {
    assert_int_equal(f.front().handle, ref.front().handle);
    f.pop_front();
    ref.pop_front();
  }
  assert_true(f.empty());
  assert_true(f.begin() == f.end());
}

void test_fifo_middle_erase_insert_and_prefix_erase(void**) {
  drv::HandleFifo<Entry> f;
  for (uint64_t h = 1; h <= 10; ++h) f.push_back(Entry{h, h});
  // Middle erase returns the follower.
  Entry* it = std::lower_bound(f.begin(), f.end(), 5u, [](const Entry& e, uint64_t v) { return e.handle < v; });
  it = f.erase(it);
  assert_int_equal(it->handle, 6);
  // Sorted insert puts it back.
  it = f.insert(std::lower_bound(f.begin(), f.end(), 5u, [](const Entry& e, uint64_t v) { return e.handle < v; }),
                Entry{5, 55});
  assert_int_equal(it->handle, 5);
  assert_int_equal(it->payload, 55);
  // A prefix erase (a raw chain's older descriptors) returns the new front.
  it = f.erase(f.begin(), f.begin() + 3);
  assert_true(it == f.begin());
  assert_int_equal(f.front().handle, 4);
  assert_int_equal(f.size(), 7);
  uint64_t want = 4;
  for (const Entry* e = f.begin(); e != f.end(); ++e) assert_int_equal(e->handle, want++);
  assert_int_equal(f.back().handle, 10);
  f.clear();
  assert_true(f.empty());
}

void test_reservoir_keeps_k_and_every_value_below_k_seen(void**) {
  drv::Reservoir r(100);
  for (uint64_t v = 0; v < 50; ++v) r.add(v);
  assert_int_equal(r.sample().size(), 50);  // fewer than k seen: all of them
  for (uint64_t v = 50; v < 100000; ++v) r.add(v);
  assert_int_equal(r.seen(), 100000);
  assert_int_equal(r.sample().size(), 100);
  for (uint64_t v : r.sample()) assert_true(v < 100000);
}

// Uniformity: the sample of 0..n-1 has the stream's mean and spreads over
// its tenths evenly, and its later values did replace the first k (an
// Algorithm R that never replaced, or replaced only early, fails).
void test_reservoir_sample_is_uniform_over_the_stream(void**) {
  const size_t k = 20000;
  const uint64_t n = 2'000'000;
  drv::Reservoir r(k, 12345);
  for (uint64_t v = 0; v < n; ++v) r.add(v);
  const std::vector<uint64_t>& s = r.sample();
  assert_int_equal(s.size(), k);
  double mean = 0;
  size_t tenth[10] = {};
  for (uint64_t v : s) {
    mean += double(v) / double(k);
    ++tenth[v * 10 / n];
  }
  // Mean of k uniform draws: sd = n / sqrt(12 k) ~ 0.2% of n; allow 5 sd.
  assert_true(mean > 0.49 * double(n) && mean < 0.51 * double(n));
  // Each tenth ~ k/10 = 2000, sd ~ 42: allow +-250.
  for (size_t t = 0; t < 10; ++t) assert_true(tenth[t] > 1750 && tenth[t] < 2250);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_fifo_matches_a_deque_through_compactions),
      cmocka_unit_test(test_fifo_middle_erase_insert_and_prefix_erase),
      cmocka_unit_test(test_reservoir_keeps_k_and_every_value_below_k_seen),
      cmocka_unit_test(test_reservoir_sample_is_uniform_over_the_stream),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
