// Unit tests of drv::CtrlQueue (ctrl_queue.h) alone, over a HostInterface on
// a BAR2 in memory with the in-process fake firmware: FIFO order with one
// request in flight and seq from 1, a request ahead of the queue, the
// timeout that leaves a late answer to be dropped, events handed to the hook
// in ring order between answers, a broken ring (the request in flight fails,
// the hook hears why), a firmware error status, fail_all, and nothing issued
// while the owner keeps the queue closed, and a firmware that never stops
// producing cannot hold one pump (at most kPopsPerPump a call).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "vtrn/drv/ctrl_queue.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/host_interface.h"

#include "fake_firmware.h"

namespace {

constexpr uint64_t kBar2Bytes = kBar2;

struct Rig {
  uint8_t* bar2 = nullptr;
  FakeFirmware fw;
  drv::EventLoop loop;
  drv::HostInterface hif;
  bool open = true;
  int notified = 0;
  std::vector<int> events;  // event body cases in the order the hook saw them
  std::vector<std::string> broken;
  std::vector<uint64_t> answered;  // PingResponse.host_time_ns in the order answers arrived
  std::function<void()> after_event;  // runs in the hook, after the event was counted
  std::unique_ptr<drv::CtrlQueue> q;

  Rig() {
    bar2 = static_cast<uint8_t*>(aligned_alloc(4096, kBar2Bytes));
    memset(bar2, 0, kBar2Bytes);
    fw.bar2 = bar2;
    fw.boot();
    hif.attach(bar2, kBar2Bytes);
    assert_true(hif.bring_up().ok());
    q = std::make_unique<drv::CtrlQueue>(
        &loop, &hif, "chip 0",
        drv::CtrlQueue::Hooks{[this] { return open; }, [this] { ++notified; },
                              [this](const Vtrn__Ctrl__Event& ev) {
                                events.push_back(int(ev.body_case));
                                if (after_event) after_event();
                              },
                              [this](const std::string& why) { broken.push_back(why); }});
  }
  ~Rig() {
    q.reset();
    free(bar2);
  }
};

struct Answer {
  bool done = false;
  drv::CtrlResult r;
  uint64_t echoed = 0;  // PingResponse.host_time_ns
};

void ping(Rig& rig, uint64_t tag, uint32_t timeout_ms, Answer* a, bool front = false) {
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__PingRequest p = VTRN__CTRL__PING_REQUEST__INIT;
  p.host_time_ns = tag;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &p;
  rig.q->submit(req, timeout_ms, false,
                [a, &rig](const drv::CtrlResult& r) {
                  a->done = true;
                  a->r = r;
                  if (r.response != nullptr && r.response->body_case == VTRN__CTRL__RESPONSE__BODY_PING) {
                    a->echoed = r.response->ping->host_time_ns;
                    rig.answered.push_back(a->echoed);
                  }
                  a->r.response = nullptr;  // valid during the callback only
                },
                front);
}

// Serves one request at a time until nothing is in flight.
void serve_all(Rig& rig) {
  for (int i = 0; i < 100 && !rig.q->idle(); ++i) {
    rig.fw.serve();
    rig.q->pump();
  }
}

void test_requests_go_one_at_a_time_in_order_with_seq_from_one(void**) {
  Rig rig;
  Answer a, b, c;
  ping(rig, 1, 1000, &a);
  ping(rig, 2, 1000, &b);
  ping(rig, 3, 1000, &c);
  assert_int_equal(rig.notified, 1);  // only the first is in the ring
  rig.fw.serve();
  assert_int_equal(rig.fw.served, 1);
  rig.q->pump();
  assert_true(a.done);
  assert_false(b.done);
  serve_all(rig);
  assert_true(b.done && c.done);
  assert_int_equal(a.echoed, 1);
  assert_int_equal(b.echoed, 2);
  assert_int_equal(c.echoed, 3);
  assert_int_equal(rig.fw.seqs.size(), 3);
  assert_int_equal(rig.fw.seqs[0], 1);
  assert_int_equal(rig.fw.seqs[1], 2);
  assert_int_equal(rig.fw.seqs[2], 3);
  assert_int_equal(int(a.r.error.code()), int(drv::Code::kOk));
  assert_true(a.r.rtt_ns > 0);
}

void test_front_request_overtakes_the_queued_ones(void**) {
  Rig rig;
  Answer a, b, c, urgent;
  ping(rig, 1, 1000, &a);  // in flight
  ping(rig, 2, 1000, &b);
  ping(rig, 9, 1000, &urgent, true);
  ping(rig, 3, 1000, &c);
  serve_all(rig);
  // Answered in issue order: the one in flight, the urgent one, then FIFO.
  assert_int_equal(rig.answered.size(), 4);
  assert_int_equal(rig.answered[0], 1);
  assert_int_equal(rig.answered[1], 9);
  assert_int_equal(rig.answered[2], 2);
  assert_int_equal(rig.answered[3], 3);
}

void test_timeout_fails_the_request_and_its_late_answer_is_dropped(void**) {
  Rig rig;
  Answer slow, next;
  ping(rig, 1, 20, &slow);
  ping(rig, 2, 1000, &next);
  // Nobody serves: the loop's timer ends the request.
  for (int i = 0; i < 200 && !slow.done; ++i) assert_true(rig.loop.run_once(10).ok());
  assert_true(slow.done);
  assert_int_equal(int(slow.r.error.code()), int(drv::Code::kTimeout));
  assert_string_equal(slow.r.error.detail().c_str(), "chip 0: no response to control request 1 within 20 ms");
  // The firmware now answers both: seq 1 is late and dropped, seq 2 is next's.
  rig.fw.serve();
  rig.q->pump();
  assert_true(next.done);
  assert_int_equal(int(next.r.error.code()), int(drv::Code::kOk));
  assert_int_equal(next.echoed, 2);
  assert_true(rig.q->idle());
}

void test_events_reach_the_hook_in_ring_order_between_answers(void**) {
  Rig rig;
  Answer a;
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  Vtrn__Ctrl__BootEvent boot = VTRN__CTRL__BOOT_EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_BOOT;
  ev.boot = &boot;
  rig.fw.event(ev, 1);
  ping(rig, 1, 1000, &a);
  rig.fw.serve();
  Vtrn__Ctrl__Event job = VTRN__CTRL__EVENT__INIT;
  Vtrn__Ctrl__JobEvent je = VTRN__CTRL__JOB_EVENT__INIT;
  job.body_case = VTRN__CTRL__EVENT__BODY_JOB;
  job.job = &je;
  rig.fw.event(job, 2);
  rig.q->pump();
  assert_true(a.done);
  assert_int_equal(rig.events.size(), 2);
  assert_int_equal(rig.events[0], VTRN__CTRL__EVENT__BODY_BOOT);
  assert_int_equal(rig.events[1], VTRN__CTRL__EVENT__BODY_JOB);
}

void test_nothing_is_issued_while_closed(void**) {
  Rig rig;
  rig.open = false;
  Answer a;
  ping(rig, 1, 1000, &a);
  rig.fw.serve();
  assert_int_equal(rig.fw.served, 0);
  assert_int_equal(rig.notified, 0);
  rig.open = true;
  serve_all(rig);
  assert_true(a.done);
  assert_int_equal(a.echoed, 1);
}

void test_fail_all_ends_the_one_in_flight_and_the_queued(void**) {
  Rig rig;
  Answer a, b;
  ping(rig, 1, 1000, &a);
  ping(rig, 2, 1000, &b);
  rig.q->fail_all(drv::Error(drv::Code::kNotReady, "chip 0 was reset: test"));
  assert_true(a.done && b.done);
  assert_int_equal(int(a.r.error.code()), int(drv::Code::kNotReady));
  assert_string_equal(b.r.error.detail().c_str(), "chip 0 was reset: test");
  assert_true(rig.q->idle());
}

void test_broken_response_ring_fails_the_request_and_tells_the_owner(void**) {
  Rig rig;
  Answer a;
  ping(rig, 1, 1000, &a);
  const char junk[] = "junk";
  assert_int_equal(int(rig.fw.resp.push(kSlotResponse, 1, junk, 4)), int(RingStatus::kOk));
  rig.bar2[kCtrlRespOffset + kCtrlSlotHeader] ^= 0xff;  // after the CRC was taken
  rig.q->pump();
  assert_true(a.done);
  assert_int_equal(int(a.r.error.code()), int(drv::Code::kChipError));
  assert_int_equal(rig.broken.size(), 1);
  assert_non_null(strstr(rig.broken[0].c_str(), "response ring broken"));
  assert_string_equal(a.r.error.detail().c_str(), ("chip 0: " + rig.broken[0]).c_str());
}

void test_firmware_error_status_is_chip_error_with_its_text(void**) {
  Rig rig;
  Answer a;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  Vtrn__Ctrl__ShutdownRequest sd = VTRN__CTRL__SHUTDOWN_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_SHUTDOWN;  // the fake answers UNSUPPORTED
  req.shutdown = &sd;
  rig.q->submit(req, 1000, false, [&a](const drv::CtrlResult& r) {
    a.done = true;
    a.r = r;
    assert_non_null(r.response);
  });
  serve_all(rig);
  assert_true(a.done);
  assert_int_equal(int(a.r.error.code()), int(drv::Code::kChipError));
  assert_string_equal(a.r.error.detail().c_str(), "chip 0: firmware status 2");
}

void test_a_firmware_that_never_stops_producing_cannot_hold_one_pump(void**) {
  Rig rig;
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  Vtrn__Ctrl__BootEvent boot = VTRN__CTRL__BOOT_EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_BOOT;
  ev.boot = &boot;
  // Each event taken is replaced by a new one, 1000 times: without a bound
  // the first pump would take all 1001.
  int refills = 0;
  rig.after_event = [&] {
    if (refills < 1000) {
      ++refills;
      rig.fw.event(ev, 0);
    }
  };
  Answer a;
  ping(rig, 7, 10'000, &a);
  rig.fw.event(ev, 0);
  rig.fw.serve();  // the answer sits behind the first event
  rig.q->pump();
  // The budget counts every pop: the answer and 63 events.
  assert_int_equal(rig.events.size(), drv::kPopsPerPump - 1);
  assert_true(a.done);
  assert_int_equal(a.echoed, 7);
  // The rest on later loop turns, at most a budget each.
  size_t before = rig.events.size();
  for (int i = 0; i < 100 && rig.events.size() < 1001; ++i) {
    assert_true(rig.loop.run_once(10).ok());
    assert_true(rig.events.size() - before <= drv::kPopsPerPump);
    before = rig.events.size();
  }
  assert_int_equal(rig.events.size(), 1001);
  assert_int_equal(refills, 1000);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests_go_one_at_a_time_in_order_with_seq_from_one),
      cmocka_unit_test(test_front_request_overtakes_the_queued_ones),
      cmocka_unit_test(test_timeout_fails_the_request_and_its_late_answer_is_dropped),
      cmocka_unit_test(test_events_reach_the_hook_in_ring_order_between_answers),
      cmocka_unit_test(test_nothing_is_issued_while_closed),
      cmocka_unit_test(test_fail_all_ends_the_one_in_flight_and_the_queued),
      cmocka_unit_test(test_broken_response_ring_fails_the_request_and_tells_the_owner),
      cmocka_unit_test(test_firmware_error_status_is_chip_error_with_its_text),
      cmocka_unit_test(test_a_firmware_that_never_stops_producing_cannot_hold_one_pump),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
