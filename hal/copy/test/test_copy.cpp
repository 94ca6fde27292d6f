// hal/copy tests on the host: the Engine facade's sequencing (one copy in
// flight, completions collected once), its argument checks against the
// engine's capabilities, failure propagation, CpuEngine over the host
// hal_copy_memcpy, and DmaCopier passing descriptors through to an engine,
// alone and under a real vtrn::dma::Queue. The AArch64 assembly is tested
// under QEMU (tests/baremetal), not here.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include <vector>

#include "hal/copy.h"
#include "hal/copy_dma.h"
#include "hal/fake_copy.h"
#include "vtrn/dma_queue.h"

using hal::Status;
using namespace hal::copy;
using hal::copy::fake::FakeEngine;

namespace {

constexpr size_t kBuf = 256;

struct Buffers {
  alignas(64) uint8_t src[kBuf];
  alignas(64) uint8_t dst[kBuf];
  Buffers() {
    for (size_t i = 0; i < kBuf; ++i) {
      src[i] = uint8_t(i * 13 + 1);
      dst[i] = 0xEE;
    }
  }
};

void assert_status(Status got, Status want) {
  assert_int_equal(static_cast<uint32_t>(got), static_cast<uint32_t>(want));
}

void assert_progress(Progress got, Progress want) {
  assert_int_equal(static_cast<int>(got), static_cast<int>(want));
}

// Engine facade: sequencing

void test_poll_without_start_reports_idle(void**) {
  FakeEngine e;
  Completion c;
  assert_progress(e.poll_done(&c), Progress::kIdle);
  assert_int_equal(e.poll_calls(), 0);
  assert_false(e.busy());
}

void test_started_copy_completes_once_with_its_length(void**) {
  Buffers b;
  FakeEngine e;
  assert_status(e.start(b.dst, b.src, 100), Status::kOk);
  assert_true(e.busy());
  Completion c;
  assert_progress(e.poll_done(&c), Progress::kDone);
  assert_status(c.status, Status::kOk);
  assert_int_equal(c.bytes, 100);
  assert_false(e.busy());
  assert_progress(e.poll_done(&c), Progress::kIdle);
  assert_memory_equal(b.dst, b.src, 100);
  assert_int_equal(b.dst[100], 0xEE);
}

void test_second_start_before_completion_is_collected_is_refused(void**) {
  Buffers b;
  FakeEngine e;
  assert_status(e.start(b.dst, b.src, 16), Status::kOk);
  assert_status(e.start(b.dst + 32, b.src + 32, 16), Status::kCapacity);
  assert_int_equal(e.submissions().size(), 1);
  assert_progress(e.poll_done(nullptr), Progress::kDone);
  assert_status(e.start(b.dst + 32, b.src + 32, 16), Status::kOk);
  assert_int_equal(e.submissions().size(), 2);
}

void test_async_engine_is_in_flight_until_it_reports_done(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = SIZE_MAX, .synchronous = false});
  e.set_polls_before_done(3);
  assert_status(e.start(b.dst, b.src, 64), Status::kOk);
  Completion c;
  for (int i = 0; i < 3; ++i) {
    assert_progress(e.poll_done(&c), Progress::kInFlight);
    assert_true(e.busy());
  }
  assert_progress(e.poll_done(&c), Progress::kDone);
  assert_int_equal(c.bytes, 64);
  assert_int_equal(e.poll_calls(), 4);
}

void test_zero_length_completes_without_reaching_the_engine(void**) {
  FakeEngine e;
  assert_status(e.start(nullptr, nullptr, 0), Status::kOk);
  assert_true(e.busy());
  Completion c{.status = Status::kTimeout, .bytes = 99};
  assert_progress(e.poll_done(&c), Progress::kDone);
  assert_status(c.status, Status::kOk);
  assert_int_equal(c.bytes, 0);
  assert_int_equal(e.submissions().size(), 0);
  assert_int_equal(e.poll_calls(), 0);
}

// Engine facade: argument checks

void test_null_pointer_with_length_is_invalid(void**) {
  Buffers b;
  FakeEngine e;
  assert_status(e.start(nullptr, b.src, 1), Status::kInvalidArgument);
  assert_status(e.start(b.dst, nullptr, 1), Status::kInvalidArgument);
  assert_int_equal(e.submissions().size(), 0);
  assert_false(e.busy());
}

void test_misaligned_dst_src_or_length_is_invalid_for_an_aligned_engine(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 8, .max_length = 1024, .synchronous = true});
  assert_status(e.start(b.dst + 4, b.src, 64), Status::kInvalidArgument);
  assert_status(e.start(b.dst, b.src + 1, 64), Status::kInvalidArgument);
  assert_status(e.start(b.dst, b.src, 63), Status::kInvalidArgument);
  assert_int_equal(e.submissions().size(), 0);
  assert_status(e.start(b.dst + 8, b.src + 16, 64), Status::kOk);
  assert_int_equal(e.submissions().size(), 1);
}

void test_length_above_max_is_out_of_range(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = 100, .synchronous = true});
  assert_status(e.start(b.dst, b.src, 101), Status::kOutOfRange);
  assert_status(e.start(b.dst, b.src, 100), Status::kOk);
  assert_int_equal(e.submissions().size(), 1);
}

void test_overlapping_ranges_are_invalid_and_adjacent_ones_are_not(void**) {
  Buffers b;
  FakeEngine e;
  e.set_perform(false);
  assert_status(e.start(b.src + 10, b.src, 11), Status::kInvalidArgument);
  assert_status(e.start(b.src, b.src + 10, 11), Status::kInvalidArgument);
  assert_status(e.start(b.src, b.src, 1), Status::kInvalidArgument);
  assert_int_equal(e.submissions().size(), 0);
  assert_status(e.start(b.src + 10, b.src, 10), Status::kOk);
  assert_int_equal(e.submissions().size(), 1);
}

void test_range_that_wraps_the_address_space_is_invalid(void**) {
  Buffers b;
  FakeEngine e;
  e.set_perform(false);
  void* top = reinterpret_cast<void*>(UINTPTR_MAX - 15);
  assert_status(e.start(top, b.src, 32), Status::kInvalidArgument);
  assert_status(e.start(b.dst, top, 32), Status::kInvalidArgument);
  assert_int_equal(e.submissions().size(), 0);
}

// Engine facade: failures

void test_engine_refusal_is_returned_and_leaves_nothing_in_flight(void**) {
  Buffers b;
  FakeEngine e;
  e.fail_next_start(Status::kBadHardware);
  assert_status(e.start(b.dst, b.src, 32), Status::kBadHardware);
  assert_int_equal(e.submissions().size(), 1);
  assert_false(e.busy());
  assert_progress(e.poll_done(nullptr), Progress::kIdle);
  assert_int_equal(b.dst[0], 0xEE);
  assert_status(e.start(b.dst, b.src, 32), Status::kOk);
}

void test_copy_returns_the_completion_failure(void**) {
  Buffers b;
  FakeEngine e;
  e.fail_next_completion(Status::kBadHardware, 12);
  assert_status(e.copy(b.dst, b.src, 32), Status::kBadHardware);
  assert_false(e.busy());
  assert_int_equal(e.stats().failed, 1);
  assert_int_equal(e.stats().bytes, 12);
}

void test_copy_reports_a_short_ok_completion_as_bad_hardware(void**) {
  Buffers b;
  FakeEngine e;
  e.short_next_completion(31);
  assert_status(e.copy(b.dst, b.src, 32), Status::kBadHardware);
  assert_status(e.copy(b.dst, b.src, 32), Status::kOk);
}

void test_copy_times_out_and_the_completion_is_collected_later(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = SIZE_MAX, .synchronous = false});
  e.set_polls_before_done(10);
  assert_status(e.copy(b.dst, b.src, 48, 4), Status::kTimeout);
  assert_true(e.busy());
  assert_int_equal(e.poll_calls(), 4);
  assert_status(e.start(b.dst, b.src, 48), Status::kCapacity);
  Completion c;
  int polls = 0;
  while (e.poll_done(&c) == Progress::kInFlight) ++polls;
  assert_int_equal(polls, 6);
  assert_int_equal(c.bytes, 48);
}

void test_copy_passes_start_refusals_through(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = 8, .synchronous = true});
  assert_status(e.copy(b.dst, b.src, 9), Status::kOutOfRange);
  assert_status(e.copy(nullptr, b.src, 9), Status::kInvalidArgument);
  assert_false(e.busy());
}

void test_stats_count_every_outcome(void**) {
  Buffers b;
  FakeEngine e;
  assert_status(e.copy(b.dst, b.src, 10), Status::kOk);
  e.fail_next_completion(Status::kTimeout, 0);
  assert_status(e.copy(b.dst, b.src, 20), Status::kTimeout);
  assert_status(e.copy(nullptr, b.src, 5), Status::kInvalidArgument);
  e.fail_next_start(Status::kBadHardware);
  assert_status(e.copy(b.dst, b.src, 5), Status::kBadHardware);
  const Stats& s = e.stats();
  assert_int_equal(s.started, 2);
  assert_int_equal(s.completed, 2);
  assert_int_equal(s.failed, 1);
  assert_int_equal(s.rejected, 2);
  assert_int_equal(s.bytes, 10);
}

// CpuEngine

void test_cpu_engine_is_byte_granular_synchronous_and_unbounded(void**) {
  CpuEngine e;
  const Capabilities caps = e.capabilities();
  assert_int_equal(caps.alignment, 1);
  assert_true(caps.max_length == SIZE_MAX);
  assert_true(caps.synchronous);
}

void test_cpu_engine_has_copied_when_start_returns(void**) {
  Buffers b;
  CpuEngine e;
  assert_status(e.start(b.dst + 3, b.src + 5, 77), Status::kOk);
  assert_memory_equal(b.dst + 3, b.src + 5, 77);
  assert_int_equal(b.dst[2], 0xEE);
  assert_int_equal(b.dst[80], 0xEE);
  Completion c;
  assert_progress(e.poll_done(&c), Progress::kDone);
  assert_status(c.status, Status::kOk);
  assert_int_equal(c.bytes, 77);
}

// DmaCopier

void test_adapter_passes_arguments_through_exactly(void**) {
  Buffers b;
  FakeEngine e;
  DmaCopier copier(e);
  vtrn::dma::Copier& as_copier = copier;
  as_copier.copy(b.dst + 7, b.src + 3, 129);
  assert_int_equal(e.submissions().size(), 1);
  assert_ptr_equal(e.submissions()[0].dst, b.dst + 7);
  assert_ptr_equal(e.submissions()[0].src, b.src + 3);
  assert_int_equal(e.submissions()[0].length, 129);
  assert_memory_equal(b.dst + 7, b.src + 3, 129);
  assert_status(copier.take_error(), Status::kOk);
  assert_false(e.busy());
}

void test_adapter_splits_copies_longer_than_the_engine_max_into_aligned_pieces(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 4, .max_length = 42, .synchronous = true});
  DmaCopier copier(e);
  copier.copy(b.dst, b.src, 100);
  // 42 rounds down to 40 so every later piece stays 4-byte aligned.
  const auto& subs = e.submissions();
  assert_int_equal(subs.size(), 3);
  assert_ptr_equal(subs[0].dst, b.dst);
  assert_int_equal(subs[0].length, 40);
  assert_ptr_equal(subs[1].dst, b.dst + 40);
  assert_ptr_equal(subs[1].src, b.src + 40);
  assert_int_equal(subs[1].length, 40);
  assert_ptr_equal(subs[2].dst, b.dst + 80);
  assert_int_equal(subs[2].length, 20);
  assert_memory_equal(b.dst, b.src, 100);
  assert_status(copier.take_error(), Status::kOk);
}

void test_adapter_latches_the_first_failure_and_stops_that_copy(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = 10, .synchronous = true});
  DmaCopier copier(e);
  e.fail_next_completion(Status::kBadHardware, 0);
  copier.copy(b.dst, b.src, 30);
  assert_int_equal(e.submissions().size(), 1);
  e.fail_next_start(Status::kTimeout);
  copier.copy(b.dst, b.src, 5);
  assert_int_equal(copier.failures(), 2);
  assert_status(copier.take_error(), Status::kBadHardware);
  assert_status(copier.take_error(), Status::kOk);
  copier.copy(b.dst, b.src, 5);
  assert_status(copier.take_error(), Status::kOk);
  assert_int_equal(copier.failures(), 2);
}

void test_adapter_reports_an_engine_that_times_out(void**) {
  Buffers b;
  FakeEngine e(Capabilities{.alignment = 1, .max_length = SIZE_MAX, .synchronous = false});
  e.set_polls_before_done(100);
  DmaCopier copier(e, 5);
  copier.copy(b.dst, b.src, 8);
  assert_status(copier.take_error(), Status::kTimeout);
}

void test_adapter_moves_a_dma_queue_descriptor_with_the_cpu_engine(void**) {
  namespace dma = vtrn::dma;
  constexpr uint32_t kDepth = 16;
  constexpr uint64_t kHbmBase = 0x80000000ull;
  dma::QueueControl ctl{};
  dma::Descriptor sq[kDepth]{};
  dma::Completion cq[kDepth]{};
  dma::QueueStats stats{};
  std::vector<uint8_t> window(8192), hbm(8192);
  for (size_t i = 0; i < window.size(); ++i) window[i] = uint8_t(i * 31 + 5);
  dma::AddressMap map{window.data(), window.size(), hbm.data(), kHbmBase, hbm.size(), nullptr};
  dma::Queue q(&ctl, sq, cq, kDepth, &stats);
  CpuEngine engine;
  DmaCopier copier(engine);

  sq[0] = dma::Descriptor{3, kHbmBase + 100, 4093,
                          dma::kDescFirst | dma::kDescLast | dma::kDescSrcHost, 42};
  ctl.sq_prod.value = 1;
  const dma::PollResult r = q.poll(map, copier, 8);
  assert_int_equal(r.completions, 1);
  assert_int_equal(cq[0].cookie, 42);
  assert_int_equal(cq[0].status, dma::kOk);
  assert_int_equal(cq[0].bytes, 4093);
  assert_memory_equal(&hbm[100], &window[3], 4093);
  assert_status(copier.take_error(), Status::kOk);
  assert_int_equal(engine.stats().bytes, 4093);
}

// CpuDmaCopier

void test_cpu_dma_copier_moves_queue_descriptors_and_counts_them(void**) {
  namespace dma = vtrn::dma;
  constexpr uint32_t kDepth = 16;
  constexpr uint64_t kHbmBase = 0x80000000ull;
  dma::QueueControl ctl{};
  dma::Descriptor sq[kDepth]{};
  dma::Completion cq[kDepth]{};
  dma::QueueStats stats{};
  std::vector<uint8_t> window(8192), hbm(8192, 0xEE);
  for (size_t i = 0; i < window.size(); ++i) window[i] = uint8_t(i * 31 + 5);
  dma::AddressMap map{window.data(), window.size(), hbm.data(), kHbmBase, hbm.size(), nullptr};
  dma::Queue q(&ctl, sq, cq, kDepth, &stats);
  CpuDmaCopier copier;

  sq[0] = dma::Descriptor{3, kHbmBase + 100, 64, dma::kDescFirst | dma::kDescLast | dma::kDescSrcHost, 7};
  sq[1] = dma::Descriptor{kHbmBase + 100, 4000, 64, dma::kDescFirst | dma::kDescLast | dma::kDescDstHost, 8};
  // Invalid (outside HBM): completed with an error and never reaches the copier.
  sq[2] = dma::Descriptor{0, kHbmBase + 8190, 64, dma::kDescFirst | dma::kDescLast | dma::kDescSrcHost, 9};
  ctl.sq_prod.value = 3;
  const dma::PollResult r = q.poll(map, copier, 8);
  assert_int_equal(r.completions, 3);
  assert_int_equal(cq[0].status, dma::kOk);
  assert_int_equal(cq[1].status, dma::kOk);
  assert_int_equal(cq[2].status, dma::kErrDstRange);
  assert_memory_equal(&hbm[100], &window[3], 64);
  assert_memory_equal(&window[4000], &window[3], 64);
  assert_int_equal(hbm[99], 0xEE);
  assert_int_equal(hbm[164], 0xEE);
  assert_int_equal(copier.copies(), 2);
  assert_int_equal(copier.bytes(), 128);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_poll_without_start_reports_idle),
      cmocka_unit_test(test_started_copy_completes_once_with_its_length),
      cmocka_unit_test(test_second_start_before_completion_is_collected_is_refused),
      cmocka_unit_test(test_async_engine_is_in_flight_until_it_reports_done),
      cmocka_unit_test(test_zero_length_completes_without_reaching_the_engine),
      cmocka_unit_test(test_null_pointer_with_length_is_invalid),
      cmocka_unit_test(test_misaligned_dst_src_or_length_is_invalid_for_an_aligned_engine),
      cmocka_unit_test(test_length_above_max_is_out_of_range),
      cmocka_unit_test(test_overlapping_ranges_are_invalid_and_adjacent_ones_are_not),
      cmocka_unit_test(test_range_that_wraps_the_address_space_is_invalid),
      cmocka_unit_test(test_engine_refusal_is_returned_and_leaves_nothing_in_flight),
      cmocka_unit_test(test_copy_returns_the_completion_failure),
      cmocka_unit_test(test_copy_reports_a_short_ok_completion_as_bad_hardware),
      cmocka_unit_test(test_copy_times_out_and_the_completion_is_collected_later),
      cmocka_unit_test(test_copy_passes_start_refusals_through),
      cmocka_unit_test(test_stats_count_every_outcome),
      cmocka_unit_test(test_cpu_engine_is_byte_granular_synchronous_and_unbounded),
      cmocka_unit_test(test_cpu_engine_has_copied_when_start_returns),
      cmocka_unit_test(test_adapter_passes_arguments_through_exactly),
      cmocka_unit_test(test_adapter_splits_copies_longer_than_the_engine_max_into_aligned_pieces),
      cmocka_unit_test(test_adapter_latches_the_first_failure_and_stops_that_copy),
      cmocka_unit_test(test_adapter_reports_an_engine_that_times_out),
      cmocka_unit_test(test_adapter_moves_a_dma_queue_descriptor_with_the_cpu_engine),
      cmocka_unit_test(test_cpu_dma_copier_moves_queue_descriptors_and_counts_them),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
