// HBM allocator core (see vtrn/hbm.h for the contract and the memory bound).
//
// Layout of the state: block records live in the caller's arena and are
// linked three ways by 32-bit indexes (index 0 is "none", so a zeroed arena
// is a valid empty state): the address-ordered neighbour list
// (coalescing), and the TLSF free list of the block's size class or, for a
// live allocation, its owner's list (free_all). Live allocations are found
// by address through a page-indexed table (free: O(1)) and a bitmap of
// their first pages with summary levels (lookup, next_allocation: one word
// a level). That index replaced a red-black tree, which cost about a third
// of the instructions of an allocate/free pair.
// Record 1 always describes the block at page 0: splits keep the lowest
// piece in the original record and merges keep the lower record, so the
// head of the address list never moves.
//
// Not here: any knowledge of how HBM is backed, the RPC that exposes it,
// or persistence of the retired-page list (export/import hand it over).
#include "vtrn/hbm.h"

#include <string.h>

namespace vtrn::hbm {

namespace {

constexpr uint8_t kFree = uint8_t(BlockState::kFree);
constexpr uint8_t kUsed = uint8_t(BlockState::kUsed);
constexpr uint8_t kRetired = uint8_t(BlockState::kRetired);
constexpr uint32_t kHead = 1;
constexpr uint32_t kNone = 0xFFFFFFFFu;  // no page
constexpr uint32_t kLimitMax = 1u << 24;
constexpr uint32_t kOwnersMax = 1u << 20;

inline uint32_t msb(uint64_t x) { return 63 - uint32_t(__builtin_clzll(x)); }
inline uint32_t lsb(uint32_t x) { return uint32_t(__builtin_ctz(x)); }
inline size_t align8(size_t n) { return (n + 7) & ~size_t(7); }
inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

struct Allocator::Block {
  uint32_t start;      // first page
  uint32_t size;       // pages
  uint32_t phys_prev;  // address-order neighbours
  uint32_t phys_next;
  uint32_t link_prev;  // free: size-class list; used: owner list; spare: chain
  uint32_t link_next;
  uint32_t owner_slot;
  uint32_t owner_id;
  uint8_t state;
  uint8_t category;
  uint8_t poisoned;
  uint8_t pad;
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

// ---- geometry and arena -------------------------------------------------

static uint32_t hash_slots(uint32_t owners) {
  uint32_t h = 1;
  while (h < 2 * owners) h <<= 1;
  return h;
}

// Validation shared by arena_bytes() and init(); pages_out gets the count.
static bool valid_config(const Config& config, uint32_t* pages_out) {
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
      l.max_retired_pages > kLimitMax || l.max_owners < 1 || l.max_owners > kOwnersMax)
    return false;
  *pages_out = uint32_t(pages_per_stack * g.stacks);
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

size_t Allocator::arena_bytes(const Config& config) {
  static_assert(sizeof(Block) == 36, "the published metadata bound counts 36 bytes a block");
  static_assert(sizeof(Owner) == 72, "the published metadata bound counts 72 bytes an owner");
  uint32_t pages = 0;
  if (!valid_config(config, &pages)) return 0;
  const Limits& l = config.limits;
  uint32_t words[kMaxLevels];
  uint32_t levels = bitmap_levels(pages, words);
  size_t bitmap_words = 0;
  for (uint32_t i = 0; i < levels; ++i) bitmap_words += words[i];
  size_t records = 2 * (size_t(l.max_allocations) + l.max_retired_pages) + 2;
  size_t n = align8(sizeof(Block) * records);
  n += align8(sizeof(Owner) * size_t(l.max_owners));
  n += align8(sizeof(uint32_t) * hash_slots(l.max_owners));
  n += align8(sizeof(uint32_t) * size_t(l.max_retired_pages));
  n += align8(sizeof(uint32_t) * size_t(pages));
  return n + sizeof(uint64_t) * bitmap_words;
}

Error Allocator::init(const Config& config, void* arena, size_t arena_size) {
  ready_ = false;
  uint32_t pages = 0;
  if (!valid_config(config, &pages)) return Error::kBadConfig;
  const board::HbmGeometry& g = config.geometry;
  const Limits& l = config.limits;
  size_t need = arena_bytes(config);
  if (arena == nullptr || (reinterpret_cast<uintptr_t>(arena) & 7) != 0 || arena_size < need)
    return Error::kArenaTooSmall;

  // Only the bitmap must start zeroed: records, owners and the hash are
  // written below or before first use, and start_record_ is read only
  // where the bitmap has a bit.
  auto* bytes = static_cast<uint8_t*>(arena);
  block_capacity_ = 2 * (l.max_allocations + l.max_retired_pages) + 2;
  blocks_ = reinterpret_cast<Block*>(bytes);
  size_t off = align8(sizeof(Block) * block_capacity_);
  owners_ = reinterpret_cast<Owner*>(bytes + off);
  off += align8(sizeof(Owner) * l.max_owners);
  owner_hash_ = reinterpret_cast<uint32_t*>(bytes + off);
  owner_hash_mask_ = hash_slots(l.max_owners) - 1;
  off += align8(sizeof(uint32_t) * hash_slots(l.max_owners));
  retired_ = reinterpret_cast<uint32_t*>(bytes + off);
  off += align8(sizeof(uint32_t) * l.max_retired_pages);
  start_record_ = reinterpret_cast<uint32_t*>(bytes + off);
  off += align8(sizeof(uint32_t) * size_t(pages));
  live_bits_ = reinterpret_cast<uint64_t*>(bytes + off);
  levels_ = bitmap_levels(pages, level_words_);
  uint32_t words = 0;
  for (uint32_t i = 0; i < levels_; ++i) {
    level_offset_[i] = words;
    words += level_words_[i];
  }
  memset(live_bits_, 0, sizeof(uint64_t) * words);
  memset(owner_hash_, 0, sizeof(uint32_t) * hash_slots(l.max_owners));
  blocks_[0] = Block{};

  base_ = config.base;
  page_bytes_ = g.page_bytes;
  page_shift_ = msb(g.page_bytes);
  pages_ = pages;
  stack_bytes_ = g.bytes_per_stack;
  stacks_ = g.stacks;
  limits_ = l;
  default_quota_ = config.default_quota;
  retired_count_ = 0;
  fl_bitmap_ = 0;
  memset(sl_bitmap_, 0, sizeof(sl_bitmap_));
  memset(heads_, 0, sizeof(heads_));
  c_ = Counters{};

  spare_head_ = 0;
  for (uint32_t i = block_capacity_ - 1; i > kHead; --i) record_release(i);
  owner_spare_ = 0;
  for (uint32_t i = l.max_owners; i > 0; --i) {
    owners_[i - 1] = Owner{};
    owners_[i - 1].head = owner_spare_;
    owner_spare_ = i;
  }
  Block& h = blocks_[kHead];
  h = Block{};
  h.start = 0;
  h.size = pages_;
  h.state = kFree;
  list_insert(kHead);
  ready_ = true;
  return Error::kOk;
}

// ---- live-start bitmap -----------------------------------------------------
// Level 0 has a bit per page; a bit of level k + 1 says its word of level k
// is non-zero. A search walks up until a word has a candidate, then down
// taking the highest (or lowest) bit: at most 2 * levels_ words.

void Allocator::live_mark(uint32_t page) {
  uint32_t i = page;
  for (uint32_t l = 0; l < levels_; ++l) {
    uint64_t& w = live_bits_[level_offset_[l] + (i >> 6)];
    bool was_empty = w == 0;
    w |= 1ull << (i & 63);
    if (!was_empty) return;
    i >>= 6;
  }
}

void Allocator::live_unmark(uint32_t page) {
  uint32_t i = page;
  for (uint32_t l = 0; l < levels_; ++l) {
    uint64_t& w = live_bits_[level_offset_[l] + (i >> 6)];
    w &= ~(1ull << (i & 63));
    if (w != 0) return;
    i >>= 6;
  }
}

bool Allocator::live_at(uint32_t page) const {
  return (live_bits_[page >> 6] >> (page & 63)) & 1;
}

// Highest marked page <= page, or kNone.
uint32_t Allocator::live_at_or_before(uint32_t page) const {
  uint32_t i = page, l = 0;
  for (;;) {
    uint32_t b = i & 63;
    uint64_t mask = b == 63 ? ~0ull : (2ull << b) - 1;
    uint64_t w = live_bits_[level_offset_[l] + (i >> 6)] & mask;
    if (w != 0) {
      i = (i & ~63u) | msb(w);
      break;
    }
    if ((i >> 6) == 0 || l + 1 == levels_) return kNone;
    i = (i >> 6) - 1;
    l++;
  }
  while (l > 0) {
    l--;
    i = (i << 6) | msb(live_bits_[level_offset_[l] + i]);
  }
  return i;
}

// Lowest marked page >= page, or kNone.
uint32_t Allocator::live_at_or_after(uint32_t page) const {
  uint32_t i = page, l = 0;
  for (;;) {
    uint64_t w = live_bits_[level_offset_[l] + (i >> 6)] & (~0ull << (i & 63));
    if (w != 0) {
      i = (i & ~63u) | uint32_t(__builtin_ctzll(w));
      break;
    }
    if (l + 1 == levels_ || (i >> 6) + 1 >= level_words_[l]) return kNone;
    i = (i >> 6) + 1;
    l++;
  }
  while (l > 0) {
    l--;
    i = (i << 6) | uint32_t(__builtin_ctzll(live_bits_[level_offset_[l] + i]));
  }
  return i;
}

bool Allocator::to_page(uint64_t addr, uint32_t* page) const {
  if (addr < base_ || addr - base_ >= total_bytes()) return false;
  *page = uint32_t((addr - base_) >> page_shift_);
  return true;
}

// ---- block records and the address list ---------------------------------

uint32_t Allocator::record_new() {
  uint32_t b = spare_head_;
  spare_head_ = blocks_[b].link_next;
  blocks_[b] = Block{};
  return b;
}

void Allocator::record_release(uint32_t b) {
  blocks_[b] = Block{};
  blocks_[b].link_next = spare_head_;
  spare_head_ = b;
}

void Allocator::link_after(uint32_t a, uint32_t b) {
  Block& A = blocks_[a];
  Block& B = blocks_[b];
  B.phys_prev = a;
  B.phys_next = A.phys_next;
  if (A.phys_next) blocks_[A.phys_next].phys_prev = b;
  A.phys_next = b;
}

void Allocator::unlink(uint32_t b) {
  Block& B = blocks_[b];
  if (B.phys_prev) blocks_[B.phys_prev].phys_next = B.phys_next;
  if (B.phys_next) blocks_[B.phys_next].phys_prev = B.phys_prev;
}

// ---- TLSF size classes -----------------------------------------------------
// Sizes below 32 pages have one exact list each (fl 0); above, each power of
// two is cut into 32 lists, so a class spans at most 1/32 of its size.

static inline void mapping(uint64_t size, uint32_t* fl, uint32_t* sl) {
  constexpr uint32_t kSlBits = 5;
  if (size < (1u << kSlBits)) {
    *fl = 0;
    *sl = uint32_t(size);
  } else {
    uint32_t m = msb(size);
    *fl = m - kSlBits + 1;
    *sl = uint32_t(size >> (m - kSlBits)) - (1u << kSlBits);
  }
}

void Allocator::list_insert(uint32_t b) {
  Block& B = blocks_[b];
  uint32_t fl, sl;
  mapping(B.size, &fl, &sl);
  B.state = kFree;
  B.link_prev = 0;
  B.link_next = heads_[fl][sl];
  if (B.link_next) blocks_[B.link_next].link_prev = b;
  heads_[fl][sl] = b;
  fl_bitmap_ |= 1u << fl;
  sl_bitmap_[fl] |= 1u << sl;
  c_.free_pages += B.size;
  c_.free_blocks++;
}

void Allocator::list_remove(uint32_t b) {
  Block& B = blocks_[b];
  uint32_t fl, sl;
  mapping(B.size, &fl, &sl);
  if (B.link_prev) blocks_[B.link_prev].link_next = B.link_next;
  else heads_[fl][sl] = B.link_next;
  if (B.link_next) blocks_[B.link_next].link_prev = B.link_prev;
  if (heads_[fl][sl] == 0) {
    sl_bitmap_[fl] &= ~(1u << sl);
    if (sl_bitmap_[fl] == 0) fl_bitmap_ &= ~(1u << fl);
  }
  B.link_prev = B.link_next = 0;
  c_.free_pages -= B.size;
  c_.free_blocks--;
}

// The size find_free() looks up for a request of `pages`: rounded up so that
// every block of the class it lands in holds the request ("good fit"). A
// free block of at least this size is always found; it is under 1/32 more
// than the request. Shared with worst_case_hbm_bytes so the bound and the
// search cannot drift apart.
static inline uint64_t good_fit_pages(uint64_t pages) {
  constexpr uint32_t kSlBits = 5;
  return pages < (1u << kSlBits) ? pages : pages + (1ull << (msb(pages) - kSlBits)) - 1;
}

// Head of the first non-empty list whose every block holds >= pages.
uint32_t Allocator::find_free(uint32_t pages) const {
  uint64_t r = good_fit_pages(pages);
  if (r >= (1ull << 31)) return 0;
  uint32_t fl, sl;
  mapping(r, &fl, &sl);
  uint32_t slmap = sl_bitmap_[fl] & (~0u << sl);
  if (slmap == 0) {
    uint32_t flmap = fl + 1 < 32 ? fl_bitmap_ & (~0u << (fl + 1)) : 0;
    if (flmap == 0) return 0;
    fl = lsb(flmap);
    slmap = sl_bitmap_[fl];
  }
  return heads_[fl][lsb(slmap)];
}

// The published bound (vtrn/hbm.h). Before a request of p pages with
// alignment a pages, at most N - 1 allocations are live and at most R pages
// are retired outside them; every free block is followed by one of those or
// by the end, so there are at most N + R free blocks, holding at least
// P - (M - p) - R pages. The largest holds at least 1/(N + R) of that, and
// allocate() succeeds once some free block reaches
// good_fit_pages(p + a - 1). Hence P >= M + R + (N + R) * good_fit_pages(n + a - 1),
// n the largest request in pages, suffices for every order of operations.
uint64_t Allocator::worst_case_hbm_bytes(uint64_t page_bytes, const WorstCase& w) {
  if (!is_pow2(page_bytes) || page_bytes < 4096 || page_bytes > kMaxAlignment) return 0;
  if (w.max_live_allocations == 0 || w.max_request_bytes == 0 || w.max_live_bytes == 0 ||
      (w.max_alignment != 0 && (!is_pow2(w.max_alignment) || w.max_alignment > kMaxAlignment)))
    return 0;
  uint32_t shift = msb(page_bytes);
  uint64_t n = (w.max_request_bytes >> shift) + ((w.max_request_bytes & (page_bytes - 1)) != 0);
  uint64_t m = (w.max_live_bytes >> shift) + ((w.max_live_bytes & (page_bytes - 1)) != 0);
  uint64_t a = w.max_alignment > page_bytes ? w.max_alignment >> shift : 1;
  uint64_t blocks = uint64_t(w.max_live_allocations) + w.retired_pages;
  uint64_t per_block = good_fit_pages(n + a - 1);
  uint64_t pages = 0;
  if (__builtin_mul_overflow(blocks, per_block, &pages) ||
      __builtin_add_overflow(pages, m + w.retired_pages, &pages) || pages > (~0ull >> shift))
    return 0;
  return pages << shift;
}

// ---- owners ----------------------------------------------------------------
// Open addressing with linear probing at load <= 1/2 and backward-shift
// deletion (no tombstones, so probe lengths do not grow with churn).

uint32_t Allocator::owner_home(uint32_t id) const {
  uint32_t h = id * 2654435761u;
  h ^= h >> 15;
  return h & owner_hash_mask_;
}

uint32_t Allocator::owner_find(uint32_t id) const {
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

// ---- allocate / free -------------------------------------------------------

Error Allocator::allocate(uint32_t owner, Category category, uint64_t size, uint64_t alignment,
                          uint64_t* addr_out) {
  if (!ready_) return Error::kNotInitialised;
  if (uint32_t(category) >= kCategoryCount || owner == kAnyOwner || size == 0 ||
      size > total_bytes() || addr_out == nullptr ||
      (alignment != 0 && (!is_pow2(alignment) || alignment > kMaxAlignment))) {
    c_.fail_bad_argument++;
    return Error::kBadArgument;
  }
  uint32_t pages = uint32_t((size + page_bytes_ - 1) >> page_shift_);
  uint32_t align = alignment > page_bytes_ ? uint32_t(alignment >> page_shift_) : 1;
  if (c_.live >= limits_.max_allocations) {
    c_.fail_no_metadata++;
    return Error::kTooManyAllocations;
  }
  Error err = Error::kOk;
  uint32_t s = owner_get(owner, &err);
  if (s == 0) {
    c_.fail_no_metadata++;
    return err;
  }
  Owner& o = owners_[s - 1];
  uint64_t bytes = uint64_t(pages) << page_shift_;
  if (o.quota != kNoQuota && ((o.used_pages << page_shift_) + bytes > o.quota)) {
    c_.fail_quota++;
    owner_maybe_drop(s);
    return Error::kQuota;
  }
  // An aligned request first tries the unpadded class: its head often has
  // room after rounding its start up; otherwise pad by align - 1 pages so
  // any block found fits.
  uint32_t b = find_free(pages);
  if (b != 0 && align > 1) {
    const Block& B = blocks_[b];
    uint64_t a = (uint64_t(B.start) + align - 1) & ~uint64_t(align - 1);
    if (a + pages > uint64_t(B.start) + B.size) b = 0;
    if (b == 0) b = find_free(pages + align - 1);
  }
  if (b == 0) {
    c_.fail_no_memory++;
    owner_maybe_drop(s);
    return Error::kNoMemory;
  }
  list_remove(b);
  uint32_t start = blocks_[b].start;
  uint32_t end = start + blocks_[b].size;
  uint32_t a = (start + align - 1) & ~(align - 1);
  uint32_t u = b;
  if (a > start) {
    blocks_[b].size = a - start;
    list_insert(b);
    u = record_new();
    link_after(b, u);
  }
  Block& U = blocks_[u];
  U.start = a;
  U.size = pages;
  if (a + pages < end) {
    uint32_t t = record_new();
    blocks_[t].start = a + pages;
    blocks_[t].size = end - (a + pages);
    link_after(u, t);
    list_insert(t);
  }
  U.state = kUsed;
  U.category = uint8_t(category);
  U.poisoned = 0;
  U.owner_slot = s;
  U.owner_id = owner;
  U.link_prev = 0;
  U.link_next = o.head;
  if (o.head) blocks_[o.head].link_prev = u;
  o.head = u;
  o.count++;
  o.used_pages += pages;
  o.category_pages[uint32_t(category)] += pages;
  start_record_[a] = u;
  live_mark(a);
  c_.live++;
  c_.used_pages += pages;
  c_.category_pages[uint32_t(category)] += pages;
  c_.category_count[uint32_t(category)]++;
  c_.allocs++;
  *addr_out = base_ + (uint64_t(a) << page_shift_);
  return Error::kOk;
}

// Turns b into a free block, merged with free neighbours, and lists it.
uint32_t Allocator::free_block(uint32_t b) {
  blocks_[b].state = kFree;
  uint32_t p = blocks_[b].phys_prev;
  if (p != 0 && blocks_[p].state == kFree) {
    list_remove(p);
    blocks_[p].size += blocks_[b].size;
    unlink(b);
    record_release(b);
    b = p;
  }
  uint32_t n = blocks_[b].phys_next;
  if (n != 0 && blocks_[n].state == kFree) {
    list_remove(n);
    blocks_[b].size += blocks_[n].size;
    unlink(n);
    record_release(n);
  }
  list_insert(b);
  return b;
}

// Splits the retired page out of the listed free block f that contains it;
// returns the free block after the page, or 0.
uint32_t Allocator::carve_page(uint32_t f, uint32_t page) {
  list_remove(f);
  uint32_t fs = blocks_[f].start;
  uint32_t fe = fs + blocks_[f].size;
  uint32_t r = f;
  if (page > fs) {
    blocks_[f].size = page - fs;
    list_insert(f);
    r = record_new();
    link_after(f, r);
  }
  blocks_[r].start = page;
  blocks_[r].size = 1;
  blocks_[r].state = kRetired;
  c_.retired_block_pages++;
  if (page + 1 >= fe) return 0;
  uint32_t t = record_new();
  blocks_[t].start = page + 1;
  blocks_[t].size = fe - page - 1;
  link_after(r, t);
  list_insert(t);
  return t;
}

void Allocator::release(uint32_t b, bool drop_owner) {
  Block& B = blocks_[b];
  uint32_t s = B.owner_slot;
  Owner& o = owners_[s - 1];
  live_unmark(B.start);
  if (B.link_prev) blocks_[B.link_prev].link_next = B.link_next;
  else o.head = B.link_next;
  if (B.link_next) blocks_[B.link_next].link_prev = B.link_prev;
  B.link_prev = B.link_next = 0;
  o.count--;
  o.used_pages -= B.size;
  o.category_pages[B.category] -= B.size;
  c_.live--;
  c_.used_pages -= B.size;
  c_.category_pages[B.category] -= B.size;
  c_.category_count[B.category]--;
  c_.frees++;
  uint32_t start = B.start;
  uint32_t end = B.start + B.size;
  bool poisoned = B.poisoned != 0;
  B.poisoned = 0;
  B.owner_slot = 0;
  uint32_t f = free_block(b);
  if (poisoned) {
    c_.poisoned--;
    // Each retired page lies in the free block that follows the previous
    // one, so the pages are carved in one pass in ascending order.
    for (uint32_t i = retired_lower_bound(start); i < retired_count_ && retired_[i] < end; ++i)
      f = carve_page(f, retired_[i]);
  }
  if (drop_owner) owner_maybe_drop(s);
}

Error Allocator::free(uint64_t addr, uint32_t owner) {
  if (!ready_) return Error::kNotInitialised;
  uint32_t p;
  if (!to_page(addr, &p)) return Error::kOutOfRange;
  if (((addr - base_) & (page_bytes_ - 1)) != 0) return Error::kNoSuchAllocation;
  if (!live_at(p)) return Error::kNoSuchAllocation;
  uint32_t b = start_record_[p];
  if (owner != kAnyOwner && blocks_[b].owner_id != owner) return Error::kNotOwner;
  release(b, true);
  return Error::kOk;
}

Error Allocator::free_all(uint32_t owner, uint32_t* freed_out) {
  if (!ready_) return Error::kNotInitialised;
  if (owner == kAnyOwner) return Error::kBadArgument;
  uint32_t n = 0;
  uint32_t s = owner_find(owner);
  if (s != 0) {
    while (owners_[s - 1].head != 0) {
      release(owners_[s - 1].head, false);
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
  while (owners_[s - 1].head != 0) release(owners_[s - 1].head, false);
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

// ---- lookup ----------------------------------------------------------------

void Allocator::fill_info(uint32_t b, AllocationInfo* out) const {
  const Block& B = blocks_[b];
  out->addr = base_ + (uint64_t(B.start) << page_shift_);
  out->bytes = uint64_t(B.size) << page_shift_;
  out->owner = B.owner_id;
  out->category = Category(B.category);
  out->poisoned = B.poisoned != 0;
}

Error Allocator::lookup(uint64_t addr, uint64_t len, AllocationInfo* out) const {
  if (!ready_) return Error::kNotInitialised;
  if (len == 0 || addr + len < addr) return Error::kBadArgument;
  uint32_t p;
  if (!to_page(addr, &p) || addr + len - base_ > total_bytes()) return Error::kOutOfRange;
  uint32_t q = live_at_or_before(p);
  if (q == kNone) return Error::kNotFound;
  uint32_t b = start_record_[q];
  const Block& B = blocks_[b];
  uint64_t end = base_ + (uint64_t(B.start + B.size) << page_shift_);
  if (addr + len > end) return Error::kNotFound;
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
  uint64_t p = 0;
  if (from > base_) {
    uint64_t off = from - base_;
    if (off >= total_bytes()) return Error::kNotFound;
    p = (off + page_bytes_ - 1) >> page_shift_;
  }
  uint32_t q = p < pages_ ? live_at_or_after(uint32_t(p)) : kNone;
  if (q == kNone) return Error::kNotFound;
  fill_info(start_record_[q], out);
  return Error::kOk;
}

// ---- ECC -------------------------------------------------------------------

uint32_t Allocator::retired_lower_bound(uint32_t page) const {
  uint32_t lo = 0, hi = retired_count_;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (retired_[mid] < page) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

bool Allocator::is_retired(uint64_t addr) const {
  uint32_t p;
  if (!ready_ || !to_page(addr, &p)) return false;
  uint32_t i = retired_lower_bound(p);
  return i < retired_count_ && retired_[i] == p;
}

// The block holding page: the live allocation below it from the bitmap, then
// a walk over what follows it. Between two live allocations lie only free
// blocks and retired pages, never two free blocks in a row, so the walk is
// at most 2 * max_retired_pages + 1 steps.
uint32_t Allocator::locate(uint32_t page) const {
  uint32_t q = live_at_or_before(page);
  uint32_t b = q == kNone ? 0 : start_record_[q];
  if (b != 0 && page < blocks_[b].start + blocks_[b].size) return b;
  uint32_t c = b != 0 ? blocks_[b].phys_next : kHead;
  while (c != 0 && page >= blocks_[c].start + blocks_[c].size) c = blocks_[c].phys_next;
  return c;
}

Error Allocator::record_correctable(uint64_t addr) {
  if (!ready_) return Error::kNotInitialised;
  uint32_t p;
  if (!to_page(addr, &p)) return Error::kOutOfRange;
  c_.correctable[(addr - base_) / stack_bytes_]++;
  return Error::kOk;
}

Error Allocator::retire_page(uint64_t addr, RetireOutcome* out) {
  if (!ready_) return Error::kNotInitialised;
  uint32_t p;
  if (!to_page(addr, &p)) return Error::kOutOfRange;
  uint32_t i = retired_lower_bound(p);
  if (i < retired_count_ && retired_[i] == p) return Error::kAlreadyRetired;
  if (retired_count_ >= limits_.max_retired_pages) return Error::kTooManyRetired;
  uint32_t b = locate(p);
  if (b == 0 || blocks_[b].state == kRetired) return Error::kInconsistent;
  RetireOutcome outcome;
  if (blocks_[b].state == kUsed) {
    if (!blocks_[b].poisoned) {
      blocks_[b].poisoned = 1;
      c_.poisoned++;
    }
    outcome.was_allocated = true;
    outcome.allocation_addr = base_ + (uint64_t(blocks_[b].start) << page_shift_);
    outcome.owner = blocks_[b].owner_id;
  } else {
    carve_page(b, p);
  }
  memmove(&retired_[i + 1], &retired_[i], sizeof(uint32_t) * (retired_count_ - i));
  retired_[i] = p;
  retired_count_++;
  c_.retired_per_stack[(addr - base_) / stack_bytes_]++;
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

// ---- statistics and audit --------------------------------------------------

void Allocator::stats(Stats* out) const {
  *out = Stats{};
  if (!ready_) return;
  out->total_bytes = total_bytes();
  out->used_bytes = c_.used_pages << page_shift_;
  out->free_bytes = c_.free_pages << page_shift_;
  out->retired_bytes = c_.retired_block_pages << page_shift_;
  uint32_t largest = 0;
  if (fl_bitmap_ != 0) {
    uint32_t fl = msb(fl_bitmap_);
    uint32_t sl = msb(sl_bitmap_[fl]);
    for (uint32_t b = heads_[fl][sl]; b != 0; b = blocks_[b].link_next)
      if (blocks_[b].size > largest) largest = blocks_[b].size;
  }
  out->largest_free_bytes = uint64_t(largest) << page_shift_;
  out->fragmentation =
      c_.free_pages == 0 ? 0.0 : 1.0 - double(largest) / double(c_.free_pages);
  out->live_allocations = c_.live;
  out->free_blocks = c_.free_blocks;
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
  for (uint32_t b = kHead; b != 0; b = blocks_[b].phys_next) {
    BlockInfo info;
    info.addr = base_ + (uint64_t(blocks_[b].start) << page_shift_);
    info.bytes = uint64_t(blocks_[b].size) << page_shift_;
    info.state = BlockState(blocks_[b].state);
    fn(info, ctx);
  }
}

Error Allocator::audit() const {
  if (!ready_) return Error::kNotInitialised;
  constexpr Error kBad = Error::kInconsistent;
  // Address list: contiguous cover of [0, pages), no free neighbours.
  uint64_t expect = 0, free_pages = 0, used_pages = 0, retired_pages = 0;
  uint32_t free_blocks = 0, used = 0, steps = 0, poisoned = 0, prev = 0;
  uint64_t cat_pages[kCategoryCount] = {};
  uint32_t cat_count[kCategoryCount] = {};
  for (uint32_t b = kHead; b != 0; prev = b, b = blocks_[b].phys_next) {
    const Block& B = blocks_[b];
    if (++steps > block_capacity_ || B.phys_prev != prev || B.start != expect || B.size == 0)
      return kBad;
    expect += B.size;
    if (B.state == kFree) {
      if (prev != 0 && blocks_[prev].state == kFree) return kBad;
      free_pages += B.size;
      free_blocks++;
    } else if (B.state == kUsed) {
      used_pages += B.size;
      used++;
      if (B.category >= kCategoryCount) return kBad;
      cat_pages[B.category] += B.size;
      cat_count[B.category]++;
      if (B.poisoned) {
        poisoned++;
        uint32_t i = retired_lower_bound(B.start);
        if (i >= retired_count_ || retired_[i] >= B.start + B.size) return kBad;
      }
      if (B.owner_slot == 0 || B.owner_slot > limits_.max_owners ||
          owners_[B.owner_slot - 1].id != B.owner_id)
        return kBad;
    } else if (B.state == kRetired) {
      uint32_t i = retired_lower_bound(B.start);
      if (B.size != 1 || i >= retired_count_ || retired_[i] != B.start) return kBad;
      retired_pages++;
    } else {
      return kBad;
    }
  }
  if (expect != pages_ || free_pages != c_.free_pages || free_blocks != c_.free_blocks ||
      used_pages != c_.used_pages || used != c_.live || retired_pages != c_.retired_block_pages ||
      poisoned != c_.poisoned || used + retired_pages + free_blocks > block_capacity_ - 1)
    return kBad;
  for (uint32_t c = 0; c < kCategoryCount; ++c)
    if (cat_pages[c] != c_.category_pages[c] || cat_count[c] != c_.category_count[c]) return kBad;
  // Free lists agree with the bitmaps and hold exactly the free blocks.
  uint64_t listed_pages = 0;
  uint32_t listed = 0;
  for (uint32_t fl = 0; fl < kFlCount; ++fl) {
    if (((fl_bitmap_ >> fl) & 1) != (sl_bitmap_[fl] != 0)) return kBad;
    for (uint32_t sl = 0; sl < kSlCount; ++sl) {
      if (((sl_bitmap_[fl] >> sl) & 1) != (heads_[fl][sl] != 0)) return kBad;
      uint32_t lp = 0;
      for (uint32_t b = heads_[fl][sl]; b != 0; lp = b, b = blocks_[b].link_next) {
        const Block& B = blocks_[b];
        uint32_t f, s;
        mapping(B.size, &f, &s);
        if (++listed > free_blocks || B.state != kFree || B.link_prev != lp || f != fl || s != sl)
          return kBad;
        listed_pages += B.size;
      }
    }
  }
  if (listed != free_blocks || listed_pages != free_pages) return kBad;
  // Live-start index: a bit exactly at each live allocation's first page,
  // the page table naming its record there, summary levels exact.
  uint64_t marked = 0;
  for (uint32_t i = 0; i < level_words_[0]; ++i)
    marked += uint64_t(__builtin_popcountll(live_bits_[i]));
  if (marked != c_.live) return kBad;
  if (pages_ % 64 != 0 && (live_bits_[level_words_[0] - 1] >> (pages_ % 64)) != 0) return kBad;
  for (uint32_t l = 1; l < levels_; ++l)
    for (uint32_t i = 0; i < level_words_[l - 1]; ++i) {
      bool has = (live_bits_[level_offset_[l] + (i >> 6)] >> (i & 63)) & 1;
      if (has != (live_bits_[level_offset_[l - 1] + i] != 0)) return kBad;
    }
  for (uint32_t b = kHead; b != 0; b = blocks_[b].phys_next)
    if (blocks_[b].state == kUsed && (!live_at(blocks_[b].start) || start_record_[blocks_[b].start] != b))
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
    for (uint32_t b = o.head; b != 0; lp = b, b = blocks_[b].link_next) {
      const Block& B = blocks_[b];
      if (++n > o.count || B.state != kUsed || B.owner_slot != s || B.link_prev != lp) return kBad;
      if (lookup(base_ + (uint64_t(B.start) << page_shift_), page_bytes_, nullptr) != Error::kOk)
        return kBad;
      pages += B.size;
      cp[B.category] += B.size;
    }
    if (n != o.count || pages != o.used_pages) return kBad;
    for (uint32_t c = 0; c < kCategoryCount; ++c)
      if (cp[c] != o.category_pages[c]) return kBad;
    owner_live += n;
  }
  if (owner_live != c_.live || owners != c_.owners) return kBad;
  // Retired pages: sorted, each in a retired block or a poisoned allocation.
  for (uint32_t i = 0; i < retired_count_; ++i) {
    if (i > 0 && retired_[i] <= retired_[i - 1]) return kBad;
    uint32_t b = locate(retired_[i]);
    if (b == 0) return kBad;
    const Block& B = blocks_[b];
    if (!(B.state == kRetired || (B.state == kUsed && B.poisoned))) return kBad;
  }
  return Error::kOk;
}

}  // namespace vtrn::hbm
