// Unit tests of the host side of BAR2 (HostInterface) and of Chip's control
// queue, over a fake BAR2 in ordinary memory. The "firmware" is inline code
// in the test that uses the same common/hostif ring and layout code the real
// firmware uses, so these tests exercise the real protocol, minus QEMU.
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/host_interface.h"
#include "vtrn/layout.h"
#include "vtrn/log_ring.h"
#include "vtrn_ctrl.pb-c.h"

extern "C" {
#include <cmocka.h>
}

#include "fake_firmware.h"  // after chip.h: cmocka defines fail()

using namespace vtrn::hostif;

namespace {

struct Fixture {
  uint8_t* bar2;
  FakeFirmware fw;
};

int setup(void** state) {
  auto* f = new Fixture;
  f->bar2 = static_cast<uint8_t*>(aligned_alloc(4096, kBar2));
  memset(f->bar2, 0, kBar2);
  f->fw.bar2 = f->bar2;
  *state = f;
  return 0;
}

int teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  free(f->bar2);
  delete f;
  return 0;
}

void test_zero_bar2_reads_as_off(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_int_equal(hif.fw_state(), kStateOff);
  const drv::Error err = hif.bring_up();
  assert_false(err.ok());
  assert_non_null(strstr(err.detail().c_str(), "bad magic"));
}

void test_bring_up_rejects_region_outside_bar2(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  f->fw.hdr->regions[0].offset = kBar2;  // panic region past the end
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  const drv::Error err = hif.bring_up();
  assert_false(err.ok());
  assert_non_null(strstr(err.detail().c_str(), "outside BAR2"));
}

void test_bring_up_rejects_other_abi_major(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  f->fw.hdr->abi_major = kAbiMajor + 1;
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  const drv::Error err = hif.bring_up();
  assert_false(err.ok());
  assert_non_null(strstr(err.detail().c_str(), "ABI"));
}

void test_request_and_response_round_trip_with_seq(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_true(hif.bring_up().ok());
  assert_string_equal(hif.header().build_id, "test-build");
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;
  ping.host_time_ns = 42;
  std::vector<uint8_t> packed(protobuf_c_message_get_packed_size(&req.base));
  protobuf_c_message_pack(&req.base, packed.data());
  assert_int_equal(int(hif.push_request(7, packed.data(), uint32_t(packed.size()))),
                   int(RingStatus::kOk));
  assert_false(hif.response_pending());
  f->fw.serve();
  assert_true(hif.response_pending());
  SlotHeader h;
  std::vector<uint8_t> payload;
  assert_int_equal(int(hif.pop_response(&h, &payload)), int(RingStatus::kOk));
  assert_int_equal(h.seq, 7);
  assert_int_equal(h.kind, kSlotResponse);
  Vtrn__Ctrl__Response* r = vtrn__ctrl__response__unpack(nullptr, payload.size(), payload.data());
  assert_non_null(r);
  assert_int_equal(r->ping->host_time_ns, 42);
  vtrn__ctrl__response__free_unpacked(r, nullptr);
  assert_int_equal(int(hif.pop_response(&h, &payload)), int(RingStatus::kEmpty));
}

void test_corrupted_response_latches_ring_broken(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_true(hif.bring_up().ok());
  const char body[] = "hello";
  assert_int_equal(int(f->fw.resp.push(kSlotResponse, 1, body, 5)), int(RingStatus::kOk));
  f->bar2[kCtrlRespOffset + kCtrlSlotHeader] ^= 0xff;  // flip payload bits after the CRC
  SlotHeader h;
  std::vector<uint8_t> payload;
  assert_int_equal(int(hif.pop_response(&h, &payload)), int(RingStatus::kBroken));
  assert_int_equal(hif.response_ring_error(), kCtrlBadCrc);
  auto* idx = reinterpret_cast<CtrlIndexes*>(f->bar2 + kCtrlIndexOffset);
  assert_int_equal(idx->host_error.value, kCtrlBadCrc);
}

void test_request_kind_in_response_ring_is_rejected(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_true(hif.bring_up().ok());
  assert_int_equal(int(f->fw.resp.push(kSlotRequest, 1, "x", 1)), int(RingStatus::kOk));
  SlotHeader h;
  std::vector<uint8_t> payload;
  assert_int_equal(int(hif.pop_response(&h, &payload)), int(RingStatus::kBroken));
  assert_int_equal(hif.response_ring_error(), kCtrlBadKind);
}

void test_telemetry_seqlock_returns_stable_copy(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_true(hif.bring_up().ok());
  f->fw.telemetry->uptime_ns = 1000;
  f->fw.telemetry->idle_ns = 900;
  f->fw.telemetry->seq = 2;
  Telemetry t;
  assert_true(hif.read_telemetry(&t));
  assert_int_equal(t.uptime_ns, 1000);
  assert_int_equal(t.idle_ns, 900);
  f->fw.telemetry->seq = 3;  // writer stuck mid-update
  assert_false(hif.read_telemetry(&t));
}

void test_panic_record_found_without_layout(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* p = reinterpret_cast<PanicRecord*>(f->bar2 + kPanicOffset);
  p->magic = kPanicMagic;
  p->cause = kPanicBoard;
  memset(p->reason, 'A', sizeof p->reason);  // no terminator from the firmware
  reinterpret_cast<FwHeader*>(f->bar2)->state = kStatePanic;
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  PanicRecord out;
  assert_true(hif.read_panic(&out));
  assert_int_equal(out.cause, kPanicBoard);
  assert_int_equal(strlen(out.reason), sizeof out.reason - 1);
}

void test_log_lines_are_split_and_counted(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->fw.boot();
  f->fw.log_line("6 10 first\n");
  f->fw.log_line("4 20 second\n");
  drv::HostInterface hif;
  hif.attach(f->bar2, kBar2);
  assert_true(hif.bring_up().ok());
  std::vector<std::string> lines;
  uint64_t lost = 0;
  hif.read_log_lines(&lines, &lost);
  assert_int_equal(lines.size(), 2);
  assert_string_equal(lines[0].c_str(), "6 10 first");
  assert_string_equal(lines[1].c_str(), "4 20 second");
  assert_int_equal(lost, 0);
  lines.clear();
  hif.read_log_lines(&lines, &lost);
  assert_true(lines.empty());
}

// Chip control queue over the fake BAR2.

drv::ChipOptions test_options() {
  drv::ChipOptions o;
  o.board.id = 0;
  o.board.bar2_mib = uint32_t(kBar2 >> 20);
  return o;
}

void submit_ping(drv::Chip& chip, uint32_t timeout_ms, drv::CtrlResult* out, bool* done) {
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  uint8_t data[3] = {1, 2, 3};
  ping.payload.data = data;
  ping.payload.len = 3;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;
  chip.submit(req, timeout_ms, false, [out, done](const drv::CtrlResult& r) {
    *out = r;
    out->response = nullptr;  // only valid inside the callback
    *done = true;
  });
}

void test_chip_becomes_ready_and_caches_firmware_info(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  chip.poll_for_test();
  assert_int_equal(int(chip.state()), int(drv::ChipState::kBooting));
  f->fw.boot();
  f->fw.log_line("6 5 hello from firmware\n");
  chip.poll_for_test();
  assert_int_equal(int(chip.state()), int(drv::ChipState::kReady));
  f->fw.serve();  // the Info request Chip sends after boot
  chip.poll_for_test();
  drv::ChipStatus s = chip.status();
  assert_true(s.info.valid);
  assert_string_equal(s.info.pci_address.c_str(), "0000:00:01.0");
  assert_int_equal(chip.log_history().size(), 1);
  assert_string_equal(chip.log_history().back().c_str(), "6 5 hello from firmware");
}

void test_chip_ping_matches_response_and_measures_rtt(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  f->fw.boot();
  chip.poll_for_test();
  f->fw.serve();
  chip.poll_for_test();
  drv::CtrlResult r;
  bool done = false;
  submit_ping(chip, 1000, &r, &done);
  assert_false(done);
  f->fw.serve();
  chip.poll_for_test();
  assert_true(done);
  assert_int_equal(int(r.error.code()), int(drv::Code::kOk));
  assert_true(r.rtt_ns > 0);
}

void test_chip_times_out_and_drops_the_late_response(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  f->fw.boot();
  chip.poll_for_test();
  f->fw.serve();
  chip.poll_for_test();

  drv::CtrlResult r1;
  bool done1 = false;
  submit_ping(chip, 20, &r1, &done1);
  while (!done1) assert_true(loop.run_once(100).ok());  // nobody serves: the timer fires
  assert_int_equal(int(r1.error.code()), int(drv::Code::kTimeout));

  drv::CtrlResult r2;
  bool done2 = false;
  submit_ping(chip, 1000, &r2, &done2);
  f->fw.serve();  // answers the stale request first, then the new one
  assert_int_equal(f->fw.served, 3);
  chip.poll_for_test();
  assert_true(done2);
  assert_int_equal(int(r2.error.code()), int(drv::Code::kOk));
  assert_int_equal(int(chip.state()), int(drv::ChipState::kReady));
}

void test_chip_refuses_requests_before_ready(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  drv::CtrlResult r;
  bool done = false;
  submit_ping(chip, 1000, &r, &done);
  assert_true(done);
  assert_int_equal(int(r.error.code()), int(drv::Code::kNotReady));
  assert_string_equal(r.error.detail().c_str(), "chip 0 is BOOTING");
  assert_string_equal(chip.not_ready_reason().c_str(), "chip 0 is BOOTING");
}

void test_chip_panic_fails_pending_request_with_reason(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  f->fw.boot();
  chip.poll_for_test();
  f->fw.serve();
  chip.poll_for_test();
  drv::CtrlResult r;
  bool done = false;
  submit_ping(chip, 1000, &r, &done);
  auto* p = reinterpret_cast<PanicRecord*>(f->bar2 + kPanicOffset);
  p->magic = kPanicMagic;
  p->cause = kPanicAssert;
  strcpy(p->reason, "assert: ring index");
  __atomic_store_n(&f->fw.hdr->state, uint32_t(kStatePanic), __ATOMIC_RELEASE);
  chip.poll_for_test();
  assert_true(done);
  assert_int_equal(int(r.error.code()), int(drv::Code::kNotReady));
  // The pending request is told why: the panic and its reason.
  assert_string_equal(r.error.detail().c_str(), "chip 0: firmware panic: assert: ring index");
  assert_int_equal(int(chip.state()), int(drv::ChipState::kPanic));
  drv::ChipStatus s = chip.status();
  assert_true(s.has_panic);
  assert_string_equal(s.error.c_str(), "chip 0: firmware panic: assert: ring index");
  // Later requests are refused in the one not-ready format, with the error.
  done = false;
  submit_ping(chip, 1000, &r, &done);
  assert_true(done);
  assert_int_equal(int(r.error.code()), int(drv::Code::kNotReady));
  assert_string_equal(r.error.detail().c_str(), "chip 0 is PANIC (chip 0: firmware panic: assert: ring index)");
  assert_string_equal(chip.not_ready_reason().c_str(), r.error.detail().c_str());
}

void test_chip_fails_on_corrupted_response(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  drv::EventLoop loop;
  drv::Chip chip(&loop, test_options());
  chip.attach_for_test(f->bar2, kBar2);
  f->fw.boot();
  chip.poll_for_test();
  f->fw.serve();
  chip.poll_for_test();
  drv::CtrlResult r;
  bool done = false;
  submit_ping(chip, 1000, &r, &done);
  f->fw.serve();
  const uint32_t slot = (f->fw.resp.index() - 1) % kCtrlSlots;
  f->bar2[kCtrlRespOffset + slot * kCtrlSlotSize + kCtrlSlotHeader] ^= 0x1;
  chip.poll_for_test();
  assert_true(done);
  assert_int_equal(int(r.error.code()), int(drv::Code::kChipError));
  assert_int_equal(int(chip.state()), int(drv::ChipState::kFailed));
  assert_non_null(strstr(chip.status().error.c_str(), "CRC"));
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_zero_bar2_reads_as_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bring_up_rejects_region_outside_bar2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bring_up_rejects_other_abi_major, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_and_response_round_trip_with_seq, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupted_response_latches_ring_broken, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_kind_in_response_ring_is_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_telemetry_seqlock_returns_stable_copy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_panic_record_found_without_layout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_lines_are_split_and_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_becomes_ready_and_caches_firmware_info, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_ping_matches_response_and_measures_rtt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_times_out_and_drops_the_late_response, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_refuses_requests_before_ready, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_panic_fails_pending_request_with_reason, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chip_fails_on_corrupted_response, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
