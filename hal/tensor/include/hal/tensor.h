// hal::tensor: the firmware's driver for one tensor engine (engine_abi.h,
// one per NeuronCore), reached through the engine region hal/copy_engine.h
// discovers. submit() copies a GEMM command into the engine's queue and
// publishes it, ring() wakes the engine, poll() copies out one completion
// (status, flops, wall and modeled time). configure() gives the engine its
// remap window (engine ABI 1.3, kCapTensorRemap: the device addresses of
// stitched HBM allocations, reached through translated MPU windows);
// config_done() tells when the engine answered.
//
// Splitting a GEMM step across engines, deciding what to wait for and what a
// status means for a job are the caller's (the job scheduler's) business;
// this driver checks only what it must to keep the queue well-formed.
// Same access rules as hal/copy_engine.h: index words through hal::mmio,
// entries before the index that publishes them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/copy_engine.h"
#include "hal/status.h"
#include "vtrn/engine_abi.h"

namespace hal::tensor {

// One GEMM (numerics.h storage): C[m, n] (row stride ldc floats, 0 = n) =
// A[m, k] . B[n, k]^T; addresses are chip physical (HBM).
struct Gemm {
  uint32_t dtype = 0;  // vtrn::num::DType
  uint32_t m = 0, n = 0, k = 0, ldc = 0;
  uint64_t a = 0, a_scales = 0, b = 0, b_scales = 0, c = 0;
  uint64_t cookie = 0;
  bool irq = true;
};

class TensorEngine {
 public:
  TensorEngine() = default;
  TensorEngine(const TensorEngine&) = delete;
  TensorEngine& operator=(const TensorEngine&) = delete;

  // kNotReady: region not initialised; kOutOfRange: no engine `index`.
  // Picks up the queue where it is (index 0 after a chip engine reset).
  Status init(copy::EngineRegion& region, uint32_t index);

  // Writes the remap window (every field, then the generation that
  // publishes them) and rings the engine. kNotReady: not initialised;
  // kNotFound: the engines lack kCapTensorRemap (ABI < 1.3: the block has
  // no config there, nothing is written); kInvalidArgument: reserved words
  // not zero.
  Status configure(const vtrn::engine::TensorConfig& config);
  // True once the engine answered the last configure() (*status:
  // EngineError | ConfigField << 8, kEngineOk when applied).
  [[nodiscard]] bool config_done(uint32_t* status) const;

  // kCapacity: kTensorDepth commands in flight (completions not yet polled);
  // kInvalidArgument: zero m, n or k (the engine would refuse it anyway).
  Status submit(const Gemm& g);
  Status ring();
  // kNotFound: nothing completed since the last poll.
  Status poll(vtrn::engine::TensorCompletion* out);

  void arm_irq(bool on);
  [[nodiscard]] uint32_t in_flight() const { return sq_prod_ - cq_cons_; }
  // The queue's latched error (dma::QueueError values), 0 if healthy.
  [[nodiscard]] uint32_t error() const;
  [[nodiscard]] uint32_t index() const { return index_; }

 private:
  copy::EngineRegion* region_ = nullptr;
  vtrn::engine::TensorEngineBlock* blk_ = nullptr;
  uint32_t index_ = 0;
  uint32_t sq_prod_ = 0;
  uint32_t cq_cons_ = 0;
  uint32_t config_gen_ = 0;
};

}  // namespace hal::tensor
