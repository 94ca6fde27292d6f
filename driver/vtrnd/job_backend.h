// The job service's view of vtrnd (JobBackend, job_service.h) over the real
// pieces: the board's Chips for readiness and control requests, the HBM
// service for job buffers, and the DMA service for moving their bytes.
//
// Transfers go through the DMA service's typed API (DmaService::write and
// read with a callback): the same checks and fair round robin as every
// client's DmaWrite / DmaRead, each transfer under an owner id of its own.
//
// Callbacks never run inside the call that started them: a dependency that
// answers at once (chip not ready, bad request) is deferred to the next
// loop turn, so the job service never re-enters itself.
#pragma once

#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dma_service.h"
#include "job_service.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"

namespace drv {

class HbmService;

class DaemonJobBackend final : public JobBackend {
 public:
  // `chips` is the daemon's list (it outlives this object).
  DaemonJobBackend(EventLoop* loop, const std::vector<std::unique_ptr<Chip>>* chips, DmaService* dma,
                   HbmService* hbm);

  Error chip_check(uint32_t chip) override;
  uint32_t neuron_cores(uint32_t chip) override;
  uint64_t hbm_bytes(uint32_t chip) override;
  void hbm_alloc(uint32_t chip, uint64_t owner, uint64_t bytes, AllocDone done) override;
  void hbm_free_owner(uint32_t chip, uint64_t owner, FreeDone done) override;
  void dma_write(uint32_t chip, uint64_t addr, const uint8_t* data, size_t len, Done done) override;
  void dma_read(uint32_t chip, uint64_t addr, uint64_t len, ReadDone done) override;
  void ctrl(uint32_t chip, const Vtrn__Ctrl__Request& req, uint32_t timeout_ms, CtrlDone done) override;
  uint32_t chip_job_state(uint32_t chip, uint64_t job_id) override;

  // Busy share of each NeuronCore since the previous call for this chip
  // (since boot on the first), from the firmware's job table (jobs_abi.h).
  // Empty when the table is absent, invalid or never held still.
  std::vector<double> core_utilization(uint32_t chip) override;

 private:
  Chip* find(uint32_t chip);
  // Runs f now, or on the next loop turn when called from inside a call.
  void deliver(std::function<void()> f);

  EventLoop* loop_;
  const std::vector<std::unique_ptr<Chip>>* chips_;
  DmaService* dma_;
  HbmService* hbm_;
  int in_call_ = 0;
  struct CoreSample {
    uint64_t busy = 0, total = 0;
  };
  std::map<uint32_t, std::vector<CoreSample>> core_prev_;  // by chip id
};

}  // namespace drv
