// hal::pcie: PCIe configuration space through ECAM, bus-0 enumeration, BAR
// sizing and assignment, capability lookup.
//
// Nothing assigns BARs on QEMU virt (there is no BIOS), so the firmware does
// what a host bridge driver does: probe every device/function on the root
// bus, size each memory BAR (disable decode, write all-ones, read back the
// mask, restore), place BARs at natural alignment inside the windows the DT
// `ranges` of the "pci-host-ecam-generic" node describes, then turn on Memory
// Space and Bus Master. virt's root complex is flat (every function sits on
// the first bus of `bus-range`), so bridges are recorded but not configured
// and buses behind them are not scanned. I/O BARs are recorded but never
// assigned: nothing on this board uses port I/O and virt's I/O window is not
// reachable by the firmware's memory map.
//
// Config accesses mirror real hardware when they miss: a read outside the
// ECAM bus range or misaligned returns all-ones (like a master abort) and
// such a write is dropped, so a probe of an absent function reads 0xFFFF.
// Layouts are structs with offsetof asserts; accesses use the offsets.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/status.h"

namespace hal::pcie {

struct Bdf {
  uint8_t bus = 0;
  uint8_t dev = 0;  // 0..31
  uint8_t fn = 0;   // 0..7
};
inline bool operator==(const Bdf& a, const Bdf& b) {
  return a.bus == b.bus && a.dev == b.dev && a.fn == b.fn;
}

inline constexpr uint32_t kDevicesPerBus = 32;
inline constexpr uint32_t kFunctionsPerDevice = 8;
inline constexpr uint32_t kConfigSpaceSize = 4096;  // ECAM: 4 KiB per function
inline constexpr uint32_t kBarCount = 6;

// Type 0 (endpoint) configuration header, PCI Local Bus 3.0 section 6.1.
struct Type0Header {
  uint16_t vendor_id;        // 0x00
  uint16_t device_id;        // 0x02
  uint16_t command;          // 0x04
  uint16_t status;           // 0x06
  uint8_t revision_id;       // 0x08
  uint8_t prog_if;           // 0x09
  uint8_t subclass;          // 0x0A
  uint8_t class_code;        // 0x0B
  uint8_t cache_line_size;   // 0x0C
  uint8_t latency_timer;     // 0x0D
  uint8_t header_type;       // 0x0E
  uint8_t bist;              // 0x0F
  uint32_t bar[kBarCount];   // 0x10
  uint32_t cardbus_cis;      // 0x28
  uint16_t subsystem_vendor_id;  // 0x2C
  uint16_t subsystem_id;     // 0x2E
  uint32_t expansion_rom;    // 0x30
  uint8_t capabilities_ptr;  // 0x34
  uint8_t reserved[7];
  uint8_t interrupt_line;    // 0x3C
  uint8_t interrupt_pin;     // 0x3D
  uint8_t min_gnt;           // 0x3E
  uint8_t max_lat;           // 0x3F
};
static_assert(offsetof(Type0Header, vendor_id) == 0x00);
static_assert(offsetof(Type0Header, device_id) == 0x02);
static_assert(offsetof(Type0Header, command) == 0x04);
static_assert(offsetof(Type0Header, status) == 0x06);
static_assert(offsetof(Type0Header, revision_id) == 0x08);
static_assert(offsetof(Type0Header, prog_if) == 0x09);
static_assert(offsetof(Type0Header, subclass) == 0x0A);
static_assert(offsetof(Type0Header, class_code) == 0x0B);
static_assert(offsetof(Type0Header, cache_line_size) == 0x0C);
static_assert(offsetof(Type0Header, latency_timer) == 0x0D);
static_assert(offsetof(Type0Header, header_type) == 0x0E);
static_assert(offsetof(Type0Header, bist) == 0x0F);
static_assert(offsetof(Type0Header, bar) == 0x10);
static_assert(offsetof(Type0Header, cardbus_cis) == 0x28);
static_assert(offsetof(Type0Header, subsystem_vendor_id) == 0x2C);
static_assert(offsetof(Type0Header, subsystem_id) == 0x2E);
static_assert(offsetof(Type0Header, expansion_rom) == 0x30);
static_assert(offsetof(Type0Header, capabilities_ptr) == 0x34);
static_assert(offsetof(Type0Header, interrupt_line) == 0x3C);
static_assert(offsetof(Type0Header, interrupt_pin) == 0x3D);
static_assert(sizeof(Type0Header) == 0x40);

// MSI-X capability structure (PCI Local Bus 3.0 section 6.8.2).
struct MsixCap {
  uint8_t cap_id;            // 0x00: kCapIdMsix
  uint8_t next;              // 0x01
  uint16_t message_control;  // 0x02
  uint32_t table;            // 0x04: BIR [2:0], offset [31:3]
  uint32_t pba;              // 0x08: BIR [2:0], offset [31:3]
};
static_assert(offsetof(MsixCap, cap_id) == 0x00);
static_assert(offsetof(MsixCap, next) == 0x01);
static_assert(offsetof(MsixCap, message_control) == 0x02);
static_assert(offsetof(MsixCap, table) == 0x04);
static_assert(offsetof(MsixCap, pba) == 0x08);

// One MSI-X table entry, in the BAR the table BIR names.
struct MsixEntry {
  uint32_t msg_addr_lo;     // 0x0
  uint32_t msg_addr_hi;     // 0x4
  uint32_t msg_data;        // 0x8
  uint32_t vector_control;  // 0xC: bit 0 masks the vector
};
static_assert(offsetof(MsixEntry, msg_addr_lo) == 0x0);
static_assert(offsetof(MsixEntry, msg_addr_hi) == 0x4);
static_assert(offsetof(MsixEntry, msg_data) == 0x8);
static_assert(offsetof(MsixEntry, vector_control) == 0xC);
static_assert(sizeof(MsixEntry) == 16);

// Command register.
inline constexpr uint16_t kCommandIoSpace = 1u << 0;
inline constexpr uint16_t kCommandMemorySpace = 1u << 1;
inline constexpr uint16_t kCommandBusMaster = 1u << 2;
inline constexpr uint16_t kCommandIntxDisable = 1u << 10;
// Status register.
inline constexpr uint16_t kStatusCapList = 1u << 4;
// Header type.
inline constexpr uint8_t kHeaderTypeMask = 0x7F;
inline constexpr uint8_t kHeaderTypeMultiFunction = 0x80;
inline constexpr uint8_t kHeaderTypeEndpoint = 0x00;
inline constexpr uint8_t kHeaderTypeBridge = 0x01;
// BAR low dword.
inline constexpr uint32_t kBarSpaceIo = 1u << 0;
inline constexpr uint32_t kBarMemTypeMask = 3u << 1;
inline constexpr uint32_t kBarMemType64 = 2u << 1;
inline constexpr uint32_t kBarMemPrefetchable = 1u << 3;
inline constexpr uint32_t kBarMemAddrMask = ~0xFu;
// Capabilities.
inline constexpr uint8_t kCapIdMsi = 0x05;
inline constexpr uint8_t kCapIdMsix = 0x11;
inline constexpr uint8_t kCapPtrMask = 0xFC;
inline constexpr uint8_t kFirstCapOffset = 0x40;  // capabilities live after the header
// MSI-X message control / table fields.
inline constexpr uint16_t kMsixCtrlTableSizeMask = 0x7FF;  // N-1
inline constexpr uint16_t kMsixCtrlFunctionMask = 1u << 14;
inline constexpr uint16_t kMsixCtrlEnable = 1u << 15;
inline constexpr uint32_t kMsixBirMask = 0x7;
inline constexpr uint32_t kMsixOffsetMask = ~0x7u;
inline constexpr uint32_t kMsixVectorMasked = 1u << 0;

inline constexpr uint16_t kVendorAbsent = 0xFFFF;

class Ecam {
 public:
  Ecam() = default;

  // `base`/`size`: the ECAM region (DT reg); bus_start..bus_end: DT
  // bus-range. kInvalidArgument if base is 0, bus_end < bus_start, or size
  // is smaller than (bus_end - bus_start + 1) MiB.
  Status init(uintptr_t base, uint64_t size, uint8_t bus_start, uint8_t bus_end);

  uint8_t bus_start() const { return bus_start_; }
  uint8_t bus_end() const { return bus_end_; }
  // True if bdf is inside the bus range and dev/fn are in range.
  bool contains(const Bdf& bdf) const;

  // Naturally aligned accesses at `offset` (< 4096) of bdf's config space.
  // Out of range or misaligned: reads return all-ones, writes are dropped.
  uint8_t read8(const Bdf& bdf, uint16_t offset) const;
  uint16_t read16(const Bdf& bdf, uint16_t offset) const;
  uint32_t read32(const Bdf& bdf, uint16_t offset) const;
  void write8(const Bdf& bdf, uint16_t offset, uint8_t value) const;
  void write16(const Bdf& bdf, uint16_t offset, uint16_t value) const;
  void write32(const Bdf& bdf, uint16_t offset, uint32_t value) const;

  // Walks the capability list (only if Status.CapList is set); *offset gets
  // the config-space offset of the first capability with `cap_id`.
  // kNotFound if absent, kBadHardware if a pointer leaves 0x40..0xFF or the
  // list is longer than a 256-byte space can hold (a loop).
  Status find_capability(const Bdf& bdf, uint8_t cap_id, uint8_t* offset) const;

 private:
  bool address(const Bdf& bdf, uint16_t offset, unsigned width, uintptr_t* out) const;

  uintptr_t base_ = 0;
  uint8_t bus_start_ = 0;
  uint8_t bus_end_ = 0;
};

// One address window from the DT `ranges`: CPU (parent) address, PCI (child)
// address and size. BAR registers get PCI addresses; drivers use CPU ones.
struct Window {
  uint64_t cpu_base = 0;
  uint64_t pci_base = 0;
  uint64_t size = 0;  // 0: the window is absent
  bool present() const { return size != 0; }
};

// The windows assignment draws from. 32-bit BARs and non-prefetchable 64-bit
// BARs go to mmio32 (which must lie below 4 GiB in PCI space); prefetchable
// 64-bit BARs go to mmio64 when it is present, else to mmio32. There is no
// fallback once a window is chosen: exhaustion is reported, not papered over.
struct Windows {
  Window mmio32;
  Window mmio64;
};

// Bar::flags.
inline constexpr uint32_t kBarImplemented = 1u << 0;  // size > 0
inline constexpr uint32_t kBar64 = 1u << 1;           // occupies this and the next BAR slot
inline constexpr uint32_t kBarPrefetchable = 1u << 2;
inline constexpr uint32_t kBarIo = 1u << 3;           // I/O space: sized, never assigned
inline constexpr uint32_t kBarAssigned = 1u << 4;     // cpu_base/pci_base valid
inline constexpr uint32_t kBarUpperHalf = 1u << 5;    // upper dword of the previous 64-bit BAR

struct Bar {
  uint64_t cpu_base = 0;
  uint64_t pci_base = 0;
  uint64_t size = 0;
  uint32_t flags = 0;
  bool assigned() const { return (flags & kBarAssigned) != 0; }
};

struct Function {
  Bdf bdf;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;  // class << 16 | subclass << 8 | prog_if
  uint8_t revision = 0;
  uint8_t header_type = 0;  // with the multi-function bit masked off
  Bar bars[kBarCount];      // index = BAR number; bridges use 0..1
};

struct Topology {
  static constexpr uint32_t kMaxFunctions = 16;
  Function functions[kMaxFunctions];
  uint32_t count = 0;
  // Set when enumerate() fails on a particular BAR (kNoSpace, kBadHardware).
  Bdf failed_bdf;
  uint8_t failed_bar = 0xFF;

  // The nth (0-based) function with this vendor/device, or nullptr.
  const Function* find(uint16_t vendor_id, uint16_t device_id, uint32_t nth = 0) const;
};

// Sizes one BAR of an endpoint: saves the command register, clears
// Memory/IO decode, writes all-ones (both halves for a 64-bit BAR), reads
// the mask back, restores the BAR(s) and the command register. Fills size
// and flags (kBar64, kBarPrefetchable, kBarIo, kBarImplemented); a BAR that
// reads back 0 is unimplemented (size 0, kOk). kBadHardware if the mask is
// not a contiguous power of two, or a 64-bit BAR sits in slot 5.
Status size_bar(const Ecam& ecam, const Bdf& bdf, uint32_t index, Bar* out);

// Probes every device/function on bus_start (function 0 first; functions
// 1..7 only when header type bit 7 says multi-function; vendor 0xFFFF means
// absent), sizes every endpoint BAR, assigns memory BARs largest first at
// natural alignment in the windows, writes them, and then sets Memory Space
// and Bus Master on every endpoint. Errors: kInvalidArgument (bad windows: overflow, mmio32 beyond
// 4 GiB), kCapacity (more than kMaxFunctions), kNoSpace (a window is
// exhausted: failed_bdf/failed_bar name the BAR), kBadHardware (from
// size_bar). On error no command register has been enabled.
Status enumerate(const Ecam& ecam, const Windows& windows, Topology* out);

}  // namespace hal::pcie
