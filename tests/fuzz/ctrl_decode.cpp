// Fuzzes the firmware's control-request path on the host: the bytes of one
// request slot go through fw::ctrl::Dispatcher::dispatch (firmware/ctrl/),
// which unpacks vtrn.ctrl.Request with protobuf-c into the same 16 KiB bump
// arena the firmware uses (firmware/main.cpp), handles it and packs exactly
// one vtrn.ctrl.Response.
//
// The input is the slot payload (at most kCtrlMaxPayload bytes, as the ring
// enforces). libprotobuf-c is the distribution's, not instrumented, so the
// payload sits right before a PROT_NONE page (guarded_copy.h), and the
// response buffer is an exact-size heap block. The ChipFacts strings are
// full length so an Info response is large enough to exercise the
// too-big-for-the-slot fallback when dispatched into the minimum capacity.
//
// Invariants: the response fits the buffer and decodes; its status is in the
// enum and matches Outcome::status; an error carries a message and no body;
// success carries the body of the request kind, a ping echoes its payload,
// shutdown is the only action; the arena decode agrees with an ordinary
// malloc decode of the same bytes (unless the arena ran out); the backend
// only ever sees a validated log level.
#include <memory>

#include "fuzz_check.h"
#include "fw/ctrl_dispatch.h"
#include "fw/pb_arena.h"
#include "guarded_copy.h"
#include "vtrn/hostif.h"
#include "vtrn_ctrl.pb-c.h"

namespace {

class FuzzBackend final : public fw::ctrl::Backend {
 private:
  uint64_t do_uptime_ns() override { return 123456789; }
  void do_set_log_level(uint32_t level) override {
    FUZZ_CHECK(level <= 7, "backend asked to set log level %u", level);
  }
};

void fill(char* s, size_t cap) {
  memset(s, 'x', cap - 1);
  s[cap - 1] = 0;
}

fw::ctrl::ChipFacts full_facts() {
  fw::ctrl::ChipFacts f;
  fill(f.board_model, sizeof f.board_model);
  fill(f.chip_name, sizeof f.chip_name);
  fill(f.fw_version, sizeof f.fw_version);
  fill(f.build_id, sizeof f.build_id);
  fill(f.pci_address, sizeof f.pci_address);
  fill(f.cpu, sizeof f.cpu);
  f.hbm_bytes_per_stack = UINT64_MAX;
  f.bar2_bytes = UINT64_MAX;
  f.timer_hz = UINT64_MAX;
  return f;
}

// The Response body case that answers each Request body case.
uint32_t answer_case(Vtrn__Ctrl__Request__BodyCase c) {
  switch (c) {
    case VTRN__CTRL__REQUEST__BODY_PING: return VTRN__CTRL__RESPONSE__BODY_PING;
    case VTRN__CTRL__REQUEST__BODY_INFO: return VTRN__CTRL__RESPONSE__BODY_INFO;
    case VTRN__CTRL__REQUEST__BODY_SHUTDOWN: return VTRN__CTRL__RESPONSE__BODY_SHUTDOWN;
    case VTRN__CTRL__REQUEST__BODY_SET_LOG_LEVEL: return VTRN__CTRL__RESPONSE__BODY_SET_LOG_LEVEL;
    default: return UINT32_MAX;
  }
}

void check_one(fw::ctrl::Dispatcher& d, fw::pb::Arena& arena, const uint8_t* req, uint32_t len,
               uint32_t cap, const Vtrn__Ctrl__Request* ref) {
  auto out = std::make_unique<uint8_t[]>(cap);
  const fw::ctrl::Outcome o = d.dispatch(req, len, out.get(), cap);
  const bool arena_ran_out = arena.exhausted();
  FUZZ_CHECK(o.length <= cap, "response of %u bytes into %u", o.length, cap);
  Vtrn__Ctrl__Response* resp = vtrn__ctrl__response__unpack(nullptr, o.length, out.get());
  FUZZ_CHECK(resp != nullptr, "the %u-byte response does not decode", o.length);
  FUZZ_CHECK(uint32_t(resp->status) == o.status, "packed status %d, outcome %u", resp->status,
             o.status);
  FUZZ_CHECK(o.status <= VTRN__CTRL__STATUS__STATUS_DECODE_ERROR, "status %u outside the enum",
             o.status);
  FUZZ_CHECK(o.action == fw::ctrl::Action::kNone ||
                 (o.action == fw::ctrl::Action::kShutdown && o.status == 0 && ref &&
                  ref->body_case == VTRN__CTRL__REQUEST__BODY_SHUTDOWN),
             "action %u for status %u", unsigned(o.action), o.status);

  if (o.status != VTRN__CTRL__STATUS__STATUS_OK) {
    FUZZ_CHECK(resp->error && resp->error[0], "status %u without an error message", o.status);
    FUZZ_CHECK(resp->body_case == VTRN__CTRL__RESPONSE__BODY__NOT_SET,
               "error response carries body %d", resp->body_case);
  } else {
    FUZZ_CHECK(ref != nullptr, "OK for bytes that malloc-decode rejects");
    FUZZ_CHECK(uint32_t(resp->body_case) == answer_case(ref->body_case),
               "request body %d answered with %d", ref->body_case, resp->body_case);
    if (ref->body_case == VTRN__CTRL__REQUEST__BODY_PING) {
      const ProtobufCBinaryData& want = ref->ping->payload;
      const ProtobufCBinaryData& got = resp->ping->payload;
      FUZZ_CHECK(got.len == want.len && (!got.len || memcmp(got.data, want.data, got.len) == 0),
                 "ping payload not echoed (%zu vs %zu bytes)", got.len, want.len);
      FUZZ_CHECK(resp->ping->host_time_ns == ref->ping->host_time_ns, "ping time not echoed");
    }
  }
  if (o.status == VTRN__CTRL__STATUS__STATUS_DECODE_ERROR) {
    FUZZ_CHECK(ref == nullptr, "arena decode failed on bytes malloc decodes (arena %s)",
               arena_ran_out ? "exhausted" : "fine");
  }
  if (ref == nullptr) {
    FUZZ_CHECK(o.status == VTRN__CTRL__STATUS__STATUS_DECODE_ERROR ||
                   o.status == VTRN__CTRL__STATUS__STATUS_BAD_REQUEST,
               "undecodable bytes answered with status %u", o.status);
  }
  vtrn__ctrl__response__free_unpacked(resp, nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > vtrn::hostif::kCtrlMaxPayload) size = vtrn::hostif::kCtrlMaxPayload;
  vtrn::fuzz::GuardedCopy req(data, size, 1);

  alignas(16) static uint8_t arena_buf[16384];
  fw::pb::Arena arena(arena_buf, sizeof arena_buf);
  FuzzBackend backend;
  static const fw::ctrl::ChipFacts facts = full_facts();
  fw::ctrl::Dispatcher d(facts, backend, arena);

  Vtrn__Ctrl__Request* ref = vtrn__ctrl__request__unpack(nullptr, size, req.data());
  check_one(d, arena, req.data(), uint32_t(size), vtrn::hostif::kCtrlMaxPayload, ref);
  check_one(d, arena, req.data(), uint32_t(size), fw::ctrl::Dispatcher::kMinResponseCapacity,
            ref);
  FUZZ_CHECK(arena.high_water() <= sizeof arena_buf, "arena high water %zu", arena.high_water());
  if (ref) vtrn__ctrl__request__free_unpacked(ref, nullptr);
  return 0;
}
