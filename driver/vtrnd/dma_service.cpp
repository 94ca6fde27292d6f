// vtrnd's DMA service (see dma_service.h).
#include "dma_service.h"

#include "api_enums.h"

#include <string.h>

#include <algorithm>

#include "vtrn/drv/log.h"

namespace drv {

using namespace vtrn::dma;

namespace {

constexpr uint32_t kTransferInflight = 8;  // chunks of one write/read in flight at once
// The bench's HBM slots start this far into their half of HBM. The host
// window and HBM both start on 1 MiB boundaries, so without it source and
// destination are a large power of two apart and alias in QEMU TCG's
// direct-mapped TLB: a 1 MiB copy then ran at 30% of the guest's memcpy.
// 17 pages is far from every power of two the TLB index could wrap at.
constexpr uint64_t kBenchSkew = 17 * 4096;

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

uint64_t percentile(std::vector<uint64_t>& v, double p) {
  if (v.empty()) return 0;
  size_t k = size_t(p * double(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(k), v.end());
  return v[k];
}

}  // namespace

DmaService::DmaService(EventLoop* loop, DmaServiceOptions opts, ReplyFn reply)
    : loop_(loop), opts_(opts), reply_(std::move(reply)) {}

DmaService::~DmaService() {
  for (auto& [chip, cd] : chips_) {
    if (cd->tick != 0) loop_->cancel_timer(cd->tick);
    for (auto& [id, j] : cd->jobs)
      if (j->timer != 0) loop_->cancel_timer(j->timer);
    chip->on_dma_event = nullptr;
  }
}

void DmaService::add_chip(Chip* chip) {
  auto cd = std::make_unique<ChipDma>();
  cd->chip = chip;
  ChipDma* raw = cd.get();
  chips_[chip] = std::move(cd);
  chip->on_dma_event = [this, raw] { on_event(*raw); };
}

void DmaService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

DmaService::ChipDma* DmaService::ready_chip(uint64_t cid, uint64_t id, Chip* chip) {
  return ready_chip(chip, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

DmaService::ChipDma* DmaService::ready_chip(Chip* chip, const Refuse& refuse) {
  auto it = chips_.find(chip);
  const std::string label = "chip " + std::to_string(chip->id());
  if (it == chips_.end()) {
    refuse(Error(Code::kInternal, label + ": no DMA service"));
    return nullptr;
  }
  if (chip->state() != ChipState::kReady) {
    refuse(Error(Code::kNotReady, chip->not_ready_reason()));
    return nullptr;
  }
  if (!chip->dma().attached()) {
    refuse(Error(Code::kChipError, label + ": firmware offers no DMA (capability bit not set)"));
    return nullptr;
  }
  return it->second.get();
}

// Caps on queued work.

bool DmaService::charge(uint64_t cid, uint64_t id, Job& j, uint64_t bytes) {
  j.tenant = opts_.tenant_of ? uint64_t(opts_.tenant_of(cid)) : (1ull << 32) + cid;
  TenantLoad& l = load_[j.tenant];
  auto busy = [&](const std::string& held) {
    if (l.requests == 0 && l.bytes == 0) load_.erase(j.tenant);
    const std::string who = opts_.tenant_of ? "uid " + std::to_string(j.tenant) : "this client";
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BUSY, who + " has " + held + "; retry when they finish");
    return false;
  };
  if (l.requests >= opts_.max_queued_requests)
    return busy(std::to_string(l.requests) + " DMA requests queued (cap " +
                std::to_string(opts_.max_queued_requests) + ")");
  if (bytes > opts_.max_queued_bytes || l.bytes > opts_.max_queued_bytes - bytes)
    return busy(std::to_string(l.bytes) + " bytes of DMA queued, " + std::to_string(bytes) + " more asked (cap " +
                std::to_string(opts_.max_queued_bytes) + ")");
  ++l.requests;
  l.bytes += bytes;
  j.charged = true;
  j.charged_bytes = bytes;
  return true;
}

void DmaService::uncharge(Job& j) {
  if (!j.charged) return;
  j.charged = false;
  auto it = load_.find(j.tenant);
  if (it == load_.end()) return;
  TenantLoad& l = it->second;
  l.requests -= std::min<uint32_t>(l.requests, 1);
  l.bytes -= std::min(l.bytes, j.charged_bytes);
  if (l.requests == 0 && l.bytes == 0) load_.erase(it);
}

bool DmaService::claim(Chip* chip, uint64_t cid, uint64_t id, Job& j, uint64_t addr, uint64_t len,
                       const std::string& what) {
  if (!opts_.hbm_claim) return true;
  Result<uint64_t> c = opts_.hbm_claim(cid, chip, addr, len, what);
  if (!c.ok()) {
    release_claims(chip, j);
    reply_error(cid, id, to_api(c.error()), c.error().detail());
    return false;
  }
  if (c.value() != 0) j.claims.push_back(c.value());
  return true;
}

void DmaService::release_claims(Chip* chip, Job& j) {
  if (opts_.hbm_release)
    for (uint64_t c : j.claims) opts_.hbm_release(chip, c);
  j.claims.clear();
}

// Requests.

std::span<const Route> DmaService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_DMA_WRITE, true},
      {VTRN__API__REQUEST__BODY_DMA_READ, true},
      {VTRN__API__REQUEST__BODY_DMA_COPY, true},
      {VTRN__API__REQUEST__BODY_DMA_BENCH, true},
      {VTRN__API__REQUEST__BODY_DMA_STATS, true},
      {VTRN__API__REQUEST__BODY_DMA_RESET, true, true},
      {VTRN__API__REQUEST__BODY_DMA_INJECT, true, true},
  };
  return kRoutes;
}

void DmaService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  const uint64_t id = req.id;
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_DMA_WRITE: return write(cid, id, chip, *req.dma_write);
    case VTRN__API__REQUEST__BODY_DMA_READ: return read(cid, id, chip, *req.dma_read);
    case VTRN__API__REQUEST__BODY_DMA_COPY: return copy(cid, id, chip, *req.dma_copy);
    case VTRN__API__REQUEST__BODY_DMA_BENCH: return bench(cid, id, chip, *req.dma_bench);
    case VTRN__API__REQUEST__BODY_DMA_STATS: return stats(cid, id, chip);
    case VTRN__API__REQUEST__BODY_DMA_RESET: return reset(cid, id, chip, *req.dma_reset);
    case VTRN__API__REQUEST__BODY_DMA_INJECT: return inject(cid, id, chip, *req.dma_inject);
    default: return;
  }
}

void DmaService::write(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaWriteRequest& r) {
  start_transfer(Origin{cid, id, nullptr}, Kind::kWrite, chip, r.hbm_addr, r.data.data, r.data.len);
}

void DmaService::read(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaReadRequest& r) {
  start_transfer(Origin{cid, id, nullptr}, Kind::kRead, chip, r.hbm_addr, nullptr, r.length);
}

void DmaService::write(Chip* chip, uint64_t hbm_addr, const uint8_t* data, size_t len, TransferDone done) {
  start_transfer(Origin{next_internal_++, 0, std::move(done)}, Kind::kWrite, chip, hbm_addr, data, len);
}

void DmaService::read(Chip* chip, uint64_t hbm_addr, uint32_t len, TransferDone done) {
  start_transfer(Origin{next_internal_++, 0, std::move(done)}, Kind::kRead, chip, hbm_addr, nullptr, len);
}

void DmaService::start_transfer(Origin from, Kind kind, Chip* chip, uint64_t hbm_addr, const uint8_t* data,
                                uint64_t len) {
  auto refuse = [this, &from](const Error& e) {
    if (from.done) return from.done(e);
    reply_error(from.cid, from.id, to_api(e), e.detail());
  };
  ChipDma* cd = ready_chip(chip, refuse);
  if (cd == nullptr) return;
  DmaEngine& e = chip->dma();
  const bool write = kind == Kind::kWrite;
  if (!write && (len == 0 || len > kMaxReadBytes)) {
    return refuse(Error(Code::kOutOfRange,
                        "DMA read length " + std::to_string(len) + " outside 1.." + std::to_string(kMaxReadBytes)));
  }
  if ((write && len == 0) || !e.hbm_contains(hbm_addr, len)) {
    return refuse(Error(Code::kOutOfRange, std::string(write ? "DMA write of " : "DMA read of ") +
                                               std::to_string(len) + " bytes at " + hex(hbm_addr) +
                                               " is outside HBM [" + hex(e.hbm_base()) + ", " +
                                               hex(e.hbm_base() + e.hbm_size()) + ")"));
  }
  auto j = std::make_unique<Job>();
  if (!from.done && !claim(chip, from.cid, from.id, *j, hbm_addr, len, write ? "DMA write to" : "DMA read of"))
    return;
  // A client's request is charged before anything is allocated for it; a
  // service's transfer (a job's buffers) is bounded by that service.
  if (!from.done && !charge(from.cid, from.id, *j, len)) return release_claims(chip, *j);
  j->kind = kind;
  j->hbm_addr = hbm_addr;
  j->length = len;
  // A read's result buffer is taken when its first chunk is issued, not
  // while it waits in the queue.
  if (write) j->data.assign(data, data + len);
  const uint64_t chunks = (len + opts_.chunk_bytes - 1) / opts_.chunk_bytes;
  j->chunks = chunks;
  j->cid = from.cid;
  j->req_id = from.id;
  j->done = std::move(from.done);
  start_job(*cd, std::move(j), chunks, kTransferInflight);
}

void DmaService::copy(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaCopyRequest& r) {
  ChipDma* cd = ready_chip(cid, id, chip);
  if (cd == nullptr) return;
  DmaEngine& e = chip->dma();
  const uint32_t nseg = r.segments == 0 ? 1 : r.segments;
  auto bad = [&](const std::string& why) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "DMA copy: " + why);
  };
  if (r.raw && !opts_.allow_raw) return bad("raw mode is off (start vtrnd with --allow-raw-dma)");
  if (!r.raw && (r.src_space != VTRN__API__DMA_SPACE__DMA_SPACE_HBM ||
                 r.dst_space != VTRN__API__DMA_SPACE__DMA_SPACE_HBM))
    return bad("only HBM -> HBM without raw (use DmaWrite / DmaRead for host data)");
  // Unset or -1: vtrnd picks.
  const int32_t queue = r.queue_select_case == VTRN__API__DMA_COPY_REQUEST__QUEUE_SELECT_QUEUE ? r.queue : -1;
  if (queue < -1 || queue >= int32_t(e.queue_count())) return bad("no queue " + std::to_string(queue));
  if (r.length == 0 && !r.raw) return bad("zero length");
  if (nseg > e.depth() || (!r.raw && nseg > e.max_chain_descs()))
    return bad(std::to_string(nseg) + " segments exceed the chain limit");
  if (r.length < nseg && !r.raw) return bad("fewer bytes than segments");
  if (r.extra_flags != 0 && !r.raw) return bad("extra_flags needs raw");
  auto j = std::make_unique<Job>();
  j->kind = Kind::kCopy;
  j->raw = r.raw;
  j->queue = queue;
  j->cid = cid;
  j->req_id = id;
  const uint32_t piece = r.length / nseg;
  for (uint32_t i = 0; i < nseg; ++i) {
    const uint64_t off = uint64_t(piece) * i;
    const uint32_t len = i + 1 == nseg ? r.length - piece * (nseg - 1) : piece;
    DmaSegment s{r.src_addr + off, r.dst_addr + off, len,
                 r.src_space == VTRN__API__DMA_SPACE__DMA_SPACE_HOST,
                 r.dst_space == VTRN__API__DMA_SPACE__DMA_SPACE_HOST};
    j->segs.push_back(s);
  }
  if (r.raw) {
    for (uint32_t i = 0; i < nseg; ++i) {
      const DmaSegment& s = j->segs[i];
      Descriptor d{};
      d.src = s.src;
      d.dst = s.dst;
      d.length = s.length;
      d.flags = r.extra_flags | (s.src_host ? kDescSrcHost : 0u) | (s.dst_host ? kDescDstHost : 0u) |
                (i == 0 ? uint32_t(kDescFirst) : 0u) | (i + 1 == nseg ? uint32_t(kDescLast | kDescIrq) : 0u);
      j->raw_descs.push_back(d);
    }
  } else {
    DmaChain c{j->segs.data(), nseg};
    uint32_t seg = 0;
    if (uint32_t st = e.check_chain(c, &seg); st != kOk)
      return bad("segment " + std::to_string(seg) + ": " + dma_status_name(st));
  }
  // Raw chains too: their HBM sides may not reach another tenant's memory
  // (out-of-range and wrapping addresses are the device's to refuse).
  for (const DmaSegment& s : j->segs) {
    if (!s.src_host && !claim(chip, cid, id, *j, s.src, s.length, "DMA copy from")) return;
    if (!s.dst_host && !claim(chip, cid, id, *j, s.dst, s.length, "DMA copy to")) return;
  }
  if (!charge(cid, id, *j, 0)) return release_claims(chip, *j);
  start_job(*cd, std::move(j), 1, 1);
}

void DmaService::bench(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaBenchRequest& r) {
  ChipDma* cd = ready_chip(cid, id, chip);
  if (cd == nullptr) return;
  DmaEngine& e = chip->dma();
  auto j = std::make_unique<Job>();
  auto bad = [&](const std::string& why) {
    release_claims(chip, *j);
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "DMA bench: " + why);
  };
  // The span defaults to all of HBM (a chip started with --hbm-dma-unchecked);
  // `vtrn dma bench` passes an allocation it holds.
  const uint64_t span_base = r.hbm_bytes ? r.hbm_addr : e.hbm_base();
  const uint64_t span_bytes = r.hbm_bytes ? r.hbm_bytes : e.hbm_size();
  if (!e.hbm_contains(span_base, span_bytes))
    return bad("HBM span " + hex(span_base) + " + " + std::to_string(span_bytes) + " is outside HBM [" +
               hex(e.hbm_base()) + ", " + hex(e.hbm_base() + e.hbm_size()) + ")");
  if (!claim(chip, cid, id, *j, span_base, span_bytes, "DMA bench span")) return;
  const uint64_t max_transfer =
      std::min<uint64_t>({e.max_desc_bytes(), e.window_size() / 2, span_bytes / 2 > kBenchSkew ? span_bytes / 2 - kBenchSkew : 0});
  if (r.transfer_bytes == 0 || r.transfer_bytes > max_transfer)
    return bad("transfer size " + std::to_string(r.transfer_bytes) + " outside 1.." + std::to_string(max_transfer));
  const uint32_t depth = r.depth == 0 ? std::min<uint32_t>(32, e.depth()) : r.depth;
  if (depth > e.depth()) return bad("depth " + std::to_string(depth) + " above the queue depth " + std::to_string(e.depth()));
  const uint32_t queues = r.queues == 0 ? 1 : r.queues;
  if (queues > e.queue_count()) return bad(std::to_string(queues) + " queues requested, the chip has " + std::to_string(e.queue_count()));
  const uint32_t batch = r.batch == 0 ? std::min<uint32_t>(32, depth) : r.batch;
  if (batch > depth) return bad("batch above depth");
  if (r.total_bytes == 0 && r.duration_ms == 0) return bad("give total_bytes or duration_ms");
  if (r.duration_ms > kMaxBenchMs) return bad("duration above " + std::to_string(kMaxBenchMs) + " ms");
  if (r.direction != VTRN__API__DMA_DIRECTION__DMA_DIR_H2D && r.direction != VTRN__API__DMA_DIRECTION__DMA_DIR_D2H &&
      r.direction != VTRN__API__DMA_DIRECTION__DMA_DIR_D2D)
    return bad("unknown direction");

  const uint64_t per_chunk = uint64_t(batch) * r.transfer_bytes;
  // Rounded up without overflow: total_bytes near 2^64 must not wrap to 0
  // chunks (a bench that never runs and never ends).
  const uint64_t chunks = r.total_bytes ? r.total_bytes / per_chunk + (r.total_bytes % per_chunk != 0)
                                        : DmaScheduler::kUnbounded;
  if (!charge(cid, id, *j, r.direction == VTRN__API__DMA_DIRECTION__DMA_DIR_D2D ? 0 : r.transfer_bytes))
    return release_claims(chip, *j);
  j->kind = Kind::kBench;
  j->cid = cid;
  j->req_id = id;
  j->dir = r.direction;
  j->transfer = r.transfer_bytes;
  j->depth = depth;
  j->queues = queues;
  j->batch = batch;
  // d2d copies from the lower half of HBM to the upper half; the others
  // cycle through all of it. Slots are transfer-sized, so no descriptor
  // overlaps itself.
  j->hbm_base = span_base;
  j->hbm_span = span_bytes;
  const uint64_t span = (j->dir == VTRN__API__DMA_DIRECTION__DMA_DIR_D2D ? span_bytes / 2 : span_bytes) - kBenchSkew;
  j->slots = std::max<uint64_t>(1, span / j->transfer);
  const uint32_t max_inflight = queues * ((depth + batch - 1) / batch);
  j->chunks = chunks;  // the last batch of a sized run always interrupts
  const uint64_t job_id = next_job_;
  // A sized run stops at the same ten-minute cap as a timed one, with what
  // it moved so far: no total is a way to hold a queue forever.
  {
    const uint32_t run_ms = r.duration_ms != 0 ? r.duration_ms : kMaxBenchMs;
    Chip* ch = chip;
    j->timer = loop_->add_timer_in(uint64_t(run_ms) * 1'000'000, [this, ch, job_id, cid] {
      auto it = chips_.find(ch);
      if (it == chips_.end()) return;
      ChipDma& c = *it->second;
      auto jt = c.jobs.find(job_id);
      if (jt == c.jobs.end()) return;
      jt->second->timer = 0;
      if (c.sched.close(cid, job_id) && jt->second->chunks_in_flight == 0) finish_job(c, job_id);
    });
  }
  start_job(*cd, std::move(j), chunks, max_inflight);
}

void DmaService::stats(uint64_t cid, uint64_t id, Chip* chip) {
  ChipDma* cd = ready_chip(cid, id, chip);
  if (cd == nullptr) return;
  DmaEngine& e = chip->dma();
  e.poll_all();
  const uint32_t n = e.queue_count();
  std::vector<Vtrn__Api__DmaQueueStats> qs(n);
  std::vector<Vtrn__Api__DmaQueueStats*> qp(n);
  std::vector<DmaQueueSnapshot> snaps(n);
  for (uint32_t q = 0; q < n; ++q) {
    DmaQueueSnapshot& s = snaps[q];
    (void)e.snapshot(q, &s);
    Vtrn__Api__DmaQueueStats& m = qs[q];
    m = VTRN__API__DMA_QUEUE_STATS__INIT;
    m.queue = q;
    m.descriptors = s.device.descriptors;
    m.chains = s.device.chains;
    m.bytes = s.device.bytes;
    m.errors = s.device.errors;
    m.busy_ns = s.device.busy_ns;
    m.irqs = s.device.irqs;
    m.n_errors_by_status = kStatusCount;
    m.errors_by_status = s.device.errors_by_status;
    m.device_error = s.device_error;
    m.host_fault = s.fault_text.data();
    m.resetting = s.resetting;
    m.in_flight = s.in_flight;
    m.free_slots = s.free_slots;
    m.host_chains_submitted = s.chains_submitted;
    m.host_chains_completed = s.chains_completed;
    m.resets = s.resets;
    m.device_stats_valid = s.device_stats_valid;
    qp[q] = &m;
  }
  Vtrn__Api__DmaStatsResponse sr = VTRN__API__DMA_STATS_RESPONSE__INIT;
  sr.n_queues = n;
  sr.queues = qp.data();
  sr.depth = e.depth();
  sr.hbm_base = e.hbm_base();
  sr.hbm_size = e.hbm_size();
  sr.window_bytes = e.window_size();
  sr.window_free_bytes = e.window_free_bytes();
  sr.max_desc_bytes = e.max_desc_bytes();
  sr.max_chain_descs = e.max_chain_descs();
  sr.clients_waiting = uint32_t(cd->sched.active_clients());
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_DMA_STATS, &sr.base);
}

void DmaService::inject(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaInjectRequest& r) {
  ChipDma* cd = ready_chip(cid, id, chip);
  if (cd == nullptr) return;
  if (!opts_.allow_raw) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "DMA fault injection is off (start vtrnd with --allow-raw-dma)");
    return;
  }
  DmaEngine& e = chip->dma();
  if (r.queue >= e.queue_count()) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "DMA inject: no queue " + std::to_string(r.queue) + " (chip has " +
                    std::to_string(e.queue_count()) + ")");
    return;
  }
  switch (r.fault) {
    case VTRN__API__DMA_FAULT__DMA_FAULT_SQ_INDEX_JUMP:
    case VTRN__API__DMA_FAULT__DMA_FAULT_SQ_INDEX_BACKWARD:
      (void)e.inject_sq_index_fault(r.queue, r.fault == VTRN__API__DMA_FAULT__DMA_FAULT_SQ_INDEX_BACKWARD);
      break;
    case VTRN__API__DMA_FAULT__DMA_FAULT_CQ_CONSUMER_AHEAD:
      (void)e.inject_cq_consumer_fault(r.queue);
      break;
    default:
      reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                  "DMA inject: unknown fault " + std::to_string(int(r.fault)));
      return;
  }
  Vtrn__Api__DmaInjectResponse ir = VTRN__API__DMA_INJECT_RESPONSE__INIT;
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_DMA_INJECT, &ir.base);
}

void DmaService::reset(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__DmaResetRequest& r) {
  ChipDma* cd = ready_chip(cid, id, chip);
  if (cd == nullptr) return;
  DmaEngine& e = chip->dma();
  if (r.queue < -1 || r.queue >= int32_t(e.queue_count())) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "DMA reset: no queue " + std::to_string(r.queue) + " (chip has " +
                    std::to_string(e.queue_count()) + ")");
    return;
  }
  ResetWaiter w;
  w.cid = cid;
  w.id = id;
  w.deadline = monotonic_ns() + kResetTimeoutNs;
  for (uint32_t q = 0; q < e.queue_count(); ++q) {
    if (r.queue >= 0 && uint32_t(r.queue) != q) continue;
    (void)e.begin_reset(q);
    w.queues.push_back(q);
  }
  DRV_LOGI("chip %u: DMA reset of %s", chip->id(),
           r.queue < 0 ? "every queue" : ("queue " + std::to_string(r.queue)).c_str());
  cd->resets.push_back(std::move(w));
  on_event(*cd);  // chains in flight completed locally: fail their jobs now
  schedule_tick(*cd);
}

void DmaService::client_gone(uint64_t cid) {
  for (auto& [chip, cd] : chips_) {
    cd->sched.remove_client(cid);
    std::vector<uint64_t> drop;
    for (auto& [id, j] : cd->jobs) {
      if (j->cid != cid) continue;
      j->orphan = true;
      if (j->chunks_in_flight == 0) drop.push_back(id);
    }
    for (uint64_t id : drop) finish_job(*cd, id);
    cd->resets.erase(std::remove_if(cd->resets.begin(), cd->resets.end(),
                                    [cid](const ResetWaiter& w) { return w.cid == cid; }),
                     cd->resets.end());
  }
}

// The engine side.

void DmaService::start_job(ChipDma& cd, std::unique_ptr<Job> job, uint64_t chunks, uint32_t max_inflight) {
  job->id = next_job_++;
  job->t0 = monotonic_ns();
  const uint64_t id = job->id;
  cd.sched.add(job->cid, id, chunks, max_inflight);
  cd.jobs[id] = std::move(job);
  pump(cd);
  schedule_tick(cd);
}

void DmaService::schedule_tick(ChipDma& cd) {
  if (cd.tick != 0 || (cd.jobs.empty() && cd.resets.empty())) return;
  ChipDma* p = &cd;
  cd.tick = loop_->add_timer_in(kTickNs, [this, p] {
    p->tick = 0;
    on_event(*p);
  });
}

void DmaService::on_event(ChipDma& cd) {
  DmaEngine& e = cd.chip->dma();
  e.poll_all();
  // The storage is kept from turn to turn (swapped out while in use, in
  // case a finished job's callback gets here again).
  std::vector<DmaResult> results;
  results.swap(results_scratch_);
  results.clear();
  e.collect(&results);
  for (size_t i = 0; i < results.size();) i += on_results(cd, results.data() + i, results.size() - i);
  results_scratch_.swap(results);
  if (!e.attached()) {
    // The chip left READY: everything in flight came back above (kErrReset);
    // what was still queued can never run.
    std::vector<uint64_t> ids;
    for (auto& [id, j] : cd.jobs) ids.push_back(id);
    for (uint64_t id : ids) {
      auto it = cd.jobs.find(id);
      if (it == cd.jobs.end()) continue;
      Job& j = *it->second;
      fail_job(cd, j, Error(Code::kNotReady, cd.chip->not_ready_reason()));
    }
  }
  check_resets(cd);
  pump(cd);
  schedule_tick(cd);
}

void DmaService::check_resets(ChipDma& cd) {
  DmaEngine& e = cd.chip->dma();
  const uint64_t now = monotonic_ns();
  for (size_t i = 0; i < cd.resets.size();) {
    ResetWaiter& w = cd.resets[i];
    bool all = e.attached();
    for (uint32_t q : w.queues) all = all && e.reset_done(q);
    if (!all && now < w.deadline && e.attached()) {
      ++i;
      continue;
    }
    if (all) {
      Vtrn__Api__DmaResetResponse rr = VTRN__API__DMA_RESET_RESPONSE__INIT;
      rr.queues_reset = uint32_t(w.queues.size());
      reply_body(reply_, w.cid, w.id, VTRN__API__RESPONSE__BODY_DMA_RESET, &rr.base);
    } else if (!e.attached()) {
      reply_error(w.cid, w.id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY,
                  "chip " + std::to_string(cd.chip->id()) + " left READY during the DMA reset");
    } else {
      reply_error(w.cid, w.id, VTRN__API__STATUS__STATUS_TIMEOUT,
                  "chip " + std::to_string(cd.chip->id()) + ": DMA reset not acknowledged within 2 s");
    }
    cd.resets.erase(cd.resets.begin() + ptrdiff_t(i));
  }
}

void DmaService::pump(ChipDma& cd) {
  DmaEngine& e = cd.chip->dma();
  if (!e.attached()) return;
  // One doorbell for everything this turn submits (see hold_doorbell).
  e.hold_doorbell();
  while (auto p = cd.sched.next()) {
    auto it = cd.jobs.find(p->job);
    if (it == cd.jobs.end()) continue;  // cannot happen: jobs leave the scheduler first
    Job& j = *it->second;
    Result<Issue> r = issue(cd, j, p->chunk);
    if (r.ok() && r.value() == Issue::kIssued) continue;
    cd.sched.unissue(*p);
    if (r.ok()) break;  // no room: retried on the next completion or tick
    fail_job(cd, j, r.error());
  }
  e.release_doorbell();
}

Result<std::optional<uint32_t>> DmaService::pick_queue(ChipDma& cd, uint32_t needed) {
  DmaEngine& e = cd.chip->dma();
  const uint32_t n = e.queue_count();
  bool usable = false;
  std::string last_fault;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t q = (cd.next_queue + k) % n;
    if (e.free_slots(q) >= needed) {
      cd.next_queue = (q + 1) % n;
      return std::optional<uint32_t>(q);
    }
    std::string text;
    DmaQueueSnapshot s;
    if (e.fault(q, &text) == DmaFault::kNone || (e.snapshot(q, &s) && s.resetting)) {
      usable = true;
    } else {
      last_fault = "queue " + std::to_string(q) + ": " + text;
    }
  }
  if (usable) return std::optional<uint32_t>();
  return Error(Code::kChipError,
               "chip " + std::to_string(cd.chip->id()) + ": every DMA queue is broken (" + last_fault + ")");
}

Result<DmaService::Issue> DmaService::issue(ChipDma& cd, Job& j, uint64_t index) {
  DmaEngine& e = cd.chip->dma();
  Chunk c;
  c.job = j.id;
  c.index = index;
  std::vector<uint64_t> handles;
  DmaError err = DmaError::kOk;
  int q = -1;

  if (j.kind == Kind::kWrite || j.kind == Kind::kRead) {
    c.offset = index * opts_.chunk_bytes;
    c.length = uint32_t(std::min<uint64_t>(opts_.chunk_bytes, j.length - c.offset));
    Result<std::optional<uint32_t>> picked = pick_queue(cd, 1);
    if (!picked.ok()) return picked.error();
    if (!picked.value()) return Issue::kNoRoom;
    q = int(*picked.value());
    if (e.alloc(c.length, &c.buf) != DmaError::kOk) return Issue::kNoRoom;
    c.has_buf = true;
    if (j.kind == Kind::kRead && j.data.size() != j.length) j.data.assign(j.length, 0);
    DmaSegment s;
    if (j.kind == Kind::kWrite) {
      memcpy(c.buf.ptr, j.data.data() + c.offset, c.length);
      s = DmaSegment{c.buf.offset, j.hbm_addr + c.offset, c.length, true, false};
    } else {
      s = DmaSegment{j.hbm_addr + c.offset, c.buf.offset, c.length, false, true};
    }
    DmaChain ch{&s, 1, true};
    handles.resize(1);
    err = e.submit(uint32_t(q), &ch, 1, handles.data());
  } else if (j.kind == Kind::kCopy) {
    const uint32_t need = uint32_t(j.raw ? j.raw_descs.size() : j.segs.size());
    if (j.queue >= 0) {
      q = j.queue;
      if (e.free_slots(uint32_t(q)) < need) {
        std::string text;
        if (e.fault(uint32_t(q), &text) != DmaFault::kNone) {
          return Error(Code::kChipError, "chip " + std::to_string(cd.chip->id()) + ": DMA queue " +
                                             std::to_string(q) + " is broken: " + text);
        }
        return Issue::kNoRoom;
      }
    } else {
      Result<std::optional<uint32_t>> picked = pick_queue(cd, need);
      if (!picked.ok()) return picked.error();
      if (!picked.value()) return Issue::kNoRoom;
      q = int(*picked.value());
    }
    j.used_queue = uint32_t(q);
    if (j.raw) {
      handles.resize(need);
      err = e.submit_raw(uint32_t(q), j.raw_descs.data(), need, handles.data());
    } else {
      DmaChain ch{j.segs.data(), need, true};
      handles.resize(1);
      err = e.submit(uint32_t(q), &ch, 1, handles.data());
    }
  } else {  // bench
    // Its window buffer is taken when the bench starts, not while queued.
    if (!j.has_buf && j.dir != VTRN__API__DMA_DIRECTION__DMA_DIR_D2D) {
      if (e.alloc(j.transfer, &j.buf) != DmaError::kOk) return Issue::kNoRoom;
      j.has_buf = true;
      for (uint32_t i = 0; i < j.transfer; ++i) j.buf.ptr[i] = uint8_t(i * 31 + 7);
    }
    q = int(index % j.queues);
    if (e.free_slots(uint32_t(q)) < j.batch) {
      std::string text;
      if (e.fault(uint32_t(q), &text) != DmaFault::kNone) {
        return Error(Code::kChipError, "chip " + std::to_string(cd.chip->id()) + ": DMA queue " +
                                           std::to_string(q) + " is broken: " + text);
      }
      return Issue::kNoRoom;
    }
    std::vector<DmaSegment> segs(j.batch);
    std::vector<DmaChain> chains(j.batch);
    // At most one interrupt per batch: the last chain's completion implies
    // the rest (a queue runs in order). With several batches in flight per
    // queue, only every irq_every-th asks for one: each interrupt is a vtrnd
    // wake-up plus a doorbell back into the chip, and those, not the copies,
    // bound a 64 B benchmark. The ring keeps at least 3/4 of its batches
    // queued between wake-ups; the 1 ms tick reaps a run's unflagged tail.
    const uint64_t per_queue = (j.depth + j.batch - 1) / j.batch;
    const uint64_t irq_every = std::max<uint64_t>(1, per_queue / 4);
    const bool irq = (index / j.queues) % irq_every == irq_every - 1 || j.chunks == index + 1;
    const uint64_t base = j.hbm_base;
    const uint64_t half = j.hbm_span / 2;
    for (uint32_t i = 0; i < j.batch; ++i) {
      const uint64_t slot = (index * j.batch + i) % j.slots;
      const uint64_t hbm = base + slot * j.transfer;
      // The skew goes on the HBM side facing the window buffer, and on the
      // destination half for HBM -> HBM (see kBenchSkew).
      switch (j.dir) {
        case VTRN__API__DMA_DIRECTION__DMA_DIR_H2D: segs[i] = {j.buf.offset, hbm + kBenchSkew, j.transfer, true, false}; break;
        case VTRN__API__DMA_DIRECTION__DMA_DIR_D2H: segs[i] = {hbm + kBenchSkew, j.buf.offset, j.transfer, false, true}; break;
        default: segs[i] = {hbm, hbm + half + kBenchSkew, j.transfer, false, false}; break;
      }
      chains[i] = DmaChain{&segs[i], 1, irq && i + 1 == j.batch};
    }
    handles.resize(j.batch);
    err = e.submit(uint32_t(q), chains.data(), j.batch, handles.data());
    if (err == DmaError::kOk && j.t_first == 0) j.t_first = monotonic_ns();
  }

  if (err != DmaError::kOk) {
    if (c.has_buf) (void)e.free(c.buf);
    if (err == DmaError::kQueueFull || err == DmaError::kResetting) return Issue::kNoRoom;
    return Error(Code::kChipError, "chip " + std::to_string(cd.chip->id()) + ": DMA submit on queue " +
                                       std::to_string(q) + ": " + dma_error_name(err));
  }
  const uint64_t chunk_id = cd.next_chunk++;
  c.left = uint32_t(handles.size());
  c.wait_handle = handles.back();
  cd.by_handle[handles.back()] = ChipDma::HandleRange{handles.front(), chunk_id};
  cd.chunks[chunk_id] = c;
  ++j.chunks_in_flight;
  return Issue::kIssued;
}

size_t DmaService::on_results(ChipDma& cd, const DmaResult* rs, size_t n) {
  auto h = cd.by_handle.lower_bound(rs[0].handle);
  // Not found: a raw descriptor of a chunk already answered.
  if (h == cd.by_handle.end() || h->second.first > rs[0].handle) return 1;
  const uint64_t first = h->second.first;
  const uint64_t last = h->first;
  const uint64_t chunk_id = h->second.chunk;
  auto ci = cd.chunks.find(chunk_id);
  if (ci == cd.chunks.end()) return 1;
  Chunk& c = ci->second;
  auto ji = cd.jobs.find(c.job);
  Job* j = ji == cd.jobs.end() ? nullptr : ji->second.get();
  if (j != nullptr && j->kind == Kind::kBench) j->t_last = monotonic_ns();
  size_t k = 0;
  for (; k < n && rs[k].handle >= first && rs[k].handle <= last; ++k) {
    const DmaResult& r = rs[k];
    if (j != nullptr) {
      switch (j->kind) {
        case Kind::kWrite:
        case Kind::kRead:
          if (r.status == kOk && j->kind == Kind::kRead) memcpy(j->data.data() + c.offset, c.buf.ptr, c.length);
          if (r.status != kOk && j->first_status == kOk) {
            j->first_status = r.status;
            j->error = Error(Code::kChipError, "chip " + std::to_string(cd.chip->id()) + ": DMA " +
                                                   (j->kind == Kind::kWrite ? "write" : "read") + " chunk at " +
                                                   hex(j->hbm_addr + c.offset) + " failed: " + dma_status_name(r.status));
            if (!j->orphan) cd.sched.close(j->cid, j->id);
          }
          break;
        case Kind::kCopy:
          ++j->completions;
          if (r.handle == c.wait_handle) j->result = r;
          break;
        case Kind::kBench:
          ++j->descs_done;
          j->bytes_done += r.bytes;
          // A long run keeps a bounded, uniform sample.
          j->latencies.add(r.latency_ns);
          j->lat_max = std::max(j->lat_max, r.latency_ns);
          if (r.status != kOk) {
            ++j->errors;
            if (j->first_status == kOk) {
              j->first_status = r.status;
              j->error = Error(Code::kChipError, "chip " + std::to_string(cd.chip->id()) +
                                                     ": DMA bench descriptor failed: " + dma_status_name(r.status));
              if (!j->orphan) cd.sched.close(j->cid, j->id);
            }
          }
          break;
      }
    }
    // A raw chunk is answered by its last descriptor's completion; earlier
    // descriptors may complete (unterminated chains) or not at all (the
    // device only completes at LAST), so stop waiting for them then.
    if (j != nullptr && j->kind == Kind::kCopy && j->raw) {
      if (r.handle != c.wait_handle) continue;
      c.left = 0;
    } else if (--c.left != 0) {
      continue;
    }
    chunk_finished(cd, chunk_id);  // c and j may be gone now
    return k + 1;
  }
  return k;
}

void DmaService::chunk_finished(ChipDma& cd, uint64_t chunk_id) {
  auto ci = cd.chunks.find(chunk_id);
  Chunk c = ci->second;
  cd.chunks.erase(ci);
  // Also forgets raw descriptors that will never complete on their own.
  cd.by_handle.erase(c.wait_handle);
  DmaEngine& e = cd.chip->dma();
  if (c.has_buf && e.attached()) (void)e.free(c.buf);
  auto ji = cd.jobs.find(c.job);
  if (ji == cd.jobs.end()) return;
  Job& j = *ji->second;
  --j.chunks_in_flight;
  if (j.orphan) {
    if (j.chunks_in_flight == 0) finish_job(cd, j.id);
    return;
  }
  if (cd.sched.done(j.cid, j.id)) finish_job(cd, j.id);
}

void DmaService::fail_job(ChipDma& cd, Job& j, const Error& why) {
  if (j.error.ok()) j.error = why;
  const uint64_t id = j.id;
  const bool drained = j.orphan ? j.chunks_in_flight == 0 : cd.sched.close(j.cid, j.id);
  if (drained && j.chunks_in_flight == 0) finish_job(cd, id);
}

void DmaService::finish_job(ChipDma& cd, uint64_t job_id) {
  auto it = cd.jobs.find(job_id);
  if (it == cd.jobs.end()) return;
  std::unique_ptr<Job> j = std::move(it->second);
  cd.jobs.erase(it);
  uncharge(*j);
  cd.sched.remove(j->cid, j->id);
  if (j->timer != 0) loop_->cancel_timer(j->timer);
  if (j->has_buf && cd.chip->dma().attached()) (void)cd.chip->dma().free(j->buf);
  if (!j->orphan) answer(*j);
  // Answered first: a free that waited for these claims may be answered as
  // soon as they go (its firmware answer can be in the ring already), and
  // the client must see the DMA queued before it end first.
  release_claims(cd.chip, *j);
}

void DmaService::answer(Job& j) {
  if (j.done) {
    // A service's transfer: the data a read brought back, or nothing.
    if (!j.error.ok()) return j.done(j.error);
    return j.done(j.kind == Kind::kRead ? std::move(j.data) : std::vector<uint8_t>());
  }
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  resp.id = j.req_id;
  Error outcome = j.error;
  const uint64_t elapsed = monotonic_ns() - j.t0;
  Vtrn__Api__DmaWriteResponse wr = VTRN__API__DMA_WRITE_RESPONSE__INIT;
  Vtrn__Api__DmaReadResponse rr = VTRN__API__DMA_READ_RESPONSE__INIT;
  Vtrn__Api__DmaCopyResponse cr = VTRN__API__DMA_COPY_RESPONSE__INIT;
  Vtrn__Api__DmaBenchResponse br = VTRN__API__DMA_BENCH_RESPONSE__INIT;
  std::string status_name;
  switch (j.kind) {
    case Kind::kWrite:
      wr.bytes = j.error.ok() ? j.length : 0;
      wr.elapsed_ns = elapsed;
      wr.chunks = uint32_t(j.chunks);
      resp.body_case = VTRN__API__RESPONSE__BODY_DMA_WRITE;
      resp.dma_write = &wr;
      break;
    case Kind::kRead:
      if (j.error.ok()) {
        rr.data.data = j.data.data();
        rr.data.len = j.data.size();
      }
      rr.elapsed_ns = elapsed;
      rr.chunks = uint32_t(j.chunks);
      resp.body_case = VTRN__API__RESPONSE__BODY_DMA_READ;
      resp.dma_read = &rr;
      break;
    case Kind::kCopy:
      cr.dma_status = j.result.status;
      status_name = dma_status_name(j.result.status);
      cr.dma_status_name = status_name.data();
      cr.bytes = j.result.bytes;
      cr.latency_ns = j.result.latency_ns;
      cr.queue = j.used_queue;
      cr.completions = j.completions;
      // Raw copies report the device's verdict as data: the request itself
      // succeeded when the device answered. A validated copy that failed is
      // a chip error.
      if (outcome.ok() && !j.raw && j.result.status != kOk)
        outcome = Error(Code::kChipError, std::string("DMA copy failed: ") + dma_status_name(j.result.status));
      resp.body_case = VTRN__API__RESPONSE__BODY_DMA_COPY;
      resp.dma_copy = &cr;
      break;
    case Kind::kBench: {
      const uint64_t span = j.t_last > j.t_first ? j.t_last - j.t_first : 0;
      br.bytes = j.bytes_done;
      br.descriptors = j.descs_done;
      br.elapsed_ns = span;
      br.gbytes_per_s = span ? double(j.bytes_done) / double(span) : 0;
      br.descriptors_per_s = span ? double(j.descs_done) * 1e9 / double(span) : 0;
      br.latency_p50_ns = percentile(j.latencies.sample(), 0.50);
      br.latency_p90_ns = percentile(j.latencies.sample(), 0.90);
      br.latency_p99_ns = percentile(j.latencies.sample(), 0.99);
      br.latency_max_ns = j.lat_max;
      br.queues = j.queues;
      br.depth = j.depth;
      br.batch = j.batch;
      br.errors = j.errors;
      resp.body_case = VTRN__API__RESPONSE__BODY_DMA_BENCH;
      resp.dma_bench = &br;
      break;
    }
  }
  resp.status = to_api(outcome);
  std::string text = outcome.detail();  // protobuf-c wants a mutable char*
  resp.error = text.data();
  reply_(j.cid, &resp);
}

}  // namespace drv
