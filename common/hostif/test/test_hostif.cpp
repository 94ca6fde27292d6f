// Host unit tests for the shared host-interface logic: CRC, control slot
// rings (including every way a hostile peer can break them), the log ring and
// the BAR2 region table.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <string>
#include <vector>

#include "vtrn/crc32.h"
#include "vtrn/dma_abi.h"
#include "vtrn/ctrl_ring.h"
#include "vtrn/layout.h"
#include "vtrn/log_ring.h"

using namespace vtrn::hostif;

namespace {

constexpr uint32_t kSlots = 8;
constexpr uint32_t kSlotSize = 128;

struct Shared {
  alignas(64) uint8_t slots[kSlots * kSlotSize];
  CtrlIndexes idx;
};

Shared* g;

int setup(void**) {
  g = new Shared();
  memset(g, 0, sizeof *g);
  return 0;
}
int teardown(void**) {
  delete g;
  return 0;
}

RingMemory mem(CacheLineIndex* err) {
  return RingMemory{g->slots, kSlots, kSlotSize, &g->idx.req_prod, &g->idx.req_cons, err};
}

constexpr uint32_t kReqKinds = 1u << kSlotRequest;

void test_crc32_matches_standard_check_value(void**) {
  assert_int_equal(vtrn::crc32("123456789", 9), 0xCBF43926u);
  // Chaining equals one pass over the concatenation.
  assert_int_equal(vtrn::crc32("6789", 4, vtrn::crc32("12345", 5)), 0xCBF43926u);
  assert_int_equal(vtrn::crc32("", 0), 0u);
}

void test_ring_round_trips_payload_and_seq(void**) {
  RingProducer p(mem(&g->idx.host_error));
  RingConsumer c(mem(&g->idx.fw_error), kReqKinds);
  const char msg[] = "hello chip";
  assert_int_equal(p.push(kSlotRequest, 41, msg, sizeof msg), RingStatus::kOk);
  assert_true(c.has_pending());
  SlotHeader h;
  char buf[kSlotSize];
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kOk);
  assert_int_equal(h.seq, 41);
  assert_int_equal(h.length, sizeof msg);
  assert_memory_equal(buf, msg, sizeof msg);
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kEmpty);
  assert_int_equal(g->idx.req_cons.value, 1);
}

void test_ring_reports_full_and_recovers_after_consume(void**) {
  RingProducer p(mem(nullptr));
  RingConsumer c(mem(nullptr), kReqKinds);
  uint32_t v = 0;
  for (uint32_t i = 0; i < kSlots; ++i) assert_int_equal(p.push(kSlotRequest, i, &v, 4), RingStatus::kOk);
  assert_int_equal(p.push(kSlotRequest, 99, &v, 4), RingStatus::kFull);
  assert_int_equal(p.in_flight(), kSlots);
  SlotHeader h;
  uint8_t buf[kSlotSize];
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kOk);
  assert_int_equal(p.push(kSlotRequest, 99, &v, 4), RingStatus::kOk);
}

void test_ring_rejects_oversized_payload_without_publishing(void**) {
  RingProducer p(mem(nullptr));
  uint8_t big[kSlotSize];
  assert_int_equal(p.push(kSlotRequest, 1, big, kSlotSize - kCtrlSlotHeader + 1), RingStatus::kTooLarge);
  assert_int_equal(g->idx.req_prod.value, 0);
  assert_int_equal(p.push(kSlotRequest, 1, big, kSlotSize - kCtrlSlotHeader), RingStatus::kOk);
}

void test_ring_wraps_across_uint32_overflow(void**) {
  g->idx.req_prod.value = 0xFFFFFFFEu;
  g->idx.req_cons.value = 0xFFFFFFFEu;
  RingProducer p(mem(nullptr));
  RingConsumer c(mem(nullptr), kReqKinds);
  SlotHeader h;
  uint8_t buf[kSlotSize];
  for (uint32_t i = 0; i < 5; ++i) {
    assert_int_equal(p.push(kSlotRequest, i, &i, 4), RingStatus::kOk);
    assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kOk);
    assert_int_equal(h.seq, i);
  }
  assert_int_equal(g->idx.req_cons.value, 3u);
}

void test_consumer_latches_index_jump(void**) {
  RingConsumer c(mem(&g->idx.fw_error), kReqKinds);
  g->idx.req_prod.value = kSlots + 1;  // more than a ring ahead
  SlotHeader h;
  uint8_t buf[kSlotSize];
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
  assert_int_equal(c.error(), kCtrlIndexJump);
  assert_int_equal(g->idx.fw_error.value, kCtrlIndexJump);
  // Latched: even a sane index afterwards moves nothing.
  g->idx.req_prod.value = 0;
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
  assert_false(c.has_pending());
}

void test_consumer_latches_producer_moving_backwards(void**) {
  RingProducer p(mem(nullptr));
  RingConsumer c(mem(&g->idx.fw_error), kReqKinds);
  uint32_t v = 7;
  assert_int_equal(p.push(kSlotRequest, 1, &v, 4), RingStatus::kOk);
  assert_int_equal(p.push(kSlotRequest, 2, &v, 4), RingStatus::kOk);
  SlotHeader h;
  uint8_t buf[kSlotSize];
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kOk);
  g->idx.req_prod.value = 1;  // host rewinds its index
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
  assert_int_equal(c.error(), kCtrlIndexBackward);
}

void test_consumer_latches_bad_crc_bad_length_bad_kind(void**) {
  SlotHeader h;
  uint8_t buf[kSlotSize];
  uint32_t v = 5;
  {
    RingProducer p(mem(nullptr));
    RingConsumer c(mem(nullptr), kReqKinds);
    assert_int_equal(p.push(kSlotRequest, 1, &v, 4), RingStatus::kOk);
    g->slots[kCtrlSlotHeader] ^= 1;  // corrupt the payload after publish
    assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
    assert_int_equal(c.error(), kCtrlBadCrc);
    assert_int_equal(g->idx.req_cons.value, 0);  // the bad slot is not consumed
  }
  memset(g, 0, sizeof *g);
  {
    RingProducer p(mem(nullptr));
    RingConsumer c(mem(nullptr), kReqKinds);
    assert_int_equal(p.push(kSlotRequest, 1, &v, 4), RingStatus::kOk);
    uint32_t len = kSlotSize;  // beyond the slot
    memcpy(g->slots + 8, &len, 4);
    assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
    assert_int_equal(c.error(), kCtrlBadLength);
  }
  memset(g, 0, sizeof *g);
  {
    RingProducer p(mem(nullptr));
    RingConsumer c(mem(nullptr), kReqKinds);
    assert_int_equal(p.push(kSlotResponse, 1, &v, 4), RingStatus::kOk);
    assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kBroken);
    assert_int_equal(c.error(), kCtrlBadKind);
  }
}

void test_consumer_leaves_slot_when_caller_buffer_too_small(void**) {
  RingProducer p(mem(nullptr));
  RingConsumer c(mem(nullptr), kReqKinds);
  uint8_t msg[64] = {1};
  assert_int_equal(p.push(kSlotRequest, 1, msg, sizeof msg), RingStatus::kOk);
  SlotHeader h;
  uint8_t small[16];
  assert_int_equal(c.pop(&h, small, sizeof small), RingStatus::kTooLarge);
  assert_int_equal(c.error(), kCtrlOk);
  uint8_t buf[kSlotSize];
  assert_int_equal(c.pop(&h, buf, sizeof buf), RingStatus::kOk);
}

void test_producer_latches_consumer_running_ahead(void**) {
  RingProducer p(mem(&g->idx.host_error));
  uint32_t v = 1;
  assert_int_equal(p.push(kSlotRequest, 1, &v, 4), RingStatus::kOk);
  g->idx.req_cons.value = 5;  // consumer claims slots never produced
  assert_int_equal(p.push(kSlotRequest, 2, &v, 4), RingStatus::kBroken);
  assert_int_equal(p.error(), kCtrlConsumerAhead);
  assert_int_equal(g->idx.host_error.value, kCtrlConsumerAhead);
  p.reset(5);
  assert_int_equal(p.error(), kCtrlOk);
  assert_int_equal(g->idx.host_error.value, kCtrlOk);
  assert_int_equal(p.push(kSlotRequest, 3, &v, 4), RingStatus::kOk);
  assert_int_equal(g->idx.req_prod.value, 6);
}

// log ring

constexpr uint64_t kLogSize = 256;

struct LogMem {
  LogRingHeader hdr;
  char data[kLogSize];
};

std::vector<std::string> read_lines(LogReader& r) {
  std::vector<std::string> lines;
  char buf[512];
  size_t n = r.read(buf, sizeof buf);
  std::string s(buf, n);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    lines.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

void test_log_reader_returns_complete_lines_only(void**) {
  LogMem m{};
  LogWriter w(&m.hdr, kLogSize);
  LogReader r(&m.hdr, kLogSize);
  w.write("6 1 first\n", 10);
  w.write("6 2 sec", 7);  // a line in two writes
  auto lines = read_lines(r);
  assert_int_equal(lines.size(), 1);
  assert_string_equal(lines[0].c_str(), "6 1 first");
  w.write("ond\n", 4);
  lines = read_lines(r);
  assert_int_equal(lines.size(), 1);
  assert_string_equal(lines[0].c_str(), "6 2 second");
  assert_int_equal(r.lost_bytes(), 0);
}

void test_log_reader_detects_overrun_and_resyncs_at_line_start(void**) {
  LogMem m{};
  LogWriter w(&m.hdr, kLogSize);
  LogReader r(&m.hdr, kLogSize);
  char line[32];
  for (int i = 0; i < 40; ++i) {
    int n = snprintf(line, sizeof line, "6 %d line-%02d\n", i, i);
    w.write(line, size_t(n));
  }
  auto lines = read_lines(r);
  assert_true(r.lost_bytes() > 0);
  assert_false(lines.empty());
  // Every line handed out is whole, and the newest is last.
  for (auto& l : lines) assert_int_equal(l.rfind("6 ", 0), 0);
  assert_string_equal(lines.back().c_str(), "6 39 line-39");
}

void test_log_reader_tail_starts_at_a_line_boundary(void**) {
  LogMem m{};
  LogWriter w(&m.hdr, kLogSize);
  w.write("6 1 aaaa\n", 9);
  w.write("6 2 bbbb\n", 9);
  w.write("6 3 cccc\n", 9);
  LogReader r(&m.hdr, kLogSize);
  r.rewind_to_tail(12);
  auto lines = read_lines(r);
  assert_int_equal(lines.size(), 1);
  assert_string_equal(lines[0].c_str(), "6 3 cccc");
}

void test_log_writer_counts_lines_too_long_for_ring(void**) {
  LogMem m{};
  LogWriter w(&m.hdr, kLogSize);
  char big[200];
  memset(big, 'x', sizeof big);
  w.write(big, sizeof big);
  assert_int_equal(m.hdr.dropped, 1);
  assert_int_equal(m.hdr.write_pos, 0);
}

// layout

constexpr uint64_t kBar = 16u << 20;

FwHeader good_header() {
  FwHeader h{};
  h.magic = kMagic;
  h.abi_major = kAbiMajor;
  h.abi_minor = kAbiMinor;
  publish_layout(&h, kBar);
  return h;
}

void test_layout_published_by_firmware_validates(void**) {
  FwHeader h = good_header();
  Layout l;
  vtrn::Error e;
  assert_true((e = validate_layout(h, kBar, &l)).ok());
  assert_int_equal(l.at(kRegionCtrlReq).offset, kCtrlReqOffset);
  assert_int_equal(l.at(kRegionHostWindow).size, kBar - kHostWindowOffset);
}

void test_layout_rejects_each_kind_of_bad_table(void**) {
  vtrn::Error e;
  Layout l;
  FwHeader h = good_header();
  h.magic = 0;
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "magic"));

  h = good_header();
  h.abi_major = 2;
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "ABI"));

  h = good_header();
  assert_false((e = validate_layout(h, kBar * 2, &l)).ok());  // size mismatch

  h = good_header();
  h.regions[3].size = 0x1000;  // ctrl-req must be exactly 32 slots
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "ctrl-req"));

  h = good_header();
  h.regions[5].offset = kBar - 0x1000;  // log past the end of BAR2
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "outside"));

  h = good_header();
  h.regions[1].offset = h.regions[0].offset;  // telemetry on top of panic
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "overlaps"));

  h = good_header();
  h.regions[2] = h.regions[2];
  h.regions[2].type = kRegionPanic;  // panic twice, ctrl-index missing
  assert_false((e = validate_layout(h, kBar, &l)).ok());

  h = good_header();
  h.region_count = 2;  // required regions missing
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "missing"));

  h = good_header();
  h.regions[0].offset = 0x1234;
  assert_false((e = validate_layout(h, kBar, &l)).ok());
  assert_non_null(strstr(e.detail(), "aligned"));

  h = good_header();
  h.regions[6].offset = 0xFFFFFFFFFFFFF000ull;  // offset + size overflows
  assert_false((e = validate_layout(h, kBar, &l)).ok());
}

void test_layout_with_dma_region_moves_host_window_past_it(void**) {
  FwHeader h{};
  h.magic = kMagic;
  h.abi_major = kAbiMajor;
  assert_true(publish_layout(&h, kBar, 4, 256));
  Layout l;
  vtrn::Error e;
  assert_true((e = validate_layout(h, kBar, &l)).ok());
  const Region& dma = l.at(kRegionDma);
  const Region& win = l.at(kRegionHostWindow);
  assert_int_equal(dma.offset, kDmaOffset);
  assert_int_equal(dma.size, vtrn::dma::dma_region_bytes(4, 256));
  assert_true(win.offset >= dma.offset + dma.size);
  assert_int_equal(win.offset % 0x100000, 0);
  assert_int_equal(win.offset + win.size, kBar);
  // A DMA region that leaves no room for a host window is refused.
  FwHeader small{};
  assert_false(publish_layout(&small, 4u << 20, 16, 4096));
  assert_int_equal(small.region_count, 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32_matches_standard_check_value),
      cmocka_unit_test_setup_teardown(test_ring_round_trips_payload_and_seq, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_reports_full_and_recovers_after_consume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_rejects_oversized_payload_without_publishing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ring_wraps_across_uint32_overflow, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consumer_latches_index_jump, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consumer_latches_producer_moving_backwards, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consumer_latches_bad_crc_bad_length_bad_kind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consumer_leaves_slot_when_caller_buffer_too_small, setup, teardown),
      cmocka_unit_test_setup_teardown(test_producer_latches_consumer_running_ahead, setup, teardown),
      cmocka_unit_test(test_log_reader_returns_complete_lines_only),
      cmocka_unit_test(test_log_reader_detects_overrun_and_resyncs_at_line_start),
      cmocka_unit_test(test_log_reader_tail_starts_at_a_line_boundary),
      cmocka_unit_test(test_log_writer_counts_lines_too_long_for_ring),
      cmocka_unit_test(test_layout_published_by_firmware_validates),
      cmocka_unit_test(test_layout_rejects_each_kind_of_bad_table),
      cmocka_unit_test(test_layout_with_dma_region_moves_host_window_past_it),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
