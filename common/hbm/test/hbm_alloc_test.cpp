// Unit tests of the HBM allocator core (vtrn/hbm.h): geometry checks,
// split and coalesce, alignment, quotas and ownership, free_all, lookup,
// page retirement (free and inside a live allocation) and the retired-page
// export/import that survives a chip reset. Every test ends with audit(),
// the allocator's own full invariant check, so a test that leaves the
// metadata inconsistent fails even when its visible results look right.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// cmocka 1.1 ships no extern "C" guards.
extern "C" {
#include <cmocka.h>
}

#include <algorithm>
#include <vector>

#include "vtrn/hbm.h"

using namespace vtrn::hbm;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kPage = 4 * kKiB;
constexpr uint64_t kBase = 0x10'0000'0000ull;  // a non-zero, 2 MiB-aligned device base
constexpr uint64_t kStack = 64 * kMiB;

alignas(8) uint8_t g_arena[1 << 20];
Allocator g_alloc;

Config make_config(uint32_t stacks = 2, uint64_t stack_bytes = kStack, uint32_t page = kPage) {
  Config c;
  c.geometry.stacks = stacks;
  c.geometry.bytes_per_stack = stack_bytes;
  c.geometry.page_bytes = page;
  c.geometry.channels = 8;
  c.base = kBase;
  c.limits.max_allocations = 256;
  c.limits.max_owners = 16;
  c.limits.max_retired_pages = 32;
  return c;
}

int setup(void**) {
  memset(g_arena, 0xA5, sizeof(g_arena));
  Config c = make_config();
  return g_alloc.init(c, g_arena, sizeof(g_arena)) == Error::kOk ? 0 : -1;
}

void expect_audit_ok() { assert_int_equal(g_alloc.audit(), Error::kOk); }

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

void test_init_rejects_invalid_geometry_and_small_arena(void**) {
  Allocator a;
  Config c = make_config(0);
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config(9);
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config(1, kStack, 3 * 4096);
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config(1, kStack + 4096 / 2);
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config();
  c.base = kBase + kPage;
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config();
  c.limits.max_allocations = 0;
  assert_int_equal(a.init(c, g_arena, sizeof(g_arena)), Error::kBadConfig);
  c = make_config();
  size_t need = Allocator::arena_bytes(c);
  assert_int_equal(a.init(c, g_arena, need - 1), Error::kArenaTooSmall);
  assert_int_equal(a.init(c, g_arena + 4, need), Error::kArenaTooSmall);
  assert_int_equal(a.init(c, g_arena, need), Error::kOk);
  uint64_t addr;
  Allocator fresh;
  assert_int_equal(fresh.allocate(1, Category::kCode, kPage, 0, &addr), Error::kNotInitialised);
}

void test_arena_bytes_follows_published_bound(void**) {
  Config c = make_config(1, 256 * kMiB);
  c.limits.max_allocations = 4096;
  c.limits.max_owners = 256;
  c.limits.max_retired_pages = 256;
  c.limits.max_extents = 4096;
  // 40 * (2 * (A + E + R) + 3) + 72 * O + 4 * H + 4 * R + 4 * P + 8 * W with
  // H = 512, P = 65,536 pages, W = 1024 + 16 + 1 bitmap words (no remap
  // window without a mapper).
  size_t records = 40 * (2 * (4096 + 4096 + 256) + 3);
  assert_int_equal(Allocator::arena_bytes(c),
                   records + 72 * 256 + 4 * 512 + 4 * 256 + 4 * 65536 + 8 * (1024 + 16 + 1));
  assert_int_equal(Allocator::arena_bytes(c), 967936);  // the example in vtrn/hbm.h
  // Pages not a multiple of 64 round each level up; sections round up to 8.
  c = make_config(1, 100 * kPage);
  c.limits.max_allocations = 1;
  c.limits.max_owners = 1;
  c.limits.max_retired_pages = 1;
  c.limits.max_extents = 1;
  assert_int_equal(Allocator::arena_bytes(c), 360 + 72 + 8 + 8 + 400 + 8 * (2 + 1));
  c.geometry.stacks = 0;
  assert_int_equal(Allocator::arena_bytes(c), 0);
}

void test_worst_case_hbm_follows_published_formula(void**) {
  // With stitching: P >= M + R + ceil(n * max(32K, 33B) / 32K),
  // B = K (N - 1) + R + 1, K = 64; the two examples in vtrn/hbm.h.
  WorstCase w;
  w.max_live_bytes = 224 * kMiB;
  w.max_live_allocations = 128;
  w.max_request_bytes = 16 * kMiB;
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), (57344 + 536514) * kPage);
  // Without: P >= M + R + (N + R) * g(n + a - 1), g(r) = r + 2^(msb(r) - 5) - 1
  // for r >= 32 pages.
  assert_int_equal(Allocator::worst_case_contiguous_hbm_bytes(kPage, w),
                   (57344 + 128 * (4096 + 127)) * kPage);
  assert_int_equal(Allocator::worst_case_contiguous_hbm_bytes(kPage, w), 2448949248ull);
  // The remap window that is never the limit: the contiguous bound, R = 0.
  assert_int_equal(Allocator::worst_case_remap_bytes(kPage, w), 2448949248ull);
  w.max_alignment = 2 * kMiB;
  w.retired_pages = 256;
  // Alignment costs the stitched bound nothing: it is the window's affair.
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), (57344 + 256 + 553410) * kPage);
  assert_int_equal(Allocator::worst_case_contiguous_hbm_bytes(kPage, w),
                   (57344 + 256 + 384 * (4607 + 127)) * kPage);
  assert_int_equal(Allocator::worst_case_remap_bytes(kPage, w),
                   (57344 + 128 * (4607 + 127)) * kPage);
  // Small: below 32 pages a class is one size; sizes round to pages. At
  // most 64 free blocks (B = 1 + R) means every free page can be taken.
  w = WorstCase{};
  w.max_live_bytes = 10 * kPage - 1;
  w.max_live_allocations = 3;
  w.max_request_bytes = 5 * kPage + 1;
  assert_int_equal(Allocator::worst_case_contiguous_hbm_bytes(kPage, w), (10 + 3 * 6) * kPage);
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), (10 + 13) * kPage);  // B = 129
  w.max_live_allocations = 1;
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), (10 + 6) * kPage);    // B = 1
  // Invalid arguments and overflow give 0.
  assert_int_equal(Allocator::worst_case_hbm_bytes(3 * kPage, w), 0);
  w.max_alignment = 4 * kMiB;
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), 0);
  w.max_alignment = 0;
  w.max_live_allocations = 0;
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), 0);
  w.max_live_allocations = 1u << 24;
  w.max_request_bytes = 1ull << 62;
  assert_int_equal(Allocator::worst_case_hbm_bytes(kPage, w), 0);
  assert_int_equal(Allocator::worst_case_contiguous_hbm_bytes(kPage, w), 0);
}

void test_allocation_rounds_size_up_to_page(void**) {
  uint64_t a = alloc_ok(1, 1);
  uint64_t b = alloc_ok(1, kPage + 1);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, 1, &info), Error::kOk);
  assert_int_equal(info.bytes, kPage);
  assert_int_equal(g_alloc.lookup(b, 1, &info), Error::kOk);
  assert_int_equal(info.bytes, 2 * kPage);
  assert_int_equal(stats().used_bytes, 3 * kPage);
  assert_int_equal(stats().free_bytes, 2 * kStack - 3 * kPage);
  expect_audit_ok();
}

void test_free_coalesces_with_both_neighbours(void**) {
  uint64_t a = alloc_ok(1, 1 * kMiB);
  uint64_t b = alloc_ok(1, 2 * kMiB);
  uint64_t c = alloc_ok(1, 3 * kMiB);
  uint64_t d = alloc_ok(1, 4 * kMiB);  // keeps c's right side used
  assert_int_equal(stats().free_blocks, 1);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  assert_int_equal(g_alloc.free(c), Error::kOk);
  assert_int_equal(stats().free_blocks, 3);
  // b sits between two free blocks: freeing it merges all three.
  assert_int_equal(g_alloc.free(b), Error::kOk);
  Stats s = stats();
  assert_int_equal(s.free_blocks, 2);
  assert_int_equal(s.largest_free_bytes, 2 * kStack - 10 * kMiB);
  expect_audit_ok();
  assert_int_equal(g_alloc.free(d), Error::kOk);
  s = stats();
  assert_int_equal(s.free_blocks, 1);
  assert_int_equal(s.largest_free_bytes, 2 * kStack);
  assert_true(s.fragmentation == 0.0);
  expect_audit_ok();
}

void test_split_reuses_freed_hole_of_exact_size(void**) {
  alloc_ok(1, kPage);
  uint64_t hole = alloc_ok(1, 8 * kPage);
  alloc_ok(1, kPage);
  assert_int_equal(g_alloc.free(hole), Error::kOk);
  // The hole is the smallest fit: good fit takes it instead of the tail.
  assert_int_equal(alloc_ok(2, 8 * kPage), hole);
  expect_audit_ok();
}

void test_alignment_up_to_2mib_is_honoured(void**) {
  alloc_ok(1, kPage);  // make the next free address unaligned
  for (uint64_t align = kPage; align <= 2 * kMiB; align <<= 1) {
    uint64_t a = alloc_ok(1, 3 * kPage, align);
    assert_int_equal(a % align, 0);
  }
  uint64_t a = alloc_ok(1, kPage, 16);  // below a page means a page
  assert_int_equal(a % kPage, 0);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, kPage, 3 * kPage, &addr),
                   Error::kBadArgument);
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, kPage, 4 * kMiB, &addr),
                   Error::kBadArgument);
  assert_int_equal(stats().fail_bad_argument, 2);
  expect_audit_ok();
}

void test_bad_arguments_are_rejected_and_counted(void**) {
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(1, Category::kTensors, 0, 0, &addr), Error::kBadArgument);
  assert_int_equal(g_alloc.allocate(1, Category(7), kPage, 0, &addr), Error::kBadArgument);
  assert_int_equal(g_alloc.allocate(kAnyOwner, Category::kCode, kPage, 0, &addr),
                   Error::kBadArgument);
  assert_int_equal(g_alloc.allocate(1, Category::kCode, 2 * kStack + 1, 0, &addr),
                   Error::kBadArgument);
  assert_int_equal(stats().fail_bad_argument, 4);
  assert_int_equal(stats().owners, 0);
}

void test_exhaustion_reports_no_memory(void**) {
  uint64_t a = alloc_ok(1, 2 * kStack - kPage);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(1, Category::kScratch, 2 * kPage, 0, &addr), Error::kNoMemory);
  alloc_ok(1, kPage);
  assert_int_equal(g_alloc.allocate(1, Category::kScratch, kPage, 0, &addr), Error::kNoMemory);
  Stats s = stats();
  assert_int_equal(s.fail_no_memory, 2);
  assert_int_equal(s.free_bytes, 0);
  assert_true(s.fragmentation == 0.0);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  expect_audit_ok();
}

void test_quota_blocks_allocation_beyond_limit(void**) {
  assert_int_equal(g_alloc.set_quota(7, 10 * kPage), Error::kOk);
  alloc_ok(7, 6 * kPage, 0, Category::kCode);
  uint64_t b = alloc_ok(7, 4 * kPage, 0, Category::kDmaBuffers);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(7, Category::kCode, 1, 0, &addr), Error::kQuota);
  assert_int_equal(stats().fail_quota, 1);
  OwnerUsage u;
  assert_int_equal(g_alloc.owner_usage(7, &u), Error::kOk);
  assert_int_equal(u.used_bytes, 10 * kPage);
  assert_int_equal(u.allocations, 2);
  assert_int_equal(u.category_bytes[uint32_t(Category::kCode)], 6 * kPage);
  assert_int_equal(u.category_bytes[uint32_t(Category::kDmaBuffers)], 4 * kPage);
  assert_int_equal(g_alloc.free(b, 7), Error::kOk);
  alloc_ok(7, 4 * kPage);
  // Another owner is not limited by owner 7's quota.
  alloc_ok(8, 100 * kPage);
  Stats s = stats();
  assert_int_equal(s.category_bytes[uint32_t(Category::kCode)], 6 * kPage);
  assert_int_equal(s.category_bytes[uint32_t(Category::kTensors)], 104 * kPage);
  expect_audit_ok();
}

void test_default_quota_applies_to_new_owners(void**) {
  Config c = make_config();
  c.default_quota = 2 * kPage;
  assert_int_equal(g_alloc.init(c, g_arena, sizeof(g_arena)), Error::kOk);
  alloc_ok(3, 2 * kPage);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(3, Category::kCode, kPage, 0, &addr), Error::kQuota);
  assert_int_equal(g_alloc.set_quota(3, kNoQuota), Error::kOk);
  alloc_ok(3, kPage);
  expect_audit_ok();
}

void test_free_checks_owner_and_address(void**) {
  uint64_t a = alloc_ok(1, 2 * kPage);
  assert_int_equal(g_alloc.free(a, 2), Error::kNotOwner);
  assert_int_equal(g_alloc.free(a + kPage), Error::kNoSuchAllocation);
  assert_int_equal(g_alloc.free(a + 1), Error::kNoSuchAllocation);
  assert_int_equal(g_alloc.free(kBase - kPage), Error::kOutOfRange);
  assert_int_equal(g_alloc.free(a, 1), Error::kOk);
  assert_int_equal(g_alloc.free(a), Error::kNoSuchAllocation);
  assert_int_equal(stats().frees, 1);
  expect_audit_ok();
}

void test_free_all_releases_only_that_owner(void**) {
  uint64_t keep = alloc_ok(2, 5 * kPage);
  for (int i = 0; i < 20; ++i) {
    alloc_ok(1, (i + 1) * kPage, 0, Category(i % kCategoryCount));
    alloc_ok(2, kPage);
  }
  uint32_t freed = 0;
  assert_int_equal(g_alloc.free_all(1, &freed), Error::kOk);
  assert_int_equal(freed, 20);
  OwnerUsage u;
  assert_int_equal(g_alloc.owner_usage(1, &u), Error::kNotFound);  // auto owner forgotten
  assert_int_equal(g_alloc.owner_usage(2, &u), Error::kOk);
  assert_int_equal(u.allocations, 21);
  assert_int_equal(u.used_bytes, 25 * kPage);
  assert_int_equal(g_alloc.lookup(keep, 5 * kPage, nullptr), Error::kOk);
  assert_int_equal(g_alloc.free_all(99, &freed), Error::kOk);
  assert_int_equal(freed, 0);
  expect_audit_ok();
}

void test_remove_owner_forgets_quota(void**) {
  assert_int_equal(g_alloc.set_quota(5, kPage), Error::kOk);
  alloc_ok(5, kPage);
  assert_int_equal(g_alloc.remove_owner(5), Error::kOk);
  OwnerUsage u;
  assert_int_equal(g_alloc.owner_usage(5, &u), Error::kNotFound);
  assert_int_equal(stats().used_bytes, 0);
  alloc_ok(5, 4 * kPage);  // unlimited again
  expect_audit_ok();
}

void test_owner_table_full_is_reported(void**) {
  for (uint32_t o = 0; o < 16; ++o) alloc_ok(100 + o, kPage);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(999, Category::kCode, kPage, 0, &addr),
                   Error::kTooManyOwners);
  assert_int_equal(stats().fail_no_metadata, 1);
  // Owners without allocations or quota do not hold table slots.
  uint32_t freed;
  assert_int_equal(g_alloc.free_all(100, &freed), Error::kOk);
  alloc_ok(999, kPage);
  expect_audit_ok();
}

void test_allocation_limit_is_reported(void**) {
  for (int i = 0; i < 256; ++i) alloc_ok(1, kPage);
  uint64_t addr;
  assert_int_equal(g_alloc.allocate(1, Category::kCode, kPage, 0, &addr),
                   Error::kTooManyAllocations);
  expect_audit_ok();
}

void test_lookup_finds_the_containing_allocation(void**) {
  uint64_t a = alloc_ok(1, 4 * kPage, 0, Category::kCollectives);
  uint64_t b = alloc_ok(2, 2 * kPage);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a + 100, 3 * kPage, &info), Error::kOk);
  assert_int_equal(info.addr, a);
  assert_int_equal(info.owner, 1);
  assert_int_equal(info.category, Category::kCollectives);
  assert_false(info.poisoned);
  // A range crossing from a into b belongs to no single allocation.
  assert_int_equal(g_alloc.lookup(b - 8, 16, &info), Error::kNotFound);
  assert_int_equal(g_alloc.lookup(b + 2 * kPage, 1, &info), Error::kNotFound);
  assert_int_equal(g_alloc.lookup(a, 0, &info), Error::kBadArgument);
  assert_int_equal(g_alloc.lookup(kBase + 2 * kStack, 1, &info), Error::kOutOfRange);
  assert_int_equal(g_alloc.lookup(kBase + 2 * kStack - 1, 2, &info), Error::kOutOfRange);
  assert_int_equal(g_alloc.check_range(b, 2 * kPage), Error::kOk);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  assert_int_equal(g_alloc.lookup(a, 1, &info), Error::kNotFound);
}

void test_next_allocation_walks_in_address_order(void**) {
  uint64_t addrs[10];
  for (int i = 0; i < 10; ++i) addrs[i] = alloc_ok(uint32_t(i), kPage * (i + 1));
  assert_int_equal(g_alloc.free(addrs[3]), Error::kOk);
  AllocationInfo info;
  uint64_t from = 0;
  int seen = 0;
  while (g_alloc.next_allocation(from, &info) == Error::kOk) {
    assert_true(info.addr >= from);
    from = info.addr + info.bytes;
    seen++;
  }
  assert_int_equal(seen, 9);
  assert_int_equal(g_alloc.next_allocation(addrs[3], &info), Error::kOk);
  assert_int_equal(info.addr, addrs[4]);
}

void test_retired_free_page_is_never_handed_out(void**) {
  uint64_t bad = kBase + 5 * kPage + 123;
  RetireOutcome out;
  assert_int_equal(g_alloc.retire_page(bad, &out), Error::kOk);
  assert_false(out.was_allocated);
  assert_true(g_alloc.is_retired(bad - 123));
  assert_int_equal(g_alloc.retire_page(bad, &out), Error::kAlreadyRetired);
  Stats s = stats();
  assert_int_equal(s.retired_pages, 1);
  assert_int_equal(s.retired_bytes, kPage);
  assert_int_equal(s.free_bytes, 2 * kStack - kPage);
  assert_int_equal(s.retired_per_stack[0], 1);
  expect_audit_ok();
  // Page-sized allocations fill the first pages around the hole.
  for (int i = 0; i < 10; ++i) {
    uint64_t a = alloc_ok(1, kPage);
    assert_true(a != bad - 123);
  }
  // A large allocation cannot span the retired page either.
  uint64_t big = alloc_ok(1, 16 * kMiB);
  assert_true(big > bad);
  expect_audit_ok();
}

void test_retire_inside_live_allocation_poisons_then_carves_on_free(void**) {
  uint64_t a = alloc_ok(4, 8 * kPage);
  uint64_t b = alloc_ok(4, 8 * kPage);
  RetireOutcome out;
  assert_int_equal(g_alloc.retire_page(a + 2 * kPage, &out), Error::kOk);
  assert_int_equal(g_alloc.retire_page(a + 5 * kPage, &out), Error::kOk);
  assert_true(out.was_allocated);
  assert_int_equal(out.allocation_addr, a);
  assert_int_equal(out.owner, 4);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, kPage, &info), Error::kOk);
  assert_true(info.poisoned);
  assert_int_equal(g_alloc.check_range(a + 7 * kPage, 1), Error::kPoisoned);
  assert_int_equal(g_alloc.check_range(b, 1), Error::kOk);
  Stats s = stats();
  assert_int_equal(s.poisoned_allocations, 1);
  assert_int_equal(s.retired_bytes, 0);  // still inside the live allocation
  expect_audit_ok();
  assert_int_equal(g_alloc.free(a), Error::kOk);
  s = stats();
  assert_int_equal(s.poisoned_allocations, 0);
  assert_int_equal(s.retired_bytes, 2 * kPage);
  assert_int_equal(s.free_bytes, 2 * kStack - 8 * kPage - 2 * kPage);
  // Free pieces: [a, a+2), [a+3, a+5), [a+6, a+8) and the tail after b.
  assert_int_equal(s.free_blocks, 4);
  expect_audit_ok();
  // The pieces are reused, the retired pages are not.
  for (int i = 0; i < 6; ++i) {
    uint64_t p = alloc_ok(5, kPage);
    assert_false(g_alloc.is_retired(p));
  }
  assert_int_equal(g_alloc.free(b), Error::kOk);
  expect_audit_ok();
}

void test_free_all_carves_retired_pages_of_poisoned_allocations(void**) {
  uint64_t a = alloc_ok(6, 4 * kPage);
  alloc_ok(6, 4 * kPage);
  assert_int_equal(g_alloc.retire_page(a), Error::kOk);
  uint32_t freed = 0;
  assert_int_equal(g_alloc.free_all(6, &freed), Error::kOk);
  assert_int_equal(freed, 2);
  Stats s = stats();
  assert_int_equal(s.retired_bytes, kPage);
  assert_int_equal(s.free_blocks, 1);
  assert_int_equal(s.largest_free_bytes, 2 * kStack - kPage);
  expect_audit_ok();
}

void test_retired_pages_survive_export_and_import(void**) {
  uint64_t a = alloc_ok(1, 4 * kPage);
  const uint64_t pages[] = {kBase + 100 * kPage, a + kPage, kBase + kStack + 7 * kPage};
  for (uint64_t p : pages) assert_int_equal(g_alloc.retire_page(p), Error::kOk);
  uint64_t image[8];
  uint32_t n = 0;
  assert_int_equal(g_alloc.export_retired(image, 1, &n), Error::kTooManyRetired);
  assert_int_equal(n, 3);
  assert_int_equal(g_alloc.export_retired(image, 8, &n), Error::kOk);
  assert_int_equal(n, 3);
  assert_true(image[0] < image[1] && image[1] < image[2]);
  // A chip reset: a fresh allocator over the same HBM, the list imported.
  Config c = make_config();
  assert_int_equal(g_alloc.init(c, g_arena, sizeof(g_arena)), Error::kOk);
  assert_int_equal(g_alloc.import_retired(image, n), Error::kOk);
  assert_int_equal(g_alloc.import_retired(image, n), Error::kOk);  // idempotent
  Stats s = stats();
  assert_int_equal(s.retired_pages, 3);
  assert_int_equal(s.retired_bytes, 3 * kPage);
  assert_int_equal(s.retired_per_stack[0], 2);
  assert_int_equal(s.retired_per_stack[1], 1);
  for (uint64_t p : pages) assert_true(g_alloc.is_retired(p));
  expect_audit_ok();
  uint64_t bad[] = {kBase + kPage + 1};
  assert_int_equal(g_alloc.import_retired(bad, 1), Error::kBadArgument);
  uint64_t outside[] = {kBase + 2 * kStack};
  assert_int_equal(g_alloc.import_retired(outside, 1), Error::kOutOfRange);
  assert_int_equal(stats().retired_pages, 3);
}

void test_retired_table_full_is_reported(void**) {
  for (uint64_t i = 0; i < 32; ++i)
    assert_int_equal(g_alloc.retire_page(kBase + 2 * i * kPage), Error::kOk);
  assert_int_equal(g_alloc.retire_page(kBase + kMiB), Error::kTooManyRetired);
  Stats s = stats();
  assert_int_equal(s.retired_pages, 32);
  // Pages 0, 2, .., 62: one free page between each pair, then the tail.
  assert_int_equal(s.free_blocks, 32);
  expect_audit_ok();
}

void test_correctable_errors_are_counted_per_stack(void**) {
  assert_int_equal(g_alloc.record_correctable(kBase), Error::kOk);
  assert_int_equal(g_alloc.record_correctable(kBase + kStack), Error::kOk);
  assert_int_equal(g_alloc.record_correctable(kBase + kStack + 5), Error::kOk);
  assert_int_equal(g_alloc.record_correctable(kBase + 2 * kStack), Error::kOutOfRange);
  Stats s = stats();
  assert_int_equal(s.stacks, 2);
  assert_int_equal(s.correctable_errors[0], 1);
  assert_int_equal(s.correctable_errors[1], 2);
  assert_int_equal(s.retired_pages, 0);
}

void test_fragmentation_reflects_split_free_space(void**) {
  uint64_t a = alloc_ok(1, 32 * kMiB);
  alloc_ok(1, kPage);
  assert_int_equal(g_alloc.free(a), Error::kOk);
  Stats s = stats();
  // Free: 32 MiB hole and the tail (128 MiB - 32 MiB - 4 KiB).
  double tail = double(2 * kStack - 32 * kMiB - kPage);
  double expect = 1.0 - tail / (tail + 32.0 * kMiB);
  assert_true(s.fragmentation > expect - 1e-9 && s.fragmentation < expect + 1e-9);
  assert_int_equal(s.largest_free_bytes, uint64_t(tail));
}

void test_large_pages_make_the_page_the_granule(void**) {
  Config c = make_config(1, 64 * kMiB, 2 * kMiB);
  assert_int_equal(g_alloc.init(c, g_arena, sizeof(g_arena)), Error::kOk);
  uint64_t a = alloc_ok(1, 1);
  AllocationInfo info;
  assert_int_equal(g_alloc.lookup(a, 1, &info), Error::kOk);
  assert_int_equal(info.bytes, 2 * kMiB);
  assert_int_equal(g_alloc.retire_page(a + kMiB), Error::kOk);
  assert_true(g_alloc.is_retired(a));
  expect_audit_ok();
}

// allocate and free write three levels of the live-start index every time:
// a window with fewer levels writes spare summary words that no search
// reads, one with more walks the rest. Windows of 1, 2, 3 and 4 levels;
// a filler allocation puts the small ones of the others just below a
// boundary of their top level (4,096 and 2^18 pages), so they come and go
// on both sides of it. After every step the index marks exactly the live
// allocations (audit), lookup finds each from its last byte and
// next_allocation walks all of them in address order.
void test_live_index_is_exact_for_every_level_count(void**) {
  struct Window {
    uint32_t pages, filler_pages;
  };
  const Window kWindows[] = {{48, 0}, {1000, 880}, {5000, 4094}, {(1u << 18) + 64, (1u << 18) - 2}};
  std::vector<uint64_t> arena;
  for (const Window& w : kWindows) {
    const uint32_t pages = w.pages;
    Config c = make_config(1, uint64_t(pages) * kPage);
    Allocator a;
    arena.assign(Allocator::arena_bytes(c) / 8 + 1, 0);
    assert_int_equal(a.init(c, arena.data(), arena.size() * 8), Error::kOk);
    uint64_t filler = 0;
    if (w.filler_pages != 0)
      assert_int_equal(
          a.allocate(9, Category::kScratch, uint64_t(w.filler_pages) * kPage, 0, &filler),
          Error::kOk);
    std::vector<uint64_t> live;
    uint64_t rng = pages;
    for (int step = 0; step < 400; ++step) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      uint32_t r = uint32_t(rng >> 33);
      if (live.size() < 2 || ((r & 1) != 0 && live.size() < 10)) {
        uint64_t addr = 0;
        Error e = a.allocate(1 + r % 3, Category::kTensors, (1 + (r >> 1) % 4) * kPage, 0, &addr);
        assert_true(e == Error::kOk || e == Error::kNoMemory);
        if (e == Error::kOk) live.push_back(addr);
      } else {
        size_t i = (r >> 1) % live.size();
        assert_int_equal(a.free(live[i]), Error::kOk);
        live.erase(live.begin() + long(i));
      }
      assert_int_equal(a.audit(), Error::kOk);
      std::vector<uint64_t> sorted = live;
      if (filler != 0) sorted.push_back(filler);
      std::sort(sorted.begin(), sorted.end());
      AllocationInfo info;
      uint64_t from = 0;
      for (uint64_t addr : sorted) {
        assert_int_equal(a.next_allocation(from, &info), Error::kOk);
        assert_int_equal(info.addr, addr);
        assert_int_equal(a.lookup(addr + info.bytes - 1, 1, &info), Error::kOk);
        assert_int_equal(info.addr, addr);
        from = addr + 1;
      }
      assert_int_equal(a.next_allocation(from, &info), Error::kNotFound);
    }
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_init_rejects_invalid_geometry_and_small_arena, setup),
      cmocka_unit_test(test_arena_bytes_follows_published_bound),
      cmocka_unit_test(test_worst_case_hbm_follows_published_formula),
      cmocka_unit_test_setup(test_allocation_rounds_size_up_to_page, setup),
      cmocka_unit_test_setup(test_free_coalesces_with_both_neighbours, setup),
      cmocka_unit_test_setup(test_split_reuses_freed_hole_of_exact_size, setup),
      cmocka_unit_test_setup(test_alignment_up_to_2mib_is_honoured, setup),
      cmocka_unit_test_setup(test_bad_arguments_are_rejected_and_counted, setup),
      cmocka_unit_test_setup(test_exhaustion_reports_no_memory, setup),
      cmocka_unit_test_setup(test_quota_blocks_allocation_beyond_limit, setup),
      cmocka_unit_test_setup(test_default_quota_applies_to_new_owners, setup),
      cmocka_unit_test_setup(test_free_checks_owner_and_address, setup),
      cmocka_unit_test_setup(test_free_all_releases_only_that_owner, setup),
      cmocka_unit_test_setup(test_remove_owner_forgets_quota, setup),
      cmocka_unit_test_setup(test_owner_table_full_is_reported, setup),
      cmocka_unit_test_setup(test_allocation_limit_is_reported, setup),
      cmocka_unit_test_setup(test_lookup_finds_the_containing_allocation, setup),
      cmocka_unit_test_setup(test_next_allocation_walks_in_address_order, setup),
      cmocka_unit_test_setup(test_retired_free_page_is_never_handed_out, setup),
      cmocka_unit_test_setup(test_retire_inside_live_allocation_poisons_then_carves_on_free, setup),
      cmocka_unit_test_setup(test_free_all_carves_retired_pages_of_poisoned_allocations, setup),
      cmocka_unit_test_setup(test_retired_pages_survive_export_and_import, setup),
      cmocka_unit_test_setup(test_retired_table_full_is_reported, setup),
      cmocka_unit_test_setup(test_correctable_errors_are_counted_per_stack, setup),
      cmocka_unit_test_setup(test_fragmentation_reflects_split_free_space, setup),
      cmocka_unit_test_setup(test_large_pages_make_the_page_the_granule, setup),
      cmocka_unit_test(test_live_index_is_exact_for_every_level_count),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
