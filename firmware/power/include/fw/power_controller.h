// fw::power::Controller: the hardware-free half of the firmware's power
// service. It owns the PowerManager (common/power), turns what the event
// loop observes (core activity per refresh window, host requests, DMA
// doorbells, in-flight work) into model inputs and device-state
// transitions, and holds the route table of the power control requests.
// Plain portable C++: the firmware derives fw::power::PowerService from it
// (timer, BAR2, logging, cross-core publication); host unit tests drive it
// with a simulated clock through the firmware's dispatcher.
//
// What it is not: it never sleeps, touches registers or BAR2. The device
// hooks of the state machine only set flags here; complete() finishes the
// transitions from the event loop, so a transition never re-enters the
// PowerManager from inside one of its own calls.
//
// Core activity arrives as cumulative per-core counters (busy, idle, off
// nanoseconds, as fw::cores reports them or as the boot core's idle time
// gives them). The manager integrates energy event by event, so a window's
// counters are replayed in a fixed order (gated, then idle, then running),
// which gives exact residency, utilization and energy for the window.
// Link power states arrive as timestamped changes from the link layer's
// poll and are queued until the refresh, then replayed in time order with
// the cores' events: applying one at once would integrate every core up to
// that moment at its previous window's state.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/service.h"
#include "vtrn/board.h"
#include "vtrn/error.h"
#include "vtrn/power.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::power {

// Cumulative counters of one core since boot.
struct CoreSample {
  uint64_t busy_ns = 0;
  uint64_t idle_ns = 0;
  uint64_t off_ns = 0;
  uint32_t state = 1;               // 0 off, 1 idle (WFI), 2 running (fw::cores numbering)
  uint32_t intensity_permille = 1000;
};

// What the board DTB adds beyond vtrn::board::Chip: the optional power
// properties this service reads itself (see board/bindings/vtrn,chip.md and
// vtrn,thermal-zone.md, "Power service properties").
struct BoardPowerExtras {
  uint32_t opp_count = 0;  // 0: the dev-board table
  vtrn::power::OperatingPoint opps[vtrn::power::kMaxOperatingPoints] = {};
  uint32_t autosuspend_delay_ms = 0;
  // Per-port link power by state (vtrn,link-l0-milliwatts ...); false: default.
  bool has_link_l0_mw = false, has_link_l0s_mw = false, has_link_l1_mw = false;
  uint32_t link_l0_mw = 0, link_l0s_mw = 0, link_l1_mw = 0;
  struct Zone {
    bool has_ambient = false;
    int32_t ambient_mc = 0;
    bool has_hysteresis = false;
    int32_t hysteresis_mc = 0;
    uint32_t resistance_mc_per_w = 0;   // 0: default
    uint32_t capacitance_mj_per_c = 0;  // 0: default
  } zones[vtrn::power::kMaxThermalZones];
};

// The link layer's LTSSM state (a vtrn::link::LinkState value) as a link
// power state: L0s and L1 as themselves; L0 and every state in which the
// SerDes runs (Polling, Configuration, Recovery, Loopback) as L0; Detect,
// Disabled and any unknown value as down.
[[nodiscard]] vtrn::power::LinkPowerState link_power_state(uint32_t ltssm_state);

// Reads the optional power properties of chip `chip_id` from a board DTB.
// Fails (kBadProperty, one line) when a present property is malformed
// (wrong length, a value out of its documented range).
[[nodiscard]] vtrn::Error read_board_extras(const void* fdt, size_t size, uint32_t chip_id,
                                            BoardPowerExtras* out);

// The PowerConfig of a chip: dev-board model defaults, the chip's core and
// port counts and HBM stacks, one thermal zone per board zone (a zone named
// "hbm" is heated by HBM, any other by cores, uncore and links; a board with
// no zones keeps the two default zones), the governor interval = telemetry
// period, then the extras. The caller validates the result.
[[nodiscard]] vtrn::power::PowerConfig config_from_chip(const vtrn::board::Chip& chip,
                                                        const BoardPowerExtras& extras);

class Controller : public Service, private vtrn::power::DeviceHooks {
 public:
  constexpr Controller() : Service("power") {}
  [[nodiscard]] std::span<const Route> routes() const override;
  ~Controller() = default;

  [[nodiscard]] vtrn::power::ConfigError configure(const vtrn::power::PowerConfig& cfg,
                                                   uint64_t now_ns);

  // One refresh window ends at now_ns: replays each core's counter deltas
  // (samples[i] for core i, n <= core count), then steps the model and the
  // governor.
  void refresh(const CoreSample* samples, uint32_t n, uint64_t now_ns);
  // The counters refresh() measures the first window from (call once at init).
  void set_baseline(const CoreSample* samples, uint32_t n);

  // HBM traffic (DMA copies, kernels): access energy.
  void add_hbm_bytes(uint64_t bytes) { pm_.add_hbm_bytes(bytes); }

  // What the link layer saw on `port` (its position in the chip's port
  // list, as in the links block) at now_ns: its power state and the data
  // bytes it has sent since boot. A change of state is queued for the next
  // refresh(); the same state again costs nothing, so the link layer may
  // report every port on every poll. Sent bytes are charged at once
  // (transfer energy has no duration). When the queue is full the change is
  // not recorded and the next report of that port records it, a little
  // late. Ports beyond the configured count are ignored.
  void note_link(uint32_t port, vtrn::power::LinkPowerState s, uint64_t tx_bytes,
                 uint64_t now_ns);

  // A resume trigger and busy mark: a host control request, a DMA doorbell
  // with descriptors queued, a job. Resumes an autosuspended device; after a
  // host D3hot request the work waits for the host's D0.
  void note_activity(uint64_t now_ns);
  // Some job or DMA chain has started and not reached a safe point:
  // quiescing waits for it. The event loop updates it before complete().
  void set_work_in_flight(bool in_flight) { in_flight_ = in_flight; }
  // Completes pending transitions (a quiesce once nothing is in flight, a
  // resume at once: restoring is immediate in this model).
  void complete(uint64_t now_ns);
  // True while complete() has a transition to finish.
  [[nodiscard]] bool transition_pending() const { return quiesce_pending_ || resume_pending_; }

  // New DMA descriptors and jobs may be taken: device in D0.
  [[nodiscard]] bool active() const;
  [[nodiscard]] vtrn::power::ClockBudget clock() const { return pm_.clock_budget(); }

  // The handlers of the power routes (vtrn_ctrl_power.proto): each answers
  // with the power status after the change.
  vtrn::Error set_state(const Vtrn__Ctrl__PowerSetStateRequest& r,
                        Vtrn__Ctrl__PowerStatusResponse& out, Call& c);
  vtrn::Error set_cap(const Vtrn__Ctrl__PowerSetCapRequest& r,
                      Vtrn__Ctrl__PowerStatusResponse& out, Call& c);
  vtrn::Error set_pstate_limit(const Vtrn__Ctrl__PowerSetPstateLimitRequest& r,
                               Vtrn__Ctrl__PowerStatusResponse& out, Call& c);
  vtrn::Error set_autosuspend(const Vtrn__Ctrl__PowerSetAutosuspendRequest& r,
                              Vtrn__Ctrl__PowerStatusResponse& out, Call& c);
  vtrn::Error status(const Vtrn__Ctrl__PowerStatusRequest& r,
                     Vtrn__Ctrl__PowerStatusResponse& out, Call& c);

  void snapshot(vtrn::power::PowerTelemetry* out) const { pm_.snapshot(out); }
  [[nodiscard]] int32_t hottest_mc() const;
  [[nodiscard]] const vtrn::power::PowerManager& manager() const { return pm_; }
  [[nodiscard]] uint32_t transitions() const { return transitions_; }

 private:
  vtrn::Error answer(vtrn::power::Status st, Vtrn__Ctrl__PowerStatusResponse* out) const;
  void start_quiesce() override { quiesce_pending_ = true; }
  void start_resume() override { resume_pending_ = true; }

  struct LinkEvent {
    uint64_t t = 0;
    uint32_t port = 0;
    vtrn::power::LinkPowerState state = vtrn::power::LinkPowerState::kDown;
  };
  // At most a few changes per port per window at the links service's
  // poll rate; 64 leaves room for every port to toggle L0/L0s several times.
  static constexpr uint32_t kMaxLinkEvents = 64;

  vtrn::power::PowerManager pm_;
  CoreSample last_[vtrn::power::kMaxCores] = {};
  LinkEvent link_events_[kMaxLinkEvents] = {};
  uint32_t link_event_count_ = 0;
  vtrn::power::LinkPowerState link_noted_[vtrn::power::kMaxPorts] = {};  // last queued
  uint64_t link_tx_seen_[vtrn::power::kMaxPorts] = {};
  uint64_t last_refresh_ns_ = 0;
  bool in_flight_ = false;
  bool activity_seen_ = false;
  bool quiesce_pending_ = false;
  bool resume_pending_ = false;
  uint32_t transitions_ = 0;
};

}  // namespace fw::power
