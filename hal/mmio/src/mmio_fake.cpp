// Host fake backend of hal/mmio.h: RAM registers, an ordered access log, and
// per-range hooks that let a test emulate device side effects. See
// hal/fake_mmio.h for the semantics; this file is only the bookkeeping.
// A plain memcpy moves the value between RAM and the driver so the fake does
// not itself impose alignment or strict-aliasing assumptions on the test's
// backing storage.
#include <string.h>

#include "hal/fake_mmio.h"
#include "hal/mmio.h"

namespace hal::fake {
namespace {

struct Region {
  uintptr_t base;
  size_t size;
  ReadHook on_read;
  WriteHook on_write;
  bool backed;
};

struct FakeState {
  std::vector<Region> regions;
  std::vector<Access> log;
  size_t barriers = 0;
};

FakeState& state() {
  static FakeState s;
  return s;
}

// The most recently added region containing addr, or nullptr.
const Region* find_region(uintptr_t addr) {
  auto& regions = state().regions;
  for (size_t i = regions.size(); i > 0; --i) {
    const Region& r = regions[i - 1];
    if (addr >= r.base && addr - r.base < r.size)
      return &r;
  }
  return nullptr;
}

uint64_t load_ram(uintptr_t addr, unsigned width) {
  uint64_t v = 0;
  memcpy(&v, reinterpret_cast<const void*>(addr), width);  // little-endian host
  return v;
}

void store_ram(uintptr_t addr, unsigned width, uint64_t v) {
  memcpy(reinterpret_cast<void*>(addr), &v, width);
}

uint64_t do_read(uintptr_t addr, unsigned width) {
  uint64_t value;
  const Region* r = find_region(addr);
  if (r == nullptr) {
    value = load_ram(addr, width);
  } else {
    value = r->backed ? load_ram(addr, width) : ~0ull;
    if (r->on_read)
      r->on_read(addr, width, value);
  }
  if (width < 8)
    value &= (1ull << (width * 8)) - 1;
  state().log.push_back(Access{addr, static_cast<uint8_t>(width), false, value});
  return value;
}

void do_write(uintptr_t addr, unsigned width, uint64_t value) {
  state().log.push_back(Access{addr, static_cast<uint8_t>(width), true, value});
  const Region* r = find_region(addr);
  if (r == nullptr) {
    store_ram(addr, width, value);
    return;
  }
  bool handled = r->on_write ? r->on_write(addr, width, value) : false;
  if (!handled && r->backed)
    store_ram(addr, width, value);
}

}  // namespace

void reset() {
  state().regions.clear();
  state().log.clear();
  state().barriers = 0;
}

void add_region(uintptr_t base, size_t size, ReadHook on_read, WriteHook on_write, bool backed) {
  state().regions.push_back(Region{base, size, std::move(on_read), std::move(on_write), backed});
}

const std::vector<Access>& log() { return state().log; }

void clear_log() { state().log.clear(); }

std::vector<Access> accesses_to(uintptr_t addr) {
  std::vector<Access> out;
  for (const Access& a : state().log)
    if (a.addr == addr)
      out.push_back(a);
  return out;
}

std::vector<Access> writes() {
  std::vector<Access> out;
  for (const Access& a : state().log)
    if (a.is_write)
      out.push_back(a);
  return out;
}

size_t barrier_count() { return state().barriers; }

}  // namespace hal::fake

namespace hal::mmio {

namespace {
uintptr_t addr(const volatile void* p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

uint8_t read8(const volatile uint8_t* reg) { return static_cast<uint8_t>(fake::do_read(addr(reg), 1)); }
uint16_t read16(const volatile uint16_t* reg) { return static_cast<uint16_t>(fake::do_read(addr(reg), 2)); }
uint32_t read32(const volatile uint32_t* reg) { return static_cast<uint32_t>(fake::do_read(addr(reg), 4)); }
uint64_t read64(const volatile uint64_t* reg) { return fake::do_read(addr(reg), 8); }

void write8(volatile uint8_t* reg, uint8_t value) { fake::do_write(addr(reg), 1, value); }
void write16(volatile uint16_t* reg, uint16_t value) { fake::do_write(addr(reg), 2, value); }
void write32(volatile uint32_t* reg, uint32_t value) { fake::do_write(addr(reg), 4, value); }
void write64(volatile uint64_t* reg, uint64_t value) { fake::do_write(addr(reg), 8, value); }

void data_sync_barrier() { ++fake::state().barriers; }
void instruction_sync_barrier() { ++fake::state().barriers; }

}  // namespace hal::mmio
