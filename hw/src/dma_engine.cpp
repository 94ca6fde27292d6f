// One DMA engine. See vtrn/hw/dma_engine.h.
#include "vtrn/hw/dma_engine.h"

#include <string.h>

#include <algorithm>

#include "vtrn/ctrl_ring.h"

namespace vtrn::hw {

using hostif::load_acquire;
using hostif::store_release;
using namespace vtrn::dma;

namespace {

bool range_in(uint64_t off, uint64_t len, uint64_t limit) { return off <= limit && len <= limit - off; }

constexpr uint64_t kIrqChunkBytes = 1u << 20;

}  // namespace

void DmaEngine::Counting::copy(void* dst, const void* src, size_t length) {
  memcpy(dst, src, length);
  bytes += length;
  ++copies;
}

DmaEngine::DmaEngine(const ChipMemory& mem, uint32_t index, const EngineProps& props, Signals& signals,
                     ErrorLog& errors, Clock clock)
    : mem_(mem), index_(index), props_(props), signals_(signals), errors_(errors), clock_(clock),
      blk_(mem.dma(index)), stats_(&mem.dma(index)->stats) {
  reset();
}

void DmaEngine::reset() {
  memset(blk_, 0, sizeof *blk_);
  fw_queue_ = Queue(&blk_->fw_queue, blk_->fw_sq, blk_->fw_cq, engine::kDmaFwDepth, &blk_->fw_queue_stats);
  fw_queue_.set_error_hook(this);
  for (auto& q : host_) q = Queue();
  host_mask_ = 0;
  map_ = AddressMap{};
  mpu_.clear();
  mpu_.clear_remap();
  config_seen_ = 0;
  inject_seen_ = load_acquire(&mem_.control()->inject_seq);
  halted_ = false;
  fail_armed_ = false;
  __atomic_store_n(&blk_->state, uint32_t(engine::kEngineIdle), __ATOMIC_RELEASE);
}

void DmaEngine::on_descriptor_error(const Descriptor& d, Status status) {
  ++pass_errors_;
  engine::ErrorRecord r{};
  r.source = engine::kSourceDma;
  r.engine = index_;
  r.queue = current_queue_;
  r.status = status;
  r.cookie = d.cookie;
  r.mpu_generation = mpu_.generation();
  switch (status) {
    case kErrNotAllocated:
    case kErrEcc:
      r.code = engine::kEngineMpuFault;
      r.address = mpu_.last_fault().address;
      r.length = mpu_.last_fault().length;
      break;
    case kErrSrcRange:
    case kErrAddrOverflow:
      r.code = engine::kEngineBadAddress;
      r.address = d.src;
      r.length = d.length;
      if (status == kErrAddrOverflow && d.src <= UINT64_MAX - d.length) r.address = d.dst;
      break;
    case kErrDstRange:
      r.code = engine::kEngineBadAddress;
      r.address = d.dst;
      r.length = d.length;
      break;
    case kErrEngine:
      r.code = engine::kEngineInjected;
      r.address = d.dst;
      r.length = d.length;
      break;
    default:
      return;  // a malformed descriptor, not an address fault: its status says it all
  }
  errors_.post(r);
}

namespace {

// The same host queues, window and HBM range (flags and generation aside).
bool same_queues(const engine::DmaConfig& a, const engine::DmaConfig& b) {
  return a.host_queue_mask == b.host_queue_mask && a.dma_region_offset == b.dma_region_offset &&
         a.queue_count == b.queue_count && a.depth == b.depth && a.host_window_offset == b.host_window_offset &&
         a.host_window_size == b.host_window_size && a.hbm_base == b.hbm_base && a.hbm_size == b.hbm_size &&
         a.remap_base == b.remap_base && a.remap_size == b.remap_size;
}

}  // namespace

void DmaEngine::apply_config() {
  engine::DmaConfig c;
  memcpy(&c, &blk_->config, sizeof c);
  config_seen_ = c.config_gen;
  if (host_mask_ != 0 && same_queues(c, applied_)) {
    // Only the pause bit (or nothing) changed: the queues and their chains
    // in flight stay as they are.
    paused_ = (c.flags & engine::kDmaConfigPaused) != 0;
    applied_ = c;
    blk_->config_status = engine::kEngineOk;
    __atomic_store_n(&blk_->config_ack, config_seen_, __ATOMIC_RELEASE);
    return;
  }
  uint32_t field = engine::kFieldNone;
  const uint64_t stride = queue_stride(c.depth);
  if (c.host_queue_mask != 0) {
    if (c.queue_count == 0 || c.queue_count > kMaxQueues || c.depth < kMinDepth || c.depth > kMaxDepth ||
        (c.depth & (c.depth - 1))) {
      field = engine::kFieldGeometry;
    } else if ((c.dma_region_offset & 4095) != 0 ||
               !range_in(c.dma_region_offset, dma_region_bytes(c.queue_count, c.depth), mem_.bar2_size)) {
      field = engine::kFieldRegion;
    } else if (c.host_queue_mask >> c.queue_count) {
      field = engine::kFieldQueueMask;
    }
  }
  const uint64_t region_end = c.dma_region_offset + (c.host_queue_mask ? dma_region_bytes(c.queue_count, c.depth) : 0);
  if (field == engine::kFieldNone && c.host_window_size != 0) {
    const bool inside = range_in(c.host_window_offset, c.host_window_size, mem_.bar2_size);
    const bool overlaps = c.host_queue_mask != 0 && c.host_window_offset < region_end &&
                          c.dma_region_offset < c.host_window_offset + c.host_window_size;
    if (!inside || overlaps) field = engine::kFieldWindow;
  }
  if (field == engine::kFieldNone && (c.hbm_size == 0 || !mem_.ram_at(c.hbm_base, c.hbm_size)))
    field = engine::kFieldHbm;
  // The remap window of stitched allocations (ABI 1.2): the MPU maps its
  // translated windows into a view of that size (set_remap validates it).
  mpu_.clear_remap();
  if (field == engine::kFieldNone && (c.remap_size != 0 || c.remap_base != 0)) {
    RemapTarget t;
    t.ram_fd = mem_.ram_fd;
    t.ram_base = mem_.ram_base;
    t.ram_size = mem_.ram_size;
    t.hbm_base = c.hbm_base;
    t.hbm_size = c.hbm_size;
    t.remap_base = c.remap_base;
    t.remap_size = c.remap_size;
    if (!mpu_.set_remap(t)) field = engine::kFieldRemap;
  }

  if (field != engine::kFieldNone) {
    mpu_.clear_remap();
    host_mask_ = 0;
    paused_ = false;
    applied_ = engine::DmaConfig{};
    map_ = AddressMap{};
    engine::ErrorRecord r{};
    r.code = engine::kEngineBadConfig;
    r.source = engine::kSourceDma;
    r.engine = index_;
    r.queue = engine::kQueueFirmware;
    r.detail = field;
    errors_.post(r);
    blk_->config_status = engine::kEngineBadConfig | (field << 8);
  } else {
    map_ = AddressMap{};
    map_.host_window = c.host_window_size ? mem_.bar2 + c.host_window_offset : nullptr;
    map_.host_window_size = c.host_window_size;
    map_.hbm = mem_.ram_at(c.hbm_base, c.hbm_size);
    map_.hbm_base = c.hbm_base;
    map_.hbm_size = c.hbm_size;
    map_.policy = &mpu_;
    if (mpu_.remap_view() != nullptr) {
      map_.remap = mpu_.remap_view();
      map_.remap_base = c.remap_base;
      map_.remap_size = c.remap_size;
    }
    host_mask_ = c.host_queue_mask;
    paused_ = (c.flags & engine::kDmaConfigPaused) != 0;
    applied_ = c;
    for (uint32_t q = 0; q < kMaxQueues; ++q) {
      host_[q] = Queue();
      if (!(host_mask_ & (1u << q))) continue;
      uint8_t* b = mem_.bar2 + c.dma_region_offset + kDmaQueuesOffset + uint64_t(q) * stride;
      host_[q] = Queue(reinterpret_cast<QueueControl*>(b), reinterpret_cast<Descriptor*>(b + kQueueSqOffset),
                       reinterpret_cast<Completion*>(b + cq_offset(c.depth)), c.depth,
                       reinterpret_cast<QueueStats*>(b + kQueueStatsOffset));
      host_[q].set_error_hook(this);
    }
    blk_->config_status = engine::kEngineOk;
  }
  // Release: the status is visible before the ack that says it is final.
  __atomic_store_n(&blk_->config_ack, config_seen_, __ATOMIC_RELEASE);
}

bool DmaEngine::check_inject() {
  engine::ControlBlock* ctl = mem_.control();
  const uint32_t seq = load_acquire(&ctl->inject_seq);
  if (seq == inject_seen_) return false;
  inject_seen_ = seq;
  const uint32_t kind = load_acquire(&ctl->inject_kind);
  if ((kind != engine::kInjectDma && kind != engine::kInjectDmaFail) || load_acquire(&ctl->inject_engine) != index_)
    return false;
  if (kind == engine::kInjectDmaFail) {
    // Fires on the next descriptor some queue of this engine would copy;
    // the error hook posts the record and the ack follows (run_pass).
    fail_armed_ = true;
    fail_seq_ = seq;
    return true;
  }
  halted_ = true;
  __atomic_store_n(&blk_->state, uint32_t(engine::kEngineHalted), __ATOMIC_RELEASE);
  engine::ErrorRecord r{};
  r.code = engine::kEngineInjected;
  r.source = engine::kSourceDma;
  r.engine = index_;
  r.queue = engine::kQueueFirmware;
  errors_.post(r);
  store_release(&ctl->inject_ack, seq);
  return true;
}

bool DmaEngine::has_work() const {
  if (__atomic_load_n(&blk_->config.config_gen, __ATOMIC_ACQUIRE) != config_seen_) return true;
  if (load_acquire(&mem_.control()->inject_seq) != inject_seen_) return true;
  if (halted_) return false;
  if (fw_queue_.has_work()) return true;
  for (uint32_t q = 0; q < kMaxQueues; ++q) {
    if (!paused_ && (host_mask_ & (1u << q)) && host_[q].has_work()) return true;
  }
  return false;
}

void DmaEngine::publish_stats(uint64_t busy_ns, uint64_t bytes, uint32_t descriptors, uint32_t chains,
                              uint32_t errors, uint32_t fw_irqs, uint32_t host_irqs) {
  stats_->units += chains;
  stats_->descriptors += descriptors;
  stats_->bytes += bytes;
  stats_->errors += errors;
  stats_->busy_ns += busy_ns;
  stats_->modeled_ns += modeled_ns(bytes, props_.dma_bytes_per_s);
  stats_->irqs += fw_irqs;
  stats_->host_irqs += host_irqs;
  stats_.publish();
}

DmaPass DmaEngine::run_pass() {
  DmaPass p;
  if (__atomic_load_n(&blk_->config.config_gen, __ATOMIC_ACQUIRE) != config_seen_) {
    apply_config();
    p.worked = true;
  }
  if (check_inject()) p.worked = true;
  if (halted_) {
    // A halt consumed nothing, so nothing in flight was checked against an
    // older MPU table: new tables are acknowledged at once, and HBM
    // requests do not wait for a halted engine.
    const uint32_t gen = mpu_.refresh(mem_.mpu());
    engine::MpuHeader& mh = mem_.mpu()->header;
    if (load_acquire(&mh.dma_ack[index_]) != gen) store_release(&mh.dma_ack[index_], gen);
    return p;
  }

  mpu_.refresh(mem_.mpu());
  const uint64_t t0 = clock_();
  Counting copier;
  pass_errors_ = 0;
  uint32_t fw_irqs = 0, host_irqs = 0;
  bool host_activity = false;
  // Polled in pieces of kIrqChunkBytes, so an interrupt a chain asked for
  // goes out as soon as it completed, not after a pass of up to 8 MiB: a
  // host that sleeps until then finds the ring drained, and the engine then
  // waits for it to wake and refill (a tenth of a 1 MiB copy's time and
  // more when its CPU was idle).
  auto serve = [&](Queue& q, uint32_t queue_id) {
    current_queue_ = queue_id;
    const bool fw = queue_id == engine::kQueueFirmware;
    uint32_t taken = 0;
    uint64_t moved = 0;
    // An injected fault goes to the first queue that copies something.
    if (fail_armed_) q.fail_next(kErrEngine);
    const uint64_t q0 = clock_();
    while (taken < budget_.descriptors && moved < budget_.bytes) {
      const uint64_t bytes0 = copier.bytes;
      const PollResult r = q.poll(map_, copier, budget_.descriptors - taken,
                                  std::min(budget_.bytes - moved, kIrqChunkBytes));
      if (fail_armed_ && !q.fail_pending()) {
        fail_armed_ = false;
        store_release(&mem_.control()->inject_ack, fail_seq_);
      }
      const uint64_t copied = copier.bytes - bytes0;
      taken += r.descriptors;
      moved += copied;
      p.descriptors += r.descriptors;
      p.completions += r.completions;
      if (!fw && (r.descriptors || r.completions)) host_activity = true;
      if (r.irq) {
        if (fw) {
          signals_.chip_irq(uint16_t(engine::kVectorDma0 + index_));
          ++fw_irqs;
        } else {
          signals_.host_irq();
          ++host_irqs;
        }
      }
      // Stopped short of the byte piece: the ring is empty or the
      // completion ring full.
      if (r.descriptors == 0 || copied < kIrqChunkBytes) break;
    }
    if (fail_armed_) q.fail_next(kOk);  // not here: the next queue
    // The queue's own busy time (QueueStats::busy_ns, what `vtrn dma stats`
    // and dma_bench's chip-busy column read), as the CPU copier's scheduler
    // counts it: the time spent serving it.
    if (taken != 0) q.add_busy_ns(clock_() - q0);
  };
  serve(fw_queue_, engine::kQueueFirmware);
  for (uint32_t q = 0; q < kMaxQueues; ++q) {
    if (!paused_ && (host_mask_ & (1u << q))) serve(host_[q], q);
  }
  // Every chain of this pass was checked against this generation or a
  // newer one: an older table can no longer matter to anything in flight.
  const uint32_t gen = mpu_.generation();
  engine::MpuHeader& mh = mem_.mpu()->header;
  if (load_acquire(&mh.dma_ack[index_]) != gen) store_release(&mh.dma_ack[index_], gen);

  if (p.descriptors || p.completions) {
    p.worked = true;
    const bool armed_host = __atomic_load_n(&blk_->config.host_irq_armed, __ATOMIC_ACQUIRE) != 0;
    // The accounting interrupt, unless the pass raised the vector already.
    const bool accounting = fw_irqs == 0 && host_activity && armed_host;
    publish_stats(clock_() - t0, copier.bytes, p.descriptors, p.completions, pass_errors_,
                  fw_irqs + (accounting ? 1 : 0), host_irqs);
    if (accounting) signals_.chip_irq(uint16_t(engine::kVectorDma0 + index_));
  }
  return p;
}

}  // namespace vtrn::hw
