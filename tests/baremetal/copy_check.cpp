// copy_check.elf: hal_copy_memcpy against a byte-by-byte reference under
// QEMU, for every size 0..1024 and a spread of larger sizes up to 4 MiB,
// each at every source and destination alignment 0..15 (256 combinations),
// with 64 guard bytes on both sides of the destination. Prints one
// "copy-check: PASS" or "copy-check: FAIL" line (after at most a few
// detail lines) for tests/baremetal/baremetal.cmake to match.
//
// How a miss is caught: before each copy the destination area (guards
// included) is filled with a poison byte that has its top bit set, while
// every source byte has it clear, so a byte the routine failed to write, or
// wrote outside the range, can never equal the expected value by chance.
// Byte loops here must stay loops: the image is built with
// -fno-tree-loop-distribute-patterns so GCC does not turn them into calls
// to memcpy/memset, which would test picolibc instead.
#include <stddef.h>
#include <stdint.h>

#include "bm.h"
#include "hal/copy.h"

namespace {

constexpr size_t kMaxSize = 4u << 20;
constexpr size_t kGuard = 64;
constexpr size_t kAligns = 16;
// Fixed RAM placement (bm.h platform assumptions): source and destination
// well above the image, not a large power of two apart (TCG's TLB would
// alias them and make the run 10x slower).
constexpr uintptr_t kSrcBase = bm::kRamBase + (16u << 20);
constexpr uintptr_t kDstBase = kSrcBase + kMaxSize + (68u << 10);
static_assert(kDstBase + kGuard + kAligns + kMaxSize + kGuard < bm::kRamBase + bm::kRamBytes);

constexpr size_t kLargeSizes[] = {
    1025,      1031,          2047,       4095,          4096,          4097,
    12289,     65535,         65536 + 67, 262144 - 3,    1048576 + 5,   (3u << 20) + 4099,
    kMaxSize};

constexpr int kMaxReports = 5;

uint8_t* const g_src = reinterpret_cast<uint8_t*>(kSrcBase);
uint8_t* const g_dst_area = reinterpret_cast<uint8_t*>(kDstBase);

uint64_t g_failures = 0;
uint64_t g_combos = 0;
uint64_t g_bytes = 0;

uint8_t pattern(size_t i) { return uint8_t((i * 131 + (i >> 9) * 7 + 0x35) & 0x7F); }

// Fills [area, area + length rounded up to 8) with `poison`, 8 bytes a store.
void poison_area(uint8_t poison, size_t length) {
  const uint64_t word = 0x0101010101010101ull * poison;
  auto* w = reinterpret_cast<uint64_t*>(g_dst_area);
  for (size_t i = 0; i < (length + 7) / 8; ++i) w[i] = word;
}

void report(size_t size, size_t sa, size_t da, const char* what, size_t index, uint8_t want,
            uint8_t got) {
  if (++g_failures > kMaxReports)
    return;
  bm::print("copy-check: mismatch size=");
  bm::print_u64(size);
  bm::print(" src_align=");
  bm::print_u64(sa);
  bm::print(" dst_align=");
  bm::print_u64(da);
  bm::print(" ");
  bm::print(what);
  bm::print(" index=");
  bm::print_u64(index);
  bm::print(" want=");
  bm::print_hex(want);
  bm::print(" got=");
  bm::print_hex(got);
  bm::print("\n");
}

void check_one(size_t size, size_t sa, size_t da) {
  const uint8_t poison = uint8_t(0x80 | (g_combos * 37 & 0x7F));
  const size_t area = kGuard + da + size + kGuard;
  poison_area(poison, area);
  uint8_t* dst = g_dst_area + kGuard + da;
  const uint8_t* src = g_src + sa;
  void* ret = hal_copy_memcpy(dst, src, size);
  ++g_combos;
  g_bytes += size;
  if (ret != dst) {
    report(size, sa, da, "return-value", 0, 0, 0);
    return;
  }
  for (size_t i = 0; i < kGuard + da; ++i) {
    if (g_dst_area[i] != poison) {
      report(size, sa, da, "underrun", i, poison, g_dst_area[i]);
      return;
    }
  }
  for (size_t i = 0; i < size; ++i) {
    if (dst[i] != src[i]) {
      report(size, sa, da, "data", i, src[i], dst[i]);
      return;
    }
  }
  for (size_t i = 0; i < kGuard; ++i) {
    if (dst[size + i] != poison) {
      report(size, sa, da, "overrun", i, poison, dst[size + i]);
      return;
    }
  }
}

void check_size(size_t size) {
  for (size_t sa = 0; sa < kAligns; ++sa)
    for (size_t da = 0; da < kAligns; ++da) check_one(size, sa, da);
}

}  // namespace

void bm_run() {
  for (size_t i = 0; i < kMaxSize + kAligns; ++i) g_src[i] = pattern(i);
  const uint64_t t0 = bm::now_ticks();
  uint64_t sizes = 0;
  for (size_t size = 0; size <= 1024; ++size, ++sizes) check_size(size);
  for (size_t size : kLargeSizes) {
    check_size(size);
    ++sizes;
  }
  const uint64_t ms = bm::ticks_to_ns(bm::now_ticks() - t0) / 1000000;
  bm::print(g_failures == 0 ? "copy-check: PASS" : "copy-check: FAIL");
  bm::print(" sizes=");
  bm::print_u64(sizes);
  bm::print(" combinations=");
  bm::print_u64(g_combos);
  bm::print(" failures=");
  bm::print_u64(g_failures);
  bm::print(" bytes=");
  bm::print_u64(g_bytes);
  bm::print(" ms=");
  bm::print_u64(ms);
  bm::print("\n");
}
