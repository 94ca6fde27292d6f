// One chip as vtrnd owns it: its runtime directory, ivshmem server (BAR2 +
// eventfds), QMP socket, QEMU process, boot handshake and control queue.
//
// Lifecycle (vtrn.api.ChipState): STARTING (QEMU launched) -> BOOTING (QEMU
// connected to the ivshmem server) -> READY (FwHeader.state READY and the
// layout validated) or FAILED (QEMU exited, timeout, invalid layout, broken
// ring) or PANIC (FwHeader.state PANIC; the panic record is kept) ->
// HALTED after an orderly stop. Every failure carries one line of error text
// ("chip 1: QEMU exited with status 1 during boot: <last line>") and the last
// firmware/UART/QEMU lines.
//
// Reset and recovery (issue 8). Once a chip has been READY, vtrnd keeps it
// alive: a heartbeat that stops advancing for the watchdog timeout
// (FwHeader.heartbeat, +1 per telemetry period), FwHeader.state PANIC, a
// broken control ring, or QEMU dying each start a reset. The reset records
// why (ResetInfo: cause, reason, panic summary, last log lines), fails every
// control request in flight or queued with "chip N was reset: <reason>", and
// detaches DMA (chains in flight complete locally with kErrReset); then QMP
// system_reset reboots the same QEMU (QEMU reloads the -kernel image and the
// loader blobs and resets the vCPUs and devices; BAR2 keeps its contents, so
// the firmware sees its old header and bumps boot_generation), or a new QEMU
// is launched on the same sockets when the old one died. The chip is BOOTING
// until the firmware publishes READY under a boot generation different from
// the one that went down (the old header says READY until the new firmware
// overwrites it), then it is re-validated and re-attached like a first boot.
// More than reset_limit automatic resets inside reset_window_ms (each one
// delayed by a growing back-off) end the chip FAILED with the reason. A
// first boot that fails is not retried: the configuration is wrong, not the
// chip. With a gdbstub, nothing is reset automatically (the debugger owns it).
//
// Chip is composed of parts that are tested alone: the QEMU child and its
// output (QemuProcess), the control queue (CtrlQueue: one vtrn.ctrl.Request
// in flight, matched by seq, its own timeout, late answers dropped), the
// kept firmware log (LogStream) and the reset policy (RecoveryPolicy). What
// stays here is the chip's state machine that joins them. Chip never blocks
// the event loop except for the optional spin of WAIT_SPIN_BLOCK (bounded by
// kSpinNs).
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/board.h"
#include "vtrn/drv/chip_state.h"
#include "vtrn/drv/ctrl_queue.h"
#include "vtrn/drv/dma_engine.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/heartbeat_watchdog.h"
#include "vtrn/drv/host_interface.h"
#include "vtrn/drv/hw_process.h"
#include "vtrn/drv/ivshmem_server.h"
#include "vtrn/drv/log_stream.h"
#include "vtrn/drv/qemu_process.h"
#include "vtrn/drv/qmp.h"
#include "vtrn/drv/recovery_policy.h"
#include "vtrn/drv/telemetry_history.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {


struct ChipOptions {
  std::string runtime_dir;  // the chip lives in runtime_dir/chip<N>
  std::string qemu;
  std::string firmware;
  std::string board_model;
  std::vector<uint8_t> dtb;  // the board tree every chip is given
  vtrn::board::Chip board;
  bool gdb = false;          // a gdbstub on 127.0.0.1:gdb_port
  uint32_t gdb_port = 0;     // 0: any free port (QEMU binds it; vtrnd asks QMP which)
  uint32_t boot_timeout_ms = 10000;
  std::string copy_engine = "engines";  // vtrn.copy_engine: "engines" (the DMA engines serve the host queues) or "cpu"
  // Appended to the QEMU command line after qemu/chip.args (for example the
  // link service's ivshmem-plain devices, one per link port).
  std::vector<std::string> extra_qemu_args;
  // Reliability: watchdog and automatic recovery (see the top of this file).
  uint32_t watchdog_ms = 0;          // 0: max(watchdog_min_ms, watchdog_periods x telemetry period)
  uint32_t watchdog_periods = 10;
  uint32_t watchdog_min_ms = 1000;
  bool watchdog = true;              // false: a stopped heartbeat is not acted on
  bool auto_recover = true;          // false: hang/panic/QEMU death leave the chip PANIC or FAILED
  uint32_t reset_limit = 3;          // automatic resets allowed inside reset_window_ms
  uint32_t reset_window_ms = 60000;
};

// What the last reset left behind (vtrn.api.ResetHistory).
struct ResetInfo {
  uint32_t count = 0;
  ResetCause last_cause = ResetCause::kNone;
  std::string last_reason;
  uint64_t last_unix_ms = 0;
  uint64_t last_detect_ns = 0;   // injected fault (or last heartbeat progress) -> detection
  uint64_t last_recover_ns = 0;  // detection -> READY again
  std::string last_panic;        // panic summary of the boot that went down
  std::vector<std::string> last_log;
  uint32_t recent = 0;
  uint32_t qemu_relaunches = 0;
  bool recovering = false;
  uint32_t engines_quiesced = 0;         // resets whose engines vtrn-hw stopped first
  uint64_t last_engines_quiesce_ns = 0;  // how long that took, the last time
};

// What the firmware told us in its Info response (cached after boot).
struct FwInfo {
  bool valid = false;
  std::string fw_version, build_id, chip_name, board_model, pci_address, cpu;
  uint64_t timer_hz = 0;
  uint32_t gic_version = 0;
};

struct ChipStatus {
  uint32_t id = 0;
  ChipState state = ChipState::kUnknown;
  std::string error;
  std::vector<std::string> last_log;
  int pid = 0;
  uint32_t gdb_port = 0;
  uint64_t boot_ns = 0;
  uint64_t bar2_bytes = 0;
  uint64_t uptime_ns = 0;
  uint64_t heartbeat = 0;
  bool header_valid = false;
  vtrn::hostif::FwHeader header{};
  bool has_panic = false;
  vtrn::hostif::PanicRecord panic{};
  FwInfo info;
  std::string qemu_cmdline;
  ResetInfo reset;
  uint32_t watchdog_ms = 0;  // 0 = off
};

struct TelemetrySample {
  vtrn::hostif::Telemetry t{};
  double idle_ratio = 0;
  uint64_t host_rx_events = 0;
};

// The host-side PCI address of chip `id`'s card: each chip is its own
// device, 32 to a bus from bus 0x10 (as cards behind a host's PCIe
// switches enumerate), so every chip id a board may use (< 256) gets a
// distinct "DDDD:BB:DD.F" and chip 0 is "0000:10:00.0". The address of the
// host-interface function inside the chip's own QEMU is
// ChipInfo::pci_address, the same on every chip.
std::string host_pci_bus_id(uint32_t id);

class Chip {
 public:
  using LogListener = LogStream::Listener;

  Chip(EventLoop* loop, ChipOptions opts);
  ~Chip();
  Chip(const Chip&) = delete;
  Chip& operator=(const Chip&) = delete;

  // Creates the chip directory, sockets, RAM memfd and DMA doorbell (what
  // vtrn-hw needs before any QEMU starts). On failure the chip is FAILED
  // with the reason (also returned).
  Error prepare();
  // prepare() if not done yet, then launches QEMU.
  Error start();
  // What the board's vtrn-hw is given for this chip (valid once prepared).
  [[nodiscard]] bool hw_prepared() const { return prepared_; }
  [[nodiscard]] const ChipHwLink& hw_link() const { return hw_link_; }
  [[nodiscard]] int bar2_fd() const { return ivshmem_.memfd(); }
  [[nodiscard]] int dma_irq_fd() const { return ivshmem_.host_eventfd(vtrn::hostif::kVectorDma); }
  // vtrn-hw died: the chip cannot work until the board restarts. Its QEMU
  // is killed, it is FAILED with `why`, and resets are refused.
  void hardware_lost(const std::string& why);
  // The board's vtrn-hw, once it runs: every reset of this chip first has
  // it stop the chip's engines (HwBoard::reset_chip), then resets the chip.
  void set_hw_board(HwBoard* board) { hw_board_ = board; }
  // From vtrnd's SIGCHLD handler, with waitpid's status.
  void on_child_exit(int wait_status);
  // The running QEMU's pid, -1 once it has been reaped (the number may
  // already belong to another process then).
  [[nodiscard]] pid_t pid() const { return qemu_.running() ? qemu_.pid() : -1; }
  [[nodiscard]] uint32_t id() const { return opts_.board.id; }
  [[nodiscard]] std::string pci_bus_id() const { return host_pci_bus_id(id()); }
  [[nodiscard]] const ChipOptions& options() const { return opts_; }

  // Queues a control request (answered with STATUS_CHIP_NOT_READY unless
  // READY). `spin`: WAIT_SPIN_BLOCK.
  void submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool spin, CtrlDone done);

  [[nodiscard]] ChipState state() const { return state_; }
  // QEMU was launched at least once (start, or a reset of a chip never started).
  [[nodiscard]] bool launched() const { return launch_ns_ != 0; }
  // Why work on this chip cannot run now: the one text of every request
  // refused or failed because the chip is not READY (vtrnd's services use
  // it and build none of their own). "chip 1 was reset: manual reset (vtrn
  // reset)" while a reset is under way, "chip 1 is stopping" once an orderly
  // stop began, else "chip 1 is BOOTING", with " (<error>)" when the chip
  // failed with one ("chip 1 is FAILED (chip 1: QEMU exited ...)").
  [[nodiscard]] std::string not_ready_reason() const;
  [[nodiscard]] ChipStatus status() const;
  [[nodiscard]] bool settled() const;  // READY, FAILED, PANIC or HALTED
  // Asks the firmware for a telemetry refresh (kVectorAux) when it offers
  // one (kCapTelemetryOnDemand) and the chip is READY; telemetry() then
  // waits for it. Ask every chip first, then read, so the waits overlap.
  void ask_telemetry();
  // The latest telemetry: after ask_telemetry() (or, without one pending,
  // after asking now) the block the firmware refreshed for it, or the last
  // one when the refresh did not come within kTelemetryWaitNs (a stalled
  // chip is the watchdog's business, not a reader's).
  bool telemetry(TelemetrySample* out);
  // The firmware's power/thermal block (validated, see HostInterface::read_power);
  // only while READY.
  Error power_telemetry(vtrn::power::PowerTelemetry* out) const {
    if (state_ != ChipState::kReady) return Error(Code::kNotReady, not_ready_reason());
    return hif_.read_power(out);
  }
  // The firmware's link status block (vtrn/links_abi.h, kLinksSize bytes of
  // BAR2) while READY, else nullptr. The firmware rewrites it at any time:
  // readers copy it under its seqlock and validate the copy.
  [[nodiscard]] const uint8_t* links_block() const {
    if (state_ != ChipState::kReady || hif_.bar2() == nullptr) return nullptr;
    return hif_.bar2() + vtrn::hostif::kLinksOffset;
  }
  // The firmware's job status table (vtrn/jobs_abi.h, kJobsSize bytes of
  // BAR2) while READY, else nullptr. Same rules as links_block: copy each
  // record under its seq counter, then validate the copy.
  [[nodiscard]] const uint8_t* jobs_block() const {
    if (state_ != ChipState::kReady || hif_.bar2() == nullptr) return nullptr;
    return hif_.bar2() + vtrn::hostif::kJobsOffset;
  }

  // Log history (oldest first) and live subscribers.
  [[nodiscard]] const std::deque<std::string>& log_history() const { return logs_.history(); }
  int subscribe_logs(LogListener l) { return logs_.subscribe(std::move(l)); }
  void unsubscribe_logs(int id) { logs_.unsubscribe(id); }

  // Unsolicited firmware events other than boot (job completions, link and
  // ECC events, ...): every listener sees every event, in ring order, on
  // vtrnd's loop thread; the event is freed after the listeners return.
  using EventListener = std::function<void(const Vtrn__Ctrl__Event& ev)>;
  int subscribe_events(EventListener l);
  void unsubscribe_events(int id);

  // Resets the chip through the same path as the watchdog (QMP
  // system_reset, or a new QEMU when the old one is gone); `done` runs once
  // it is READY again (ok) or has failed to come back (ok false + why).
  // Refused (done at once) while the first boot is still running or the
  // chip is stopping. A manual reset clears the automatic give-up window.
  using ResetDone = std::function<void(bool ok, const std::string& why)>;
  void reset(ResetCause cause, const std::string& reason, ResetDone done);
  // Fault injection: the next detection measures its time from now.
  void note_fault_injected();
  // The heartbeat timeout in force (0 = watchdog off or not READY yet).
  [[nodiscard]] uint32_t watchdog_ms() const;
  [[nodiscard]] const ResetInfo& reset_info() const { return reset_; }

  // Orderly stop: firmware Shutdown if READY, then QMP quit, then SIGKILL,
  // each after a grace period; `done` runs once QEMU is reaped (or was
  // never running).
  void stop(std::function<void()> done);
  // Removes everything in the chip directory and the directory itself.
  // Call only after QEMU is gone.
  void cleanup();

  std::function<void(Chip&)> on_state_change;

  // The chip's QEMU monitor through vtrnd's own QMP connection (QEMU
  // connects to vtrnd, so no second QMP client can): `command` with its
  // `arguments_json` object ("" for none). Fails at once, with
  // monitor_ready()'s text, when no QEMU monitor is connected. The caller
  // decides what is allowed. monitor_ready() is success when the monitor is
  // connected, else kNotReady "chip N has no QEMU monitor connected (STATE)".
  [[nodiscard]] Error monitor_ready() const;
  void monitor(const std::string& command, const std::string& arguments_json, QmpClient::Reply reply);

  // DMA (only attached while READY and when the firmware sets kCapDma).
  // Chip rings the firmware on hostif::kVectorDma after each submission and
  // calls on_dma_event when the firmware rings back on kVectorDma, and once
  // more after leaving READY (the engine then holds every chain that was in
  // flight, completed locally with kErrReset).
  [[nodiscard]] DmaEngine& dma() { return dma_; }
  std::function<void()> on_dma_event;

  // Test hook: a chip driven by in-memory BAR2 instead of QEMU.
  void attach_for_test(uint8_t* bar2, uint64_t size);
  void poll_for_test() {
    check_firmware();
    pump();
    poll_logs();
  }

 private:
  std::vector<std::pair<int, EventListener>> event_listeners_;
  int next_event_listener_ = 1;
  void set_state(ChipState s, const std::string& error = "");
  void fail(const std::string& why);
  void check_firmware();
  void on_ready();
  void on_panic();
  void on_boot_timeout();
  void on_host_doorbell(uint32_t vector);
  void pump();
  void on_ctrl_event(const Vtrn__Ctrl__Event& ev);
  void on_ctrl_broken(const std::string& reason);
  void poll_logs();
  void sample_telemetry();
  void await_telemetry();
  void schedule_poll(uint64_t delay_ns);
  std::vector<std::string> last_lines(size_t n) const;
  std::string last_line() const;
  void finish_stop();
  bool recovery_allowed() const;
  void begin_reset(ResetCause cause, const std::string& reason);
  void do_reset();
  void give_up(const std::string& why);
  void finish_reset(bool ok, const std::string& why);
  Error launch();
  // Asks QEMU (QMP query-chardev) which port its gdbstub bound.
  void learn_gdb_port();
  void drop_qemu_connections();
  void check_watchdog();
  std::string panic_summary() const;

  EventLoop* loop_;
  ChipOptions opts_;
  std::string dir_;
  std::string label_;  // "chip N"
  QemuProcess qemu_;
  IvshmemServer ivshmem_;
  ChipHwLink hw_link_;
  bool prepared_ = false;
  std::string hw_lost_;  // why the board's vtrn-hw is gone ("" while it runs)
  HwBoard* hw_board_ = nullptr;
  bool engines_quiesced_ = false;  // this reset's engines are stopped: reset the chip now
  uint32_t quiesce_gen_ = 0;       // the engine reset a do_reset() is waiting for
  std::unique_ptr<QmpClient> qmp_;
  HostInterface hif_;
  CtrlQueue ctrl_;  // after hif_ and label_, which it uses
  DmaEngine dma_;
  uint32_t gdb_port_ = 0;  // the port the gdbstub listens on (0 until known)
  std::string cmdline_;
  ChipState state_ = ChipState::kUnknown;
  std::string error_;
  std::vector<std::string> fail_lines_;
  uint64_t launch_ns_ = 0;  // last QEMU launch; 0 until the first
  uint64_t boot_ns_ = 0;
  bool has_panic_ = false;
  vtrn::hostif::PanicRecord panic_{};
  FwInfo info_;
  bool test_mode_ = false;

  EventLoop::TimerId boot_timer_ = 0;
  EventLoop::TimerId poll_timer_ = 0;


  LogStream logs_;

  TelemetryHistory samples_;
  bool telemetry_asked_ = false;
  uint64_t telemetry_asked_ns_ = 0;   // monotonic, when ask_telemetry rang
  uint64_t telemetry_asked_up_ = 0;   // the block's uptime_ns then
  uint64_t host_rx_events_ = 0;

  // Reliability.
  std::vector<std::string> argv_;   // QEMU command line, reused by a relaunch
  ResetInfo reset_;
  bool ever_ready_ = false;
  bool recovering_ = false;
  bool in_begin_reset_ = false;
  uint32_t reset_generation_ = 0;   // boot generation that went down
  uint64_t detect_ns_ = 0;          // monotonic time of the last detection
  uint64_t inject_ns_ = 0;          // monotonic time of the last injected fault (0 = none)
  HeartbeatWatchdog watchdog_;
  RecoveryPolicy recovery_{opts_.reset_limit, opts_.reset_window_ms};  // when automatic resets go ahead
  std::string leaving_reason_;        // error text for requests failed by a reset
  EventLoop::TimerId reset_timer_ = 0;
  std::vector<ResetDone> reset_waiters_;

  bool stopping_ = false;
  int stop_phase_ = 0;
  EventLoop::TimerId stop_timer_ = 0;
  std::vector<std::function<void()>> stop_done_;
};

}  // namespace drv
