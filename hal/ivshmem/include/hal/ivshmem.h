// hal::ivshmem: QEMU's inter-VM shared memory PCI functions (1af4:1110).
//
// Two flavours share the IDs and differ by what they expose:
//  - ivshmem-doorbell: BAR0 registers (IntrMask, IntrStatus, IVPosition,
//    Doorbell), BAR1 the MSI-X table and PBA, BAR2 the shared memory. It is
//    the chip's host interface: BAR2 is the host-visible window, the host
//    rings the chip through MSI-X, the chip rings a peer by writing
//    peer << 16 | vector to Doorbell. QEMU delivers nothing until MSI-X is
//    enabled, so setup is: program every table entry, then set Enable and
//    clear Function Mask in the capability's Message Control.
//  - ivshmem-plain: BAR2 is all that matters (QEMU still exposes a 256-byte
//    BAR0, but with no doorbell peers and no interrupts it does nothing);
//    used for chip-to-chip links, where both QEMUs map the same file.
// The two are told apart by the presence of the MSI-X capability.
//
// This driver takes a function that pcie::enumerate() has already found and
// assigned; it does not probe the bus itself. MSI targets come from a
// gic::Gicv2m frame.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/gic.h"
#include "hal/pcie.h"
#include "hal/status.h"

namespace hal::ivshmem {

inline constexpr uint16_t kVendorId = 0x1af4;
inline constexpr uint16_t kDeviceId = 0x1110;
inline constexpr uint32_t kRegsBar = 0;    // doorbell flavour only
inline constexpr uint32_t kMsixBar = 1;    // doorbell flavour only (as QEMU places it)
inline constexpr uint32_t kSharedBar = 2;

// BAR0 register block (QEMU docs/specs/ivshmem-spec.txt).
struct IvshmemRegs {
  uint32_t IntrMask;    // 0x00 (INTx only; unused with MSI-X)
  uint32_t IntrStatus;  // 0x04
  uint32_t IVPosition;  // 0x08 read-only: this peer's id
  uint32_t Doorbell;    // 0x0C write-only: peer << 16 | vector
};
static_assert(offsetof(IvshmemRegs, IntrMask) == 0x00);
static_assert(offsetof(IvshmemRegs, IntrStatus) == 0x04);
static_assert(offsetof(IvshmemRegs, IVPosition) == 0x08);
static_assert(offsetof(IvshmemRegs, Doorbell) == 0x0C);

inline constexpr uint32_t kDoorbellPeerShift = 16;

enum class Kind : uint8_t { kPlain = 0, kDoorbell = 1 };

// True for 1af4:1110 (either flavour).
bool is_ivshmem(const pcie::Function& fn);
// kDoorbell if the function has an MSI-X capability, else kPlain.
// kNotFound if fn is not ivshmem; kBadHardware on a broken capability list.
Status classify(const pcie::Ecam& ecam, const pcie::Function& fn, Kind* kind);

// Shared memory (BAR2) of either flavour.
struct SharedMemory {
  uint64_t cpu_base = 0;
  uint64_t size = 0;
};
// kNotFound if BAR2 is not implemented or was not assigned.
Status shared_memory(const pcie::Function& fn, SharedMemory* out);

// An ivshmem-plain function (chip-to-chip link memory).
class IvshmemPlain {
 public:
  IvshmemPlain() = default;
  IvshmemPlain(const IvshmemPlain&) = delete;
  IvshmemPlain& operator=(const IvshmemPlain&) = delete;

  // kNotFound if fn is not ivshmem or has no assigned BAR2.
  Status init(const pcie::Function& fn);
  const pcie::Bdf& bdf() const { return bdf_; }
  uint64_t shm_base() const { return shm_.cpu_base; }
  uint64_t shm_size() const { return shm_.size; }

 private:
  pcie::Bdf bdf_;
  SharedMemory shm_;
};

// An ivshmem-doorbell function (the chip's host interface).
class IvshmemDoorbell {
 public:
  IvshmemDoorbell() = default;
  IvshmemDoorbell(const IvshmemDoorbell&) = delete;
  IvshmemDoorbell& operator=(const IvshmemDoorbell&) = delete;

  // Locates the MSI-X capability, reads table size and table/PBA BIR and
  // offset, checks that BAR0, the table's BAR and BAR2 are assigned and that
  // the table fits inside its BAR. Masks every vector and leaves MSI-X
  // disabled. The Ecam must outlive this object.
  // kNotFound: not ivshmem, no MSI-X (a plain function), or a BAR missing;
  // kBadHardware: table/PBA outside their BAR.
  Status init(const pcie::Ecam& ecam, const pcie::Function& fn);

  const pcie::Bdf& bdf() const { return bdf_; }
  uint32_t vector_count() const { return vectors_; }
  uint64_t shm_base() const { return shm_.cpu_base; }
  uint64_t shm_size() const { return shm_.size; }
  // CPU addresses of the MSI-X table and PBA (from the cap's BIR + offset).
  uint64_t msix_table() const { return table_; }
  uint64_t msix_pba() const { return pba_; }

  // Writes entry `vector`: address lo/hi, data, then clears its mask bit
  // (in that order, so the device never sees a half-written unmasked entry).
  // kOutOfRange if vector >= vector_count().
  Status set_vector(uint32_t vector, const gic::MsiMessage& msg);
  // Sets the entry's mask bit.
  Status mask_vector(uint32_t vector);
  // Programs vector i with v2m message first_msi + i for every vector, and
  // reports the SPI of vector 0 (vector i raises *first_spi + i). The caller
  // configures those SPIs edge-triggered and enables them at the GIC.
  // kOutOfRange if the frame has too few SPIs.
  Status route_to_v2m(const gic::Gicv2m& v2m, uint32_t first_msi, uint32_t* first_spi);
  // Message Control: set Enable (bit 15), clear Function Mask (bit 14).
  Status enable_msix();
  Status disable_msix();
  bool msix_enabled() const;

  // This chip's peer id on the ivshmem server (IVPosition).
  uint32_t position() const;
  // Writes Doorbell = peer << 16 | vector.
  Status ring(uint16_t peer, uint16_t vector);

 private:
  const pcie::Ecam* ecam_ = nullptr;
  pcie::Bdf bdf_;
  uint8_t msix_cap_ = 0;
  uint32_t vectors_ = 0;
  uint64_t regs_ = 0;
  uint64_t table_ = 0;
  uint64_t pba_ = 0;
  SharedMemory shm_;
};

}  // namespace hal::ivshmem
