// Seqlock over a plain fixed-layout struct in memory shared by two sides
// that do not share a lock: one writer (the firmware, refreshing a
// telemetry block in BAR2) and any number of readers (the host driver).
//
// The struct keeps its ABI form (fixed-width fields, no std::atomic): it must
// start with `uint32_t seq`, be 8-byte aligned and a multiple of 8 bytes.
// Every word is moved with a relaxed atomic access (__atomic builtins, lock
// free on AArch64 and x86-64, no libatomic), so the data race that a seqlock
// tolerates by design is not undefined behaviour, and the compiler can
// neither tear nor merge the accesses. The protocol (Boehm, "Can seqlocks get
// along with programming language memory models?"):
//   writer: seq = s+1 (odd); release fence; store words; seq = s+2 (release)
//   reader: s1 = seq (acquire); load words; acquire fence; s2 = seq;
//           accept only if s1 == s2 and s1 is even.
// The reader gives up after max_attempts so a writer that died mid-update
// (seq stuck odd) cannot hang the host.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

namespace vtrn::power {

namespace seqlock_detail {

// The block is moved as words regardless of its field types; may_alias keeps
// that legal under strict aliasing.
using Word32 = uint32_t __attribute__((may_alias));
using Word64 = uint64_t __attribute__((may_alias));

template <typename T>
constexpr void check_layout() {
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(std::is_standard_layout_v<T>);
  static_assert(offsetof(T, seq) == 0);
  static_assert(sizeof(T::seq) == 4);
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8);
}

}  // namespace seqlock_detail

// Single writer. `shared` is the block in shared memory, `value` the new
// contents (its seq field is ignored).
template <typename T>
void seqlock_write(T* shared, const T& value) {
  seqlock_detail::check_layout<T>();
  uint32_t* seq = &shared->seq;
  const uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED);
  __atomic_store_n(seq, s + 1, __ATOMIC_RELAXED);
  // Orders the odd seq before every data store below.
  __atomic_thread_fence(__ATOMIC_RELEASE);
  auto* dst32 = reinterpret_cast<seqlock_detail::Word32*>(shared);
  const auto* src32 = reinterpret_cast<const seqlock_detail::Word32*>(&value);
  __atomic_store_n(&dst32[1], src32[1], __ATOMIC_RELAXED);
  auto* dst = reinterpret_cast<seqlock_detail::Word64*>(shared);
  const auto* src = reinterpret_cast<const seqlock_detail::Word64*>(&value);
  for (size_t i = 1; i < sizeof(T) / 8; ++i) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
  // Release: a reader that sees s + 2 sees every data store above.
  __atomic_store_n(seq, s + 2, __ATOMIC_RELEASE);
}

// Returns true with a consistent copy in *out (out->seq = the even sequence
// number it was read at), false after max_attempts torn or busy attempts.
template <typename T>
[[nodiscard]] bool seqlock_read(const T* shared, T* out, uint32_t max_attempts) {
  seqlock_detail::check_layout<T>();
  const uint32_t* seq = &shared->seq;
  const auto* src32 = reinterpret_cast<const seqlock_detail::Word32*>(shared);
  const auto* src = reinterpret_cast<const seqlock_detail::Word64*>(shared);
  auto* dst32 = reinterpret_cast<seqlock_detail::Word32*>(out);
  auto* dst = reinterpret_cast<seqlock_detail::Word64*>(out);
  for (uint32_t attempt = 0; attempt < max_attempts; ++attempt) {
    const uint32_t s1 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    if (s1 & 1u) continue;
    dst32[1] = __atomic_load_n(&src32[1], __ATOMIC_RELAXED);
    for (size_t i = 1; i < sizeof(T) / 8; ++i) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    // Orders the data loads above before the re-check of seq.
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    const uint32_t s2 = __atomic_load_n(seq, __ATOMIC_RELAXED);
    if (s1 == s2) {
      dst32[0] = s1;
      return true;
    }
  }
  return false;
}

}  // namespace vtrn::power
