// FakeEcam implementation: config-space bytes with per-byte write masks and
// BAR registers modelled at dword granularity (drivers only ever write BARs
// as aligned dwords, as the PCI spec expects). See hal/fake_ecam.h.
#include "hal/fake_ecam.h"

#include <assert.h>

#include "hal/fake_mmio.h"

namespace hal::pcie::fake {
namespace {

constexpr uint16_t kBar0 = offsetof(Type0Header, bar);
constexpr uint16_t kBarEnd = kBar0 + 4 * kBarCount;

}  // namespace

FakeEcam::FakeEcam(uintptr_t base, uint8_t bus_start, uint32_t bus_count)
    : base_(base), bus_start_(bus_start), bus_count_(bus_count) {
  hal::fake::add_region(
      base_, size(),
      [this](uintptr_t addr, unsigned width, uint64_t& value) {
        uint16_t off = 0;
        Fn* fn = lookup(addr, &off);
        if (fn == nullptr)
          return;  // absent: the unbacked region already reads all-ones
        value = 0;
        for (unsigned i = 0; i < width; ++i)
          value |= static_cast<uint64_t>(fn->cfg[off + i]) << (8 * i);
      },
      [this](uintptr_t addr, unsigned width, uint64_t value) {
        uint16_t off = 0;
        Fn* fn = lookup(addr, &off);
        if (fn != nullptr) {
          ++config_writes_;
          on_write(*fn, off, width, value);
        }
        return true;
      },
      /*backed=*/false);
}

uint32_t FakeEcam::key(const Bdf& bdf) const {
  return static_cast<uint32_t>(bdf.bus) << 8 | static_cast<uint32_t>(bdf.dev) << 3 | bdf.fn;
}

FakeEcam::Fn* FakeEcam::lookup(uintptr_t addr, uint16_t* offset) {
  const uintptr_t off = addr - base_;
  const Bdf bdf{static_cast<uint8_t>(bus_start_ + (off >> 20)),
                static_cast<uint8_t>((off >> 15) & 31), static_cast<uint8_t>((off >> 12) & 7)};
  *offset = static_cast<uint16_t>(off & 0xFFF);
  auto it = functions_.find(key(bdf));
  return it == functions_.end() ? nullptr : &it->second;
}

const FakeEcam::Fn& FakeEcam::at(const Bdf& bdf) const {
  auto it = functions_.find(key(bdf));
  assert(it != functions_.end());
  return it->second;
}

FakeEcam::Fn& FakeEcam::at(const Bdf& bdf) {
  auto it = functions_.find(key(bdf));
  assert(it != functions_.end());
  return it->second;
}

void FakeEcam::add_function(const Bdf& bdf, uint16_t vendor, uint16_t device, uint32_t class_code,
                            uint8_t header_type, bool multifunction) {
  Fn& fn = functions_[key(bdf)];
  fn = Fn{};
  fn.cfg[0x00] = vendor & 0xFF;
  fn.cfg[0x01] = vendor >> 8;
  fn.cfg[0x02] = device & 0xFF;
  fn.cfg[0x03] = device >> 8;
  fn.cfg[0x08] = 0x01;  // revision
  fn.cfg[0x09] = class_code & 0xFF;
  fn.cfg[0x0A] = (class_code >> 8) & 0xFF;
  fn.cfg[0x0B] = (class_code >> 16) & 0xFF;
  fn.cfg[0x0E] = header_type | (multifunction ? kHeaderTypeMultiFunction : 0);
  fn.writable[0x04] = kCommandIoSpace | kCommandMemorySpace | kCommandBusMaster;
  fn.writable[0x05] = kCommandIntxDisable >> 8;
  fn.writable[0x0C] = 0xFF;  // cache line size
  fn.writable[0x0D] = 0xFF;  // latency timer
  fn.writable[0x3C] = 0xFF;  // interrupt line
}

void FakeEcam::set_bar(const Bdf& bdf, uint32_t index, const FakeBar& bar) {
  Fn& fn = at(bdf);
  assert(index < kBarCount && (!bar.is64 || index + 1 < kBarCount));
  assert(bar.size == 0 || (bar.size & (bar.size - 1)) == 0);
  fn.bars[index] = bar;
  uint32_t low = 0;
  if (bar.size != 0) {
    if (bar.io)
      low = kBarSpaceIo;
    else
      low = (bar.is64 ? kBarMemType64 : 0) | (bar.prefetchable ? kBarMemPrefetchable : 0);
  }
  const uint16_t off = kBar0 + 4 * index;
  for (unsigned i = 0; i < 4; ++i)
    fn.cfg[off + i] = (low >> (8 * i)) & 0xFF;
  if (bar.is64) {
    fn.bars[index + 1] = FakeBar{};
    for (unsigned i = 4; i < 8; ++i)
      fn.cfg[off + i] = 0;
  }
}

uint32_t FakeEcam::bar_mask(const Fn& fn, uint32_t index) const {
  const FakeBar& b = fn.bars[index];
  if (b.size != 0) {
    const uint64_t addr_mask = ~(b.size - 1);
    return static_cast<uint32_t>(addr_mask) & (b.io ? ~3u : kBarMemAddrMask);
  }
  if (index > 0 && fn.bars[index - 1].is64 && fn.bars[index - 1].size != 0)
    return static_cast<uint32_t>(~(fn.bars[index - 1].size - 1) >> 32);
  return 0;
}

void FakeEcam::on_write(Fn& fn, uint16_t offset, unsigned width, uint64_t value) {
  if (offset >= kBar0 && offset < kBarEnd) {
    if (width != 4)
      return;  // sub-dword BAR writes are not something drivers do; ignored
    const uint32_t index = (offset - kBar0) / 4;
    const uint16_t cmd = fn.cfg[0x04] | fn.cfg[0x05] << 8;
    const bool upper = index > 0 && fn.bars[index - 1].is64;
    const FakeBar& owner = upper ? fn.bars[index - 1] : fn.bars[index];
    if (owner.size != 0 &&
        (cmd & (owner.io ? kCommandIoSpace : kCommandMemorySpace)) != 0)
      ++bar_writes_while_decoding_;
    const uint32_t mask = bar_mask(fn, index);
    uint32_t cur = 0;
    for (unsigned i = 0; i < 4; ++i)
      cur |= static_cast<uint32_t>(fn.cfg[offset + i]) << (8 * i);
    const uint32_t next = (static_cast<uint32_t>(value) & mask) | (cur & ~mask);
    for (unsigned i = 0; i < 4; ++i)
      fn.cfg[offset + i] = (next >> (8 * i)) & 0xFF;
    return;
  }
  for (unsigned i = 0; i < width; ++i) {
    const uint8_t m = fn.writable[offset + i];
    const uint8_t b = (value >> (8 * i)) & 0xFF;
    fn.cfg[offset + i] = static_cast<uint8_t>((b & m) | (fn.cfg[offset + i] & ~m));
  }
}

uint8_t FakeEcam::add_capability(const Bdf& bdf, uint8_t cap_id, const uint8_t* body,
                                 size_t body_len) {
  Fn& fn = at(bdf);
  const uint8_t off = fn.cap_end;
  assert(off + 2 + body_len <= 0x100);
  fn.cfg[off] = cap_id;
  fn.cfg[off + 1] = 0;
  for (size_t i = 0; i < body_len; ++i)
    fn.cfg[off + 2 + i] = body[i];
  if (fn.last_cap == 0)
    fn.cfg[offsetof(Type0Header, capabilities_ptr)] = off;
  else
    fn.cfg[fn.last_cap + 1] = off;
  fn.last_cap = off;
  fn.cap_end = static_cast<uint8_t>((off + 2 + body_len + 3) & ~size_t{3});
  fn.cfg[0x06] |= kStatusCapList;
  return off;
}

uint8_t FakeEcam::add_msix(const Bdf& bdf, uint32_t vectors, uint32_t table_bir,
                           uint32_t table_offset, uint32_t pba_bir, uint32_t pba_offset) {
  assert(vectors >= 1 && vectors <= 2048);
  const uint16_t ctrl = static_cast<uint16_t>(vectors - 1);
  const uint32_t table = table_offset | table_bir;
  const uint32_t pba = pba_offset | pba_bir;
  const uint8_t body[10] = {
      static_cast<uint8_t>(ctrl & 0xFF), static_cast<uint8_t>(ctrl >> 8),
      static_cast<uint8_t>(table), static_cast<uint8_t>(table >> 8),
      static_cast<uint8_t>(table >> 16), static_cast<uint8_t>(table >> 24),
      static_cast<uint8_t>(pba), static_cast<uint8_t>(pba >> 8),
      static_cast<uint8_t>(pba >> 16), static_cast<uint8_t>(pba >> 24)};
  const uint8_t off = add_capability(bdf, kCapIdMsix, body, sizeof(body));
  at(bdf).writable[off + 3] = (kMsixCtrlEnable | kMsixCtrlFunctionMask) >> 8;
  return off;
}

void FakeEcam::set_cap_next(const Bdf& bdf, uint8_t cap_offset, uint8_t next) {
  at(bdf).cfg[cap_offset + 1] = next;
}

uint8_t FakeEcam::cfg8(const Bdf& bdf, uint16_t offset) const { return at(bdf).cfg[offset]; }

uint16_t FakeEcam::cfg16(const Bdf& bdf, uint16_t offset) const {
  const Fn& fn = at(bdf);
  return static_cast<uint16_t>(fn.cfg[offset] | fn.cfg[offset + 1] << 8);
}

uint32_t FakeEcam::cfg32(const Bdf& bdf, uint16_t offset) const {
  const Fn& fn = at(bdf);
  uint32_t v = 0;
  for (unsigned i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(fn.cfg[offset + i]) << (8 * i);
  return v;
}

uint64_t FakeEcam::bar_address(const Bdf& bdf, uint32_t index) const {
  const Fn& fn = at(bdf);
  const uint16_t off = kBar0 + 4 * index;
  if (fn.bars[index].io)
    return cfg32(bdf, off) & ~3u;
  uint64_t addr = cfg32(bdf, off) & kBarMemAddrMask;
  if (fn.bars[index].is64)
    addr |= static_cast<uint64_t>(cfg32(bdf, off + 4)) << 32;
  return addr;
}

}  // namespace hal::pcie::fake
