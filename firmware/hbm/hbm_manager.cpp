// The HBM service logic: owner mapping, access check, ECC model and the
// vtrn.ctrl handlers. See fw/hbm_manager.h.
//
// Every response body comes from the request's protobuf-c arena (it must
// outlive packing); an arena that runs dry is an internal error naming the
// body, never a half-filled message.
#include "fw/hbm_manager.h"

#include <stdio.h>
#include <string.h>

namespace fw::hbm {
namespace {

using vtrn::hbm::Allocator;

using vtrn::Code;
using vtrn::Error;

const Route kRoutes[] = {
    route<&Manager::serve_alloc>(VTRN__CTRL__REQUEST__BODY_HBM_ALLOC,
                                 VTRN__CTRL__RESPONSE__BODY_HBM_ALLOC),
    route<&Manager::serve_free>(VTRN__CTRL__REQUEST__BODY_HBM_FREE,
                                VTRN__CTRL__RESPONSE__BODY_HBM_FREE),
    route<&Manager::serve_free_owner>(VTRN__CTRL__REQUEST__BODY_HBM_FREE_OWNER,
                                      VTRN__CTRL__RESPONSE__BODY_HBM_FREE_OWNER),
    route<&Manager::serve_stats>(VTRN__CTRL__REQUEST__BODY_HBM_STATS,
                                 VTRN__CTRL__RESPONSE__BODY_HBM_STATS),
    route<&Manager::serve_list>(VTRN__CTRL__REQUEST__BODY_HBM_LIST,
                                VTRN__CTRL__RESPONSE__BODY_HBM_LIST),
    route<&Manager::serve_retired>(VTRN__CTRL__REQUEST__BODY_HBM_RETIRED,
                                   VTRN__CTRL__RESPONSE__BODY_HBM_RETIRED),
    route<&Manager::serve_import>(VTRN__CTRL__REQUEST__BODY_HBM_IMPORT_RETIRED,
                                  VTRN__CTRL__RESPONSE__BODY_HBM_IMPORT_RETIRED),
    route<&Manager::serve_inject>(VTRN__CTRL__REQUEST__BODY_HBM_INJECT_ECC,
                                  VTRN__CTRL__RESPONSE__BODY_HBM_INJECT_ECC),
};

Error bad_owner(const char* field, uint64_t owner) {
  return Error(Code::kInvalidArgument, "%s: 0x%llx is not a firmware, client or job owner", field,
               (unsigned long long)owner);
}

}  // namespace

bool owner_key(uint64_t owner, uint32_t* key) {
  const uint32_t kind = uint32_t(owner >> 32);
  const uint32_t id = uint32_t(owner);
  if (kind == kOwnerKindFirmware) {
    if (id != 0) return false;
    *key = 0;
    return true;
  }
  if (kind != kOwnerKindClient && kind != kOwnerKindJob && kind != kOwnerKindTenant) return false;
  if (id >= (1u << kOwnerIdBits)) return false;
  *key = (kind << kOwnerIdBits) | id;
  return true;
}

uint64_t owner_from_key(uint32_t key) {
  return (uint64_t(key >> kOwnerIdBits) << 32) | (key & ((1u << kOwnerIdBits) - 1));
}

std::span<const Route> Manager::routes() const { return kRoutes; }

Error Manager::ready() const {
  if (!ready_) return Error(Code::kNotReady, "hbm: the HBM manager is not initialised");
  return Error();
}

size_t Manager::arena_bytes(const vtrn::board::HbmGeometry& g, uint64_t base,
                            const Remap& remap) {
  vtrn::hbm::Config c;
  c.geometry = g;
  c.base = base;
  c.limits = kLimits;
  c.mapper = remap.mapper;
  c.remap_base = remap.base;
  c.remap_bytes = remap.bytes;
  return Allocator::arena_bytes(c);
}

Status Manager::init(const vtrn::board::HbmGeometry& g, uint64_t base, void* arena,
                     size_t arena_size, const Remap& remap) {
  vtrn::hbm::Config c;
  c.geometry = g;
  c.base = base;
  c.limits = kLimits;
  c.mapper = remap.mapper;
  c.remap_base = remap.base;
  c.remap_bytes = remap.bytes;
  ready_ = false;
  const Status s = a_.init(c, arena, arena_size);
  if (s != Status::kOk) return s;
  geometry_ = g;
  base_ = base;
  dma_unchecked_ = false;
  ecc_uncorrectable_ = 0;
  ecc_head_ = ecc_count_ = 0;
  ready_ = true;
  return Status::kOk;
}

Status Manager::alloc(uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align,
                      uint64_t* addr) {
  if (!ready_) return Status::kNotInitialised;
  uint32_t key = 0;
  if (!owner_key(owner, &key) || category >= vtrn::hbm::kCategoryCount)
    return Status::kBadArgument;
  const Status s = a_.allocate(key, vtrn::hbm::Category(category), bytes, align, addr);
  if (s != Status::kOk) return s;
  ++layout_generation_;
  uint64_t granted = 0;
  scrub_new(*addr, &granted);
  return s;
}

void Manager::scrub_new(uint64_t addr, uint64_t* bytes) const {
  vtrn::hbm::AllocationInfo info;
  *bytes = a_.lookup(addr, 1, &info) == Status::kOk ? info.bytes : 0;
  if (scrub_ != nullptr && *bytes != 0) scrub_(addr, *bytes);
}

Status Manager::free(uint64_t owner, uint64_t addr) {
  if (!ready_) return Status::kNotInitialised;
  uint32_t key = 0;
  if (!owner_key(owner, &key)) return Status::kBadArgument;
  if (pinned(owner)) return Status::kPinned;
  const Status s = a_.free(addr, key);
  if (s == Status::kOk) ++layout_generation_;
  return s;
}

Status Manager::free_owner(uint64_t owner, uint64_t* bytes, uint32_t* allocations) {
  *bytes = 0;
  if (allocations != nullptr) *allocations = 0;
  if (!ready_) return Status::kNotInitialised;
  uint32_t key = 0;
  if (!owner_key(owner, &key)) return Status::kBadArgument;
  if (pinned(owner)) return Status::kPinned;
  vtrn::hbm::OwnerUsage u;
  if (a_.owner_usage(key, &u) != Status::kOk) return Status::kOk;  // unknown owner: nothing held
  uint32_t n = 0;
  const Status s = a_.free_all(key, &n);
  if (s != Status::kOk) return s;
  ++layout_generation_;
  // Forget the quota too: owner slots are a bounded table and this owner's
  // lifespan is over (a reconnecting client gets a new id).
  (void)a_.remove_owner(key);
  if (allocations != nullptr) *allocations = n;
  *bytes = u.used_bytes;
  return Status::kOk;
}

Access Manager::check(uint64_t addr, uint64_t len) const {
  if (!ready_) return Access::kNotAllocated;
  const Status s = a_.check_range(addr, len);
  if (s == Status::kOk) return Access::kOk;
  if (s == Status::kPoisoned) return Access::kEccError;
  return check_unallocated(addr, len);
}

Access Manager::check(uint64_t addr, uint64_t len, uint64_t owner) const {
  if (!ready_) return Access::kNotAllocated;
  vtrn::hbm::AllocationInfo info;
  if (a_.lookup(addr, len, &info) != Status::kOk) return check_unallocated(addr, len);
  if (owner_from_key(info.owner) != owner) return Access::kNotOwner;
  return info.poisoned ? Access::kEccError : Access::kOk;
}

Access Manager::check_unallocated(uint64_t addr, uint64_t len) const {
  // Not inside one allocation. A range over a retired page is still an ECC
  // matter (the page is bad whoever asks), so say so; the scan is bounded
  // by the range's pages, and only refused accesses pay for it.
  if (len == 0 || addr < base_ || addr - base_ >= a_.total_bytes()) return Access::kNotAllocated;
  const uint64_t page = a_.page_bytes();
  const uint64_t end_off = (addr - base_) + len > a_.total_bytes() ? a_.total_bytes()
                                                                   : (addr - base_) + len;
  for (uint64_t off = (addr - base_) & ~(page - 1); off < end_off; off += page) {
    if (a_.is_retired(base_ + off)) return Access::kEccError;
  }
  return Access::kNotAllocated;
}

void Manager::push_ecc(const EccRecord& r) {
  if (ecc_count_ == kEccQueue) {  // keep the newest: drop the oldest
    ecc_head_ = (ecc_head_ + 1) % kEccQueue;
    --ecc_count_;
  }
  ecc_[(ecc_head_ + ecc_count_) % kEccQueue] = r;
  ++ecc_count_;
}

bool Manager::take_ecc(EccRecord* out) {
  if (ecc_count_ == 0) return false;
  *out = ecc_[ecc_head_];
  ecc_head_ = (ecc_head_ + 1) % kEccQueue;
  --ecc_count_;
  return true;
}

Status Manager::inject_ecc(uint64_t addr, bool uncorrectable, EccRecord* out) {
  EccRecord r;
  r.addr = addr;
  r.uncorrectable = uncorrectable;
  if (!ready_) {
    r.result = Status::kNotInitialised;
    *out = r;
    return r.result;
  }
  // A remap-window address stands for the physical page behind it (the
  // page is what goes bad); an unallocated one has none.
  uint64_t phys = addr;
  if (a_.in_remap_window(addr)) {
    r.result = a_.translate(addr, &phys);
    if (r.result != Status::kOk) {
      *out = r;
      return r.result;
    }
  }
  if (phys < base_ || phys - base_ >= a_.total_bytes()) {
    r.result = Status::kOutOfRange;
    *out = r;
    return r.result;
  }
  const uint64_t off = phys - base_;
  r.page_offset = off & ~(a_.page_bytes() - 1);
  r.stack = uint32_t(off / geometry_.bytes_per_stack);
  if (!uncorrectable) {
    r.result = a_.record_correctable(addr);
  } else {
    ++ecc_uncorrectable_;
    vtrn::hbm::RetireOutcome o;
    r.result = a_.retire_page(addr, &o);
    ++layout_generation_;
    r.page_retired = r.result == Status::kOk;
    if (r.page_retired && o.was_allocated) {
      r.allocation_poisoned = true;
      r.allocation_addr = o.allocation_addr;
      r.owner = owner_from_key(o.owner);
    } else if (r.result == Status::kAlreadyRetired) {
      // Still tell the caller which allocation (if any) holds the bad page.
      vtrn::hbm::AllocationInfo info;
      if (a_.lookup(addr & ~(a_.page_bytes() - 1), a_.page_bytes(), &info) == Status::kOk) {
        r.allocation_poisoned = info.poisoned;
        r.allocation_addr = info.addr;
        r.owner = owner_from_key(info.owner);
      }
    }
  }
  vtrn::hbm::Stats st;
  a_.stats(&st);
  if (r.stack < vtrn::hbm::kMaxStacks) r.correctable_on_stack = st.correctable_errors[r.stack];
  r.retired_pages = st.retired_pages;
  push_ecc(r);
  *out = r;
  return r.result;
}

Totals Manager::totals() const {
  Totals t;
  if (!ready_) return t;
  vtrn::hbm::Stats st;
  a_.stats(&st);
  t.total_bytes = st.total_bytes;
  t.used_bytes = st.used_bytes;
  t.alloc_failures = st.fail_no_memory + st.fail_quota + st.fail_bad_argument + st.fail_no_metadata;
  t.retired_pages = st.retired_pages;
  for (uint32_t s = 0; s < st.stacks && s < vtrn::hbm::kMaxStacks; ++s)
    t.ecc_correctable += st.correctable_errors[s];
  t.ecc_uncorrectable = ecc_uncorrectable_;
  return t;
}

void fill_ecc_event(const EccRecord& r, Vtrn__Ctrl__HbmEccEvent* ev) {
  ev->addr = r.addr;
  ev->page_offset = r.page_offset;
  ev->stack = r.stack;
  ev->uncorrectable = r.uncorrectable;
  ev->page_retired = r.page_retired;
  ev->allocation_poisoned = r.allocation_poisoned;
  ev->allocation_addr = r.allocation_addr;
  ev->owner = r.owner;
  ev->correctable_on_stack = r.correctable_on_stack;
  ev->retired_pages = r.retired_pages;
}

vtrn::dma::Status DmaPolicy::check(uint64_t addr, uint64_t length) const {
  switch (m_->check(addr, length)) {
    case Access::kOk: return vtrn::dma::kOk;
    case Access::kEccError: return vtrn::dma::kErrEcc;
    case Access::kNotAllocated:
    case Access::kNotOwner: break;  // the owner-less check never says kNotOwner
  }
  // Unchecked DMA reaches unallocated HBM, never an unallocated part of the
  // remap window: nothing is mapped there and the copy would fault.
  const bool remap = m_->allocator().in_remap_window(addr);
  return m_->dma_unchecked() && !remap ? vtrn::dma::kOk : vtrn::dma::kErrNotAllocated;
}

Error Manager::serve_alloc(const Vtrn__Ctrl__HbmAllocRequest& r, Vtrn__Ctrl__HbmAllocResponse& body,
                           Call&) {
  uint32_t key = 0;
  if (!owner_key(r.owner, &key)) return bad_owner("hbm_alloc.owner", r.owner);
  if (r.category >= vtrn::hbm::kCategoryCount) {
    return Error(Code::kInvalidArgument, "hbm_alloc.category: %u, must be 0..%u",
                 unsigned(r.category), unsigned(vtrn::hbm::kCategoryCount - 1));
  }
  Status s = Status::kOk;
  if (r.set_quota) s = a_.set_quota(key, r.quota_bytes);
  uint64_t addr = 0;
  if (s == Status::kOk) s = a_.allocate(key, vtrn::hbm::Category(r.category), r.bytes, r.align, &addr);
  if (s == Status::kOk) ++layout_generation_;
  body.result = uint32_t(s);
  if (s == Status::kOk) {
    scrub_new(addr, &body.bytes);
    body.addr = addr;
    // Whose physical pages these are, for the host's ownership checks.
    uint32_t n = 0;
    if (a_.in_remap_window(addr) &&
        a_.extents(addr, extents_, vtrn::hbm::kMaxExtents, &n) == Status::kOk) {
      for (uint32_t i = 0; i < n; ++i) {
        extent_addrs_[i] = extents_[i].phys_addr;
        extent_bytes_[i] = extents_[i].bytes;
      }
      body.n_extent_addrs = n;
      body.extent_addrs = extent_addrs_;
      body.n_extent_bytes = n;
      body.extent_bytes = extent_bytes_;
    }
  }
  vtrn::hbm::OwnerUsage u;
  if (a_.owner_usage(key, &u) == Status::kOk) {
    body.owner_used_bytes = u.used_bytes;
    body.owner_quota_bytes = u.quota;
  } else {
    body.owner_quota_bytes = vtrn::hbm::kNoQuota;
  }
  return Error();
}

Error Manager::serve_free(const Vtrn__Ctrl__HbmFreeRequest& r, Vtrn__Ctrl__HbmFreeResponse& body,
                          Call&) {
  uint32_t key = vtrn::hbm::kAnyOwner;
  if (!r.any_owner && !owner_key(r.owner, &key)) return bad_owner("hbm_free.owner", r.owner);
  vtrn::hbm::AllocationInfo info;
  const bool known = a_.lookup(r.addr, 1, &info) == Status::kOk && info.addr == r.addr;
  // The pin holds whoever asks (any_owner included): the job still runs on it.
  Status s = known && pinned(owner_from_key(info.owner)) ? Status::kPinned : Status::kOk;
  if (s == Status::kOk) s = a_.free(r.addr, key);
  if (s == Status::kOk) ++layout_generation_;
  body.result = uint32_t(s);
  if (known) {
    body.bytes = info.bytes;
    body.owner = owner_from_key(info.owner);
  }
  return Error();
}

Error Manager::serve_free_owner(const Vtrn__Ctrl__HbmFreeOwnerRequest& r,
                                Vtrn__Ctrl__HbmFreeOwnerResponse& body, Call&) {
  uint32_t key = 0;
  if (!owner_key(r.owner, &key)) return bad_owner("hbm_free_owner.owner", r.owner);
  uint32_t n = 0;
  uint64_t bytes = 0;
  body.result = uint32_t(free_owner(r.owner, &bytes, &n));
  body.bytes = bytes;
  body.allocations = n;
  return Error();
}

Error Manager::serve_stats(const Vtrn__Ctrl__HbmStatsRequest&, Vtrn__Ctrl__HbmStatsResponse& body,
                           Call& c) {
  Vtrn__Types__HbmStats* b = c.make(vtrn__types__hbm_stats__init);
  const uint32_t stacks = geometry_.stacks < vtrn::hbm::kMaxStacks ? geometry_.stacks
                                                                    : vtrn::hbm::kMaxStacks;
  uint64_t* cat_bytes = c.make_array<uint64_t>(vtrn::hbm::kCategoryCount);
  uint32_t* cat_count = c.make_array<uint32_t>(vtrn::hbm::kCategoryCount);
  uint64_t* corr = c.make_array<uint64_t>(stacks);
  uint32_t* ret = c.make_array<uint32_t>(stacks);
  if (b == nullptr || cat_bytes == nullptr || cat_count == nullptr || corr == nullptr || ret == nullptr)
    return c.no_memory("hbm_stats");
  body.stats = b;
  vtrn::hbm::Stats st;
  a_.stats(&st);
  b->hbm_base = base_;
  b->page_bytes = a_.page_bytes();
  b->stacks = geometry_.stacks;
  b->bytes_per_stack = geometry_.bytes_per_stack;
  b->channels = geometry_.channels;
  b->total_bytes = st.total_bytes;
  b->used_bytes = st.used_bytes;
  b->free_bytes = st.free_bytes;
  b->retired_bytes = st.retired_bytes;
  b->largest_free_bytes = st.largest_free_bytes;
  b->fragmentation = st.fragmentation;
  b->live_allocations = st.live_allocations;
  b->free_blocks = st.free_blocks;
  b->owners = st.owners;
  b->retired_pages = st.retired_pages;
  b->poisoned_allocations = st.poisoned_allocations;
  b->allocs = st.allocs;
  b->frees = st.frees;
  b->fail_no_memory = st.fail_no_memory;
  b->fail_quota = st.fail_quota;
  b->fail_bad_argument = st.fail_bad_argument;
  b->fail_no_metadata = st.fail_no_metadata;
  for (uint32_t i = 0; i < vtrn::hbm::kCategoryCount; ++i) {
    cat_bytes[i] = st.category_bytes[i];
    cat_count[i] = st.category_allocations[i];
  }
  b->n_category_bytes = vtrn::hbm::kCategoryCount;
  b->category_bytes = cat_bytes;
  b->n_category_allocations = vtrn::hbm::kCategoryCount;
  b->category_allocations = cat_count;
  for (uint32_t s = 0; s < stacks; ++s) {
    corr[s] = st.correctable_errors[s];
    ret[s] = st.retired_per_stack[s];
  }
  b->n_correctable_per_stack = stacks;
  b->correctable_per_stack = corr;
  b->n_retired_per_stack = stacks;
  b->retired_per_stack = ret;
  b->ecc_uncorrectable = ecc_uncorrectable_;
  b->max_allocations = kLimits.max_allocations;
  b->max_owners = kLimits.max_owners;
  b->max_retired_pages = kLimits.max_retired_pages;
  b->largest_contiguous_free_bytes = st.largest_contiguous_free_bytes;
  b->contiguous_fragmentation = st.contiguous_fragmentation;
  b->remap_base = st.remap_bytes != 0 ? a_.remap_base() : 0;
  b->remap_bytes = st.remap_bytes;
  b->remap_used_bytes = st.remap_used_bytes;
  b->stitched_allocations = st.stitched_allocations;
  b->stitched_extents = st.stitched_extents;
  b->stitches = st.stitches;
  b->stitch_extents_max = st.stitch_extents_max;
  b->max_extents = kLimits.max_extents;
  return Error();
}

Error Manager::serve_list(const Vtrn__Ctrl__HbmListRequest& r, Vtrn__Ctrl__HbmListResponse& b,
                          Call& c) {
  if (r.max == 0 || r.max > kMaxListEntries) {
    return Error(Code::kInvalidArgument, "hbm_list.max: %u, must be 1..%u", unsigned(r.max),
                 unsigned(kMaxListEntries));
  }
  auto* entries = c.make_array<Vtrn__Ctrl__HbmAllocation>(r.max);
  auto* ptrs = c.make_array<Vtrn__Ctrl__HbmAllocation*>(r.max);
  if (entries == nullptr || ptrs == nullptr) return c.no_memory("hbm_list");
  uint64_t from = r.from_addr;
  uint32_t n = 0;
  vtrn::hbm::AllocationInfo info;
  while (n < r.max && a_.next_allocation(from, &info) == Status::kOk) {
    Vtrn__Ctrl__HbmAllocation* e = &entries[n];
    vtrn__ctrl__hbm_allocation__init(e);
    e->addr = info.addr;
    e->bytes = info.bytes;
    e->owner = owner_from_key(info.owner);
    e->category = uint32_t(info.category);
    e->poisoned = info.poisoned;
    e->stitched = info.stitched;
    e->extents = info.extents;
    ptrs[n++] = e;
    from = info.addr + info.bytes;
  }
  b.n_allocations = n;
  b.allocations = ptrs;
  // One more probe says whether another page exists (stateless paging).
  if (n == r.max && a_.next_allocation(from, &info) == Status::kOk) {
    b.more = true;
    b.next_addr = from;
  }
  return Error();
}

Error Manager::serve_retired(const Vtrn__Ctrl__HbmRetiredRequest&,
                             Vtrn__Ctrl__HbmRetiredResponse& b, Call& c) {
  uint64_t* pages = c.make_array<uint64_t>(kLimits.max_retired_pages);
  if (pages == nullptr) return c.no_memory("hbm_retired");
  uint32_t n = 0;
  if (a_.export_retired(pages, kLimits.max_retired_pages, &n) != Status::kOk) n = 0;
  for (uint32_t i = 0; i < n; ++i) pages[i] -= base_;
  b.n_offsets = n;
  b.offsets = pages;
  return Error();
}

Error Manager::serve_import(const Vtrn__Ctrl__HbmImportRetiredRequest& r,
                            Vtrn__Ctrl__HbmImportRetiredResponse& b, Call& c) {
  if (r.n_offsets > kLimits.max_retired_pages) {
    return Error(Code::kInvalidArgument, "hbm_import_retired.offsets: %zu entries, at most %u",
                 r.n_offsets, unsigned(kLimits.max_retired_pages));
  }
  uint64_t* pages = c.make_array<uint64_t>(r.n_offsets);
  if (r.n_offsets > 0 && pages == nullptr) return c.no_memory("hbm_import_retired");
  // Offsets are turned into addresses here; the allocator validates each
  // (range, page alignment) before it applies any.
  for (size_t i = 0; i < r.n_offsets; ++i) {
    const uint64_t off = r.offsets[i];
    if (off >= a_.total_bytes()) {
      return Error(Code::kInvalidArgument, "hbm_import_retired.offsets[%zu]: 0x%llx is outside HBM",
                   i, (unsigned long long)off);
    }
    pages[i] = base_ + off;
  }
  const Status s = a_.import_retired(pages, uint32_t(r.n_offsets));
  if (s == Status::kOk) ++layout_generation_;
  dma_unchecked_ = r.dma_unchecked;
  b.result = uint32_t(s);
  vtrn::hbm::Stats st;
  a_.stats(&st);
  b.retired_pages = st.retired_pages;
  return Error();
}

Error Manager::serve_inject(const Vtrn__Ctrl__HbmInjectEccRequest& r,
                            Vtrn__Ctrl__HbmInjectEccResponse& b, Call& c) {
  auto* ev = c.make(vtrn__ctrl__hbm_ecc_event__init);
  if (ev == nullptr) return c.no_memory("hbm_inject_ecc");
  EccRecord rec;
  (void)inject_ecc(r.addr, r.uncorrectable, &rec);
  b.result = uint32_t(rec.result);
  fill_ecc_event(rec, ev);
  b.event = ev;
  return Error();
}

}  // namespace fw::hbm
