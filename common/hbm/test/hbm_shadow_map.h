// Checked shadow page tables for the HBM allocator's tests: a
// vtrn::hbm::Mapper that records each map() as a range and refuses what
// real page tables would make wrong. Not a model of the firmware's MMU (no
// granules, no TLB): it checks the allocator's side of the contract.
//
// What it enforces, counting every breach in `violations` (a test asserts
// it stays 0): map() ranges are page-aligned, inside the remap window, and
// overlap no mapped device range (each device page maps exactly one
// physical page) and no mapped physical range (no physical page behind two
// device pages), and the physical range lies inside the HBM; unmap() covers
// exactly whole ranges mapped before, in order, from its first byte. A
// test can make the n-th map() fail, as full page tables would.
#pragma once

#include <stdint.h>

#include <iterator>
#include <map>

#include "vtrn/hbm.h"

namespace vtrn::hbm::test {

struct ShadowMap {
  uint64_t page = 4096;
  uint64_t hbm_base = 0, hbm_bytes = 0;
  uint64_t remap_base = 0, remap_bytes = 0;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> by_va;  // va -> (pa, bytes)
  std::map<uint64_t, uint64_t> by_pa;                       // pa -> bytes
  uint64_t mapped_bytes = 0;
  uint64_t violations = 0;
  uint64_t maps = 0, unmaps = 0;
  int64_t fail_map_at = -1;  // the maps-th call (0-based) returns false

  Mapper mapper() { return Mapper{this, &ShadowMap::map_fn, &ShadowMap::unmap_fn}; }

  static bool overlaps(const std::map<uint64_t, uint64_t>& m, uint64_t a, uint64_t n) {
    auto it = m.lower_bound(a);
    if (it != m.end() && it->first < a + n) return true;
    if (it != m.begin() && std::prev(it)->first + std::prev(it)->second > a) return true;
    return false;
  }
  bool va_overlaps(uint64_t a, uint64_t n) const {
    auto it = by_va.lower_bound(a);
    if (it != by_va.end() && it->first < a + n) return true;
    if (it != by_va.begin() && std::prev(it)->first + std::prev(it)->second.second > a)
      return true;
    return false;
  }

  static bool map_fn(void* ctx, uint64_t va, uint64_t pa, uint64_t bytes) {
    auto* s = static_cast<ShadowMap*>(ctx);
    if (s->fail_map_at >= 0 && int64_t(s->maps) == s->fail_map_at) {
      s->maps++;
      return false;
    }
    s->maps++;
    if (bytes == 0 || va % s->page || pa % s->page || bytes % s->page || va < s->remap_base ||
        va + bytes > s->remap_base + s->remap_bytes || pa < s->hbm_base ||
        pa + bytes > s->hbm_base + s->hbm_bytes || s->va_overlaps(va, bytes) ||
        overlaps(s->by_pa, pa, bytes)) {
      s->violations++;
      return true;
    }
    s->by_va[va] = {pa, bytes};
    s->by_pa[pa] = bytes;
    s->mapped_bytes += bytes;
    return true;
  }

  static void unmap_fn(void* ctx, uint64_t va, uint64_t bytes) {
    auto* s = static_cast<ShadowMap*>(ctx);
    s->unmaps++;
    uint64_t at = va, left = bytes;
    while (left > 0) {
      auto it = s->by_va.find(at);
      if (it == s->by_va.end() || it->second.second > left) {
        s->violations++;
        return;
      }
      uint64_t n = it->second.second;
      s->by_pa.erase(it->second.first);
      s->by_va.erase(it);
      s->mapped_bytes -= n;
      at += n;
      left -= n;
    }
  }

  // The physical address the shadow tables give a device address, or ~0.
  uint64_t walk(uint64_t va) const {
    auto it = by_va.upper_bound(va);
    if (it == by_va.begin()) return ~0ull;
    --it;
    if (va >= it->first + it->second.second) return ~0ull;
    return it->second.first + (va - it->first);
  }
};

}  // namespace vtrn::hbm::test
