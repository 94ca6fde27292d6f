// hal/link tests: the link engine queue driver over the fake register
// backend, and end to end against vtrn-hw's link engine model (LinkFabric)
// on the same region bytes of two chips: descriptors and buffers as the ABI
// lays them out, each published by its index last, the port's doorbell,
// capacity, completions polled with their status, a completion index that
// runs ahead refused, the capability and port checks of the engine region,
// and LinkConfig published last with the engine's answer read back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

#include "hal/copy_engine.h"
#include "hal/fake_mmio.h"
#include "hal/link.h"
#include "vtrn/hw/link_engine.h"

extern "C" {
#include <cmocka.h>
}

using hal::Status;
using namespace vtrn::engine;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 4ull << 20;

struct Rec final : vtrn::hw::Signals {
  void chip_irq(uint16_t v) override { ++irqs[v]; }
  void host_irq() override {}
  uint32_t irqs[kVectorCount] = {};
};

// One chip: its engine region and RAM as host memory, the ID block vtrn-hw
// would publish (link_ports and kCapLinkEngines when `links`).
struct Chip {
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegionBytes + 4096);
  std::vector<uint8_t> ram = std::vector<uint8_t>(kRamSize);
  uint32_t doorbell = 0;
  vtrn::hw::ChipMemory mem;
  Rec sig;
  vtrn::hw::ErrorLog log{mem, sig};
  hal::copy::EngineRegion reg;
  explicit Chip(uint32_t link_ports = 2, uint64_t capabilities = kCapLinkEngines) {
    mem.region = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region.data()) + 4095) & ~uintptr_t(4095));
    mem.ram = ram.data();
    mem.ram_base = kRamBase;
    mem.ram_size = kRamSize;
    IdBlock id{};
    id.magic = kMagic;
    id.abi_major = kAbiMajor;
    id.abi_minor = kAbiMinor;
    id.region_bytes = kRegionBytes;
    id.vector_count = kVectorCount;
    id.mpu_windows = kMpuWindows;
    id.dma_fw_depth = kDmaFwDepth;
    id.tensor_depth = kTensorDepth;
    id.capabilities = capabilities;
    id.link_ports = link_ports;
    memcpy(mem.region, &id, sizeof id);
  }
  Status init() {
    return reg.init(reinterpret_cast<uintptr_t>(mem.region), kRegionBytes, reinterpret_cast<uintptr_t>(&doorbell));
  }
  LinkEngineBlock* blk(uint32_t p) { return reinterpret_cast<LinkEngineBlock*>(mem.region + link_engine_offset(p)); }
  uint8_t* hbm(uint64_t a) { return ram.data() + (a - kRamBase); }
};

hal::link::Send a_send(uint64_t len, uint64_t cookie) {
  hal::link::Send s;
  s.addr = kRamBase + 0x1000;
  s.length = len;
  s.dest_chip = 1;
  s.dest_port = 0;
  s.tag = 5;
  s.cookie = cookie;
  return s;
}

void test_init_needs_the_capability_and_a_port_the_chip_has(void**) {
  hal::fake::reset();
  hal::link::LinkEngine l;
  hal::copy::EngineRegion none;
  assert_int_equal(l.init(none, 0), Status::kNotReady);
  Chip old(0, kCapTensorGemm);  // an ABI 1.3 vtrn-hw
  assert_int_equal(old.init(), Status::kOk);
  assert_int_equal(l.init(old.reg, 0), Status::kNotFound);
  Chip c(2);
  assert_int_equal(c.init(), Status::kOk);
  assert_int_equal(c.reg.link_ports(), 2);
  assert_int_equal(l.init(c.reg, 2), Status::kOutOfRange);
  assert_int_equal(l.init(c.reg, 1), Status::kOk);
  assert_int_equal(l.vector(), kVectorLink0 + 1);
  // The region refuses an ID block with more ports than the ABI has, or
  // ports without the capability.
  Chip many(kMaxLinkPorts + 1);
  assert_int_equal(many.init(), Status::kBadHardware);
  Chip nocap(2, 0);
  assert_int_equal(nocap.init(), Status::kBadHardware);
}

void test_send_and_post_lay_out_entries_and_publish_them_last(void**) {
  hal::fake::reset();
  Chip c;
  assert_int_equal(c.init(), Status::kOk);
  hal::link::LinkEngine l;
  assert_int_equal(l.init(c.reg, 1), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(l.send(a_send(3000, 42)), Status::kOk);
  const LinkSendDescriptor& d = c.blk(1)->sq[0];
  assert_int_equal(d.addr, kRamBase + 0x1000);
  assert_int_equal(d.length, 3000);
  assert_int_equal(d.dest_chip, 1);
  assert_int_equal(d.dest_port, 0);
  assert_int_equal(d.tag, 5);
  assert_int_equal(d.flags, kLinkIrq);
  assert_int_equal(d.cookie, 42);
  auto w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_true(w[0].addr == hal::fake::addr_of(&c.blk(1)->sq_prod.value));
  assert_int_equal(w[0].value, 1);
  hal::fake::clear_log();
  hal::link::Buffer b;
  b.addr = kRamBase + 0x2000;
  b.length = 4096;
  b.cookie = 9;
  b.irq = false;
  assert_int_equal(l.post(b), Status::kOk);
  const LinkRecvBuffer& rb = c.blk(1)->rq[0];
  assert_int_equal(rb.addr, kRamBase + 0x2000);
  assert_int_equal(rb.length, 4096);
  assert_int_equal(rb.cookie, 9);
  assert_int_equal(rb.flags, 0);
  w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_true(w[0].addr == hal::fake::addr_of(&c.blk(1)->rq_prod.value));
  assert_int_equal(l.ring(), Status::kOk);
  assert_int_equal(c.doorbell, kVectorLink0 + 1u);
  // Refused before anything is written.
  hal::fake::clear_log();
  assert_int_equal(l.send(a_send(0, 1)), Status::kInvalidArgument);
  assert_int_equal(l.send(a_send(kLinkMaxTransfer + 1, 1)), Status::kInvalidArgument);
  b.length = 0;
  assert_int_equal(l.post(b), Status::kInvalidArgument);
  b.addr = UINT64_MAX - 10;
  b.length = 100;
  assert_int_equal(l.post(b), Status::kInvalidArgument);
  assert_int_equal(hal::fake::writes().size(), 0);
}

void test_send_and_post_refuse_past_the_queue_depths(void**) {
  hal::fake::reset();
  Chip c;
  assert_int_equal(c.init(), Status::kOk);
  hal::link::LinkEngine l;
  assert_int_equal(l.init(c.reg, 0), Status::kOk);
  for (uint32_t i = 0; i < kLinkSendDepth; ++i) assert_int_equal(l.send(a_send(64, i)), Status::kOk);
  assert_int_equal(l.send(a_send(64, 99)), Status::kCapacity);
  assert_int_equal(l.sends_in_flight(), kLinkSendDepth);
  hal::link::Buffer b;
  b.addr = kRamBase;
  b.length = 64;
  for (uint32_t i = 0; i < kLinkRecvDepth; ++i) assert_int_equal(l.post(b), Status::kOk);
  assert_int_equal(l.post(b), Status::kCapacity);
  assert_int_equal(l.buffers_posted(), kLinkRecvDepth);
}

void test_poll_refuses_more_completions_than_submitted(void**) {
  hal::fake::reset();
  Chip c;
  assert_int_equal(c.init(), Status::kOk);
  hal::link::LinkEngine l;
  assert_int_equal(l.init(c.reg, 0), Status::kOk);
  LinkCompletion done;
  assert_int_equal(l.poll_send(&done), Status::kNotFound);
  assert_int_equal(l.poll_recv(&done), Status::kNotFound);
  c.blk(0)->scq_prod.value = 1;
  c.blk(0)->rcq_prod.value = 1;
  assert_int_equal(l.poll_send(&done), Status::kBadHardware);
  assert_int_equal(l.poll_recv(&done), Status::kBadHardware);
  c.blk(0)->error.value = 2;
  assert_int_equal(l.error(), 2);
}

void test_configure_publishes_the_generation_last_and_reads_the_answer(void**) {
  hal::fake::reset();
  Chip c;
  assert_int_equal(c.init(), Status::kOk);
  hal::link::LinkEngine l;
  LinkConfig cfg{};
  cfg.state = kLinkStateUp;
  cfg.speed_gtps = 32;
  cfg.width = 16;
  cfg.ber_e12 = 1000;
  assert_int_equal(l.configure(cfg), Status::kNotReady);
  assert_int_equal(l.init(c.reg, 1), Status::kOk);
  LinkEngineBlock* b = c.blk(1);
  uint32_t seen_speed = 0, seen_width = 0;
  uint64_t seen_ber = 0;
  hal::fake::add_region(hal::fake::addr_of(&b->config.config_gen), 4, nullptr,
                        [&](uintptr_t, unsigned, uint64_t) {
                          seen_speed = b->config.speed_gtps;
                          seen_width = b->config.width;
                          seen_ber = b->config.ber_e12;
                          return false;
                        });
  hal::fake::clear_log();
  uint32_t st = 0;
  assert_false(l.config_done(&st));
  assert_int_equal(l.configure(cfg), Status::kOk);
  assert_int_equal(seen_speed, 32);
  assert_int_equal(seen_width, 16);
  assert_int_equal(seen_ber, 1000);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 2);  // the generation, then the doorbell
  assert_true(w[0].addr == hal::fake::addr_of(&b->config.config_gen));
  assert_int_equal(w[0].value, 1);
  assert_int_equal(c.doorbell, kVectorLink0 + 1u);
  assert_false(l.config_done(&st));
  b->config_status = kEngineBadConfig | (kFieldLink << 8);
  b->config_ack = 1;
  assert_true(l.config_done(&st));
  assert_int_equal(st, kEngineBadConfig | (kFieldLink << 8));
  hal::fake::clear_log();
  cfg.reserved[2] = 1;
  assert_int_equal(l.configure(cfg), Status::kInvalidArgument);
  assert_int_equal(hal::fake::writes().size(), 0);
}

void test_round_trip_between_two_chips_through_the_model(void**) {
  hal::fake::reset();
  Chip c0, c1;
  vtrn::hw::LinkFabric fabric;
  std::string err;
  assert_true(fabric.attach(0, c0.mem, c0.sig, c0.log, 2, &err));
  assert_true(fabric.attach(1, c1.mem, c1.sig, c1.log, 2, &err));
  assert_true(fabric.wire(0, 1, 1, 0, &err));
  assert_int_equal(c0.init(), Status::kOk);
  assert_int_equal(c1.init(), Status::kOk);
  hal::link::LinkEngine a, b;
  assert_int_equal(a.init(c0.reg, 1), Status::kOk);
  assert_int_equal(b.init(c1.reg, 0), Status::kOk);
  LinkConfig up{};
  up.state = kLinkStateUp;
  up.speed_gtps = 16;
  up.width = 4;
  assert_int_equal(a.configure(up), Status::kOk);
  assert_int_equal(b.configure(up), Status::kOk);
  a.arm_irq(true);
  b.arm_irq(true);
  fabric.run_pass();
  uint32_t st = 1;
  assert_true(a.config_done(&st));
  assert_int_equal(st, kEngineOk);
  assert_true(b.config_done(&st));
  for (uint32_t i = 0; i < 10000; ++i) c0.hbm(kRamBase + 0x1000)[i] = uint8_t(i * 7 + 3);
  hal::link::Send s = a_send(10000, 77);
  assert_int_equal(a.send(s), Status::kOk);
  assert_int_equal(a.ring(), Status::kOk);
  fabric.run_pass();
  LinkCompletion done;
  assert_int_equal(a.poll_send(&done), Status::kNotFound);  // no buffer at the peer yet
  hal::link::Buffer buf;
  buf.addr = kRamBase + 0x10000;
  buf.length = 16384;
  buf.cookie = 88;
  assert_int_equal(b.post(buf), Status::kOk);
  assert_int_equal(b.ring(), Status::kOk);
  assert_int_equal(c1.doorbell, kVectorLink0 + 0u);
  fabric.run_pass();
  assert_int_equal(a.poll_send(&done), Status::kOk);
  assert_int_equal(done.status, kLinkOk);
  assert_int_equal(done.cookie, 77);
  assert_int_equal(done.bytes, 10000);
  assert_int_equal(done.modeled_ns, vtrn::hw::link_modeled_ns(10000, 16, 4, 0));
  assert_int_equal(b.poll_recv(&done), Status::kOk);
  assert_int_equal(done.status, kLinkOk);
  assert_int_equal(done.cookie, 88);
  assert_int_equal(done.tag, 5);
  assert_int_equal(done.peer_chip, 0);
  assert_int_equal(done.peer_port, 1);
  assert_memory_equal(c1.hbm(kRamBase + 0x10000), c0.hbm(kRamBase + 0x1000), 10000);
  assert_int_equal(c0.sig.irqs[kVectorLink0 + 1], 1);
  assert_int_equal(c1.sig.irqs[kVectorLink0 + 0], 1);
  assert_int_equal(a.sends_in_flight(), 0);
  assert_int_equal(b.buffers_posted(), 0);
  // A send the wiring does not allow comes back with its named status.
  s.dest_port = 1;
  assert_int_equal(a.send(s), Status::kOk);
  fabric.run_pass();
  assert_int_equal(a.poll_send(&done), Status::kOk);
  assert_int_equal(done.status, kLinkWrongPeer);
}

void test_mpu_acked_waits_for_the_link_ports(void**) {
  hal::fake::reset();
  Chip c;
  vtrn::hw::LinkFabric fabric;
  std::string err;
  assert_true(fabric.attach(0, c.mem, c.sig, c.log, 2, &err));
  assert_int_equal(c.init(), Status::kOk);
  const MpuWindow w{kRamBase, kRamSize, kMpuValid, 1, 0};
  uint32_t gen = 0;
  assert_int_equal(c.reg.mpu_program(&w, 1, &gen), Status::kOk);
  assert_false(c.reg.mpu_acked(gen));
  fabric.run_pass();
  assert_int_equal(c.blk(0)->mpu_ack.value, gen);
  assert_int_equal(c.blk(1)->mpu_ack.value, gen);
  assert_true(c.reg.mpu_acked(gen));
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_init_needs_the_capability_and_a_port_the_chip_has),
      cmocka_unit_test(test_send_and_post_lay_out_entries_and_publish_them_last),
      cmocka_unit_test(test_send_and_post_refuse_past_the_queue_depths),
      cmocka_unit_test(test_poll_refuses_more_completions_than_submitted),
      cmocka_unit_test(test_configure_publishes_the_generation_last_and_reads_the_answer),
      cmocka_unit_test(test_round_trip_between_two_chips_through_the_model),
      cmocka_unit_test(test_mpu_acked_waits_for_the_link_ports),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
