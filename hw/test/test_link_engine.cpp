// Host unit tests of the link engine model (hw/src/link_engine.cpp): sends
// copied bit-exact from one chip's HBM into the peer port's oldest posted
// buffer, every named status on both sides with the error records, BER
// replays counted and timed with correct data, credit stalls, MPU faults on
// either side, reset with sends waiting, the board wiring, and the fabric
// thread sleeping on doorbells. Each chip's engine region and RAM are host
// buffers (RAM a memfd, as in vtrn-hw); Signals records interrupts.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/engine_abi.h"
#include "vtrn/hw/link_engine.h"
#include "vtrn/seqlock.h"

extern "C" {
#include <cmocka.h>
}

using namespace vtrn;
using namespace vtrn::engine;
using namespace vtrn::hw;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 16ull << 20;
constexpr uint32_t kPorts = 4;

struct Recorder final : Signals {
  void chip_irq(uint16_t v) override { ++chip[v]; }
  void host_irq() override {}
  uint32_t chip[kVectorCount] = {};
};

struct Chip {
  std::vector<uint8_t> region_buf = std::vector<uint8_t>(kRegionBytes + 4096);
  ChipMemory mem;
  Recorder sig;
  ErrorLog log{mem, sig};
  uint32_t err_cursor = 0;
  // fw-side cursors and config generations, per port
  uint32_t sq_p[kPorts] = {}, rq_p[kPorts] = {}, scq_c[kPorts] = {}, rcq_c[kPorts] = {};
  uint32_t cfg_gen[kPorts] = {};

  Chip() {
    mem.region = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region_buf.data()) + 4095) &
                                            ~uintptr_t(4095));
    mem.ram_fd = memfd_create("link-ram", MFD_CLOEXEC);
    assert_true(mem.ram_fd >= 0);
    assert_int_equal(ftruncate(mem.ram_fd, off_t(kRamSize)), 0);
    void* ram = mmap(nullptr, kRamSize, PROT_READ | PROT_WRITE, MAP_SHARED, mem.ram_fd, 0);
    assert_true(ram != MAP_FAILED);
    mem.ram = static_cast<uint8_t*>(ram);
    mem.ram_base = kRamBase;
    mem.ram_size = kRamSize;
  }
  ~Chip() {
    munmap(mem.ram, kRamSize);
    close(mem.ram_fd);
  }
  Chip(const Chip&) = delete;
  Chip& operator=(const Chip&) = delete;

  LinkEngineBlock* blk(uint32_t p) { return reinterpret_cast<LinkEngineBlock*>(mem.region + link_engine_offset(p)); }
  uint8_t* hbm(uint64_t addr) { return mem.ram + (addr - kRamBase); }
  void up(uint32_t p, uint32_t gtps = 32, uint32_t width = 16, uint64_t ber_e12 = 0, uint64_t seed = 1,
          uint32_t state = kLinkStateUp) {
    LinkConfig& c = blk(p)->config;
    c.state = state;
    c.speed_gtps = gtps;
    c.width = width;
    c.ber_e12 = ber_e12;
    c.ber_seed = seed;
    __atomic_store_n(&c.config_gen, ++cfg_gen[p], __ATOMIC_RELEASE);
  }
  void send(uint32_t p, uint64_t addr, uint64_t len, uint32_t dchip, uint32_t dport, uint32_t tag, uint64_t cookie,
            uint32_t flags = kLinkIrq) {
    LinkSendDescriptor& d = blk(p)->sq[sq_p[p] % kLinkSendDepth];
    d = LinkSendDescriptor{};
    d.addr = addr;
    d.length = len;
    d.dest_chip = dchip;
    d.dest_port = dport;
    d.tag = tag;
    d.flags = flags;
    d.cookie = cookie;
    hostif::store_release(&blk(p)->sq_prod, ++sq_p[p]);
  }
  void post(uint32_t p, uint64_t addr, uint64_t len, uint64_t cookie, uint32_t flags = kLinkIrq) {
    LinkRecvBuffer& b = blk(p)->rq[rq_p[p] % kLinkRecvDepth];
    b = LinkRecvBuffer{addr, len, cookie, flags, 0};
    hostif::store_release(&blk(p)->rq_prod, ++rq_p[p]);
  }
  // The next send / receive completion of port p, if any.
  bool send_done(uint32_t p, LinkCompletion* c) {
    if (hostif::load_acquire(&blk(p)->scq_prod) == scq_c[p]) return false;
    *c = blk(p)->scq[scq_c[p]++ % kLinkSendDepth];
    hostif::store_release(&blk(p)->scq_cons, scq_c[p]);
    return true;
  }
  bool recv_done(uint32_t p, LinkCompletion* c) {
    if (hostif::load_acquire(&blk(p)->rcq_prod) == rcq_c[p]) return false;
    *c = blk(p)->rcq[rcq_c[p]++ % kLinkRecvDepth];
    hostif::store_release(&blk(p)->rcq_cons, rcq_c[p]);
    return true;
  }
  LinkStats stats(uint32_t p) {
    LinkStats s{};
    assert_true(hostif::seqlock_read(&blk(p)->stats, &s, 100));
    return s;
  }
  bool next_error(ErrorRecord* r) {
    ErrorBlock* e = mem.errors();
    if (e->prod.value == err_cursor) return false;
    *r = e->records[err_cursor++ % kErrorRecords];
    return true;
  }
  void mpu(std::initializer_list<MpuWindow> windows) {
    MpuBlock* b = mem.mpu();
    const uint32_t gen = b->header.generation.value + 1;
    uint32_t n = 0;
    for (const MpuWindow& w : windows) b->bank[gen & 1][n++] = w;
    b->bank_count[gen & 1] = n;
    b->header.count.value = n;
    hostif::store_release(&b->header.generation, gen);
  }
};

// Chips 0 and 1 joined port 0 <-> port 1; chip 0 port 2 <-> chip 2 port 0;
// chip 0 port 3 unwired.
struct Board {
  Chip c[3];
  LinkFabric fabric;
  Board() {
    std::string err;
    for (uint32_t i = 0; i < 3; ++i) assert_true(fabric.attach(i, c[i].mem, c[i].sig, c[i].log, kPorts, &err));
    assert_true(fabric.wire(0, 0, 1, 1, &err));
    assert_true(fabric.wire(0, 2, 2, 0, &err));
    c[0].up(0);
    c[1].up(1);
    c[0].up(2);
    c[2].up(0);
    c[0].up(3);
    fabric.run_pass();
  }
  void drain() {
    while (fabric.run_pass()) {
    }
  }
};

constexpr uint64_t kSrc = kRamBase + 0x100000;
constexpr uint64_t kDst = kRamBase + 0x800000;

void fill(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(g());
}

void test_modeled_time_follows_speed_width_frames_and_replays(void**) {
  // One full frame at 32 GT/s x16: (2048 + 32) B x 8 x 130/128 / 512 bit/ns = 33.01 -> 34 ns, + latency.
  assert_int_equal(link_modeled_ns(2048, 32, 16, 0), 34 + kLinkLatencyNs);
  assert_int_equal(link_frames(1), 1);
  assert_int_equal(link_frames(2048), 1);
  assert_int_equal(link_frames(2049), 2);
  assert_int_equal(link_modeled_ns(0, 32, 16, 0), 0);
  // Half the lanes, twice the serialisation; a replay costs a frame and kLinkReplayNs.
  const uint64_t big = 1u << 20;
  const uint64_t x16 = link_modeled_ns(big, 32, 16, 0) - kLinkLatencyNs;
  const uint64_t x8 = link_modeled_ns(big, 32, 8, 0) - kLinkLatencyNs;
  assert_true(x8 >= 2 * x16 - 1 && x8 <= 2 * x16 + 1);
  assert_true(link_modeled_ns(big, 32, 16, 3) > link_modeled_ns(big, 32, 16, 0) + 3 * kLinkReplayNs);
}

void test_link_attach_publishes_capability_and_zeroes_blocks(void**) {
  Chip c;
  memset(c.blk(0), 0xa5, sizeof(LinkEngineBlock));
  LinkFabric f;
  std::string err;
  assert_true(f.attach(7, c.mem, c.sig, c.log, 2, &err));
  assert_true(c.mem.id()->capabilities & kCapLinkEngines);
  assert_int_equal(c.mem.id()->link_ports, 2);
  assert_int_equal(c.blk(0)->sq_prod.value, 0);
  assert_int_equal(c.blk(0)->config.state, 0);
  assert_false(f.attach(7, c.mem, c.sig, c.log, 2, &err));
  assert_non_null(strstr(err.c_str(), "attached twice"));
  Chip d;
  assert_false(f.attach(8, d.mem, d.sig, d.log, kMaxLinkPorts + 1, &err));
  assert_true(f.attach(8, d.mem, d.sig, d.log, 1, &err));
  assert_false(f.wire(7, 0, 8, 1, &err));
  assert_non_null(strstr(err.c_str(), "no such link port"));
  assert_true(f.wire(7, 0, 8, 0, &err));
  assert_false(f.wire(7, 0, 7, 1, &err));
  assert_non_null(strstr(err.c_str(), "wired already"));
}

void test_link_send_is_bit_exact_and_completes_both_sides(void**) {
  Board b;
  const uint64_t len = 100000;  // 49 frames, the last one partial
  fill(b.c[0].hbm(kSrc), len, 1);
  memset(b.c[1].hbm(kDst), 0, len + 64);
  hostif::store_release(&b.c[0].blk(0)->irq_armed, 1);
  hostif::store_release(&b.c[1].blk(1)->irq_armed, 1);
  b.c[1].post(1, kDst, len + 32, 0xbeef);
  b.c[0].send(0, kSrc, len, 1, 1, 42, 0xcafe);
  assert_true(b.fabric.run_pass());
  LinkCompletion s{}, r{};
  assert_true(b.c[0].send_done(0, &s));
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(s.status, kLinkOk);
  assert_int_equal(s.cookie, 0xcafe);
  assert_int_equal(s.tag, 42);
  assert_int_equal(s.bytes, len);
  assert_int_equal(s.peer_chip, 1);
  assert_int_equal(s.peer_port, 1);
  assert_int_equal(s.modeled_ns, link_modeled_ns(len, 32, 16, 0));
  assert_int_equal(r.status, kLinkOk);
  assert_int_equal(r.cookie, 0xbeef);
  assert_int_equal(r.tag, 42);
  assert_int_equal(r.bytes, len);
  assert_int_equal(r.peer_chip, 0);
  assert_int_equal(r.peer_port, 0);
  assert_memory_equal(b.c[1].hbm(kDst), b.c[0].hbm(kSrc), len);
  // Nothing beyond the send's length is written.
  for (uint64_t i = len; i < len + 64; ++i) assert_int_equal(b.c[1].hbm(kDst)[i], 0);
  assert_int_equal(b.c[0].sig.chip[kVectorLink0 + 0], 1);
  assert_int_equal(b.c[1].sig.chip[kVectorLink0 + 1], 1);
  const LinkStats st = b.c[0].stats(0);
  const LinkStats rs = b.c[1].stats(1);
  assert_int_equal(st.sends, 1);
  assert_int_equal(st.frames_tx, 49);
  assert_int_equal(st.bytes_tx, len);
  assert_int_equal(st.modeled_ns, s.modeled_ns);
  assert_int_equal(st.irqs, 1);
  assert_int_equal(rs.recvs, 1);
  assert_int_equal(rs.frames_rx, 49);
  assert_int_equal(rs.bytes_rx, len);
  assert_int_equal(st.errors + rs.errors + st.replays + rs.crc_errors, 0);
  // Sends complete in order, each into the next posted buffer.
  for (uint32_t i = 0; i < 5; ++i) b.c[1].post(1, kDst + 4096 * i, 4096, 100 + i, 0);
  for (uint32_t i = 0; i < 5; ++i) b.c[0].send(0, kSrc + 100 * i, 1000 + i, 1, 1, i, 200 + i, 0);
  b.drain();
  for (uint32_t i = 0; i < 5; ++i) {
    assert_true(b.c[0].send_done(0, &s));
    assert_true(b.c[1].recv_done(1, &r));
    assert_int_equal(s.cookie, 200 + i);
    assert_int_equal(r.cookie, 100 + i);
    assert_int_equal(r.bytes, 1000 + i);
    assert_int_equal(r.tag, i);
    assert_memory_equal(b.c[1].hbm(kDst + 4096 * i), b.c[0].hbm(kSrc + 100 * i), 1000 + i);
  }
  // No kLinkIrq: no more interrupts.
  assert_int_equal(b.c[0].sig.chip[kVectorLink0 + 0], 1);
  ErrorRecord e;
  assert_false(b.c[0].next_error(&e));
}

// One send on chip 0 port `port`, one pass; its completion status.
uint32_t one_send(Board& b, uint32_t port, uint64_t addr, uint64_t len, uint32_t dchip, uint32_t dport,
                  LinkSendDescriptor* tweak = nullptr) {
  b.c[0].send(port, addr, len, dchip, dport, 9, 77, 0);
  if (tweak) {
    LinkSendDescriptor& d = b.c[0].blk(port)->sq[(b.c[0].sq_p[port] - 1) % kLinkSendDepth];
    d.flags = tweak->flags;
    d.reserved[1] = tweak->reserved[1];
  }
  b.drain();
  LinkCompletion s{};
  assert_true(b.c[0].send_done(port, &s));
  assert_int_equal(s.cookie, 77);
  return s.status;
}

void test_link_send_refusals_have_their_named_status(void**) {
  Board b;
  b.c[1].post(1, kDst, 4096, 1);
  assert_int_equal(one_send(b, 0, kSrc, 0, 1, 1), kLinkBadDescriptor);
  assert_int_equal(one_send(b, 0, kSrc, kLinkMaxTransfer + 1, 1, 1), kLinkBadDescriptor);
  LinkSendDescriptor t{};
  t.flags = 1u << 7;
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1, &t), kLinkBadDescriptor);
  t = LinkSendDescriptor{};
  t.reserved[1] = 1;
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1, &t), kLinkBadDescriptor);
  assert_int_equal(one_send(b, 0, UINT64_MAX - 8, 64, 1, 1), kLinkBadDescriptor);
  assert_int_equal(one_send(b, 3, kSrc, 64, 1, 1), kLinkUnwired);
  assert_int_equal(one_send(b, 0, kSrc, 64, 2, 0), kLinkWrongPeer);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 0), kLinkWrongPeer);
  assert_int_equal(one_send(b, 0, kRamBase + kRamSize - 32, 64, 1, 1), kLinkBadAddress);
  ErrorRecord e;
  assert_true(b.c[0].next_error(&e));
  assert_int_equal(e.code, kEngineBadAddress);
  assert_int_equal(e.source, kSourceLink);
  assert_int_equal(e.engine, 0);
  assert_int_equal(e.queue, kLinkQueueSend);
  assert_int_equal(e.status, kLinkBadAddress);
  assert_int_equal(e.address, kRamBase + kRamSize - 32);
  assert_int_equal(e.cookie, 77);
  // This end down, then the peer end down.
  b.c[0].up(0, 32, 16, 0, 1, kLinkStateDown);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkDown);
  b.c[0].up(0);
  b.c[1].up(1, 32, 16, 0, 1, kLinkStateDown);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkDown);
  b.c[1].up(1);
  // None of these took the posted buffer: the next good send lands in it.
  fill(b.c[0].hbm(kSrc), 64, 3);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkOk);
  LinkCompletion r{};
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.cookie, 1);
  assert_false(b.c[1].recv_done(1, &r));
  assert_memory_equal(b.c[1].hbm(kDst), b.c[0].hbm(kSrc), 64);
  // Errors were counted on the sender.
  assert_int_equal(b.c[0].stats(0).errors, 10);
  assert_int_equal(b.c[0].stats(3).errors, 1);
}

void test_link_buffer_too_small_and_bad_buffers_complete_both_sides(void**) {
  Board b;
  b.c[1].post(1, kDst, 100, 5);
  assert_int_equal(one_send(b, 0, kSrc, 101, 1, 1), kLinkBufferTooSmall);
  LinkCompletion r{};
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkBufferTooSmall);
  assert_int_equal(r.cookie, 5);
  assert_int_equal(r.bytes, 0);
  assert_int_equal(r.tag, 9);
  // A posted buffer outside the receiver's RAM: bad address there, peer fault here.
  b.c[1].post(1, kRamBase + kRamSize, 4096, 6);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkPeerFault);
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkBadAddress);
  ErrorRecord e;
  assert_true(b.c[1].next_error(&e));
  assert_int_equal(e.code, kEngineBadAddress);
  assert_int_equal(e.queue, kLinkQueueRecv);
  assert_int_equal(e.engine, 1);
  assert_int_equal(e.cookie, 6);
  // Malformed buffer (unknown flag).
  b.c[1].post(1, kDst, 4096, 7, 1u << 9);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkPeerFault);
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkBadDescriptor);
  assert_int_equal(b.c[1].stats(1).errors, 3);
}

void test_link_mpu_faults_on_either_side_are_named_and_recorded(void**) {
  Board b;
  const MpuWindow src_win{kSrc, 0x10000, kMpuValid, 11, 0};
  const MpuWindow dst_win{kDst, 0x10000, kMpuValid, 12, 0};
  b.c[0].mpu({src_win});
  b.c[1].mpu({dst_win});
  b.drain();
  assert_int_equal(b.c[0].blk(0)->mpu_ack.value, 1);
  assert_int_equal(b.c[1].blk(1)->mpu_ack.value, 1);
  // Sender side: the range runs out of its window.
  b.c[1].post(1, kDst, 0x10000, 1);
  assert_int_equal(one_send(b, 0, kSrc + 0x8000, 0x9000, 1, 1), kLinkMpuFault);
  ErrorRecord e;
  assert_true(b.c[0].next_error(&e));
  assert_int_equal(e.code, kEngineMpuFault);
  assert_int_equal(e.source, kSourceLink);
  assert_int_equal(e.queue, kLinkQueueSend);
  assert_int_equal(e.status, kLinkMpuFault);
  assert_int_equal(e.address, kSrc + 0x8000);
  assert_int_equal(e.length, 0x9000);
  assert_int_equal(e.mpu_generation, 1);
  LinkCompletion r{};
  assert_false(b.c[1].recv_done(1, &r));  // the buffer was not taken
  // Receiver side: the posted buffer is outside the receiver's windows.
  assert_int_equal(one_send(b, 0, kSrc, 0x1000, 1, 1), kLinkOk);  // uses buffer 1
  assert_true(b.c[1].recv_done(1, &r));
  memset(b.c[1].hbm(kDst + 0x20000), 0x5a, 0x1000);
  b.c[1].post(1, kDst + 0x20000, 0x1000, 2);
  assert_int_equal(one_send(b, 0, kSrc, 0x1000, 1, 1), kLinkPeerFault);
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkMpuFault);
  assert_int_equal(r.cookie, 2);
  assert_true(b.c[1].next_error(&e));
  assert_int_equal(e.code, kEngineMpuFault);
  assert_int_equal(e.queue, kLinkQueueRecv);
  assert_int_equal(e.engine, 1);
  assert_int_equal(e.address, kDst + 0x20000);
  for (uint32_t i = 0; i < 0x1000; ++i) assert_int_equal(b.c[1].hbm(kDst + 0x20000)[i], 0x5a);
  // A poisoned page in the receiver's window: also a fault, nothing written.
  b.c[1].mpu({dst_win, MpuWindow{kDst + 0x1000, 0x1000, kMpuValid | kMpuPoison, 0, 0}});
  memset(b.c[1].hbm(kDst), 0x33, 0x2000);
  b.c[1].post(1, kDst, 0x2000, 3);
  assert_int_equal(one_send(b, 0, kSrc, 0x2000, 1, 1), kLinkPeerFault);
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkMpuFault);
  for (uint32_t i = 0; i < 0x2000; ++i) assert_int_equal(b.c[1].hbm(kDst)[i], 0x33);
  assert_int_equal(b.c[1].blk(1)->mpu_ack.value, 2);
}

void test_link_ber_replays_are_counted_timed_and_the_data_is_correct(void**) {
  const uint64_t len = 1u << 20;  // 512 frames
  uint32_t replays[2] = {};
  for (int run = 0; run < 2; ++run) {
    Board b;
    // 1e-5 per bit: a 2080-byte frame is corrupted with p = 1 - (1 - 1e-5)^16640 = 0.153.
    b.c[0].up(0, 16, 8, 10000000, 1234);
    fill(b.c[0].hbm(kSrc), len, 9);
    b.c[1].post(1, kDst, len, 1);
    b.c[0].send(0, kSrc, len, 1, 1, 3, 4, 0);
    b.drain();
    LinkCompletion s{}, r{};
    assert_true(b.c[0].send_done(0, &s));
    assert_true(b.c[1].recv_done(1, &r));
    assert_int_equal(s.status, kLinkOk);
    assert_int_equal(r.status, kLinkOk);
    assert_memory_equal(b.c[1].hbm(kDst), b.c[0].hbm(kSrc), len);
    // Around 0.153 / 0.847 x 512 = 93 replays; well inside 40..160.
    assert_true(s.replays >= 40 && s.replays <= 160);
    assert_int_equal(r.replays, s.replays);
    assert_int_equal(s.modeled_ns, link_modeled_ns(len, 16, 8, s.replays));
    assert_true(s.modeled_ns > link_modeled_ns(len, 16, 8, 0));
    const LinkStats st = b.c[0].stats(0);
    const LinkStats rs = b.c[1].stats(1);
    assert_int_equal(st.replays, s.replays);
    assert_int_equal(st.frames_tx, 512 + s.replays);
    assert_int_equal(rs.crc_errors, s.replays);
    assert_int_equal(rs.frames_rx, 512);
    replays[run] = s.replays;
  }
  // The same seed, the same error pattern.
  assert_int_equal(replays[0], replays[1]);
}

void test_link_ber_of_one_exhausts_replays_with_a_named_status(void**) {
  Board b;
  b.c[0].up(0, 32, 16, kLinkBerScale, 5);
  memset(b.c[1].hbm(kDst), 0x11, 256);
  b.c[1].post(1, kDst, 4096, 1);
  assert_int_equal(one_send(b, 0, kSrc, 256, 1, 1), kLinkReplayLimit);
  LinkCompletion r{};
  assert_true(b.c[1].recv_done(1, &r));
  assert_int_equal(r.status, kLinkReplayLimit);
  assert_int_equal(r.bytes, 0);
  assert_int_equal(r.replays, kLinkMaxReplays);
  for (uint32_t i = 0; i < 256; ++i) assert_int_equal(b.c[1].hbm(kDst)[i], 0x11);
  assert_int_equal(b.c[0].stats(0).replays, kLinkMaxReplays);
  assert_int_equal(b.c[1].stats(1).crc_errors, kLinkMaxReplays);
}

void test_link_send_without_a_posted_buffer_waits_and_counts_one_credit_stall(void**) {
  Board b;
  fill(b.c[0].hbm(kSrc), 5000, 4);
  b.c[0].send(0, kSrc, 5000, 1, 1, 1, 10, 0);
  b.c[0].send(0, kSrc, 10, 1, 1, 2, 11, 0);
  b.drain();
  LinkCompletion s{}, r{};
  assert_false(b.c[0].send_done(0, &s));
  assert_int_equal(b.fabric.stalled(), 1);
  assert_false(b.fabric.has_work());  // nothing to do until the peer posts
  assert_int_equal(b.c[0].blk(0)->state.value, kEngineBusy);
  b.fabric.run_pass();
  b.fabric.run_pass();
  assert_int_equal(b.c[0].stats(0).credit_stalls, 1);
  // The slots were taken out of the ring at once.
  assert_int_equal(b.c[0].blk(0)->sq_cons.value, 2);
  b.c[1].post(1, kDst, 8192, 20);
  assert_true(b.fabric.has_work());
  b.drain();
  assert_true(b.c[0].send_done(0, &s));
  assert_int_equal(s.cookie, 10);
  assert_int_equal(s.status, kLinkOk);
  assert_true(b.c[1].recv_done(1, &r));
  assert_memory_equal(b.c[1].hbm(kDst), b.c[0].hbm(kSrc), 5000);
  // The second send stalls in turn.
  assert_false(b.c[0].send_done(0, &s));
  assert_int_equal(b.c[0].stats(0).credit_stalls, 2);
  b.c[1].post(1, kDst, 8192, 21);
  b.drain();
  assert_true(b.c[0].send_done(0, &s));
  assert_int_equal(s.cookie, 11);
  assert_int_equal(b.fabric.stalled(), 0);
  assert_int_equal(b.c[0].blk(0)->state.value, kEngineIdle);
}

void test_link_reset_completes_waiting_sends_with_peer_reset(void**) {
  Board b;
  b.c[0].send(0, kSrc, 100, 1, 1, 1, 30, 0);
  b.c[0].send(0, kSrc, 100, 1, 1, 1, 31, 0);
  b.drain();
  assert_int_equal(b.fabric.stalled(), 1);
  b.c[1].post(1, kDst, 4096, 1);  // posted, then the chip resets before a pass
  b.fabric.begin_reset(1);
  LinkCompletion s{};
  assert_true(b.c[0].send_done(0, &s));
  assert_int_equal(s.cookie, 30);
  assert_int_equal(s.status, kLinkPeerReset);
  assert_true(b.c[0].send_done(0, &s));
  assert_int_equal(s.cookie, 31);
  assert_int_equal(s.status, kLinkPeerReset);
  // The reset chip's blocks are zero and nothing of it moves while in reset.
  assert_int_equal(b.c[1].blk(1)->rq_prod.value, 0);
  assert_int_equal(b.c[1].blk(1)->config.state, kLinkStateDown);
  assert_int_equal(one_send(b, 0, kSrc, 100, 1, 1), kLinkPeerReset);
  b.fabric.end_reset(1);
  // Out of reset the port is down until its fw trains it again.
  assert_int_equal(one_send(b, 0, kSrc, 100, 1, 1), kLinkDown);
  Chip& c1 = b.c[1];
  c1.rq_p[1] = c1.rcq_c[1] = 0;
  c1.cfg_gen[1] = 0;
  c1.up(1);
  c1.post(1, kDst, 4096, 2);
  assert_int_equal(one_send(b, 0, kSrc, 100, 1, 1), kLinkOk);
  // The sender's own reset forgets its waiting sends with its queues.
  b.c[0].send(0, kSrc, 100, 1, 1, 1, 40, 0);
  b.drain();
  assert_int_equal(b.fabric.stalled(), 1);
  b.fabric.begin_reset(0);
  assert_int_equal(b.fabric.stalled(), 0);
  assert_int_equal(b.c[0].blk(0)->scq_prod.value, 0);
  assert_int_equal(b.c[0].blk(0)->sq_cons.value, 0);
  b.fabric.end_reset(0);
  assert_true(b.c[0].mem.id()->capabilities & kCapLinkEngines);
}

void test_link_config_refusals_name_the_field(void**) {
  Board b;
  const struct {
    uint32_t gtps, width;
    uint64_t ber;
    uint32_t state;
  } bad[] = {{0, 16, 0, 1}, {129, 16, 0, 1}, {32, 3, 0, 1}, {32, 32, 0, 1}, {32, 16, kLinkBerScale + 1, 1},
             {32, 16, 0, 2}};
  for (const auto& c : bad) {
    b.c[0].up(0, c.gtps, c.width, c.ber, 1, c.state);
    b.drain();
    assert_int_equal(b.c[0].blk(0)->config_ack, b.c[0].cfg_gen[0]);
    assert_int_equal(b.c[0].blk(0)->config_status, kEngineBadConfig | (kFieldLink << 8));
    ErrorRecord e;
    assert_true(b.c[0].next_error(&e));
    assert_int_equal(e.code, kEngineBadConfig);
    assert_int_equal(e.detail, kFieldLink);
    assert_int_equal(e.source, kSourceLink);
    b.c[1].post(1, kDst, 4096, 1);
    assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkDown);
  }
  b.c[0].up(0, 8, 4);
  b.drain();
  assert_int_equal(b.c[0].blk(0)->config_status, kEngineOk);
  assert_int_equal(one_send(b, 0, kSrc, 64, 1, 1), kLinkOk);
}

void test_link_index_breaches_latch_the_ring(void**) {
  Board b;
  hostif::store_release(&b.c[0].blk(0)->sq_prod, kLinkSendDepth + 1);
  b.drain();
  assert_int_equal(b.c[0].blk(0)->error.value, dma::kQueueSqIndexJump);
  ErrorRecord e;
  assert_true(b.c[0].next_error(&e));
  assert_int_equal(e.code, kEngineQueueBroken);
  assert_int_equal(e.detail, dma::kQueueSqIndexJump);
  assert_int_equal(b.c[0].blk(0)->sq_cons.value, 0);
  // A receiver whose ring broke fails the send aimed at it instead of stalling it.
  hostif::store_release(&b.c[2].blk(0)->rq_prod, kLinkRecvDepth + 5);
  b.c[0].send(2, kSrc, 64, 2, 0, 1, 50, 0);
  b.drain();
  LinkCompletion s{};
  assert_true(b.c[0].send_done(2, &s));
  assert_int_equal(s.status, kLinkPeerFault);
  assert_int_equal(b.c[2].blk(0)->error.value, dma::kQueueSqIndexJump);
}

void test_link_wiring_from_the_board_topology(void**) {
  Chip c[2];
  LinkFabric f;
  std::string err;
  for (uint32_t i = 0; i < 2; ++i) assert_true(f.attach(i, c[i].mem, c[i].sig, c[i].log, 2, &err));
  auto t = std::make_unique<board::Topology>();
  auto link = [&](uint32_t idx, board::EndKind ka, uint32_t ia, uint32_t pa, board::EndKind kb, uint32_t ib,
                  uint32_t pb) {
    board::Link& l = t->links[t->link_count++];
    l.index = idx;
    l.a = {ka, ia, pa};
    l.b = {kb, ib, pb};
  };
  link(0, board::EndKind::kChip, 0, 1, board::EndKind::kChip, 1, 0);
  link(1, board::EndKind::kChip, 0, 0, board::EndKind::kSwitch, 0, 3);  // a switch port: unwired here
  link(2, board::EndKind::kChip, 1, 1, board::EndKind::kChip, 5, 0);    // chip 5 not attached
  assert_true(f.wire_topology(*t, &err));
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t p = 0; p < 2; ++p) c[i].up(p);
  c[1].post(0, kDst, 4096, 1);
  c[0].send(1, kSrc, 64, 1, 0, 1, 1, 0);
  c[0].send(0, kSrc, 64, 0, 0, 1, 2, 0);
  c[1].send(1, kSrc, 64, 5, 0, 1, 3, 0);
  while (f.run_pass()) {
  }
  LinkCompletion s{};
  assert_true(c[0].send_done(1, &s));
  assert_int_equal(s.status, kLinkOk);
  assert_true(c[0].send_done(0, &s));
  assert_int_equal(s.status, kLinkUnwired);
  assert_true(c[1].send_done(1, &s));
  assert_int_equal(s.status, kLinkUnwired);
  // A topology naming a port twice is refused.
  link(3, board::EndKind::kChip, 0, 1, board::EndKind::kChip, 1, 1);
  LinkFabric g;
  for (uint32_t i = 0; i < 2; ++i) assert_true(g.attach(i, c[i].mem, c[i].sig, c[i].log, 2, &err));
  assert_false(g.wire_topology(*t, &err));
  assert_non_null(strstr(err.c_str(), "wired already"));
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void test_link_fabric_thread_sleeps_on_doorbells(void**) {
  Board b;
  int db[2] = {eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  assert_true(db[0] >= 0 && db[1] >= 0);
  LinkFabricThread t(b.fabric);
  std::string err;
  assert_true(t.start({db[0], db[1]}, &err));
  const uint64_t one = 1;
  fill(b.c[0].hbm(kSrc), 3000, 8);
  b.c[0].send(0, kSrc, 3000, 1, 1, 1, 60, 0);
  assert_int_equal(write(db[0], &one, 8), 8);
  // Idle: the send waits for a buffer; the thread sleeps (few wake-ups over 50 ms).
  usleep(50000);
  const uint64_t idle = t.wakeups();
  usleep(50000);
  assert_int_equal(t.wakeups(), idle);
  assert_true(idle <= 3);
  b.c[1].post(1, kDst, 4096, 61);
  assert_int_equal(write(db[1], &one, 8), 8);
  LinkCompletion s{};
  const uint64_t deadline = now_ns() + 5000000000ull;
  while (hostif::load_acquire(&b.c[0].blk(0)->scq_prod) == 0 && now_ns() < deadline) usleep(1000);
  assert_true(b.c[0].send_done(0, &s));
  assert_int_equal(s.status, kLinkOk);
  assert_memory_equal(b.c[1].hbm(kDst), b.c[0].hbm(kSrc), 3000);
  t.stop();
  close(db[0]);
  close(db[1]);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_modeled_time_follows_speed_width_frames_and_replays),
      cmocka_unit_test(test_link_attach_publishes_capability_and_zeroes_blocks),
      cmocka_unit_test(test_link_send_is_bit_exact_and_completes_both_sides),
      cmocka_unit_test(test_link_send_refusals_have_their_named_status),
      cmocka_unit_test(test_link_buffer_too_small_and_bad_buffers_complete_both_sides),
      cmocka_unit_test(test_link_mpu_faults_on_either_side_are_named_and_recorded),
      cmocka_unit_test(test_link_ber_replays_are_counted_timed_and_the_data_is_correct),
      cmocka_unit_test(test_link_ber_of_one_exhausts_replays_with_a_named_status),
      cmocka_unit_test(test_link_send_without_a_posted_buffer_waits_and_counts_one_credit_stall),
      cmocka_unit_test(test_link_reset_completes_waiting_sends_with_peer_reset),
      cmocka_unit_test(test_link_config_refusals_name_the_field),
      cmocka_unit_test(test_link_index_breaches_latch_the_ring),
      cmocka_unit_test(test_link_wiring_from_the_board_topology),
      cmocka_unit_test(test_link_fabric_thread_sleeps_on_doorbells),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
