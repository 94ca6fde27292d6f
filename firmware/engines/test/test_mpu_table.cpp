// Host unit tests of fw::engines::build_mpu_table: the engines' MPU bank
// from a real vtrn::hbm::Allocator. Runs of adjacent allocations share a
// window, retired pages get poison windows (coalesced) whether free or
// inside an allocation, and more runs than windows close the smallest gaps
// first, never leaving an allocation or a retired page uncovered.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "fw/mpu_table.h"

namespace {

using fw::engines::build_mpu_table;
using fw::engines::MpuTableStats;
using vtrn::engine::kMpuPoison;
using vtrn::engine::kMpuValid;
using vtrn::engine::kMpuWindows;
using vtrn::engine::MpuWindow;
using vtrn::hbm::Allocator;
using vtrn::hbm::Category;
using HbmError = vtrn::hbm::Error;

constexpr uint64_t kBase = 0x44000000;
constexpr uint64_t kPage = 64 * 1024;
constexpr uint64_t kStack = 64ull << 20;

struct Fixture {
  Allocator a;
  std::vector<uint64_t> arena;
  MpuWindow out[kMpuWindows];
  uint32_t count = 0;
  MpuTableStats st;
};

int setup(void** state) {
  auto* f = new Fixture;
  vtrn::hbm::Config c;
  c.geometry.stacks = 1;
  c.geometry.bytes_per_stack = kStack;
  c.geometry.page_bytes = uint32_t(kPage);
  c.geometry.channels = 8;
  c.base = kBase;
  const size_t need = Allocator::arena_bytes(c);
  f->arena.assign(need / 8 + 1, 0);
  if (f->a.init(c, f->arena.data(), need) != HbmError::kOk) return -1;
  *state = f;
  return 0;
}

int teardown(void** state) {
  delete static_cast<Fixture*>(*state);
  return 0;
}

uint64_t alloc(Fixture* f, uint64_t bytes) {
  uint64_t addr = 0;
  assert_int_equal(f->a.allocate(1, Category::kTensors, bytes, 0, &addr), HbmError::kOk);
  return addr;
}

const MpuWindow* covering(const Fixture* f, uint64_t addr, uint64_t len, uint32_t flags) {
  for (uint32_t i = 0; i < f->count; ++i) {
    const MpuWindow& w = f->out[i];
    if (w.flags == flags && addr >= w.base && addr + len <= w.base + w.size) return &w;
  }
  return nullptr;
}

void test_mpu_table_of_an_empty_hbm_has_no_window(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_true(build_mpu_table(f->a, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 0);
}

void test_mpu_table_joins_adjacent_allocations_and_keeps_gaps_out(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t a = alloc(f, kPage), b = alloc(f, 2 * kPage), c = alloc(f, kPage);
  assert_int_equal(b, a + kPage);
  assert_int_equal(c, b + 2 * kPage);
  assert_int_equal(f->a.free(b), HbmError::kOk);  // a hole between a and c
  assert_true(build_mpu_table(f->a, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 2);
  assert_non_null(covering(f, a, kPage, kMpuValid));
  assert_non_null(covering(f, c, kPage, kMpuValid));
  assert_null(covering(f, b, 1, kMpuValid));
  const uint64_t d = alloc(f, 2 * kPage);  // refills the hole: one run again
  assert_int_equal(d, b);
  assert_true(build_mpu_table(f->a, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 1);
  assert_int_equal(f->out[0].base, a);
  assert_int_equal(f->out[0].size, 4 * kPage);
  assert_int_equal(f->out[0].tag, (a - kBase) / kPage + 1);
  assert_int_equal(f->st.allocations, 3);
}

void test_mpu_table_poisons_retired_pages_free_or_allocated(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t a = alloc(f, 4 * kPage);
  assert_int_equal(f->a.retire_page(a + kPage), HbmError::kOk);  // inside: the allocation is poisoned
  const uint64_t free_page = a + 16 * kPage;
  assert_int_equal(f->a.retire_page(free_page), HbmError::kOk);
  assert_int_equal(f->a.retire_page(free_page + kPage), HbmError::kOk);  // adjacent: one window
  assert_true(build_mpu_table(f->a, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->st.poison_windows, 3);  // the page, the allocation holding it, the free run
  assert_int_equal(f->st.valid_windows, 0);
  assert_null(covering(f, a, 1, kMpuValid));  // a poisoned allocation is refused whole
  assert_non_null(covering(f, a, 4 * kPage, kMpuValid | kMpuPoison));
  assert_non_null(covering(f, a + kPage, kPage, kMpuValid | kMpuPoison));
  assert_non_null(covering(f, free_page, 2 * kPage, kMpuValid | kMpuPoison));
}

void test_mpu_table_closes_the_smallest_gaps_when_runs_exceed_the_windows(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  // 8 separated allocations; gap sizes 1..7 pages in a shuffled order.
  const uint32_t gaps[7] = {5, 1, 7, 2, 6, 3, 4};
  std::vector<uint64_t> keep;
  std::vector<uint64_t> fillers;
  keep.push_back(alloc(f, kPage));
  for (uint32_t g : gaps) {
    fillers.push_back(alloc(f, g * kPage));
    keep.push_back(alloc(f, kPage));
  }
  for (uint64_t x : fillers) assert_int_equal(f->a.free(x), HbmError::kOk);
  assert_int_equal(f->a.retire_page(fillers[2]), HbmError::kOk);  // inside the 7-page gap
  // 1 poison window + 4 valid: 8 runs -> 4 closes the 4 smallest gaps (1, 2, 3, 4 pages).
  assert_true(build_mpu_table(f->a, false, f->out, 5, &f->count, &f->st).ok());
  assert_int_equal(f->count, 5);
  assert_int_equal(f->st.valid_windows, 4);
  assert_int_equal(f->st.merged_gaps, 4);
  assert_int_equal(f->st.merged_gap_bytes, (1 + 2 + 3 + 4) * kPage);
  for (uint64_t k : keep) assert_non_null(covering(f, k, kPage, kMpuValid));
  assert_non_null(covering(f, fillers[2], kPage, kMpuValid | kMpuPoison));
  // The largest gaps stay out.
  assert_null(covering(f, fillers[0], 1, kMpuValid));  // 5 pages
  assert_null(covering(f, fillers[2], 1, kMpuValid));  // 7 pages
  assert_null(covering(f, fillers[4], 1, kMpuValid));  // 6 pages
  assert_non_null(covering(f, fillers[1], kPage, kMpuValid));  // 1 page: closed
}

void test_mpu_table_for_unchecked_dma_is_all_of_hbm_with_poison(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  (void)alloc(f, kPage);
  assert_int_equal(f->a.retire_page(kBase + 8 * kPage), HbmError::kOk);
  assert_true(build_mpu_table(f->a, true, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 2);
  assert_non_null(covering(f, kBase, kStack, kMpuValid));
  assert_non_null(covering(f, kBase + 8 * kPage, kPage, kMpuValid | kMpuPoison));
}

void test_mpu_table_refuses_poison_that_does_not_fit(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  for (uint32_t i = 0; i < 3; ++i) assert_int_equal(f->a.retire_page(kBase + 2 * i * kPage), HbmError::kOk);
  const vtrn::Error e = build_mpu_table(f->a, false, f->out, 2, &f->count, &f->st);
  assert_int_equal(uint32_t(e.code()), uint32_t(vtrn::Code::kCapacity));
  assert_int_equal(f->count, 0);
  assert_true(build_mpu_table(f->a, false, f->out, 3, &f->count, &f->st).ok());
  assert_int_equal(f->count, 3);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_mpu_table_of_an_empty_hbm_has_no_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mpu_table_joins_adjacent_allocations_and_keeps_gaps_out, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_mpu_table_poisons_retired_pages_free_or_allocated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mpu_table_closes_the_smallest_gaps_when_runs_exceed_the_windows, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_mpu_table_for_unchecked_dma_is_all_of_hbm_with_poison, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mpu_table_refuses_poison_that_does_not_fit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
