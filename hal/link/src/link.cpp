// Link engine queue driver. See hal/link.h.
#include "hal/link.h"

#include <string.h>

#include "hal/mmio.h"

namespace hal::link {

using namespace vtrn::engine;

namespace {

bool range_ok(uint64_t addr, uint64_t length) {
  return length != 0 && length <= kLinkMaxTransfer && addr <= UINT64_MAX - length;
}

}  // namespace

Status LinkEngine::init(copy::EngineRegion& region, uint32_t port) {
  if (region.base() == 0) return Status::kNotReady;
  if (!(region.id().capabilities & kCapLinkEngines)) return Status::kNotFound;
  if (port >= region.link_ports()) return Status::kOutOfRange;
  region_ = &region;
  port_ = port;
  blk_ = region.link(port);
  sq_prod_ = mmio::read32(&blk_->sq_prod.value);
  scq_cons_ = mmio::read32(&blk_->scq_cons.value);
  rq_prod_ = mmio::read32(&blk_->rq_prod.value);
  rcq_cons_ = mmio::read32(&blk_->rcq_cons.value);
  config_gen_ = mmio::read32(&blk_->config.config_gen);
  return Status::kOk;
}

Status LinkEngine::configure(const LinkConfig& config) {
  if (!blk_) return Status::kNotReady;
  for (uint64_t r : config.reserved) {
    if (r != 0) return Status::kInvalidArgument;
  }
  LinkConfig c = config;
  c.config_gen = config_gen_;
  // Every field but the generation first; the generation publishes them.
  memcpy(reinterpret_cast<uint8_t*>(&blk_->config) + 4, reinterpret_cast<const uint8_t*>(&c) + 4, sizeof c - 4);
  mmio::write32(&blk_->config.config_gen, ++config_gen_);
  return ring();
}

bool LinkEngine::config_done(uint32_t* status) const {
  if (!blk_ || config_gen_ == 0 || mmio::read32(&blk_->config_ack) != config_gen_) return false;
  if (status) *status = mmio::read32(&blk_->config_status);
  return true;
}

Status LinkEngine::send(const Send& s) {
  if (!blk_) return Status::kNotReady;
  if (!range_ok(s.addr, s.length)) return Status::kInvalidArgument;
  if (sq_prod_ - scq_cons_ >= kLinkSendDepth) return Status::kCapacity;
  LinkSendDescriptor d{};
  d.addr = s.addr;
  d.length = s.length;
  d.dest_chip = s.dest_chip;
  d.dest_port = s.dest_port;
  d.tag = s.tag;
  d.flags = s.irq ? uint32_t(kLinkIrq) : 0u;
  d.cookie = s.cookie;
  memcpy(&blk_->sq[sq_prod_ % kLinkSendDepth], &d, sizeof d);
  mmio::write32(&blk_->sq_prod.value, ++sq_prod_);
  return Status::kOk;
}

Status LinkEngine::post(const Buffer& b) {
  if (!blk_) return Status::kNotReady;
  if (!range_ok(b.addr, b.length)) return Status::kInvalidArgument;
  if (rq_prod_ - rcq_cons_ >= kLinkRecvDepth) return Status::kCapacity;
  LinkRecvBuffer r{};
  r.addr = b.addr;
  r.length = b.length;
  r.cookie = b.cookie;
  r.flags = b.irq ? uint32_t(kLinkIrq) : 0u;
  memcpy(&blk_->rq[rq_prod_ % kLinkRecvDepth], &r, sizeof r);
  mmio::write32(&blk_->rq_prod.value, ++rq_prod_);
  return Status::kOk;
}

Status LinkEngine::ring() {
  if (!region_) return Status::kNotReady;
  return region_->ring(vector());
}

Status LinkEngine::poll_send(LinkCompletion* out) {
  if (!blk_) return Status::kNotReady;
  if (!out) return Status::kInvalidArgument;
  const uint32_t prod = mmio::read32(&blk_->scq_prod.value);
  if (prod == scq_cons_) return Status::kNotFound;
  // More completions than sends in flight: the engine broke the ABI.
  if (prod - scq_cons_ > sq_prod_ - scq_cons_) return Status::kBadHardware;
  memcpy(out, &blk_->scq[scq_cons_ % kLinkSendDepth], sizeof *out);
  mmio::write32(&blk_->scq_cons.value, ++scq_cons_);
  return Status::kOk;
}

Status LinkEngine::poll_recv(LinkCompletion* out) {
  if (!blk_) return Status::kNotReady;
  if (!out) return Status::kInvalidArgument;
  const uint32_t prod = mmio::read32(&blk_->rcq_prod.value);
  if (prod == rcq_cons_) return Status::kNotFound;
  if (prod - rcq_cons_ > rq_prod_ - rcq_cons_) return Status::kBadHardware;
  memcpy(out, &blk_->rcq[rcq_cons_ % kLinkRecvDepth], sizeof *out);
  mmio::write32(&blk_->rcq_cons.value, ++rcq_cons_);
  return Status::kOk;
}

void LinkEngine::arm_irq(bool on) {
  if (blk_) mmio::write32(&blk_->irq_armed.value, on ? 1 : 0);
}

uint32_t LinkEngine::error() const { return blk_ ? mmio::read32(&blk_->error.value) : 0; }

}  // namespace hal::link
