// Unit tests of stitching in the HBM allocator core (vtrn/hbm.h): when no
// single free block holds a request, it is served from the remap window,
// backed by up to kMaxExtents physical extents through a Mapper. The
// mapper here is the checked shadow map (hbm_shadow_map.h), so every test
// also proves: each device page maps exactly one physical page of one of
// the allocation's extents, no physical page is mapped twice, and free
// unmaps everything it mapped. Every test ends with audit() and a zero
// violation count.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// cmocka 1.1 ships no extern "C" guards.
extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "hbm_shadow_map.h"
#include "vtrn/hbm.h"

using namespace vtrn::hbm;
using vtrn::hbm::test::ShadowMap;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kPage = 4 * kKiB;
constexpr uint64_t kBase = 0x10'0000'0000ull;
constexpr uint64_t kHbm = 8 * kMiB;  // 2,048 pages: small enough to fragment by hand
constexpr uint64_t kRemapBase = 0x20'0000'0000ull;

alignas(8) uint8_t g_arena[1 << 20];
Allocator g_alloc;
ShadowMap g_shadow;
Mapper g_mapper;

Config make_config() {
  Config c;
  c.geometry.stacks = 2;
  c.geometry.bytes_per_stack = kHbm / 2;
  c.geometry.page_bytes = kPage;
  c.geometry.channels = 8;
  c.base = kBase;
  c.limits.max_allocations = 1024;
  c.limits.max_owners = 16;
  c.limits.max_retired_pages = 32;
  c.limits.max_extents = 512;
  c.remap_base = kRemapBase;
  c.remap_bytes = 0;  // 4x the HBM
  c.mapper = &g_mapper;
  return c;
}

int setup(void**) {
  memset(g_arena, 0xA5, sizeof(g_arena));
  g_shadow = ShadowMap{};
  g_shadow.page = kPage;
  g_shadow.hbm_base = kBase;
  g_shadow.hbm_bytes = kHbm;
  g_shadow.remap_base = kRemapBase;
  g_shadow.remap_bytes = 4 * kHbm;
  g_mapper = g_shadow.mapper();
  Config c = make_config();
  return g_alloc.init(c, g_arena, sizeof(g_arena)) == Error::kOk ? 0 : -1;
}

void expect_clean() {
  assert_int_equal(g_alloc.audit(), Error::kOk);
  assert_int_equal(g_shadow.violations, 0);
}

uint64_t alloc_ok(uint32_t owner, uint64_t size, uint64_t align = 0,
                  Category cat = Category::kTensors) {
  uint64_t addr = 0;
  assert_int_equal(g_alloc.allocate(owner, cat, size, align, &addr), Error::kOk);
  return addr;
}

Stats stats() {
  Stats s;
  g_alloc.stats(&s);
  return s;
}

// Fills the HBM with `count` allocations of `pages` pages (owner 9), then
// frees every other one: holes of `pages` pages between live ones. Returns
// the live ones.
std::vector<uint64_t> comb(uint32_t pages) {
  std::vector<uint64_t> all, kept;
  uint64_t addr;
  while (g_alloc.allocate(9, Category::kScratch, pages * kPage, 0, &addr) == Error::kOk &&
         !g_alloc.in_remap_window(addr))
    all.push_back(addr);
  if (g_alloc.in_remap_window(addr)) assert_int_equal(g_alloc.free(addr), Error::kOk);
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % 2 == 0) assert_int_equal(g_alloc.free(all[i]), Error::kOk);
    else kept.push_back(all[i]);
  }
  return kept;
}

// Every page of the allocation at addr maps, in the shadow tables, to the
// physical page its extents say, and the extents cover it exactly.
void expect_mapped_exactly(uint64_t addr) {
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(addr, 1, &info), Error::kOk);
  std::vector<Extent> ext(kMaxExtents);
  uint32_t n = 0;
  assert_int_equal(g_alloc.extents(addr, ext.data(), kMaxExtents, &n), Error::kOk);
  assert_int_equal(n, info.extents);
  assert_true(n >= 1 && n <= kMaxExtents);
  uint64_t covered = 0;
  for (uint32_t i = 0; i < n; ++i) {
    assert_int_equal(ext[i].device_addr, addr + covered);
    assert_true(ext[i].phys_addr >= kBase && ext[i].phys_addr + ext[i].bytes <= kBase + kHbm);
    for (uint64_t off = 0; off < ext[i].bytes; off += kPage) {
      assert_int_equal(g_shadow.walk(ext[i].device_addr + off), ext[i].phys_addr + off);
      uint64_t phys = 0;
      assert_int_equal(g_alloc.translate(ext[i].device_addr + off, &phys), Error::kOk);
      assert_int_equal(phys, ext[i].phys_addr + off);
    }
    covered += ext[i].bytes;
  }
  assert_int_equal(covered, info.bytes);
  // What follows is unmapped or another allocation's.
  AllocationInfo next;
  if (g_shadow.walk(addr + covered) != ~0ull) {
    assert_int_equal(g_alloc.lookup(addr + covered, 1, &next), Error::kOk);
    assert_int_equal(next.addr, addr + covered);
  }
}

void test_init_rejects_a_remap_window_that_overlaps_or_is_misaligned(void**) {
  Allocator a;
  Config c = make_config();
  c.remap_base = kBase + kMiB * 2;  // inside the HBM
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c.remap_base = kBase - 2 * kMiB;  // runs into the HBM
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c.remap_base = kRemapBase + kPage;
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config();
  c.remap_bytes = kPage + 1;
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  Mapper half{nullptr, g_mapper.map, nullptr};
  c = make_config();
  c.mapper = &half;
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  // The window's index is part of the arena: 4x 2,048 pages of page table
  // (4 bytes each) and bitmap (128 + 2 + 1 words).
  c = make_config();
  Config plain = c;
  plain.mapper = nullptr;
  assert_int_equal(Allocator::arena_bytes(c) - Allocator::arena_bytes(plain),
                   4 * 8192 + 8 * (128 + 2 + 1));
}

void test_request_larger_than_any_free_block_is_stitched(void**) {
  comb(16);  // 16-page holes
  Stats before = stats();
  assert_true(before.largest_contiguous_free_bytes < 40 * kPage);
  assert_true(before.largest_free_bytes >= 40 * kPage);
  assert_true(before.fragmentation < before.contiguous_fragmentation);
  uint64_t a = alloc_ok(1, 40 * kPage);
  assert_true(g_alloc.in_remap_window(a));
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, 40 * kPage, &info), Error::kOk);
  assert_true(info.stitched);
  assert_int_equal(info.extents, 3);  // 16 + 16 + 8 pages, largest first
  assert_int_equal(info.bytes, 40 * kPage);
  expect_mapped_exactly(a);
  assert_int_equal(g_shadow.mapped_bytes, 40 * kPage);
  Stats s = stats();
  assert_int_equal(s.stitched_allocations, 1);
  assert_int_equal(s.stitched_extents, 3);
  assert_int_equal(s.stitches, 1);
  assert_int_equal(s.used_bytes, before.used_bytes + 40 * kPage);
  assert_int_equal(s.free_bytes, before.free_bytes - 40 * kPage);
  assert_int_equal(s.remap_used_bytes, 40 * kPage);
  expect_clean();
}

void test_free_of_stitched_allocation_returns_every_page(void**) {
  comb(16);
  Stats before = stats();
  uint64_t a = alloc_ok(1, 100 * kPage);
  uint64_t b = alloc_ok(2, 33 * kPage);
  expect_mapped_exactly(a);
  expect_mapped_exactly(b);
  assert_int_equal(g_shadow.mapped_bytes, 133 * kPage);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  assert_int_equal(g_alloc.free(b, 2), Error::kOk);
  assert_int_equal(g_shadow.mapped_bytes, 0);
  assert_true(g_shadow.by_va.empty());
  Stats s = stats();
  assert_int_equal(s.free_bytes, before.free_bytes);
  assert_int_equal(s.free_blocks, before.free_blocks);  // extents merged back into their holes
  assert_int_equal(s.largest_contiguous_free_bytes, before.largest_contiguous_free_bytes);
  assert_int_equal(s.stitched_allocations, 0);
  assert_int_equal(s.stitched_extents, 0);
  assert_int_equal(s.remap_used_bytes, 0);
  assert_int_equal(g_alloc.lookup(a, 1, nullptr), Error::kNotFound);
  assert_int_equal(g_alloc.free(a), Error::kNoSuchAllocation);
  expect_clean();
}

void test_contiguous_request_keeps_identity_address(void**) {
  uint64_t a = alloc_ok(1, 5 * kPage);
  assert_int_equal(a, kBase);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, 1, &info), Error::kOk);
  assert_false(info.stitched);
  assert_int_equal(info.extents, 1);
  assert_int_equal(g_shadow.maps, 0);
  uint64_t phys = 0;
  assert_int_equal(g_alloc.translate(a + kPage, &phys), Error::kOk);
  assert_int_equal(phys, a + kPage);
  expect_clean();
}

void test_alignment_applies_to_the_device_address(void**) {
  comb(16);
  uint64_t a = alloc_ok(1, 50 * kPage, 2 * kMiB);
  assert_true(g_alloc.in_remap_window(a));
  assert_int_equal(a % (2 * kMiB), 0);
  uint64_t b = alloc_ok(1, 50 * kPage, 2 * kMiB);
  assert_int_equal(b % (2 * kMiB), 0);
  expect_mapped_exactly(a);
  expect_mapped_exactly(b);
  expect_clean();
}

void test_too_many_extents_needed_fails_and_changes_nothing(void**) {
  comb(2);  // 2-page holes: 64 extents hold 128 pages
  Stats before = stats();
  uint64_t addr = 0;
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, 129 * kPage, 0, &addr),
                   Error::kNoMemory);
  Stats after = stats();
  assert_int_equal(after.free_bytes, before.free_bytes);
  assert_int_equal(after.free_blocks, before.free_blocks);
  assert_int_equal(after.fail_no_memory, before.fail_no_memory + 1);
  assert_int_equal(after.stitched_allocations, 0);
  assert_int_equal(g_shadow.maps, 0);
  OwnerUsage u;
  assert_int_equal(g_alloc.owner_usage(1, &u), Error::kNotFound);
  // The largest request that would succeed is what stats() promised.
  assert_int_equal(before.largest_free_bytes, 128 * kPage);
  uint64_t a = alloc_ok(1, 128 * kPage);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, 1, &info), Error::kOk);
  assert_int_equal(info.extents, kMaxExtents);
  expect_mapped_exactly(a);
  expect_clean();
}

void test_failed_map_is_undone(void**) {
  comb(16);
  Stats before = stats();
  g_shadow.fail_map_at = 2;  // the third extent's map fails
  uint64_t addr = 0;
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, 40 * kPage, 0, &addr),
                   Error::kNoMemory);
  assert_int_equal(g_shadow.mapped_bytes, 0);
  Stats after = stats();
  assert_int_equal(after.free_bytes, before.free_bytes);
  assert_int_equal(after.free_blocks, before.free_blocks);
  assert_int_equal(after.remap_largest_free_bytes, before.remap_largest_free_bytes);
  assert_int_equal(after.live_allocations, before.live_allocations);
  g_shadow.fail_map_at = -1;
  alloc_ok(1, 40 * kPage);
  expect_clean();
}

void test_extent_budget_limits_stitching(void**) {
  Config c = make_config();
  c.limits.max_extents = 2;
  assert_int_equal(g_alloc.init(c, g_arena, sizeof(g_arena)), Error::kOk);
  comb(16);
  uint64_t addr = 0;
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, 40 * kPage, 0, &addr),
                   Error::kNoMemory);
  uint64_t a = alloc_ok(1, 30 * kPage);  // two extents: the whole budget
  assert_int_equal(stats().stitched_extents, 2);
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, 20 * kPage, 0, &addr),
                   Error::kNoMemory);
  assert_int_equal(stats().largest_free_bytes, stats().largest_contiguous_free_bytes);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  alloc_ok(1, 20 * kPage);
  expect_clean();
}

void test_quota_and_categories_count_a_stitched_allocation_once(void**) {
  comb(16);
  assert_int_equal(g_alloc.set_quota(3, 60 * kPage), Error::kOk);
  uint64_t a = alloc_ok(3, 40 * kPage, 0, Category::kCollectives);
  OwnerUsage u;
  assert_int_equal(g_alloc.owner_usage(3, &u), Error::kOk);
  assert_int_equal(u.used_bytes, 40 * kPage);
  assert_int_equal(u.allocations, 1);
  assert_int_equal(u.category_bytes[uint32_t(Category::kCollectives)], 40 * kPage);
  Stats s = stats();
  assert_int_equal(s.category_bytes[uint32_t(Category::kCollectives)], 40 * kPage);
  assert_int_equal(s.category_allocations[uint32_t(Category::kCollectives)], 1);
  uint64_t addr = 0;
  assert_int_equal(g_alloc.allocate(3, Category::kTensors, 21 * kPage, 0, &addr), Error::kQuota);
  assert_int_equal(g_alloc.free(a, 4), Error::kNotOwner);
  assert_int_equal(g_shadow.mapped_bytes, 40 * kPage);
  expect_clean();
}

void test_free_all_releases_stitched_allocations_of_that_owner(void**) {
  std::vector<uint64_t> kept = comb(16);
  uint64_t a = alloc_ok(5, 40 * kPage);
  uint64_t b = alloc_ok(5, kPage);
  uint64_t c = alloc_ok(6, 20 * kPage);
  assert_true(g_alloc.in_remap_window(a) && g_alloc.in_remap_window(c));
  assert_false(g_alloc.in_remap_window(b));
  uint32_t freed = 0;
  assert_int_equal(g_alloc.free_all(5, &freed), Error::kOk);
  assert_int_equal(freed, 2);
  assert_int_equal(g_alloc.lookup(a, 1, nullptr), Error::kNotFound);
  assert_int_equal(g_alloc.lookup(c, 1, nullptr), Error::kOk);
  assert_int_equal(g_shadow.mapped_bytes, 20 * kPage);
  assert_int_equal(stats().stitched_allocations, 1);
  assert_int_equal(g_alloc.free_all(9, &freed), Error::kOk);
  assert_int_equal(freed, kept.size());
  expect_mapped_exactly(c);
  expect_clean();
}

void test_lookup_and_next_allocation_cover_both_windows(void**) {
  std::vector<uint64_t> kept = comb(16);
  uint64_t a = alloc_ok(1, 40 * kPage);
  // Inside, across the end, and physical addresses of its extents (which
  // are not device addresses of any allocation).
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a + 39 * kPage, kPage, &info), Error::kOk);
  assert_int_equal(info.addr, a);
  assert_int_equal(g_alloc.lookup(a + 39 * kPage, kPage + 1, &info), Error::kNotFound);
  Extent ext[kMaxExtents];
  uint32_t n = 0;
  assert_int_equal(g_alloc.extents(a, ext, kMaxExtents, &n), Error::kOk);
  assert_int_equal(g_alloc.lookup(ext[0].phys_addr, kPage, &info), Error::kNotFound);
  assert_int_equal(g_alloc.free(ext[0].phys_addr), Error::kNoSuchAllocation);
  assert_int_equal(g_alloc.extents(a, ext, 1, &n), Error::kBadArgument);
  assert_int_equal(n, 3);
  // Address order: every identity allocation, then the stitched one.
  uint64_t from = 0;
  size_t seen = 0;
  bool saw_stitched = false;
  while (g_alloc.next_allocation(from, &info) == Error::kOk) {
    assert_true(info.addr >= from);
    if (info.stitched) {
      assert_int_equal(info.addr, a);
      saw_stitched = true;
    }
    seen++;
    from = info.addr + info.bytes;
  }
  assert_int_equal(seen, kept.size() + 1);
  assert_true(saw_stitched);
  assert_int_equal(g_alloc.check_range(a, 40 * kPage), Error::kOk);
  expect_clean();
}

void test_ecc_on_stitched_address_retires_physical_page_and_poisons(void**) {
  comb(16);
  uint64_t a = alloc_ok(7, 40 * kPage);
  uint64_t bad = a + 20 * kPage + 123;  // inside the second extent
  uint64_t phys = 0;
  assert_int_equal(g_alloc.translate(bad, &phys), Error::kOk);
  uint64_t phys_page = phys & ~(kPage - 1);
  RetireOutcome out;
  assert_int_equal(g_alloc.retire_page(bad, &out), Error::kOk);
  assert_true(out.was_allocated);
  assert_int_equal(out.allocation_addr, a);
  assert_int_equal(out.owner, 7);
  assert_true(g_alloc.is_retired(bad));
  assert_true(g_alloc.is_retired(phys_page));
  assert_int_equal(g_alloc.check_range(a, kPage), Error::kPoisoned);
  assert_int_equal(g_alloc.retire_page(phys_page), Error::kAlreadyRetired);
  // The retired-page store keeps physical pages.
  uint64_t pages[4];
  uint32_t n = 0;
  assert_int_equal(g_alloc.export_retired(pages, 4, &n), Error::kOk);
  assert_int_equal(n, 1);
  assert_int_equal(pages[0], phys_page);
  assert_int_equal(stats().poisoned_allocations, 1);
  expect_clean();
  // Freed: the page is carved out and never handed out again.
  assert_int_equal(g_alloc.free(a), Error::kOk);
  assert_int_equal(stats().retired_bytes, kPage);
  assert_int_equal(stats().poisoned_allocations, 0);
  uint64_t addr;
  std::vector<uint64_t> got;
  while (g_alloc.allocate(8, Category::kTensors, kPage, 0, &addr) == Error::kOk) {
    assert_true(addr != phys_page);
    got.push_back(addr);
  }
  expect_clean();
}

void test_ecc_at_physical_address_of_an_extent_poisons_the_stitched_allocation(void**) {
  comb(16);
  uint64_t a = alloc_ok(7, 40 * kPage);
  Extent ext[kMaxExtents];
  uint32_t n = 0;
  assert_int_equal(g_alloc.extents(a, ext, kMaxExtents, &n), Error::kOk);
  RetireOutcome out;
  assert_int_equal(g_alloc.retire_page(ext[2].phys_addr, &out), Error::kOk);
  assert_true(out.was_allocated);
  assert_int_equal(out.allocation_addr, a);
  assert_int_equal(g_alloc.check_range(ext[2].device_addr, kPage), Error::kPoisoned);
  assert_int_equal(g_alloc.record_correctable(a), Error::kOk);
  assert_int_equal(stats().correctable_errors[(ext[0].phys_addr - kBase) / (kHbm / 2)], 1);
  // An unallocated remap address has no page behind it.
  uint64_t far = kRemapBase + 4 * kHbm - kPage;
  assert_int_equal(g_alloc.retire_page(far), Error::kNotFound);
  assert_int_equal(g_alloc.record_correctable(far), Error::kNotFound);
  expect_clean();
}

void test_retired_pages_survive_reset_inside_former_extents(void**) {
  comb(16);
  uint64_t a = alloc_ok(7, 40 * kPage);
  assert_int_equal(g_alloc.retire_page(a + 3 * kPage), Error::kOk);
  uint64_t pages[4];
  uint32_t n = 0;
  assert_int_equal(g_alloc.export_retired(pages, 4, &n), Error::kOk);
  // A chip reset: the page tables are gone with the allocator's state.
  g_shadow.by_va.clear();
  g_shadow.by_pa.clear();
  g_shadow.mapped_bytes = 0;
  Config c = make_config();
  assert_int_equal(g_alloc.init(c, g_arena, sizeof(g_arena)), Error::kOk);
  assert_int_equal(g_alloc.import_retired(pages, n), Error::kOk);
  assert_true(g_alloc.is_retired(pages[0]));
  assert_int_equal(stats().retired_bytes, kPage);
  expect_clean();
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_init_rejects_a_remap_window_that_overlaps_or_is_misaligned, setup),
      cmocka_unit_test_setup(test_request_larger_than_any_free_block_is_stitched, setup),
      cmocka_unit_test_setup(test_free_of_stitched_allocation_returns_every_page, setup),
      cmocka_unit_test_setup(test_contiguous_request_keeps_identity_address, setup),
      cmocka_unit_test_setup(test_alignment_applies_to_the_device_address, setup),
      cmocka_unit_test_setup(test_too_many_extents_needed_fails_and_changes_nothing, setup),
      cmocka_unit_test_setup(test_failed_map_is_undone, setup),
      cmocka_unit_test_setup(test_extent_budget_limits_stitching, setup),
      cmocka_unit_test_setup(test_quota_and_categories_count_a_stitched_allocation_once, setup),
      cmocka_unit_test_setup(test_free_all_releases_stitched_allocations_of_that_owner, setup),
      cmocka_unit_test_setup(test_lookup_and_next_allocation_cover_both_windows, setup),
      cmocka_unit_test_setup(test_ecc_on_stitched_address_retires_physical_page_and_poisons, setup),
      cmocka_unit_test_setup(
          test_ecc_at_physical_address_of_an_extent_poisons_the_stitched_allocation, setup),
      cmocka_unit_test_setup(test_retired_pages_survive_reset_inside_former_extents, setup),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
