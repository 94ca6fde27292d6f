// Unit tests of fw::coll::Collective: several ranks in one process joined
// in a ring by bounded in-order frame queues (what the link layer gives the
// firmware), checked bit for bit against a reference that adds in the
// documented ring order.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <deque>
#include <vector>

#include "fw/collective.h"

namespace {

using fw::coll::Collective;
using fw::coll::Op;
using fw::coll::Plan;
using fw::coll::State;
using fw::coll::Verdict;

constexpr uint32_t kMaxFrame = 24 + 64;  // small frames: many per block
constexpr size_t kQueueFrames = 3;

struct Ring {
  uint32_t n = 0;
  std::vector<std::vector<float>> in, out;
  std::vector<Collective> c;
  std::vector<std::deque<std::vector<uint8_t>>> q;  // q[r]: frames from rank r to r+1
  uint64_t now = 0;
};

float value(uint32_t rank, uint64_t i) {
  // Magnitudes far apart, so a different order of additions rounds differently.
  const float scale = (rank % 2 == 0) ? 1.0e7f : 1.0e-3f;
  return scale * float((i * 2654435761u + rank * 40503u) % 1000) / 7.0f;
}

void setup_ring(Ring* r, Op op, uint32_t n, uint64_t floats, uint32_t id = 7) {
  r->n = n;
  r->in.assign(n, {});
  r->out.assign(n, {});
  r->c = std::vector<Collective>(n);
  r->q.assign(n, {});
  for (uint32_t k = 0; k < n; ++k) {
    r->in[k].resize(floats);
    for (uint64_t i = 0; i < floats; ++i) r->in[k][i] = value(k, i);
    r->out[k].assign(fw::coll::output_bytes(op, n, floats * 4) / 4, -1.0f);
    Plan p;
    p.op = op;
    p.collective_id = id;
    p.ranks = n;
    p.rank = k;
    p.bytes = floats * 4;
    p.max_frame = kMaxFrame;
    p.step_timeout_ns = 1000;
    p.timeout_ns = 1000000;
    assert_true(fw::coll::check_plan(p).ok());
    r->c[k].start(p, reinterpret_cast<const uint8_t*>(r->in[k].data()),
                  reinterpret_cast<uint8_t*>(r->out[k].data()), 0);
  }
}

// One round: every rank sends what it may, then reads what it may.
bool pump(Ring* r) {
  bool moved = false;
  uint8_t buf[kMaxFrame];
  for (uint32_t k = 0; k < r->n; ++k) {
    while (r->q[k].size() < kQueueFrames) {
      const uint32_t len = r->c[k].next_frame(buf, sizeof buf);
      if (len == 0) break;
      r->q[k].emplace_back(buf, buf + len);
      r->c[k].sent(r->now);
      moved = true;
    }
  }
  for (uint32_t k = 0; k < r->n; ++k) {
    auto& from = r->q[(k + r->n - 1) % r->n];
    while (!from.empty()) {
      const Verdict v = r->c[k].on_frame(from.front().data(), uint32_t(from.front().size()), r->now);
      if (v == Verdict::kHold) break;
      from.pop_front();
      moved = true;
    }
  }
  ++r->now;
  return moved;
}

void run(Ring* r) {
  for (int i = 0; i < 100000 && pump(r); ++i) {
  }
}

std::vector<float> reference_allreduce(const Ring& r) {
  const uint64_t nf = r.in[0].size();
  std::vector<float> ref(nf);
  for (uint32_t c = 0; c < r.n; ++c) {
    const uint64_t b = nf * c / r.n, e = nf * (c + 1) / r.n;
    for (uint64_t i = b; i < e; ++i) {
      float s = r.in[c][i];
      for (uint32_t k = 1; k < r.n; ++k) s = s + r.in[(c + k) % r.n][i];
      ref[i] = s;
    }
  }
  return ref;
}

void check_allreduce(uint32_t n, uint64_t floats) {
  Ring r;
  setup_ring(&r, Op::kAllReduce, n, floats);
  run(&r);
  const std::vector<float> ref = reference_allreduce(r);
  for (uint32_t k = 0; k < n; ++k) {
    assert_int_equal(int(r.c[k].state()), int(State::kDone));
    assert_memory_equal(r.out[k].data(), ref.data(), floats * 4);
    assert_int_equal(r.c[k].frames_rejected(), 0);
  }
}

void test_allreduce_two_ranks_matches_ring_order_reference(void**) { check_allreduce(2, 1000); }
void test_allreduce_four_ranks_matches_ring_order_reference(void**) { check_allreduce(4, 4099); }
void test_allreduce_with_fewer_floats_than_ranks_completes(void**) { check_allreduce(5, 3); }

void test_allreduce_sum_order_differs_from_chip_order_sum(void**) {
  // The reference is not a plain rank-0-first sum: with these magnitudes the
  // two orders round differently for some element, so the test above would
  // catch a firmware that added in another order.
  Ring r;
  setup_ring(&r, Op::kAllReduce, 4, 4096);
  const std::vector<float> ref = reference_allreduce(r);
  bool differs = false;
  for (uint64_t i = 0; i < 4096 && !differs; ++i) {
    float s = r.in[0][i];
    for (uint32_t k = 1; k < 4; ++k) s += r.in[k][i];
    differs = memcmp(&s, &ref[i], 4) != 0;
  }
  assert_true(differs);
}

void test_allgather_four_ranks_places_every_block(void**) {
  Ring r;
  setup_ring(&r, Op::kAllGather, 4, 333);
  run(&r);
  for (uint32_t k = 0; k < 4; ++k) {
    assert_int_equal(int(r.c[k].state()), int(State::kDone));
    for (uint32_t b = 0; b < 4; ++b) assert_memory_equal(&r.out[k][b * 333], r.in[b].data(), 333 * 4);
  }
}

void test_frame_of_another_collective_is_rejected_not_mixed(void**) {
  Ring r;
  setup_ring(&r, Op::kAllReduce, 2, 64);
  Ring other;
  setup_ring(&other, Op::kAllReduce, 2, 64, 8);
  uint8_t buf[kMaxFrame];
  const uint32_t len = other.c[0].next_frame(buf, sizeof buf);
  assert_true(len > 0);
  assert_int_equal(int(r.c[1].on_frame(buf, len, 0)), int(Verdict::kRejected));
  assert_int_equal(r.c[1].frames_rejected(), 1);
  run(&r);
  assert_int_equal(int(r.c[1].state()), int(State::kDone));
  const std::vector<float> ref = reference_allreduce(r);
  assert_memory_equal(r.out[1].data(), ref.data(), 64 * 4);
}

void test_stale_step_frame_is_rejected_and_counted(void**) {
  Ring r;
  setup_ring(&r, Op::kAllReduce, 2, 64);
  uint8_t first[kMaxFrame];
  const uint32_t len = r.c[0].next_frame(first, sizeof first);
  run(&r);
  assert_int_equal(int(r.c[1].state()), int(State::kDone));
  Ring again;
  setup_ring(&again, Op::kAllReduce, 2, 64);
  uint8_t b[kMaxFrame];
  const uint32_t l0 = again.c[0].next_frame(b, sizeof b);
  again.c[0].sent(0);
  assert_int_equal(int(again.c[1].on_frame(b, l0, 0)), int(Verdict::kConsumed));
  // The same frame again: a duplicate of data already summed.
  assert_int_equal(int(again.c[1].on_frame(first, len, 0)), int(Verdict::kRejected));
  assert_int_equal(again.c[1].frames_rejected(), 1);
  assert_int_equal(int(again.c[1].state()), int(State::kRunning));
}

void test_gap_in_a_step_fails_naming_the_step(void**) {
  Ring r;
  setup_ring(&r, Op::kAllReduce, 2, 256);
  uint8_t b[kMaxFrame];
  assert_true(r.c[0].next_frame(b, sizeof b) > 0);
  r.c[0].sent(0);
  const uint32_t l2 = r.c[0].next_frame(b, sizeof b);  // the second frame; the first is "lost"
  assert_int_equal(int(r.c[1].on_frame(b, l2, 0)), int(Verdict::kRejected));
  assert_int_equal(int(r.c[1].state()), int(State::kFailed));
  assert_non_null(strstr(r.c[1].reason(), "step 0"));
  assert_non_null(strstr(r.c[1].reason(), "data lost"));
}

void test_silent_neighbour_fails_at_the_step_timeout(void**) {
  Ring r;
  setup_ring(&r, Op::kAllReduce, 3, 300);
  r.c[1].poll(999);
  assert_int_equal(int(r.c[1].state()), int(State::kRunning));
  r.c[1].poll(1000);
  assert_int_equal(int(r.c[1].state()), int(State::kFailed));
  assert_non_null(strstr(r.c[1].reason(), "step 0 (reduce-scatter)"));
  assert_non_null(strstr(r.c[1].reason(), "no progress"));
}

void test_plan_check_names_the_bad_field(void**) {
  Plan p;
  p.op = Op::kAllReduce;
  p.ranks = 4;
  p.rank = 4;
  p.bytes = 64;
  p.max_frame = kMaxFrame;
  vtrn::Error err;
  assert_false((err = fw::coll::check_plan(p)).ok());
  assert_non_null(strstr(err.detail(), "rank:"));
  p.rank = 1;
  p.bytes = 66;
  assert_false((err = fw::coll::check_plan(p)).ok());
  assert_non_null(strstr(err.detail(), "bytes:"));
  p.bytes = 64;
  assert_true((err = fw::coll::check_plan(p)).ok());
}

void test_receive_waits_until_the_previous_step_is_sent(void**) {
  // Rank 1 of 2 holds a step-1 frame while its own step 0 is unsent: the
  // block it would overwrite has not gone out yet.
  Ring r;
  setup_ring(&r, Op::kAllReduce, 2, 8);  // blocks of 4 floats: one frame each
  uint8_t b[kMaxFrame];
  uint32_t l = r.c[0].next_frame(b, sizeof b);
  r.c[0].sent(0);
  assert_int_equal(int(r.c[1].on_frame(b, l, 0)), int(Verdict::kConsumed));
  assert_int_equal(r.c[1].recv_step(), 1);
  // Rank 0 receives rank 1's step 0 and sends step 1.
  uint8_t b1[kMaxFrame];
  l = r.c[1].next_frame(b1, sizeof b1);
  assert_int_equal(int(r.c[0].on_frame(b1, l, 0)), int(Verdict::kConsumed));
  const uint32_t l1 = r.c[0].next_frame(b, sizeof b);
  assert_true(l1 > 0);
  assert_int_equal(int(r.c[1].on_frame(b, l1, 0)), int(Verdict::kHold));
  r.c[1].sent(0);
  assert_int_equal(int(r.c[1].on_frame(b, l1, 0)), int(Verdict::kConsumed));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allreduce_two_ranks_matches_ring_order_reference),
      cmocka_unit_test(test_allreduce_four_ranks_matches_ring_order_reference),
      cmocka_unit_test(test_allreduce_with_fewer_floats_than_ranks_completes),
      cmocka_unit_test(test_allreduce_sum_order_differs_from_chip_order_sum),
      cmocka_unit_test(test_allgather_four_ranks_places_every_block),
      cmocka_unit_test(test_frame_of_another_collective_is_rejected_not_mixed),
      cmocka_unit_test(test_stale_step_frame_is_rejected_and_counted),
      cmocka_unit_test(test_gap_in_a_step_fails_naming_the_step),
      cmocka_unit_test(test_silent_neighbour_fails_at_the_step_timeout),
      cmocka_unit_test(test_plan_check_names_the_bad_field),
      cmocka_unit_test(test_receive_waits_until_the_previous_step_is_sent),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
