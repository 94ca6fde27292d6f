// GICv2 distributor and CPU interface logic over hal::mmio.
//
// init() brings the distributor to a known state before enabling it: every
// INTID disabled, not pending, not active, so nothing a previous boot (or a
// warm reset through QMP) left behind fires before its handler exists.
// Bulk priority/target programming at init uses 32-bit writes (four INTIDs
// per access) because under TCG each MMIO access is an exit to the device
// model; the per-INTID setters use byte writes so they never touch a
// neighbour's field.
#include "hal/gic.h"

#include "hal/mmio.h"

namespace hal::gic {
namespace {

constexpr uint32_t kAllOnes = 0xFFFFFFFFu;

uint32_t replicate(uint8_t b) { return 0x01010101u * b; }

}  // namespace

Status Gic::init(const GicConfig& cfg) {
  if (cfg.dist_base == 0 || cfg.cpu_base == 0)
    return Status::kInvalidArgument;
  volatile GicdRegs* d = mmio::block_at<GicdRegs>(cfg.dist_base);

  mmio::write32(&d->CTLR, 0);
  const uint32_t typer = mmio::read32(&d->TYPER);
  uint32_t lines = 32 * ((typer & kTyperItLinesMask) + 1);
  if (lines > kMaxIntid)
    lines = kMaxIntid;
  if (lines <= kFirstSpi)
    return Status::kBadHardware;  // a GIC without SPIs cannot take MSIs or devices

  const uint32_t words = (lines + 31) / 32;
  for (uint32_t i = 0; i < words; ++i) {
    mmio::write32(&d->ICENABLER[i], kAllOnes);
    mmio::write32(&d->ICPENDR[i], kAllOnes);
    mmio::write32(&d->ICACTIVER[i], kAllOnes);
  }

  uint8_t self = mmio::read8(&d->ITARGETSR[0]);
  if (self == 0)
    self = 1;
  const uintptr_t prio = cfg.dist_base + offsetof(GicdRegs, IPRIORITYR);
  const uintptr_t target = cfg.dist_base + offsetof(GicdRegs, ITARGETSR);
  for (uint32_t intid = kFirstSpi; intid < lines; intid += 4) {
    mmio::write32(mmio::reg_at<uint32_t>(prio, intid), replicate(kDefaultPriority));
    mmio::write32(mmio::reg_at<uint32_t>(target, intid), replicate(self));
  }
  for (uint32_t i = kFirstSpi / 16; i < (lines + 15) / 16; ++i)
    mmio::write32(&d->ICFGR[i], 0);  // level-sensitive

  mmio::write32(&d->CTLR, kGicdCtlrEnable);

  dist_ = d;
  cpu_ = mmio::block_at<GiccRegs>(cfg.cpu_base);
  lines_ = lines;
  return init_cpu_interface();
}

Status Gic::init_cpu_interface() {
  if (cpu_ == nullptr)
    return Status::kNotReady;
  mmio::write32(&cpu_->PMR, kLowestPriorityMask);
  mmio::write32(&cpu_->BPR, 0);
  mmio::write32(&cpu_->CTLR, kGiccCtlrEnable);
  return Status::kOk;
}

Status Gic::check_intid(uint32_t intid) const {
  if (dist_ == nullptr)
    return Status::kNotReady;
  return intid < lines_ ? Status::kOk : Status::kOutOfRange;
}

Status Gic::enable(uint32_t intid) {
  HAL_TRY(check_intid(intid));
  mmio::write32(&dist_->ISENABLER[intid / 32], 1u << (intid % 32));
  return Status::kOk;
}

Status Gic::disable(uint32_t intid) {
  HAL_TRY(check_intid(intid));
  mmio::write32(&dist_->ICENABLER[intid / 32], 1u << (intid % 32));
  return Status::kOk;
}

Status Gic::set_priority(uint32_t intid, uint8_t priority) {
  HAL_TRY(check_intid(intid));
  mmio::write8(&dist_->IPRIORITYR[intid], priority);
  return Status::kOk;
}

Status Gic::set_trigger(uint32_t intid, Trigger trigger) {
  HAL_TRY(check_intid(intid));
  if (intid < kFirstPpi)
    return Status::kInvalidArgument;
  volatile uint32_t* reg = &dist_->ICFGR[intid / 16];
  const uint32_t shift = (intid % 16) * 2;
  uint32_t v = mmio::read32(reg) & ~(3u << shift);
  if (trigger == Trigger::kEdge)
    v |= kIcfgrEdge << shift;
  mmio::write32(reg, v);
  return Status::kOk;
}

Status Gic::set_target(uint32_t intid, uint8_t cpu_mask) {
  HAL_TRY(check_intid(intid));
  if (intid < kFirstSpi || cpu_mask == 0)
    return Status::kInvalidArgument;
  mmio::write8(&dist_->ITARGETSR[intid], cpu_mask);
  return Status::kOk;
}

Status Gic::clear_pending(uint32_t intid) {
  HAL_TRY(check_intid(intid));
  mmio::write32(&dist_->ICPENDR[intid / 32], 1u << (intid % 32));
  return Status::kOk;
}

bool Gic::is_pending(uint32_t intid) const {
  if (check_intid(intid) != Status::kOk)
    return false;
  return (mmio::read32(&dist_->ISPENDR[intid / 32]) >> (intid % 32)) & 1u;
}

bool Gic::is_enabled(uint32_t intid) const {
  if (check_intid(intid) != Status::kOk)
    return false;
  return (mmio::read32(&dist_->ISENABLER[intid / 32]) >> (intid % 32)) & 1u;
}

Irq Gic::acknowledge() {
  if (cpu_ == nullptr)
    return Irq{kSpuriousIntid, kSpuriousIntid, true};
  const uint32_t iar = mmio::read32(&cpu_->IAR);
  const uint32_t intid = iar & kIarIntidMask;
  return Irq{iar, intid, intid >= kMaxIntid};
}

Status Gic::end_of_interrupt(const Irq& irq) {
  if (cpu_ == nullptr)
    return Status::kNotReady;
  if (irq.spurious || irq.intid >= kMaxIntid)
    return Status::kInvalidArgument;
  mmio::write32(&cpu_->EOIR, irq.iar);
  return Status::kOk;
}

}  // namespace hal::gic
