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
using vtrn::engine::kMpuTranslate;
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

// One stack of kStack at kBase.
vtrn::hbm::Config hbm_config() {
  vtrn::hbm::Config c;
  c.geometry.stacks = 1;
  c.geometry.bytes_per_stack = kStack;
  c.geometry.page_bytes = uint32_t(kPage);
  c.geometry.channels = 8;
  c.base = kBase;
  return c;
}

// A fixture whose allocator runs on config c.
int setup_with(void** state, const vtrn::hbm::Config& c) {
  auto* f = new Fixture;
  const size_t need = Allocator::arena_bytes(c);
  f->arena.assign(need / 8 + 1, 0);
  if (f->a.init(c, f->arena.data(), need) != HbmError::kOk) {
    delete f;
    return -1;
  }
  *state = f;
  return 0;
}

int setup(void** state) { return setup_with(state, hbm_config()); }

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
  assert_true(build_mpu_table(f->a, false, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 0);
}

void test_mpu_table_joins_adjacent_allocations_and_keeps_gaps_out(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t a = alloc(f, kPage), b = alloc(f, 2 * kPage), c = alloc(f, kPage);
  assert_int_equal(b, a + kPage);
  assert_int_equal(c, b + 2 * kPage);
  assert_int_equal(f->a.free(b), HbmError::kOk);  // a hole between a and c
  assert_true(build_mpu_table(f->a, false, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 2);
  assert_non_null(covering(f, a, kPage, kMpuValid));
  assert_non_null(covering(f, c, kPage, kMpuValid));
  assert_null(covering(f, b, 1, kMpuValid));
  const uint64_t d = alloc(f, 2 * kPage);  // refills the hole: one run again
  assert_int_equal(d, b);
  assert_true(build_mpu_table(f->a, false, false, f->out, kMpuWindows, &f->count, &f->st).ok());
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
  assert_true(build_mpu_table(f->a, false, false, f->out, kMpuWindows, &f->count, &f->st).ok());
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
  assert_true(build_mpu_table(f->a, false, false, f->out, 5, &f->count, &f->st).ok());
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
  assert_true(build_mpu_table(f->a, true, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->count, 2);
  assert_non_null(covering(f, kBase, kStack, kMpuValid));
  assert_non_null(covering(f, kBase + 8 * kPage, kPage, kMpuValid | kMpuPoison));
}

void test_mpu_table_refuses_poison_that_does_not_fit(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  for (uint32_t i = 0; i < 3; ++i) assert_int_equal(f->a.retire_page(kBase + 2 * i * kPage), HbmError::kOk);
  const vtrn::Error e = build_mpu_table(f->a, false, false, f->out, 2, &f->count, &f->st);
  assert_int_equal(uint32_t(e.code()), uint32_t(vtrn::Code::kCapacity));
  assert_int_equal(f->count, 0);
  assert_true(build_mpu_table(f->a, false, false, f->out, 3, &f->count, &f->st).ok());
  assert_int_equal(f->count, 3);
}

// A stitched allocation: the fixture's allocator again, with a remap
// window and a mapper that accepts everything (the table needs only the
// allocator's extents).
bool map_ok(void*, uint64_t, uint64_t, uint64_t) { return true; }
void unmap_ok(void*, uint64_t, uint64_t) {}
const vtrn::hbm::Mapper kMapper{nullptr, map_ok, unmap_ok};
constexpr uint64_t kRemap = 0x1000000000ull;

int setup_stitching(void** state) {
  vtrn::hbm::Config c = hbm_config();
  c.mapper = &kMapper;
  c.remap_base = kRemap;
  c.remap_bytes = 4 * kStack;
  return setup_with(state, c);
}

// Fills HBM with 1 MiB pieces, frees every other one and allocates 4 MiB:
// stitched from 4 extents. Returns its device address.
uint64_t stitched(Fixture* f, std::vector<uint64_t>* kept) {
  std::vector<uint64_t> all;
  for (uint64_t a; f->a.allocate(1, Category::kTensors, 1 << 20, 0, &a) == HbmError::kOk;) all.push_back(a);
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % 2) assert_int_equal(f->a.free(all[i]), HbmError::kOk);
    else kept->push_back(all[i]);
  }
  uint64_t s = 0;
  assert_int_equal(f->a.allocate(2, Category::kTensors, 4 << 20, 0, &s), HbmError::kOk);
  assert_true(s >= kRemap);
  return s;
}

void test_mpu_table_translates_each_extent_of_a_stitched_allocation(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint64_t> kept;
  const uint64_t s = stitched(f, &kept);
  vtrn::hbm::Extent ext[vtrn::hbm::kMaxExtents];
  uint32_t n = 0;
  assert_int_equal(f->a.extents(s, ext, vtrn::hbm::kMaxExtents, &n), HbmError::kOk);
  assert_true(n >= 4);

  // Without translation: no window reaches it.
  assert_true(build_mpu_table(f->a, false, false, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->st.stitched_skipped, 1);
  assert_null(covering(f, s, 1, kMpuValid | kMpuTranslate));
  assert_null(covering(f, s, 1, kMpuValid));

  assert_true(build_mpu_table(f->a, false, true, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_int_equal(f->st.stitched, 1);
  assert_int_equal(f->st.stitched_skipped, 0);
  assert_int_equal(f->st.translated_windows, n);
  uint32_t tag = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const MpuWindow* w = covering(f, ext[i].device_addr, ext[i].bytes, kMpuValid | kMpuTranslate);
    assert_non_null(w);
    assert_int_equal(w->base, ext[i].device_addr);
    assert_int_equal(w->size, ext[i].bytes);
    assert_int_equal(w->phys, ext[i].phys_addr);
    if (i == 0) tag = w->tag;
    assert_int_equal(w->tag, tag);
  }
  assert_int_not_equal(tag, 0);
  // The identity allocations keep their windows beside them.
  for (uint64_t k : kept) assert_non_null(covering(f, k, 1 << 20, kMpuValid));

  // Unchecked DMA: all of HBM, and the stitched allocation still translated.
  assert_true(build_mpu_table(f->a, true, true, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_non_null(covering(f, kBase, kStack, kMpuValid));
  assert_non_null(covering(f, ext[0].device_addr, ext[0].bytes, kMpuValid | kMpuTranslate));

  // Not enough room (half of a 7-window bank): left out, counted, and the
  // identity runs still fit.
  assert_true(build_mpu_table(f->a, true, true, f->out, 7, &f->count, &f->st).ok());
  assert_int_equal(f->st.stitched_skipped, 1);
  assert_int_equal(f->st.translated_windows, 0);

  // Poisoned: one poison window over its device addresses, no translation.
  assert_int_equal(f->a.retire_page(s + kPage), HbmError::kOk);
  assert_true(build_mpu_table(f->a, false, true, f->out, kMpuWindows, &f->count, &f->st).ok());
  assert_non_null(covering(f, s, 4 << 20, kMpuValid | kMpuPoison));
  assert_null(covering(f, s, 1, kMpuValid | kMpuTranslate));
  assert_int_equal(f->st.translated_windows, 0);
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
      cmocka_unit_test_setup_teardown(test_mpu_table_translates_each_extent_of_a_stitched_allocation,
                                      setup_stitching, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
