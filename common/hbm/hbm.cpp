// HBM allocator core (see vtrn/hbm.h for the contract and the memory bound).
//
// Layout of the state: block records live in the caller's arena and are
// linked three ways by their 32-bit byte offsets in the record array
// (offset 0 is "none"; following a link is an add, no scaling): the
// address-ordered neighbour list (coalescing), and the TLSF free list of
// the block's size class or, for a live allocation, its owner's list
// (free_all). Live allocations are found by address through a page-indexed
// table (free: O(1)) and a bitmap of their first pages with summary levels
// (lookup, next_allocation: one word a level). That index replaced a
// red-black tree, which cost about a third of the instructions of an
// allocate/free pair.
// A record is split in two arrays: 32 bytes that every allocate and free
// touch (addresses, links, state, and an aux word whose meaning follows
// the state: the size class of a free block, so unlisting it needs no size
// arithmetic; the owner slot of a live one; the stitched allocation of an
// extent) and 8 bytes only stitching reads (a stitched allocation's extent
// chain and count). An owner's id is read from its slot, not copied into
// every record. Record 0 is a sink: list and neighbour edits write its link
// fields instead of testing for "none", and its state is never free or
// used, so a neighbour test needs no test for 0 either. Its size is 0, its
// link_next 0 and its class an extra list head that stays empty, so free
// takes both coalescing steps without a branch, on the sink for a
// neighbour that is not free.
// Record 1 always describes the block at page 0 of the identity window and
// record 2 the one at page 0 of the remap window: splits keep the lowest
// piece in the original record and merges keep the lower record, so the
// head of each address list never moves.
// A stitched allocation is a used block of the remap window whose physical
// pages are extent blocks (state kExtent) of the identity window, chained
// in device-address order through link_prev/link_next (extents are in no
// free or owner list), each naming the remap record in its aux word.
// Owners, quotas and categories see only the remap record.
//
// Not here: any knowledge of how HBM is backed, the RPC that exposes it,
// or persistence of the retired-page list (export/import hand it over).
#include "vtrn/hbm.h"

#include <string.h>

// GCC's straight-line vectoriser (on at -O2 since GCC 12) packs the stores
// of a new record's fields into SSE registers on x86-64: a movd and a
// shuffle per field, more instructions than the plain stores, on the
// paths whose instruction count is their speed (11 more per allocate,
// 2 per free on hbm_bench's trace).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

namespace vtrn::hbm {

namespace {

constexpr uint8_t kFree = uint8_t(BlockState::kFree);
constexpr uint8_t kUsed = uint8_t(BlockState::kUsed);
constexpr uint8_t kRetired = uint8_t(BlockState::kRetired);
constexpr uint8_t kExtentState = uint8_t(BlockState::kExtent);
// Records are named by their byte offset in the record array (a multiple
// of 32; 0 is the sink): following a link is one add, no scaling. The
// limits (each <= 2^24) keep 32 * record_count() below 2^32.
constexpr uint32_t kRecord = 32;
constexpr uint32_t kHead = 1 * kRecord;
constexpr uint32_t kRemapHead = 2 * kRecord;
constexpr uint32_t kNone = 0xFFFFFFFFu;  // no page
constexpr uint32_t kLimitMax = 1u << 24;
constexpr uint32_t kOwnersMax = 1u << 20;

inline uint32_t msb(uint64_t x) { return uint32_t(__builtin_clzll(x)) ^ 63; }
inline uint32_t lsb(uint32_t x) { return uint32_t(__builtin_ctz(x)); }
inline size_t align8(size_t n) { return (n + 7) & ~size_t(7); }
inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// c ? a : b without a branch, for choices the data makes random (the
// compiler turns a plain ?: there into a branch that is mispredicted
// often, and a mask costs five instructions and three in the latency of
// what depends on it): a conditional move where there is one.
template <typename T>
inline T select(bool c, T a, T b) {
  static_assert(sizeof(T) <= sizeof(uintptr_t), "a register-sized value");
  uintptr_t x = uintptr_t(a), y = uintptr_t(b);
#if defined(__x86_64__)
  asm("test %2, %2\n\tcmovnz %1, %0" : "+r"(y) : "r"(x), "r"(uint32_t(c)) : "cc");
  return T(y);
#elif defined(__aarch64__)
  asm("cmp %w2, #0\n\tcsel %0, %1, %0, ne" : "+r"(y) : "r"(x), "r"(uint32_t(c)) : "cc");
  return T(y);
#else
  uintptr_t m = -uintptr_t(c);
  return T((x & m) | (y & ~m));
#endif
}

// a == b ? x : y, and v != 0 ? x : y, the same without a materialised
// bool: the compare feeds the conditional move directly (a bool made by
// sete, kept live across several selects, costs two instructions more a
// select and spills registers on the free path).
template <typename T>
inline T select_eq(uint32_t a, uint32_t b, T x, T y) {
  static_assert(sizeof(T) <= sizeof(uintptr_t), "a register-sized value");
  uintptr_t xv = uintptr_t(x), yv = uintptr_t(y);
#if defined(__x86_64__)
  asm("cmp %3, %2\n\tcmove %1, %0" : "+r"(yv) : "r"(xv), "r"(a), "ri"(b) : "cc");
  return T(yv);
#elif defined(__aarch64__)
  asm("cmp %w2, %w3\n\tcsel %0, %1, %0, eq" : "+r"(yv) : "r"(xv), "r"(a), "rI"(b) : "cc");
  return T(yv);
#else
  return a == b ? x : y;
#endif
}

template <typename T>
inline T select_nz(uint32_t v, T x, T y) {
  static_assert(sizeof(T) <= sizeof(uintptr_t), "a register-sized value");
  uintptr_t xv = uintptr_t(x), yv = uintptr_t(y);
#if defined(__x86_64__)
  asm("test %2, %2\n\tcmovnz %1, %0" : "+r"(yv) : "r"(xv), "r"(v) : "cc");
  return T(yv);
#elif defined(__aarch64__)
  asm("cmp %w2, #0\n\tcsel %0, %1, %0, ne" : "+r"(yv) : "r"(xv), "r"(v) : "cc");
  return T(yv);
#else
  return v != 0 ? x : y;
#endif
}

// The steps of allocate and free, inlined into them so that the common
// path is one function each with no calls.
#define HBM_INLINE __attribute__((always_inline)) inline

// allocate() and free() are built twice on x86-64 and the dynamic loader
// picks one for the CPU (an ifunc): baseline x86-64 has no shift by a
// register count other than cl, so each variable shift of the size-class,
// bitmap and list arithmetic costs a move into cl as well; with BMI2
// (x86-64-v3) it is one shlx/shrx (22 instructions fewer per allocate and
// free on hbm_bench's trace). AArch64, the firmware's target, shifts by
// any register anyway. GCC only: clang 14 gives the dispatcher the name
// "<function>.ifunc" instead of the function's own, so calls from other
// files (the fuzzers are built with clang) do not link.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HBM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#ifndef HBM_CPU_CLONES
#define HBM_CPU_CLONES
#endif

}  // namespace

struct Allocator::Block {
  uint32_t start;      // first page
  uint32_t size;       // pages
  uint32_t phys_prev;  // address-order neighbours
  uint32_t phys_next;
  uint32_t link_prev;  // free: size-class list; used: owner list; extent: chain; spare: chain
  uint32_t link_next;
  uint32_t aux;        // free: size class; used: owner slot + 1; extent: its stitched allocation
  uint8_t state;
  uint8_t space;       // Space index (kPhys, kRemap)
  uint8_t category;
  uint8_t poisoned;
};

HBM_INLINE Allocator::Block& Allocator::rec(uint32_t r) const {
  static_assert(sizeof(Block) == kRecord, "records are named by offset / 32");
  return *reinterpret_cast<Block*>(reinterpret_cast<char*>(blocks_) + r);
}

struct Allocator::Stitch {
  uint32_t extent_head;   // stitched allocation: its first extent
  uint32_t extent_count;
};

struct Allocator::Owner {
  uint32_t id;
  uint32_t head;            // first allocation; next spare slot + 1 when unused
  uint32_t count;
  uint32_t explicit_quota;  // set_quota was called: keep the record when empty
  uint64_t quota;
  uint64_t used_pages;
  uint64_t category_pages[kCategoryCount];
};

const char* error_name(Error e) {
  switch (e) {
    case Error::kOk: return "ok";
    case Error::kNoMemory: return "no memory";
    case Error::kQuota: return "quota exceeded";
    case Error::kBadArgument: return "bad argument";
    case Error::kTooManyAllocations: return "too many allocations";
    case Error::kTooManyOwners: return "too many owners";
    case Error::kNoSuchAllocation: return "no such allocation";
    case Error::kNotOwner: return "not owner";
    case Error::kNotFound: return "not found";
    case Error::kOutOfRange: return "out of range";
    case Error::kAlreadyRetired: return "already retired";
    case Error::kTooManyRetired: return "too many retired pages";
    case Error::kPoisoned: return "poisoned";
    case Error::kBadConfig: return "bad config";
    case Error::kArenaTooSmall: return "arena too small";
    case Error::kNotInitialised: return "not initialised";
    case Error::kInconsistent: return "inconsistent";
    case Error::kPinned: return "pinned";
  }
  return "unknown";
}

const char* category_name(Category c) {
  switch (c) {
    case Category::kTensors: return "tensors";
    case Category::kCode: return "code";
    case Category::kScratch: return "scratch";
    case Category::kCollectives: return "collectives";
    case Category::kDmaBuffers: return "dma-buffers";
  }
  return "unknown";
}

static uint32_t hash_slots(uint32_t owners) {
  uint32_t h = 1;
  while (h < 2 * owners) h <<= 1;
  return h;
}

// Validation shared by arena_bytes() and init(); pages_out gets the HBM
// pages, remap_out the remap window's (0 without stitching).
static bool valid_config(const Config& config, uint32_t* pages_out, uint32_t* remap_out) {
  const board::HbmGeometry& g = config.geometry;
  const Limits& l = config.limits;
  if (g.stacks < 1 || g.stacks > kMaxStacks) return false;
  if (!is_pow2(g.page_bytes) || g.page_bytes < 4096 || g.page_bytes > kMaxAlignment) return false;
  if (g.bytes_per_stack == 0 || g.bytes_per_stack % g.page_bytes != 0) return false;
  uint64_t pages_per_stack = g.bytes_per_stack / g.page_bytes;
  if (pages_per_stack >= (1ull << 31) / g.stacks) return false;
  uint64_t total = g.bytes_per_stack * g.stacks;
  if (config.base % kMaxAlignment != 0 || config.base + total < config.base) return false;
  if (l.max_allocations < 1 || l.max_allocations > kLimitMax || l.max_retired_pages < 1 ||
      l.max_retired_pages > kLimitMax || l.max_owners < 1 || l.max_owners > kOwnersMax ||
      l.max_extents < 1 || l.max_extents > kLimitMax)
    return false;
  *pages_out = uint32_t(pages_per_stack * g.stacks);
  *remap_out = 0;
  const Mapper* m = config.mapper;
  if (m != nullptr) {
    if (m->map == nullptr || m->unmap == nullptr) return false;
    uint64_t rb = config.remap_bytes != 0 ? config.remap_bytes : 4 * total;
    if (rb % g.page_bytes != 0 || rb / g.page_bytes >= (1ull << 31)) return false;
    uint64_t rs = config.remap_base;
    if (rs % kMaxAlignment != 0 || rs + rb < rs) return false;
    if (rs < config.base + total && config.base < rs + rb) return false;  // overlap
    *remap_out = uint32_t(rb / g.page_bytes);
  }
  return true;
}

// Words of each bitmap level for `pages` bits; returns the level count.
static uint32_t bitmap_levels(uint32_t pages, uint32_t* words) {
  uint32_t n = 0;
  uint64_t bits = pages;
  do {
    words[n] = uint32_t((bits + 63) / 64);
    bits = words[n++];
  } while (bits > 1);
  return n;
}

// Arena bytes of one window's live-start index: the page table and the bitmap.
static size_t index_bytes(uint32_t pages) {
  if (pages == 0) return 0;
  uint32_t words[6];
  uint32_t levels = bitmap_levels(pages, words);
  size_t bitmap_words = 0;
  for (uint32_t i = 0; i < levels; ++i) bitmap_words += words[i];
  return align8(sizeof(uint32_t) * size_t(pages)) + sizeof(uint64_t) * bitmap_words;
}

// Records: index 0, and at most 2 * (A + E + R) + 2 blocks: in the identity
// window the non-free blocks are contiguous allocations, extents and
// retired pages outside allocations, and every free block is followed by
// one of them or the end; in the remap window the same with stitched
// allocations. Contiguous plus stitched allocations are at most A.
static size_t record_count(const Limits& l) {
  return 2 * (size_t(l.max_allocations) + l.max_extents + l.max_retired_pages) + 3;
}

size_t Allocator::arena_bytes(const Config& config) {
  static_assert(sizeof(Block) == 32 && sizeof(Stitch) == 8,
                "the published metadata bound counts 40 bytes a block");
  static_assert(sizeof(Owner) == 72, "the published metadata bound counts 72 bytes an owner");
  static_assert(kMaxLevels == 6, "index_bytes sizes its level array for 6 levels");
  uint32_t pages = 0, remap = 0;
  if (!valid_config(config, &pages, &remap)) return 0;
  const Limits& l = config.limits;
  size_t n = align8((sizeof(Block) + sizeof(Stitch)) * record_count(l));
  n += align8(sizeof(Owner) * size_t(l.max_owners));
  n += align8(sizeof(uint32_t) * hash_slots(l.max_owners));
  n += align8(sizeof(uint32_t) * size_t(l.max_retired_pages));
  return n + index_bytes(pages) + index_bytes(remap);
}

// Points a window's index at the arena bytes at *off and clears its bitmap.
static void take_index(uint8_t* arena, size_t* off, uint32_t pages, uint32_t* level_words,
                       uint64_t** level, uint32_t* levels, uint32_t** start_record) {
  *start_record = reinterpret_cast<uint32_t*>(arena + *off);
  *off += align8(sizeof(uint32_t) * size_t(pages));
  auto* bits = reinterpret_cast<uint64_t*>(arena + *off);
  *levels = bitmap_levels(pages, level_words);
  uint32_t words = 0;
  for (uint32_t i = 0; i < *levels; ++i) {
    level[i] = bits + words;
    words += level_words[i];
  }
  memset(bits, 0, sizeof(uint64_t) * words);
  *off += sizeof(uint64_t) * words;
}

Error Allocator::init(const Config& config, void* arena, size_t arena_size) {
  ready_ = false;
  total_bytes_ = 0;  // the common paths' test for ready_
  uint32_t pages = 0, remap = 0;
  if (!valid_config(config, &pages, &remap)) return Error::kBadConfig;
  const board::HbmGeometry& g = config.geometry;
  const Limits& l = config.limits;
  size_t need = arena_bytes(config);
  if (arena == nullptr || (reinterpret_cast<uintptr_t>(arena) & 7) != 0 || arena_size < need)
    return Error::kArenaTooSmall;

  // Only the bitmaps must start zeroed: records, owners and the hash are
  // written below or before first use, and start_record is read only
  // where the bitmap has a bit.
  auto* bytes = static_cast<uint8_t*>(arena);
  block_capacity_ = uint32_t(record_count(l));
  blocks_ = reinterpret_cast<Block*>(bytes);
  stitch_ = reinterpret_cast<Stitch*>(bytes + sizeof(Block) * block_capacity_);
  size_t off = align8((sizeof(Block) + sizeof(Stitch)) * block_capacity_);
  owners_ = reinterpret_cast<Owner*>(bytes + off);
  off += align8(sizeof(Owner) * l.max_owners);
  owner_hash_ = reinterpret_cast<uint32_t*>(bytes + off);
  owner_hash_mask_ = hash_slots(l.max_owners) - 1;
  owner_hash_shift_ = 32 - msb(hash_slots(l.max_owners));
  off += align8(sizeof(uint32_t) * hash_slots(l.max_owners));
  retired_ = reinterpret_cast<uint32_t*>(bytes + off);
  off += align8(sizeof(uint32_t) * l.max_retired_pages);
  sp_[kPhys] = Space{};
  sp_[kRemap] = Space{};
  take_index(bytes, &off, pages, sp_[kPhys].level_words, sp_[kPhys].level, &sp_[kPhys].levels,
             &sp_[kPhys].start_record);
  if (remap != 0)
    take_index(bytes, &off, remap, sp_[kRemap].level_words, sp_[kRemap].level,
               &sp_[kRemap].levels, &sp_[kRemap].start_record);
  for (Space& sp : sp_)  // a window without pages (no remap window) has no levels at all
    for (uint32_t l = sp.levels; sp.levels != 0 && l < 3; ++l)
      sp.level[l] = &sp.spare_levels[l - 1];
  memset(owner_hash_, 0, sizeof(uint32_t) * hash_slots(l.max_owners));
  rec(0) = Block{};
  rec(0).aux = kFlCount * kSlCount;  // the sink's class: an extra head that stays 0
  for (Space& sp : sp_) sp.sl_bitmap[kFlCount] = 1u << (kNoClass & (kSlCount - 1));  // find_class

  base_ = config.base;
  page_bytes_ = g.page_bytes;
  page_shift_ = msb(g.page_bytes);
  pages_ = pages;
  total_bytes_ = uint64_t(pages) << page_shift_;
  stack_bytes_ = g.bytes_per_stack;
  stacks_ = g.stacks;
  limits_ = l;
  default_quota_ = config.default_quota;
  retired_count_ = 0;
  mapper_ = config.mapper != nullptr ? *config.mapper : Mapper{};
  remap_base_ = remap != 0 ? config.remap_base : 0;
  remap_pages_ = remap;
  c_ = Counters{};

  spare_head_ = 0;
  // Every link holds a valid record offset from here on (a stale head link
  // is read, though never followed).
  for (uint32_t i = block_capacity_ - 1; i > kRemapHead / kRecord; --i) {
    rec(i * kRecord).link_prev = 0;
    record_release(i * kRecord);
  }
  owner_spare_ = 0;
  for (uint32_t i = l.max_owners; i > 0; --i) {
    owners_[i - 1] = Owner{};
    owners_[i - 1].head = owner_spare_;
    owner_spare_ = i;
  }
  sp_[kPhys].base = base_;
  sp_[kPhys].pages = pages_;
  sp_[kPhys].head = kHead;
  Block& h = rec(kHead);
  h = Block{};
  h.size = pages_;
  h.space = kPhys;
  list_insert(sp_[kPhys], kHead);
  sp_[kPhys].free_blocks = 1;
  rec(kRemapHead) = Block{};
  if (remap != 0) {
    sp_[kRemap].base = remap_base_;
    sp_[kRemap].pages = remap;
    sp_[kRemap].head = kRemapHead;
    rec(kRemapHead).size = remap;
    rec(kRemapHead).space = kRemap;
    list_insert(sp_[kRemap], kRemapHead);
    sp_[kRemap].free_blocks = 1;
  }
  ready_ = true;
  return Error::kOk;
}

// The live-start bitmap. Level 0 has a bit per page; a bit of level k + 1
// says its word of level k is non-zero. A search walks up until a word has
// a candidate, then down taking the highest (or lowest) bit: at most
// 2 * levels words. Marking and unmarking touch every level without a
// branch on the data (setting a summary bit that is set already, or
// clearing one only when the word below became empty). Levels 0 to 2 are
// written out and always written (three levels hold 2^18 pages, 1 GiB of
// 4 KiB pages): a window with fewer has its missing summary words in
// Space::spare_levels, which only these two write and nothing reads, so
// the only test of the level count is for more than three.

HBM_INLINE void Allocator::live_mark(Space& sp, uint32_t page) {
  uint64_t* const* level = sp.level;
  level[0][page >> 6] |= 1ull << (page & 63);
  level[1][page >> 12] |= 1ull << ((page >> 6) & 63);
  level[2][page >> 18] |= 1ull << ((page >> 12) & 63);
  if (sp.levels > 3) [[unlikely]]
    for (uint32_t l = 3, i = page >> 18; l < sp.levels; ++l, i >>= 6)
      level[l][i >> 6] |= 1ull << (i & 63);
}

HBM_INLINE void Allocator::live_unmark(Space& sp, uint32_t page) {
  uint64_t* const* level = sp.level;
  uint64_t w = level[0][page >> 6] &= ~(1ull << (page & 63));
  w = level[1][page >> 12] &= ~(uint64_t(w == 0) << ((page >> 6) & 63));
  w = level[2][page >> 18] &= ~(uint64_t(w == 0) << ((page >> 12) & 63));
  if (sp.levels > 3) [[unlikely]]
    for (uint32_t l = 3, i = page >> 18; l < sp.levels; ++l, i >>= 6)
      w = level[l][i >> 6] &= ~(uint64_t(w == 0) << (i & 63));
}

bool Allocator::live_at(const Space& sp, uint32_t page) {
  return (sp.level[0][page >> 6] >> (page & 63)) & 1;
}

// Highest marked page <= page, or kNone.
uint32_t Allocator::live_at_or_before(const Space& sp, uint32_t page) {
  uint32_t i = page, l = 0;
  for (;;) {
    uint32_t b = i & 63;
    uint64_t mask = b == 63 ? ~0ull : (2ull << b) - 1;
    uint64_t w = sp.level[l][i >> 6] & mask;
    if (w != 0) {
      i = (i & ~63u) | msb(w);
      break;
    }
    if ((i >> 6) == 0 || l + 1 == sp.levels) return kNone;
    i = (i >> 6) - 1;
    l++;
  }
  while (l > 0) {
    l--;
    i = (i << 6) | msb(sp.level[l][i]);
  }
  return i;
}

// Lowest marked page >= page, or kNone.
uint32_t Allocator::live_at_or_after(const Space& sp, uint32_t page) {
  uint32_t i = page, l = 0;
  for (;;) {
    uint64_t w = sp.level[l][i >> 6] & (~0ull << (i & 63));
    if (w != 0) {
      i = (i & ~63u) | uint32_t(__builtin_ctzll(w));
      break;
    }
    if (l + 1 == sp.levels || (i >> 6) + 1 >= sp.level_words[l]) return kNone;
    i = (i >> 6) + 1;
    l++;
  }
  while (l > 0) {
    l--;
    i = (i << 6) | uint32_t(__builtin_ctzll(sp.level[l][i]));
  }
  return i;
}

// Live allocations and their pages, from the counters every allocation
// and release updates anyway.
uint32_t Allocator::live() const { return uint32_t(c_.allocs - c_.frees); }

uint64_t Allocator::used_pages() const {
  uint64_t n = 0;
  for (uint32_t c = 0; c < kCategoryCount; ++c) n += c_.category_pages[c];
  return n;
}

// Free pages of a window, from the counters: in the identity window
// everything that is not a contiguous allocation, an extent (together the
// used pages) or a retired page outside them; in the remap window what
// stitched allocations do not hold.
uint64_t Allocator::free_pages(uint32_t w) const {
  if (w == kPhys) return pages_ - used_pages() - c_.retired_block_pages;
  return remap_pages_ - c_.remap_used_pages;
}

bool Allocator::to_page(uint64_t addr, uint32_t* page) const {
  if (addr < base_ || addr - base_ >= total_bytes()) return false;
  *page = uint32_t((addr - base_) >> page_shift_);
  return true;
}

// Block records and the address list. A record taken from the spare chain
// keeps whatever it held: every caller sets the fields its state uses.

HBM_INLINE uint32_t Allocator::record_new() {
  uint32_t b = spare_head_;
  spare_head_ = rec(b).link_next;
  return b;
}

HBM_INLINE void Allocator::record_release(uint32_t b) {
  rec(b).state = 0;
  rec(b).link_next = spare_head_;
  spare_head_ = b;
}

HBM_INLINE void Allocator::link_after(uint32_t a, uint32_t b) {
  Block& A = rec(a);
  Block& B = rec(b);
  B.space = A.space;  // every new record is a piece of a block of the same window
  B.phys_prev = a;
  B.phys_next = A.phys_next;
  rec(A.phys_next).phys_prev = b;
  A.phys_next = b;
}

HBM_INLINE void Allocator::unlink(uint32_t b) {
  const Block& B = rec(b);
  rec(B.phys_prev).phys_next = B.phys_next;
  rec(B.phys_next).phys_prev = B.phys_prev;
}

// TLSF size classes. Sizes below 32 pages have one exact list each (fl 0);
// above, each power of two is cut into 32 lists, so a class spans at most
// 1/32 of its size. A class is numbered fl * 32 + sl. Sizes below 64 pages
// are their own class number, which the general formula also gives when
// the exponent is taken as at least 5: no branch on the size (sizes are
// random, so such a branch is mispredicted often).

static inline uint32_t size_class(uint64_t size) {
  constexpr uint32_t kSlBits = 5;
  uint32_t m = msb(size | (1u << kSlBits));
  return ((m - kSlBits + 1) << kSlBits) + uint32_t(size >> (m - kSlBits)) - (1u << kSlBits);
}

// The lists are doubly linked, but the head's link_prev is left stale (a
// valid record index, never followed): whether a block heads its list is
// asked of the head slot, so pushing and popping a head write one link
// less. The callers count free blocks (sp.free_blocks), netting a pop and
// a push in one operation.
HBM_INLINE void Allocator::list_insert(Space& sp, uint32_t b) {
  Block& B = rec(b);
  uint32_t c = size_class(B.size);
  uint32_t h = sp.heads[c];
  B.state = kFree;
  B.aux = c;
  B.link_next = h;
  rec(h).link_prev = b;
  sp.heads[c] = b;
  sp.fl_bitmap |= 1u << (c >> kSlBits);
  sp.sl_bitmap[c >> kSlBits] |= 1u << (c & (kSlCount - 1));
}

// Unlists the free block b; its link fields are left for the caller.
HBM_INLINE void Allocator::list_remove(Space& sp, uint32_t b) {
  const Block& B = rec(b);
  uint32_t c = B.aux;
  uint32_t prev = B.link_prev, next = B.link_next;
  uint32_t* head = &sp.heads[c];
  uint32_t* from = select_eq(*head, b, head, &rec(prev).link_next);
  *from = next;
  rec(next).link_prev = prev;
  uint32_t fl = c >> kSlBits;
  sp.sl_bitmap[fl] &= ~(uint32_t(*head == 0) << (c & (kSlCount - 1)));
  sp.fl_bitmap &= ~(uint32_t(sp.sl_bitmap[fl] == 0) << fl);
}

// list_remove for b at the head of its list (what find_free and the stitch
// path take).
HBM_INLINE void Allocator::list_pop(Space& sp, uint32_t b) {
  const Block& B = rec(b);
  uint32_t c = B.aux;
  uint32_t next = B.link_next;
  sp.heads[c] = next;
  uint32_t fl = c >> kSlBits;
  sp.sl_bitmap[fl] &= ~(uint32_t(next == 0) << (c & (kSlCount - 1)));
  sp.fl_bitmap &= ~(uint32_t(sp.sl_bitmap[fl] == 0) << fl);
}

// The size find_free() looks up for a request of `pages`: rounded up so that
// every block of the class it lands in holds the request ("good fit"). A
// free block of at least this size is always found; it is under 1/32 more
// than the request. Shared with worst_case_hbm_bytes so the bound and the
// search cannot drift apart.
static inline uint64_t good_fit_pages(uint64_t pages) {
  constexpr uint32_t kSlBits = 5;
  return pages + (1ull << (msb(pages | (1u << kSlBits)) - kSlBits)) - 1;
}

// size_class(good_fit_pages(pages)) with one bit scan: the class of pages,
// plus one unless pages is the lowest size of its class (a class holds the
// 2^(m - 5) sizes from a multiple of 2^(m - 5), m = msb(pages) >= 5).
static inline uint32_t good_fit_class(uint32_t pages) {
  constexpr uint32_t kSlBits = 5;
  uint32_t m = msb(pages | (1u << kSlBits));
  uint32_t sh = m - kSlBits;
  return ((m - kSlBits + 1) << kSlBits) + (pages >> sh) - (1u << kSlBits) +
         uint32_t((pages & ((1u << sh) - 1)) != 0);
}

// The size class of the first non-empty list whose every block holds
// >= pages, or kNoClass (whose head stays 0): the caller reads the head.
// pages < 2^31, so the good fit's class is at most kFlCount * kSlCount,
// which lies in row kFlCount. The class's own row and the next non-empty
// row are both looked at and one is chosen without a branch (which of them
// serves is random on a random trace); row kFlCount holds no list and has
// only the bit of kNoClass (set by init, never cleared: removing the
// sink from its class clears bit 0 of that row), so "none found" needs no
// test of its own.
HBM_INLINE uint32_t Allocator::find_class(const Space& sp, uint32_t pages) const {
  static_assert(kNoClass >> kSlBits == kFlCount && (kNoClass & (kSlCount - 1)) != 0,
                "kNoClass lies in row kFlCount, on another bit than the sink's class");
  uint32_t c = good_fit_class(pages);
  uint32_t fl = c >> kSlBits;
  uint32_t slmap = sp.sl_bitmap[fl] & (~0u << (c & (kSlCount - 1)));
  uint32_t up = lsb((sp.fl_bitmap & (~0u << fl << 1)) | (1u << kFlCount));
  uint32_t up_map = sp.sl_bitmap[up];
  fl = select_nz(slmap, fl, up);
  slmap = select_nz(slmap, slmap, up_map);
  return (fl << kSlBits) | lsb(slmap);
}

// Head of the first non-empty list whose every block holds >= pages, or 0.
HBM_INLINE uint32_t Allocator::find_free(const Space& sp, uint64_t pages) const {
  if (pages >= (1ull << 31)) return 0;  // a padded request beyond any window
  return sp.heads[find_class(sp, uint32_t(pages))];
}

// A free block of sp that holds pages at a start aligned to align pages, or
// 0. An aligned request first tries the unpadded class: its head often has
// room after rounding its start up; otherwise pad by align - 1 pages so any
// block found fits.
HBM_INLINE uint32_t Allocator::find_fit(const Space& sp, uint32_t pages, uint32_t align) const {
  uint32_t b = find_free(sp, pages);
  if (b != 0 && align > 1) {
    const Block& B = rec(b);
    uint64_t a = (uint64_t(B.start) + align - 1) & ~uint64_t(align - 1);
    if (a + pages > uint64_t(B.start) + B.size) b = find_free(sp, uint64_t(pages) + align - 1);
  }
  return b;
}

// Page counts of a WorstCase, or false when it is invalid.
struct WorstPages {
  uint32_t shift;
  uint64_t n, m, a, blocks_n, r;
};
static bool worst_pages(uint64_t page_bytes, const WorstCase& w, WorstPages* out) {
  if (!is_pow2(page_bytes) || page_bytes < 4096 || page_bytes > kMaxAlignment) return false;
  if (w.max_live_allocations == 0 || w.max_request_bytes == 0 || w.max_live_bytes == 0 ||
      (w.max_alignment != 0 && (!is_pow2(w.max_alignment) || w.max_alignment > kMaxAlignment)))
    return false;
  out->shift = msb(page_bytes);
  out->n = (w.max_request_bytes >> out->shift) + ((w.max_request_bytes & (page_bytes - 1)) != 0);
  out->m = (w.max_live_bytes >> out->shift) + ((w.max_live_bytes & (page_bytes - 1)) != 0);
  out->a = w.max_alignment > page_bytes ? w.max_alignment >> out->shift : 1;
  out->blocks_n = w.max_live_allocations;
  out->r = w.retired_pages;
  return true;
}

// m + r + blocks * per_block pages in bytes, 0 on overflow.
static uint64_t bound_bytes(uint32_t shift, uint64_t m, uint64_t r, uint64_t blocks,
                            uint64_t per_block) {
  uint64_t pages = 0;
  if (__builtin_mul_overflow(blocks, per_block, &pages) ||
      __builtin_add_overflow(pages, m + r, &pages) || pages > (~0ull >> shift))
    return 0;
  return pages << shift;
}

// The contiguous bound. Before a request of p pages with alignment a
// pages, at most N - 1 allocations are live and at most R pages are
// retired outside them; every free block is followed by one of those or by
// the end, so there are at most N + R free blocks, holding at least
// P - (M - p) - R pages. The largest holds at least 1/(N + R) of that, and
// the contiguous path succeeds once some free block reaches
// good_fit_pages(p + a - 1). Hence P >= M + R + (N + R) * good_fit_pages(n + a - 1),
// n the largest request in pages, suffices for every order of operations.
uint64_t Allocator::worst_case_contiguous_hbm_bytes(uint64_t page_bytes, const WorstCase& w) {
  WorstPages p;
  if (!worst_pages(page_bytes, w, &p)) return 0;
  return bound_bytes(p.shift, p.m, p.r, p.blocks_n + p.r, good_fit_pages(p.n + p.a - 1));
}

// The stitched bound (vtrn/hbm.h). Alignment is the remap window's affair,
// so the physical side needs p pages in at most K = kMaxExtents blocks.
// The N - 1 other allocations are at most K extents each, so at most
// B = K * (N - 1) + R + 1 free blocks hold the F >= P - M - R free pages.
// If B <= K the stitch may take every free block and needs F >= n. Else
// the K largest free blocks hold at least F * K / B; the stitch takes the
// heads of the highest size classes, and the i-th of them is in the class
// of the i-th largest block, at least 32/33 of it (a class spans 1/32 of
// its lower bound), so it gets more than F * 32 * K / (33 * B). Hence
// P >= M + R + ceil(n * max(32 * K, 33 * B) / (32 * K)).
uint64_t Allocator::worst_case_hbm_bytes(uint64_t page_bytes, const WorstCase& w) {
  WorstPages p;
  if (!worst_pages(page_bytes, w, &p)) return 0;
  uint64_t k = kMaxExtents;
  uint64_t b = k * (p.blocks_n - 1) + p.r + 1;
  uint64_t num = 33 * b > 32 * k ? 33 * b : 32 * k;
  uint64_t free_pages = 0;
  if (__builtin_mul_overflow(p.n, num, &free_pages)) return 0;
  free_pages = (free_pages + 32 * k - 1) / (32 * k);
  return bound_bytes(p.shift, p.m, p.r, 1, free_pages);
}

// The remap window is a placement without retired pages whose live bytes
// and allocations are at most those of the workload: the contiguous bound
// with R = 0 keeps it from ever being what fails.
uint64_t Allocator::worst_case_remap_bytes(uint64_t page_bytes, const WorstCase& w) {
  WorstPages p;
  if (!worst_pages(page_bytes, w, &p)) return 0;
  return bound_bytes(p.shift, p.m, 0, p.blocks_n, good_fit_pages(p.n + p.a - 1));
}

// Owners: open addressing with linear probing at load <= 1/2 and backward-shift
// deletion (no tombstones, so probe lengths do not grow with churn). The
// home slot is Fibonacci hashing, the top bits of id * 2^32 / phi:
// consecutive ids (owners are often numbered so) land far apart, where the
// low bits of a mixed product put several of ids 1..7 in one slot.

HBM_INLINE uint32_t Allocator::owner_home(uint32_t id) const {
  return (id * 2654435761u) >> owner_hash_shift_;
}

HBM_INLINE uint32_t Allocator::owner_find(uint32_t id) const {
  for (uint32_t i = owner_home(id);; i = (i + 1) & owner_hash_mask_) {
    uint32_t s = owner_hash_[i];
    if (s == 0) return 0;
    if (owners_[s - 1].id == id) return s;
  }
}

uint32_t Allocator::owner_get(uint32_t id, Error* err) {
  uint32_t s = owner_find(id);
  if (s) return s;
  if (owner_spare_ == 0) {
    *err = Error::kTooManyOwners;
    return 0;
  }
  s = owner_spare_;
  Owner& o = owners_[s - 1];
  owner_spare_ = o.head;
  o = Owner{};
  o.id = id;
  o.quota = default_quota_;
  uint32_t i = owner_home(id);
  while (owner_hash_[i] != 0) i = (i + 1) & owner_hash_mask_;
  owner_hash_[i] = s;
  c_.owners++;
  return s;
}

void Allocator::owner_erase(uint32_t id) {
  uint32_t i = owner_home(id);
  while (owner_hash_[i] != 0 && owners_[owner_hash_[i] - 1].id != id)
    i = (i + 1) & owner_hash_mask_;
  uint32_t s = owner_hash_[i];
  if (s == 0) return;
  owner_hash_[i] = 0;
  for (uint32_t j = (i + 1) & owner_hash_mask_; owner_hash_[j] != 0;
       j = (j + 1) & owner_hash_mask_) {
    uint32_t k = owner_home(owners_[owner_hash_[j] - 1].id);
    // The entry at j may stay when its home lies cyclically in (i, j].
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    owner_hash_[i] = owner_hash_[j];
    owner_hash_[j] = 0;
    i = j;
  }
  owners_[s - 1] = Owner{};
  owners_[s - 1].head = owner_spare_;
  owner_spare_ = s;
  c_.owners--;
}

void Allocator::owner_maybe_drop(uint32_t s) {
  const Owner& o = owners_[s - 1];
  if (o.count == 0 && !o.explicit_quota) owner_erase(o.id);
}

// Allocate and free, and the steps they are made of.

// Takes pages at an align-aligned start out of the listed free block b of
// sp (find_fit's answer, the head of its list), lists what is left around
// it, and returns the record of the taken piece (state still to be set by
// the caller).
HBM_INLINE uint32_t Allocator::place(Space& sp, uint32_t b, uint32_t pages, uint32_t align) {
  list_pop(sp, b);
  uint32_t start = rec(b).start;
  uint32_t end = start + rec(b).size;
  uint32_t a = (start + align - 1) & ~(align - 1);
  uint32_t u = b;
  if (a > start) {
    rec(b).size = a - start;
    list_insert(sp, b);
    sp.free_blocks++;
    u = record_new();
    link_after(b, u);
  }
  Block& U = rec(u);
  U.start = a;
  U.size = pages;
  if (a + pages < end) {
    uint32_t t = record_new();
    rec(t).start = a + pages;
    rec(t).size = end - (a + pages);
    link_after(u, t);
    list_insert(sp, t);
  } else {
    sp.free_blocks--;
  }
  return u;
}

// Frees a chain of extents taken by stitch() (they merge back with their
// neighbours, so the free map is what it was).
void Allocator::undo_extents(uint32_t first) {
  for (uint32_t e = first; e != 0;) {
    uint32_t next = rec(e).link_next;
    free_block(sp_[kPhys], e);
    e = next;
  }
}

// The stitch path: a range of the remap window, covered by at most
// kMaxExtents physical extents taken largest first (the head of the
// highest non-empty size class each time; the last one is split to the
// exact remainder), then mapped. O(kMaxExtents) TLSF operations and map
// calls. Returns the remap record (state still to be set), or 0 with every
// step undone.
uint32_t Allocator::stitch(uint32_t pages, uint32_t align) {
  Space& ph = sp_[kPhys];
  Space& rm = sp_[kRemap];
  if (free_pages(kPhys) < pages) return 0;
  uint32_t vb = find_fit(rm, pages, align);
  if (vb == 0) return 0;
  uint32_t first = 0, last = 0, need = pages, n = 0;
  while (need > 0 && n < kMaxExtents && c_.extents + n < limits_.max_extents &&
         ph.fl_bitmap != 0) {
    uint32_t fl = msb(ph.fl_bitmap);
    uint32_t e = ph.heads[(fl << kSlBits) | msb(ph.sl_bitmap[fl])];
    list_pop(ph, e);
    Block& E = rec(e);
    if (E.size > need) {
      uint32_t t = record_new();
      rec(t).start = E.start + need;
      rec(t).size = E.size - need;
      link_after(e, t);
      list_insert(ph, t);
      E.size = need;
    } else {
      ph.free_blocks--;
    }
    E.state = kExtentState;
    E.link_prev = last;
    E.link_next = 0;
    if (last) rec(last).link_next = e;
    else first = e;
    last = e;
    need -= E.size;
    n++;
  }
  if (need > 0) {
    undo_extents(first);
    return 0;
  }
  uint32_t u = place(rm, vb, pages, align);
  uint64_t va = rm.base + (uint64_t(rec(u).start) << page_shift_);
  uint64_t off = 0;
  for (uint32_t e = first; e != 0; e = rec(e).link_next) {
    rec(e).aux = u;
    uint64_t len = uint64_t(rec(e).size) << page_shift_;
    if (!mapper_.map(mapper_.ctx, va + off, base_ + (uint64_t(rec(e).start) << page_shift_),
                     len)) {
      if (off != 0) mapper_.unmap(mapper_.ctx, va, off);
      undo_extents(first);
      free_block(rm, u);
      return 0;
    }
    off += len;
  }
  stitch_[u / kRecord].extent_head = first;
  stitch_[u / kRecord].extent_count = n;
  c_.stitched++;
  c_.extents += n;
  c_.remap_used_pages += pages;
  c_.stitches++;
  c_.stitch_extents_total += n;
  if (n > c_.stitch_extents_max) c_.stitch_extents_max = n;
  return u;
}

// Turns b, a block of sp, into a free block merged with its free
// neighbours, and lists it. On a random trace each neighbour is free 40%
// of the time, independently: a branch on either is mispredicted often,
// so the one- or no-neighbour merge (84% of frees) is made without a
// branch, with the sink (record 0, unlisted from its own always-empty
// class, size 0) standing for "no neighbour". Only the merge with both
// (16%) is a branch: taking it costs a misprediction, but the common case
// unlists one block instead of two (30 instructions fewer a free on
// hbm_bench's trace for 0.16 mispredictions).
HBM_INLINE uint32_t Allocator::free_block(Space& sp, uint32_t b) {
  Block& B = rec(b);
  uint32_t p = B.phys_prev, n = B.phys_next;
  uint32_t ps = rec(p).state, ns = rec(n).state;
  uint32_t both = (ps ^ kFree) | (ns ^ kFree);
  if (both == 0) [[unlikely]] {
    list_remove(sp, p);
    list_remove(sp, n);
    uint32_t nx = rec(n).phys_next;
    rec(p).phys_next = nx;
    rec(nx).phys_prev = p;
    rec(p).size += B.size + rec(n).size;
    record_release(b);
    record_release(n);
    sp.free_blocks--;
    list_insert(sp, p);
    return p;
  }
  // At most one neighbour merges: x, or the sink.
  uint32_t x = select_eq(ps, kFree, p, select_eq(ns, kFree, n, 0u));
  list_remove(sp, x);
  uint32_t m = select_eq(ps, kFree, p, b);
  uint32_t nx = select_eq(ns, kFree, rec(n).phys_next, n);
  uint32_t size = B.size + rec(x).size;
  Block& M = rec(m);
  M.phys_next = nx;
  rec(nx).phys_prev = m;
  M.size = size;
  // The record that goes: b when merged into p, else x (n merged into b,
  // or the sink).
  uint32_t gone = select_eq(ps, kFree, b, x);
  rec(gone).state = 0;
  rec(gone).link_next = spare_head_;
  spare_head_ = select_nz(x, gone, spare_head_);
  rec(0).link_next = 0;
  sp.free_blocks += uint32_t(x == 0);
  list_insert(sp, m);
  return m;
}

// Splits the retired page out of the listed free block f that contains it;
// returns the free block after the page, or 0.
uint32_t Allocator::carve_page(uint32_t f, uint32_t page) {
  Space& sp = sp_[kPhys];
  list_remove(sp, f);
  sp.free_blocks--;
  uint32_t fs = rec(f).start;
  uint32_t fe = fs + rec(f).size;
  uint32_t r = f;
  if (page > fs) {
    rec(f).size = page - fs;
    list_insert(sp, f);
    sp.free_blocks++;
    r = record_new();
    link_after(f, r);
  }
  rec(r).start = page;
  rec(r).size = 1;
  rec(r).state = kRetired;
  c_.retired_block_pages++;
  if (page + 1 >= fe) return 0;
  uint32_t t = record_new();
  rec(t).start = page + 1;
  rec(t).size = fe - page - 1;
  link_after(r, t);
  list_insert(sp, t);
  sp.free_blocks++;
  return t;
}

// Carves the retired pages of [start, end) out of the free block f that
// holds that range. Each retired page lies in the free block that follows
// the previous one, so the pages are carved in one pass in ascending order.
void Allocator::carve_retired(uint32_t f, uint32_t start, uint32_t end) {
  for (uint32_t i = retired_lower_bound(start); i < retired_count_ && retired_[i] < end; ++i)
    f = carve_page(f, retired_[i]);
}

// release() of a poisoned or a stitched allocation: what it frees keeps
// none of its retired pages.
void Allocator::release_special(uint32_t b) {
  Block& B = rec(b);
  bool poisoned = B.poisoned != 0;
  if (poisoned) c_.poisoned--;
  if (B.space == kRemap) {
    unstitch(b, poisoned);
  } else {
    uint32_t start = B.start, end = B.start + B.size;
    carve_retired(free_block(sp_[kPhys], b), start, end);
  }
}

// Returns a stitched allocation's extents to the identity window (carving
// out its retired pages when poisoned), after unmapping its range.
void Allocator::unstitch(uint32_t b, bool poisoned) {
  const Block& B = rec(b);
  // Unmapped before any physical page can be handed out again.
  uint64_t va = sp_[kRemap].base + (uint64_t(B.start) << page_shift_);
  mapper_.unmap(mapper_.ctx, va, uint64_t(B.size) << page_shift_);
  for (uint32_t e = stitch_[b / kRecord].extent_head; e != 0;) {
    uint32_t next = rec(e).link_next;
    uint32_t es = rec(e).start, ee = es + rec(e).size;
    uint32_t f = free_block(sp_[kPhys], e);
    if (poisoned) carve_retired(f, es, ee);
    e = next;
  }
  c_.stitched--;
  c_.extents -= stitch_[b / kRecord].extent_count;
  c_.remap_used_pages -= B.size;
  free_block(sp_[kRemap], b);
}

// Releases the live allocation b, which starts at page start of sp (the
// caller has both at hand).
// plain: the caller knows b is an unpoisoned allocation of the identity
// window (free()'s common path), so the test for the other kinds folds away.
HBM_INLINE void Allocator::release(Space& sp, uint32_t b, uint32_t start, bool drop_owner,
                                   bool plain) {
  Block& B = rec(b);
  uint32_t s = B.aux;
  Owner& o = owners_[s - 1];
  live_unmark(sp, start);
  uint32_t* from = select_eq(o.head, b, &o.head, &rec(B.link_prev).link_next);
  *from = B.link_next;
  rec(B.link_next).link_prev = B.link_prev;
  o.count--;
  o.used_pages -= B.size;
  o.category_pages[B.category] -= B.size;
  c_.category_pages[B.category] -= B.size;
  c_.category_count[B.category]--;
  c_.frees++;
  // Before the block work, so that nothing of the owner stays live in
  // registers across it (the record keeps a stale slot only until then).
  if (drop_owner) owner_maybe_drop(s);
  if (plain || (B.poisoned | B.space) == 0) [[likely]] free_block(sp, b);
  else release_special(b);
}

// The placements other than one unaligned block of the identity window: an
// aligned one there, else stitched. Returns the record (state still to be
// set) or 0.
uint32_t Allocator::place_special(uint32_t pages, uint32_t align) {
  uint32_t b = find_fit(sp_[kPhys], pages, align);
  if (b != 0) return place(sp_[kPhys], b, pages, align);
  return remap_pages_ != 0 ? stitch(pages, align) : 0;
}

// Makes the placed block u of sp a live allocation of owner slot s and
// returns its device address.
HBM_INLINE uint64_t Allocator::commit(Space& sp, uint32_t u, uint32_t s, Category category) {
  Block& U = rec(u);
  Owner& o = owners_[s - 1];
  uint32_t pages = U.size;
  U.state = kUsed;
  U.category = uint8_t(category);
  U.poisoned = 0;
  U.aux = s;
  U.link_next = o.head;
  rec(o.head).link_prev = u;
  o.head = u;
  o.count++;
  o.used_pages += pages;
  o.category_pages[uint32_t(category)] += pages;
  sp.start_record[U.start] = u;
  live_mark(sp, U.start);
  c_.category_pages[uint32_t(category)] += pages;
  c_.category_count[uint32_t(category)]++;
  c_.allocs++;
  return sp.base + (uint64_t(U.start) << page_shift_);
}

// The common path, checked and done with nothing else in the way: no
// alignment beyond the page, an owner in its home hash slot with room in
// its quota, one free block of the identity window. Whatever it does not
// take (errors included) goes to allocate_general, which takes every
// step again in full. total_bytes_ is 0 until init() succeeds, so the size
// test also stands for ready_; an owner kAnyOwner is never in the table.
HBM_CPU_CLONES Error Allocator::allocate(uint32_t owner, Category category, uint64_t size,
                                        uint64_t alignment, uint64_t* addr_out) {
  if (size - 1 < total_bytes_ && alignment <= page_bytes_ && (alignment & (alignment - 1)) == 0 &&
      uint32_t(category) < kCategoryCount && addr_out != nullptr &&
      live() < limits_.max_allocations) [[likely]] {
    uint32_t s = owner_hash_[owner_home(owner)];
    if (s != 0) [[likely]] {
      const Owner& o = owners_[s - 1];
      uint32_t pages = uint32_t((size + page_bytes_ - 1) >> page_shift_);
      if (o.id == owner &&
          (o.quota == kNoQuota || (o.used_pages + pages) << page_shift_ <= o.quota)) [[likely]] {
        uint32_t u = sp_[kPhys].heads[find_class(sp_[kPhys], pages)];
        if (u != 0) [[likely]] {
          u = place(sp_[kPhys], u, pages, 1);
          *addr_out = commit(sp_[kPhys], u, s, category);
          return Error::kOk;
        }
      }
    }
  }
  return allocate_general(owner, category, size, alignment, addr_out);
}

// The identity window comes first: one free block, device address =
// physical. Only when none holds the request is it stitched from several.
Error Allocator::allocate_general(uint32_t owner, Category category, uint64_t size,
                                  uint64_t alignment, uint64_t* addr_out) {
  if (!ready_) [[unlikely]] return Error::kNotInitialised;
  if (uint32_t(category) >= kCategoryCount || owner == kAnyOwner || size - 1 >= total_bytes() ||
      addr_out == nullptr || (alignment != 0 && (!is_pow2(alignment) || alignment > kMaxAlignment)))
      [[unlikely]] {
    c_.fail_bad_argument++;
    return Error::kBadArgument;
  }
  uint32_t pages = uint32_t((size + page_bytes_ - 1) >> page_shift_);
  uint32_t align = alignment > page_bytes_ ? uint32_t(alignment >> page_shift_) : 1;
  if (live() >= limits_.max_allocations) [[unlikely]] {
    c_.fail_no_metadata++;
    return Error::kTooManyAllocations;
  }
  uint32_t s = owner_find(owner);
  if (s == 0) [[unlikely]] {
    Error err = Error::kOk;
    s = owner_get(owner, &err);
    if (s == 0) {
      c_.fail_no_metadata++;
      return err;
    }
  }
  Owner& o = owners_[s - 1];
  uint64_t bytes = uint64_t(pages) << page_shift_;
  if (o.quota != kNoQuota && ((o.used_pages << page_shift_) + bytes > o.quota)) [[unlikely]] {
    c_.fail_quota++;
    owner_maybe_drop(s);
    return Error::kQuota;
  }
  uint32_t u = align == 1 ? find_free(sp_[kPhys], pages) : 0;
  if (u != 0) [[likely]] {
    u = place(sp_[kPhys], u, pages, 1);
    *addr_out = commit(sp_[kPhys], u, s, category);
    return Error::kOk;
  }
  u = place_special(pages, align);
  if (u == 0) [[unlikely]] {
    c_.fail_no_memory++;
    owner_maybe_drop(s);
    return Error::kNoMemory;
  }
  *addr_out = commit(sp_[rec(u).space], u, s, category);
  return Error::kOk;
}

// free() in one window.
HBM_INLINE Error Allocator::free_in(Space& sp, uint64_t addr, uint32_t owner) {
  if (((addr - sp.base) & (page_bytes_ - 1)) != 0) [[unlikely]] return Error::kNoSuchAllocation;
  uint32_t p = uint32_t((addr - sp.base) >> page_shift_);
  if (!live_at(sp, p)) [[unlikely]] return Error::kNoSuchAllocation;
  uint32_t b = sp.start_record[p];
  if (owner != kAnyOwner && owners_[rec(b).aux - 1].id != owner) [[unlikely]]
    return Error::kNotOwner;
  release(sp, b, p, true);
  return Error::kOk;
}

// The common path: a live, unpoisoned allocation of the identity window.
// Anything else goes to free_general (total_bytes_ is 0 before init()).
HBM_CPU_CLONES Error Allocator::free(uint64_t addr, uint32_t owner) {
  Space& sp = sp_[kPhys];
  uint64_t off = addr - base_;
  if (off < total_bytes_ && (off & (page_bytes_ - 1)) == 0) [[likely]] {
    uint32_t p = uint32_t(off >> page_shift_);
    if (live_at(sp, p)) [[likely]] {
      uint32_t b = sp.start_record[p];
      const Block& B = rec(b);
      if ((owner == kAnyOwner || owners_[B.aux - 1].id == owner) && B.poisoned == 0) [[likely]] {
        release(sp, b, p, true, true);
        return Error::kOk;
      }
    }
  }
  return free_general(addr, owner);
}

Error Allocator::free_general(uint64_t addr, uint32_t owner) {
  if (!ready_) [[unlikely]] return Error::kNotInitialised;
  if (addr - base_ < total_bytes()) [[likely]] return free_in(sp_[kPhys], addr, owner);
  if (!in_remap_window(addr)) return Error::kOutOfRange;
  return free_in(sp_[kRemap], addr, owner);
}

Error Allocator::free_all(uint32_t owner, uint32_t* freed_out) {
  if (!ready_) return Error::kNotInitialised;
  if (owner == kAnyOwner) return Error::kBadArgument;
  uint32_t n = 0;
  uint32_t s = owner_find(owner);
  if (s != 0) {
    while (owners_[s - 1].head != 0) {
      uint32_t b = owners_[s - 1].head;
      release(sp_[rec(b).space], b, rec(b).start, false);
      n++;
    }
    owner_maybe_drop(s);
  }
  if (freed_out) *freed_out = n;
  return Error::kOk;
}

Error Allocator::set_quota(uint32_t owner, uint64_t quota_bytes) {
  if (!ready_) return Error::kNotInitialised;
  if (owner == kAnyOwner) return Error::kBadArgument;
  Error err = Error::kOk;
  uint32_t s = owner_get(owner, &err);
  if (s == 0) return err;
  owners_[s - 1].quota = quota_bytes;
  owners_[s - 1].explicit_quota = 1;
  return Error::kOk;
}

Error Allocator::remove_owner(uint32_t owner) {
  if (!ready_) return Error::kNotInitialised;
  if (owner == kAnyOwner) return Error::kBadArgument;
  uint32_t s = owner_find(owner);
  if (s == 0) return Error::kOk;
  for (uint32_t b = owners_[s - 1].head; b != 0; b = owners_[s - 1].head)
    release(sp_[rec(b).space], b, rec(b).start, false);
  owner_erase(owner);
  return Error::kOk;
}

Error Allocator::owner_usage(uint32_t owner, OwnerUsage* out) const {
  if (!ready_) return Error::kNotInitialised;
  if (out == nullptr || owner == kAnyOwner) return Error::kBadArgument;
  uint32_t s = owner_find(owner);
  *out = OwnerUsage{};
  if (s == 0) {
    out->quota = default_quota_;
    return Error::kNotFound;
  }
  const Owner& o = owners_[s - 1];
  out->quota = o.quota;
  out->used_bytes = o.used_pages << page_shift_;
  out->allocations = o.count;
  for (uint32_t c = 0; c < kCategoryCount; ++c)
    out->category_bytes[c] = o.category_pages[c] << page_shift_;
  return Error::kOk;
}

uint64_t Allocator::block_addr(uint32_t b) const {
  return sp_[rec(b).space].base + (uint64_t(rec(b).start) << page_shift_);
}

void Allocator::fill_info(uint32_t b, AllocationInfo* out) const {
  const Block& B = rec(b);
  out->addr = block_addr(b);
  out->bytes = uint64_t(B.size) << page_shift_;
  out->owner = owners_[B.aux - 1].id;
  out->category = Category(B.category);
  out->poisoned = B.poisoned != 0;
  out->stitched = B.space == kRemap;
  out->extents = B.space == kRemap ? stitch_[b / kRecord].extent_count : 1;
}

// The record of the live allocation that holds all of [addr, addr + len),
// or 0; len >= 1 and no wrap checked by the caller.
uint32_t Allocator::live_record(uint64_t addr, uint64_t len) const {
  const Space& sp = sp_[space_of(addr)];
  uint64_t span = uint64_t(sp.pages) << page_shift_;
  if (addr < sp.base || addr - sp.base >= span || addr + len - sp.base > span) return 0;
  uint32_t q = live_at_or_before(sp, uint32_t((addr - sp.base) >> page_shift_));
  if (q == kNone) return 0;
  uint32_t b = sp.start_record[q];
  uint64_t end = sp.base + (uint64_t(rec(b).start + rec(b).size) << page_shift_);
  return addr + len > end ? 0 : b;
}

Error Allocator::lookup(uint64_t addr, uint64_t len, AllocationInfo* out) const {
  if (!ready_) return Error::kNotInitialised;
  if (len == 0 || addr + len < addr) return Error::kBadArgument;
  const Space& sp = sp_[space_of(addr)];
  uint64_t span = uint64_t(sp.pages) << page_shift_;
  if (addr < sp.base || addr - sp.base >= span || addr + len - sp.base > span)
    return Error::kOutOfRange;
  uint32_t b = live_record(addr, len);
  if (b == 0) return Error::kNotFound;
  if (out) fill_info(b, out);
  return Error::kOk;
}

Error Allocator::check_range(uint64_t addr, uint64_t len) const {
  AllocationInfo info;
  Error e = lookup(addr, len, &info);
  if (e != Error::kOk) return e;
  return info.poisoned ? Error::kPoisoned : Error::kOk;
}

Error Allocator::next_allocation(uint64_t from, AllocationInfo* out) const {
  if (!ready_) return Error::kNotInitialised;
  if (out == nullptr) return Error::kBadArgument;
  // The lowest live start >= from in each window; the lower of the two.
  uint32_t best = 0;
  uint64_t best_addr = 0;
  for (uint32_t w = 0; w < 2; ++w) {
    const Space& sp = sp_[w];
    if (sp.pages == 0) continue;
    uint64_t p = 0;
    if (from > sp.base) {
      uint64_t off = from - sp.base;
      if (off >= (uint64_t(sp.pages) << page_shift_)) continue;
      p = (off + page_bytes_ - 1) >> page_shift_;
    }
    uint32_t q = p < sp.pages ? live_at_or_after(sp, uint32_t(p)) : kNone;
    if (q == kNone) continue;
    uint64_t a = sp.base + (uint64_t(q) << page_shift_);
    if (best == 0 || a < best_addr) {
      best = sp.start_record[q];
      best_addr = a;
    }
  }
  if (best == 0) return Error::kNotFound;
  fill_info(best, out);
  return Error::kOk;
}

Error Allocator::extents(uint64_t addr, Extent* out, uint32_t cap, uint32_t* count_out) const {
  if (!ready_) return Error::kNotInitialised;
  uint32_t b = live_record(addr, 1);
  if (b == 0 || block_addr(b) != addr) return Error::kNoSuchAllocation;
  const Block& B = rec(b);
  uint32_t n = 0;
  if (B.space == kPhys) {
    if (cap >= 1 && out != nullptr)
      out[0] = Extent{addr, addr, uint64_t(B.size) << page_shift_};
    n = 1;
  } else {
    uint64_t off = 0;
    for (uint32_t e = stitch_[b / kRecord].extent_head; e != 0; e = rec(e).link_next, ++n) {
      uint64_t len = uint64_t(rec(e).size) << page_shift_;
      if (n < cap && out != nullptr) out[n] = Extent{addr + off, block_addr(e), len};
      off += len;
    }
  }
  if (count_out) *count_out = n;
  return n > cap || (out == nullptr && n != 0) ? Error::kBadArgument : Error::kOk;
}

Error Allocator::translate(uint64_t addr, uint64_t* phys_out) const {
  if (!ready_) return Error::kNotInitialised;
  if (phys_out == nullptr) return Error::kBadArgument;
  if (!in_remap_window(addr)) {
    uint32_t p;
    if (!to_page(addr, &p)) return Error::kOutOfRange;
    *phys_out = addr;
    return Error::kOk;
  }
  uint32_t b = live_record(addr, 1);
  if (b == 0) return Error::kNotFound;
  uint64_t off = addr - block_addr(b);
  for (uint32_t e = stitch_[b / kRecord].extent_head; e != 0; e = rec(e).link_next) {
    uint64_t len = uint64_t(rec(e).size) << page_shift_;
    if (off < len) {
      *phys_out = block_addr(e) + off;
      return Error::kOk;
    }
    off -= len;
  }
  return Error::kInconsistent;
}

uint32_t Allocator::retired_lower_bound(uint32_t page) const {
  uint32_t lo = 0, hi = retired_count_;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (retired_[mid] < page) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The identity-window page behind a device address of either window.
bool Allocator::phys_page_of(uint64_t addr, uint32_t* page) const {
  uint64_t phys = 0;
  if (translate(addr, &phys) != Error::kOk) return false;
  return to_page(phys, page);
}

bool Allocator::is_retired(uint64_t addr) const {
  uint32_t p;
  if (!ready_ || !phys_page_of(addr, &p)) return false;
  uint32_t i = retired_lower_bound(p);
  return i < retired_count_ && retired_[i] == p;
}

// The block holding page: the contiguous allocation below it from the
// bitmap, then a walk over what follows it. Between two of them lie only
// free blocks, retired pages and extents, never two free blocks in a row,
// so the walk is at most 2 * (max_retired_pages + max_extents) + 1 steps.
uint32_t Allocator::locate(uint32_t page) const {
  const Space& sp = sp_[kPhys];
  uint32_t q = live_at_or_before(sp, page);
  uint32_t b = q == kNone ? 0 : sp.start_record[q];
  if (b != 0 && page < rec(b).start + rec(b).size) return b;
  uint32_t c = b != 0 ? rec(b).phys_next : kHead;
  while (c != 0 && page >= rec(c).start + rec(c).size) c = rec(c).phys_next;
  return c;
}

Error Allocator::record_correctable(uint64_t addr) {
  if (!ready_) return Error::kNotInitialised;
  uint32_t p;
  if (!phys_page_of(addr, &p)) return in_remap_window(addr) ? Error::kNotFound : Error::kOutOfRange;
  c_.correctable[(uint64_t(p) << page_shift_) / stack_bytes_]++;
  return Error::kOk;
}

// A remap-window address is translated through its allocation's extents:
// the physical page is retired and the stitched allocation poisoned.
Error Allocator::retire_page(uint64_t addr, RetireOutcome* out) {
  if (!ready_) return Error::kNotInitialised;
  uint32_t p;
  if (!phys_page_of(addr, &p)) return in_remap_window(addr) ? Error::kNotFound : Error::kOutOfRange;
  uint32_t i = retired_lower_bound(p);
  if (i < retired_count_ && retired_[i] == p) return Error::kAlreadyRetired;
  if (retired_count_ >= limits_.max_retired_pages) return Error::kTooManyRetired;
  uint32_t b = locate(p);
  if (b == 0 || rec(b).state == kRetired) return Error::kInconsistent;
  RetireOutcome outcome;
  if (rec(b).state == kExtentState) b = rec(b).aux;  // the stitched allocation
  if (rec(b).state == kUsed) {
    if (!rec(b).poisoned) {
      rec(b).poisoned = 1;
      c_.poisoned++;
    }
    outcome.was_allocated = true;
    outcome.allocation_addr = block_addr(b);
    outcome.owner = owners_[rec(b).aux - 1].id;
  } else {
    carve_page(b, p);
  }
  memmove(&retired_[i + 1], &retired_[i], sizeof(uint32_t) * (retired_count_ - i));
  retired_[i] = p;
  retired_count_++;
  c_.retired_per_stack[(uint64_t(p) << page_shift_) / stack_bytes_]++;
  if (out) *out = outcome;
  return Error::kOk;
}

Error Allocator::export_retired(uint64_t* out, uint32_t cap, uint32_t* count_out) const {
  if (!ready_) return Error::kNotInitialised;
  if (count_out) *count_out = retired_count_;
  if (cap < retired_count_) return Error::kTooManyRetired;
  if (out == nullptr && retired_count_ != 0) return Error::kBadArgument;
  for (uint32_t i = 0; i < retired_count_; ++i)
    out[i] = base_ + (uint64_t(retired_[i]) << page_shift_);
  return Error::kOk;
}

Error Allocator::import_retired(const uint64_t* pages, uint32_t count) {
  if (!ready_) return Error::kNotInitialised;
  if (pages == nullptr && count != 0) return Error::kBadArgument;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t p;
    if (!to_page(pages[i], &p)) return Error::kOutOfRange;
    if (((pages[i] - base_) & (page_bytes_ - 1)) != 0) return Error::kBadArgument;
  }
  // Applied in order; on kTooManyRetired the pages before stay retired,
  // the safe direction for memory known to be bad.
  for (uint32_t i = 0; i < count; ++i) {
    Error e = retire_page(pages[i]);
    if (e != Error::kOk && e != Error::kAlreadyRetired) return e;
  }
  return Error::kOk;
}

void Allocator::stats(Stats* out) const {
  *out = Stats{};
  if (!ready_) return;
  const Space& ph = sp_[kPhys];
  const Space& rm = sp_[kRemap];
  out->total_bytes = total_bytes();
  out->used_bytes = used_pages() << page_shift_;
  uint64_t free_pages_now = free_pages(kPhys);
  out->free_bytes = free_pages_now << page_shift_;
  out->retired_bytes = c_.retired_block_pages << page_shift_;
  auto largest_of = [this](const Space& sp) -> uint32_t {
    if (sp.fl_bitmap == 0) return 0;
    uint32_t fl = msb(sp.fl_bitmap);
    uint32_t sl = msb(sp.sl_bitmap[fl]);
    uint32_t largest = 0;
    for (uint32_t b = sp.heads[(fl << kSlBits) | sl]; b != 0; b = rec(b).link_next)
      if (rec(b).size > largest) largest = rec(b).size;
    return largest;
  };
  uint64_t largest = largest_of(ph);
  uint64_t allocatable = largest;
  if (remap_pages_ != 0) {
    // What stitch() would gather now: the heads of the highest classes, in
    // its order, up to kMaxExtents blocks and the extent budget.
    uint32_t budget = limits_.max_extents - c_.extents;
    if (budget > kMaxExtents) budget = kMaxExtents;
    uint64_t gathered = 0;
    uint32_t taken = 0;
    for (int fl = 31; fl >= 0 && taken < budget; --fl) {
      if (((ph.fl_bitmap >> fl) & 1) == 0) continue;
      for (int sl = 31; sl >= 0 && taken < budget; --sl)
        for (uint32_t b = ph.heads[(fl << kSlBits) | sl]; b != 0 && taken < budget;
             b = rec(b).link_next, ++taken)
          gathered += rec(b).size;
    }
    uint64_t window = largest_of(rm);
    uint64_t stitched = gathered < window ? gathered : window;
    if (stitched > allocatable) allocatable = stitched;
    out->remap_bytes = remap_bytes();
    out->remap_used_bytes = c_.remap_used_pages << page_shift_;
    out->remap_largest_free_bytes = window << page_shift_;
    out->stitch_free_bytes = stitched << page_shift_;
  }
  out->largest_free_bytes = allocatable << page_shift_;
  out->largest_contiguous_free_bytes = largest << page_shift_;
  out->fragmentation =
      free_pages_now == 0 ? 0.0 : 1.0 - double(allocatable) / double(free_pages_now);
  out->contiguous_fragmentation =
      free_pages_now == 0 ? 0.0 : 1.0 - double(largest) / double(free_pages_now);
  out->stitched_allocations = c_.stitched;
  out->stitched_extents = c_.extents;
  out->stitches = c_.stitches;
  out->stitch_extents_total = c_.stitch_extents_total;
  out->stitch_extents_max = c_.stitch_extents_max;
  out->live_allocations = live();
  out->free_blocks = ph.free_blocks;
  out->owners = c_.owners;
  out->retired_pages = retired_count_;
  out->poisoned_allocations = c_.poisoned;
  out->allocs = c_.allocs;
  out->frees = c_.frees;
  out->fail_no_memory = c_.fail_no_memory;
  out->fail_quota = c_.fail_quota;
  out->fail_bad_argument = c_.fail_bad_argument;
  out->fail_no_metadata = c_.fail_no_metadata;
  for (uint32_t c = 0; c < kCategoryCount; ++c) {
    out->category_bytes[c] = c_.category_pages[c] << page_shift_;
    out->category_allocations[c] = c_.category_count[c];
  }
  out->stacks = stacks_;
  for (uint32_t s = 0; s < kMaxStacks; ++s) {
    out->correctable_errors[s] = c_.correctable[s];
    out->retired_per_stack[s] = c_.retired_per_stack[s];
  }
}

void Allocator::for_each_block(void (*fn)(const BlockInfo&, void*), void* ctx) const {
  if (!ready_) return;
  for (uint32_t b = kHead; b != 0; b = rec(b).phys_next) {
    BlockInfo info;
    info.addr = base_ + (uint64_t(rec(b).start) << page_shift_);
    info.bytes = uint64_t(rec(b).size) << page_shift_;
    info.state = BlockState(rec(b).state);
    fn(info, ctx);
  }
}

// One window's share of audit(): the address list covers [0, pages) with no
// two free neighbours, the free lists agree with the bitmaps and hold
// exactly the free blocks, the live-start index marks exactly the used
// blocks; used blocks are added to the totals. Extents of the identity
// window are checked from their stitched allocation (audit()).
Error Allocator::audit_space(uint32_t w, uint64_t* used_pages, uint32_t* used,
                             uint32_t* poisoned, uint64_t* cat_pages, uint32_t* cat_count) const {
  constexpr Error kBad = Error::kInconsistent;
  const Space& sp = sp_[w];
  uint64_t expect = 0, free_sum = 0, retired_pages = 0, extent_pages = 0;
  uint32_t free_blocks = 0, steps = 0, prev = 0, live = 0;
  for (uint32_t b = sp.head; b != 0; prev = b, b = rec(b).phys_next) {
    const Block& B = rec(b);
    if (++steps > block_capacity_ || B.phys_prev != prev || B.start != expect || B.size == 0 ||
        B.space != w)
      return kBad;
    expect += B.size;
    if (B.state == kFree) {
      if (prev != 0 && rec(prev).state == kFree) return kBad;
      free_sum += B.size;
      free_blocks++;
    } else if (B.state == kUsed) {
      *used_pages += B.size;
      (*used)++;
      live++;
      if (B.category >= kCategoryCount) return kBad;
      cat_pages[B.category] += B.size;
      cat_count[B.category]++;
      if (B.poisoned) {
        (*poisoned)++;
        // A retired page inside it (physically, through its extents).
        bool found = false;
        if (w == kPhys) {
          uint32_t i = retired_lower_bound(B.start);
          found = i < retired_count_ && retired_[i] < B.start + B.size;
        } else {
          for (uint32_t e = stitch_[b / kRecord].extent_head; e != 0 && !found;
               e = rec(e).link_next) {
            uint32_t i = retired_lower_bound(rec(e).start);
            found = i < retired_count_ && retired_[i] < rec(e).start + rec(e).size;
          }
        }
        if (!found) return kBad;
      }
      if (B.aux == 0 || B.aux > limits_.max_owners || owner_find(owners_[B.aux - 1].id) != B.aux)
        return kBad;
      if (!live_at(sp, B.start) || sp.start_record[B.start] != b) return kBad;
    } else if (B.state == kRetired && w == kPhys) {
      uint32_t i = retired_lower_bound(B.start);
      if (B.size != 1 || i >= retired_count_ || retired_[i] != B.start) return kBad;
      retired_pages++;
    } else if (B.state == kExtentState && w == kPhys) {
      uint32_t u = B.aux;
      if (u == 0 || u % kRecord != 0 || u / kRecord >= block_capacity_ || rec(u).space != kRemap ||
          rec(u).state != kUsed)
        return kBad;
      extent_pages += B.size;
    } else {
      return kBad;
    }
  }
  if (expect != sp.pages || free_sum != free_pages(w) || free_blocks != sp.free_blocks)
    return kBad;
  if (w == kPhys && (retired_pages != c_.retired_block_pages ||
                     extent_pages != c_.remap_used_pages))
    return kBad;
  uint64_t listed_pages = 0;
  uint32_t listed = 0;
  if (sp.sl_bitmap[kFlCount] != 1u << (kNoClass & (kSlCount - 1)) || sp.heads[kNoClass] != 0 ||
      sp.heads[kFlCount * kSlCount] != 0 || (sp.fl_bitmap >> kFlCount) != 0)
    return kBad;  // the rows and heads that stand for "none" (find_class)
  for (uint32_t fl = 0; fl < kFlCount; ++fl) {
    if (((sp.fl_bitmap >> fl) & 1) != (sp.sl_bitmap[fl] != 0)) return kBad;
    for (uint32_t sl = 0; sl < kSlCount; ++sl) {
      uint32_t c = (fl << kSlBits) | sl;
      if (((sp.sl_bitmap[fl] >> sl) & 1) != (sp.heads[c] != 0)) return kBad;
      uint32_t lp = 0;
      for (uint32_t b = sp.heads[c]; b != 0; lp = b, b = rec(b).link_next) {
        const Block& B = rec(b);
        if (++listed > free_blocks || B.state != kFree || B.space != w ||
            (lp != 0 && B.link_prev != lp) ||
            B.aux != c || size_class(B.size) != c)
          return kBad;
        listed_pages += B.size;
      }
    }
  }
  if (listed != free_blocks || listed_pages != free_sum) return kBad;
  uint64_t marked = 0;
  for (uint32_t i = 0; i < sp.level_words[0]; ++i)
    marked += uint64_t(__builtin_popcountll(sp.level[0][i]));
  if (marked != live) return kBad;
  if (sp.pages % 64 != 0 && (sp.level[0][sp.level_words[0] - 1] >> (sp.pages % 64)) != 0)
    return kBad;
  for (uint32_t l = 1; l < sp.levels; ++l)
    for (uint32_t i = 0; i < sp.level_words[l - 1]; ++i) {
      bool has = (sp.level[l][i >> 6] >> (i & 63)) & 1;
      if (has != (sp.level[l - 1][i] != 0)) return kBad;
    }
  return Error::kOk;
}

Error Allocator::audit() const {
  if (!ready_) return Error::kNotInitialised;
  constexpr Error kBad = Error::kInconsistent;
  uint64_t used_pages = 0;
  uint32_t used = 0, poisoned = 0;
  uint64_t cat_pages[kCategoryCount] = {};
  uint32_t cat_count[kCategoryCount] = {};
  Error e = audit_space(kPhys, &used_pages, &used, &poisoned, cat_pages, cat_count);
  if (e != Error::kOk) return e;
  if (remap_pages_ != 0) {
    e = audit_space(kRemap, &used_pages, &used, &poisoned, cat_pages, cat_count);
    if (e != Error::kOk) return e;
  } else if (rec(kRemapHead).size != 0 || c_.stitched != 0) {
    return kBad;
  }
  if (used_pages != this->used_pages() || used != live() || poisoned != c_.poisoned) return kBad;
  for (uint32_t c = 0; c < kCategoryCount; ++c)
    if (cat_pages[c] != c_.category_pages[c] || cat_count[c] != c_.category_count[c]) return kBad;
  // Stitched allocations: extents chained in order, each an extent block
  // naming it, at most kMaxExtents, covering exactly its pages.
  uint32_t stitched = 0, extents = 0;
  for (uint32_t b = sp_[kRemap].head; remap_pages_ != 0 && b != 0; b = rec(b).phys_next) {
    const Block& B = rec(b);
    if (B.state != kUsed) continue;
    stitched++;
    uint64_t pages = 0;
    uint32_t n = 0, lp = 0;
    for (uint32_t x = stitch_[b / kRecord].extent_head; x != 0; lp = x, x = rec(x).link_next) {
      const Block& X = rec(x);
      if (++n > kMaxExtents || X.state != kExtentState || X.space != kPhys || X.aux != b ||
          X.link_prev != lp)
        return kBad;
      pages += X.size;
    }
    if (n == 0 || n != stitch_[b / kRecord].extent_count || pages != B.size) return kBad;
    extents += n;
  }
  if (stitched != c_.stitched || extents != c_.extents || extents > limits_.max_extents)
    return kBad;
  // Owners: lists and accounting.
  uint32_t owner_live = 0, owners = 0;
  for (uint32_t i = 0; i <= owner_hash_mask_; ++i) {
    uint32_t s = owner_hash_[i];
    if (s == 0) continue;
    owners++;
    const Owner& o = owners_[s - 1];
    if (owner_find(o.id) != s) return kBad;
    uint64_t pages = 0, cp[kCategoryCount] = {};
    uint32_t n = 0, lp = 0;
    for (uint32_t b = o.head; b != 0; lp = b, b = rec(b).link_next) {
      const Block& B = rec(b);
      if (++n > o.count || B.state != kUsed || B.aux != s || (lp != 0 && B.link_prev != lp))
        return kBad;
      if (lookup(block_addr(b), page_bytes_, nullptr) != Error::kOk) return kBad;
      pages += B.size;
      cp[B.category] += B.size;
    }
    if (n != o.count || pages != o.used_pages) return kBad;
    for (uint32_t c = 0; c < kCategoryCount; ++c)
      if (cp[c] != o.category_pages[c]) return kBad;
    owner_live += n;
  }
  if (owner_live != live() || owners != c_.owners) return kBad;
  // Retired pages: sorted, each in a retired block, a poisoned allocation
  // or an extent of a poisoned stitched allocation.
  for (uint32_t i = 0; i < retired_count_; ++i) {
    if (i > 0 && retired_[i] <= retired_[i - 1]) return kBad;
    uint32_t b = locate(retired_[i]);
    if (b == 0) return kBad;
    const Block& B = rec(b);
    bool ok = B.state == kRetired || (B.state == kUsed && B.poisoned) ||
              (B.state == kExtentState && rec(B.aux).poisoned);
    if (!ok) return kBad;
  }
  return Error::kOk;
}

}  // namespace vtrn::hbm
