// Host tests of vtrn-hw's board link fabric (hw/src/board_links.cpp) with two
// real ChipHw over memfds, no QEMU: the board DT (vtrn-dev2.dtb, argv[1])
// decides the ports and the wires (chip 0 port 0 <-> chip 1 port 1, chip 1
// port 0 <-> chip 0 port 1, ports 2 and 3 unwired). Each chip's engine
// function has a fake QEMU peer that takes the ivshmem handshake, so the
// interrupts the fabric raises are read from the very eventfds QEMU would
// turn into MSI-X; the doorbells are written to the eventfds QEMU writes.
// This test plays both firmwares: MPU windows, LinkConfig, posted buffers,
// send descriptors, as firmware/links does over hal/link.
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/drv/fd.h"
#include "vtrn/hostif.h"
#include "vtrn/hw/board_links.h"
#include "vtrn/seqlock.h"

extern "C" {
#include <cmocka.h>
}

using namespace vtrn;
using namespace vtrn::engine;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 32ull << 20;
constexpr uint64_t kBar2Size = 4ull << 20;
constexpr int kGiveUpMs = 5000;

std::vector<uint8_t> g_dtb;

void ring(int fd) {
  const uint64_t one = 1;
  assert_int_equal(write(fd, &one, sizeof one), sizeof one);
}

// Interrupts pending on `fd` (read and cleared); waits up to kGiveUpMs for one.
uint64_t wait_irq(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, kGiveUpMs) != 1) return 0;
  uint64_t v = 0;
  assert_int_equal(read(fd, &v, sizeof v), sizeof v);
  return v;
}

#define EXPECT_IRQ(chip, port, what)                                                                  \
  do {                                                                                                \
    if (wait_irq((chip)->irq_fd(port)) == 0)                                                          \
      fail_msg("no interrupt on chip %u vector kVectorLink0 + %u (%s) within %d ms", (chip)->id, port, \
               what, kGiveUpMs);                                                                      \
  } while (0)

// Interrupts pending now, without waiting.
uint64_t pending_irqs(int fd) {
  uint64_t v = 0;
  return read(fd, &v, sizeof v) == ssize_t(sizeof v) ? v : 0;
}

// One ivshmem protocol message (docs/specs/ivshmem-spec.rst) with its fd.
int64_t recv_msg(int sock, int* fd) {
  uint8_t bytes[8];
  iovec iov{bytes, sizeof bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  assert_int_equal(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC), 8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(bytes[i]) << (8 * i);
  *fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return int64_t(v);
}

template <typename T>
bool until(T done) {
  for (int i = 0; i < kGiveUpMs; ++i) {
    if (done()) return true;
    usleep(1000);
  }
  return done();
}

struct Chip {
  char dir[40] = "/tmp/vtrn-board-links-XXXXXX";
  uint32_t id;
  drv::Mapping ram;
  drv::UniqueFd doorbell, host_irq, qemu;
  std::vector<drv::UniqueFd> irq;  // the chip's own vector eventfds, as QEMU holds them
  hw::ChipHw hw;
  uint32_t sq_p[kMaxLinkPorts] = {}, rq_p[kMaxLinkPorts] = {}, scq_c[kMaxLinkPorts] = {},
           rcq_c[kMaxLinkPorts] = {}, cfg_gen[kMaxLinkPorts] = {};

  explicit Chip(uint32_t chip_id) : id(chip_id) {
    assert_non_null(mkdtemp(dir));
    const int ram_fd = memfd_create("ram", MFD_CLOEXEC), bar2_fd = memfd_create("bar2", MFD_CLOEXEC);
    assert_int_equal(ftruncate(ram_fd, kRamSize), 0);
    assert_int_equal(ftruncate(bar2_fd, kBar2Size), 0);
    assert_true(ram.map(ram_fd, kRamSize).ok());
    doorbell.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    host_irq.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    hw::ChipFds f;
    f.id = chip_id;
    f.ram_fd = ram_fd;
    f.ram_base = kRamBase;
    f.bar2_fd = bar2_fd;
    f.doorbell_fd = dup(doorbell.get());
    f.host_irq_fd = dup(host_irq.get());
    f.socket = std::string(dir) + "/engines.sock";
    hw::EngineProps props;
    props.dma_engines = 1;
    props.tensor_engines = 0;
    props.dma_bytes_per_s = 100ull * 1000000000ull;
    std::string err;
    assert_true(hw.start(f, props, 0, &err));
  }
  ~Chip() {
    hw.stop();
    unlink((std::string(dir) + "/engines.sock").c_str());
    rmdir(dir);
  }

  // Plays QEMU's side of the handshake and keeps the chip's eventfds.
  void connect_qemu() {
    qemu.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/engines.sock", dir);
    assert_int_equal(connect(qemu.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string err;
    assert_true(hw.accept_peer(&err));
    int fd = -1;
    assert_int_equal(recv_msg(qemu.get(), &fd), drv::kIvshmemProtocolVersion);
    assert_int_equal(recv_msg(qemu.get(), &fd), hostif::kChipPeerId);
    assert_int_equal(recv_msg(qemu.get(), &fd), -1);
    close(fd);
    for (uint32_t v = 0; v < kVectorCount; ++v) {
      assert_int_equal(recv_msg(qemu.get(), &fd), hostif::kHostPeerId);
      close(fd);
    }
    for (uint32_t v = 0; v < kVectorCount; ++v) {
      assert_int_equal(recv_msg(qemu.get(), &fd), hostif::kChipPeerId);
      irq.emplace_back(fd);
    }
  }

  // After a chip reset: the fw's cursors start again at 0, as the blocks do.
  void restart() {
    for (uint32_t p = 0; p < kMaxLinkPorts; ++p) sq_p[p] = rq_p[p] = scq_c[p] = rcq_c[p] = cfg_gen[p] = 0;
  }

  const IdBlock& idb() { return *hw.memory().id(); }
  LinkEngineBlock* blk(uint32_t p) {
    return reinterpret_cast<LinkEngineBlock*>(hw.memory().region + link_engine_offset(p));
  }
  uint8_t* hbm(uint64_t addr) { return ram.data() + (addr - kRamBase); }
  int irq_fd(uint32_t p) { return irq[kVectorLink0 + p].get(); }

  // One MPU window over all of HBM, published the way the fw does (bank,
  // generation, control doorbell); returns once every link port acked it.
  void mpu_all() {
    MpuBlock* b = hw.memory().mpu();
    const uint32_t gen = b->header.generation.value + 1;
    b->bank[gen & 1][0] = MpuWindow{kRamBase, kRamSize, kMpuValid, 1, 0};
    b->bank_count[gen & 1] = 1;
    b->header.count.value = 1;
    hostif::store_release(&b->header.generation, gen);
    ring(hw.control_fd());
    hw.control_vector();  // what vtrn-hw's main loop does on that doorbell
    for (uint32_t p = 0; p < idb().link_ports; ++p) {
      if (!until([&] { return hostif::load_acquire(&blk(p)->mpu_ack) == gen; }))
        fail_msg("chip %u link port %u: MPU generation %u not acknowledged (mpu_ack %u)", id, p, gen,
                 hostif::load_acquire(&blk(p)->mpu_ack));
    }
  }
  // Trains port p (LinkConfig up) and arms its interrupts.
  void up(uint32_t p) {
    LinkConfig& c = blk(p)->config;
    c.state = kLinkStateUp;
    c.speed_gtps = 32;
    c.width = 16;
    hostif::store_release(&blk(p)->irq_armed, 1);
    __atomic_store_n(&c.config_gen, ++cfg_gen[p], __ATOMIC_RELEASE);
    ring(hw.link_doorbell_fd(p));
    if (!until([&] { return __atomic_load_n(&blk(p)->config_ack, __ATOMIC_ACQUIRE) == cfg_gen[p]; }))
      fail_msg("chip %u link port %u: LinkConfig %u not acknowledged", id, p, cfg_gen[p]);
    assert_int_equal(blk(p)->config_status, kEngineOk);
  }
  void send(uint32_t p, uint64_t addr, uint64_t len, uint32_t dchip, uint32_t dport, uint32_t tag, uint64_t cookie) {
    LinkSendDescriptor& d = blk(p)->sq[sq_p[p] % kLinkSendDepth];
    d = LinkSendDescriptor{};
    d.addr = addr;
    d.length = len;
    d.dest_chip = dchip;
    d.dest_port = dport;
    d.tag = tag;
    d.flags = kLinkIrq;
    d.cookie = cookie;
    hostif::store_release(&blk(p)->sq_prod, ++sq_p[p]);
    ring(hw.link_doorbell_fd(p));
  }
  void post(uint32_t p, uint64_t addr, uint64_t len, uint64_t cookie) {
    blk(p)->rq[rq_p[p] % kLinkRecvDepth] = LinkRecvBuffer{addr, len, cookie, kLinkIrq, 0};
    hostif::store_release(&blk(p)->rq_prod, ++rq_p[p]);
    ring(hw.link_doorbell_fd(p));
  }
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
};

struct Board {
  std::unique_ptr<Chip> c0 = std::make_unique<Chip>(0), c1 = std::make_unique<Chip>(1);
  hw::BoardLinks links;
  Board() {
    std::string err;
    if (!links.start(g_dtb.data(), g_dtb.size(), {&c0->hw, &c1->hw}, &err)) fail_msg("BoardLinks: %s", err.c_str());
    c0->connect_qemu();
    c1->connect_qemu();
  }
  ~Board() { links.stop(); }
  // Both ends of both wires up, MPU over all HBM.
  void train() {
    for (Chip* c : {c0.get(), c1.get()}) {
      c->mpu_all();
      c->up(0);
      c->up(1);
    }
  }
};

void test_every_port_is_an_engine_wired_as_the_board_dt_says(void**) {
  Board b;
  assert_true(b.links.running());
  assert_int_equal(b.links.ports(), 8);
  assert_int_equal(b.links.wires(), 2);
  for (Chip* c : {b.c0.get(), b.c1.get()}) {
    assert_true(c->idb().capabilities & kCapLinkEngines);
    assert_int_equal(c->idb().link_ports, 4);
    assert_int_equal(c->idb().abi_minor, 4);
  }
}

void test_a_send_lands_bit_exact_in_the_peers_posted_buffer_with_both_interrupts(void**) {
  Board b;
  b.train();
  constexpr uint64_t kLen = (1u << 20) + 123;  // not a whole number of frames
  constexpr uint64_t kSrc = kRamBase + (4u << 20), kDst = kRamBase + (8u << 20), kGuard = 4096;
  std::mt19937 rng(14);
  for (uint64_t i = 0; i < kLen; ++i) b.c0->hbm(kSrc)[i] = uint8_t(rng());
  memset(b.c1->hbm(kDst), 0xa5, kLen + kGuard);
  b.c1->post(1, kDst, kLen + kGuard, 0xbeef);
  // The buffer alone completes nothing and interrupts nobody.
  usleep(20000);
  assert_int_equal(pending_irqs(b.c1->irq_fd(1)), 0);
  b.c0->send(0, kSrc, kLen, 1, 1, 77, 0xc0ffee);
  EXPECT_IRQ(b.c0, 0, "the send completion");
  EXPECT_IRQ(b.c1, 1, "the receive completion");
  LinkCompletion s{}, r{};
  assert_true(b.c0->send_done(0, &s));
  assert_true(b.c1->recv_done(1, &r));
  assert_int_equal(s.status, kLinkOk);
  assert_int_equal(s.cookie, 0xc0ffee);
  assert_int_equal(s.bytes, kLen);
  assert_int_equal(s.tag, 77);
  assert_int_equal(s.peer_chip, 1);
  assert_int_equal(s.peer_port, 1);
  assert_true(s.modeled_ns > hw::link_modeled_ns(kLen, 32, 16, 0) - 1);
  assert_int_equal(r.status, kLinkOk);
  assert_int_equal(r.cookie, 0xbeef);
  assert_int_equal(r.bytes, kLen);
  assert_int_equal(r.tag, 77);
  assert_int_equal(r.peer_chip, 0);
  assert_int_equal(r.peer_port, 0);
  assert_memory_equal(b.c1->hbm(kDst), b.c0->hbm(kSrc), kLen);
  for (uint64_t i = kLen; i < kLen + kGuard; ++i) assert_int_equal(b.c1->hbm(kDst)[i], 0xa5);
  assert_int_equal(b.c0->stats(0).bytes_tx, kLen);
  assert_int_equal(b.c1->stats(1).bytes_rx, kLen);
  assert_int_equal(b.c0->stats(0).irqs, 1);
  assert_int_equal(b.c1->stats(1).irqs, 1);
  // Nothing else was interrupted: no other link vector fired on either chip.
  for (Chip* c : {b.c0.get(), b.c1.get()}) {
    for (uint32_t p = 0; p < 4; ++p) assert_int_equal(pending_irqs(c->irq_fd(p)), 0);
  }

  // The other wire, the other way: chip 1 port 0 -> chip 0 port 1.
  for (uint64_t i = 0; i < 4096; ++i) b.c1->hbm(kSrc)[i] = uint8_t(i * 13 + 1);
  b.c0->post(1, kDst, 4096, 2);
  b.c1->send(0, kSrc, 4096, 0, 1, 5, 6);
  EXPECT_IRQ(b.c0, 1, "the receive completion");
  EXPECT_IRQ(b.c1, 0, "the send completion");
  assert_true(b.c0->recv_done(1, &r));
  assert_int_equal(r.status, kLinkOk);
  assert_int_equal(r.peer_chip, 1);
  assert_int_equal(r.peer_port, 0);
  assert_memory_equal(b.c0->hbm(kDst), b.c1->hbm(kSrc), 4096);
}

void test_a_port_reaches_only_what_the_board_wires_it_to(void**) {
  Board b;
  b.train();
  b.c0->up(2);
  const uint64_t src = kRamBase + (1u << 20);
  b.c1->post(0, kRamBase + (2u << 20), 4096, 1);
  // Chip 0 port 0 is wired to chip 1 port 1, not port 0.
  b.c0->send(0, src, 64, 1, 0, 1, 10);
  // Port 2 has no link in the board DT.
  b.c0->send(2, src, 64, 1, 2, 1, 11);
  EXPECT_IRQ(b.c0, 0, "the wrong-peer send completion");
  EXPECT_IRQ(b.c0, 2, "the unwired send completion");
  LinkCompletion c{};
  assert_true(b.c0->send_done(0, &c));
  assert_int_equal(c.cookie, 10);
  assert_int_equal(c.status, kLinkWrongPeer);
  assert_true(b.c0->send_done(2, &c));
  assert_int_equal(c.cookie, 11);
  assert_int_equal(c.status, kLinkUnwired);
  // The buffer chip 1 posted on port 0 is still there, untaken.
  assert_int_equal(hostif::load_acquire(&b.c1->blk(0)->rq_cons), 0);
}

void test_a_chip_reset_completes_the_peers_waiting_send_and_readvertises_the_engines(void**) {
  Board b;
  b.train();
  // No buffer at chip 1: the send waits (a credit stall).
  b.c0->send(0, kRamBase, 4096, 1, 1, 3, 42);
  if (!until([&] { return b.c0->stats(0).credit_stalls == 1; })) fail_msg("the send to chip 1 never stalled");
  LinkCompletion c{};
  assert_false(b.c0->send_done(0, &c));
  b.c1->hw.reset();
  EXPECT_IRQ(b.c0, 0, "the waiting send, its peer reset");
  assert_true(b.c0->send_done(0, &c));
  assert_int_equal(c.cookie, 42);
  assert_int_equal(c.status, kLinkPeerReset);
  assert_int_equal(c.bytes, 0);
  // Chip 1 comes back with its link engines advertised and its ports down.
  if (!(b.c1->idb().capabilities & kCapLinkEngines)) fail_msg("chip 1 no longer advertises kCapLinkEngines after its reset");
  assert_int_equal(b.c1->idb().link_ports, 4);
  assert_int_equal(b.c1->blk(1)->config.state, kLinkStateDown);
  assert_int_equal(b.c1->blk(1)->rq_prod.value, 0);
  // Chip 1's firmware starts over; the wire works again.
  b.c1->restart();
  b.c1->mpu_all();
  b.c1->up(1);
  for (uint32_t i = 0; i < 256; ++i) b.c0->hbm(kRamBase)[i] = uint8_t(i ^ 0x5a);
  b.c1->post(1, kRamBase + (3u << 20), 256, 9);
  b.c0->send(0, kRamBase, 256, 1, 1, 4, 43);
  EXPECT_IRQ(b.c1, 1, "the receive after the reset");
  assert_true(b.c1->recv_done(1, &c));
  assert_int_equal(c.status, kLinkOk);
  assert_int_equal(c.cookie, 9);
  assert_memory_equal(b.c1->hbm(kRamBase + (3u << 20)), b.c0->hbm(kRamBase), 256);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BOARD.dtb (a board with chip 0 port 0 <-> chip 1 port 1)\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  g_dtb.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (g_dtb.empty()) {
    fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[1]);
    return 2;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_port_is_an_engine_wired_as_the_board_dt_says),
      cmocka_unit_test(test_a_send_lands_bit_exact_in_the_peers_posted_buffer_with_both_interrupts),
      cmocka_unit_test(test_a_port_reaches_only_what_the_board_wires_it_to),
      cmocka_unit_test(test_a_chip_reset_completes_the_peers_waiting_send_and_readvertises_the_engines),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
