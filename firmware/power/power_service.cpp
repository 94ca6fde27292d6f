// The chip's power service: firmware glue around fw::power::Controller (see
// fw/power_service.h). Board -> config at boot, the BAR2 power block under
// its seqlock, cross-core publication of the clock and the D0 flag, log
// lines for every state, operating-point and reason change, and the cost of
// each refresh measured on the generic timer. The HBM traffic the model
// charges comes from the DMA service's activity(): the CPU copier's totals
// or, with the DMA engines serving the host queues, the engines' own
// counters (each engine's bytes are HBM reads or writes at the board's
// pJ/B, as the cores' copies are).
//
// Core activity: core 0 is the boot (service) core, whose work is this
// event loop (control ring, DMA copies, telemetry, and kernel chunks on a
// one-core chip): its busy time is uptime minus WFI time, at the running
// kernel's activity factor when fw::cores says one runs there, else
// kBootCoreIntensityPermille (a copy loop toggles far less of the datapath
// than a dense matmul). Cores 1..N-1 come from the jobs service's fw::cores
// (fw/cores.h) counters when that service is built in and has started them;
// otherwise they were never started (PSCI off) and count as power gated.
// Each NeuronCore's tensor engine (fw::engines, EngineStats) is part of it:
// the time the engine worked counts as the core's busy time (taken from
// its idle, then off time) and an engine at work makes its core run at
// full activity (a dense matmul), so a GEMM on the engines heats the die
// as one on the cores does. The engine's wall time, not its modeled time,
// is what counts: the power model's clock is the board's, in which the
// GEMM took that long (the modeled time is reported beside it).
#include "fw/power_service.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/dma_service.h"
#include "fw/engines_service.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/panic.h"
#include "fw/pb_arena.h"
#include "fw/power_shared.h"
#include "vtrn/layout.h"

#if __has_include("fw/cores.h")
#include "fw/cores.h"
#define VTRN_FW_POWER_HAVE_CORES 1
// CoreSample::state is fw::cores' numbering.
static_assert(fw::cores::kCoreOff == 0 && fw::cores::kCoreIdle == 1 &&
              fw::cores::kCoreRunning == 2);
#else
#define VTRN_FW_POWER_HAVE_CORES 0
#endif

namespace fw::power {
namespace {

using vtrn::hostif::FwHeader;
using vtrn::hostif::kRegionPower;
using vtrn::power::PowerTelemetry;

constexpr uint32_t kBootCoreIntensityPermille = 500;
constexpr uint32_t kTensorEngineIntensityPermille = 1000;

constinit PowerService g_service;

const char* reason_text(uint64_t r, char* buf, size_t cap) {
  static constexpr struct {
    uint64_t bit;
    const char* name;
  } kNames[] = {
      {vtrn::power::kReasonIdle, "idle"},
      {vtrn::power::kReasonHostRequest, "host_request"},
      {vtrn::power::kReasonSwPowerCap, "sw_power_cap"},
      {vtrn::power::kReasonHwSlowdown, "hw_slowdown"},
      {vtrn::power::kReasonSwThermalSlowdown, "sw_thermal_slowdown"},
      {vtrn::power::kReasonHwThermalSlowdown, "hw_thermal_slowdown"},
  };
  size_t used = 0;
  buf[0] = '\0';
  for (const auto& n : kNames) {
    if ((r & n.bit) == 0) continue;
    const int w = snprintf(buf + used, cap - used, "%s%s", used ? "," : "", n.name);
    if (w < 0 || size_t(w) >= cap - used) break;
    used += size_t(w);
  }
  if (used == 0) snprintf(buf, cap, "none");
  return buf;
}

}  // namespace

PowerService& service() { return g_service; }

void PowerService::init(const Boot& boot) {
  const uint64_t now = arch::now_ns();
  BoardPowerExtras extras;
  const vtrn::Error bad = read_board_extras(boot.board_fdt, boot.board_size, boot.chip->id, &extras);
  if (!bad.ok()) panic(vtrn::hostif::kPanicBoard, "power: %s", bad.detail());
  const vtrn::power::PowerConfig pc = config_from_chip(*boot.chip, extras);
  const vtrn::power::ConfigError e = configure(pc, now);
  if (!e.ok()) {
    panic(vtrn::hostif::kPanicBoard, "power: chip %u: power configuration rejected: %s[%u]",
          unsigned(boot.chip->id), e.field, unsigned(e.index));
  }
  core_count_ = pc.core_count;
  init_ns_ = now;
  init_idle_ns_ = 0;
  hbm_bytes_seen_ = 0;
  CoreSample base[vtrn::power::kMaxCores];
  uint32_t n = 0;
  sample(base, &n, now, 0);
  fold_tensor(base, n, true);
  set_baseline(base, n);

  // The region table was written at boot, but it lives in BAR2, which the
  // host maps writable: copy it, check the copy as the host does
  // (validate_layout), then use the copy only.
  FwHeader& h = *boot.hostif->header();
  FwHeader copy;
  memcpy(&copy, &h, sizeof copy);
  vtrn::hostif::Layout layout;
  if (const vtrn::Error e = vtrn::hostif::validate_layout(copy, boot.bar2_size, &layout); !e.ok()) {
    log(kLogErr, "power: region table refused: %s", e.detail());
  } else if (const vtrn::hostif::Region& r = layout.at(kRegionPower);
             r.size >= sizeof(PowerTelemetry) && r.offset % 8 == 0) {
    block_.attach(reinterpret_cast<PowerTelemetry*>(boot.bar2 + r.offset));
  }
  attach_wakeup(boot.gic, boot.timer_intid);
  enabled_ = true;
  publish(now);
  if (block_.attached()) {
    h.capabilities = h.capabilities | vtrn::hostif::kCapPower;
  } else {
    log(kLogWarn, "power: no power region in BAR2: telemetry block not published");
  }
  const vtrn::power::OperatingPoint& top = pc.opps[0];
  const vtrn::power::OperatingPoint& low = pc.opps[pc.opp_count - 1];
  log(kLogInfo, "power: %u ports, link L0/L0s/L1 %u/%u/%u mW", unsigned(pc.port_count),
      unsigned(pc.model.link_l0_mw), unsigned(pc.model.link_l0s_mw), unsigned(pc.model.link_l1_mw));
  log(kLogInfo, "power: %u cores, %u pstates %u..%u MHz, %u zones (die throttle %d mC, tau %llu ms), "
      "autosuspend %u ms, core activity from %s",
      unsigned(pc.core_count), unsigned(pc.opp_count), unsigned(top.frequency_mhz),
      unsigned(low.frequency_mhz), unsigned(pc.zone_count), int(pc.zones[0].throttle_mc),
      (unsigned long long)(uint64_t(pc.zones[0].resistance_mc_per_w) *
                           pc.zones[0].capacitance_mj_per_c / 1000),
      unsigned(pc.autosuspend_delay_ms), VTRN_FW_POWER_HAVE_CORES ? "fw::cores" : "boot-core idle time");
}

void PowerService::sample(CoreSample* out, uint32_t* n, uint64_t now_ns, uint64_t boot_idle_ns) const {
  const uint64_t up = now_ns - init_ns_;
  // Core 0 is the service core: everything it does outside WFI (control
  // ring, DMA copies, telemetry, kernel chunks on a one-core chip) is work.
  const uint64_t idle = boot_idle_ns >= init_idle_ns_ ? boot_idle_ns - init_idle_ns_ : 0;
  out[0] = CoreSample{};
  out[0].idle_ns = idle < up ? idle : up;
  out[0].busy_ns = up - out[0].idle_ns;
  out[0].state = 1;
  out[0].intensity_permille = kBootCoreIntensityPermille;
  uint32_t from_cores = 0;
#if VTRN_FW_POWER_HAVE_CORES
  from_cores = fw::cores::count();
  if (from_cores > core_count_) from_cores = core_count_;
  if (from_cores > 0) {
    fw::cores::CoreSnapshot s0{};
    fw::cores::snapshot(0, &s0);
    if (s0.state == fw::cores::kCoreRunning && s0.intensity_permille != 0) {
      out[0].intensity_permille = s0.intensity_permille;
    }
  }
  for (uint32_t i = 1; i < from_cores; ++i) {
    fw::cores::CoreSnapshot s{};
    fw::cores::snapshot(i, &s);
    out[i].busy_ns = s.busy_ns;
    out[i].idle_ns = s.idle_ns;
    out[i].off_ns = s.off_ns;
    out[i].state = s.state;
    out[i].intensity_permille = s.intensity_permille;
  }
#endif
  // Cores nobody started (no executor service, or before it ran): off.
  for (uint32_t i = from_cores > 1 ? from_cores : 1; i < core_count_; ++i) {
    out[i] = CoreSample{};
    out[i].off_ns = up;
    out[i].state = 0;
  }
  *n = core_count_;
}

// Moves each tensor engine's new busy time since the last sample from its
// core's idle (then off) time into its busy time, on deltas, so every
// counter the controller sees still only grows; an engine at work makes
// its core run at full activity. `first`: only remember where things are.
void PowerService::fold_tensor(CoreSample* s, uint32_t n, bool first) {
  for (uint32_t i = 0; i < n && i < vtrn::power::kMaxCores; ++i) {
    const CoreSample raw = s[i];
    vtrn::engine::EngineStats st{};
    bool working = false;
    const bool have = engines::service().tensor_stats(i, &st, &working);
    const uint64_t eb = have ? st.busy_ns : tensor_busy_[i];
    if (first) {
      raw_[i] = raw;
      folded_[i] = raw;
      tensor_busy_[i] = eb;
      continue;
    }
    const CoreSample& p = raw_[i];
    const uint64_t d_busy = raw.busy_ns >= p.busy_ns ? raw.busy_ns - p.busy_ns : raw.busy_ns;
    uint64_t d_idle = raw.idle_ns >= p.idle_ns ? raw.idle_ns - p.idle_ns : raw.idle_ns;
    uint64_t d_off = raw.off_ns >= p.off_ns ? raw.off_ns - p.off_ns : raw.off_ns;
    // An engine reset (chip reset) starts its counters again from 0.
    uint64_t d_eng = eb >= tensor_busy_[i] ? eb - tensor_busy_[i] : eb;
    const uint64_t from_idle = d_eng < d_idle ? d_eng : d_idle;
    d_idle -= from_idle;
    d_eng -= from_idle;
    const uint64_t from_off = d_eng < d_off ? d_eng : d_off;
    d_off -= from_off;
    folded_[i].busy_ns += d_busy + from_idle + from_off;
    folded_[i].idle_ns += d_idle;
    folded_[i].off_ns += d_off;
    folded_[i].state = raw.state;
    folded_[i].intensity_permille = raw.intensity_permille;
    if (working) {
      folded_[i].state = 2;
      folded_[i].intensity_permille = kTensorEngineIntensityPermille;
    }
    raw_[i] = raw;
    tensor_busy_[i] = eb;
    s[i] = folded_[i];
  }
}

void PowerService::publish(uint64_t now_ns) {
  const vtrn::power::ClockBudget b = clock();
  publish_clock(b.frequency_mhz, b.max_frequency_mhz);
  publish_active(active());
  if (!block_.attached()) return;
  snapshot(&scratch_);
  scratch_.refresh_ns = refresh_ns_;
  scratch_.refresh_max_ns = refresh_max_ns_;
  scratch_.refresh_total_ns = refresh_total_ns_;
  scratch_.refreshes = refreshes_;
  (void)now_ns;
  block_.publish(scratch_);
}

void PowerService::report_changes() {
  const vtrn::power::PowerManager& pm = manager();
  const uint32_t state = uint32_t(pm.device().state());
  if (state != logged_state_) {
    log(kLogInfo, "power: device %s -> %s",
        vtrn::power::device_state_name(vtrn::power::DeviceState(logged_state_)),
        vtrn::power::device_state_name(pm.device().state()));
    logged_state_ = state;
  }
  const uint64_t reasons = pm.clock_event_reasons() & ~uint64_t(vtrn::power::kReasonIdle);
  if (pm.pstate() != logged_pstate_ || reasons != logged_reasons_) {
    char buf[96];
    log(kLogInfo, "power: pstate %u (%u MHz), reasons %s, die %d mC, %u mW", unsigned(pm.pstate()),
        unsigned(pm.operating_point().frequency_mhz), reason_text(reasons, buf, sizeof buf),
        int(hottest_mc()), unsigned(pm.power_mw()));
    logged_pstate_ = pm.pstate();
    logged_reasons_ = reasons;
  }
}

void PowerService::tick(Turn& turn) {
  if (!enabled_) return;
  // The host queues' bytes, moved by the CPU copier or the DMA engines.
  const uint64_t hbm_bytes = dma::service().activity().bytes;
  if (hbm_bytes > hbm_bytes_seen_) add_hbm_bytes(hbm_bytes - hbm_bytes_seen_);
  hbm_bytes_seen_ = hbm_bytes;
  const uint64_t t0 = arch::now_ticks();
  const uint64_t now = arch::ticks_to_ns(t0);
  CoreSample s[vtrn::power::kMaxCores];
  uint32_t n = 0;
  sample(s, &n, now, turn.idle_ns);
  fold_tensor(s, n, false);
  refresh(s, n, now);
  complete(now);
  publish(now);
  const uint64_t cost = arch::ticks_to_ns(arch::now_ticks() - t0);
  refresh_ns_ = cost;
  if (cost > refresh_max_ns_) refresh_max_ns_ = cost;
  refresh_total_ns_ += cost;
  ++refreshes_;
  report_changes();
}

void report_link(uint32_t port, uint32_t ltssm_state, uint64_t tx_bytes) {
  g_service.report_link(port, ltssm_state, tx_bytes);
}

void note_activity() { g_service.note_activity(); }

void PowerService::report_link(uint32_t port, uint32_t ltssm_state, uint64_t tx_bytes) {
  if (!enabled_) return;
  note_link(port, link_power_state(ltssm_state), tx_bytes, arch::now_ns());
}

void PowerService::note_activity() {
  if (!enabled_) return;
  Controller::note_activity(arch::now_ns());
  if (transition_pending()) settle();
}

void PowerService::settle() {
  if (!enabled_) return;
  // Jobs in flight hold a quiesce; DMA progresses only in this loop, so it
  // is always at a chunk boundary here.
  bool in_flight = false;
#if VTRN_FW_POWER_HAVE_CORES
  const uint32_t count = fw::cores::count();
  for (uint32_t i = 0; i < count; ++i) {
    fw::cores::CoreSnapshot c{};
    fw::cores::snapshot(i, &c);
    if (c.state == fw::cores::kCoreRunning) in_flight = true;
  }
#endif
  set_work_in_flight(in_flight);
  const uint32_t before = transitions();
  const uint64_t now = arch::now_ns();
  complete(now);
  if (transitions() != before) {
    publish(now);
    report_changes();
  }
}

Vectors PowerService::poll(Turn&) {
  settle();
  return 0;
}

vtrn::Error PowerService::ready() const {
  if (!enabled_) return vtrn::Error(vtrn::Code::kNotReady, "power: the power service is not initialised");
  return vtrn::Error();
}

void PowerService::served(uint64_t now_ns) {
  settle();
  publish(now_ns);
  report_changes();
}

void PowerService::fill_telemetry(vtrn::hostif::Telemetry* t) const {
  t->temperature_mc = hottest_mc();
}

}  // namespace fw::power
