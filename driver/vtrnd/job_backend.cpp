// DaemonJobBackend (see job_backend.h): the job service's requests mapped
// onto Chip, HbmService and DmaService.
#include "job_backend.h"

#include <string.h>

#include <algorithm>

#include "hbm_service.h"
#include "vtrn/jobs_abi.h"
#include "vtrn/seqlock.h"

namespace drv {

DaemonJobBackend::DaemonJobBackend(EventLoop* loop, const std::vector<std::unique_ptr<Chip>>* chips,
                                   DmaService* dma, HbmService* hbm)
    : loop_(loop), chips_(chips), dma_(dma), hbm_(hbm) {}

Chip* DaemonJobBackend::find(uint32_t chip) {
  for (const auto& c : *chips_) {
    if (c->id() == chip) return c.get();
  }
  return nullptr;
}

void DaemonJobBackend::deliver(std::function<void()> f) {
  if (in_call_ == 0) {
    f();
    return;
  }
  loop_->add_timer_in(0, std::move(f));
}

Error DaemonJobBackend::chip_check(uint32_t chip) {
  Chip* c = find(chip);
  if (c == nullptr) return Error(Code::kNoSuchChip, no_chip_text(chip));
  if (c->state() != ChipState::kReady) return Error(Code::kNotReady, c->not_ready_reason());
  if (!c->dma().attached())
    return Error(Code::kNotReady, "chip " + std::to_string(chip) + " has no DMA region (firmware without DMA)");
  return Error();
}

uint32_t DaemonJobBackend::neuron_cores(uint32_t chip) {
  Chip* c = find(chip);
  return c ? c->options().board.neuron_cores : 0;
}

uint64_t DaemonJobBackend::hbm_bytes(uint32_t chip) {
  Chip* c = find(chip);
  if (c == nullptr) return 0;
  // What DMA can reach is what a job buffer can live in.
  if (c->dma().attached()) return c->dma().hbm_size();
  return uint64_t(c->options().board.hbm.stacks) * c->options().board.hbm.bytes_per_stack;
}

void DaemonJobBackend::hbm_alloc(uint32_t chip, uint64_t owner, uint64_t bytes, AllocDone done) {
  Chip* c = find(chip);
  ++in_call_;
  if (c == nullptr) {
    deliver([done, chip] { done(Error(Code::kNoSuchChip, no_chip_text(chip))); });
  } else {
    hbm_->alloc(c, owner, VTRN__API__HBM_CATEGORY__HBM_CATEGORY_TENSORS, bytes, JobService::kBufferAlign,
                [this, done](Result<uint64_t> addr) { deliver([done, addr] { done(addr); }); });
  }
  --in_call_;
}

void DaemonJobBackend::hbm_free_owner(uint32_t chip, uint64_t owner, FreeDone done) {
  Chip* c = find(chip);
  ++in_call_;
  if (c == nullptr) {
    deliver([done, chip] { done(Error(Code::kNoSuchChip, no_chip_text(chip))); });
  } else {
    hbm_->free_owner(c, owner, [this, done](Result<uint64_t> bytes) {
      deliver([done, e = bytes.error()] { done(e); });
    });
  }
  --in_call_;
}

void DaemonJobBackend::dma_write(uint32_t chip, uint64_t addr, const uint8_t* data, size_t len, Done done) {
  Chip* c = find(chip);
  ++in_call_;
  if (c == nullptr) {
    deliver([done, chip] { done(Error(Code::kNoSuchChip, no_chip_text(chip))); });
  } else {
    dma_->write(c, addr, data, len, [this, done](Result<std::vector<uint8_t>> r) {
      deliver([done, e = r.error()] { done(e); });
    });
  }
  --in_call_;
}

void DaemonJobBackend::dma_read(uint32_t chip, uint64_t addr, uint64_t len, ReadDone done) {
  Chip* c = find(chip);
  ++in_call_;
  if (c == nullptr) {
    deliver([done, chip] { done(Error(Code::kNoSuchChip, no_chip_text(chip))); });
  } else {
    dma_->read(c, addr, uint32_t(len), [this, done](Result<std::vector<uint8_t>> r) {
      deliver([done, r = std::move(r)]() mutable { done(std::move(r)); });
    });
  }
  --in_call_;
}

void DaemonJobBackend::ctrl(uint32_t chip, const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, CtrlDone done) {
  Chip* c = find(chip);
  ++in_call_;
  if (c == nullptr) {
    deliver([done, chip] { done(CtrlResult{Error(Code::kNoSuchChip, no_chip_text(chip)), nullptr, 0}); });
  } else {
    c->submit(req, timeout_ms, false, [this, done](const CtrlResult& r) {
      if (in_call_ == 0) {
        done(r);
        return;
      }
      // Answered inside the call (chip not READY, or the firmware was quick
      // enough for Chip's pump to read the answer before submit returned):
      // the response lives only as long as this callback, so keep a packed
      // copy for the next loop turn.
      CtrlResult later{r.error, nullptr, r.rtt_ns};
      std::vector<uint8_t> packed;
      if (r.response != nullptr) {
        packed.resize(vtrn__ctrl__response__get_packed_size(r.response));
        vtrn__ctrl__response__pack(r.response, packed.data());
      }
      const bool had = r.response != nullptr;
      loop_->add_timer_in(0, [done, later, packed, had]() mutable {
        Vtrn__Ctrl__Response* resp =
            had ? vtrn__ctrl__response__unpack(nullptr, packed.size(), packed.data()) : nullptr;
        if (had && resp == nullptr) {
          done(CtrlResult{Error(Code::kInternal, "response copy does not decode"), nullptr, 0});
          return;
        }
        later.response = resp;
        done(later);
        if (resp) vtrn__ctrl__response__free_unpacked(resp, nullptr);
      });
    });
  }
  --in_call_;
}

namespace {

// Copies one record of the job table under its seqlock.
template <typename T>
bool read_record(const uint8_t* p, T* out) {
  vtrn::hostif::SeqlockRetry retry;
  return vtrn::hostif::seqlock_read(reinterpret_cast<const T*>(p), out, retry);
}

}  // namespace

uint32_t DaemonJobBackend::chip_job_state(uint32_t chip, uint64_t job_id) {
  namespace vj = vtrn::jobs;
  Chip* c = find(chip);
  const uint8_t* base = c ? c->jobs_block() : nullptr;
  if (base == nullptr) return 0;
  vj::JobTableHeader h;
  if (!read_record(base, &h) || h.magic != vj::kJobTableMagic || h.version != vj::kJobTableVersion ||
      h.entry_bytes != sizeof(vj::JobEntry) || h.entry_count > vj::kMaxEntries)
    return 0;
  uint32_t found = 0;
  for (uint32_t i = 0; i < h.entry_count; ++i) {
    vj::JobEntry e;
    if (!read_record(base + vj::kEntriesOffset + uint64_t(i) * sizeof(vj::JobEntry), &e)) continue;
    if (e.job_id != job_id || e.state > vj::kEntryTimedOut) continue;
    // A live slot wins over an ended one that held the same id.
    if (found == 0 || e.state == vj::kEntryQueued || e.state == vj::kEntryRunning) found = e.state;
  }
  return found;
}

std::vector<double> DaemonJobBackend::core_utilization(uint32_t chip_id) {
  namespace vj = vtrn::jobs;
  std::vector<double> out;
  Chip* chip = find(chip_id);
  const uint8_t* base = chip ? chip->jobs_block() : nullptr;
  if (base == nullptr) return out;
  vj::JobTableHeader h;
  if (!read_record(base, &h)) return out;
  if (h.magic != vj::kJobTableMagic || h.version != vj::kJobTableVersion || h.header_bytes != sizeof h ||
      h.core_bytes != sizeof(vj::CoreEntry) || h.core_count == 0 || h.core_count > vj::kJobCoreCount)
    return out;
  std::vector<CoreSample>& prev = core_prev_[chip->id()];
  if (prev.size() != h.core_count) prev.assign(h.core_count, CoreSample{});
  for (uint32_t i = 0; i < h.core_count; ++i) {
    vj::CoreEntry e;
    if (!read_record(base + vj::kCoresOffset + i * sizeof(vj::CoreEntry), &e)) return {};
    const uint64_t total = e.busy_ns + e.idle_ns + e.off_ns;
    CoreSample& p = prev[i];
    // Counters that went backwards belong to a new boot: start over.
    const bool fresh = total < p.total || e.busy_ns < p.busy;
    const uint64_t dt = fresh ? total : total - p.total;
    const uint64_t db = fresh ? e.busy_ns : e.busy_ns - p.busy;
    out.push_back(dt ? std::min(1.0, double(db) / double(dt)) : 0.0);
    p = CoreSample{e.busy_ns, total};
  }
  return out;
}

}  // namespace drv
