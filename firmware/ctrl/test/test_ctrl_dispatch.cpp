// Host unit tests of the firmware's control-request dispatch, the core
// handlers and the protobuf-c arena (firmware/ctrl). The same sources run in
// the firmware; here the core handlers are the whole service table, a fake
// Backend stands in for the chip, and the tests decode the packed Response
// with the host's protobuf-c to check what the host would see.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include "fw/ctrl_dispatch.h"
#include "fw/pb_arena.h"
#include "vtrn_ctrl.pb-c.h"

namespace {

class FakeBackend final : public fw::ctrl::Backend {
 public:
  uint64_t uptime = 0;
  uint32_t level = 99;
  int level_calls = 0;

 private:
  uint64_t do_uptime_ns() override { return uptime; }
  void do_set_log_level(uint32_t l) override {
    level = l;
    ++level_calls;
  }
};

struct Fixture {
  alignas(16) uint8_t arena_buf[16384];
  fw::pb::Arena arena{arena_buf, sizeof arena_buf};
  FakeBackend backend;
  fw::ctrl::ChipFacts facts;
  fw::ctrl::CoreHandlers core{facts, backend};
  fw::Service* services[1] = {&core};
  fw::ctrl::Dispatcher dispatcher{services, backend, arena};
  uint8_t out[4080];
  Vtrn__Ctrl__Response* decoded = nullptr;
};

Fixture* g_fx = nullptr;

int setup(void** state) {
  g_fx = new Fixture();
  *state = g_fx;
  return 0;
}

int teardown(void** state) {
  if (g_fx->decoded) vtrn__ctrl__response__free_unpacked(g_fx->decoded, nullptr);
  delete g_fx;
  g_fx = nullptr;
  return 0;
}

// Packs `req`, dispatches it, decodes the response (kept in g_fx->decoded).
fw::ctrl::Outcome run(const Vtrn__Ctrl__Request* req, uint32_t out_cap = sizeof g_fx->out) {
  uint8_t buf[4096];
  const size_t n = vtrn__ctrl__request__pack(req, buf);
  return g_fx->dispatcher.dispatch(buf, uint32_t(n), g_fx->out, out_cap);
}

Vtrn__Ctrl__Response* decode(const fw::ctrl::Outcome& o) {
  if (g_fx->decoded) vtrn__ctrl__response__free_unpacked(g_fx->decoded, nullptr);
  g_fx->decoded = vtrn__ctrl__response__unpack(nullptr, o.length, g_fx->out);
  assert_non_null(g_fx->decoded);
  return g_fx->decoded;
}

void test_ping_echoes_payload_and_reports_chip_uptime(void**) {
  g_fx->backend.uptime = 123456789;
  uint8_t payload[1024];
  for (size_t i = 0; i < sizeof payload; ++i) payload[i] = uint8_t(i * 7);
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  ping.host_time_ns = 42;
  ping.payload.data = payload;
  ping.payload.len = sizeof payload;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;

  const fw::ctrl::Outcome o = run(&req);
  assert_int_equal(o.status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(int(o.action), int(fw::ctrl::Action::kNone));
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(r->body_case, VTRN__CTRL__RESPONSE__BODY_PING);
  assert_int_equal(r->ping->host_time_ns, 42);
  assert_int_equal(r->ping->chip_uptime_ns, 123456789);
  assert_int_equal(r->ping->payload.len, sizeof payload);
  assert_memory_equal(r->ping->payload.data, payload, sizeof payload);
  assert_int_equal(g_fx->dispatcher.requests(), 1);
  assert_int_equal(g_fx->dispatcher.errors(), 0);
}

void test_ping_rejects_payload_over_limit(void**) {
  uint8_t payload[1025] = {};
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  ping.payload.data = payload;
  ping.payload.len = sizeof payload;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;

  Vtrn__Ctrl__Response* r = decode(run(&req));
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_int_equal(r->body_case, VTRN__CTRL__RESPONSE__BODY__NOT_SET);
  assert_non_null(strstr(r->error, "ping.payload"));
  assert_int_equal(g_fx->dispatcher.errors(), 1);
}

void test_info_reports_every_chip_fact(void**) {
  fw::ctrl::ChipFacts& f = g_fx->facts;
  f.chip_id = 3;
  strcpy(f.board_model, "vtrn dev board");
  strcpy(f.chip_name, "chip@3");
  strcpy(f.fw_version, "0.1.0");
  strcpy(f.build_id, "vtrn-fw-0.1.0-abc");
  f.neuron_cores = 2;
  f.hbm_stacks = 4;
  f.hbm_bytes_per_stack = 64ull << 20;
  f.hbm_page_bytes = 65536;
  f.hbm_channels = 8;
  f.link_ports = 4;
  f.power_domains = 2;
  f.thermal_zones = 3;
  f.telemetry_period_ms = 100;
  strcpy(f.pci_address, "0000:00:01.0");
  f.bar2_bytes = 16ull << 20;
  f.boot_generation = 7;
  strcpy(f.cpu, "cortex-a53 r0p4");
  f.timer_hz = 62500000;
  f.gic_version = 2;
  g_fx->backend.uptime = 999;
  Vtrn__Ctrl__InfoRequest info = VTRN__CTRL__INFO_REQUEST__INIT;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_INFO;
  req.info = &info;

  Vtrn__Ctrl__Response* r = decode(run(&req));
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(r->body_case, VTRN__CTRL__RESPONSE__BODY_INFO);
  const Vtrn__Ctrl__InfoResponse* i = r->info;
  assert_int_equal(i->chip_id, 3);
  assert_string_equal(i->board_model, "vtrn dev board");
  assert_string_equal(i->chip_name, "chip@3");
  assert_string_equal(i->fw_version, "0.1.0");
  assert_string_equal(i->build_id, "vtrn-fw-0.1.0-abc");
  assert_int_equal(i->neuron_cores, 2);
  assert_int_equal(i->hbm_stacks, 4);
  assert_int_equal(i->hbm_bytes_per_stack, 64ull << 20);
  assert_int_equal(i->hbm_page_bytes, 65536);
  assert_int_equal(i->hbm_channels, 8);
  assert_int_equal(i->link_ports, 4);
  assert_int_equal(i->power_domains, 2);
  assert_int_equal(i->thermal_zones, 3);
  assert_int_equal(i->telemetry_period_ms, 100);
  assert_string_equal(i->pci_address, "0000:00:01.0");
  assert_int_equal(i->bar2_bytes, 16ull << 20);
  assert_int_equal(i->uptime_ns, 999);
  assert_int_equal(i->boot_generation, 7);
  assert_string_equal(i->cpu, "cortex-a53 r0p4");
  assert_int_equal(i->timer_hz, 62500000);
  assert_int_equal(i->gic_version, 2);
}

void test_garbage_bytes_answer_decode_error(void**) {
  // Field 1, wire type 2 (length-delimited), length 100: runs off the end.
  const uint8_t garbage[] = {0x0a, 0x64, 0x01, 0x02};
  const fw::ctrl::Outcome o =
      g_fx->dispatcher.dispatch(garbage, sizeof garbage, g_fx->out, sizeof g_fx->out);
  assert_int_equal(o.status, VTRN__CTRL__STATUS__STATUS_DECODE_ERROR);
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_DECODE_ERROR);
  assert_non_null(strstr(r->error, "not a valid vtrn.ctrl.Request"));
  assert_int_equal(g_fx->dispatcher.errors(), 1);
}

void test_request_without_body_is_unsupported(void**) {
  const fw::ctrl::Outcome o = g_fx->dispatcher.dispatch(nullptr, 0, g_fx->out, sizeof g_fx->out);
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_UNSUPPORTED);
  assert_true(strlen(r->error) > 0);
}

void test_unknown_oneof_field_is_unsupported(void**) {
  // Field 9 (a future request kind), length-delimited, empty message.
  const uint8_t future[] = {0x4a, 0x00};
  Vtrn__Ctrl__Response* r =
      decode(g_fx->dispatcher.dispatch(future, sizeof future, g_fx->out, sizeof g_fx->out));
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_UNSUPPORTED);
}

void test_set_log_level_applies_valid_level(void**) {
  Vtrn__Ctrl__SetLogLevelRequest sl = VTRN__CTRL__SET_LOG_LEVEL_REQUEST__INIT;
  sl.level = 3;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_SET_LOG_LEVEL;
  req.set_log_level = &sl;
  Vtrn__Ctrl__Response* r = decode(run(&req));
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(r->body_case, VTRN__CTRL__RESPONSE__BODY_SET_LOG_LEVEL);
  assert_int_equal(g_fx->backend.level, 3);
}

void test_set_log_level_rejects_level_above_7(void**) {
  Vtrn__Ctrl__SetLogLevelRequest sl = VTRN__CTRL__SET_LOG_LEVEL_REQUEST__INIT;
  sl.level = 8;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_SET_LOG_LEVEL;
  req.set_log_level = &sl;
  Vtrn__Ctrl__Response* r = decode(run(&req));
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(r->error, "set_log_level.level"));
  assert_int_equal(g_fx->backend.level_calls, 0);
}

void test_shutdown_answers_ok_and_asks_caller_to_halt(void**) {
  Vtrn__Ctrl__ShutdownRequest sd = VTRN__CTRL__SHUTDOWN_REQUEST__INIT;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_SHUTDOWN;
  req.shutdown = &sd;
  const fw::ctrl::Outcome o = run(&req);
  assert_int_equal(int(o.action), int(fw::ctrl::Action::kShutdown));
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(r->body_case, VTRN__CTRL__RESPONSE__BODY_SHUTDOWN);
}

void test_request_too_big_for_arena_fails_cleanly(void**) {
  // 2000 unknown varint fields: protobuf-c keeps each one, which needs far
  // more than a 1 KiB arena.
  alignas(16) static uint8_t small[1024];
  fw::pb::Arena arena(small, sizeof small);
  fw::ctrl::Dispatcher d(g_fx->services, g_fx->backend, arena);
  uint8_t req[4000];
  for (size_t i = 0; i < sizeof req; i += 2) {
    req[i] = 0x78;  // field 15, varint
    req[i + 1] = 0x01;
  }
  const fw::ctrl::Outcome o = d.dispatch(req, sizeof req, g_fx->out, sizeof g_fx->out);
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(r->error, "arena"));
  // The arena is usable again for the next request.
  assert_false(arena.exhausted());
  assert_int_equal(arena.used(), 0);
}

void test_oversized_response_becomes_internal_error(void**) {
  uint8_t payload[1000] = {};
  Vtrn__Ctrl__PingRequest ping = VTRN__CTRL__PING_REQUEST__INIT;
  ping.payload.data = payload;
  ping.payload.len = sizeof payload;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  req.ping = &ping;
  const fw::ctrl::Outcome o = run(&req, fw::ctrl::Dispatcher::kMinResponseCapacity);
  assert_true(o.length <= fw::ctrl::Dispatcher::kMinResponseCapacity);
  assert_int_equal(o.status, VTRN__CTRL__STATUS__STATUS_INTERNAL);
  Vtrn__Ctrl__Response* r = decode(o);
  assert_int_equal(r->status, VTRN__CTRL__STATUS__STATUS_INTERNAL);
  assert_non_null(strstr(r->error, "exceeds"));
}

void test_boot_event_encodes_generation_and_time(void**) {
  uint8_t buf[64];
  const uint32_t n = fw::ctrl::encode_boot_event(5, 40000000, buf, sizeof buf);
  assert_true(n > 0);
  Vtrn__Ctrl__Event* ev = vtrn__ctrl__event__unpack(nullptr, n, buf);
  assert_non_null(ev);
  assert_int_equal(ev->body_case, VTRN__CTRL__EVENT__BODY_BOOT);
  assert_int_equal(ev->boot->boot_generation, 5);
  assert_int_equal(ev->boot->boot_ns, 40000000);
  vtrn__ctrl__event__free_unpacked(ev, nullptr);
  assert_int_equal(fw::ctrl::encode_boot_event(5, 40000000, buf, 2), 0);
}

void test_arena_aligns_and_refuses_past_its_end(void**) {
  alignas(16) static uint8_t buf[80];
  fw::pb::Arena arena(buf + 1, sizeof buf - 1);  // unaligned start
  ProtobufCAllocator* a = arena.allocator();
  void* p = a->alloc(a->allocator_data, 3);
  void* q = a->alloc(a->allocator_data, 20);
  assert_non_null(p);
  assert_non_null(q);
  assert_int_equal(reinterpret_cast<uintptr_t>(p) % 16, 0);
  assert_int_equal(reinterpret_cast<uintptr_t>(q) % 16, 0);
  assert_int_equal(arena.used(), 48);
  assert_null(a->alloc(a->allocator_data, 32));
  assert_true(arena.exhausted());
  arena.reset();
  assert_false(arena.exhausted());
  assert_non_null(a->alloc(a->allocator_data, 32));
  assert_int_equal(arena.high_water(), 48);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ping_echoes_payload_and_reports_chip_uptime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ping_rejects_payload_over_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_info_reports_every_chip_fact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_bytes_answer_decode_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_without_body_is_unsupported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_oneof_field_is_unsupported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_log_level_applies_valid_level, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_log_level_rejects_level_above_7, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shutdown_answers_ok_and_asks_caller_to_halt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_too_big_for_arena_fails_cleanly, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oversized_response_becomes_internal_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_boot_event_encodes_generation_and_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_arena_aligns_and_refuses_past_its_end, setup, teardown),
  };
  return cmocka_run_group_tests_name("firmware_ctrl_dispatch", tests, nullptr, nullptr);
}
