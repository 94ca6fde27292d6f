// hal::pcie::fake::FakeEcam: a host-side model of PCI configuration space
// behind ECAM, for the pcie and ivshmem unit tests.
//
// It installs an unbacked hook region on the fake MMIO backend
// (hal/fake_mmio.h) covering the ECAM window, so the base address can be any
// number: nothing is dereferenced. Functions get 4 KiB of config bytes; the
// model enforces what enumeration depends on:
//  - absent functions read all-ones;
//  - IDs, class, header type, status and capability bytes are read-only;
//  - BARs keep only their address bits (size-aligned), with the type bits
//    fixed, so writing all-ones and reading back yields the size mask; a
//    64-bit BAR's upper dword takes the upper address bits;
//  - in the MSI-X capability only Enable and Function Mask are writable;
//  - it counts BAR writes made while the function's Memory Space decode was
//    on (a sizing step a real device would decode at a bogus address).
// Host only. Construct after hal::fake::reset() in a test's setup.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <array>
#include <map>

#include "hal/pcie.h"

namespace hal::pcie::fake {

struct FakeBar {
  uint64_t size = 0;        // power of two, 0 = unimplemented
  bool io = false;
  bool is64 = false;
  bool prefetchable = false;
};

class FakeEcam {
 public:
  // Models buses [bus_start, bus_start + bus_count) at `base`.
  FakeEcam(uintptr_t base, uint8_t bus_start, uint32_t bus_count);
  FakeEcam(const FakeEcam&) = delete;
  FakeEcam& operator=(const FakeEcam&) = delete;

  uintptr_t base() const { return base_; }
  uint64_t size() const { return static_cast<uint64_t>(bus_count_) << 20; }

  // Adds a type-0 endpoint (or a bridge with header_type 1). `multifunction`
  // sets header type bit 7; it matters on function 0.
  void add_function(const Bdf& bdf, uint16_t vendor, uint16_t device, uint32_t class_code,
                    uint8_t header_type = kHeaderTypeEndpoint, bool multifunction = false);
  // A 64-bit BAR occupies index and index + 1.
  void set_bar(const Bdf& bdf, uint32_t index, const FakeBar& bar);
  // Appends a capability with `body` bytes after the 2-byte ID/next header;
  // returns its offset. Sets Status.CapList.
  uint8_t add_capability(const Bdf& bdf, uint8_t cap_id, const uint8_t* body, size_t body_len);
  // MSI-X capability: table size `vectors`, table and PBA BIR + offset.
  uint8_t add_msix(const Bdf& bdf, uint32_t vectors, uint32_t table_bir, uint32_t table_offset,
                   uint32_t pba_bir, uint32_t pba_offset);
  // Points a capability's next pointer somewhere (to build broken lists).
  void set_cap_next(const Bdf& bdf, uint8_t cap_offset, uint8_t next);

  // Raw config bytes of a function (current register values).
  uint8_t cfg8(const Bdf& bdf, uint16_t offset) const;
  uint16_t cfg16(const Bdf& bdf, uint16_t offset) const;
  uint32_t cfg32(const Bdf& bdf, uint16_t offset) const;
  // Full 64-bit address a 64-bit BAR decodes (low dword address bits | high).
  uint64_t bar_address(const Bdf& bdf, uint32_t index) const;
  uint32_t bar_writes_while_decoding() const { return bar_writes_while_decoding_; }
  uint32_t config_writes() const { return config_writes_; }

 private:
  struct Fn {
    std::array<uint8_t, kConfigSpaceSize> cfg{};
    std::array<uint8_t, kConfigSpaceSize> writable{};  // per-byte write mask
    FakeBar bars[kBarCount];
    uint8_t cap_end = kFirstCapOffset;  // next free offset for a capability
    uint8_t last_cap = 0;
  };

  uint32_t key(const Bdf& bdf) const;
  Fn* lookup(uintptr_t addr, uint16_t* offset);
  const Fn& at(const Bdf& bdf) const;
  Fn& at(const Bdf& bdf);
  void on_write(Fn& fn, uint16_t offset, unsigned width, uint64_t value);
  uint32_t bar_mask(const Fn& fn, uint32_t index) const;

  uintptr_t base_;
  uint8_t bus_start_;
  uint32_t bus_count_;
  std::map<uint32_t, Fn> functions_;
  uint32_t bar_writes_while_decoding_ = 0;
  uint32_t config_writes_ = 0;
};

}  // namespace hal::pcie::fake
