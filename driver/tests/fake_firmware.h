// The firmware's half of BAR2 for host unit tests, in-process: the header,
// the control ring pair, the log ring and the telemetry block, written with
// the same common/hostif code the real firmware uses, so the tests that use
// it (drv_host_interface, drv_ctrl_queue) exercise the real protocol minus
// QEMU. Not a model of the firmware's services: it answers Ping and Info.
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/hostif.h"
#include "vtrn/layout.h"
#include "vtrn/log_ring.h"
#include "vtrn_ctrl.pb-c.h"

extern "C" {
#include <cmocka.h>
}

namespace {

using namespace vtrn::hostif;

constexpr uint64_t kBar2 = 16u << 20;

// The firmware's half, in-process.
struct FakeFirmware {
  uint8_t* bar2 = nullptr;
  FwHeader* hdr = nullptr;
  CtrlIndexes* idx = nullptr;
  RingConsumer req;
  RingProducer resp;
  LogWriter log;
  Telemetry* telemetry = nullptr;
  uint32_t served = 0;
  std::vector<uint32_t> seqs;  // of the requests served, in order

  void boot(uint32_t state = kStateReady) {
    hdr = reinterpret_cast<FwHeader*>(bar2);
    memset(bar2, 0, kBar2);
    hdr->magic = kMagic;
    hdr->abi_major = kAbiMajor;
    hdr->abi_minor = kAbiMinor;
    hdr->fw_version = 0x000102;
    hdr->chip_id = 0;
    hdr->boot_generation = 1;
    strcpy(hdr->build_id, "test-build");
    publish_layout(hdr, kBar2);
    idx = reinterpret_cast<CtrlIndexes*>(bar2 + kCtrlIndexOffset);
    RingMemory rq{bar2 + kCtrlReqOffset, kCtrlSlots, kCtrlSlotSize, &idx->req_prod, &idx->req_cons,
                  &idx->fw_error};
    RingMemory rs{bar2 + kCtrlRespOffset, kCtrlSlots, kCtrlSlotSize, &idx->resp_prod,
                  &idx->resp_cons, &idx->fw_error};
    req = RingConsumer(rq, 1u << kSlotRequest);
    resp = RingProducer(rs);
    log = LogWriter(reinterpret_cast<LogRingHeader*>(bar2 + kLogOffset), kLogDataSize);
    reinterpret_cast<LogRingHeader*>(bar2 + kLogOffset)->size = kLogDataSize;
    telemetry = reinterpret_cast<Telemetry*>(bar2 + kTelemetryOffset);
    __atomic_store_n(&hdr->state, state, __ATOMIC_RELEASE);
  }

  void log_line(const char* s) { log.write(s, strlen(s)); }

  // Answers every queued request (ping echoes, info describes chip 0).
  void serve() {
    SlotHeader h;
    std::vector<uint8_t> buf(kCtrlMaxPayload);
    while (req.pop(&h, buf.data(), uint32_t(buf.size())) == RingStatus::kOk) {
      Vtrn__Ctrl__Request* r = vtrn__ctrl__request__unpack(nullptr, h.length, buf.data());
      assert_non_null(r);
      Vtrn__Ctrl__Response out = VTRN__CTRL__RESPONSE__INIT;
      Vtrn__Ctrl__PingResponse pong = VTRN__CTRL__PING_RESPONSE__INIT;
      Vtrn__Ctrl__InfoResponse info = VTRN__CTRL__INFO_RESPONSE__INIT;
      if (r->body_case == VTRN__CTRL__REQUEST__BODY_PING) {
        pong.host_time_ns = r->ping->host_time_ns;
        pong.payload = r->ping->payload;
        out.body_case = VTRN__CTRL__RESPONSE__BODY_PING;
        out.ping = &pong;
      } else if (r->body_case == VTRN__CTRL__REQUEST__BODY_INFO) {
        info.fw_version = const_cast<char*>("0.1.2");
        info.pci_address = const_cast<char*>("0000:00:01.0");
        out.body_case = VTRN__CTRL__RESPONSE__BODY_INFO;
        out.info = &info;
      } else {
        out.status = VTRN__CTRL__STATUS__STATUS_UNSUPPORTED;
      }
      std::vector<uint8_t> packed(protobuf_c_message_get_packed_size(&out.base));
      protobuf_c_message_pack(&out.base, packed.data());
      assert_int_equal(int(resp.push(kSlotResponse, h.seq, packed.data(), uint32_t(packed.size()))),
                       int(RingStatus::kOk));
      vtrn__ctrl__request__free_unpacked(r, nullptr);
      seqs.push_back(h.seq);
      ++served;
    }
  }

  // An unsolicited event in the response ring.
  void event(const Vtrn__Ctrl__Event& ev, uint32_t seq = 0) {
    std::vector<uint8_t> packed(protobuf_c_message_get_packed_size(&ev.base));
    protobuf_c_message_pack(&ev.base, packed.data());
    assert_int_equal(int(resp.push(kSlotEvent, seq, packed.data(), uint32_t(packed.size()))), int(RingStatus::kOk));
  }
};

}  // namespace
