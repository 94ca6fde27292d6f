// The one seqlock of the host interface: a fixed-layout record in shared
// memory (BAR2) with one writer (the firmware, or the DMA engine) and any
// number of readers (the host driver), who share no lock. Telemetry, the
// power block, the link status block, the DMA queue statistics and the job
// table all go through it.
//
// The record keeps its ABI form (fixed-width fields, no std::atomic): a
// uint32_t sequence word at SeqOffset (0 unless the ABI put it elsewhere),
// 8-byte aligned, a multiple of 8 bytes. Every word of the body is moved
// with a relaxed atomic access (__atomic builtins, lock free on AArch64 and
// x86-64, no libatomic), so the data race a seqlock tolerates by design is
// not undefined behaviour and the compiler can neither tear nor merge the
// accesses; that is why no memcpy touches a live record. The protocol
// (Boehm, "Can seqlocks get along with programming language memory models?"):
//   writer: seq = s+1 (odd); release fence; store words; seq = s+2 (release)
//   reader: s1 = seq (acquire); load words; acquire fence; s2 = seq;
//           accept only if s1 == s2 and s1 is even.
// The writer counts the sequence itself: the shared word is host-writable,
// so its value is never read back as the writer's state.
//
// Readers retry through a policy: SeqlockRetry on the host (spin, yield,
// nap, give up after a time bound, because the writer is a vCPU thread that
// a loaded host can deschedule mid-update), or a plain attempt count. A
// writer that died mid-update (seq stuck odd) is reported, not waited for.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

// The host retry policy needs a hosted C library (the firmware and the
// bare-metal images are freestanding).
#if __STDC_HOSTED__
#include <sched.h>
#include <time.h>
#endif

namespace vtrn::hostif {

namespace seqlock_detail {

// The record is moved as words regardless of its field types; may_alias
// keeps that legal under strict aliasing.
using Word32 = uint32_t __attribute__((may_alias));
using Word64 = uint64_t __attribute__((may_alias));

template <typename T, size_t SeqOffset>
constexpr void check_layout() {
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(std::is_standard_layout_v<T>);
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8);
  static_assert(SeqOffset % 4 == 0 && SeqOffset + 4 <= sizeof(T));
}

// The 4-byte word sharing an 8-byte word with the sequence.
constexpr size_t kSeqWord64(size_t seq_offset) { return seq_offset / 8; }
constexpr size_t kSeqPartner32(size_t seq_offset) { return (seq_offset / 4) ^ 1u; }

// Copies every word of a record but the sequence, as relaxed atomics.
template <size_t SeqOffset>
inline void store_body(void* dst, const void* src, size_t bytes) {
  auto* d64 = static_cast<Word64*>(dst);
  const auto* s64 = static_cast<const Word64*>(src);
  const size_t skip = kSeqWord64(SeqOffset);
  for (size_t i = 0; i < bytes / 8; ++i) {
    if (i == skip) continue;
    __atomic_store_n(&d64[i], s64[i], __ATOMIC_RELAXED);
  }
  if (skip < bytes / 8) {
    const size_t p = kSeqPartner32(SeqOffset);
    __atomic_store_n(&static_cast<Word32*>(dst)[p], static_cast<const Word32*>(src)[p],
                     __ATOMIC_RELAXED);
  }
}

template <size_t SeqOffset>
inline void load_body(void* dst, const void* src, size_t bytes) {
  auto* d64 = static_cast<Word64*>(dst);
  const auto* s64 = static_cast<const Word64*>(src);
  const size_t skip = kSeqWord64(SeqOffset);
  for (size_t i = 0; i < bytes / 8; ++i) {
    if (i == skip) continue;
    d64[i] = __atomic_load_n(&s64[i], __ATOMIC_RELAXED);
  }
  const size_t p = kSeqPartner32(SeqOffset);
  static_cast<Word32*>(dst)[p] = __atomic_load_n(&static_cast<const Word32*>(src)[p],
                                                 __ATOMIC_RELAXED);
}

}  // namespace seqlock_detail

// The writer half. One per record; single writer. Either publish() a whole
// new value, or change fields in place between begin() and end() with put()
// (each field stored as a relaxed atomic).
template <typename T, size_t SeqOffset = 0>
class SeqlockWriter {
 public:
  SeqlockWriter() = default;
  // Movable (an owner built in place of an old one takes the record over),
  // never copied: two writers of one record would break it.
  SeqlockWriter(SeqlockWriter&&) = default;
  SeqlockWriter& operator=(SeqlockWriter&&) = default;
  SeqlockWriter(const SeqlockWriter&) = delete;
  SeqlockWriter& operator=(const SeqlockWriter&) = delete;

  // Starts writing `shared` (zeroed or not): the sequence restarts at 0.
  void attach(T* shared) {
    seqlock_detail::check_layout<T, SeqOffset>();
    shared_ = shared;
    seq_ = 0;
    if (shared_ != nullptr) __atomic_store_n(seq_word(), 0u, __ATOMIC_RELEASE);
  }
  [[nodiscard]] T* shared() const { return shared_; }
  [[nodiscard]] bool attached() const { return shared_ != nullptr; }

  void begin() {
    __atomic_store_n(seq_word(), seq_ + 1, __ATOMIC_RELAXED);
    // Orders the odd sequence before every data store that follows.
    __atomic_thread_fence(__ATOMIC_RELEASE);
  }
  void end() {
    seq_ += 2;
    // Release: a reader that sees the even value sees every store above.
    __atomic_store_n(seq_word(), seq_, __ATOMIC_RELEASE);
  }
  // One field of the shared record, inside begin()/end().
  template <typename F>
  static void put(F* field, F value) {
    static_assert(std::is_integral_v<F> && sizeof(F) <= 8);
    __atomic_store_n(field, value, __ATOMIC_RELAXED);
  }
  // The first `bytes` (a multiple of 8) of `value`; its sequence word is
  // ignored. The default is the whole record.
  void publish(const T& value, size_t bytes = sizeof(T)) {
    begin();
    seqlock_detail::store_body<SeqOffset>(shared_, &value, bytes);
    end();
  }

 private:
  uint32_t* seq_word() const {
    return reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(shared_) + SeqOffset);
  }
  T* shared_ = nullptr;
  uint32_t seq_ = 0;
};

// A reader retry policy that allows a fixed number of attempts.
class SeqlockAttempts {
 public:
  explicit SeqlockAttempts(uint32_t attempts) : left_(attempts) {}
  bool again() { return left_ != 0 && --left_ != 0; }

 private:
  uint32_t left_;
};

#if __STDC_HOSTED__
// The host's policy. The writer is a QEMU vCPU thread: on a loaded host it
// can be descheduled for milliseconds in the middle of an update, holding
// the sequence odd, so a reader that only spins a fixed number of times
// reports a failure that is not one. This one spins a little (the normal
// case: an update takes microseconds), then yields the CPU so the vCPU can
// finish, then naps, and gives up only after a time bound, so a firmware
// that is really stuck mid-update is still reported.
class SeqlockRetry {
 public:
  // budget_ns: how long a reader may wait for the writer to hold still.
  explicit SeqlockRetry(uint64_t budget_ns = 50'000'000) : budget_ns_(budget_ns) {}

  // Call after an attempt that saw the block change or held odd; true when
  // the caller should try again.
  bool again() {
    ++attempts_;
    if (attempts_ <= kSpins) return true;
    const uint64_t now = now_ns();
    if (start_ns_ == 0) start_ns_ = now;
    if (now - start_ns_ >= budget_ns_) return false;
    if (attempts_ <= kSpins + kYields) {
      sched_yield();
    } else {
      timespec nap{0, 100'000};
      nanosleep(&nap, nullptr);
    }
    return true;
  }

 private:
  static constexpr uint32_t kSpins = 200;
  static constexpr uint32_t kYields = 200;
  static uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
  }
  uint64_t budget_ns_;
  uint64_t start_ns_ = 0;
  uint32_t attempts_ = 0;
};
#endif

// The reader half. True with a consistent copy in *out (its sequence word
// holds the even value it was read at); false once `retry` gives up.
template <size_t SeqOffset = 0, typename T, typename Retry>
[[nodiscard]] bool seqlock_read(const T* shared, T* out, Retry& retry) {
  seqlock_detail::check_layout<T, SeqOffset>();
  const auto* seq = reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(shared) +
                                                      SeqOffset);
  do {
    const uint32_t s1 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    if (s1 & 1u) continue;
    seqlock_detail::load_body<SeqOffset>(out, shared, sizeof(T));
    // Orders the data loads above before the re-check of the sequence.
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    const uint32_t s2 = __atomic_load_n(seq, __ATOMIC_RELAXED);
    if (s1 == s2) {
      *reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(out) + SeqOffset) = s1;
      return true;
    }
  } while (retry.again());
  return false;
}

// At most `max_attempts` attempts (at least one).
template <size_t SeqOffset = 0, typename T>
[[nodiscard]] bool seqlock_read(const T* shared, T* out, uint32_t max_attempts) {
  SeqlockAttempts retry(max_attempts);
  return seqlock_read<SeqOffset>(shared, out, retry);
}

}  // namespace vtrn::hostif
