// fw::power: the chip's power service, the firmware glue around the portable
// PowerManager (common/power, vtrn/power.h). It builds the power
// configuration from the parsed board chip, runs the model and the governor
// on every telemetry tick, publishes vtrn::power::PowerTelemetry into the
// kRegionPower region of BAR2 (seqlock) and sets kCapPower, serves the power
// control requests (device state, power cap, pstate limit, autosuspend
// delay) and carries out D3hot: quiesce, wait for in-flight work, gate,
// sleep; D0 restores.
//
// Not the job executor and not the DMA engine: those stay in their
// services and ask this one two questions, from any core:
//   device_active() - may new DMA descriptors or jobs be taken now? False
//                     while the device is quiescing, in D3hot or resuming;
//                     work already started runs to its next safe point.
//   pace(core, n)   - called by an executor after each kernel chunk that
//                     kept `core` busy for n ns at the vCPU's native speed;
//                     it delays the core by n * (max_freq / cur_freq - 1)
//                     ns so the chunk takes as long as it would at the
//                     current operating point (DVFS really changes kernel
//                     speed). The delay sleeps in WFI on the core's own
//                     virtual timer when that core's GIC forwards the timer
//                     PPI, else in WFE; it never spins on a counter read.
// Both read one word published with release/acquire atomics; neither takes
// a lock or touches the PowerManager, which only the boot core's event loop
// uses.
//
// The quirk that shaped D3hot: the chip is one QEMU vCPU loop that must keep
// answering control requests (the host's D0 request arrives through the same
// ring). "Gated" therefore means the main loop stops running DMA passes and
// job dispatch and sleeps in WFI between interrupts; the control ring and
// the telemetry tick keep running on the always-on domain, as a real chip's
// management core would.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/power_controller.h"
#include "fw/service.h"
#include "vtrn/board.h"
#include "vtrn/hostif.h"
#include "vtrn/power.h"
#include "vtrn/seqlock.h"

namespace hal::gic {
class Gic;
}

namespace fw::power {

// Cross-core API (any core, any time; safe before init: active, full speed).
[[nodiscard]] bool device_active();
void pace(uint32_t core, uint64_t busy_ns);

// Link layer -> power model. Boot core only (fw::links calls it from its
// poll): the LTSSM state (a vtrn::link::LinkState value) of the port at
// position `port` of the chip's port list (the links block's order) and the
// data bytes that port has sent since boot. Report every running port on
// every poll; only a change of state is recorded (Controller::note_link).
// A port never reported stays down. Does nothing before init().
void report_link(uint32_t port, uint32_t ltssm_state, uint64_t tx_bytes);

// A resume trigger and busy mark from another service (boot core only): a
// host control request waiting, DMA descriptors queued. Resumes an
// autosuspended device; after a host D3hot request the work waits for the
// host's D0. Does nothing before the power service is up.
void note_activity();

// The boot core's side: the Controller plus its clock, the BAR2 block and
// the log lines. Every hook runs in the event loop only.
class PowerService final : public Controller {
 public:
  constexpr PowerService() = default;

  // Config from the board (kPanicBoard naming the property when it is
  // invalid), the first snapshot in BAR2, kCapPower.
  void init(const Boot& boot) override;
  [[nodiscard]] vtrn::Error ready() const override;
  // Republishes the block and the clock after every power request.
  void served(uint64_t now_ns) override;
  // Completes pending transitions; publishes the result.
  Vectors poll(Turn& turn) override;
  // Once per telemetry tick: core activity of the window (the boot core's
  // WFI time from the turn, the HBM bytes DMA has moved from the DMA
  // service), model, governor, BAR2 snapshot.
  void tick(Turn& turn) override;
  [[nodiscard]] bool has_work() override { return transition_pending(); }
  void fill_telemetry(vtrn::hostif::Telemetry* t) const override;

  void note_activity();
  // report_link() lands here.
  void report_link(uint32_t port, uint32_t ltssm_state, uint64_t tx_bytes);

 private:
  void sample(CoreSample* out, uint32_t* n, uint64_t now_ns, uint64_t boot_idle_ns) const;
  void fold_tensor(CoreSample* s, uint32_t n, bool first);
  void publish(uint64_t now_ns);
  void report_changes();
  void settle();

  // In BAR2; not attached without a power region.
  vtrn::hostif::SeqlockWriter<vtrn::power::PowerTelemetry> block_;
  vtrn::power::PowerTelemetry scratch_{};
  uint32_t core_count_ = 0;
  uint64_t init_ns_ = 0;
  uint64_t init_idle_ns_ = 0;
  uint64_t hbm_bytes_seen_ = 0;
  // The tensor engines' busy time folded into their cores' (fold_tensor).
  CoreSample raw_[vtrn::power::kMaxCores] = {};
  CoreSample folded_[vtrn::power::kMaxCores] = {};
  uint64_t tensor_busy_[vtrn::power::kMaxCores] = {};
  bool enabled_ = false;
  // Refresh cost, measured with the generic timer around tick().
  uint64_t refresh_ns_ = 0;
  uint64_t refresh_max_ns_ = 0;
  uint64_t refresh_total_ns_ = 0;
  uint64_t refreshes_ = 0;
  // What was last logged, so changes are logged once.
  uint32_t logged_state_ = 0;
  uint32_t logged_pstate_ = 0;
  uint64_t logged_reasons_ = 0;
};

PowerService& service();

}  // namespace fw::power
