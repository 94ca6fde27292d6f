// Randomised trace tester for the HBM allocator core: thousands of mixed
// allocate/free/free_all/retire/quota/reset steps (sizes 4 KiB..16 MiB,
// alignments up to 2 MiB, several owners), each followed by a full check
// against a plain reference model (std::map of live allocations, a set of
// retired pages, per-owner usage). What it checks after every step: the
// allocator's audit() (free lists agree with the bitmaps, no two adjacent
// free blocks, the live-start index, accounting), and from the outside the
// address map: live blocks are exactly the model's allocations, nothing
// overlaps, used/free/retired bytes add up exactly, retired pages lie in no
// free block and only in allocations the model knows are poisoned, and
// per-owner and per-category usage match. Failures the model cannot
// predict exactly (kNoMemory depends on placement) are checked against the
// good-fit guarantee instead, and with stitching against what stats()
// said stitching could gather. Stitching is on (a checked shadow map,
// hbm_shadow_map.h): the model keeps each allocation's physical extents,
// the shadow tables must hold exactly those of the stitched ones, and two
// traces run at high occupancy so that stitching happens often. A second
// trace checks the published worst-case HBM bounds against an adversary
// that frees to leave holes just too small for its next request: on HBM of
// the stitched bound (Allocator::worst_case_hbm_bytes) nothing may fail; on
// 2/5 of the contiguous bound the adversary must make the allocator without
// stitching fail, and the one with stitching must serve it all. Seeded,
// reproducible; a failure names the seed and the step.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// cmocka 1.1 ships no extern "C" guards.
extern "C" {
#include <cmocka.h>
}

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "hbm_shadow_map.h"
#include "vtrn/hbm.h"

using namespace vtrn::hbm;
using vtrn::hbm::test::ShadowMap;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kPage = 4 * kKiB;
constexpr uint64_t kBase = 0x8000'0000ull;
constexpr uint64_t kRemapBase = 0x40'0000'0000ull;
constexpr uint32_t kOwners = 6;
constexpr uint32_t kSteps = 15000;

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

struct Live {
  uint64_t bytes;
  uint32_t owner;
  Category category;
  std::vector<Extent> ext;  // physical extents; one identity extent when not stitched
};

struct OwnerModel {
  uint64_t quota = kNoQuota;
  bool explicit_quota = false;
};

struct Model {
  std::map<uint64_t, Live> live;
  std::set<uint64_t> retired;
  std::map<uint32_t, OwnerModel> owners;  // owners the allocator must know
  uint64_t used_by(uint32_t owner) const {
    uint64_t n = 0;
    for (auto& [a, l] : live)
      if (l.owner == owner) n += l.bytes;
    return n;
  }
  uint32_t count_of(uint32_t owner) const {
    uint32_t n = 0;
    for (auto& [a, l] : live)
      if (l.owner == owner) n++;
    return n;
  }
  const std::pair<const uint64_t, Live>* containing(uint64_t addr) const {
    auto it = live.upper_bound(addr);
    if (it == live.begin()) return nullptr;
    --it;
    return addr < it->first + it->second.bytes ? &*it : nullptr;
  }
  bool poisoned_range(uint64_t phys, uint64_t bytes) const {
    auto it = retired.lower_bound(phys);
    return it != retired.end() && *it < phys + bytes;
  }
  bool poisoned(const Live& l) const {
    for (const Extent& e : l.ext)
      if (poisoned_range(e.phys_addr, e.bytes)) return true;
    return false;
  }
  // The live allocation whose pages include the physical page, or null.
  const std::pair<const uint64_t, Live>* owner_of_phys(uint64_t page) const {
    for (auto& kv : live)
      for (const Extent& e : kv.second.ext)
        if (page >= e.phys_addr && page < e.phys_addr + e.bytes) return &kv;
    return nullptr;
  }
  // The physical address behind a device address of a live allocation.
  uint64_t phys_of(uint64_t addr) const {
    auto a = containing(addr);
    if (a == nullptr) return addr;
    for (const Extent& e : a->second.ext)
      if (addr >= e.device_addr && addr < e.device_addr + e.bytes)
        return e.phys_addr + (addr - e.device_addr);
    return ~0ull;
  }
  // Drops owners that hold nothing and never had a quota set, as the
  // allocator does.
  void drop_if_idle(uint32_t owner) {
    auto it = owners.find(owner);
    if (it != owners.end() && !it->second.explicit_quota && count_of(owner) == 0)
      owners.erase(it);
  }
};

struct Harness {
  ShadowMap shadow;
  Mapper mapper;
  Config config;
  std::vector<uint8_t> arena;
  Allocator alloc;
  Model model;
  Rng rng;
  uint64_t seed;
  uint32_t step = 0;
  // Outcome counts over the whole trace (resets clear the allocator's).
  uint64_t allocs = 0, frees = 0, nomem = 0, quota = 0, poisoned_frees = 0, resets = 0;
  uint64_t stitched = 0;

  // Stitching on over a remap window of remap_bytes (0: 4x the HBM).
  void enable_stitching(uint64_t remap_bytes) {
    shadow = ShadowMap{};
    shadow.page = kPage;
    shadow.hbm_base = kBase;
    shadow.hbm_bytes = uint64_t(config.geometry.stacks) * config.geometry.bytes_per_stack;
    shadow.remap_base = kRemapBase;
    shadow.remap_bytes = remap_bytes != 0 ? remap_bytes : 4 * shadow.hbm_bytes;
    mapper = shadow.mapper();
    config.mapper = &mapper;
    config.remap_base = kRemapBase;
    config.remap_bytes = remap_bytes;
  }
};

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond))                                                                          \
      fail_msg("seed %llu step %u: check failed: %s", (unsigned long long)h.seed, h.step, \
               #cond);                                                                    \
  } while (0)

struct Walk {
  std::vector<BlockInfo> blocks;
};

void collect(const BlockInfo& b, void* ctx) { static_cast<Walk*>(ctx)->blocks.push_back(b); }

void check_everything(Harness& h) {
  CHECK(h.alloc.audit() == Error::kOk);
  Walk w;
  h.alloc.for_each_block(collect, &w);
  const uint64_t total = h.alloc.total_bytes();
  uint64_t expect = kBase, used = 0, free_bytes = 0, retired_outside = 0, largest = 0;
  uint32_t used_blocks = 0;
  bool prev_free = false;
  // The extents of the model's stitched allocations, by physical address,
  // and their total: the shadow tables must map exactly these.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> model_extents;  // pa -> (bytes, owner addr)
  uint64_t stitched_bytes = 0, contiguous = 0;
  for (auto& [a, l] : h.model.live) {
    bool st = h.alloc.in_remap_window(a);
    if (!st) {
      contiguous++;
      continue;
    }
    CHECK(l.ext.size() >= 1 && l.ext.size() <= kMaxExtents);
    for (const Extent& e : l.ext) {
      model_extents[e.phys_addr] = {e.bytes, a};
      CHECK(h.shadow.walk(e.device_addr) == e.phys_addr);
      CHECK(h.shadow.walk(e.device_addr + e.bytes - 1) == e.phys_addr + e.bytes - 1);
      stitched_bytes += e.bytes;
    }
  }
  CHECK(h.shadow.violations == 0);
  CHECK(h.shadow.mapped_bytes == stitched_bytes);
  std::vector<uint64_t> free_sizes;
  for (const BlockInfo& b : w.blocks) {
    CHECK(b.addr == expect);  // contiguous, hence no overlap
    CHECK(b.bytes > 0 && b.bytes % kPage == 0);
    expect += b.bytes;
    auto r = h.model.retired.lower_bound(b.addr);
    bool has_retired = r != h.model.retired.end() && *r < b.addr + b.bytes;
    switch (b.state) {
      case BlockState::kFree:
        CHECK(!prev_free);  // coalescing complete
        CHECK(!has_retired);
        free_bytes += b.bytes;
        free_sizes.push_back(b.bytes);
        if (b.bytes > largest) largest = b.bytes;
        break;
      case BlockState::kExtent: {
        auto it = model_extents.find(b.addr);
        CHECK(it != model_extents.end() && it->second.first == b.bytes);
        if (has_retired) CHECK(h.model.poisoned(h.model.live.at(it->second.second)));
        used += b.bytes;
        break;
      }
      case BlockState::kUsed: {
        auto it = h.model.live.find(b.addr);
        CHECK(it != h.model.live.end());
        CHECK(it->second.bytes == b.bytes);
        AllocationInfo info;
        CHECK(h.alloc.lookup(b.addr, b.bytes, &info) == Error::kOk);
        CHECK(info.addr == b.addr && info.owner == it->second.owner &&
              info.category == it->second.category);
        CHECK(info.poisoned == has_retired && !info.stitched && info.extents == 1);
        used += b.bytes;
        used_blocks++;
        break;
      }
      case BlockState::kRetired:
        CHECK(b.bytes == kPage && h.model.retired.count(b.addr) == 1);
        retired_outside += b.bytes;
        break;
    }
    prev_free = b.state == BlockState::kFree;
  }
  CHECK(expect == kBase + total);
  CHECK(used_blocks == contiguous);
  // Stitched allocations from the outside: info, extents, poisoning.
  for (auto& [a, l] : h.model.live) {
    if (!h.alloc.in_remap_window(a)) continue;
    AllocationInfo info;
    CHECK(h.alloc.lookup(a, l.bytes, &info) == Error::kOk);
    CHECK(info.stitched && info.extents == l.ext.size() && info.bytes == l.bytes);
    CHECK(info.poisoned == h.model.poisoned(l));
  }
  uint64_t model_used = 0;
  uint64_t cat_bytes[kCategoryCount] = {};
  for (auto& [a, l] : h.model.live) {
    model_used += l.bytes;
    cat_bytes[uint32_t(l.category)] += l.bytes;
  }
  uint64_t model_retired_outside = 0;
  for (uint64_t p : h.model.retired)
    if (h.model.owner_of_phys(p) == nullptr) model_retired_outside += kPage;
  Stats s;
  h.alloc.stats(&s);
  CHECK(used == model_used && s.used_bytes == model_used);
  CHECK(retired_outside == model_retired_outside && s.retired_bytes == retired_outside);
  CHECK(s.free_bytes == free_bytes && used + free_bytes + retired_outside == total);
  CHECK(s.largest_contiguous_free_bytes == largest);
  // Allocatable: the contiguous figure, or what stitching can gather, which
  // is at most the 64 largest free blocks and (class order) more than
  // 32/33 of them.
  std::sort(free_sizes.begin(), free_sizes.end(), std::greater<uint64_t>());
  uint64_t budget = std::min<uint64_t>(kMaxExtents, h.config.limits.max_extents - s.stitched_extents);
  uint64_t top = 0;
  for (size_t i = 0; i < free_sizes.size() && i < budget; ++i) top += free_sizes[i];
  if (h.config.mapper != nullptr) {
    uint64_t window = s.remap_largest_free_bytes;
    CHECK(s.stitch_free_bytes <= std::min(top, window));
    CHECK(s.stitch_free_bytes * 33 >= std::min(top, window) * 32 || s.stitch_free_bytes == window);
    CHECK(s.largest_free_bytes == std::max(largest, s.stitch_free_bytes));
    CHECK(s.stitched_allocations == h.model.live.size() - contiguous);
    CHECK(s.remap_used_bytes == stitched_bytes);
  } else {
    CHECK(s.largest_free_bytes == largest && s.stitched_allocations == 0);
  }
  CHECK(s.retired_pages == h.model.retired.size());
  CHECK(s.live_allocations == h.model.live.size());
  CHECK(s.owners == h.model.owners.size());
  for (uint32_t c = 0; c < kCategoryCount; ++c) CHECK(s.category_bytes[c] == cat_bytes[c]);
  uint64_t owner_bytes[kOwners + 1] = {};
  uint32_t owner_count[kOwners + 1] = {};
  for (auto& [a, l] : h.model.live) {
    owner_bytes[l.owner] += l.bytes;
    owner_count[l.owner]++;
  }
  for (uint32_t o = 1; o <= kOwners; ++o) {
    OwnerUsage u;
    Error e = h.alloc.owner_usage(o, &u);
    bool known = h.model.owners.count(o) == 1;
    CHECK(e == (known ? Error::kOk : Error::kNotFound));
    if (known) {
      CHECK(u.used_bytes == owner_bytes[o]);
      CHECK(u.allocations == owner_count[o]);
      CHECK(u.quota == h.model.owners[o].quota);
    }
  }
}

uint64_t random_size(Rng& r) {
  // Log-uniform over 4 KiB..16 MiB, then an arbitrary byte count below it.
  uint32_t shift = 12 + uint32_t(r.below(13));
  uint64_t hi = 1ull << shift;
  return hi / 2 + 1 + r.below(hi / 2);
}

void step_allocate(Harness& h) {
  uint32_t owner = 1 + uint32_t(h.rng.below(kOwners));
  Category cat = Category(h.rng.below(kCategoryCount));
  uint64_t size = random_size(h.rng);
  if (size > 16 * kMiB) size = 16 * kMiB;
  uint64_t align = h.rng.below(3) == 0 ? (kPage << h.rng.below(10)) : 0;
  uint64_t pages = (size + kPage - 1) / kPage;
  uint64_t bytes = pages * kPage;
  Stats before;
  h.alloc.stats(&before);
  uint64_t addr = 0;
  Error e = h.alloc.allocate(owner, cat, size, align, &addr);
  if (h.model.live.size() >= h.config.limits.max_allocations) {
    CHECK(e == Error::kTooManyAllocations);
    return;
  }
  auto it = h.model.owners.find(owner);
  uint64_t quota = it == h.model.owners.end() ? h.config.default_quota : it->second.quota;
  if (quota != kNoQuota && h.model.used_by(owner) + bytes > quota) {
    CHECK(e == Error::kQuota);
    h.quota++;
    return;
  }
  if (e == Error::kNoMemory) {
    // Good fit guarantees success when a free block reaches the request
    // padded for alignment and rounded up to its size class (< 1/32 more);
    // stitching when it can gather the pages and the window has such a
    // range.
    uint64_t need = pages + (align > kPage ? align / kPage - 1 : 0);
    CHECK(before.largest_contiguous_free_bytes / kPage < need + need / 32 + 1);
    if (h.config.mapper != nullptr)
      CHECK(before.stitch_free_bytes / kPage < pages ||
            before.remap_largest_free_bytes / kPage < need + need / 32 + 1);
    h.nomem++;
    return;
  }
  CHECK(e == Error::kOk);
  CHECK(addr % (align > kPage ? align : kPage) == 0);
  CHECK(h.model.live.count(addr) == 0);
  Live l{bytes, owner, cat, {}};
  if (h.alloc.in_remap_window(addr)) {
    CHECK(addr + bytes <= kRemapBase + h.alloc.remap_bytes());
    // Stitched only when no single free block could hold it.
    uint64_t need = pages + (align > kPage ? align / kPage - 1 : 0);
    CHECK(before.largest_contiguous_free_bytes / kPage < need + need / 32 + 1);
    l.ext.resize(kMaxExtents);
    uint32_t n = 0;
    CHECK(h.alloc.extents(addr, l.ext.data(), kMaxExtents, &n) == Error::kOk);
    l.ext.resize(n);
    uint64_t off = 0;
    for (const Extent& x : l.ext) {
      CHECK(x.device_addr == addr + off && x.phys_addr >= kBase &&
            x.phys_addr + x.bytes <= kBase + h.alloc.total_bytes());
      CHECK(!h.model.poisoned_range(x.phys_addr, x.bytes));  // never hands out retired pages
      off += x.bytes;
    }
    CHECK(off == bytes);
    h.stitched++;
  } else {
    CHECK(addr >= kBase && addr + bytes <= kBase + h.alloc.total_bytes());
    CHECK(!h.model.poisoned_range(addr, bytes));
    l.ext.push_back(Extent{addr, addr, bytes});
  }
  h.model.live[addr] = l;
  h.allocs++;
  if (it == h.model.owners.end()) h.model.owners[owner] = OwnerModel{h.config.default_quota, false};
}

void step_free(Harness& h) {
  if (h.model.live.empty()) return;
  auto it = h.model.live.begin();
  std::advance(it, h.rng.below(h.model.live.size()));
  uint64_t addr = it->first;
  uint32_t owner = it->second.owner;
  if (h.rng.below(10) == 0) {
    uint32_t other = owner % kOwners + 1;
    CHECK(h.alloc.free(addr, other) == Error::kNotOwner);
    CHECK(h.alloc.free(addr + kPage / 2, owner) == Error::kNoSuchAllocation);
  }
  CHECK(h.alloc.free(addr, h.rng.below(2) ? owner : kAnyOwner) == Error::kOk);
  h.frees++;
  if (h.model.poisoned(it->second)) h.poisoned_frees++;
  h.model.live.erase(it);
  h.model.drop_if_idle(owner);
}

void step_free_all(Harness& h) {
  uint32_t owner = 1 + uint32_t(h.rng.below(kOwners));
  uint32_t expect = h.model.count_of(owner);
  uint32_t freed = 0;
  CHECK(h.alloc.free_all(owner, &freed) == Error::kOk);
  CHECK(freed == expect);
  for (auto it = h.model.live.begin(); it != h.model.live.end();)
    it = it->second.owner == owner ? h.model.live.erase(it) : std::next(it);
  h.model.drop_if_idle(owner);
}

void step_retire(Harness& h) {
  uint64_t addr = kBase + h.rng.below(h.alloc.total_bytes());
  // Half the time aim inside a live allocation to exercise poisoning.
  if (!h.model.live.empty() && h.rng.below(2) == 0) {
    auto it = h.model.live.begin();
    std::advance(it, h.rng.below(h.model.live.size()));
    addr = it->first + h.rng.below(it->second.bytes);
  }
  uint64_t page = h.model.phys_of(addr) & ~(kPage - 1);
  RetireOutcome out;
  Error e = h.alloc.retire_page(addr, &out);
  if (h.model.retired.count(page)) {
    CHECK(e == Error::kAlreadyRetired);
    return;
  }
  if (h.model.retired.size() >= h.config.limits.max_retired_pages) {
    CHECK(e == Error::kTooManyRetired);
    return;
  }
  CHECK(e == Error::kOk);
  auto owner_alloc = h.model.owner_of_phys(page);
  CHECK(out.was_allocated == (owner_alloc != nullptr));
  if (owner_alloc) CHECK(out.allocation_addr == owner_alloc->first && out.owner == owner_alloc->second.owner);
  h.model.retired.insert(page);
}

void step_quota(Harness& h) {
  uint32_t owner = 1 + uint32_t(h.rng.below(kOwners));
  if (h.rng.below(3) == 0) {
    CHECK(h.alloc.remove_owner(owner) == Error::kOk);
    for (auto it = h.model.live.begin(); it != h.model.live.end();)
      it = it->second.owner == owner ? h.model.live.erase(it) : std::next(it);
    h.model.owners.erase(owner);
    return;
  }
  uint64_t quota = h.rng.below(2) ? kNoQuota : (32 * kMiB + h.rng.below(128 * kMiB));
  CHECK(h.alloc.set_quota(owner, quota) == Error::kOk);
  h.model.owners[owner] = OwnerModel{quota, true};
}

// A chip reset: everything live is gone, the retired list comes back.
void step_reset(Harness& h) {
  std::vector<uint64_t> image(h.config.limits.max_retired_pages);
  uint32_t n = 0;
  CHECK(h.alloc.export_retired(image.data(), uint32_t(image.size()), &n) == Error::kOk);
  CHECK(n == h.model.retired.size());
  // The page tables go with the chip's state.
  h.shadow.by_va.clear();
  h.shadow.by_pa.clear();
  h.shadow.mapped_bytes = 0;
  CHECK(h.alloc.init(h.config, h.arena.data(), h.arena.size()) == Error::kOk);
  CHECK(h.alloc.import_retired(image.data(), n) == Error::kOk);
  h.model.live.clear();
  h.model.owners.clear();
  h.resets++;
}

void step_lookup(Harness& h) {
  uint64_t addr = kBase + h.rng.below(h.alloc.total_bytes());
  if (h.config.mapper != nullptr && h.rng.below(2) == 0) {
    // In the remap window, near stitched allocations.
    addr = kRemapBase + h.rng.below(h.alloc.remap_bytes() / 8);
    uint64_t len = 1 + h.rng.below(64 * kKiB);
    AllocationInfo info;
    Error e = h.alloc.lookup(addr, len, &info);
    auto a = h.model.containing(addr);
    bool inside = a != nullptr && addr + len <= a->first + a->second.bytes;
    CHECK(e == (inside ? Error::kOk : Error::kNotFound));
    if (inside) CHECK(info.addr == a->first && info.stitched);
    return;
  }
  uint64_t len = 1 + h.rng.below(64 * kKiB);
  if (addr + len > kBase + h.alloc.total_bytes()) return;
  AllocationInfo info;
  Error e = h.alloc.lookup(addr, len, &info);
  auto a = h.model.containing(addr);
  bool inside = a != nullptr && addr + len <= a->first + a->second.bytes;
  CHECK(e == (inside ? Error::kOk : Error::kNotFound));
  if (inside) CHECK(info.addr == a->first);
}

// stack_bytes sets the occupancy (the live count is capped at 160);
// alloc_permille how often a step allocates.
void run_trace(uint64_t seed, uint64_t stack_bytes = 256 * kMiB, uint32_t alloc_permille = 480) {
  Harness h;
  h.seed = seed;
  h.rng.s = seed;
  h.config.geometry.stacks = 2;
  h.config.geometry.bytes_per_stack = stack_bytes;
  h.config.geometry.page_bytes = kPage;
  h.config.geometry.channels = 8;
  h.config.base = kBase;
  h.config.limits.max_allocations = 160;
  h.config.limits.max_owners = 8;
  h.config.limits.max_retired_pages = 192;
  h.config.limits.max_extents = 160 * 16;
  h.enable_stitching(0);
  h.arena.assign(Allocator::arena_bytes(h.config), 0);
  assert_int_equal(h.alloc.init(h.config, h.arena.data(), h.arena.size()), Error::kOk);
  uint64_t occupancy_sum = 0;
  for (h.step = 0; h.step < kSteps; ++h.step) {
    uint64_t r = h.rng.below(1000);
    uint32_t free_end = alloc_permille + 425;
    if (r < alloc_permille) step_allocate(h);
    else if (r < free_end) step_free(h);
    else if (r < free_end + 15) step_free_all(h);
    else if (r < free_end + 30) step_retire(h);
    else if (r < free_end + 40) step_quota(h);
    else if (r < free_end + 42) step_reset(h);
    else step_lookup(h);
    check_everything(h);
    Stats s;
    h.alloc.stats(&s);
    occupancy_sum += s.used_bytes * 1000 / s.total_bytes;
  }
  printf("seed %llu: %llu allocs (%llu stitched), %llu frees (%llu poisoned), %llu no-memory, "
         "%llu quota, %llu resets, %zu retired pages, mean occupancy %.1f%%\n",
         (unsigned long long)seed, (unsigned long long)h.allocs, (unsigned long long)h.stitched,
         (unsigned long long)h.frees, (unsigned long long)h.poisoned_frees,
         (unsigned long long)h.nomem, (unsigned long long)h.quota, (unsigned long long)h.resets,
         h.model.retired.size(), double(occupancy_sum) / kSteps / 10.0);
  if (alloc_permille > 480) CHECK(h.stitched > 100);  // high occupancy: stitching is exercised
}

// The published worst cases (Allocator::worst_case_hbm_bytes with
// stitching, worst_case_contiguous_hbm_bytes without): on HBM of exactly
// the bound, a workload that keeps its promises (live bytes, live count,
// largest request and alignment, retired pages) must never see kNoMemory;
// with stitching the remap window is sized by worst_case_remap_bytes and
// the extent budget is kMaxExtents per allocation. The trace plays against the placement with the address map in
// view: it allocates whenever its promises allow, mostly the largest
// request (half of them at the largest alignment) or a few pages less, and
// otherwise frees the allocation whose neighbours are both not free (a new
// hole rather than a merge), preferring the ones a few pages short of the
// largest, so the holes it leaves are just too small for the next request.
// Retirements land anywhere, inside allocations too. Full checks after
// every step as above. The same trace on 2/5 of the contiguous bound must
// run out without stitching, which shows it presses hard enough for the
// contiguous check to mean something, and must not run out with stitching
// (the failures it forces are exactly the holes stitching joins).
constexpr uint64_t kBoundLive = 48 * kMiB;
constexpr uint32_t kBoundCount = 24;
constexpr uint64_t kBoundRequest = 4 * kMiB;
constexpr uint64_t kBoundAlign = 512 * kKiB;
constexpr uint32_t kBoundRetired = 8;
constexpr uint32_t kBoundSteps = 4000;

uint64_t model_live_bytes(const Model& m) {
  uint64_t n = 0;
  for (auto& [a, l] : m.live) n += l.bytes;
  return n;
}

// The live allocation whose release leaves a new hole, preferring a size
// just short of the largest request; random among equals.
uint64_t adversarial_victim(Harness& h) {
  Walk w;
  h.alloc.for_each_block(collect, &w);
  uint64_t victim = 0;
  uint64_t best = 0;
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    const BlockInfo& b = w.blocks[i];
    if (b.state != BlockState::kUsed) continue;
    bool free_before = i > 0 && w.blocks[i - 1].state == BlockState::kFree;
    bool free_after = i + 1 < w.blocks.size() && w.blocks[i + 1].state == BlockState::kFree;
    uint64_t score = 8 * uint64_t(!free_before + !free_after) +
                     4 * uint64_t(b.bytes < kBoundRequest && b.bytes > kPage) +
                     h.rng.below(4) + 1;
    if (score > best) {
      best = score;
      victim = b.addr;
    }
  }
  if (victim == 0 && !h.model.live.empty()) {
    // Only stitched allocations live (no identity block to score).
    auto it = h.model.live.begin();
    std::advance(it, h.rng.below(h.model.live.size()));
    victim = it->first;
  }
  return victim;
}

WorstCase bound_workload() {
  WorstCase w;
  w.max_live_bytes = kBoundLive;
  w.max_live_allocations = kBoundCount;
  w.max_request_bytes = kBoundRequest;
  w.max_alignment = kBoundAlign;
  w.retired_pages = kBoundRetired;
  return w;
}

// Returns how many requests failed with kNoMemory; with must_fit every one
// must succeed. stitched_out (optional) gets how many were stitched.
uint64_t run_bound_trace(uint64_t seed, uint64_t hbm, bool must_fit, bool stitch,
                         uint64_t* stitched_out = nullptr) {
  Harness h;
  h.seed = seed;
  h.rng.s = seed;
  h.config.geometry.stacks = 1;
  h.config.geometry.bytes_per_stack = hbm;
  h.config.geometry.page_bytes = kPage;
  h.config.geometry.channels = 8;
  h.config.base = kBase;
  h.config.limits.max_allocations = kBoundCount;
  h.config.limits.max_owners = 8;
  h.config.limits.max_retired_pages = kBoundRetired;
  h.config.limits.max_extents = kMaxExtents * kBoundCount;
  if (stitch) {
    uint64_t window = Allocator::worst_case_remap_bytes(kPage, bound_workload());
    h.enable_stitching((window + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
  }
  h.arena.assign(Allocator::arena_bytes(h.config), 0);
  assert_int_equal(h.alloc.init(h.config, h.arena.data(), h.arena.size()), Error::kOk);
  uint64_t attempts = 0, nomem = 0;
  double worst_frag = 0;
  for (h.step = 0; h.step < kBoundSteps; ++h.step) {
    uint64_t r = h.rng.below(100);
    uint64_t size = r < 50   ? kBoundRequest
                    : r < 80 ? kBoundRequest - kPage * (1 + h.rng.below(4))
                             : kPage;
    uint64_t align = r < 25 ? kBoundAlign : 0;
    uint64_t bytes = (size + kPage - 1) / kPage * kPage;
    if (must_fit && r >= 98 && h.model.retired.size() < kBoundRetired) {
      step_retire(h);
    } else if (h.model.live.size() < kBoundCount &&
               model_live_bytes(h.model) + bytes <= kBoundLive) {
      uint32_t owner = 1 + uint32_t(h.rng.below(kOwners));
      Category cat = Category(h.rng.below(kCategoryCount));
      uint64_t addr = 0;
      Error e = h.alloc.allocate(owner, cat, size, align, &addr);
      attempts++;
      if (e == Error::kNoMemory && !must_fit) {
        nomem++;
      } else {
        CHECK(e == Error::kOk);
        CHECK(addr % (align > kPage ? align : kPage) == 0);
        Live l{bytes, owner, cat, {}};
        l.ext.resize(kMaxExtents);
        uint32_t n = 0;
        CHECK(h.alloc.extents(addr, l.ext.data(), kMaxExtents, &n) == Error::kOk);
        l.ext.resize(n);
        if (h.alloc.in_remap_window(addr)) h.stitched++;
        h.model.live[addr] = l;
        if (h.model.owners.count(owner) == 0) h.model.owners[owner] = OwnerModel{};
      }
    } else if (!h.model.live.empty()) {
      auto victim = h.model.live.find(adversarial_victim(h));
      CHECK(victim != h.model.live.end());
      uint32_t owner = victim->second.owner;
      CHECK(h.alloc.free(victim->first, owner) == Error::kOk);
      h.model.live.erase(victim);
      h.model.drop_if_idle(owner);
    }
    check_everything(h);
    Stats s;
    h.alloc.stats(&s);
    if (s.fragmentation > worst_frag) worst_frag = s.fragmentation;
  }
  CHECK(attempts > kBoundSteps / 4);
  printf("bound seed %llu%s: HBM %llu MiB for %llu MiB live, %llu requests (%llu stitched), "
         "%llu no-memory, fragmentation up to %.1f%%, %zu retired pages\n",
         (unsigned long long)seed, stitch ? " stitching" : "", (unsigned long long)(hbm / kMiB),
         (unsigned long long)(kBoundLive / kMiB), (unsigned long long)attempts,
         (unsigned long long)h.stitched, (unsigned long long)nomem, 100 * worst_frag,
         h.model.retired.size());
  if (stitched_out) *stitched_out = h.stitched;
  return nomem;
}

uint64_t bound_hbm() { return Allocator::worst_case_hbm_bytes(kPage, bound_workload()); }
uint64_t contiguous_bound_hbm() {
  return Allocator::worst_case_contiguous_hbm_bytes(kPage, bound_workload());
}

void test_hbm_of_stitched_worst_case_bound_never_runs_out(void**) {
  run_bound_trace(11, bound_hbm(), true, true);
  run_bound_trace(0xB0B0, bound_hbm(), true, true);
}

void test_hbm_of_contiguous_bound_never_runs_out_without_stitching(void**) {
  run_bound_trace(11, contiguous_bound_hbm(), true, false);
  run_bound_trace(0xB0B0, contiguous_bound_hbm(), true, false);
}

void test_adversary_that_exhausts_two_fifths_without_stitching_is_served_with_it(void**) {
  uint64_t part = contiguous_bound_hbm() * 2 / 5 / kPage * kPage;
  for (uint64_t seed : {11ull, 0xB0B0ull}) {
    assert_true(run_bound_trace(seed, part, false, false) > 0);
    uint64_t stitched = 0;
    assert_int_equal(run_bound_trace(seed, part, false, true, &stitched), 0);
    assert_true(stitched > 0);
  }
}

void test_trace_seed_1_keeps_model_and_invariants(void**) { run_trace(1); }
void test_trace_seed_2_keeps_model_and_invariants(void**) { run_trace(2); }
void test_trace_seed_3_keeps_model_and_invariants(void**) { run_trace(0xC0FFEE); }
void test_trace_seed_4_keeps_model_and_invariants(void**) { run_trace(0x5EED5EED); }
// High occupancy (80 MiB of HBM, allocations favoured): stitching is common.
void test_high_occupancy_trace_seed_5_stitches_and_keeps_invariants(void**) {
  run_trace(5, 40 * kMiB, 530);
}
void test_high_occupancy_trace_seed_6_stitches_and_keeps_invariants(void**) {
  run_trace(0xFEED, 40 * kMiB, 530);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_seed_1_keeps_model_and_invariants),
      cmocka_unit_test(test_trace_seed_2_keeps_model_and_invariants),
      cmocka_unit_test(test_trace_seed_3_keeps_model_and_invariants),
      cmocka_unit_test(test_trace_seed_4_keeps_model_and_invariants),
      cmocka_unit_test(test_high_occupancy_trace_seed_5_stitches_and_keeps_invariants),
      cmocka_unit_test(test_high_occupancy_trace_seed_6_stitches_and_keeps_invariants),
      cmocka_unit_test(test_hbm_of_stitched_worst_case_bound_never_runs_out),
      cmocka_unit_test(test_hbm_of_contiguous_bound_never_runs_out_without_stitching),
      cmocka_unit_test(test_adversary_that_exhausts_two_fifths_without_stitching_is_served_with_it),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
