// HBM allocator core: the chip's device-memory manager, portable C++ built
// into the firmware and into host tests and the benchmark.
//
// It hands out device addresses (uint64) over the HBM stacks that the board
// DTB describes, in bounded time: a two-level segregated fit (TLSF) with
// bitmaps finds a block in O(1), splits it, and on free coalesces with both
// address neighbours in O(1). It never touches the memory it manages: the
// host DMA writes HBM directly, and page retirement must work on memory
// that is known bad, so every piece of metadata (block headers included)
// lives out of band, in one arena that the caller provides and that is
// sized by arena_bytes() from the geometry and the limits.
// There is no heap, no exception, no RTTI and no lock: the caller
// serialises calls (the firmware's HBM service runs on one core).
//
// Two windows of device addresses. An allocation that fits one free block
// gets device address == physical address in the identity window
// [base, base + total): the common path, one TLSF search. Only when no
// single free block holds the request is it stitched, as accelerators'
// memory managers do with their MMUs: a range of the remap window
// [remap_base, remap_base + remap_bytes) (a second TLSF over that window)
// is covered by at most kMaxExtents physical extents, taken largest first
// (the head of the highest non-empty size class each time, the last one
// split to the exact remainder), and the caller's Mapper maps them there
// (the firmware: its page tables; tests: a checked shadow map). Alignment
// is the remap range's, not the extents'. Owner, quota and category see
// the allocation once; lookup, check_range, free and ECC accept either
// window (a remap address is translated through its extents; the page is
// retired physically and the stitched allocation poisoned).
//
// Units. The allocation granule is the board's HBM page (vtrn,page-bytes,
// 4 KiB..2 MiB): sizes are rounded up to it, every block starts on it, and
// it is the unit that ECC retirement removes, so a retired page always lies
// inside exactly one block. The default board (vtrn-dev2) uses 64 KiB
// pages; the benchmark and most tests use 4 KiB.
// Alignments are powers of two from one page up to kMaxAlignment (2 MiB);
// a smaller one is the page. Stacks are laid out back to back from
// Config::base (which must be kMaxAlignment-aligned), so a block may span
// two stacks; stack_of(addr) is (addr - base) / bytes_per_stack.
//
// Placement is TLSF good fit: the request is rounded up to the next of 32
// classes per power of two and the head of the first non-empty list at or
// above it is taken, so any free block of good_fit(p) pages serves a
// request of p pages, where good_fit(p) = p below 32 pages and
// p + 2^(floor(log2 p) - 5) - 1 above (under 1/32 more).
//
// Fragmentation is 1 - largest free / total free, where "largest free" is
// the largest allocation that would succeed now: max(largest contiguous
// free block, min(largest free range of the remap window, what the stitch
// path can gather from the kMaxExtents first blocks it would take)). On the
// issue's churn (sizes 4 KiB..16 MiB log-uniform, ~100 live, 50..70% of
// 320 MiB, a uniformly random buffer dies; hbm_bench, churn seed 43) it is
// 0.0% at every occupancy from 50 to 70% (mean and p90; the free space is
// in fewer than 64 blocks nearly always), against the goal of 12%; 33 of
// the churn's ~100,000 allocations were stitched (those that found no
// single block; without stitching 25 of them failed), 2 extents each at
// most, 1.4 us median and 3.3 us worst per stitched allocate or free
// natively (a flat 8-byte page-table entry written per 4 KiB page). The
// contiguous figure, the largest single free block, stays what it was:
// 59..65% by occupancy band (glibc 56..61% on the same trace). No non-moving placement gets it down
// (bench/hbm_frag_policies: first fit 54..55%, best fit 60..63%, next fit
// 89%, worst fit 93%): with random lifetimes it is at least the
// second-largest free block's share of the free bytes, 14..17% on average
// for every policy, because a free merges into the largest free block
// only when the dying buffer borders it (1..2% of frees). Stitching does
// not change where blocks go; it makes the holes usable together.
//
// Worst-case HBM, the published bound. A workload that never has more than
// M pages live (each size rounded up to the page) in at most N
// allocations, asks for at most n pages at alignments of at most a pages,
// and retires at most R pages, never sees kNoMemory, whatever the order of
// its requests and frees, on HBM of
//   P >= M + R + ceil(n * max(32 K, 33 B) / (32 K)) pages,
//   K = kMaxExtents, B = K (N - 1) + R + 1,
// provided the remap window is at least M + N * good_fit(n + a - 1) pages
// (worst_case_remap_bytes(): the window is a placement of its own without
// retired pages, so the contiguous bound below with R = 0 keeps it from
// being what fails) and Limits::max_extents >= K * N.
// Why: the N - 1 other allocations are at most K extents each, so at most
// B free blocks hold the >= P - M - R free pages; if B <= K the stitch can
// take all of them; else the K largest hold >= K / B of the free pages,
// and the stitch's i-th block is in the size class of the i-th largest,
// more than 32/33 of it. Alignment costs nothing here: it is the window's.
// worst_case_hbm_bytes() computes it (O(1)).
// Without stitching (Config::mapper unset) the contiguous bound applies:
//   P >= M + R + (N + R) * good_fit(n + a - 1) pages
// (at most N + R free blocks, and the largest must reach good_fit(n + a - 1));
// worst_case_contiguous_hbm_bytes() computes it.
// Examples at the scale: M = 224 MiB (70% of 320 MiB), N = 128,
// n = 16 MiB = 4,096 pages of 4 KiB, a = 1 page, R = 0:
//   stitched 57,344 + 536,514 = 593,858 pages = 2,319.8 MiB (10.4 * M),
//   contiguous 57,344 + 128 * (4,096 + 127) = 597,888 pages = 2,335.5 MiB;
// with 2 MiB alignments and R = 256: stitched 57,600 + 553,410 pages =
// 2,386.8 MiB, contiguous 57,600 + 384 * 4,734 pages = 7,326 MiB.
// So stitching removes the alignment and retirement terms from the bound,
// not the N * n term: an adversary that makes every allocation K extents
// with a hole between each still needs ~N * n free, and Robson showed
// that any allocator that never moves blocks can be forced to about
// M * log2(n) / 2 when the number of blocks is not limited. The trace
// tester runs an adversarial trace (frees that leave holes just too small
// for its next request) on HBM of exactly each bound and checks that
// nothing fails; on 2/5 of the contiguous bound the same trace runs out
// without stitching and is served in full with it. It is a guarantee, not
// the typical need: hbm_bench prints the bounds for its churn's own
// maxima, which runs in 320 MiB with no failure.
//
// Bounded time. allocate, free, lookup, check_range, next_allocation,
// set_quota: O(1) apart from one owner-table probe and a walk of at most
// L = ceil(log64(pages)) words of a live-start bitmap (L <= 6; 3 for
// 64 Ki pages). There is no tree: free finds its record through a
// page-indexed table, lookup through the bitmap. A stitched allocate adds
// O(kMaxExtents) TLSF operations and map calls (undone in as many on
// failure); its free, kMaxExtents frees and one unmap; its lookup is the
// same bitmap walk in the remap window, plus a walk of at most kMaxExtents
// extents for translate() and the ECC calls. free of a poisoned allocation
// adds O(max_retired_pages) to split the range around its retired pages.
// free_all(owner) costs one free per allocation the owner holds.
// retire_page walks at most 2 * (max_retired_pages + max_extents) + 1
// blocks. stats() scans the top free list of each window and at most
// kMaxExtents blocks; audit() is O(blocks + pages / 64) and meant for tests
// and a debug command.
//
// The common path. Allocating one block of the identity window and freeing
// it touch the owner's hash slot and record, the size-class bitmaps and
// list heads, the block, the remainder split off it (on free its two
// address neighbours and their list neighbours), the owner-list
// neighbours, one start-page table entry and one word per level of the
// live-start bitmap; nothing that only stitching needs (extent chains are
// a side array of the records). Choices the data makes random (which size
// class serves, list head or not, which neighbour a free merges with) are
// made by conditional moves fed by the compare, not by branch: on the speed
// trace a free merges with each neighbour 40% of the time, and a merge with
// a branch per neighbour (~0.9 mispredictions a free) is slower than
// without. The merge with both neighbours (16% of frees) is the one branch:
// it lets the other 84% unlist one block instead of two, 30 instructions
// for 0.16 mispredictions a free. The size-class search has no test for
// "nothing fits" of its own: an always-set bit in the row past the last
// names a class whose head stays 0. On hbm_bench's trace (callgrind,
// x86-64 with BMI2, GCC 12 -O2) an allocate is 196 instructions and a free
// 208 (clang 14 -O2: 184 and 179).
// Of a pair's ~405, the features' own bookkeeping is 34 (the live-start
// index's three levels), 15 (the owner list) and about 21 (owner and
// category counters, the owner-drop test), measured by removing each;
// without all three a pair is 354 and runs at ~0.25x the power-of-two
// lists instead of ~0.22x. The rest, the TLSF search, split, coalesce and
// list edits over out-of-band records plus argument checks and call
// overhead, is the bulk. What that is worth against glibc depends on the
// machine: hbm_bench's best-pass ratio was 5.97..8.02x (median of five
// runs 6.77x) on an AMD EPYC VM at load 0.4-0.9, and 4.8..5.2x on an
// earlier session's VM at load 1-1.8 (6.4x there under heavy load, which
// slows glibc more). Issue 17's floor is 5x. The replay loop alone costs
// ~3.5 ns of the ~23 ns an hbm op takes on the EPYC VM.
// Clang's 363 a pair for the same source is not measurably faster.
// allocate() and free() test for this path first and hand everything
// else, errors included, to the general path. hbm_bench prints what it
// costs against glibc malloc and a power-of-two segregated free list in
// the same run.
//
// Worst-case metadata (P = pages of HBM = HBM bytes / page bytes, V =
// pages of the remap window (0 without stitching), A = max_allocations,
// E = max_extents, R = max_retired_pages, O = max_owners, H = the power of
// two >= 2 * O, W(x) = words of a bitmap over x pages: W_0 = ceil(x/64),
// W_k+1 = ceil(W_k/64) until a level has one word, W = sum of the W_k,
// which is < x/63 + 6, and 0 for x = 0):
//   arena   = 40 * (2 * (A + E + R) + 3) + 72 * O + 4 * H + 4 * R
//             + 4 * P + 8 * W(P) + 4 * V + 8 * W(V)
//             bytes, each section rounded up to 8 (arena_bytes() computes it);
//   object  = sizeof(Allocator), 7,864 bytes (x86-64 and AArch64), fixed.
// The block records do not depend on the HBM size: a record exists per
// block, not per page; there are at most 2 * (A + E + R) + 2 blocks (in
// each window every free block is followed by a non-free one or the end;
// non-free blocks are live allocations, extents and retired pages outside
// allocations), plus record 0. What scales with the HBM is 4 bytes a page
// for the start-page -> record table plus one bit a page (and 1/64 of that
// per level) for the bitmap: 4.13 bytes a page of each window, 0.1% of the
// HBM at 4 KiB pages, 0.5% with the default remap window of 4x the HBM.
// Both windows must have fewer than 2^31 pages.
// Example: A = 4096, E = 4096, R = 256, O = 256, 256 MiB of 4 KiB pages
// (P = 65,536), no remap window -> 675,960 + 18,432 + 2,048 + 1,024 +
// 262,144 + 8,328 = 967,936 bytes; a 1 GiB remap window (V = 262,144)
// adds 1,048,576 + 33,288 bytes.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/board.h"

namespace vtrn::hbm {

inline constexpr uint64_t kMaxAlignment = 2ull * 1024 * 1024;
inline constexpr uint32_t kMaxStacks = 8;
inline constexpr uint32_t kAnyOwner = 0xFFFFFFFFu;  // free(): skip the ownership check
inline constexpr uint64_t kNoQuota = ~0ull;         // quota value meaning "unlimited"

// Closed list; values are stable (they travel in RPC replies and logs).
enum class [[nodiscard]] Error : uint32_t {
  kOk = 0,
  kNoMemory = 1,            // no free block fits size + alignment
  kQuota = 2,               // the owner's quota would be exceeded
  kBadArgument = 3,         // size 0 or beyond HBM, alignment not a power of two or > 2 MiB,
                            // unknown category, owner kAnyOwner, len 0 or wrapping range
  kTooManyAllocations = 4,  // max_allocations live already
  kTooManyOwners = 5,       // the owner table is full
  kNoSuchAllocation = 6,    // free(): addr is not the start of a live allocation
  kNotOwner = 7,            // free(): the allocation belongs to another owner
  kNotFound = 8,            // lookup/next_allocation: no live allocation there
  kOutOfRange = 9,          // address outside the HBM
  kAlreadyRetired = 10,     // retire_page: the page is retired already
  kTooManyRetired = 11,     // the retired-page table is full
  kPoisoned = 12,           // check_range: the allocation holds a retired page
  kBadConfig = 13,          // init: geometry, base or limits invalid
  kArenaTooSmall = 14,      // init: arena smaller than arena_bytes() or misaligned
  kNotInitialised = 15,     // a call before a successful init
  kInconsistent = 16,       // audit(): an internal invariant is broken
  kPinned = 17,             // free: the owner's memory is pinned by a job the chip has not
                            // ended (the firmware's pin check; the allocator never says it)
};

const char* error_name(Error e);

// What an allocation is for; closed list, values stable.
enum class Category : uint8_t {
  kTensors = 0,
  kCode = 1,
  kScratch = 2,
  kCollectives = 3,
  kDmaBuffers = 4,
};
inline constexpr uint32_t kCategoryCount = 5;
const char* category_name(Category c);

// Physical extents one stitched allocation may be made of. 64 keeps the
// stitch path's work (64 TLSF removals, at most one split, 64 map calls)
// and the firmware's per-allocation unmap small, while the 64 largest free
// blocks hold nearly all the free bytes on the churn trace (the figures
// above; a few extents are the norm).
inline constexpr uint32_t kMaxExtents = 64;

struct Limits {
  uint32_t max_allocations = 4096;  // live allocations at once
  uint32_t max_owners = 256;        // owners known at once (with allocations or a quota)
  uint32_t max_retired_pages = 256; // size of the retired-page table
  uint32_t max_extents = 4096;      // physical extents of all live stitched allocations
};

// How stitched allocations reach the page tables. map() makes
// [va, va + bytes) translate to [pa, pa + bytes) (both page-aligned) and
// returns false when it cannot (page tables full): the allocation is then
// undone and fails with kNoMemory. unmap() removes the translation and must
// not return before no core can still reach the old pages through it (the
// physical pages are reused right after). A table of plain functions: the
// firmware's MMU and the tests' shadow map both fill it.
struct Mapper {
  void* ctx = nullptr;
  bool (*map)(void* ctx, uint64_t va, uint64_t pa, uint64_t bytes) = nullptr;
  void (*unmap)(void* ctx, uint64_t va, uint64_t bytes) = nullptr;
};

struct Config {
  board::HbmGeometry geometry;      // from the board DTB (board::parse_chip)
  uint64_t base = 0;                // device address of stack 0, byte 0; 2 MiB-aligned
  Limits limits;
  uint64_t default_quota = kNoQuota;  // quota of an owner first seen in allocate()
  // Stitching is on when mapper is set (both functions). The remap window
  // [remap_base, remap_base + remap_bytes) holds the device addresses of
  // stitched allocations; it must be 2 MiB-aligned, a multiple of the page,
  // and overlap neither the HBM nor anything else the device addresses.
  // remap_bytes 0 means 4x the HBM (the sizing rule is in the bound above).
  const Mapper* mapper = nullptr;
  uint64_t remap_base = 0;
  uint64_t remap_bytes = 0;
};

struct AllocationInfo {
  uint64_t addr = 0;
  uint64_t bytes = 0;    // the size rounded up to the page, the extent lookup() checks
  uint32_t owner = 0;
  Category category = Category::kTensors;
  bool poisoned = false; // holds at least one retired page
  bool stitched = false; // addr lies in the remap window, backed by extents
  uint32_t extents = 1;  // physical extents behind it (1 when not stitched)
};

// One physical extent of an allocation (extents()).
struct Extent {
  uint64_t device_addr = 0;  // where the extent appears in the allocation
  uint64_t phys_addr = 0;    // the HBM pages behind it
  uint64_t bytes = 0;
};

struct OwnerUsage {
  uint64_t quota = kNoQuota;
  uint64_t used_bytes = 0;
  uint32_t allocations = 0;
  uint64_t category_bytes[kCategoryCount] = {};
};

struct Stats {
  uint64_t total_bytes = 0;          // whole HBM
  uint64_t used_bytes = 0;           // live allocations (poisoned ones included)
  uint64_t free_bytes = 0;           // in free blocks
  uint64_t retired_bytes = 0;        // retired pages outside live allocations
  // The largest allocation that would succeed now: max(largest contiguous
  // free block, min(largest free range of the remap window, sum of the
  // kMaxExtents free blocks the stitch path would take)).
  uint64_t largest_free_bytes = 0;
  double fragmentation = 0.0;        // 1 - largest_free / free, 0 when nothing is free
  uint64_t largest_contiguous_free_bytes = 0;
  double contiguous_fragmentation = 0.0;  // 1 - largest contiguous / free
  uint64_t remap_bytes = 0;               // size of the remap window (0: no stitching)
  uint64_t remap_used_bytes = 0;          // device addresses of live stitched allocations
  uint64_t remap_largest_free_bytes = 0;
  uint64_t stitch_free_bytes = 0;         // what stitching could gather now (the min above)
  uint32_t stitched_allocations = 0;      // live
  uint32_t stitched_extents = 0;          // live, over all stitched allocations
  uint64_t stitches = 0;                  // allocate() calls served by stitching
  uint64_t stitch_extents_total = 0;      // extents over those calls (mean = / stitches)
  uint32_t stitch_extents_max = 0;        // most extents one stitched allocation had
  uint32_t live_allocations = 0;
  uint32_t free_blocks = 0;
  uint32_t owners = 0;
  uint32_t retired_pages = 0;        // in the retired-page table
  uint32_t poisoned_allocations = 0;
  uint64_t allocs = 0;               // successful allocate() calls
  uint64_t frees = 0;                // allocations released (free and free_all)
  uint64_t fail_no_memory = 0;       // allocate() -> kNoMemory
  uint64_t fail_quota = 0;           // allocate() -> kQuota
  uint64_t fail_bad_argument = 0;    // allocate() -> kBadArgument
  uint64_t fail_no_metadata = 0;     // allocate() -> kTooManyAllocations / kTooManyOwners
  uint64_t category_bytes[kCategoryCount] = {};
  uint32_t category_allocations[kCategoryCount] = {};
  uint32_t stacks = 0;
  uint64_t correctable_errors[kMaxStacks] = {};
  uint32_t retired_per_stack[kMaxStacks] = {};
};

// What a workload promises about itself, for Allocator::worst_case_hbm_bytes.
struct WorstCase {
  uint64_t max_live_bytes = 0;       // live bytes at any time, each size rounded up to the page
  uint32_t max_live_allocations = 0; // live allocations at any time
  uint64_t max_request_bytes = 0;    // largest single request
  uint64_t max_alignment = 0;        // largest alignment asked for; 0 = one page
  uint32_t retired_pages = 0;        // pages retired over the allocator's life
};

// What retire_page() did with the page.
struct RetireOutcome {
  bool was_allocated = false;  // the page was inside a live allocation, now poisoned
  uint64_t allocation_addr = 0;
  uint32_t owner = 0;
};

// One block of the address map, for tests and debug dumps.
// kUsed: a contiguous allocation, or in the remap window a stitched one;
// kExtent: physical pages of a stitched allocation.
enum class BlockState : uint8_t { kFree = 1, kUsed = 2, kRetired = 3, kExtent = 4 };
struct BlockInfo {
  uint64_t addr = 0;     // device address; for_each_block walks the identity window
  uint64_t bytes = 0;
  BlockState state = BlockState::kFree;
};

class Allocator {
 public:
  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Bytes of arena that init() needs for this geometry and these limits
  // (the bound above); 0 when the config is one init() would reject.
  [[nodiscard]] static size_t arena_bytes(const Config& config);

  // The HBM size with which no allocate() of a workload that keeps its
  // promises can fail with kNoMemory, whatever the order of its requests
  // and frees: the published worst case of the placement (formula above).
  // 0 when an argument is invalid (page not a power of two in 4 KiB..2 MiB,
  // alignment not a power of two or > kMaxAlignment, a count or size of 0)
  // or the bound does not fit in 64 bits.
  [[nodiscard]] static uint64_t worst_case_hbm_bytes(uint64_t page_bytes, const WorstCase& w);
  // The same bound for an allocator without stitching (Config::mapper
  // unset): every request needs one free block of good_fit(n + a - 1).
  [[nodiscard]] static uint64_t worst_case_contiguous_hbm_bytes(uint64_t page_bytes,
                                                                const WorstCase& w);
  // The remap window with which the window is never what makes a stitched
  // request fail (the sizing rule above); retired_pages is ignored.
  [[nodiscard]] static uint64_t worst_case_remap_bytes(uint64_t page_bytes, const WorstCase& w);

  // Validates the geometry (1..kMaxStacks stacks, page a power of two in
  // 4 KiB..2 MiB, bytes_per_stack a multiple of it, fewer than 2^31 pages),
  // the base and the limits (each >= 1, max_allocations and
  // max_retired_pages <= 2^24, max_owners <= 2^20). The arena must be
  // 8-byte aligned. May be called again to start over.
  Error init(const Config& config, void* arena, size_t arena_size);

  // Reserves size bytes (rounded up to the page) aligned to alignment
  // (0 = one page) for owner, charged to its quota and to category.
  Error allocate(uint32_t owner, Category category, uint64_t size, uint64_t alignment,
                 uint64_t* addr_out);

  // Releases the allocation that starts at addr. owner must hold it unless
  // it is kAnyOwner. Pages of it that were retired are carved out.
  Error free(uint64_t addr, uint32_t owner = kAnyOwner);

  // Releases every allocation owner holds (the owner's lifespan ended);
  // freed_out (optional) receives how many. An unknown owner frees nothing.
  Error free_all(uint32_t owner, uint32_t* freed_out = nullptr);

  // Sets the quota (kNoQuota = unlimited). A quota below the owner's
  // current use is accepted and blocks further allocations only.
  Error set_quota(uint32_t owner, uint64_t quota_bytes);
  // free_all(owner) and forget its quota.
  Error remove_owner(uint32_t owner);
  Error owner_usage(uint32_t owner, OwnerUsage* out) const;

  // The live allocation that contains all of [addr, addr + len); addr may
  // lie in either window.
  Error lookup(uint64_t addr, uint64_t len, AllocationInfo* out) const;
  // lookup() then kPoisoned if that allocation holds a retired page: the
  // check a DMA descriptor or a job buffer goes through.
  Error check_range(uint64_t addr, uint64_t len) const;
  // The live allocation with the lowest address >= from (address order;
  // stateless, so a paged `mem ls` survives allocations in between).
  Error next_allocation(uint64_t from, AllocationInfo* out) const;

  // ECC bookkeeping. A correctable error is only counted (per stack).
  Error record_correctable(uint64_t addr);
  // An uncorrectable error: the page holding addr is never handed out again.
  // Inside a free block it is carved out now; inside a live allocation the
  // allocation is marked poisoned and the page is carved out when freed.
  Error retire_page(uint64_t addr, RetireOutcome* out = nullptr);
  [[nodiscard]] bool is_retired(uint64_t addr) const;
  // Page addresses of the retired pages, ascending; count_out receives how
  // many (at most max_retired_pages). kTooManyRetired if cap is smaller.
  Error export_retired(uint64_t* out, uint32_t cap, uint32_t* count_out) const;
  // Retires each listed page (the list from a persistent store after a chip
  // reset). Validated first (range, page alignment), then applied; pages
  // already retired are skipped. Normally called right after init().
  Error import_retired(const uint64_t* pages, uint32_t count);

  // The physical extents of the live allocation that starts at addr, in
  // device-address order (one for a contiguous allocation); count_out
  // receives how many. kTooManyRetired is not used here: a cap below the
  // count gives kBadArgument with count_out set.
  Error extents(uint64_t addr, Extent* out, uint32_t cap, uint32_t* count_out) const;
  // The physical address behind a device address inside a live
  // allocation (itself for the identity window).
  Error translate(uint64_t addr, uint64_t* phys_out) const;
  [[nodiscard]] bool in_remap_window(uint64_t addr) const {
    return remap_pages_ != 0 && addr >= remap_base_ && addr - remap_base_ < remap_bytes();
  }

  void stats(Stats* out) const;
  // Visits every block in address order (O(number of blocks)).
  void for_each_block(void (*fn)(const BlockInfo&, void*), void* ctx) const;
  // Checks every invariant (address map contiguous, no two free neighbours,
  // free lists agree with the bitmaps and the size classes, the live-start
  // bitmap and page table index exactly the live allocations,
  // per-owner and per-category accounting, retired pages only in retired
  // blocks or poisoned allocations). O(n); kInconsistent on the first break.
  Error audit() const;

  [[nodiscard]] uint64_t page_bytes() const { return page_bytes_; }
  [[nodiscard]] uint64_t total_bytes() const { return total_bytes_; }
  [[nodiscard]] uint64_t base() const { return base_; }
  [[nodiscard]] uint64_t remap_base() const { return remap_base_; }
  [[nodiscard]] uint64_t remap_bytes() const { return uint64_t(remap_pages_) << page_shift_; }

 private:
  static constexpr uint32_t kSlBits = 5;                 // 32 second-level lists
  static constexpr uint32_t kSlCount = 1u << kSlBits;
  static constexpr uint32_t kFlCount = 32 - kSlBits;     // sizes < 2^31 pages
  static constexpr uint32_t kNoClass = kFlCount * kSlCount + 1;  // find_class: none fits

  struct Block;
  struct Stitch;
  struct Owner;
  static constexpr uint32_t kMaxLevels = 6;  // 64^6 > 2^31 pages

  // One window of device addresses with its own TLSF free lists and
  // live-start index: 0 is the identity window over the HBM, 1 the remap
  // window of stitched allocations. Block records say which one they are in.
  struct Space {
    uint64_t base = 0;
    uint32_t pages = 0;
    uint32_t head = 0;  // record of the block at page 0
    uint32_t free_blocks = 0;
    uint32_t fl_bitmap = 0;
    uint32_t sl_bitmap[kFlCount + 1] = {};  // [kFlCount]: only kNoClass's bit (find_class)
    uint32_t heads[kNoClass + 1] = {};  // by size class, fl * kSlCount + sl; the last two are
                                        // the sink's and kNoClass, always 0
    // Live allocations by first page: a bit per page in a bitmap with
    // summary levels (a bit per non-empty word below), and the record of
    // the allocation starting at each page, valid only where the bit is set.
    uint64_t* level[kMaxLevels] = {};  // level 0 then its summaries, back to back
    uint32_t level_words[kMaxLevels] = {};
    uint32_t levels = 0;
    uint64_t spare_levels[2] = {};  // level 1 and 2 words of a window with fewer levels
    uint32_t* start_record = nullptr;
  };
  static constexpr uint32_t kPhys = 0;
  static constexpr uint32_t kRemap = 1;

  Error allocate_general(uint32_t owner, Category category, uint64_t size, uint64_t alignment,
                         uint64_t* addr_out);
  Error free_general(uint64_t addr, uint32_t owner);
  Block& rec(uint32_t r) const;
  uint32_t find_class(const Space& sp, uint32_t pages) const;
  uint32_t find_free(const Space& sp, uint64_t pages) const;
  uint32_t find_fit(const Space& sp, uint32_t pages, uint32_t align) const;
  uint32_t place(Space& sp, uint32_t b, uint32_t pages, uint32_t align);
  uint32_t place_special(uint32_t pages, uint32_t align);
  uint32_t stitch(uint32_t pages, uint32_t align);
  void unstitch(uint32_t b, bool poisoned);
  void release_special(uint32_t b);
  void undo_extents(uint32_t first);
  void list_insert(Space& sp, uint32_t b);
  void list_remove(Space& sp, uint32_t b);
  void list_pop(Space& sp, uint32_t b);
  uint64_t free_pages(uint32_t space) const;
  uint32_t live() const;
  uint64_t used_pages() const;
  uint32_t record_new();
  void record_release(uint32_t b);
  void link_after(uint32_t a, uint32_t b);
  void unlink(uint32_t b);
  void release(Space& sp, uint32_t b, uint32_t start, bool drop_owner, bool plain = false);
  Error free_in(Space& sp, uint64_t addr, uint32_t owner);
  uint64_t commit(Space& sp, uint32_t u, uint32_t owner_slot, Category category);
  uint32_t free_block(Space& sp, uint32_t b);
  uint32_t carve_page(uint32_t free_b, uint32_t page);
  void carve_retired(uint32_t f, uint32_t start, uint32_t end);
  uint32_t locate(uint32_t page) const;
  uint32_t live_record(uint64_t addr, uint64_t len) const;
  uint64_t block_addr(uint32_t b) const;
  bool phys_page_of(uint64_t addr, uint32_t* page) const;
  Error audit_space(uint32_t space, uint64_t* used_pages, uint32_t* used, uint32_t* poisoned,
                    uint64_t* cat_pages, uint32_t* cat_count) const;

  uint32_t owner_find(uint32_t id) const;
  uint32_t owner_get(uint32_t id, Error* err);
  void owner_maybe_drop(uint32_t slot);
  uint32_t owner_home(uint32_t id) const;
  void owner_erase(uint32_t id);

  static void live_mark(Space& sp, uint32_t page);
  static void live_unmark(Space& sp, uint32_t page);
  [[nodiscard]] static bool live_at(const Space& sp, uint32_t page);
  static uint32_t live_at_or_before(const Space& sp, uint32_t page);
  static uint32_t live_at_or_after(const Space& sp, uint32_t page);

  uint32_t retired_lower_bound(uint32_t page) const;
  void fill_info(uint32_t b, AllocationInfo* out) const;
  bool to_page(uint64_t addr, uint32_t* page) const;
  uint32_t space_of(uint64_t addr) const { return in_remap_window(addr) ? kRemap : kPhys; }

  bool ready_ = false;
  uint64_t base_ = 0;
  uint64_t page_bytes_ = 0;
  uint32_t page_shift_ = 0;
  uint32_t pages_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t stack_bytes_ = 0;
  uint32_t stacks_ = 0;
  Limits limits_;
  uint64_t default_quota_ = kNoQuota;

  Block* blocks_ = nullptr;
  Stitch* stitch_ = nullptr;     // beside blocks_, same index
  uint32_t block_capacity_ = 0;  // records; index 0 is "none" and the sink of list edits
  uint32_t spare_head_ = 0;      // chain of unused records
  Owner* owners_ = nullptr;
  uint32_t* owner_hash_ = nullptr;  // owner slot + 1, 0 = empty
  uint32_t owner_hash_mask_ = 0;
  uint32_t owner_hash_shift_ = 0;   // 32 - log2(slots): owner_home keeps the top bits
  uint32_t owner_spare_ = 0;        // chain of unused owner slots (+1)
  uint32_t* retired_ = nullptr;     // sorted page numbers
  uint32_t retired_count_ = 0;

  Mapper mapper_;
  uint64_t remap_base_ = 0;
  uint32_t remap_pages_ = 0;        // 0: stitching off
  Space sp_[2];

  // Everything init() resets in one assignment. Live allocations are
  // allocs - frees and their pages the sum of category_pages (live(),
  // used_pages()).
  struct Counters {
    uint64_t retired_block_pages = 0;
    uint32_t owners = 0;
    uint32_t stitched = 0;          // live stitched allocations
    uint32_t extents = 0;           // their extents
    uint64_t remap_used_pages = 0;
    uint64_t stitches = 0;
    uint64_t stitch_extents_total = 0;
    uint32_t stitch_extents_max = 0;
    uint32_t poisoned = 0;
    uint64_t allocs = 0;
    uint64_t frees = 0;
    uint64_t fail_no_memory = 0;
    uint64_t fail_quota = 0;
    uint64_t fail_bad_argument = 0;
    uint64_t fail_no_metadata = 0;
    uint64_t category_pages[kCategoryCount] = {};
    uint32_t category_count[kCategoryCount] = {};
    uint64_t correctable[kMaxStacks] = {};
    uint32_t retired_per_stack[kMaxStacks] = {};
  };
  Counters c_;
};

}  // namespace vtrn::hbm
