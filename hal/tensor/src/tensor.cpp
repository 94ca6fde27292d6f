// Tensor engine queue driver. See hal/tensor.h.
#include "hal/tensor.h"

#include <string.h>

#include "hal/mmio.h"

namespace hal::tensor {

using namespace vtrn::engine;

Status TensorEngine::init(copy::EngineRegion& region, uint32_t index) {
  if (region.base() == 0) return Status::kNotReady;
  if (index >= region.tensor_engines()) return Status::kOutOfRange;
  region_ = &region;
  index_ = index;
  blk_ = region.tensor(index);
  sq_prod_ = mmio::read32(&blk_->sq_prod.value);
  cq_cons_ = mmio::read32(&blk_->cq_cons.value);
  config_gen_ = (region.id().capabilities & kCapTensorRemap) ? mmio::read32(&blk_->config.config_gen) : 0;
  return Status::kOk;
}

Status TensorEngine::configure(const TensorConfig& config) {
  if (!blk_) return Status::kNotReady;
  if (!(region_->id().capabilities & kCapTensorRemap)) return Status::kNotFound;
  if (config.reserved0 != 0) return Status::kInvalidArgument;
  for (uint64_t r : config.reserved) {
    if (r != 0) return Status::kInvalidArgument;
  }
  TensorConfig c = config;
  c.config_gen = config_gen_;
  // Every field but the generation first; the generation publishes them.
  memcpy(reinterpret_cast<uint8_t*>(&blk_->config) + 4, reinterpret_cast<const uint8_t*>(&c) + 4, sizeof c - 4);
  mmio::write32(&blk_->config.config_gen, ++config_gen_);
  return region_->ring(uint16_t(kVectorTensor0 + index_));
}

bool TensorEngine::config_done(uint32_t* status) const {
  if (!blk_ || config_gen_ == 0 || mmio::read32(&blk_->config_ack) != config_gen_) return false;
  if (status) *status = mmio::read32(&blk_->config_status);
  return true;
}

Status TensorEngine::submit(const Gemm& g) {
  if (!blk_) return Status::kNotReady;
  if (g.m == 0 || g.n == 0 || g.k == 0) return Status::kInvalidArgument;
  if (sq_prod_ - cq_cons_ >= kTensorDepth) return Status::kCapacity;
  TensorCommand c{};
  c.opcode = kTensorOpGemm;
  c.dtype = g.dtype;
  c.flags = g.irq ? uint32_t(kTensorIrq) : 0u;
  c.m = g.m;
  c.n = g.n;
  c.k = g.k;
  c.ldc = g.ldc;
  c.a = g.a;
  c.a_scales = g.a_scales;
  c.b = g.b;
  c.b_scales = g.b_scales;
  c.c = g.c;
  c.cookie = g.cookie;
  memcpy(&blk_->sq[sq_prod_ % kTensorDepth], &c, sizeof c);
  mmio::write32(&blk_->sq_prod.value, ++sq_prod_);
  return Status::kOk;
}

Status TensorEngine::ring() {
  if (!region_) return Status::kNotReady;
  return region_->ring(uint16_t(kVectorTensor0 + index_));
}

Status TensorEngine::poll(TensorCompletion* out) {
  if (!blk_) return Status::kNotReady;
  if (!out) return Status::kInvalidArgument;
  const uint32_t prod = mmio::read32(&blk_->cq_prod.value);
  if (prod == cq_cons_) return Status::kNotFound;
  // More completions than commands in flight: the engine broke the ABI.
  if (prod - cq_cons_ > sq_prod_ - cq_cons_) return Status::kBadHardware;
  memcpy(out, &blk_->cq[cq_cons_ % kTensorDepth], sizeof *out);
  mmio::write32(&blk_->cq_cons.value, ++cq_cons_);
  return Status::kOk;
}

void TensorEngine::arm_irq(bool on) {
  if (blk_) mmio::write32(&blk_->irq_armed.value, on ? 1 : 0);
}

uint32_t TensorEngine::error() const { return blk_ ? mmio::read32(&blk_->error.value) : 0; }

}  // namespace hal::tensor
