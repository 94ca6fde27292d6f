// dtype_codes: the C++ encoders of common/numerics as a filter, so the
// Python package's numpy encoders (python/vtrn/dtypes.py) are checked
// against the code the chip and vtrnd use, not against themselves.
//
// Usage: dtype_codes DTYPE ROWS K < float32s > codes. Reads ROWS*K
// little-endian float32s from stdin, writes the operand bytes of DTYPE
// (quantize_operand), then for mxfp4 its scale bytes. Test tool only.
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "vtrn/numerics.h"

int main(int argc, char** argv) {
  using namespace vtrn::num;
  DType dtype;
  if (argc != 4 || !parse_dtype(argv[1], &dtype)) {
    fprintf(stderr, "usage: dtype_codes fp32|bf16|fp8-e4m3|fp8-e5m2|mxfp4 ROWS K\n");
    return 2;
  }
  const uint32_t rows = uint32_t(strtoul(argv[2], nullptr, 10));
  const uint32_t k = uint32_t(strtoul(argv[3], nullptr, 10));
  std::vector<float> in(size_t(rows) * k);
  if (fread(in.data(), sizeof(float), in.size(), stdin) != in.size()) {
    fprintf(stderr, "dtype_codes: expected %zu floats on stdin\n", in.size());
    return 1;
  }
  std::vector<uint8_t> data(operand_bytes(dtype, rows, k));
  std::vector<uint8_t> scales(scale_bytes(dtype, rows, k) + 1);
  quantize_operand(dtype, in.data(), rows, k, data.data(), scales.data());
  fwrite(data.data(), 1, data.size(), stdout);
  fwrite(scales.data(), 1, scales.size() - 1, stdout);
  return 0;
}
