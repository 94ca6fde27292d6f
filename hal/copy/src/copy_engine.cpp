// The firmware's driver for the hardware engines' region and the DMA
// engines' firmware queues. See hal/copy_engine.h.
#include "hal/copy_engine.h"

#include <string.h>

#include "hal/mmio.h"

namespace hal::copy {

using namespace vtrn::engine;
using vtrn::hostif::CacheLineIndex;

namespace {

uint32_t rd(const CacheLineIndex* i) { return mmio::read32(&i->value); }
void wr(CacheLineIndex* i, uint32_t v) { mmio::write32(&i->value, v); }

}  // namespace

Status EngineRegion::init(uintptr_t region, uint64_t size, uintptr_t doorbell) {
  if (region == 0 || doorbell == 0) return Status::kInvalidArgument;
  const auto* id = reinterpret_cast<const IdBlock*>(region + kIdOffset);
  if (mmio::read32(&id->magic) != kMagic) return Status::kNotFound;
  IdBlock copy;
  memcpy(&copy, reinterpret_cast<const void*>(region + kIdOffset), sizeof copy);
  if (copy.abi_major != kAbiMajor || size < kRegionBytes || copy.region_bytes != kRegionBytes ||
      copy.dma_engines > kMaxDmaEngines || copy.tensor_engines > kMaxTensorEngines ||
      copy.dma_fw_depth != kDmaFwDepth || copy.tensor_depth != kTensorDepth || copy.mpu_windows != kMpuWindows ||
      copy.vector_count != kVectorCount || copy.link_ports > kMaxLinkPorts ||
      (copy.link_ports != 0 && !(copy.capabilities & kCapLinkEngines)))
    return Status::kBadHardware;
  base_ = region;
  doorbell_ = doorbell;
  id_ = copy;
  reset_req_ = rd(&control()->reset_req);
  mpu_gen_ = rd(&reinterpret_cast<MpuBlock*>(base_ + kMpuOffset)->header.generation);
  error_cursor_ = rd(&reinterpret_cast<ErrorBlock*>(base_ + kErrorOffset)->prod);
  inject_seq_ = rd(&control()->inject_seq);
  return Status::kOk;
}

ControlBlock* EngineRegion::control() const { return reinterpret_cast<ControlBlock*>(base_ + kControlOffset); }
DmaEngineBlock* EngineRegion::dma(uint32_t i) const {
  return reinterpret_cast<DmaEngineBlock*>(base_ + dma_engine_offset(i));
}
TensorEngineBlock* EngineRegion::tensor(uint32_t j) const {
  return reinterpret_cast<TensorEngineBlock*>(base_ + tensor_engine_offset(j));
}
LinkEngineBlock* EngineRegion::link(uint32_t p) const {
  return reinterpret_cast<LinkEngineBlock*>(base_ + link_engine_offset(p));
}

Status EngineRegion::ring(uint16_t vector) {
  if (base_ == 0) return Status::kNotReady;
  if (vector >= kVectorCount) return Status::kOutOfRange;
  mmio::write32(reinterpret_cast<volatile uint32_t*>(doorbell_), (uint32_t(kEngineHwPeerId) << 16) | vector);
  return Status::kOk;
}

Status EngineRegion::begin_reset() {
  if (base_ == 0) return Status::kNotReady;
  wr(&control()->reset_req, ++reset_req_);
  return ring(kVectorControl);
}

bool EngineRegion::reset_done() {
  if (base_ == 0) return false;
  if (rd(&control()->reset_ack) != reset_req_) return false;
  // The engines restarted: the MPU is off and the error ring at 0.
  mpu_gen_ = 0;
  error_cursor_ = 0;
  return true;
}

Status EngineRegion::mpu_program(const MpuWindow* windows, uint32_t count, uint32_t* generation) {
  if (base_ == 0) return Status::kNotReady;
  if (count > kMpuWindows || (count && !windows) || !generation) return Status::kOutOfRange;
  auto* mpu = reinterpret_cast<MpuBlock*>(base_ + kMpuOffset);
  const uint32_t gen = mpu_gen_ + 1 == 0 ? 1 : mpu_gen_ + 1;
  const uint32_t bank = gen & 1;
  memcpy(mpu->bank[bank], windows, size_t(count) * sizeof(MpuWindow));
  mmio::write32(&mpu->bank_count[bank], count);
  wr(&mpu->header.count, count);
  // The bank and its count are written before the generation that publishes them.
  wr(&mpu->header.generation, gen);
  mpu_gen_ = gen;
  *generation = gen;
  return ring(kVectorControl);
}

bool EngineRegion::mpu_acked(uint32_t generation) const {
  if (base_ == 0) return false;
  const auto* mpu = reinterpret_cast<const MpuBlock*>(base_ + kMpuOffset);
  for (uint32_t i = 0; i < id_.dma_engines; ++i) {
    if (int32_t(rd(&mpu->header.dma_ack[i]) - generation) < 0) return false;
  }
  for (uint32_t j = 0; j < id_.tensor_engines; ++j) {
    if (int32_t(rd(&mpu->header.tensor_ack[j]) - generation) < 0) return false;
  }
  for (uint32_t p = 0; p < id_.link_ports; ++p) {
    if (int32_t(rd(&link(p)->mpu_ack) - generation) < 0) return false;
  }
  return true;
}

void EngineRegion::arm_errors(bool on) {
  if (base_ != 0) wr(&control()->error_irq_armed, on ? 1 : 0);
}

Status EngineRegion::next_error(ErrorRecord* out, uint32_t* lost) {
  if (base_ == 0) return Status::kNotReady;
  if (!out) return Status::kInvalidArgument;
  auto* eb = reinterpret_cast<ErrorBlock*>(base_ + kErrorOffset);
  const uint32_t prod = rd(&eb->prod);
  uint32_t skipped = 0;
  if (prod - error_cursor_ > kErrorRecords) {
    skipped = prod - error_cursor_ - kErrorRecords;
    error_cursor_ = prod - kErrorRecords;
  }
  if (lost) *lost = skipped;
  if (prod == error_cursor_) return Status::kNotFound;
  memcpy(out, &eb->records[error_cursor_ % kErrorRecords], sizeof *out);
  ++error_cursor_;
  return Status::kOk;
}

bool EngineRegion::errors_pending() const {
  if (base_ == 0) return false;
  const auto* eb = reinterpret_cast<const ErrorBlock*>(base_ + kErrorOffset);
  return rd(&eb->prod) != error_cursor_;
}

Status EngineRegion::inject(uint32_t kind, uint32_t engine) {
  if (base_ == 0) return Status::kNotReady;
  const bool dma = kind == kInjectDma || kind == kInjectDmaFail;
  if ((dma && engine >= id_.dma_engines) || (kind == kInjectTensor && engine >= id_.tensor_engines) ||
      (!dma && kind != kInjectTensor) || (kind == kInjectDmaFail && id_.abi_minor < 2))
    return Status::kOutOfRange;
  ControlBlock* c = control();
  wr(&c->inject_kind, kind);
  wr(&c->inject_engine, engine);
  wr(&c->inject_seq, ++inject_seq_);
  // The engine picks it up on its next pass: wake them all.
  return ring(dma ? uint16_t(kVectorDma0 + engine) : uint16_t(kVectorTensor0 + engine));
}

bool EngineRegion::injected() const { return base_ != 0 && rd(&control()->inject_ack) == inject_seq_; }

uint32_t EngineRegion::heartbeat() const { return base_ ? rd(&control()->heartbeat) : 0; }

Status HwEngine::init(EngineRegion& region, uint32_t index) {
  if (region.base() == 0) return Status::kNotReady;
  if (index >= region.dma_engines()) return Status::kOutOfRange;
  region_ = &region;
  index_ = index;
  blk_ = region.dma(index);
  sq_prod_ = rd(&blk_->fw_queue.sq_prod);
  cq_cons_ = rd(&blk_->fw_queue.cq_cons);
  config_gen_ = mmio::read32(&blk_->config.config_gen);
  return Status::kOk;
}

Status HwEngine::configure(const DmaConfig& config) {
  if (!blk_) return Status::kNotReady;
  DmaConfig c = config;
  c.config_gen = config_gen_;
  // Every field but the generation first; the generation publishes them.
  memcpy(reinterpret_cast<uint8_t*>(&blk_->config) + 4, reinterpret_cast<const uint8_t*>(&c) + 4, sizeof c - 4);
  mmio::write32(&blk_->config.config_gen, ++config_gen_);
  return region_->ring(uint16_t(kVectorDma0 + index_));
}

bool HwEngine::config_done(uint32_t* status) const {
  if (!blk_ || mmio::read32(&blk_->config_ack) != config_gen_) return false;
  if (status) *status = mmio::read32(&blk_->config_status);
  return true;
}

void HwEngine::arm_irq(bool on) {
  if (blk_) wr(&blk_->fw_queue.irq_armed, on ? 1 : 0);
}

Capabilities HwEngine::do_capabilities() const {
  return Capabilities{.alignment = 1, .max_length = vtrn::dma::kMaxDescBytes, .synchronous = false};
}

Status HwEngine::do_start(void* dst, const void* src, size_t length) {
  if (!blk_) return Status::kNotReady;
  if (sq_prod_ - rd(&blk_->fw_queue.sq_cons) >= kDmaFwDepth) return Status::kCapacity;
  vtrn::dma::Descriptor d{};
  d.src = reinterpret_cast<uintptr_t>(src);
  d.dst = reinterpret_cast<uintptr_t>(dst);
  d.length = uint32_t(length);
  d.flags = vtrn::dma::kDescFirst | vtrn::dma::kDescLast | vtrn::dma::kDescIrq;
  d.cookie = ++cookie_;
  memcpy(&blk_->fw_sq[sq_prod_ % kDmaFwDepth], &d, sizeof d);
  wr(&blk_->fw_queue.sq_prod, ++sq_prod_);
  return region_->ring(uint16_t(kVectorDma0 + index_));
}

bool HwEngine::do_poll(Completion* out) {
  if (rd(&blk_->fw_queue.cq_prod) == cq_cons_) return false;
  vtrn::dma::Completion c;
  memcpy(&c, &blk_->fw_cq[cq_cons_ % kDmaFwDepth], sizeof c);
  wr(&blk_->fw_queue.cq_cons, ++cq_cons_);
  last_status_ = vtrn::dma::Status(c.status);
  out->status = c.status == vtrn::dma::kOk && c.cookie == cookie_ ? Status::kOk : Status::kBadHardware;
  out->bytes = c.bytes;
  return true;
}

}  // namespace hal::copy
