// vtrn::hw::TensorEngine: one tensor engine (one per NeuronCore), as vtrn-hw
// runs it. It consumes GEMM commands from its queue in the engine region,
// validates each copy (opcode, flags, shape with num::check_gemm, alignment,
// operand ranges in the chip's RAM, the MPU, C not overlapping its inputs),
// decodes A and B to f32 with num::dequantize_operand (exact for every
// dtype: bf16, both FP8 formats and E2M1 x E8M0 are all f32 values), and
// multiplies them with OpenBLAS cblas_sgemm, single-threaded, straight into
// C in HBM. Inputs decoded exactly plus f32 accumulation make the result
// meet the error bound of common/kernels/kernels_reference.h against the same
// double reference the on-core kernels are verified with.
//
// MXFP4 scales at the top of the E8M0 range (2^126, 2^127): an element times
// such a scale can pass f32's maximum. The engine decodes exactly as the
// reference does (num::dequantize_operand), so such an element is +-inf in
// both; the on-core kernel, which scales per block after an integer dot
// product, may overflow elsewhere (kernels.h documents that scales above
// 2^125 are outside its guarantee). f32 data never quantizes to them.
//
// Remap window (ABI 1.3, TensorConfig): applied between commands, validated
// by the same Mpu::set_remap as a DMA engine's (kFieldRemap when refused).
// With one, the engine's Mpu maps the translated windows of each snapshot
// into its own view of the window, exactly as a DMA engine's does, and an
// operand inside the window is resolved through that view (one pointer
// across a stitched allocation's extents), after the same MPU check as any
// other operand: outside a live translated window it is kTensorMpuFault.
// Without one, a remap-window operand is outside RAM: kTensorRange.
//
// Each completion carries the wall time and the modeled time (flops at the
// board's rate for the dtype). Not a thread: run_pass() executes at most
// one command (and applies a new config first).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "vtrn/engine_abi.h"
#include "vtrn/hw/engine_context.h"
#include "vtrn/hw/engine_props.h"
#include "vtrn/hw/mpu.h"
#include "vtrn/numerics.h"

namespace vtrn::hw {

// The GEMM itself on decoded f32 operands: C[m, n] (row stride ldc) =
// A[m, k] . B[n, k]^T. One cblas_sgemm call; OpenBLAS must be limited to
// one thread by the caller (vtrn-hw does it once at start).
void sgemm_abt(uint32_t m, uint32_t n, uint32_t k, const float* a, const float* b, float* c, uint32_t ldc);
// Makes OpenBLAS use one thread per call (engines run in parallel instead).
void blas_single_threaded();

class TensorEngine {
 public:
  TensorEngine(const ChipMemory& mem, uint32_t index, const EngineProps& props, Signals& signals,
               ErrorLog& errors, Clock clock);
  TensorEngine(const TensorEngine&) = delete;
  TensorEngine& operator=(const TensorEngine&) = delete;

  // Chip reset: queue at index 0, no error, MPU off, no remap window.
  void reset();
  // Executes at most one command. True when it consumed one.
  bool run_pass();
  [[nodiscard]] bool has_work() const;
  [[nodiscard]] uint32_t mpu_generation() const { return mpu_.generation(); }
  [[nodiscard]] bool has_remap() const { return mpu_.remap_view() != nullptr; }

 private:
  struct Operand {
    uint64_t addr;
    uint64_t bytes;
  };
  engine::TensorStatus validate(const engine::TensorCommand& c, Operand ops[5], uint32_t* ldc);
  engine::TensorStatus execute(const engine::TensorCommand& c, uint32_t ldc);
  void fault(const engine::TensorCommand& c, engine::TensorStatus s, uint32_t code, uint64_t addr, uint64_t len);
  void latch(uint32_t e);
  void apply_config();
  // The engine-side pointer of [addr, addr + len): RAM, or the remap view
  // for a range inside the remap window; null when neither holds all of it.
  [[nodiscard]] uint8_t* at(uint64_t addr, uint64_t len) const;

  const ChipMemory& mem_;
  const uint32_t index_;
  const EngineProps& props_;
  Signals& signals_;
  ErrorLog& errors_;
  Clock clock_;
  engine::TensorEngineBlock* blk_;
  StatsWriter stats_;
  Mpu mpu_;
  uint32_t sq_cons_ = 0;
  uint32_t sq_prod_seen_ = 0;
  uint32_t cq_prod_ = 0;
  uint32_t error_ = 0;
  uint32_t inject_seen_ = 0;
  uint32_t config_seen_ = 0;
  bool fail_next_ = false;
  std::vector<float> a_, b_;
};

}  // namespace vtrn::hw
