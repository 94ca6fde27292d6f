// vtrn::hw::EngineProps: what the board DT says about one chip's engines
// (binding board/bindings/vtrn,engines.md): how many DMA engines, and the
// throughput figures the engines model their time from. vtrn-hw reads them
// itself with libfdt from the chip's optional `engines` child node; the
// tensor engine count is the chip's NeuronCore count (one per core), which
// the caller takes from common/board.
//
// Every value is checked here (a board that passes carries usable figures,
// with the Trainium shape FP4 > FP8 > BF16 > FP32); an absent node or
// property takes the documented default.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/numerics.h"

namespace vtrn::hw {

inline constexpr uint32_t kDefaultDmaEngines = 2;
inline constexpr uint32_t kDefaultDmaGbps = 100;
// GFLOP/s per tensor engine for fp32, bf16, fp8 (both formats), fp4 (MXFP4):
// one Trainium2-class NeuronCore.
inline constexpr uint32_t kDefaultTensorGflops[4] = {22000, 83000, 166000, 332000};

struct EngineProps {
  uint32_t dma_engines = kDefaultDmaEngines;
  uint32_t tensor_engines = 0;
  uint64_t dma_bytes_per_s = 0;
  uint64_t tensor_flops_per_s[num::kDTypeCount] = {};  // indexed by num::DType
};

// Reads /chips/chip@<chip>/engines of `fdt`. `neuron_cores` is the chip's
// vtrn,neuron-cores. False and one line in err naming the property when a
// value is malformed or out of range.
[[nodiscard]] bool read_engine_props(const void* fdt, uint32_t chip, uint32_t neuron_cores,
                                     EngineProps* out, char* err, size_t err_size);

// Modeled nanoseconds for `amount` units at `per_second` (rounded up, 0 for 0).
uint64_t modeled_ns(uint64_t amount, uint64_t per_second);

}  // namespace vtrn::hw
