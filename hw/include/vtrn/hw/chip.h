// vtrn::hw::ChipHw: one chip's hardware inside vtrn-hw: its engine region
// (served as the ivshmem-doorbell function 00:02.0 through drv::IvshmemServer,
// vtrn-hw being peer 0), its mappings of the chip's RAM and BAR2 (fds from
// the launcher), one thread per engine, and reset.
//
// Threads. Each engine thread loops over its model's run_pass(); after work
// it keeps polling for spin_ns (a host batch arrives while it spins, with no
// wake-up) unless it was preempted lately (then the CPU it would spin on is
// wanted by another thread, maybe the host's), then blocks in epoll on its own doorbell eventfd (the chip
// rings its vector), a wake eventfd (the main loop's kick) and, for a DMA
// engine, the host's DMA doorbell eventfd (edge triggered, so every DMA
// engine sees every ring and a host batch wakes its engine directly, with
// no hop through the main loop). The main loop (hw/src/main.cpp) owns
// everything else: the control vector (reset requests, MPU updates, fault
// injection: it kicks every engine), the heartbeat, and the ivshmem
// connection. An idle chip costs one heartbeat store every
// engine::kHeartbeatMs and nothing else.
//
// Reset (firmware reset_req, the launcher's `reset`, or QEMU's connection
// closing) quiesces first: every engine thread finishes the unit of work
// it is in, resets its model and acknowledges; only then are the shared
// blocks reinitialised and reset_ack published. No engine write lands after
// reset() returns. With link engines (set_links, hw/board_links.h) the chip
// leaves the link fabric first (LinkFabric::begin_reset: peers' sends to it
// complete with kLinkPeerReset, its link blocks are zeroed) and rejoins it
// (end_reset) before reset_ack, so the firmware finds its link engines
// advertised again when it sees the ack.
#pragma once

#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vtrn/drv/fd.h"
#include "vtrn/drv/ivshmem_server.h"
#include "vtrn/hw/dma_engine.h"
#include "vtrn/hw/engine_context.h"
#include "vtrn/hw/engine_props.h"
#include "vtrn/hw/link_engine.h"
#include "vtrn/hw/tensor_engine.h"

namespace vtrn::hw {

// What the launcher hands over for one chip (inherited fds).
struct ChipFds {
  uint32_t id = 0;
  int ram_fd = -1;          // the chip's RAM memfd (QEMU's memory-backend-file)
  uint64_t ram_base = 0x40000000;
  int bar2_fd = -1;         // the host interface BAR2 memfd
  int doorbell_fd = -1;     // eventfd the host writes after submitting DMA descriptors
  int host_irq_fd = -1;     // eventfd of the host's DMA completion vector
  std::string socket;       // where to listen for the chip's QEMU (engine function)
};

class ChipHw final : public Signals {
 public:
  ChipHw() = default;
  ~ChipHw();
  ChipHw(const ChipHw&) = delete;
  ChipHw& operator=(const ChipHw&) = delete;

  bool start(const ChipFds& fds, const EngineProps& props, uint64_t spin_ns, std::string* err);
  void stop();

  // Main-loop events.
  bool accept_peer(std::string* err);
  void peer_gone();
  void control_vector();
  void heartbeat();
  // Quiesces and restarts every engine; returns the time it took.
  uint64_t reset();

  [[nodiscard]] uint32_t id() const { return id_; }
  [[nodiscard]] int listen_fd() const { return server_.listen_fd(); }
  [[nodiscard]] int peer_fd() const { return server_.peer_fd(); }
  [[nodiscard]] int control_fd() const { return server_.host_eventfd(engine::kVectorControl); }
  [[nodiscard]] uint64_t resets() const { return resets_; }
  // For a harness that plays the chip in process (dma_engine_bench): the
  // memory the engines reach, and the eventfd the chip's doorbell on
  // `vector` lands on (what QEMU writes when the firmware rings it).
  [[nodiscard]] const ChipMemory& memory() const { return mem_; }
  [[nodiscard]] int chip_doorbell_fd(uint16_t vector) const { return server_.host_eventfd(vector); }

  // Link engines: the fabric this chip is attached to (nullptr: none) and
  // the thread that runs it, kicked on the control vector (an MPU update
  // the link ports must acknowledge) and after a reset. Set before the
  // chip's QEMU connects; called from the main loop's thread.
  void set_links(LinkFabric* fabric, LinkFabricThread* thread);
  // The eventfd the chip's doorbell on kVectorLink0 + p lands on.
  [[nodiscard]] int link_doorbell_fd(uint32_t p) const {
    return server_.host_eventfd(uint32_t(engine::kVectorLink0) + p);
  }
  [[nodiscard]] ErrorLog& errors() { return *errors_; }

  void chip_irq(uint16_t vector) override;
  void host_irq() override;

 private:
  struct Worker {
    std::thread thread;
    drv::UniqueFd wake;
    int doorbell = -1;  // the chip's vector eventfd (not owned)
    uint32_t reset_seen = 0;
    bool dma = false;
    uint32_t index = 0;
  };
  void run(Worker* w);
  void write_id();
  bool pass(Worker* w);
  bool has_work(Worker* w);
  void reset_model(Worker* w);

  uint32_t id_ = 0;
  EngineProps props_;
  uint64_t spin_ns_ = 0;
  drv::IvshmemServer server_;
  drv::Mapping ram_;
  drv::UniqueFd ram_fd_;
  drv::Mapping bar2_;
  drv::UniqueFd doorbell_;
  drv::UniqueFd host_irq_;
  ChipMemory mem_;
  std::unique_ptr<ErrorLog> errors_;
  std::vector<std::unique_ptr<DmaEngine>> dma_;
  std::vector<std::unique_ptr<TensorEngine>> tensor_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> reset_epoch_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t acked_ = 0;
  uint32_t fw_reset_seen_ = 0;
  uint64_t resets_ = 0;
  LinkFabric* links_ = nullptr;
  LinkFabricThread* link_thread_ = nullptr;
};

}  // namespace vtrn::hw
