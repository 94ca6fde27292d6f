// GICv2m MSI frame logic: validate MSI_TYPER once at init, then hand out
// (address, data) pairs. The frame is never written by the firmware: devices
// write MSI_SETSPI_NS themselves when they signal an MSI.
#include "hal/gic.h"

#include "hal/mmio.h"

namespace hal::gic {

Status Gicv2m::init(uintptr_t frame_base, uint32_t gic_lines) {
  if (frame_base == 0)
    return Status::kInvalidArgument;
  volatile V2mRegs* regs = mmio::block_at<V2mRegs>(frame_base);
  const uint32_t typer = mmio::read32(&regs->MSI_TYPER);
  const uint32_t base = (typer >> kV2mTyperBaseShift) & kV2mTyperBaseMask;
  const uint32_t count = typer & kV2mTyperCountMask;
  const uint32_t limit = (gic_lines != 0 && gic_lines < kMaxIntid) ? gic_lines : kMaxIntid;
  if (count == 0 || base < kFirstSpi || base + count > limit)
    return Status::kBadHardware;
  frame_ = frame_base;
  spi_base_ = base;
  spi_count_ = count;
  return Status::kOk;
}

Status Gicv2m::spi_for(uint32_t n, uint32_t* spi) const {
  if (frame_ == 0)
    return Status::kNotReady;
  if (spi == nullptr)
    return Status::kInvalidArgument;
  if (n >= spi_count_)
    return Status::kOutOfRange;
  *spi = spi_base_ + n;
  return Status::kOk;
}

Status Gicv2m::message(uint32_t n, MsiMessage* out) const {
  if (out == nullptr)
    return Status::kInvalidArgument;
  uint32_t spi = 0;
  HAL_TRY(spi_for(n, &spi));
  out->address = doorbell_address();
  out->data = spi;
  return Status::kOk;
}

}  // namespace hal::gic
