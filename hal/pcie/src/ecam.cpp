// ECAM configuration access and the capability walk.
//
// ECAM maps function (bus, dev, fn) at base + ((bus - bus_start) << 20 |
// dev << 15 | fn << 12); the bus is relative to the first bus of the DT
// bus-range because the window starts there. Accesses the hardware would
// master-abort on (outside the bus range, misaligned, beyond 4 KiB) are
// answered here the same way, all-ones, so callers need one absence check.
#include "hal/pcie.h"

#include "hal/mmio.h"

namespace hal::pcie {
namespace {

constexpr uint64_t kBusWindow = 1ull << 20;
constexpr uint32_t kMaxCapabilities = (256 - kFirstCapOffset) / 4;  // one per dword at most

}  // namespace

Status Ecam::init(uintptr_t base, uint64_t size, uint8_t bus_start, uint8_t bus_end) {
  if (base == 0 || bus_end < bus_start)
    return Status::kInvalidArgument;
  const uint64_t needed = (static_cast<uint64_t>(bus_end - bus_start) + 1) * kBusWindow;
  if (size < needed)
    return Status::kInvalidArgument;
  base_ = base;
  bus_start_ = bus_start;
  bus_end_ = bus_end;
  return Status::kOk;
}

bool Ecam::contains(const Bdf& bdf) const {
  return base_ != 0 && bdf.bus >= bus_start_ && bdf.bus <= bus_end_ &&
         bdf.dev < kDevicesPerBus && bdf.fn < kFunctionsPerDevice;
}

bool Ecam::address(const Bdf& bdf, uint16_t offset, unsigned width, uintptr_t* out) const {
  if (!contains(bdf) || offset >= kConfigSpaceSize || offset % width != 0)
    return false;
  *out = base_ + ((static_cast<uintptr_t>(bdf.bus - bus_start_) << 20) |
                  (static_cast<uintptr_t>(bdf.dev) << 15) |
                  (static_cast<uintptr_t>(bdf.fn) << 12) | offset);
  return true;
}

uint8_t Ecam::read8(const Bdf& bdf, uint16_t offset) const {
  uintptr_t a;
  return address(bdf, offset, 1, &a) ? mmio::read8(mmio::reg_at<uint8_t>(a, 0)) : 0xFF;
}

uint16_t Ecam::read16(const Bdf& bdf, uint16_t offset) const {
  uintptr_t a;
  return address(bdf, offset, 2, &a) ? mmio::read16(mmio::reg_at<uint16_t>(a, 0)) : 0xFFFF;
}

uint32_t Ecam::read32(const Bdf& bdf, uint16_t offset) const {
  uintptr_t a;
  return address(bdf, offset, 4, &a) ? mmio::read32(mmio::reg_at<uint32_t>(a, 0)) : 0xFFFFFFFFu;
}

void Ecam::write8(const Bdf& bdf, uint16_t offset, uint8_t value) const {
  uintptr_t a;
  if (address(bdf, offset, 1, &a))
    mmio::write8(mmio::reg_at<uint8_t>(a, 0), value);
}

void Ecam::write16(const Bdf& bdf, uint16_t offset, uint16_t value) const {
  uintptr_t a;
  if (address(bdf, offset, 2, &a))
    mmio::write16(mmio::reg_at<uint16_t>(a, 0), value);
}

void Ecam::write32(const Bdf& bdf, uint16_t offset, uint32_t value) const {
  uintptr_t a;
  if (address(bdf, offset, 4, &a))
    mmio::write32(mmio::reg_at<uint32_t>(a, 0), value);
}

Status Ecam::find_capability(const Bdf& bdf, uint8_t cap_id, uint8_t* offset) const {
  if (offset == nullptr)
    return Status::kInvalidArgument;
  if (read16(bdf, offsetof(Type0Header, vendor_id)) == kVendorAbsent)
    return Status::kNotFound;
  if ((read16(bdf, offsetof(Type0Header, status)) & kStatusCapList) == 0)
    return Status::kNotFound;
  uint8_t ptr = read8(bdf, offsetof(Type0Header, capabilities_ptr)) & kCapPtrMask;
  for (uint32_t n = 0; ptr != 0; ++n) {
    if (n >= kMaxCapabilities || ptr < kFirstCapOffset)
      return Status::kBadHardware;
    if (read8(bdf, ptr) == cap_id) {
      *offset = ptr;
      return Status::kOk;
    }
    ptr = read8(bdf, ptr + 1) & kCapPtrMask;
  }
  return Status::kNotFound;
}

const Function* Topology::find(uint16_t vendor_id, uint16_t device_id, uint32_t nth) const {
  for (uint32_t i = 0; i < count; ++i) {
    const Function& f = functions[i];
    if (f.vendor_id == vendor_id && f.device_id == device_id) {
      if (nth == 0)
        return &f;
      --nth;
    }
  }
  return nullptr;
}

}  // namespace hal::pcie
