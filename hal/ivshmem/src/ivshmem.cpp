// ivshmem function logic: MSI-X table programming and the BAR0 doorbell.
//
// The MSI-X table lives in device memory (BAR1 on QEMU's ivshmem, but the
// capability's BIR is what counts), so it is written through hal::mmio like
// any register block. An entry is written address, data, then unmask, so
// the device can never sample an unmasked entry with a stale address.
// MSI-X Enable is set only after every entry is programmed: QEMU delivers
// nothing before that, and after it any vector may fire.
#include "hal/ivshmem.h"

#include "hal/mmio.h"

namespace hal::ivshmem {
namespace {

constexpr uint16_t kMsixControl = offsetof(pcie::MsixCap, message_control);
constexpr uint16_t kMsixTable = offsetof(pcie::MsixCap, table);
constexpr uint16_t kMsixPba = offsetof(pcie::MsixCap, pba);

// A BAR that decodes an assigned address (not the upper half of a 64-bit one).
bool usable(const pcie::Bar& b) {
  return (b.flags & pcie::kBarImplemented) && (b.flags & pcie::kBarAssigned) &&
         (b.flags & pcie::kBarIo) == 0;
}

volatile pcie::MsixEntry* entry(uint64_t table, uint32_t vector) {
  return mmio::block_at<pcie::MsixEntry>(static_cast<uintptr_t>(table) +
                                         vector * sizeof(pcie::MsixEntry));
}

}  // namespace

bool is_ivshmem(const pcie::Function& fn) {
  return fn.vendor_id == kVendorId && fn.device_id == kDeviceId;
}

Status classify(const pcie::Ecam& ecam, const pcie::Function& fn, Kind* kind) {
  if (kind == nullptr)
    return Status::kInvalidArgument;
  if (!is_ivshmem(fn))
    return Status::kNotFound;
  uint8_t cap = 0;
  const Status st = ecam.find_capability(fn.bdf, pcie::kCapIdMsix, &cap);
  if (st == Status::kOk) {
    *kind = Kind::kDoorbell;
    return Status::kOk;
  }
  if (st == Status::kNotFound) {
    *kind = Kind::kPlain;
    return Status::kOk;
  }
  return st;
}

Status shared_memory(const pcie::Function& fn, SharedMemory* out) {
  if (out == nullptr)
    return Status::kInvalidArgument;
  const pcie::Bar& b = fn.bars[kSharedBar];
  if (!usable(b))
    return Status::kNotFound;
  out->cpu_base = b.cpu_base;
  out->size = b.size;
  return Status::kOk;
}

Status IvshmemPlain::init(const pcie::Function& fn) {
  if (!is_ivshmem(fn))
    return Status::kNotFound;
  HAL_TRY(shared_memory(fn, &shm_));
  bdf_ = fn.bdf;
  return Status::kOk;
}

Status IvshmemDoorbell::init(const pcie::Ecam& ecam, const pcie::Function& fn) {
  if (!is_ivshmem(fn))
    return Status::kNotFound;
  uint8_t cap = 0;
  HAL_TRY(ecam.find_capability(fn.bdf, pcie::kCapIdMsix, &cap));

  const uint16_t ctrl = ecam.read16(fn.bdf, cap + kMsixControl);
  const uint32_t vectors = (ctrl & pcie::kMsixCtrlTableSizeMask) + 1u;
  const uint32_t table = ecam.read32(fn.bdf, cap + kMsixTable);
  const uint32_t pba = ecam.read32(fn.bdf, cap + kMsixPba);
  const uint32_t table_bir = table & pcie::kMsixBirMask;
  const uint32_t pba_bir = pba & pcie::kMsixBirMask;
  const uint64_t table_off = table & pcie::kMsixOffsetMask;
  const uint64_t pba_off = pba & pcie::kMsixOffsetMask;
  if (table_bir >= pcie::kBarCount || pba_bir >= pcie::kBarCount)
    return Status::kBadHardware;

  const pcie::Bar& regs_bar = fn.bars[kRegsBar];
  const pcie::Bar& table_bar = fn.bars[table_bir];
  const pcie::Bar& pba_bar = fn.bars[pba_bir];
  if (!usable(regs_bar) || !usable(table_bar) || !usable(pba_bar))
    return Status::kNotFound;
  if (regs_bar.size < sizeof(IvshmemRegs))
    return Status::kBadHardware;
  const uint64_t table_bytes = static_cast<uint64_t>(vectors) * sizeof(pcie::MsixEntry);
  const uint64_t pba_bytes = (vectors + 63u) / 64u * 8u;  // one bit per vector, in qwords
  if (table_off > table_bar.size || table_bytes > table_bar.size - table_off ||
      pba_off > pba_bar.size || pba_bytes > pba_bar.size - pba_off)
    return Status::kBadHardware;

  SharedMemory shm;
  HAL_TRY(shared_memory(fn, &shm));

  ecam_ = &ecam;
  bdf_ = fn.bdf;
  msix_cap_ = cap;
  vectors_ = vectors;
  regs_ = regs_bar.cpu_base;
  table_ = table_bar.cpu_base + table_off;
  pba_ = pba_bar.cpu_base + pba_off;
  shm_ = shm;

  ecam.write16(bdf_, msix_cap_ + kMsixControl, ctrl & ~pcie::kMsixCtrlEnable);
  for (uint32_t v = 0; v < vectors_; ++v)
    mmio::write32(&entry(table_, v)->vector_control, pcie::kMsixVectorMasked);
  return Status::kOk;
}

Status IvshmemDoorbell::set_vector(uint32_t vector, const gic::MsiMessage& msg) {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  if (vector >= vectors_)
    return Status::kOutOfRange;
  volatile pcie::MsixEntry* e = entry(table_, vector);
  mmio::write32(&e->msg_addr_lo, static_cast<uint32_t>(msg.address));
  mmio::write32(&e->msg_addr_hi, static_cast<uint32_t>(msg.address >> 32));
  mmio::write32(&e->msg_data, msg.data);
  mmio::write32(&e->vector_control, 0);
  return Status::kOk;
}

Status IvshmemDoorbell::mask_vector(uint32_t vector) {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  if (vector >= vectors_)
    return Status::kOutOfRange;
  mmio::write32(&entry(table_, vector)->vector_control, pcie::kMsixVectorMasked);
  return Status::kOk;
}

Status IvshmemDoorbell::route_to_v2m(const gic::Gicv2m& v2m, uint32_t first_msi,
                                     uint32_t* first_spi) {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  if (first_spi == nullptr)
    return Status::kInvalidArgument;
  // Check the whole range first so a short frame leaves the table untouched.
  if (first_msi >= v2m.spi_count() || vectors_ > v2m.spi_count() - first_msi)
    return v2m.spi_count() == 0 ? Status::kNotReady : Status::kOutOfRange;
  for (uint32_t v = 0; v < vectors_; ++v) {
    gic::MsiMessage msg;
    HAL_TRY(v2m.message(first_msi + v, &msg));
    HAL_TRY(set_vector(v, msg));
  }
  return v2m.spi_for(first_msi, first_spi);
}

Status IvshmemDoorbell::enable_msix() {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  const uint16_t ctrl = ecam_->read16(bdf_, msix_cap_ + kMsixControl);
  ecam_->write16(bdf_, msix_cap_ + kMsixControl,
                 (ctrl | pcie::kMsixCtrlEnable) & ~pcie::kMsixCtrlFunctionMask);
  return Status::kOk;
}

Status IvshmemDoorbell::disable_msix() {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  const uint16_t ctrl = ecam_->read16(bdf_, msix_cap_ + kMsixControl);
  ecam_->write16(bdf_, msix_cap_ + kMsixControl, ctrl & ~pcie::kMsixCtrlEnable);
  return Status::kOk;
}

bool IvshmemDoorbell::msix_enabled() const {
  if (ecam_ == nullptr)
    return false;
  const uint16_t ctrl = ecam_->read16(bdf_, msix_cap_ + kMsixControl);
  return (ctrl & pcie::kMsixCtrlEnable) && !(ctrl & pcie::kMsixCtrlFunctionMask);
}

uint32_t IvshmemDoorbell::position() const {
  if (ecam_ == nullptr)
    return 0;
  return mmio::read32(&mmio::block_at<IvshmemRegs>(static_cast<uintptr_t>(regs_))->IVPosition);
}

Status IvshmemDoorbell::ring(uint16_t peer, uint16_t vector) {
  if (ecam_ == nullptr)
    return Status::kNotReady;
  mmio::write32(&mmio::block_at<IvshmemRegs>(static_cast<uintptr_t>(regs_))->Doorbell,
                (static_cast<uint32_t>(peer) << kDoorbellPeerShift) | vector);
  return Status::kOk;
}

}  // namespace hal::ivshmem
