// Host unit tests of the host interface's seqlock (vtrn/seqlock.h): a
// published record reads back intact with its even sequence, a reader gives
// up on a writer stuck mid-update (by attempts and by the host's time
// bound), fields changed in place between begin() and end() are seen as one
// update, a record whose sequence word is not at offset 0 (the link status
// block's) works the same, and a reader racing a writer on another thread
// never accepts a torn copy.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Before cmocka.h: its macros collide with names in the iostream headers.
#include <atomic>
#include <chrono>
#include <thread>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/dma_abi.h"
#include "vtrn/links_abi.h"
#include "vtrn/power.h"
#include "vtrn/seqlock.h"

using namespace vtrn::power;
using vtrn::hostif::SeqlockRetry;
using vtrn::hostif::SeqlockWriter;
using vtrn::hostif::seqlock_read;

namespace {

constexpr uint64_t kMs = 1000000;

void test_seqlock_round_trip_preserves_contents(void**) {
  PowerManager pm;
  assert_true(pm.init(dev_board_config(2, 4), nullptr, 0).ok());
  pm.step(100 * kMs);
  PowerTelemetry src;
  pm.snapshot(&src);
  static PowerTelemetry shared{};
  SeqlockWriter<PowerTelemetry> w;
  w.attach(&shared);
  w.publish(src);
  w.publish(src);
  PowerTelemetry out;
  assert_true(seqlock_read(&shared, &out, 1));
  assert_int_equal(out.seq, 4);
  out.seq = 0;
  assert_memory_equal(&out, &src, sizeof src);
}

void test_seqlock_reader_gives_up_on_a_writer_stuck_mid_update(void**) {
  static PowerTelemetry shared{};
  shared.seq = 7;  // odd: the writer died between its two seq stores
  PowerTelemetry out;
  assert_false(seqlock_read(&shared, &out, 1000));
}

void test_host_retry_gives_up_after_its_time_bound(void**) {
  static PowerTelemetry shared{};
  shared.seq = 9;
  PowerTelemetry out;
  SeqlockRetry retry(2 * kMs);
  const auto t0 = std::chrono::steady_clock::now();
  assert_false(seqlock_read(&shared, &out, retry));
  // It waited for the writer rather than failing on the first odd value.
  assert_true(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(2));
  shared.seq = 10;
  SeqlockRetry again(2 * kMs);
  assert_true(seqlock_read(&shared, &out, again));
  assert_int_equal(out.seq, 10);
}

void test_fields_put_in_place_form_one_update(void**) {
  static vtrn::dma::QueueStats shared{};
  SeqlockWriter<vtrn::dma::QueueStats> w;
  w.attach(&shared);
  w.begin();
  w.put(&shared.descriptors, uint64_t{3});
  vtrn::dma::QueueStats out;
  assert_false(seqlock_read(&shared, &out, 5));  // odd while the update is open
  w.put(&shared.bytes, uint64_t{4096});
  w.end();
  assert_true(seqlock_read(&shared, &out, 1));
  assert_int_equal(out.seq, 2);
  assert_int_equal(out.descriptors, 3);
  assert_int_equal(out.bytes, 4096);
}

void test_sequence_word_away_from_offset_zero(void**) {
  namespace abi = vtrn::links;
  constexpr size_t kSeq = offsetof(abi::LinksHeader, seq);
  static abi::LinksBlock shared{};
  static abi::LinksBlock src{};
  src.header.magic = abi::kMagic;
  src.header.port_size = sizeof(abi::PortStatus);
  src.header.port_count = 3;  // offset 16: the other half of the sequence's 8-byte word
  src.header.seq = 12345;     // ignored: the writer counts
  src.header.updates = 77;
  src.ports[0].tx_bytes = 1;
  src.ports[2].tx_bytes = 3;
  src.ports[3].tx_bytes = 99;  // beyond the published prefix
  SeqlockWriter<abi::LinksBlock, kSeq> w;
  w.attach(&shared);
  w.publish(src, offsetof(abi::LinksBlock, ports) + 3 * sizeof(abi::PortStatus));
  abi::LinksBlock out;
  assert_true(seqlock_read<kSeq>(&shared, &out, 1));
  assert_int_equal(out.header.seq, 2);
  assert_int_equal(out.header.magic, abi::kMagic);
  assert_int_equal(out.header.port_count, 3);
  assert_int_equal(out.header.updates, 77);
  assert_int_equal(out.ports[2].tx_bytes, 3);
  assert_int_equal(out.ports[3].tx_bytes, 0);
  shared.header.seq = 3;
  assert_false(seqlock_read<kSeq>(&shared, &out, 10));
}

// Every 64-bit word of generation g holds g (the version word holds its low
// half), so any mix of two generations is visible.
void fill(PowerTelemetry* t, uint64_t g) {
  auto* w = reinterpret_cast<uint64_t*>(t);
  for (size_t i = 1; i < sizeof(*t) / 8; ++i) w[i] = g;
  t->version = static_cast<uint32_t>(g);
}

bool consistent(const PowerTelemetry& t, uint64_t* g) {
  const auto* w = reinterpret_cast<const uint64_t*>(&t);
  *g = w[1];
  for (size_t i = 1; i < sizeof(t) / 8; ++i) {
    if (w[i] != *g) return false;
  }
  return t.version == static_cast<uint32_t>(*g);
}

void test_seqlock_never_returns_a_torn_snapshot(void**) {
  static PowerTelemetry shared{};
  constexpr uint64_t kWrites = 300000;
  std::atomic<bool> done{false};
  static SeqlockWriter<PowerTelemetry> w;
  w.attach(&shared);
  std::thread writer([&] {
    static PowerTelemetry v{};
    for (uint64_t g = 1; g <= kWrites; ++g) {
      fill(&v, g);
      w.publish(v);
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t good = 0, torn = 0, busy = 0, last_g = 0, backwards = 0;
  PowerTelemetry out;
  while (!done.load(std::memory_order_acquire)) {
    if (!seqlock_read(&shared, &out, 1)) {
      ++busy;
      continue;
    }
    uint64_t g;
    if (!consistent(out, &g)) ++torn;
    if (g < last_g) ++backwards;
    last_g = g;
    ++good;
  }
  writer.join();
  assert_true(seqlock_read(&shared, &out, 1));
  uint64_t g;
  assert_true(consistent(out, &g));
  assert_int_equal(g, kWrites);
  assert_int_equal(out.seq, 2 * kWrites);
  print_message("seqlock: %llu consistent reads, %llu retried, %llu torn\n",
                static_cast<unsigned long long>(good), static_cast<unsigned long long>(busy),
                static_cast<unsigned long long>(torn));
  assert_int_equal(torn, 0);
  assert_int_equal(backwards, 0);
  assert_true(good > 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seqlock_round_trip_preserves_contents),
      cmocka_unit_test(test_seqlock_reader_gives_up_on_a_writer_stuck_mid_update),
      cmocka_unit_test(test_host_retry_gives_up_after_its_time_bound),
      cmocka_unit_test(test_fields_put_in_place_form_one_update),
      cmocka_unit_test(test_sequence_word_away_from_offset_zero),
      cmocka_unit_test(test_seqlock_never_returns_a_torn_snapshot),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
