// vtrnd's daemon: the transport (the client socket, frames, the orderly
// shutdown, signals), the chips of one board, and the ServiceRegistry
// (service.h) every request kind is routed through. Its own requests are the
// ones about the board and the chips themselves: list, info, ping, logs,
// telemetry (each service adds its fields), shutdown.
//
// Everything runs on one EventLoop: clients are non-blocking with their own
// output buffers, so a client that stops reading only grows its own buffer
// (and is dropped past a limit); it never delays other clients or the chips.
#pragma once

#include <stdint.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/drv/board_file.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/hw_process.h"
#include "job_backend.h"
#include "link_service.h"
#include "metrics.h"
#include "runtime_dir.h"
#include "service.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fd.h"
#include "vtrn/drv/wire.h"

namespace drv {

class ChipService;

class HbmService;
class JobService;

struct DaemonOptions {
  std::string runtime_dir;
  std::string qemu;
  std::string firmware;
  std::string vtrn_hw;         // the board's engines process (hw/)
  std::string copy_engine = "engines";  // who serves the host DMA queues: "engines" or "cpu" (firmware)
  uint32_t boot_timeout_ms = 10000;  // each chip's own boot, from its QEMU launch to READY
  // Chips whose QEMU boots at once; the others wait their turn in chip
  // order (a big board booting at once starves every boot of CPU). 0: two
  // per host CPU.
  uint32_t boot_parallel = 0;
  bool gdb = false;            // a gdbstub per chip
  uint32_t gdb_base_port = 0;  // chip N on base + N; 0: any free port for each
  bool allow_raw_dma = false;  // DmaCopy.raw (hostile-input tests)
  // --group: the gid the runtime directory (0750) and socket (0660) are
  // shared with; its users connect as tenants. -1: only vtrnd's own uid.
  int64_t share_gid = -1;
  bool allow_qmp_write = false;  // QmpRequest beyond the read-only allow list
  uint64_t hbm_client_quota_bytes = 0;  // per client per chip, 0 = none
  bool hbm_dma_unchecked = false;  // DMA outside allocations allowed
  int32_t metrics_port = -1;   // Prometheus exporter on 127.0.0.1 (-1 = off, 0 = any port)
  uint32_t watchdog_ms = 0;      // 0: 10 telemetry periods, at least 1 s
  bool watchdog = true;
  bool auto_recover = true;      // reset hung, panicked or dead chips (off with --gdb)
  uint32_t reset_limit = 3;      // automatic resets per chip inside reset_window_ms
  uint32_t reset_window_ms = 60000;
};

class Daemon {
 public:
  Daemon(DaemonOptions opts, BoardSpec board);
  ~Daemon();

  // Takes the runtime directory (refusing when another vtrnd owns it),
  // listens on vtrnd.sock and launches every chip (RuntimeDir's errors,
  // vtrn-hw's, kSystem).
  Error start();
  // Runs until shutdown completes; returns the process exit status.
  int run();

 private:
  struct Conn {
    UniqueFd fd;
    FrameDecoder decoder;
    std::vector<uint8_t> out;
    size_t out_off = 0;
    bool want_write = false;
    uid_t uid = 0;  // the peer's, from SO_PEERCRED
  };

  Error start_board_hw(const std::vector<Chip*>& chips);
  // Launches queued chips while fewer than boot_parallel are booting.
  void boot_more();
  void on_boot_settled(Chip& c);
  void on_accept();
  void on_conn_event(uint64_t cid, uint32_t events);
  [[nodiscard]] bool client_is_admin(uint64_t cid) const;
  [[nodiscard]] uint32_t client_uid(uint64_t cid) const;
  [[nodiscard]] bool admin_only(Vtrn__Api__Request__BodyCase body) const;
  void close_conn(uint64_t cid);
  void handle_frame(uint64_t cid, const std::vector<uint8_t>& payload);
  void reply(uint64_t cid, Vtrn__Api__Response* resp);
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);
  void flush(uint64_t cid);
  Chip* find_chip(uint32_t id);

  void do_hello(uint64_t cid, uint64_t id, const Vtrn__Api__HelloRequest& r);
  void do_shutdown(uint64_t cid, uint64_t id);

  void on_signal();
  void reap_children();
  void begin_shutdown();
  void finish_shutdown();
  void remove_runtime_files(bool keep_log = false);

  DaemonOptions opts_;
  BoardSpec board_;
  EventLoop loop_;
  RuntimeDir runtime_;
  UniqueFd listen_;
  UniqueFd signal_fd_;
  std::vector<std::unique_ptr<Chip>> chips_;
  std::unique_ptr<HwBoard> hw_;  // the board's vtrn-hw: started before the chips' QEMUs, stopped after
  // What the job and collective services see of the chips, DMA and HBM:
  // outlives them (declared before the registry).
  std::unique_ptr<DaemonJobBackend> job_backend_;
  std::unique_ptr<MetricsServer> metrics_;
  // Every service, in start order; cleared before the chips (see ~Daemon).
  ServiceRegistry services_;
  ChipService* chip_service_ = nullptr;  // owned by services_
  LinkService* links_ = nullptr;  // needed before the chips exist (QEMU args)
  // Tenants: the DMA service asks the HBM service whose memory a range is,
  // the HBM service asks the job service whose job a buffer is. Owned by
  // services_.
  HbmService* hbm_ = nullptr;
  JobService* jobs_ = nullptr;
  std::map<uint64_t, Conn> conns_;
  uint64_t next_conn_ = 1;
  bool shutting_down_ = false;
  uint32_t chips_to_stop_ = 0;
  // Paced first boot: chips in launch order, the next to launch, and the
  // ones launched whose boot has not settled (READY, FAILED, ...) yet.
  std::vector<Chip*> boot_queue_;
  size_t boot_next_ = 0;
  std::vector<Chip*> booting_;
  uint32_t boot_parallel_ = 2;
  uint32_t chips_stopped_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> shutdown_waiters_;  // (conn, request id)
  int exit_status_ = 0;
  // reply() as the ReplyFn the services and the reply builders take.
  const ReplyFn reply_fn_ = [this](uint64_t cid, Vtrn__Api__Response* r) { reply(cid, r); };
};

}  // namespace drv
