// A front-to-back reader over the fuzzer's bytes, shared by the harnesses.
//
// Not clang's FuzzedDataProvider: that one takes integers from the end of
// the buffer, which makes seed inputs awkward to write by hand or by script
// (tests/fuzz/make_seeds.py). Here every value is little-endian and read in
// order, and a read past the end yields zeros, so any byte string is a valid
// input and the seed format is simply the op sequence written out.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace vtrn::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}

  [[nodiscard]] bool empty() const { return left_ == 0; }
  [[nodiscard]] size_t left() const { return left_; }

  uint8_t u8() { return uint8_t(take(1)); }
  uint16_t u16() { return uint16_t(take(2)); }
  uint32_t u32() { return uint32_t(take(4)); }
  uint64_t u64() { return take(8); }

  // Copies n bytes into dst; bytes past the end of the input read as zero.
  void bytes(void* dst, size_t n) {
    const size_t have = n < left_ ? n : left_;
    if (have) memcpy(dst, p_, have);
    if (have < n) memset(static_cast<uint8_t*>(dst) + have, 0, n - have);
    p_ += have;
    left_ -= have;
  }

  // The rest of the input, consumed.
  const uint8_t* rest(size_t* n) {
    const uint8_t* r = p_;
    *n = left_;
    p_ += left_;
    left_ = 0;
    return r;
  }

 private:
  uint64_t take(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && left_; ++i, --left_) v |= uint64_t(*p_++) << (8 * i);
    return v;
  }

  const uint8_t* p_;
  size_t left_;
};

}  // namespace vtrn::fuzz
