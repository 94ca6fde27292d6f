// PL011 driver logic over hal::mmio. The init order follows the PL011 TRM
// (section 3.3.8): disable, let the transmitter drain, flush the FIFOs by
// clearing FEN, program the divisors, then LCR_H (whose write latches
// IBRD/FBRD into the baud generator), then enable. Every flag wait counts FR
// reads against spin_limit so a stuck flag becomes kTimeout, not a hang.
#include "hal/uart.h"

#include "hal/mmio.h"

namespace hal::uart {
namespace {

constexpr uint32_t kMaxIbrd = 0xFFFF;

}  // namespace

Status compute_divisors(uint32_t clock_hz, uint32_t baud, Divisors* out) {
  if (clock_hz == 0 || baud == 0 || out == nullptr)
    return Status::kInvalidArgument;
  // BAUDDIV = clock / (16 * baud); in 1/64ths that is clock * 4 / baud,
  // rounded to nearest.
  const uint64_t div64 = (static_cast<uint64_t>(clock_hz) * 4 + baud / 2) / baud;
  const uint64_t ibrd = div64 >> 6;
  const uint64_t fbrd = div64 & 0x3F;
  if (ibrd == 0 || ibrd > kMaxIbrd || (ibrd == kMaxIbrd && fbrd != 0))
    return Status::kInvalidArgument;
  out->ibrd = static_cast<uint32_t>(ibrd);
  out->fbrd = static_cast<uint32_t>(fbrd);
  return Status::kOk;
}

Status Pl011::init(const Pl011Config& cfg) {
  if (cfg.base == 0 || cfg.spin_limit == 0)
    return Status::kInvalidArgument;
  Divisors div;
  HAL_TRY(compute_divisors(cfg.clock_hz, cfg.baud, &div));

  volatile Pl011Regs* regs = mmio::block_at<Pl011Regs>(cfg.base);
  mmio::write32(&regs->CR, 0);
  uint32_t spins = 0;
  while (mmio::read32(&regs->FR) & kFrBusy) {
    if (++spins >= cfg.spin_limit)
      return Status::kTimeout;
  }
  mmio::write32(&regs->LCR_H, 0);  // FEN = 0 flushes both FIFOs
  mmio::write32(&regs->IBRD, div.ibrd);
  mmio::write32(&regs->FBRD, div.fbrd);
  mmio::write32(&regs->LCR_H, kLcrhWlen8 | kLcrhFen);
  mmio::write32(&regs->IMSC, 0);
  mmio::write32(&regs->ICR, kIntAll);
  mmio::write32(&regs->CR, kCrUarten | kCrTxe | kCrRxe);

  regs_ = regs;
  spin_limit_ = cfg.spin_limit;
  return Status::kOk;
}

Status Pl011::putc(char c) {
  if (regs_ == nullptr)
    return Status::kNotReady;
  uint32_t spins = 0;
  while (mmio::read32(&regs_->FR) & kFrTxff) {
    if (++spins >= spin_limit_)
      return Status::kTimeout;
  }
  mmio::write32(&regs_->DR, static_cast<uint8_t>(c));
  return Status::kOk;
}

Status Pl011::write(const char* buf, size_t len) {
  if (regs_ == nullptr)
    return Status::kNotReady;
  if (buf == nullptr && len != 0)
    return Status::kInvalidArgument;
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] == '\n')
      HAL_TRY(putc('\r'));
    HAL_TRY(putc(buf[i]));
  }
  return Status::kOk;
}

Status Pl011::puts(const char* s) {
  if (s == nullptr)
    return Status::kInvalidArgument;
  size_t len = 0;
  while (s[len] != '\0')
    ++len;
  return write(s, len);
}

Status Pl011::flush() {
  if (regs_ == nullptr)
    return Status::kNotReady;
  uint32_t spins = 0;
  while (mmio::read32(&regs_->FR) & kFrBusy) {
    if (++spins >= spin_limit_)
      return Status::kTimeout;
  }
  return Status::kOk;
}

Status Pl011::getc(char* out) {
  if (regs_ == nullptr)
    return Status::kNotReady;
  if (out == nullptr)
    return Status::kInvalidArgument;
  if (mmio::read32(&regs_->FR) & kFrRxfe)
    return Status::kNotFound;
  const uint32_t dr = mmio::read32(&regs_->DR);
  if (dr & kDrErrors)
    mmio::write32(&regs_->RSR_ECR, 0);  // any write clears the error flags
  *out = static_cast<char>(dr & 0xFF);
  return Status::kOk;
}

}  // namespace hal::uart
