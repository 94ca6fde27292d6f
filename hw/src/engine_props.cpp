// Board DT properties of the engines. See vtrn/hw/engine_props.h.
#include "vtrn/hw/engine_props.h"

#include <stdio.h>

#include <libfdt.h>

#include "vtrn/engine_abi.h"

namespace vtrn::hw {
namespace {

bool fail(char* err, size_t n, const char* fmt, unsigned a = 0, unsigned b = 0) {
  if (err && n) snprintf(err, n, fmt, a, b);
  return false;
}

// A u32 array property of exactly `count` cells; -1 absent, 0 malformed, 1 read.
int read_u32s(const void* fdt, int node, const char* name, uint32_t* out, int count) {
  int len = 0;
  const fdt32_t* p = static_cast<const fdt32_t*>(fdt_getprop(fdt, node, name, &len));
  if (!p) return -1;
  if (len != count * 4) return 0;
  for (int i = 0; i < count; ++i) out[i] = fdt32_to_cpu(p[i]);
  return 1;
}

}  // namespace

uint64_t modeled_ns(uint64_t amount, uint64_t per_second) {
  if (amount == 0 || per_second == 0) return 0;
  const unsigned __int128 ns = ((unsigned __int128)amount * 1000000000u + per_second - 1) / per_second;
  return ns > UINT64_MAX ? UINT64_MAX : uint64_t(ns);
}

bool read_engine_props(const void* fdt, uint32_t chip, uint32_t neuron_cores, EngineProps* out,
                       char* err, size_t err_size) {
  EngineProps p;
  if (neuron_cores == 0 || neuron_cores > engine::kMaxTensorEngines)
    return fail(err, err_size, "chip %u: %u NeuronCores, the engines support 1..8", chip, neuron_cores);
  p.tensor_engines = neuron_cores;
  uint32_t dma_gbps = kDefaultDmaGbps;
  uint32_t gflops[4] = {kDefaultTensorGflops[0], kDefaultTensorGflops[1], kDefaultTensorGflops[2],
                        kDefaultTensorGflops[3]};
  char path[64];
  snprintf(path, sizeof path, "/chips/chip@%x/engines", chip);
  const int node = fdt_path_offset(fdt, path);
  if (node >= 0) {
    if (fdt_node_check_compatible(fdt, node, "vtrn,engines") != 0)
      return fail(err, err_size, "chip %u: engines node is not compatible \"vtrn,engines\"", chip);
    int r = read_u32s(fdt, node, "vtrn,dma-engines", &p.dma_engines, 1);
    if (r == 0 || (r == 1 && p.dma_engines > engine::kMaxDmaEngines))
      return fail(err, err_size, "chip %u: vtrn,dma-engines must be one u32 in 0..8", chip);
    r = read_u32s(fdt, node, "vtrn,dma-gbps", &dma_gbps, 1);
    if (r == 0 || (r == 1 && (dma_gbps == 0 || dma_gbps > 100000)))
      return fail(err, err_size, "chip %u: vtrn,dma-gbps must be one u32 in 1..100000", chip);
    r = read_u32s(fdt, node, "vtrn,tensor-gflops", gflops, 4);
    if (r == 0)
      return fail(err, err_size, "chip %u: vtrn,tensor-gflops must be 4 u32 (fp32 bf16 fp8 fp4)", chip);
    for (int i = 0; i < 4; ++i) {
      if (gflops[i] == 0 || gflops[i] > 100000000)
        return fail(err, err_size, "chip %u: vtrn,tensor-gflops value %u outside 1..100000000", chip, gflops[i]);
      if (i > 0 && gflops[i] <= gflops[i - 1])
        return fail(err, err_size,
                    "chip %u: vtrn,tensor-gflops must rise strictly fp32 < bf16 < fp8 < fp4 (value %u)",
                    chip, unsigned(i));
    }
  } else if (node != -FDT_ERR_NOTFOUND) {
    return fail(err, err_size, "chip %u: board DT unreadable looking for the engines node", chip);
  }
  p.dma_bytes_per_s = uint64_t(dma_gbps) * 1000000000ull;
  const uint64_t g = 1000000000ull;
  p.tensor_flops_per_s[uint32_t(num::DType::kF32)] = gflops[0] * g;
  p.tensor_flops_per_s[uint32_t(num::DType::kBF16)] = gflops[1] * g;
  p.tensor_flops_per_s[uint32_t(num::DType::kFP8E4M3)] = gflops[2] * g;
  p.tensor_flops_per_s[uint32_t(num::DType::kFP8E5M2)] = gflops[2] * g;
  p.tensor_flops_per_s[uint32_t(num::DType::kMXFP4)] = gflops[3] * g;
  *out = p;
  return true;
}

}  // namespace vtrn::hw
