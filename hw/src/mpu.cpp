// The MPU snapshot, the check and the remap view. See vtrn/hw/mpu.h.
#include "vtrn/hw/mpu.h"

#include <string.h>
#include <sys/mman.h>

#include <algorithm>

#include "vtrn/ctrl_ring.h"

namespace vtrn::hw {

using hostif::load_acquire;

namespace {

constexpr uint64_t kPage = engine::kMpuTranslatePage;

bool aligned(uint64_t v) { return (v & (kPage - 1)) == 0; }

// The view's bytes [off, off + len) become inaccessible again.
bool protect_none(uint8_t* view, uint64_t off, uint64_t len) {
  return mmap(view + off, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) !=
         MAP_FAILED;
}

}  // namespace

Mpu::~Mpu() { clear_remap(); }

void Mpu::clear() {
  generation_ = 0;
  refused_ = false;
  alloc_count_ = poison_count_ = 0;
  hit_ = 0;
  fault_ = MpuFault{};
  unmap_view();
}

bool Mpu::set_remap(const RemapTarget& t) {
  clear_remap();
  generation_ = 0;  // the next refresh rebuilds with translation
  if (t.ram_fd < 0 || t.remap_size == 0 || t.remap_size > engine::kMaxRemapBytes || !aligned(t.remap_base) ||
      !aligned(t.remap_size) || t.remap_base > UINT64_MAX - t.remap_size)
    return false;
  // The remap window is device addresses of its own: never over RAM.
  if (t.remap_base < t.ram_base + t.ram_size && t.ram_base < t.remap_base + t.remap_size) return false;
  void* v = mmap(nullptr, t.remap_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (v == MAP_FAILED) return false;
  view_ = static_cast<uint8_t*>(v);
  remap_ = t;
  return true;
}

void Mpu::clear_remap() {
  if (view_ != nullptr) munmap(view_, remap_.remap_size);
  view_ = nullptr;
  mapped_count_ = 0;
  remap_ = RemapTarget{};
}

void Mpu::unmap_view() {
  if (view_ != nullptr && mapped_count_ > 0) (void)protect_none(view_, 0, remap_.remap_size);
  mapped_count_ = 0;
}

bool Mpu::build(const engine::MpuWindow* bank, uint32_t count) {
  alloc_count_ = poison_count_ = 0;
  const uint64_t remap_end = remap_.remap_base + remap_.remap_size;
  for (uint32_t i = 0; i < count; ++i) {
    const engine::MpuWindow& w = bank[i];
    if (!(w.flags & engine::kMpuValid)) continue;
    if ((w.flags & ~uint32_t(engine::kMpuKnownFlags)) || w.size == 0 || w.base > UINT64_MAX - w.size)
      return false;
    const bool translated = (w.flags & engine::kMpuTranslate) != 0;
    const Range r{w.base, w.base + w.size, translated ? w.phys : 0, w.tag, translated};
    if (w.flags & engine::kMpuPoison) {
      if (translated) return false;
      poison_[poison_count_++] = r;
      continue;
    }
    if (translated) {
      if (view_ == nullptr) continue;  // no remap window: its addresses reach nothing
      const uint64_t hbm_end = remap_.hbm_base + remap_.hbm_size;
      if (w.tag == 0 || !aligned(w.base) || !aligned(w.size) || !aligned(w.phys) || w.base < remap_.remap_base ||
          r.end > remap_end || w.phys < remap_.hbm_base || w.phys > hbm_end || w.size > hbm_end - w.phys)
        return false;
    } else if (view_ != nullptr && r.base < remap_end && r.end > remap_.remap_base) {
      return false;  // an identity window over the remap window: nothing is mapped there
    }
    alloc_[alloc_count_++] = r;
  }
  auto by_base = [](const Range& a, const Range& b) { return a.base < b.base; };
  std::sort(alloc_, alloc_ + alloc_count_, by_base);
  std::sort(poison_, poison_ + poison_count_, by_base);
  for (uint32_t i = 1; i < alloc_count_; ++i) {
    if (alloc_[i].base < alloc_[i - 1].end) return false;
  }
  return true;
}

bool Mpu::sync_view() {
  if (view_ == nullptr) return true;
  Range next[engine::kMpuWindows];
  uint32_t n = 0;
  for (uint32_t i = 0; i < alloc_count_; ++i) {
    if (alloc_[i].translated) next[n++] = alloc_[i];
  }
  auto same = [](const Range& a, const Range& b) { return a.base == b.base && a.end == b.end && a.phys == b.phys; };
  // Both lists are sorted by base and hold no overlaps: one merge walk.
  // First every mapping that goes away (or changes) becomes PROT_NONE...
  for (uint32_t i = 0, j = 0; i < mapped_count_; ++i) {
    while (j < n && next[j].base < mapped_[i].base) ++j;
    if (j < n && same(next[j], mapped_[i])) continue;
    if (!protect_none(view_, mapped_[i].base - remap_.remap_base, mapped_[i].end - mapped_[i].base)) return false;
  }
  // ...then every new one is mapped onto its pages.
  for (uint32_t j = 0, i = 0; j < n; ++j) {
    while (i < mapped_count_ && mapped_[i].base < next[j].base) ++i;
    if (i < mapped_count_ && same(mapped_[i], next[j])) continue;
    void* at = view_ + (next[j].base - remap_.remap_base);
    void* m = mmap(at, next[j].end - next[j].base, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, remap_.ram_fd,
                   off_t(next[j].phys - remap_.ram_base));
    if (m == MAP_FAILED) return false;
  }
  memcpy(mapped_, next, n * sizeof(Range));
  mapped_count_ = n;
  return true;
}

uint32_t Mpu::refresh(const engine::MpuBlock* block) {
  uint32_t gen = load_acquire(&block->header.generation);
  if (gen == generation_) return generation_;
  for (;;) {
    if (gen == 0) {
      clear();
      return 0;
    }
    const uint32_t b = gen & 1;
    uint32_t count = __atomic_load_n(&block->bank_count[b], __ATOMIC_ACQUIRE);
    if (count > engine::kMpuWindows) count = engine::kMpuWindows + 1;
    const uint32_t n = count > engine::kMpuWindows ? 0 : count;
    memcpy(copy_, block->bank[b], n * sizeof(engine::MpuWindow));
    // Acquire: the copy above is complete before we look at the generation
    // again; a fw that started rewriting bank b has moved it by 2.
    const uint32_t again = load_acquire(&block->header.generation);
    if (uint32_t(again - gen) >= 2) {
      gen = again;
      continue;
    }
    refused_ = count > engine::kMpuWindows || !build(copy_, n);
    if (refused_) alloc_count_ = poison_count_ = 0;
    if (!sync_view()) {
      // A mapping the host refused: nothing translated is trusted.
      refused_ = true;
      alloc_count_ = poison_count_ = 0;
      unmap_view();
    }
    hit_ = 0;
    generation_ = gen;
    return generation_;
  }
}

dma::Status Mpu::check(uint64_t addr, uint64_t length) const {
  auto refuse = [&](dma::Status s) {
    fault_ = MpuFault{addr, length, s};
    return s;
  };
  if (length == 0 || addr > UINT64_MAX - length) return refuse(dma::kErrNotAllocated);
  const uint64_t end = addr + length;
  // MPU off: HBM ranges are checked against HBM only, and the remap view
  // has nothing mapped.
  if (generation_ == 0) return in_remap(addr, end) ? refuse(dma::kErrNotAllocated) : dma::kOk;
  // Poison first: a retired page inside a live allocation is an ECC error,
  // not a missing allocation. Windows sorted by base; any overlap counts.
  for (uint32_t i = 0; i < poison_count_ && poison_[i].base < end; ++i) {
    if (poison_[i].end > addr) return refuse(dma::kErrEcc);
  }
  // The window that held the last range checked usually holds this one
  // too (a descriptor stream walks through one buffer).
  if (hit_ < alloc_count_ && addr >= alloc_[hit_].base && end <= alloc_[hit_].end) return dma::kOk;
  // The last window starting at or below addr is the only candidate.
  const Range* first = alloc_;
  const Range* last = alloc_ + alloc_count_;
  const Range* it = std::upper_bound(first, last, addr, [](uint64_t a, const Range& r) { return a < r.base; });
  if (it == first) return refuse(dma::kErrNotAllocated);
  --it;
  if (addr >= it->end) return refuse(dma::kErrNotAllocated);
  // One allocation's extents: adjacent translated windows of one tag.
  for (const Range* w = it; end > w->end; ++w) {
    const Range* n = w + 1;
    if (!w->translated || n == last || !n->translated || n->base != w->end || n->tag != w->tag)
      return refuse(dma::kErrNotAllocated);
  }
  hit_ = uint32_t(it - first);
  return dma::kOk;
}

}  // namespace vtrn::hw
