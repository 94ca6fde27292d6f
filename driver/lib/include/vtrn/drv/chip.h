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
// Control requests are serialized per chip: one vtrn.ctrl.Request in flight,
// matched to its Response by seq, with its own timeout; responses to timed
// out requests are recognised by seq and dropped. Round-trip time is
// measured from just before the request is published to just after its
// response is popped (CLOCK_MONOTONIC). Chip never blocks the event loop
// except for the optional spin of WAIT_SPIN_BLOCK (bounded by kSpinNs).
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
#include "vtrn/drv/dma_engine.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/host_interface.h"
#include "vtrn/drv/ivshmem_server.h"
#include "vtrn/drv/qmp.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

inline constexpr uint64_t kSpinNs = 50'000;
inline constexpr size_t kLogHistoryLines = 4096;

struct ChipOptions {
  std::string runtime_dir;  // the chip lives in runtime_dir/chip<N>
  std::string qemu;
  std::string firmware;
  std::string board_model;
  std::vector<uint8_t> dtb;  // the board tree every chip is given
  vtrn::board::Chip board;
  uint32_t gdb_port = 0;     // 0: no gdbstub
  uint32_t boot_timeout_ms = 10000;
  // Appended to the QEMU command line after qemu/chip.args (for example the
  // link service's ivshmem-plain devices, one per link port).
  std::vector<std::string> extra_qemu_args;
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
  Vtrn__Api__ChipState state = VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN;
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
};

struct TelemetrySample {
  vtrn::hostif::Telemetry t{};
  double idle_ratio = 0;
  uint64_t host_rx_events = 0;
};

class Chip {
 public:
  struct CtrlResult {
    Vtrn__Api__Status status = VTRN__API__STATUS__STATUS_OK;
    std::string error;
    const Vtrn__Ctrl__Response* response = nullptr;  // valid during the callback only
    uint64_t rtt_ns = 0;
  };
  using CtrlDone = std::function<void(const CtrlResult&)>;
  using LogListener = std::function<void(const std::vector<std::string>& lines, uint64_t lost)>;

  Chip(EventLoop* loop, ChipOptions opts);
  ~Chip();
  Chip(const Chip&) = delete;
  Chip& operator=(const Chip&) = delete;

  // Creates the chip directory and sockets and launches QEMU. On failure the
  // chip is FAILED with the reason (also returned in *err).
  bool start(std::string* err);
  // From vtrnd's SIGCHLD handler, with waitpid's status.
  void on_child_exit(int wait_status);
  // The running QEMU's pid, -1 once it has been reaped (the number may
  // already belong to another process then).
  [[nodiscard]] pid_t pid() const { return exited_ ? -1 : pid_; }
  [[nodiscard]] uint32_t id() const { return opts_.board.id; }
  [[nodiscard]] const ChipOptions& options() const { return opts_; }

  // Queues a control request (answered with STATUS_CHIP_NOT_READY unless
  // READY). `spin`: WAIT_SPIN_BLOCK.
  void submit(const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, bool spin, CtrlDone done);

  [[nodiscard]] Vtrn__Api__ChipState state() const { return state_; }
  [[nodiscard]] ChipStatus status() const;
  [[nodiscard]] bool settled() const;  // READY, FAILED, PANIC or HALTED
  bool telemetry(TelemetrySample* out);

  // Log history (oldest first) and live subscribers.
  [[nodiscard]] const std::deque<std::string>& log_history() const { return history_; }
  [[nodiscard]] uint64_t log_lost_bytes() const { return lost_total_; }
  int subscribe_logs(LogListener l);
  void unsubscribe_logs(int id);

  // Unsolicited firmware events other than boot (job completions, link and
  // ECC events, ...): every listener sees every event, in ring order, on
  // vtrnd's loop thread; the event is freed after the listeners return.
  using EventListener = std::function<void(const Vtrn__Ctrl__Event& ev)>;
  int subscribe_events(EventListener l);
  void unsubscribe_events(int id);

  // Orderly stop: firmware Shutdown if READY, then QMP quit, then SIGKILL,
  // each after a grace period; `done` runs once QEMU is reaped (or was
  // never running).
  void stop(std::function<void()> done);
  // Removes everything in the chip directory and the directory itself.
  // Call only after QEMU is gone.
  void cleanup();

  std::function<void(Chip&)> on_state_change;

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
  struct Op {
    std::vector<uint8_t> payload;
    uint32_t timeout_ms;
    bool spin;
    CtrlDone done;
  };

  std::vector<std::pair<int, EventListener>> event_listeners_;
  int next_event_listener_ = 1;
  void set_state(Vtrn__Api__ChipState s, const std::string& error = "");
  void fail(const std::string& why);
  void check_firmware();
  void on_ready();
  void on_panic();
  void on_boot_timeout();
  void on_host_doorbell(uint32_t vector);
  void pump();
  void issue_front();
  void process_responses();
  void complete_inflight(const CtrlResult& r);
  void fail_all_ops(Vtrn__Api__Status status, const std::string& why);
  void poll_logs();
  void sample_telemetry();
  void schedule_poll(uint64_t delay_ns);
  void read_qemu_output();
  std::vector<std::string> last_lines(size_t n) const;
  std::string last_line() const;
  void finish_stop();

  EventLoop* loop_;
  ChipOptions opts_;
  std::string dir_;
  std::string label_;  // "chip N"
  IvshmemServer ivshmem_;
  std::unique_ptr<QmpClient> qmp_;
  HostInterface hif_;
  DmaEngine dma_;
  pid_t pid_ = -1;
  UniqueFd qemu_out_;
  std::deque<std::string> qemu_lines_;
  std::string qemu_partial_;
  std::string cmdline_;
  Vtrn__Api__ChipState state_ = VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN;
  std::string error_;
  std::vector<std::string> fail_lines_;
  uint64_t launch_ns_ = 0;
  uint64_t boot_ns_ = 0;
  bool has_panic_ = false;
  vtrn::hostif::PanicRecord panic_{};
  FwInfo info_;
  bool test_mode_ = false;

  EventLoop::TimerId boot_timer_ = 0;
  EventLoop::TimerId poll_timer_ = 0;

  std::deque<Op> ops_;
  bool inflight_ = false;
  Op current_;
  uint32_t current_seq_ = 0;
  uint64_t current_t0_ = 0;
  EventLoop::TimerId op_timer_ = 0;
  uint32_t next_seq_ = 1;
  bool pumping_ = false;
  bool repump_ = false;

  std::deque<std::string> history_;
  uint64_t lost_total_ = 0;
  std::map<int, LogListener> listeners_;
  int next_listener_ = 1;

  bool have_prev_sample_ = false;
  vtrn::hostif::Telemetry prev_sample_{}, last_sample_{};
  uint64_t host_rx_events_ = 0;

  bool stopping_ = false;
  bool exited_ = false;
  int stop_phase_ = 0;
  EventLoop::TimerId stop_timer_ = 0;
  std::vector<std::function<void()>> stop_done_;
};

const char* chip_state_name(Vtrn__Api__ChipState s);

}  // namespace drv
