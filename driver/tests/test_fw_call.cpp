// Unit tests of fw_call (fw_call.h) over a fake port: the envelope carries
// the body in the member the caller named, the answer is handed over typed
// only when it is the expected Response member, a wrong member or a missing
// body is kChipError with the one text, and a failed request keeps its
// code and line. The power requests, several Request members answered
// by one message type in members of their own names, are the case where a
// check by message type alone would let a wrong answer through.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <string>
#include <vector>

#include "vtrn/drv/fw_call.h"

namespace {

// Records what was sent (packed, as the control queue would) and answers
// with `answer`, or with `fail` when its status is not OK.
struct FakePort {
  uint32_t chip = 3;
  std::vector<uint8_t> sent;
  Vtrn__Ctrl__Response answer = VTRN__CTRL__RESPONSE__INIT;
  bool no_response = false;
  drv::CtrlResult fail;
  uint32_t timeout_ms = 0;
  bool spin = false;

  [[nodiscard]] uint32_t id() const { return chip; }
  void submit(const Vtrn__Ctrl__Request& req, uint32_t t, bool s, drv::CtrlDone done) {
    sent.resize(vtrn__ctrl__request__get_packed_size(&req));
    vtrn__ctrl__request__pack(&req, sent.data());
    timeout_ms = t;
    spin = s;
    if (!fail.ok()) return done(fail);
    drv::CtrlResult r;
    r.response = no_response ? nullptr : &answer;
    r.rtt_ns = 1234;
    done(r);
  }
  Vtrn__Ctrl__Request* decoded() { return vtrn__ctrl__request__unpack(nullptr, sent.size(), sent.data()); }
};

void test_request_carries_body_in_named_member(void**) {
  FakePort port;
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  ar.owner = 77;
  ar.bytes = 4096;
  Vtrn__Ctrl__HbmAllocResponse ok = VTRN__CTRL__HBM_ALLOC_RESPONSE__INIT;
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_HBM_ALLOC;
  port.answer.hbm_alloc = &ok;
  drv::fw_call(port, &Vtrn__Ctrl__Request::hbm_alloc, ar, &Vtrn__Ctrl__Response::hbm_alloc, 250,
               [](const drv::FwReply<Vtrn__Ctrl__HbmAllocResponse>&) {}, true);
  Vtrn__Ctrl__Request* req = port.decoded();
  assert_non_null(req);
  assert_int_equal(req->body_case, VTRN__CTRL__REQUEST__BODY_HBM_ALLOC);
  assert_int_equal(req->hbm_alloc->owner, 77);
  assert_int_equal(req->hbm_alloc->bytes, 4096);
  assert_int_equal(port.timeout_ms, 250);
  assert_true(port.spin);
  vtrn__ctrl__request__free_unpacked(req, nullptr);
}

void test_expected_member_is_handed_over_typed(void**) {
  FakePort port;
  Vtrn__Ctrl__HbmFreeRequest fr = VTRN__CTRL__HBM_FREE_REQUEST__INIT;
  Vtrn__Ctrl__HbmFreeResponse b = VTRN__CTRL__HBM_FREE_RESPONSE__INIT;
  b.bytes = 8192;
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_HBM_FREE;
  port.answer.hbm_free = &b;
  int calls = 0;
  drv::fw_call(port, &Vtrn__Ctrl__Request::hbm_free, fr, &Vtrn__Ctrl__Response::hbm_free, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__HbmFreeResponse>& r) {
                 ++calls;
                 assert_true(r.ok());
                 assert_ptr_equal(r.body, &b);
                 assert_int_equal(r.body->bytes, 8192);
                 assert_int_equal(r.rtt_ns, 1234);
               });
  assert_int_equal(calls, 1);
}

void test_another_member_is_chip_error_naming_both(void**) {
  FakePort port;
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  Vtrn__Ctrl__HbmFreeResponse other = VTRN__CTRL__HBM_FREE_RESPONSE__INIT;
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_HBM_FREE;
  port.answer.hbm_free = &other;
  int calls = 0;
  drv::fw_call(port, &Vtrn__Ctrl__Request::hbm_alloc, ar, &Vtrn__Ctrl__Response::hbm_alloc, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__HbmAllocResponse>& r) {
                 ++calls;
                 assert_int_equal(int(r.error.code()), int(drv::Code::kChipError));
                 assert_null(r.body);
                 assert_string_equal(r.error.detail().c_str(), "chip 3: firmware answered hbm_alloc with hbm_free");
               });
  assert_int_equal(calls, 1);
}

void test_same_type_in_another_member_is_refused(void**) {
  FakePort port;
  Vtrn__Ctrl__PowerSetCapRequest cap = VTRN__CTRL__POWER_SET_CAP_REQUEST__INIT;
  Vtrn__Ctrl__PowerStatusResponse ps = VTRN__CTRL__POWER_STATUS_RESPONSE__INIT;
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_POWER_STATUS;
  port.answer.power_status = &ps;
  std::string error;
  drv::fw_call(port, &Vtrn__Ctrl__Request::power_set_cap, cap, &Vtrn__Ctrl__Response::power_set_cap, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__PowerStatusResponse>& r) {
                 assert_null(r.body);
                 error = r.error.detail();
               });
  assert_string_equal(error.c_str(), "chip 3: firmware answered power_set_cap with power_status");
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_POWER_SET_CAP;
  port.answer.power_set_cap = &ps;
  const Vtrn__Ctrl__PowerStatusResponse* got = nullptr;
  drv::fw_call(port, &Vtrn__Ctrl__Request::power_set_cap, cap, &Vtrn__Ctrl__Response::power_set_cap, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__PowerStatusResponse>& r) { got = r.body; });
  assert_ptr_equal(got, &ps);
}

void test_missing_response_or_body_is_chip_error(void**) {
  FakePort port;
  Vtrn__Ctrl__InfoRequest ir = VTRN__CTRL__INFO_REQUEST__INIT;
  std::vector<std::string> errors;
  auto record = [&](const drv::FwReply<Vtrn__Ctrl__InfoResponse>& r) {
    assert_int_equal(int(r.error.code()), int(drv::Code::kChipError));
    assert_null(r.body);
    errors.push_back(r.error.detail());
  };
  drv::fw_call(port, &Vtrn__Ctrl__Request::info, ir, &Vtrn__Ctrl__Response::info, 100, record);
  port.no_response = true;
  drv::fw_call(port, &Vtrn__Ctrl__Request::info, ir, &Vtrn__Ctrl__Response::info, 100, record);
  // The member named, but its pointer null: a body that is not there.
  port.no_response = false;
  port.answer.body_case = VTRN__CTRL__RESPONSE__BODY_INFO;
  port.answer.info = nullptr;
  drv::fw_call(port, &Vtrn__Ctrl__Request::info, ir, &Vtrn__Ctrl__Response::info, 100, record);
  assert_int_equal(errors.size(), 3);
  assert_string_equal(errors[0].c_str(), "chip 3: firmware answered info with no body");
  assert_string_equal(errors[1].c_str(), "chip 3: firmware answered info with no body");
  assert_string_equal(errors[2].c_str(), "chip 3: firmware answered info with no body");
}

void test_failed_request_keeps_status_and_line(void**) {
  FakePort port;
  port.fail.error = drv::Error(drv::Code::kTimeout, "chip 3: no response to control request 9 within 100 ms");
  Vtrn__Ctrl__PingRequest pr = VTRN__CTRL__PING_REQUEST__INIT;
  int calls = 0;
  drv::fw_call(port, &Vtrn__Ctrl__Request::ping, pr, &Vtrn__Ctrl__Response::ping, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__PingResponse>& r) {
                 ++calls;
                 assert_false(r.ok());
                 assert_int_equal(int(r.error.code()), int(drv::Code::kTimeout));
                 assert_string_equal(r.error.detail().c_str(), "chip 3: no response to control request 9 within 100 ms");
                 assert_null(r.body);
               });
  assert_int_equal(calls, 1);
}

void test_every_request_member_has_an_answer_of_its_name(void**) {
  const ProtobufCMessageDescriptor& req = vtrn__ctrl__request__descriptor;
  for (unsigned i = 0; i < req.n_fields; ++i) {
    const ProtobufCFieldDescriptor& f = req.fields[i];
    const ProtobufCFieldDescriptor* out =
        protobuf_c_message_descriptor_get_field_by_name(&vtrn__ctrl__response__descriptor, f.name);
    if (out == nullptr) fail_msg("vtrn.ctrl.Request.%s has no Response member of its name", f.name);
    assert_int_equal(out->type, PROTOBUF_C_TYPE_MESSAGE);
    // And the body type finds its member again (one type per member).
    assert_ptr_equal(drv::fw_detail::request_field(static_cast<const ProtobufCMessageDescriptor*>(f.descriptor)), &f);
  }
}

void test_caller_mistakes_are_internal_not_chip_errors(void**) {
  FakePort port;
  // A body whose descriptor is no Request member's: the envelope stays
  // empty (the firmware answers DECODE_ERROR).
  Vtrn__Ctrl__HbmAllocRequest wrong = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  wrong.base.descriptor = &vtrn__ctrl__hbm_alloc_response__descriptor;
  const Vtrn__Ctrl__Request req = drv::fw_request(&Vtrn__Ctrl__Request::hbm_alloc, wrong);
  assert_int_equal(req.body_case, VTRN__CTRL__REQUEST__BODY__NOT_SET);
  Vtrn__Ctrl__PingRequest pr = VTRN__CTRL__PING_REQUEST__INIT;
  drv::Code code = drv::Code::kOk;
  // Ping expecting an InfoResponse, not the type of the member of its
  // name: the caller's fault, answered kInternal, whatever came back.
  drv::fw_call(port, &Vtrn__Ctrl__Request::ping, pr, &Vtrn__Ctrl__Response::info, 100,
               [&](const drv::FwReply<Vtrn__Ctrl__InfoResponse>& r) { code = r.error.code(); });
  assert_int_equal(int(code), int(drv::Code::kInternal));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_carries_body_in_named_member),
      cmocka_unit_test(test_expected_member_is_handed_over_typed),
      cmocka_unit_test(test_another_member_is_chip_error_naming_both),
      cmocka_unit_test(test_same_type_in_another_member_is_refused),
      cmocka_unit_test(test_missing_response_or_body_is_chip_error),
      cmocka_unit_test(test_failed_request_keeps_status_and_line),
      cmocka_unit_test(test_every_request_member_has_an_answer_of_its_name),
      cmocka_unit_test(test_caller_mistakes_are_internal_not_chip_errors),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
