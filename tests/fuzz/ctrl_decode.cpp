// Fuzzes the firmware's control-request path on the host, through the real
// service table: the bytes of one request slot go through
// fw::ctrl::Dispatcher::dispatch (firmware/ctrl/) over fw::services()
// (firmware/services.cpp), which unpacks vtrn.ctrl.Request with protobuf-c
// into the same 16 KiB bump arena the firmware uses, runs the one validator,
// hands the request to the service that routes its kind (the core
// handlers, HBM, power, links, collectives, jobs, reliability) and packs
// exactly one vtrn.ctrl.Response.
//
// The services are booted once, as fw_main boots them, on a host "chip":
// chip 0 of board/vtrn-dev2 (its compiled DTB in the board_dtb corpus), a
// BAR2 in ordinary memory, the HAL's fake backends and a fake core
// (fw_host_core.cpp). State carries over from one input to the next (HBM
// allocations, queued jobs, power state), as it does on a chip.
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
// success carries the body the request kind's route answers with, a ping
// echoes its payload, shutdown is the only action; the arena decode agrees
// with an ordinary malloc decode of the same bytes (unless the arena ran
// out); no service panics or asks for an invalid log level (the fake core
// aborts on either). At boot: every Request kind of the protocol is routed
// by exactly one service, answered in the Response field of the same name.
#include <stdio.h>
#include <stdlib.h>

#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "fw/ctrl_dispatch.h"
#include "fw/host_interface.h"
#include "fw/pb_arena.h"
#include "fw/platform.h"
#include "fw/service.h"
#include "fw/services.h"
#include "guarded_copy.h"
#include "hal/gic.h"
#include "hal/pcie.h"
#include "vtrn/board.h"
#include "vtrn/hostif.h"
#include "vtrn_ctrl.pb-c.h"

namespace {

class FuzzClock final : public fw::ctrl::Backend {
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

// What fw_main finds on a chip, built on the host.
struct HostChip {
  std::vector<uint8_t> dtb;
  fw::platform::Platform platform;
  vtrn::board::Board board;
  vtrn::board::Chip chip;
  uint8_t* bar2 = nullptr;
  uint64_t bar2_size = 0;
  fw::hostif::HostInterface hostif;
  hal::gic::Gic gic;
  hal::pcie::Ecam ecam;
  hal::pcie::Topology topology;
  fw::ctrl::ChipFacts facts;
};

HostChip* boot() {
  static HostChip c;
  FILE* f = fopen(VTRN_FUZZ_BOARD_DTB, "rb");
  FUZZ_CHECK(f != nullptr, "cannot open the board %s", VTRN_FUZZ_BOARD_DTB);
  uint8_t buf[65536];
  const size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  c.dtb.assign(buf, buf + n);
  vtrn::Error e = vtrn::board::parse_board(c.dtb.data(), c.dtb.size(), &c.board);
  FUZZ_CHECK(e.ok(), "board: %s", e.detail());
  e = vtrn::board::parse_chip(c.dtb.data(), c.dtb.size(), 0, &c.chip);
  FUZZ_CHECK(e.ok(), "chip 0: %s", e.detail());

  // RAM as vtrnd sizes it: the firmware's 64 MiB and the board's HBM above.
  c.platform.ram.base = 0x4000'0000;
  c.platform.ram.size = (64ull << 20) + c.chip.hbm.total_bytes();
  c.platform.cpu_count = c.chip.neuron_cores;
  c.platform.board_address = uintptr_t(c.dtb.data());
  c.platform.board_size = c.dtb.size();
  c.platform.virt_timer_intid = 27;
  c.bar2_size = uint64_t(c.chip.bar2_mib) << 20;
  c.bar2 = static_cast<uint8_t*>(aligned_alloc(4096, c.bar2_size));
  memset(c.bar2, 0, c.bar2_size);
  fw::hostif::HeaderInfo hi;
  hi.bar2_size = c.bar2_size;
  hi.chip_id = c.chip.id;
  hi.build_id = "vtrn-fw-fuzz";
  c.hostif.init(uintptr_t(c.bar2), hi);

  fill(c.facts.board_model, sizeof c.facts.board_model);
  fill(c.facts.chip_name, sizeof c.facts.chip_name);
  fill(c.facts.fw_version, sizeof c.facts.fw_version);
  fill(c.facts.build_id, sizeof c.facts.build_id);
  fill(c.facts.pci_address, sizeof c.facts.pci_address);
  fill(c.facts.cpu, sizeof c.facts.cpu);
  c.facts.hbm_bytes_per_stack = UINT64_MAX;
  c.facts.bar2_bytes = UINT64_MAX;
  c.facts.timer_hz = UINT64_MAX;

  fw::Boot b;
  b.platform = &c.platform;
  b.board = &c.board;
  b.chip = &c.chip;
  b.board_fdt = c.dtb.data();
  b.board_size = c.dtb.size();
  b.hostif = &c.hostif;
  b.bar2 = c.bar2;
  b.bar2_size = c.bar2_size;
  b.gic = &c.gic;
  b.timer_intid = c.platform.virt_timer_intid;
  b.ecam = &c.ecam;
  b.topology = &c.topology;
  b.firmware_end = c.platform.ram.base + (1u << 20);
  b.facts = &c.facts;
  b.services = fw::services();
  for (fw::Service* s : fw::services()) s->init(b);

  // The table against the protocol: every Request body case is routed by
  // exactly one service, to the Response field the proto pairs it with.
  const ProtobufCMessageDescriptor& rq = vtrn__ctrl__request__descriptor;
  for (unsigned i = 0; i < rq.n_fields; ++i) {
    const ProtobufCFieldDescriptor& f = rq.fields[i];
    unsigned owners = 0;
    for (fw::Service* s : fw::services()) {
      const fw::Route* r = s->find(f.id);
      if (r == nullptr) continue;
      ++owners;
      const ProtobufCFieldDescriptor* a =
          protobuf_c_message_descriptor_get_field(&vtrn__ctrl__response__descriptor, r->response_case);
      FUZZ_CHECK(a != nullptr && strcmp(a->name, f.name) == 0,
                 "%s: request %s answered with field %u", s->name(), f.name, r->response_case);
    }
    FUZZ_CHECK(owners == 1, "request %s (field %u) is routed by %u services", f.name, f.id, owners);
  }
  return &c;
}

// The Response body case that answers a Request body case: the route's.
uint32_t answer_case(uint32_t request_case) {
  for (fw::Service* s : fw::services()) {
    if (const fw::Route* r = s->find(request_case)) return r->response_case;
  }
  return UINT32_MAX;
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
    FUZZ_CHECK(uint32_t(resp->body_case) == answer_case(uint32_t(ref->body_case)),
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
  static HostChip* chip = boot();
  (void)chip;
  if (size > vtrn::hostif::kCtrlMaxPayload) size = vtrn::hostif::kCtrlMaxPayload;
  vtrn::fuzz::GuardedCopy req(data, size, 1);

  alignas(16) static uint8_t arena_buf[16384];
  static fw::pb::Arena arena(arena_buf, sizeof arena_buf);
  static FuzzClock clock;
  static fw::ctrl::Dispatcher d(fw::services(), clock, arena);

  Vtrn__Ctrl__Request* ref = vtrn__ctrl__request__unpack(nullptr, size, req.data());
  check_one(d, arena, req.data(), uint32_t(size), vtrn::hostif::kCtrlMaxPayload, ref);
  check_one(d, arena, req.data(), uint32_t(size), fw::ctrl::Dispatcher::kMinResponseCapacity,
            ref);
  FUZZ_CHECK(arena.high_water() <= sizeof arena_buf, "arena high water %zu", arena.high_water());
  if (ref) vtrn__ctrl__request__free_unpacked(ref, nullptr);
  return 0;
}
