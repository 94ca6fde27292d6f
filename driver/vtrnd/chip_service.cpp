// vtrnd's chip service: what a client asks about the chips themselves:
// `vtrn ls` (List), `vtrn info` (Info: the board's view, the header and a
// fresh firmware Info), `vtrn ping` (Ping: control-queue round trips with an
// echoed payload), `vtrn logs` (Logs, with follow streams) and `vtrn
// telemetry` (Telemetry: the firmware's block plus what every other service
// adds to it).
//
// What it is not: the chips' owner (Daemon creates, boots and stops them)
// nor the place a service's own telemetry is computed (each service's
// fill_telemetry, reached through the `fill_telemetry` hook).
#include "chip_service.h"

#include <string.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "api_enums.h"
#include "reliability_service.h"  // reset_history_message
#include "vtrn/drv/fw_call.h"
#include "vtrn/drv/log.h"

namespace drv {
namespace {

constexpr uint32_t kPingTimeoutMs = 1000;
constexpr uint32_t kInfoTimeoutMs = 3000;
constexpr uint32_t kMaxPingCount = 100000;
constexpr uint32_t kMaxPingPayload = 1024;

std::string version_string(uint32_t v) {
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

Vtrn__Api__ChipSummary* make_summary(ProtoArena& a, const ChipStatus& s, const std::string& board) {
  Vtrn__Api__ChipSummary* m = a.make<Vtrn__Api__ChipSummary>(VTRN__API__CHIP_SUMMARY__INIT);
  m->id = s.id;
  m->state = to_api(s.state);
  std::string fw = s.info.valid ? s.info.fw_version
                                : s.header_valid ? version_string(s.header.fw_version) : "";
  m->fw_version = a.str(fw);
  m->uptime_ns = s.uptime_ns;
  m->pci_address = a.str(s.info.pci_address);
  m->pci_bus_id = a.str(host_pci_bus_id(s.id));
  m->bar2_bytes = s.bar2_bytes;
  m->board = a.str(board);
  m->qemu_pid = s.pid;
  m->gdb_port = s.gdb_port;
  m->boot_ns = s.boot_ns;
  m->error = a.str(s.error);
  m->n_last_log = s.last_log.size();
  m->last_log = a.strv(s.last_log);
  m->heartbeat = s.heartbeat;
  m->boot_generation = s.header_valid ? s.header.boot_generation : 0;
  m->resets = s.reset.count;
  m->last_reset_reason = a.str(s.reset.last_reason);
  m->recovering = s.reset.recovering;
  return m;
}

}  // namespace

std::span<const Route> ChipService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_LIST, false, false},
      {VTRN__API__REQUEST__BODY_INFO, true, false},
      {VTRN__API__REQUEST__BODY_PING, true, false},
      {VTRN__API__REQUEST__BODY_LOGS, true, false},
      // TelemetryRequest's chip is a oneof: unset means every chip (chip null).
      {VTRN__API__REQUEST__BODY_TELEMETRY, true, false},
  };
  return kRoutes;
}

void ChipService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_LIST: list(cid, req.id); break;
    case VTRN__API__REQUEST__BODY_INFO: info(cid, req.id, chip); break;
    case VTRN__API__REQUEST__BODY_PING: ping(cid, req.id, chip, *req.ping); break;
    case VTRN__API__REQUEST__BODY_LOGS: logs(cid, req.id, chip, *req.logs); break;
    case VTRN__API__REQUEST__BODY_TELEMETRY: telemetry(cid, req.id, chip); break;
    default: break;
  }
}

void ChipService::client_gone(uint64_t cid) {
  auto it = log_clients_.find(cid);
  if (it == log_clients_.end()) return;
  for (auto [chip, sub] : it->second.subs) chip->unsubscribe_logs(sub);
  log_clients_.erase(it);
}

void ChipService::list(uint64_t cid, uint64_t id) {
  ProtoArena a;
  Vtrn__Api__ListResponse list = VTRN__API__LIST_RESPONSE__INIT;
  list.board = a.str(opts_.board_model);
  list.board_file = a.str(opts_.board_file);
  list.n_chips = chips_.size();
  list.chips = a.ptrs<Vtrn__Api__ChipSummary>(chips_.size());
  for (size_t i = 0; i < chips_.size(); ++i)
    list.chips[i] = make_summary(a, chips_[i]->status(), opts_.board_model);
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_LIST, &list.base);
}


void ChipService::info(uint64_t cid, uint64_t id, Chip* chip) {
  // Answered from the board, the header and (when READY) a fresh firmware
  // Info; a chip that is not READY still gets its summary and error back.
  auto answer = [this, cid, id, chip](Vtrn__Api__Status st, const std::string& err,
                                      const Vtrn__Ctrl__InfoResponse* fw) {
    ProtoArena a;
    const ChipStatus s = chip->status();
    const vtrn::board::Chip& bc = chip->options().board;
    Vtrn__Api__ChipInfo info = VTRN__API__CHIP_INFO__INIT;
    info.summary = make_summary(a, s, opts_.board_model);
    info.neuron_cores = bc.neuron_cores;
    info.hbm_stacks = bc.hbm.stacks;
    info.hbm_bytes_per_stack = bc.hbm.bytes_per_stack;
    info.hbm_page_bytes = bc.hbm.page_bytes;
    info.hbm_channels = bc.hbm.channels;
    info.link_ports = bc.port_count;
    info.power_domains = bc.power_domain_count;
    info.thermal_zones = bc.thermal_zone_count;
    info.telemetry_period_ms = bc.telemetry_period_ms;
    info.chip_name = a.str(bc.name);
    info.qemu_cmdline = a.str(s.qemu_cmdline);
    info.reset_history = reset_history_message(s.reset, a);
    info.watchdog_timeout_ms = s.watchdog_ms;
    if (s.header_valid) {
      info.build_id = a.str(s.header.build_id);
      info.abi_major = s.header.abi_major;
      info.abi_minor = s.header.abi_minor;
      info.capabilities = s.header.capabilities;
    }
    if (fw != nullptr) {
      // The firmware's own view wins where it has one.
      info.summary->fw_version = a.str(fw->fw_version ? fw->fw_version : "");
      info.summary->pci_address = a.str(fw->pci_address ? fw->pci_address : "");
      info.summary->uptime_ns = fw->uptime_ns;
      if (fw->build_id && fw->build_id[0]) info.build_id = a.str(fw->build_id);
      info.cpu = a.str(fw->cpu ? fw->cpu : "");
      info.timer_hz = fw->timer_hz;
      info.gic_version = fw->gic_version;
      if (fw->chip_name && fw->chip_name[0]) info.chip_name = a.str(fw->chip_name);
    } else if (s.info.valid) {
      info.cpu = a.str(s.info.cpu);
      info.timer_hz = s.info.timer_hz;
      info.gic_version = s.info.gic_version;
    }
    if (s.has_panic) {
      Vtrn__Api__PanicInfo* p = a.make<Vtrn__Api__PanicInfo>(VTRN__API__PANIC_INFO__INIT);
      p->cause = s.panic.cause;
      p->ec = s.panic.ec;
      p->esr = s.panic.esr;
      p->elr = s.panic.elr;
      p->far = s.panic.far;
      p->reason = a.str(s.panic.reason);
      p->cpu = s.panic.cpu;
      info.panic = p;
    }
    Vtrn__Api__InfoResponse ir = VTRN__API__INFO_RESPONSE__INIT;
    ir.info = &info;
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_INFO, &ir.base, st, err);
  };
  if (chip->state() != ChipState::kReady) {
    answer(VTRN__API__STATUS__STATUS_CHIP_NOT_READY, chip->not_ready_reason(), nullptr);
    return;
  }
  Vtrn__Ctrl__InfoRequest ireq = VTRN__CTRL__INFO_REQUEST__INIT;
  fw_call(*chip, &Vtrn__Ctrl__Request::info, ireq, &Vtrn__Ctrl__Response::info, kInfoTimeoutMs,
          [answer](const FwReply<Vtrn__Ctrl__InfoResponse>& res) {
            answer(to_api(res.error), res.error.detail(), res.body);
          });
}


namespace {
// One PingRequest in progress. It is kept alive only by the completion or
// timer that will continue it, so it frees itself when it finishes or when
// its chip fails every pending request.
struct PingJob : std::enable_shared_from_this<PingJob> {
  uint64_t cid = 0, id = 0;
  uint32_t chip_id = 0, count = 0, sent = 0, lost = 0, lost_in_row = 0;
  bool spin = false;
  uint32_t interval_us = 0;
  std::vector<uint8_t> payload;
  std::vector<uint64_t> rtts;
  Chip* chip = nullptr;
  EventLoop* loop = nullptr;
  std::function<bool(uint64_t)> client_alive;
  std::function<void(PingJob&, Vtrn__Api__Status, const std::string&)> finish;

  void step() {
    if (!client_alive(cid)) return;  // client gone: stop pinging
    Vtrn__Ctrl__PingRequest pr = VTRN__CTRL__PING_REQUEST__INIT;
    pr.host_time_ns = monotonic_ns();
    pr.payload.data = payload.data();
    pr.payload.len = payload.size();
    ++sent;
    auto self = shared_from_this();
    fw_call(*chip, &Vtrn__Ctrl__Request::ping, pr, &Vtrn__Ctrl__Response::ping, kPingTimeoutMs,
            [self](const FwReply<Vtrn__Ctrl__PingResponse>& res) { self->done(res); }, spin);
  }

  void done(const FwReply<Vtrn__Ctrl__PingResponse>& res) {
    if (res.error.code() == Code::kTimeout) {
      ++lost;
      if (++lost_in_row >= 3) return finish(*this, to_api(res.error), res.error.detail());
    } else if (!res.ok()) {
      return finish(*this, to_api(res.error), res.error.detail());
    } else {
      const Vtrn__Ctrl__PingResponse& r = *res.body;
      if (r.payload.len != payload.size() ||
          (!payload.empty() && memcmp(r.payload.data, payload.data(), payload.size()) != 0))
        return finish(*this, VTRN__API__STATUS__STATUS_CHIP_ERROR,
                      "chip " + std::to_string(chip_id) + ": ping echo does not match");
      lost_in_row = 0;
      rtts.push_back(res.rtt_ns);
    }
    if (sent >= count) return finish(*this, VTRN__API__STATUS__STATUS_OK, "");
    if (interval_us == 0) return step();
    auto self = shared_from_this();
    loop->add_timer_in(uint64_t(interval_us) * 1000, [self] { self->step(); });
  }
};
}  // namespace


void ChipService::ping(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__PingRequest& r) {
  if (r.count < 1 || r.count > kMaxPingCount) {
    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "ping count " + std::to_string(r.count) + " outside 1.." +
                    std::to_string(kMaxPingCount));
    return;
  }
  if (r.payload_bytes > kMaxPingPayload) {
    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                "ping payload " + std::to_string(r.payload_bytes) + " bytes above " +
                    std::to_string(kMaxPingPayload));
    return;
  }
  if (chip->state() != ChipState::kReady) {
    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY, chip->not_ready_reason());
    return;
  }
  auto job = std::make_shared<PingJob>();
  job->cid = cid;
  job->id = id;
  job->chip_id = chip->id();
  job->count = r.count;
  job->spin = r.wait == VTRN__API__WAIT_MODE__WAIT_SPIN_BLOCK;
  job->interval_us = r.interval_us;
  job->payload.resize(r.payload_bytes);
  for (size_t i = 0; i < job->payload.size(); ++i) job->payload[i] = uint8_t(i * 7 + 1);
  job->rtts.reserve(r.count);
  job->chip = chip;
  job->loop = loop_;
  job->client_alive = client_alive_;
  job->finish = [this](PingJob& j, Vtrn__Api__Status st, const std::string& err) {
    Vtrn__Api__PingResponse pr = VTRN__API__PING_RESPONSE__INIT;
    pr.n_rtt_ns = j.rtts.size();
    pr.rtt_ns = j.rtts.data();
    pr.lost = j.lost;
    reply_body(reply_, j.cid, j.id, VTRN__API__RESPONSE__BODY_PING, &pr.base, st, err);
  };
  job->step();
}


void ChipService::logs(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__LogsRequest& r) {
  std::vector<std::string> lines(chip->log_history().begin(), chip->log_history().end());
  if (lines.empty()) {
    // Before READY (or after a failed boot) the log ring is not readable;
    // the UART and QEMU lines are what there is.
    lines = chip->status().last_log;
  }
  if (r.tail != 0 && lines.size() > r.tail) lines.erase(lines.begin(), lines.end() - r.tail);
  auto send = [this, cid, id](const std::vector<std::string>& l, uint64_t dropped, bool end) {
    ProtoArena a;
    Vtrn__Api__LogsResponse lr = VTRN__API__LOGS_RESPONSE__INIT;
    lr.n_lines = l.size();
    lr.lines = a.strv(l);
    lr.dropped = dropped;
    lr.end = end;
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_LOGS, &lr.base);
  };
  // Keep frames well below kMaxFrame even for a full history; without
  // follow the last one says it is the last.
  constexpr size_t kLinesPerFrame = 512;
  for (size_t i = 0; i < lines.size() || i == 0; i += kLinesPerFrame) {
    std::vector<std::string> part(lines.begin() + ptrdiff_t(std::min(i, lines.size())),
                                  lines.begin() + ptrdiff_t(std::min(i + kLinesPerFrame, lines.size())));
    send(part, 0, !r.follow && i + kLinesPerFrame >= lines.size());
    if (!client_alive_(cid)) return;
  }
  if (!r.follow) return;
  // Lost bytes are what the ring reports; the protocol field counts lines,
  // so report one per overrun event as a lower bound.
  int sub = chip->subscribe_logs([send](const std::vector<std::string>& l, uint64_t lost) {
    send(l, lost ? 1 : 0, false);
  });
  LogClient& c = log_clients_[cid];
  c.subs.emplace_back(chip, sub);
  c.streams.push_back(id);
}


// The end frame of every follow stream a connection holds.
void ChipService::end_log_streams(const std::string& reason) {
  for (auto& [cid, c] : std::exchange(log_clients_, {})) {
    for (auto [chip, sub] : c.subs) chip->unsubscribe_logs(sub);
    for (uint64_t id : c.streams) {
      std::string why = reason;
      Vtrn__Api__LogsResponse lr = VTRN__API__LOGS_RESPONSE__INIT;
      lr.end = true;
      lr.end_reason = why.data();
      reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_LOGS, &lr.base);
    }
  }
}


void ChipService::telemetry(uint64_t cid, uint64_t id, Chip* chip) {
  std::vector<Chip*> want;
  if (chip == nullptr) {
    for (auto& c : chips_) {
      if (c->state() == ChipState::kReady) want.push_back(c.get());
    }
  } else {
    if (chip->state() != ChipState::kReady) {
      reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY, chip->not_ready_reason());
      return;
    }
    want.push_back(chip);
  }
  ProtoArena a;
  std::vector<Vtrn__Api__Telemetry*> out;
  for (Chip* c : want) c->ask_telemetry();
  for (Chip* c : want) {
    TelemetrySample s;
    if (!c->telemetry(&s)) continue;
    Vtrn__Api__Telemetry* t = a.make<Vtrn__Api__Telemetry>(VTRN__API__TELEMETRY__INIT);
    t->chip = c->id();
    t->uptime_ns = s.t.uptime_ns;
    t->heartbeat = s.t.heartbeat;
    t->period_ms = s.t.period_ms;
    t->neuron_cores = s.t.neuron_cores;
    t->idle_ns = s.t.idle_ns;
    t->irq_count = s.t.irq_count;
    t->doorbell_irq_count = s.t.doorbell_irq_count;
    t->timer_irq_count = s.t.timer_irq_count;
    t->wakeups = s.t.wakeups;
    t->ctrl_requests = s.t.ctrl_requests;
    t->ctrl_errors = s.t.ctrl_errors;
    t->events_sent = s.t.events_sent;
    t->log_bytes = s.t.log_bytes;
    t->temperature_mc = s.t.temperature_mc;
    t->idle_ratio = s.idle_ratio;
    t->host_rx_events = s.host_rx_events;
    t->dma_descriptors = s.t.dma_descriptors;
    t->dma_completions = s.t.dma_completions;
    t->dma_bytes = s.t.dma_bytes;
    t->dma_busy_ns = s.t.dma_busy_ns;
    t->hbm_total_bytes = s.t.hbm_total_bytes;
    t->hbm_used_bytes = s.t.hbm_used_bytes;
    t->hbm_alloc_failures = s.t.hbm_alloc_failures;
    t->hbm_retired_pages = s.t.hbm_retired_pages;
    t->ecc_correctable = s.t.ecc_correctable;
    t->ecc_uncorrectable = s.t.ecc_uncorrectable;
    t->jobs_queued = s.t.jobs_queued;
    t->jobs_running = s.t.jobs_running;
    t->jobs_completed = s.t.jobs_completed;
    t->jobs_failed = s.t.jobs_failed;
    t->tensor_busy_ns = s.t.tensor_busy_ns;
    t->tensor_modeled_ns = s.t.tensor_modeled_ns;
    fill_telemetry_(*c, *t, a);
    const ResetInfo& ri = c->reset_info();
    t->resets = ri.count;
    t->last_reset_reason = a.str(ri.last_reason);
    t->last_reset_unix_ms = ri.last_unix_ms;
    t->boot_generation = c->status().header.boot_generation;
    out.push_back(t);
  }
  if (chip != nullptr && out.empty()) {
    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR,
                "chip " + std::to_string(chip->id()) + ": telemetry block never held still");
    return;
  }
  Vtrn__Api__TelemetryResponse tr = VTRN__API__TELEMETRY_RESPONSE__INIT;
  tr.n_chips = out.size();
  tr.chips = out.data();
  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_TELEMETRY, &tr.base);
}


}  // namespace drv
