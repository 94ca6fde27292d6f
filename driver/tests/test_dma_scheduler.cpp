// Unit tests of vtrnd's DMA fairness policy (drv::DmaScheduler): round-robin
// across clients, FIFO and in-flight caps within a client, give-back of
// chunks that could not be issued, and clients leaving.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <algorithm>
#include <vector>

#include "vtrn/drv/dma_scheduler.h"

extern "C" {
#include <cmocka.h>
}

using drv::DmaScheduler;

namespace {

void test_small_job_is_not_starved_by_a_large_one(void**) {
  DmaScheduler s;
  s.add(1, 100, 1000, 4);  // client 1: a 1000-chunk transfer
  // Client 1 gets going and keeps its queue depth full.
  for (int i = 0; i < 4; ++i) assert_int_equal(s.next()->client, 1);
  assert_false(s.next().has_value());  // capped at 4 in flight
  s.add(2, 200, 1, 1);                 // client 2: one small read
  s.done(1, 100);
  // The next issue opportunity goes to client 2 or, at worst, one chunk of
  // client 1 first.
  auto a = s.next();
  assert_true(a.has_value());
  if (a->client == 1) {
    s.done(1, 100);
    a = s.next();
  }
  assert_int_equal(a->client, 2);
  assert_true(s.done(2, 200));  // its only chunk: finished
  s.remove(2, 200);
  assert_int_equal(s.active_clients(), 1);
}

void test_clients_alternate_chunk_by_chunk(void**) {
  DmaScheduler s;
  s.add(1, 10, 6, 100);
  s.add(2, 20, 6, 100);
  s.add(3, 30, 2, 100);
  std::vector<uint64_t> order;
  while (auto p = s.next()) order.push_back(p->client);
  assert_int_equal(order.size(), 14);
  // First rounds hold one chunk of each client.
  for (size_t r = 0; r < 2; ++r) {
    std::vector<uint64_t> round(order.begin() + ptrdiff_t(3 * r), order.begin() + ptrdiff_t(3 * r + 3));
    for (uint64_t c : {1u, 2u, 3u}) assert_int_equal(std::count(round.begin(), round.end(), c), 1);
  }
  // Once client 3 is out of work, 1 and 2 alternate.
  for (size_t i = 6; i + 1 < order.size(); ++i) assert_int_not_equal(order[i], order[i + 1]);
}

void test_jobs_of_one_client_run_in_order(void**) {
  DmaScheduler s;
  s.add(1, 10, 2, 8);
  s.add(1, 11, 2, 8);
  auto a = s.next(), b = s.next();
  assert_int_equal(a->job, 10);
  assert_int_equal(b->job, 10);
  assert_int_equal(a->chunk, 0);
  assert_int_equal(b->chunk, 1);
  // Job 11 waits until job 10 is entirely complete, not merely issued.
  assert_false(s.next().has_value());
  assert_false(s.done(1, 10));
  assert_false(s.next().has_value());
  assert_true(s.done(1, 10));
  s.remove(1, 10);
  assert_int_equal(s.next()->job, 11);
}

void test_unissued_chunk_keeps_its_clients_turn(void**) {
  DmaScheduler s;
  s.add(1, 10, 5, 8);
  s.add(2, 20, 5, 8);
  auto a = s.next();
  auto b = s.next();
  assert_int_not_equal(a->client, b->client);
  s.unissue(*b);  // ring full: give it back
  auto again = s.next();
  assert_int_equal(again->client, b->client);
  assert_int_equal(again->chunk, b->chunk);
  assert_int_equal(s.inflight(b->client, b->job), 1);
}

void test_closed_unbounded_job_finishes_when_its_chunks_drain(void**) {
  DmaScheduler s;
  s.add(1, 10, DmaScheduler::kUnbounded, 3);
  for (int i = 0; i < 3; ++i) assert_true(s.next().has_value());
  assert_false(s.next().has_value());
  assert_false(s.close(1, 10));  // 3 still in flight
  assert_false(s.done(1, 10));
  assert_false(s.done(1, 10));
  assert_false(s.next().has_value());  // closed: nothing more issued
  assert_true(s.done(1, 10));
}

void test_removed_client_is_skipped_and_late_completions_are_ignored(void**) {
  DmaScheduler s;
  s.add(1, 10, 5, 2);
  s.add(2, 20, 5, 2);
  (void)s.next();
  (void)s.next();
  s.remove_client(1);
  for (int i = 0; i < 3; ++i) {
    auto p = s.next();
    if (!p) break;
    assert_int_equal(p->client, 2);
  }
  assert_false(s.done(1, 10));
  assert_false(s.has_job(1, 10));
  assert_int_equal(s.active_clients(), 1);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_small_job_is_not_starved_by_a_large_one),
      cmocka_unit_test(test_clients_alternate_chunk_by_chunk),
      cmocka_unit_test(test_jobs_of_one_client_run_in_order),
      cmocka_unit_test(test_unissued_chunk_keeps_its_clients_turn),
      cmocka_unit_test(test_closed_unbounded_job_finishes_when_its_chunks_drain),
      cmocka_unit_test(test_removed_client_is_skipped_and_late_completions_are_ignored),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
