// One tensor engine. See vtrn/hw/tensor_engine.h.
#include "vtrn/hw/tensor_engine.h"

#include <string.h>

#include <cblas.h>

#include "vtrn/ctrl_ring.h"
#include "vtrn/dma_abi.h"
#include "vtrn/kernels.h"

namespace vtrn::hw {

using hostif::load_acquire;
using hostif::store_release;
using namespace vtrn::engine;

extern "C" void openblas_set_num_threads(int);

void blas_single_threaded() { openblas_set_num_threads(1); }

void sgemm_abt(uint32_t m, uint32_t n, uint32_t k, const float* a, const float* b, float* c, uint32_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(k), 0.0f, c,
              int(ldc));
}

TensorEngine::TensorEngine(const ChipMemory& mem, uint32_t index, const EngineProps& props, Signals& signals,
                           ErrorLog& errors, Clock clock)
    : mem_(mem), index_(index), props_(props), signals_(signals), errors_(errors), clock_(clock),
      blk_(mem.tensor(index)), stats_(&mem.tensor(index)->stats) {
  reset();
}

void TensorEngine::reset() {
  memset(blk_, 0, sizeof *blk_);
  sq_cons_ = sq_prod_seen_ = cq_prod_ = 0;
  error_ = 0;
  mpu_.clear();
  mpu_.clear_remap();
  config_seen_ = 0;
  inject_seen_ = load_acquire(&mem_.control()->inject_seq);
  fail_next_ = false;
}

bool TensorEngine::has_work() const {
  if (load_acquire(&mem_.control()->inject_seq) != inject_seen_) return true;
  if (__atomic_load_n(&blk_->config.config_gen, __ATOMIC_ACQUIRE) != config_seen_) return true;
  return error_ == 0 && load_acquire(&blk_->sq_prod) != sq_cons_;
}

void TensorEngine::latch(uint32_t e) {
  if (error_) return;
  error_ = e;
  store_release(&blk_->error, e);
  ErrorRecord r{};
  r.code = kEngineQueueBroken;
  r.source = kSourceTensor;
  r.engine = index_;
  r.detail = e;
  errors_.post(r);
}

void TensorEngine::fault(const TensorCommand& c, TensorStatus s, uint32_t code, uint64_t addr, uint64_t len) {
  ErrorRecord r{};
  r.code = code;
  r.source = kSourceTensor;
  r.engine = index_;
  r.status = s;
  r.address = addr;
  r.length = len;
  r.cookie = c.cookie;
  r.mpu_generation = mpu_.generation();
  errors_.post(r);
}

// The remap window (ABI 1.3): the same validation and view as a DMA
// engine's (Mpu::set_remap), translated windows' pages anywhere in the RAM
// vtrn-hw maps (IdBlock::hbm_base/hbm_size).
void TensorEngine::apply_config() {
  const uint32_t gen = __atomic_load_n(&blk_->config.config_gen, __ATOMIC_ACQUIRE);
  TensorConfig c;
  memcpy(&c, &blk_->config, sizeof c);
  config_seen_ = gen;
  // Forget the snapshot too: the next refresh rebuilds it for the new
  // window (translated windows kept only with a view to map them in).
  mpu_.clear();
  mpu_.clear_remap();
  uint32_t field = kFieldNone;
  if (c.remap_base != 0 || c.remap_size != 0) {
    RemapTarget t;
    t.ram_fd = mem_.ram_fd;
    t.ram_base = mem_.ram_base;
    t.ram_size = mem_.ram_size;
    t.hbm_base = mem_.ram_base;
    t.hbm_size = mem_.ram_size;
    t.remap_base = c.remap_base;
    t.remap_size = c.remap_size;
    if (!mpu_.set_remap(t)) field = kFieldRemap;
  }
  if (field != kFieldNone) {
    mpu_.clear_remap();
    ErrorRecord r{};
    r.code = kEngineBadConfig;
    r.source = kSourceTensor;
    r.engine = index_;
    r.address = c.remap_base;
    r.length = c.remap_size;
    r.detail = field;
    errors_.post(r);
    blk_->config_status = kEngineBadConfig | (field << 8);
  } else {
    blk_->config_status = kEngineOk;
  }
  // Release: the status is visible before the ack that says it is final.
  __atomic_store_n(&blk_->config_ack, config_seen_, __ATOMIC_RELEASE);
}

uint8_t* TensorEngine::at(uint64_t addr, uint64_t len) const {
  if (uint8_t* p = mem_.ram_at(addr, len)) return p;
  uint8_t* view = mpu_.remap_view();
  const RemapTarget& t = mpu_.remap();
  if (view == nullptr || addr < t.remap_base || len > t.remap_size || addr - t.remap_base > t.remap_size - len)
    return nullptr;
  return view + (addr - t.remap_base);
}

TensorStatus TensorEngine::validate(const TensorCommand& c, Operand ops[5], uint32_t* ldc_out) {
  if (c.opcode != kTensorOpGemm) return kTensorBadOpcode;
  if (c.flags & ~uint32_t(kTensorKnownFlags)) return kTensorBadFlags;
  if (!num::dtype_valid(c.dtype)) return kTensorBadShape;
  const auto dt = num::DType(c.dtype);
  if (!num::check_gemm(dt, c.m, c.n, c.k).ok()) return kTensorBadShape;
  const uint32_t ldc = c.ldc ? c.ldc : c.n;
  if (ldc < c.n) return kTensorBadShape;
  const bool mx = dt == num::DType::kMXFP4;
  ops[0] = {c.a, num::operand_bytes(dt, c.m, c.k)};
  ops[1] = {c.b, num::operand_bytes(dt, c.n, c.k)};
  ops[2] = {c.c, (uint64_t(c.m - 1) * ldc + c.n) * 4};
  ops[3] = {c.a_scales, mx ? num::scale_bytes(dt, c.m, c.k) : 0};
  ops[4] = {c.b_scales, mx ? num::scale_bytes(dt, c.n, c.k) : 0};
  const uint64_t align = dt == num::DType::kF32 ? 4 : dt == num::DType::kBF16 ? 2 : 1;
  if ((c.a | c.b) % align != 0 || c.c % 4 != 0) return kTensorMisaligned;
  const uint32_t used = mx ? 5 : 3;
  for (uint32_t i = 0; i < used; ++i) {
    if (ops[i].addr > UINT64_MAX - ops[i].bytes) return kTensorAddrOverflow;
  }
  for (uint32_t i = 0; i < used; ++i) {
    if (!at(ops[i].addr, ops[i].bytes)) {
      fault(c, kTensorRange, kEngineBadAddress, ops[i].addr, ops[i].bytes);
      return kTensorRange;
    }
  }
  for (uint32_t i = 0; i < used; ++i) {
    if (mpu_.check(ops[i].addr, ops[i].bytes) != dma::kOk) {
      fault(c, kTensorMpuFault, kEngineMpuFault, ops[i].addr, ops[i].bytes);
      return kTensorMpuFault;
    }
  }
  for (uint32_t i = 0; i < used; ++i) {
    if (i == 2) continue;
    if (ops[i].addr < ops[2].addr + ops[2].bytes && ops[2].addr < ops[i].addr + ops[i].bytes) return kTensorOverlap;
  }
  *ldc_out = ldc;
  return kTensorOk;
}

TensorStatus TensorEngine::execute(const TensorCommand& c, uint32_t ldc) {
  const auto dt = num::DType(c.dtype);
  // validate() found every operand whole in RAM or the remap view.
  const uint8_t* a = at(c.a, 1);
  const uint8_t* b = at(c.b, 1);
  float* out = reinterpret_cast<float*>(at(c.c, 1));
  const float* af;
  const float* bf;
  if (dt == num::DType::kF32) {
    // Already f32 and aligned (validate): multiply in place.
    af = reinterpret_cast<const float*>(a);
    bf = reinterpret_cast<const float*>(b);
  } else {
    a_.resize(size_t(c.m) * c.k);
    b_.resize(size_t(c.n) * c.k);
    const uint8_t* as = dt == num::DType::kMXFP4 ? at(c.a_scales, 1) : nullptr;
    const uint8_t* bs = dt == num::DType::kMXFP4 ? at(c.b_scales, 1) : nullptr;
    num::dequantize_operand(dt, a, as, c.m, c.k, a_.data());
    num::dequantize_operand(dt, b, bs, c.n, c.k, b_.data());
    af = a_.data();
    bf = b_.data();
  }
  sgemm_abt(c.m, c.n, c.k, af, bf, out, ldc);
  return kTensorOk;
}

bool TensorEngine::run_pass() {
  ControlBlock* ctl = mem_.control();
  const uint32_t seq = load_acquire(&ctl->inject_seq);
  if (seq != inject_seen_) {
    inject_seen_ = seq;
    if (load_acquire(&ctl->inject_kind) == kInjectTensor && load_acquire(&ctl->inject_engine) == index_)
      fail_next_ = true;
  }
  // A new remap window first: the snapshot below is rebuilt for it.
  if (__atomic_load_n(&blk_->config.config_gen, __ATOMIC_ACQUIRE) != config_seen_) apply_config();
  // Between commands nothing is in flight: the current table is the one
  // every later command is checked against, so it can be acknowledged now
  // (an idle engine acknowledges on the wake-up the fw's doorbell causes).
  mpu_.refresh(mem_.mpu());
  const uint32_t gen = mpu_.generation();
  if (load_acquire(&mem_.mpu()->header.tensor_ack[index_]) != gen)
    store_release(&mem_.mpu()->header.tensor_ack[index_], gen);
  if (error_) return false;
  const uint32_t prod = load_acquire(&blk_->sq_prod);
  if (int32_t(prod - sq_prod_seen_) < 0) {
    latch(dma::kQueueSqIndexBackward);
    return false;
  }
  if (prod - sq_cons_ > kTensorDepth) {
    latch(dma::kQueueSqIndexJump);
    return false;
  }
  sq_prod_seen_ = prod;
  if (prod == sq_cons_) return false;
  const uint32_t used = cq_prod_ - load_acquire(&blk_->cq_cons);
  if (used > kTensorDepth) {
    latch(dma::kQueueCqConsumerAhead);
    return false;
  }
  if (used == kTensorDepth) return false;  // completion ring full: wait for cq_cons

  TensorCommand c;
  memcpy(&c, &blk_->sq[sq_cons_ % kTensorDepth], sizeof c);
  ++sq_cons_;
  // Release: our read of the slot is done before the fw may reuse it.
  store_release(&blk_->sq_cons, sq_cons_);
  store_release(&blk_->state, kEngineBusy);

  const uint64_t t0 = clock_();
  Operand ops[5];
  uint32_t ldc = 0;
  TensorStatus s = validate(c, ops, &ldc);
  if (s == kTensorOk && fail_next_) {
    fail_next_ = false;
    s = kTensorInjected;
    fault(c, s, kEngineInjected, 0, 0);
    store_release(&ctl->inject_ack, inject_seen_);
  }
  if (s == kTensorOk) s = execute(c, ldc);
  const uint64_t wall = clock_() - t0;

  TensorCompletion done{};
  done.cookie = c.cookie;
  done.status = s;
  done.engine = index_;
  if (s == kTensorOk) {
    done.flops = kern::gemm_flops(c.m, c.n, c.k);
    done.modeled_ns = modeled_ns(done.flops, props_.tensor_flops_per_s[c.dtype]);
  }
  done.wall_ns = wall;
  blk_->cq[cq_prod_ % kTensorDepth] = done;
  // Release: the completion is visible before the index that publishes it.
  store_release(&blk_->cq_prod, ++cq_prod_);

  const bool irq = (c.flags & kTensorIrq) && load_acquire(&blk_->irq_armed);
  ++stats_->units;
  if (s != kTensorOk) ++stats_->errors;
  stats_->flops += done.flops;
  if (s == kTensorOk) stats_->bytes += ops[0].bytes + ops[1].bytes + ops[2].bytes + ops[3].bytes + ops[4].bytes;
  stats_->busy_ns += wall;
  stats_->modeled_ns += done.modeled_ns;
  stats_->irqs += irq ? 1 : 0;
  stats_.publish();
  if (load_acquire(&blk_->sq_prod) == sq_cons_) store_release(&blk_->state, kEngineIdle);
  if (irq) signals_.chip_irq(uint16_t(kVectorTensor0 + index_));
  return true;
}

}  // namespace vtrn::hw
