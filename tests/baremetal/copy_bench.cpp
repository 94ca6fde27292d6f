// copy_bench.elf: guest memcpy throughput under QEMU TCG, picolibc's memcpy
// against hal_copy_memcpy, at 64 B, 4 KiB, 64 KiB, 1 MiB and 16 MiB. Issue 3
// measures DMA throughput as a ratio to "the best memcpy the guest
// achieves"; this is where that reference number comes from.
//
// Output, one line per case plus one ratio line per size (machine-readable
// key=value, GB/s = bytes per ns with three decimals):
//   copy-bench cpu midr=0x...
//   copy-bench routine=picolibc size=65536 reps=1024 bytes=67108864 ns=... gbps=0.412
//   copy-bench ratio size=65536 hal_copy_over_picolibc=4.310
//   copy-bench: done cases=10
// Each case copies about 64 MiB (at least 4 reps), best of kTrials runs,
// after one warm-up call that pays for TCG translation and TLB fills. Small
// sizes copy the same cache-hot buffer over and over; that is the point of a
// per-call-overhead figure. Source and destination are 16 MiB + 68 KiB
// apart, not a power of two: buffers a large power of two apart alias in
// TCG's direct-mapped TLB and copy about 10x slower (shared/DESIGN.md).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bm.h"
#include "hal/copy.h"

namespace {

using CopyFn = void* (*)(void*, const void*, size_t);

struct Routine {
  const char* name;
  CopyFn fn;
};

constexpr size_t kMaxSize = 16u << 20;
constexpr uintptr_t kSrcBase = bm::kRamBase + (16u << 20);
constexpr uintptr_t kDstBase = kSrcBase + kMaxSize + (68u << 10);
static_assert(kDstBase + kMaxSize <= bm::kRamBase + bm::kRamBytes);
constexpr size_t kSizes[] = {64, 4u << 10, 64u << 10, 1u << 20, 16u << 20};
constexpr uint64_t kBytesPerCase = 64u << 20;
constexpr int kTrials = 3;

// A volatile pointer so GCC can neither inline picolibc's memcpy (a 64-byte
// call would become four q loads/stores) nor drop repeated identical calls.
CopyFn volatile g_call;

uint64_t measure_ns(CopyFn fn, void* dst, const void* src, size_t size, uint64_t reps) {
  g_call = fn;
  const uint64_t t0 = bm::now_ticks();
  for (uint64_t r = 0; r < reps; ++r) g_call(dst, src, size);
  return bm::ticks_to_ns(bm::now_ticks() - t0);
}

// GB/s * 1000 = bytes * 1000 / ns (bytes per ns is GB/s).
uint64_t gbps_milli(uint64_t bytes, uint64_t ns) { return ns == 0 ? 0 : bytes * 1000 / ns; }

}  // namespace

void bm_run() {
  auto* src = reinterpret_cast<uint8_t*>(kSrcBase);
  auto* dst = reinterpret_cast<uint8_t*>(kDstBase);
  for (size_t i = 0; i < kMaxSize; ++i) src[i] = uint8_t(i * 7 + 3);

  const Routine routines[] = {{"picolibc", &memcpy}, {"hal_copy", &hal_copy_memcpy}};
  bm::print("copy-bench cpu midr=");
  bm::print_hex(bm::midr());
  bm::print("\n");

  int cases = 0;
  for (size_t size : kSizes) {
    uint64_t reps = kBytesPerCase / size;
    if (reps < 4)
      reps = 4;
    const uint64_t bytes = reps * size;
    uint64_t best[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const Routine& r = routines[k];
      g_call = r.fn;
      g_call(dst, src, size);
      uint64_t best_ns = UINT64_MAX;
      for (int t = 0; t < kTrials; ++t) {
        const uint64_t ns = measure_ns(r.fn, dst, src, size, reps);
        if (ns < best_ns)
          best_ns = ns;
      }
      best[k] = gbps_milli(bytes, best_ns);
      if (memcmp(dst, src, size) != 0) {
        bm::print("copy-bench: FAIL routine=");
        bm::print(r.name);
        bm::print(" produced a wrong copy\n");
        return;
      }
      bm::print("copy-bench routine=");
      bm::print(r.name);
      bm::print(" size=");
      bm::print_u64(size);
      bm::print(" reps=");
      bm::print_u64(reps);
      bm::print(" bytes=");
      bm::print_u64(bytes);
      bm::print(" ns=");
      bm::print_u64(best_ns);
      bm::print(" gbps=");
      bm::print_milli(best[k]);
      bm::print("\n");
      ++cases;
    }
    bm::print("copy-bench ratio size=");
    bm::print_u64(size);
    bm::print(" hal_copy_over_picolibc=");
    bm::print_milli(best[0] == 0 ? 0 : best[1] * 1000 / best[0]);
    bm::print("\n");
  }
  bm::print("copy-bench: done cases=");
  bm::print_u64(cases);
  bm::print("\n");
}
