// CollectiveService (see collective_service.h): ring building from the
// board topology, and the stage -> run -> read -> free state machine of one
// collective across every chip of the board.
#include "collective_service.h"
#include "api_enums.h"

#include <time.h>

#include <algorithm>

#include "hbm_service.h"
#include "proto_arena.h"
#include "vtrn/crc32.h"
#include "vtrn/drv/log.h"

namespace drv {
namespace {

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}


// Port of `c` wired directly to chip `to` (first in port order), or -1.
int port_to(const vtrn::board::Chip& c, uint32_t to) {
  for (uint32_t i = 0; i < c.port_count; ++i) {
    const vtrn::board::LinkPort& p = c.ports[i];
    if (p.connected && p.peer_on_board && p.peer.kind == vtrn::board::EndKind::kChip && p.peer.id == to) {
      return int(p.index);
    }
  }
  return -1;
}

const vtrn::board::LinkPort* port_by_index(const vtrn::board::Chip& c, uint32_t index) {
  for (uint32_t i = 0; i < c.port_count; ++i) {
    if (c.ports[i].index == index) return &c.ports[i];
  }
  return nullptr;
}

// Depth-first search for a Hamiltonian cycle through position 0, bounded so
// a large board without one answers quickly.
bool extend(const std::vector<std::vector<bool>>& adj, std::vector<uint32_t>* path,
            std::vector<bool>* used, uint64_t* budget) {
  const size_t n = adj.size();
  if (path->size() == n) return adj[path->back()][(*path)[0]];
  for (uint32_t next = 0; next < n; ++next) {
    if ((*used)[next] || !adj[path->back()][next]) continue;
    if ((*budget)-- == 0) return false;
    (*used)[next] = true;
    path->push_back(next);
    if (extend(adj, path, used, budget)) return true;
    path->pop_back();
    (*used)[next] = false;
  }
  return false;
}

}  // namespace

Result<std::vector<RingMember>> build_ring(const std::vector<vtrn::board::Chip>& chips) {
  const size_t n = chips.size();
  if (n < 2) return Error(Code::kUnsupported, "a collective needs at least 2 chips; this board has " + std::to_string(n));
  std::vector<std::vector<bool>> adj(n, std::vector<bool>(n, false));
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      adj[a][b] = a != b && port_to(chips[a], chips[b].id) >= 0;
    }
  }
  // The chips in id order first (a ring board is wired that way), then any
  // order (a torus: a snake through its rows).
  std::vector<uint32_t> order;
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) ok = adj[i][(i + 1) % n];
  if (ok) {
    for (uint32_t i = 0; i < n; ++i) order.push_back(i);
  } else {
    std::vector<uint32_t> path{0};
    std::vector<bool> used(n, false);
    used[0] = true;
    uint64_t budget = 2'000'000;
    if (extend(adj, &path, &used, &budget)) order = path;
  }
  if (order.empty()) {
    return Error(Code::kUnsupported,
                 "the chips cannot form a ring of direct chip-to-chip links (links through a switch are "
                 "not forwarded)");
  }
  std::vector<RingMember> ring(n);
  for (size_t k = 0; k < n; ++k) {
    const vtrn::board::Chip& c = chips[order[k]];
    ring[k].chip = c.id;
    ring[k].send_port = uint32_t(port_to(c, chips[order[(k + 1) % n]].id));
  }
  for (size_t k = 0; k < n; ++k) {
    const RingMember& prev = ring[(k + n - 1) % n];
    const vtrn::board::LinkPort* p = port_by_index(chips[order[(k + n - 1) % n]], prev.send_port);
    ring[k].recv_port = p->peer.port;
  }
  return ring;
}

CollectiveService::CollectiveService(EventLoop* loop, JobBackend* backend,
                                     std::vector<vtrn::board::Chip> chips, std::string board_model,
                                     ReplyFn reply)
    : loop_(loop), backend_(backend), chips_(std::move(chips)), model_(std::move(board_model)),
      reply_(std::move(reply)) {}

CollectiveService::~CollectiveService() {
  if (run_ && run_->deadline != 0) loop_->cancel_timer(run_->deadline);
}

void CollectiveService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st,
                                    const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

void CollectiveService::run(uint64_t cid, uint64_t id, const Vtrn__Api__CollectiveRequest& r) {
  const auto bad = VTRN__API__STATUS__STATUS_BAD_REQUEST;
  if (run_) {
    reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR, "another collective is running (one at a time)");
    return;
  }
  if (r.op != VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_REDUCE &&
      r.op != VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_GATHER) {
    reply_error(cid, id, bad, "op: must be all-reduce or all-gather");
    return;
  }
  if (r.bytes == 0 || r.bytes % 4 != 0 || r.bytes > kMaxBytes) {
    reply_error(cid, id, bad, "bytes: " + std::to_string(r.bytes) + " is not a multiple of 4 in 4.." +
                                  std::to_string(kMaxBytes));
    return;
  }
  Result<std::vector<RingMember>> ring = build_ring(chips_);
  if (!ring.ok()) {
    Error e = ring.error();
    e.prefix("board " + model_ + ": ");
    reply_error(cid, id, to_api(e), e.detail());
    return;
  }
  if (r.n_inputs != chips_.size()) {
    reply_error(cid, id, bad, "inputs: " + std::to_string(r.n_inputs) + " given, the board has " +
                                  std::to_string(chips_.size()) + " chips");
    return;
  }
  for (size_t i = 0; i < r.n_inputs; ++i) {
    if (r.inputs[i].len != r.bytes) {
      reply_error(cid, id, bad, "inputs[" + std::to_string(i) + "]: " + std::to_string(r.inputs[i].len) +
                                    " bytes, expected " + std::to_string(r.bytes));
      return;
    }
  }
  for (const vtrn::board::Chip& c : chips_) {
    if (Error e = backend_->chip_check(c.id); !e.ok()) {
      reply_error(cid, id, to_api(e), e.detail());
      return;
    }
  }
  auto run = std::make_unique<Run>();
  run->cid = cid;
  run->id = id;
  run->op = r.op;
  run->collective_id = next_collective_++;
  run->bytes = r.bytes;
  run->out_bytes = r.op == VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_GATHER ? r.bytes * ring->size() : r.bytes;
  run->timeout_ms = r.timeout_ms != 0 ? std::min<uint32_t>(r.timeout_ms, 600'000) : kDefaultTimeoutMs;
  run->step_timeout_ms = r.step_timeout_ms != 0 ? r.step_timeout_ms : kDefaultStepTimeoutMs;
  run->return_outputs = r.return_outputs;
  for (const RingMember& m : *ring) {
    Rank k;
    k.m = m;
    k.job_id = next_job_++;
    size_t chip_index = 0;
    for (size_t i = 0; i < chips_.size(); ++i) {
      if (chips_[i].id == m.chip) chip_index = i;
    }
    k.input.assign(r.inputs[chip_index].data, r.inputs[chip_index].data + r.bytes);
    run->ranks.push_back(std::move(k));
  }
  run_ = std::move(run);
  DRV_LOGI("collective %u: %s of %llu bytes over %zu chips", unsigned(run_->collective_id),
           r.op == VTRN__TYPES__COLLECTIVE_OP__COLLECTIVE_OP_ALL_REDUCE ? "all-reduce" : "all-gather",
           (unsigned long long)r.bytes, run_->ranks.size());
  run_->pending = uint32_t(run_->ranks.size());
  for (Rank& k : run_->ranks) stage(k);
}

void CollectiveService::fail_staging(const std::string& why) {
  if (!run_->failed) {
    run_->failed = true;
    run_->reason = why;
  }
}

void CollectiveService::stage(Rank& k) {
  Run* run = run_.get();
  const uint32_t chip = k.m.chip;
  backend_->hbm_alloc(chip, HbmService::job_owner(k.job_id), run->bytes, [this, run, &k, chip](Result<uint64_t> in) {
    if (run_.get() != run) return;
    if (!in.ok()) {
      fail_staging("chip " + std::to_string(chip) + ": input buffer: " + in.error().detail());
      staged_one();
      return;
    }
    k.in_addr = in.value();
    backend_->hbm_alloc(chip, HbmService::job_owner(k.job_id), run->out_bytes,
                        [this, run, &k, chip](Result<uint64_t> out) {
                          if (run_.get() != run) return;
                          if (!out.ok()) {
                            fail_staging("chip " + std::to_string(chip) + ": output buffer: " + out.error().detail());
                            staged_one();
                            return;
                          }
                          k.out_addr = out.value();
                          write_piece(k, 0);
                        });
  });
}

void CollectiveService::write_piece(Rank& k, uint64_t off) {
  Run* run = run_.get();
  if (off >= run->bytes || run->failed) {
    staged_one();
    return;
  }
  const uint64_t len = std::min(kDmaPiece, run->bytes - off);
  backend_->dma_write(k.m.chip, k.in_addr + off, k.input.data() + off, size_t(len),
                      [this, run, &k, off, len](const Error& e) {
                        if (run_.get() != run) return;
                        if (!e.ok()) {
                          fail_staging("chip " + std::to_string(k.m.chip) + ": DMA of the input: " + e.detail());
                          staged_one();
                          return;
                        }
                        write_piece(k, off + len);
                      });
}

void CollectiveService::staged_one() {
  if (--run_->pending > 0) return;
  if (run_->failed) {
    for (Rank& k : run_->ranks) {
      k.ended = true;
      k.state = VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED;
      k.reason = run_->reason;
    }
    finish();
    return;
  }
  submit_all();
}

void CollectiveService::submit_all() {
  Run* run = run_.get();
  run->phase = Run::Phase::kRunning;
  run->submit_ns = mono_ns();
  const uint32_t n = uint32_t(run->ranks.size());
  for (uint32_t i = 0; i < n; ++i) {
    Rank& k = run->ranks[i];
    Vtrn__Ctrl__CollectiveSubmitRequest s = VTRN__CTRL__COLLECTIVE_SUBMIT_REQUEST__INIT;
    s.job_id = k.job_id;
    s.owner = HbmService::job_owner(k.job_id);
    s.op = run->op;
    s.collective_id = run->collective_id;
    s.ranks = n;
    s.rank = i;
    s.send_port = k.m.send_port;
    s.recv_port = k.m.recv_port;
    s.in_addr = k.in_addr;
    s.out_addr = k.out_addr;
    s.bytes = run->bytes;
    s.timeout_ms = run->timeout_ms;
    s.step_timeout_ms = run->step_timeout_ms;
    fw_call(backend_->port(k.m.chip), &Vtrn__Ctrl__Request::collective_submit, s,
            &Vtrn__Ctrl__Response::collective_submit, 5'000,
                   [this, run, &k](const FwReply<Vtrn__Ctrl__CollectiveSubmitResponse>& r) {
                     if (run_.get() != run || k.ended) return;
                     if (!r.ok()) {
                       rank_ended(k, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED,
                                  "chip " + std::to_string(k.m.chip) + " refused the collective: " +
                                      (r.error.detail().empty() ? "no collective support" : r.error.detail()));
                       return;
                     }
                     k.submitted = true;
                   });
  }
  run->deadline = loop_->add_timer_in(uint64_t(run->timeout_ms + kHostMarginMs) * 1'000'000ull, [this, run] {
    if (run_.get() != run) return;
    run->deadline = 0;
    for (Rank& k : run->ranks) {
      if (!k.ended) {
        rank_ended(k, VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT,
                   "chip " + std::to_string(k.m.chip) + " sent no end event within " +
                       std::to_string(run->timeout_ms + kHostMarginMs) + " ms");
      }
    }
  });
}

void CollectiveService::on_event(uint32_t chip, const Vtrn__Ctrl__Event& ev) {
  if (ev.body_case != VTRN__CTRL__EVENT__BODY_COLLECTIVE || ev.collective == nullptr || !run_ ||
      run_->phase != Run::Phase::kRunning) {
    return;
  }
  const Vtrn__Ctrl__CollectiveEvent& ce = *ev.collective;
  for (Rank& k : run_->ranks) {
    if (k.m.chip != chip || k.job_id != ce.job_id || k.ended) continue;
    Vtrn__Types__JobState st = VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED;
    if (ce.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) st = VTRN__TYPES__JOB_STATE__JOB_STATE_DONE;
    else if (ce.state == VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT) st = VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT;
    if (ce.end_ns >= ce.start_ns) {
      k.start_ns = ce.start_ns;
      k.end_ns = ce.end_ns;
    }
    k.frames_rejected = ce.frames_rejected;
    const std::string reason = ce.reason != nullptr ? std::string(ce.reason).substr(0, 200) : "";
    rank_ended(k, st, st == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE ? "" : "chip " + std::to_string(chip) + ": " + reason);
    return;
  }
  DRV_LOGW("collective: chip %u: event for job %llu which is not running there; ignored", unsigned(chip),
           (unsigned long long)ce.job_id);
}

void CollectiveService::on_chip_down(uint32_t chip, const std::string& reason) {
  if (!run_ || run_->phase != Run::Phase::kRunning) return;
  for (Rank& k : run_->ranks) {
    if (k.m.chip == chip && !k.ended) rank_ended(k, VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED, reason);
  }
}

void CollectiveService::client_gone(uint64_t cid) {
  if (run_ && run_->cid == cid) run_->client_here = false;
}

void CollectiveService::rank_ended(Rank& k, Vtrn__Types__JobState st, const std::string& reason) {
  k.ended = true;
  k.state = st;
  k.reason = reason;
  if (st != VTRN__TYPES__JOB_STATE__JOB_STATE_DONE && !run_->failed) {
    run_->failed = true;
    run_->reason = reason;
  }
  maybe_read();
}

void CollectiveService::maybe_read() {
  Run* run = run_.get();
  for (const Rank& k : run->ranks) {
    if (!k.ended) return;
  }
  if (run->deadline != 0) {
    loop_->cancel_timer(run->deadline);
    run->deadline = 0;
  }
  run->all_ended_ns = mono_ns();
  run->phase = Run::Phase::kReading;
  run->pending = 1;
  for (Rank& k : run->ranks) {
    if (k.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) {
      ++run->pending;
      read_piece(k, 0);
    }
  }
  read_one();
}

void CollectiveService::read_piece(Rank& k, uint64_t off) {
  Run* run = run_.get();
  if (off >= run->out_bytes) {
    read_one();
    return;
  }
  const uint64_t len = std::min(kDmaPiece, run->out_bytes - off);
  backend_->dma_read(k.m.chip, k.out_addr + off, len,
                     [this, run, &k, off, len](Result<std::vector<uint8_t>> data) {
                       if (run_.get() != run) return;
                       if (!data.ok() || data->size() != len) {
                         k.state = VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED;
                         k.reason =
                             "chip " + std::to_string(k.m.chip) + ": reading the output: " + data.error().detail();
                         if (!run->failed) {
                           run->failed = true;
                           run->reason = k.reason;
                         }
                         read_one();
                         return;
                       }
                       k.output.insert(k.output.end(), data->begin(), data->end());
                       read_piece(k, off + len);
                     });
}

void CollectiveService::read_one() {
  if (--run_->pending > 0) return;
  finish();
}

void CollectiveService::finish() {
  Run* run = run_.get();
  DRV_LOGI("collective %u: %s%s", unsigned(run->collective_id), run->failed ? "FAILED: " : "DONE",
           run->reason.c_str());
  // Free every chip's buffers, then answer: a client told DONE may start
  // the next collective at once, and only one runs at a time.
  run->phase = Run::Phase::kFreeing;
  run->pending = uint32_t(run->ranks.size());
  for (Rank& k : run->ranks) {
    backend_->hbm_free_owner(k.m.chip, HbmService::job_owner(k.job_id), [this, run](const Error& e) {
      if (run_.get() != run) return;
      if (!e.ok()) DRV_LOGW("collective %u: freeing buffers: %s", unsigned(run->collective_id), e.detail().c_str());
      if (--run->pending != 0) return;
      reply_result(*run);
      run_.reset();
    });
  }
}

void CollectiveService::reply_result(const Run& r) {
  const Run* run = &r;
  if (run->client_here) {
    ProtoArena a;
    Vtrn__Api__CollectiveResponse body = VTRN__API__COLLECTIVE_RESPONSE__INIT;
    body.state = run->failed ? VTRN__TYPES__JOB_STATE__JOB_STATE_FAILED : VTRN__TYPES__JOB_STATE__JOB_STATE_DONE;
    body.reason = a.str(run->reason);
    body.collective_id = run->collective_id;
    body.host_ns = run->all_ended_ns > run->submit_ns && run->submit_ns != 0 ? run->all_ended_ns - run->submit_ns : 0;
    const size_t n = run->ranks.size();
    std::vector<uint32_t> ring;
    for (const Rank& k : run->ranks) ring.push_back(k.m.chip);
    body.n_ring = n;
    body.ring = a.make(ring)->data();
    const bool send_bytes = run->return_outputs && run->out_bytes * n <= kMaxReturnBytes;
    std::vector<const Rank*> by_chip;
    for (const Rank& k : run->ranks) by_chip.push_back(&k);
    std::sort(by_chip.begin(), by_chip.end(), [](const Rank* x, const Rank* y) { return x->m.chip < y->m.chip; });
    body.n_chips = n;
    body.chips = a.ptrs<Vtrn__Api__CollectiveChipResult>(n);
    for (size_t i = 0; i < n; ++i) {
      const Rank& k = *by_chip[i];
      uint32_t rank = 0;
      for (uint32_t j = 0; j < n; ++j) {
        if (&run->ranks[j] == &k) rank = j;
      }
      Vtrn__Api__CollectiveChipResult c = VTRN__API__COLLECTIVE_CHIP_RESULT__INIT;
      c.chip = k.m.chip;
      c.rank = rank;
      c.send_port = k.m.send_port;
      c.recv_port = k.m.recv_port;
      c.state = k.state;
      c.reason = a.str(k.reason);
      c.chip_run_ns = k.end_ns - k.start_ns;
      c.job_id = k.job_id;
      c.frames_rejected = k.frames_rejected;
      if (k.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE && k.output.size() == run->out_bytes) {
        c.output_bytes = k.output.size();
        c.output_crc32 = vtrn::crc32(k.output.data(), k.output.size());
        if (send_bytes) {
          c.output.data = const_cast<uint8_t*>(k.output.data());
          c.output.len = k.output.size();
        }
      }
      body.chips[i] = a.make(c);
    }
    reply_body(reply_, run->cid, run->id, VTRN__API__RESPONSE__BODY_COLLECTIVE, &body.base);
  }
}

std::span<const Route> CollectiveService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_COLLECTIVE, false},
  };
  return kRoutes;
}

void CollectiveService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* /*chip*/) {
  if (req.body_case == VTRN__API__REQUEST__BODY_COLLECTIVE) run(cid, req.id, *req.collective);
}

void CollectiveService::on_chip_state(Chip& chip) {
  if (chip.state() != ChipState::kReady) on_chip_down(chip.id(), chip.not_ready_reason());
}

}  // namespace drv
