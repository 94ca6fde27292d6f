// Bus-0 enumeration, BAR sizing and BAR assignment.
//
// Three passes, so nothing decodes an address until every BAR has a place:
//  1. probe: find functions (function 0 first, 1..7 only for multi-function
//     devices), turn off their decode and bus mastering (a warm-reset chip
//     may still have the previous boot's values), size their BARs;
//  2. place: memory BARs largest first, each at the lowest naturally aligned
//     address left in its window (largest-first keeps natural alignment from
//     wasting space: every later, smaller BAR fits the alignment of the
//     earlier ones), then write the BAR registers;
//  3. enable Memory Space and Bus Master.
// A failure in pass 1 or 2 returns before pass 3, so no function decodes a
// half-assigned address map.
#include "hal/pcie.h"

namespace hal::pcie {
namespace {

constexpr uint16_t kBarOffset = offsetof(Type0Header, bar);
constexpr uint16_t kCommand = offsetof(Type0Header, command);
constexpr uint64_t k4GiB = 1ull << 32;

uint16_t bar_offset(uint32_t index) { return static_cast<uint16_t>(kBarOffset + 4 * index); }

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool window_valid(const Window& w, bool below_4g) {
  if (!w.present())
    return true;
  if (w.cpu_base > ~0ull - (w.size - 1) || w.pci_base > ~0ull - (w.size - 1))
    return false;
  return !below_4g || w.pci_base + (w.size - 1) < k4GiB;
}

// Bump allocator over one window, in PCI address space.
struct Cursor {
  const Window* window;
  uint64_t next;  // first free PCI address
  bool window_full;
};

bool allocate(Cursor* c, uint64_t size, uint64_t* pci) {
  const Window& w = *c->window;
  if (!w.present())
    return false;
  const uint64_t end = w.pci_base + (w.size - 1);  // inclusive, cannot overflow (validated)
  if (c->window_full || c->next > end)
    return false;
  const uint64_t aligned = (c->next + (size - 1)) & ~(size - 1);
  if (aligned < c->next || aligned > end || size - 1 > end - aligned)
    return false;
  *pci = aligned;
  // aligned + size - 1 <= end, so this wraps only for a window that ends at
  // the very top of the 64-bit space; then nothing is left.
  c->next = aligned + size;
  if (c->next == 0) {
    c->next = end;
    c->window_full = true;
  }
  return true;
}

struct Pending {
  uint8_t function;
  uint8_t bar;
};

}  // namespace

Status size_bar(const Ecam& ecam, const Bdf& bdf, uint32_t index, Bar* out) {
  if (out == nullptr || index >= kBarCount)
    return Status::kInvalidArgument;
  *out = Bar{};
  const uint16_t off = bar_offset(index);
  const uint16_t cmd = ecam.read16(bdf, kCommand);
  ecam.write16(bdf, kCommand, cmd & ~(kCommandIoSpace | kCommandMemorySpace));

  Status st = Status::kOk;
  const uint32_t orig = ecam.read32(bdf, off);
  if (orig & kBarSpaceIo) {
    ecam.write32(bdf, off, ~0u);
    uint32_t mask = ecam.read32(bdf, off) & ~3u;
    ecam.write32(bdf, off, orig);
    if (mask != 0) {
      if ((mask & 0xFFFF0000u) == 0)
        mask |= 0xFFFF0000u;  // 16-bit I/O decoder: upper half reads as zero
      out->size = static_cast<uint32_t>(~mask + 1);
      out->flags = kBarIo | kBarImplemented;
      if (!is_pow2(out->size))
        st = Status::kBadHardware;
    }
  } else if ((orig & kBarMemTypeMask) == kBarMemType64) {
    if (index + 1 >= kBarCount) {
      st = Status::kBadHardware;  // the upper half would be past the last BAR
    } else {
      const uint32_t orig_hi = ecam.read32(bdf, off + 4);
      ecam.write32(bdf, off, ~0u);
      ecam.write32(bdf, off + 4, ~0u);
      const uint64_t lo = ecam.read32(bdf, off) & kBarMemAddrMask;
      const uint64_t hi = ecam.read32(bdf, off + 4);
      ecam.write32(bdf, off, orig);
      ecam.write32(bdf, off + 4, orig_hi);
      const uint64_t mask = (hi << 32) | lo;
      if (mask != 0) {
        out->size = ~mask + 1;
        out->flags = kBarImplemented | kBar64 |
                     ((orig & kBarMemPrefetchable) ? kBarPrefetchable : 0);
        if (!is_pow2(out->size) || (mask | (out->size - 1)) != ~0ull)
          st = Status::kBadHardware;
      }
    }
  } else if ((orig & kBarMemTypeMask) == (3u << 1)) {
    st = Status::kBadHardware;  // reserved memory type
  } else {
    ecam.write32(bdf, off, ~0u);
    const uint32_t mask = ecam.read32(bdf, off) & kBarMemAddrMask;
    ecam.write32(bdf, off, orig);
    if (mask != 0) {
      out->size = static_cast<uint32_t>(~mask + 1);
      out->flags = kBarImplemented | ((orig & kBarMemPrefetchable) ? kBarPrefetchable : 0);
      if (!is_pow2(out->size) || (mask | static_cast<uint32_t>(out->size - 1)) != 0xFFFFFFFFu)
        st = Status::kBadHardware;
    }
  }

  ecam.write16(bdf, kCommand, cmd);
  if (st != Status::kOk)
    *out = Bar{};
  return st;
}

Status enumerate(const Ecam& ecam, const Windows& windows, Topology* out) {
  if (out == nullptr)
    return Status::kInvalidArgument;
  *out = Topology{};
  if (!window_valid(windows.mmio32, true) || !window_valid(windows.mmio64, false))
    return Status::kInvalidArgument;

  // Pass 1: probe and size.
  const uint8_t bus = ecam.bus_start();
  for (uint8_t dev = 0; dev < kDevicesPerBus; ++dev) {
    const Bdf fn0{bus, dev, 0};
    if (ecam.read16(fn0, offsetof(Type0Header, vendor_id)) == kVendorAbsent)
      continue;
    const bool multi = ecam.read8(fn0, offsetof(Type0Header, header_type)) & kHeaderTypeMultiFunction;
    const uint8_t fns = multi ? kFunctionsPerDevice : 1;
    for (uint8_t fn = 0; fn < fns; ++fn) {
      const Bdf bdf{bus, dev, fn};
      const uint16_t vendor = ecam.read16(bdf, offsetof(Type0Header, vendor_id));
      if (vendor == kVendorAbsent)
        continue;
      if (out->count >= Topology::kMaxFunctions)
        return Status::kCapacity;
      Function& f = out->functions[out->count++];
      f.bdf = bdf;
      f.vendor_id = vendor;
      f.device_id = ecam.read16(bdf, offsetof(Type0Header, device_id));
      f.revision = ecam.read8(bdf, offsetof(Type0Header, revision_id));
      f.class_code = static_cast<uint32_t>(ecam.read8(bdf, offsetof(Type0Header, class_code))) << 16 |
                     static_cast<uint32_t>(ecam.read8(bdf, offsetof(Type0Header, subclass))) << 8 |
                     ecam.read8(bdf, offsetof(Type0Header, prog_if));
      f.header_type = ecam.read8(bdf, offsetof(Type0Header, header_type)) & kHeaderTypeMask;
      if (f.header_type != kHeaderTypeEndpoint)
        continue;  // bridges: recorded only (virt's root complex is flat)

      const uint16_t cmd = ecam.read16(bdf, kCommand);
      ecam.write16(bdf, kCommand,
                   cmd & ~(kCommandIoSpace | kCommandMemorySpace | kCommandBusMaster));
      for (uint32_t i = 0; i < kBarCount; ++i) {
        const Status st = size_bar(ecam, bdf, i, &f.bars[i]);
        if (st != Status::kOk) {
          out->failed_bdf = bdf;
          out->failed_bar = static_cast<uint8_t>(i);
          return st;
        }
        if (f.bars[i].flags & kBar64) {
          f.bars[i + 1].flags = kBarUpperHalf;
          ++i;
        }
      }
    }
  }

  // Pass 2: order memory BARs by size (largest first, stable) and place them.
  Pending order[Topology::kMaxFunctions * kBarCount];
  uint32_t n = 0;
  for (uint32_t fi = 0; fi < out->count; ++fi) {
    for (uint32_t bi = 0; bi < kBarCount; ++bi) {
      const Bar& b = out->functions[fi].bars[bi];
      if ((b.flags & kBarImplemented) == 0 || (b.flags & kBarIo) != 0)
        continue;
      uint32_t j = n++;
      while (j > 0 && out->functions[order[j - 1].function].bars[order[j - 1].bar].size < b.size) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = Pending{static_cast<uint8_t>(fi), static_cast<uint8_t>(bi)};
    }
  }

  Cursor c32{&windows.mmio32, windows.mmio32.pci_base, false};
  Cursor c64{&windows.mmio64, windows.mmio64.pci_base, false};
  for (uint32_t k = 0; k < n; ++k) {
    Function& f = out->functions[order[k].function];
    Bar& b = f.bars[order[k].bar];
    const bool to64 = (b.flags & kBar64) && (b.flags & kBarPrefetchable) && windows.mmio64.present();
    Cursor* c = to64 ? &c64 : &c32;
    uint64_t pci = 0;
    if (!allocate(c, b.size, &pci)) {
      out->failed_bdf = f.bdf;
      out->failed_bar = order[k].bar;
      return Status::kNoSpace;
    }
    b.pci_base = pci;
    b.cpu_base = c->window->cpu_base + (pci - c->window->pci_base);
    b.flags |= kBarAssigned;
    const uint16_t off = bar_offset(order[k].bar);
    ecam.write32(f.bdf, off, static_cast<uint32_t>(pci));
    if (b.flags & kBar64)
      ecam.write32(f.bdf, off + 4, static_cast<uint32_t>(pci >> 32));
  }

  // Pass 3: decode and bus mastering on.
  for (uint32_t fi = 0; fi < out->count; ++fi) {
    const Function& f = out->functions[fi];
    if (f.header_type != kHeaderTypeEndpoint)
      continue;
    const uint16_t cmd = ecam.read16(f.bdf, kCommand);
    ecam.write16(f.bdf, kCommand, cmd | kCommandMemorySpace | kCommandBusMaster);
  }
  return Status::kOk;
}

}  // namespace hal::pcie
