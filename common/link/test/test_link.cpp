// Host unit tests of the link layer: two ports over one shared region with a
// fake clock. Training and negotiation, lane faults, absent and vanishing
// peers, NAK/replay under injected bit errors, error bursts, downgrade after
// failed retrains, power states, loopback, flow control, and the transport's
// own index and length checks.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <vector>

#include "link_rig.h"

using namespace linktest;

namespace {

const Capabilities kX4Gen3 = caps(LinkSpeed::k8GT, 4, 0xF);

void bring_up(Rig& r, const Capabilities& ca = kX4Gen3, const Capabilities& cb = kX4Gen3) {
  assert_true(r.attach_both(ca, cb));
  assert_true(r.run_until_both(LinkState::kL0, 5000));
}

// Streams `count` frames a->b to completion; fails the test on loss or damage.
void stream_all(Rig& r, Stream& s, uint32_t count, uint32_t max_steps) {
  for (uint32_t i = 0; i < max_steps && s.received < count; ++i) {
    s.pump(r.a, r.b, count);
    r.step();
  }
  s.pump(r.a, r.b, count);
  assert_int_equal(s.bad, 0);
  assert_int_equal(s.received, count);
}

void test_training_negotiates_common_speed_and_width(void**) {
  Rig r;
  bring_up(r, caps(LinkSpeed::k16GT, 8, 0xFF), caps(LinkSpeed::k8GT, 16, 0xFFFF));
  assert_int_equal(r.a.port.speed(), LinkSpeed::k8GT);
  assert_int_equal(r.b.port.speed(), LinkSpeed::k8GT);
  assert_int_equal(r.a.port.width(), 8);
  assert_int_equal(r.b.port.width(), 8);
  Counters c = r.a.port.counters();
  assert_int_equal(c.link_ups, 1);
  assert_int_equal(c.reason, LinkReason::kNone);
  assert_true(c.ts_sent > 0 && c.ts_received > 0);
  assert_int_equal(c.bandwidth_mbps, link_bytes_per_us(LinkSpeed::k8GT, 8));
  assert_true(c.time_in_state_ns[uint32_t(LinkState::kPolling)] > 0);
  Stream s;
  stream_all(r, s, 50, 2000);
}

void test_width_is_largest_power_of_two_of_common_good_lanes(void**) {
  assert_int_equal(negotiate_width(0xFF, 16, 0x7F, 16), 4);
  assert_int_equal(negotiate_width(0xFFFF, 16, 0xFFFF, 16), 16);
  assert_int_equal(negotiate_width(0x3, 16, 0x6, 16), 1);
  assert_int_equal(negotiate_width(0x1, 16, 0x2, 16), 0);
  assert_int_equal(negotiate_width(0xFF, 2, 0xFF, 16), 2);
}

void test_faulty_lane_gives_narrower_link(void**) {
  Rig r;
  // Lane 2 bad on A: 7 common good lanes train to x4.
  bring_up(r, caps(LinkSpeed::k8GT, 8, 0xFB), caps(LinkSpeed::k8GT, 8, 0xFF));
  assert_int_equal(r.a.port.width(), 4);
  // A lane failing at run time retrains the link narrower, without going down.
  for (uint32_t lane : {0u, 1u, 4u, 5u}) assert_int_equal(r.b.port.set_lane_good(lane, false), LinkStatus::kOk);
  assert_int_equal(r.b.port.set_lane_good(99, false), LinkStatus::kBadArgument);
  r.run(3);
  assert_true(r.run_until_both(LinkState::kL0, 5000));
  assert_int_equal(r.a.port.width(), 2);  // lanes 3, 6 and 7 remain common
  assert_int_equal(r.b.port.width(), 2);
  Counters cb = r.b.port.counters();
  assert_int_equal(cb.last_recovery, RecoveryCause::kLaneChange);
  assert_int_equal(cb.retrains, 1);
  assert_int_equal(cb.link_downs, 0);
  assert_int_equal(r.a.port.counters().last_recovery, RecoveryCause::kPeerRequest);
}

void test_no_common_lane_keeps_link_down_with_reason(void**) {
  Rig r;
  assert_true(r.attach_both(caps(LinkSpeed::k8GT, 2, 0x1), caps(LinkSpeed::k8GT, 2, 0x2)));
  r.run(2000);
  assert_false(r.a.port.up());
  assert_int_equal(r.a.port.counters().last_down, LinkReason::kNoCommonLanes);
  assert_int_equal(r.a.port.counters().link_ups, 0);
}

void test_absent_peer_stays_in_detect_then_trains_when_peer_appears(void**) {
  Rig r;
  assert_true(r.attach(r.a, 0, kX4Gen3, r.cfg_a));
  r.b.polled = false;
  r.run(2000);  // ten peer timeouts
  assert_int_equal(r.a.port.state(), LinkState::kDetect);
  assert_int_equal(r.a.port.reason(), LinkReason::kPeerAbsent);
  assert_int_equal(r.a.port.send("x", 1), LinkStatus::kDown);
  // A header that never advances is a silent peer, not a live one.
  assert_true(r.attach(r.b, 1, kX4Gen3, r.cfg_b));
  r.run(500);
  assert_int_equal(r.a.port.state(), LinkState::kDetect);
  assert_int_equal(r.a.port.reason(), LinkReason::kPeerSilent);
  r.b.polled = true;
  assert_true(r.run_until_both(LinkState::kL0, 5000));
  assert_int_equal(r.a.port.reason(), LinkReason::kNone);
}

void test_same_side_on_both_ends_is_reported_incompatible(void**) {
  Rig r;
  assert_true(r.attach(r.a, 0, kX4Gen3, r.cfg_a));
  // A second transport attached as side 0 shares A's header; side 1's header
  // claims side 0.
  ShmTransport bogus;
  assert_true(bogus.attach(r.region, Rig::kRegion, 0, sizeof(FrameHeader) + r.cfg_a.max_payload, 9));
  auto* hdr = reinterpret_cast<SideHeader*>(r.region + kSideHeaderBytes);
  hdr->magic = kRegionMagic;
  hdr->version = kRegionVersion;
  hdr->side = 0;
  r.b.polled = false;
  r.run(100);
  assert_int_equal(r.a.port.reason(), LinkReason::kPeerIncompatible);
}

void test_bit_errors_are_naked_replayed_and_all_data_arrives_in_order(void**) {
  Rig r;
  bring_up(r);
  r.a.port.inject_ber(2e-5, 42);
  Stream s;
  stream_all(r, s, 600, 200000);
  Counters ca = r.a.port.counters(), cb = r.b.port.counters();
  assert_true(ca.injected_bit_errors > 0);
  assert_true(cb.crc_errors > 0);
  assert_true(cb.crc_errors <= ca.injected_bit_errors);
  assert_true(cb.naks_sent > 0);
  assert_int_equal(ca.naks_received, cb.naks_sent);  // B's direction is clean
  assert_true(ca.replays > 0);
  assert_true(ca.replayed_frames > 0);
  assert_int_equal(ca.tx_frames, 600);
  assert_int_equal(cb.rx_frames, 600);
  assert_int_equal(ca.tx_bytes, cb.rx_bytes);
  assert_int_equal(ca.retrains, 0);  // burst threshold is out of reach here
  assert_int_equal(ca.link_downs + cb.link_downs, 0);
  // The same seed replays the same errors.
  Rig r2;
  bring_up(r2);
  r2.a.port.inject_ber(2e-5, 42);
  Stream s2;
  stream_all(r2, s2, 600, 200000);
  assert_int_equal(r2.a.port.counters().injected_bit_errors, ca.injected_bit_errors);
}

void test_error_burst_triggers_recovery_and_retrain(void**) {
  Rig r;
  r.cfg_b.burst_errors = 4;
  bring_up(r);
  r.a.port.inject_ber(1e-4, 7);
  Stream s;
  bool saw_recovery = false;
  for (int i = 0; i < 20000 && r.b.port.counters().retrains == 0; ++i) {
    s.pump(r.a, r.b, 400);
    r.step();
    saw_recovery |= r.b.port.state() == LinkState::kRecovery;
  }
  assert_true(saw_recovery);
  Counters cb = r.b.port.counters();
  assert_true(cb.retrains >= 1);
  assert_int_equal(cb.last_recovery, RecoveryCause::kErrorBurst);
  assert_true(cb.crc_errors >= 4);
  // With the line clean again the link retrains to L0 and nothing was lost.
  r.a.port.inject_ber(0, 0);
  stream_all(r, s, 400, 100000);
  assert_true(r.a.port.up() && r.b.port.up());
  assert_int_equal(r.a.port.counters().link_downs, 0);
  assert_int_equal(r.a.port.counters().tx_dropped, 0);
}

void test_repeated_failed_retrains_downgrade_speed_then_width(void**) {
  Rig r;
  r.cfg_b.burst_errors = 4;
  bring_up(r);
  r.a.port.inject_ber(1e-3, 3);
  Stream s;
  std::vector<std::pair<LinkSpeed, uint32_t>> seen;
  for (int i = 0; i < 400000; ++i) {
    s.pump(r.a, r.b, 1u << 30);
    r.step();
    if (r.b.port.up()) {
      auto cur = std::make_pair(r.b.port.speed(), r.b.port.width());
      if (seen.empty() || seen.back() != cur) seen.push_back(cur);
      if (cur.first == LinkSpeed::k2_5GT && cur.second == 1) break;
    }
  }
  // 8 GT/s x4 -> 5 -> 2.5, then x2 -> x1: speed first, then width.
  const std::vector<std::pair<LinkSpeed, uint32_t>> want = {
      {LinkSpeed::k8GT, 4}, {LinkSpeed::k5GT, 4}, {LinkSpeed::k2_5GT, 4},
      {LinkSpeed::k2_5GT, 2}, {LinkSpeed::k2_5GT, 1}};
  assert_int_equal(seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    assert_int_equal(seen[i].first, want[i].first);
    assert_int_equal(seen[i].second, want[i].second);
  }
  Counters cb = r.b.port.counters();
  assert_int_equal(cb.downgrades, 4);
  assert_true(cb.failed_retrains >= 8);
  // Downgrades stick until restored.
  r.a.port.inject_ber(0, 0);
  r.b.port.restore_capabilities();
  r.b.port.retrain();
  r.run(5);
  assert_true(r.run_until_both(LinkState::kL0, 20000));
  assert_int_equal(r.b.port.speed(), LinkSpeed::k8GT);
  assert_int_equal(r.b.port.width(), 4);
}

void test_peer_vanishing_mid_transfer_goes_recovery_then_detect(void**) {
  Rig r;
  bring_up(r);
  Stream s;
  for (int i = 0; i < 50; ++i) {
    s.pump(r.a, r.b, 1000);
    r.step();
  }
  r.b.polled = false;  // the peer chip stops dead
  bool saw_recovery = false;
  uint64_t start = r.now;
  while (r.a.port.state() != LinkState::kDetect && r.now - start < 10'000'000) {
    s.pump(r.a, r.b, 1000);
    r.step();
    saw_recovery |= r.a.port.state() == LinkState::kRecovery;
  }
  assert_true(saw_recovery);
  assert_int_equal(r.a.port.state(), LinkState::kDetect);
  // Bounded: peer timeout to notice, recovery timeout to give up, one step each.
  assert_true(r.now - start <= r.cfg_a.peer_timeout_ns + r.cfg_a.recovery_timeout_ns + 2 * r.step_ns);
  Counters ca = r.a.port.counters();
  assert_int_equal(ca.last_recovery, RecoveryCause::kPeerSilent);
  assert_int_equal(ca.reason, LinkReason::kPeerSilent);
  assert_int_equal(ca.link_downs, 1);
  assert_true(ca.tx_dropped > 0);
  assert_int_equal(ca.downgrades, 0);  // an absent peer is not a bad line
  assert_int_equal(r.a.port.send("x", 1), LinkStatus::kDown);
  // The peer comes back: the link trains again as a new session.
  r.b.polled = true;
  assert_true(r.run_until_both(LinkState::kL0, 20000));
  assert_int_equal(r.a.port.counters().link_ups, 2);
}

void test_peer_reattach_resets_link_and_retrains(void**) {
  Rig r;
  bring_up(r);
  assert_true(r.attach(r.b, 1, kX4Gen3, r.cfg_b));  // the peer chip rebooted
  r.run(3);
  assert_int_equal(r.a.port.counters().last_down, LinkReason::kPeerReset);
  assert_true(r.run_until_both(LinkState::kL0, 5000));
  Stream s;
  stream_all(r, s, 40, 5000);
}

void test_force_down_drops_both_ends_and_retrains(void**) {
  Rig r;
  bring_up(r);
  r.a.port.force_down();
  assert_int_equal(r.a.port.state(), LinkState::kDetect);
  assert_int_equal(r.a.port.reason(), LinkReason::kForcedDown);
  r.run(10);
  assert_false(r.a.port.up());
  assert_true(r.run_until_both(LinkState::kL0, 20000));
  assert_int_equal(r.a.port.counters().link_downs, 1);
  assert_int_equal(r.b.port.counters().link_downs, 1);
  assert_int_equal(r.b.port.counters().last_down, LinkReason::kPeerReset);
  assert_int_equal(r.a.port.counters().link_ups, 2);
}

void test_disabled_port_keeps_peer_in_detect(void**) {
  Rig r;
  bring_up(r);
  r.a.port.disable();
  r.run(1000);
  assert_int_equal(r.a.port.state(), LinkState::kDisabled);
  assert_int_equal(r.b.port.state(), LinkState::kDetect);
  assert_int_equal(r.b.port.reason(), LinkReason::kPeerDisabled);
  r.a.port.enable();
  assert_true(r.run_until_both(LinkState::kL0, 5000));
}

void test_retrain_during_transfer_keeps_every_frame_in_order(void**) {
  Rig r;
  bring_up(r);
  Stream s;
  for (int i = 0; i < 30; ++i) {
    s.pump(r.a, r.b, 300);
    r.step();
  }
  r.a.port.retrain();
  r.b.port.retrain();
  stream_all(r, s, 300, 50000);
  assert_int_equal(r.a.port.counters().retrains, 1);
  assert_int_equal(r.a.port.counters().link_downs, 0);
}

void test_receiver_that_does_not_read_stops_sender_without_errors(void**) {
  Rig r;
  bring_up(r);
  std::vector<uint8_t> p = payload(0, 100);
  uint32_t accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    while (r.a.port.send(p.data(), 100) == LinkStatus::kOk) ++accepted;
    r.step();
  }
  // B holds rx_frames; A holds replay_frames unacknowledged; nothing else moves.
  assert_int_equal(r.b.port.rx_pending(), r.cfg_b.rx_frames);
  assert_int_equal(accepted, r.cfg_b.rx_frames + r.cfg_a.replay_frames);
  Counters ca = r.a.port.counters();
  assert_int_equal(ca.retrains, 0);
  assert_int_equal(r.b.port.counters().crc_errors, 0);
  // Reading frees credit and the rest flows.
  uint8_t buf[2048];
  uint32_t len = 0, got = 0;
  for (int i = 0; i < 3000 && got < accepted; ++i) {
    while (r.b.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) ++got;
    r.step();
  }
  assert_int_equal(got, accepted);
}

void test_idle_link_enters_l0s_then_l1_and_traffic_wakes_it(void**) {
  Rig r;
  r.cfg_a.l0s_idle_ns = r.cfg_b.l0s_idle_ns = 20'000;
  r.cfg_a.l1_idle_ns = r.cfg_b.l1_idle_ns = 100'000;
  bring_up(r);
  r.run(60);
  assert_int_equal(r.a.port.state(), LinkState::kL0s);
  r.run(200);
  assert_int_equal(r.a.port.state(), LinkState::kL1);
  assert_int_equal(r.b.port.state(), LinkState::kL1);
  Stream s;
  stream_all(r, s, 20, 20000);
  Counters ca = r.a.port.counters();
  assert_true(ca.l0s_entries >= 1);
  assert_true(ca.l1_entries >= 1);
  assert_true(ca.l1_exits >= 1);
  assert_int_equal(ca.retrains, 0);  // waking from L1 is not a retrain
  assert_true(ca.time_in_state_ns[uint32_t(LinkState::kL1)] > 0);
  // L0s left on traffic alone (no L1 configured on B).
  Rig q;
  q.cfg_a.l0s_idle_ns = q.cfg_b.l0s_idle_ns = 20'000;
  bring_up(q);
  q.run(60);
  assert_int_equal(q.a.port.state(), LinkState::kL0s);
  assert_int_equal(q.a.port.send("hello", 5), LinkStatus::kOk);
  q.step();
  assert_int_equal(q.a.port.counters().l0s_exits, 1);
}

void test_loopback_slave_echoes_master_frames(void**) {
  Rig r;
  bring_up(r);
  assert_int_equal(r.b.port.exit_loopback(), LinkStatus::kBadState);
  assert_int_equal(r.a.port.enter_loopback(), LinkStatus::kOk);
  r.run(3);
  assert_int_equal(r.b.port.state(), LinkState::kLoopback);
  assert_false(r.b.port.loopback_master());
  for (uint32_t n = 0; n < 5; ++n) {
    std::vector<uint8_t> p = payload(n, 300);
    assert_int_equal(r.a.port.send(p.data(), 300), LinkStatus::kOk);
  }
  r.run(5);
  uint8_t buf[2048];
  uint32_t len = 0;
  for (uint32_t n = 0; n < 5; ++n) {
    assert_int_equal(r.a.port.receive(buf, sizeof(buf), &len), LinkStatus::kOk);
    std::vector<uint8_t> p = payload(n, 300);
    assert_int_equal(len, 300);
    assert_memory_equal(buf, p.data(), 300);
  }
  assert_int_equal(r.b.port.receive(buf, sizeof(buf), &len), LinkStatus::kEmpty);
  assert_int_equal(r.a.port.exit_loopback(), LinkStatus::kOk);
  assert_true(r.run_until_both(LinkState::kL0, 5000));
  Stream s;
  stream_all(r, s, 20, 5000);
}

void test_held_frame_stays_queued_and_holds_back_the_sender(void**) {
  Rig r;
  bring_up(r);
  const uint32_t cap = r.cfg_b.rx_frames;
  for (uint32_t n = 0; n < cap + 4; ++n) {
    std::vector<uint8_t> p = payload(n, 100);
    if (r.a.port.send(p.data(), 100) != LinkStatus::kOk) break;
  }
  r.run(20);
  // Nobody reads b: it holds rx_frames frames, the rest stay with a.
  assert_int_equal(r.b.port.rx_pending(), cap);
  const uint8_t* f = nullptr;
  uint32_t len = 0;
  assert_int_equal(r.b.port.peek(&f, &len), LinkStatus::kOk);
  std::vector<uint8_t> p0 = payload(0, 100);
  assert_int_equal(len, 100);
  assert_memory_equal(f, p0.data(), 100);
  assert_int_equal(r.b.port.peek(&f, &len), LinkStatus::kOk);  // still the same frame
  assert_memory_equal(f, p0.data(), 100);
  assert_int_equal(r.b.port.discard(), LinkStatus::kOk);
  assert_int_equal(r.b.port.peek(&f, &len), LinkStatus::kOk);
  std::vector<uint8_t> p1 = payload(1, 100);
  assert_memory_equal(f, p1.data(), 100);
  assert_int_equal(r.b.port.counters().crc_errors, 0);
}

// Fake-clock nanoseconds to move `count` 1000-byte frames a->b.
uint64_t paced_transfer_ns(const Capabilities& c, uint32_t count) {
  Rig r;
  r.cfg_a.model_bandwidth = r.cfg_b.model_bandwidth = true;
  r.step_ns = 100;
  bring_up(r, c, c);
  Stream s;
  const uint64_t start = r.now;
  while (s.received < count && r.now - start < 100'000'000) {
    while (s.sent < count) {
      std::vector<uint8_t> p = payload(s.sent, 1000);
      if (r.a.port.send(p.data(), 1000) != LinkStatus::kOk) break;
      ++s.sent;
    }
    uint8_t buf[2048];
    uint32_t len;
    while (r.b.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) ++s.received;
    r.step();
  }
  assert_int_equal(s.received, count);
  return r.now - start;
}

void test_bandwidth_model_paces_data_to_speed_times_width(void**) {
  // 2.5 GT/s x1 carries 250 bytes/us after 8b/10b: 200 frames of ~1 KB need
  // about 820 us; x4 about a quarter of that.
  const uint64_t x1 = paced_transfer_ns(caps(LinkSpeed::k2_5GT, 1, 0x1), 200);
  const uint64_t x4 = paced_transfer_ns(caps(LinkSpeed::k2_5GT, 4, 0xF), 200);
  const uint64_t wire = 200ull * (1000 + sizeof(FrameHeader)) * 1000 / 250;
  assert_true(x1 >= wire * 95 / 100);
  assert_true(x1 <= wire * 120 / 100);
  assert_true(x4 * 3 < x1);
  assert_true(x4 * 5 > x1);
}

void test_send_rejects_oversized_payload(void**) {
  Rig r;
  bring_up(r);
  std::vector<uint8_t> big(r.cfg_a.max_payload + 1);
  assert_int_equal(r.a.port.send(big.data(), uint32_t(big.size())), LinkStatus::kTooLarge);
  uint8_t small[4];
  uint32_t len;
  assert_int_equal(r.a.port.send(big.data(), 100), LinkStatus::kOk);
  r.run(5);
  assert_int_equal(r.b.port.receive(small, sizeof(small), &len), LinkStatus::kTooLarge);
}

void test_init_rejects_bad_configuration(void**) {
  Rig r;
  ShmTransport t;
  assert_true(t.attach(r.region, Rig::kRegion, 0, 2048, 1));
  std::vector<uint64_t> st(Port::storage_bytes(test_config()) / 8 + 1);
  Port p;
  Config c = test_config();
  auto* mem = reinterpret_cast<uint8_t*>(st.data());
  assert_int_equal(p.init(&t, caps(LinkSpeed::k8GT, 0, 0), c, mem, st.size() * 8, 0), LinkStatus::kBadArgument);
  assert_int_equal(p.init(&t, caps(LinkSpeed::k8GT, 17, 0), c, mem, st.size() * 8, 0), LinkStatus::kBadArgument);
  assert_int_equal(p.init(&t, kX4Gen3, c, mem, 16, 0), LinkStatus::kBadArgument);
  c.max_payload = 4096;  // larger than the transport's frames
  assert_int_equal(p.init(&t, kX4Gen3, c, mem, st.size() * 8, 0), LinkStatus::kBadArgument);
  c = test_config();
  assert_int_equal(p.init(&t, kX4Gen3, c, mem, st.size() * 8, 0), LinkStatus::kOk);
  // The compile-time storage the firmware uses is exactly what init() asks for.
  static PortStorage<1024, 8, 8> fixed;
  assert_int_equal(sizeof(fixed.bytes), Port::storage_bytes(c));
  assert_int_equal(p.init(&t, kX4Gen3, c, fixed.bytes, sizeof(fixed.bytes), 0), LinkStatus::kOk);
}

// Transport

struct TwoRings {
  static constexpr size_t kBytes = 64 * 1024;
  uint8_t* mem = static_cast<uint8_t*>(aligned_alloc(64, kBytes));
  ShmTransport x, y;
  TwoRings() {
    memset(mem, 0, kBytes);
    assert_true(x.attach(mem, kBytes, 0, 1000, 1));
    assert_true(y.attach(mem, kBytes, 1, 1000, 2));
  }
  ~TwoRings() { free(mem); }
  SideHeader* hx() { return reinterpret_cast<SideHeader*>(mem); }
  uint8_t* ring_x() { return mem + 2 * kSideHeaderBytes; }
};

bool push(ShmTransport& t, const char* s) {
  TransportStatus st;
  uint8_t* p = t.tx_reserve(uint32_t(strlen(s)), &st);
  if (p == nullptr) return false;
  memcpy(p, s, strlen(s));
  t.tx_commit(uint32_t(strlen(s)));
  return true;
}

void test_region_geometry_fits_and_rejects_small_regions(void**) {
  RegionGeometry g = region_geometry(64 * 1024, 1000);
  assert_int_equal(g.slot_size, 1024);
  assert_int_equal(g.max_frame, 1016);
  assert_int_equal(g.slot_count, 16);
  assert_true(2 * kSideHeaderBytes + 2 * g.slot_count * g.slot_size <= 64 * 1024);
  assert_int_equal(region_geometry(4096, 4096).slot_count, 0);
  assert_int_equal(region_geometry(100, 8).slot_count, 0);
  ShmTransport t;
  uint8_t* mem = static_cast<uint8_t*>(aligned_alloc(64, 8192));
  assert_false(t.attach(mem + 8, 4096, 0, 100, 1));  // misaligned
  assert_false(t.attach(mem, 8192, 2, 100, 1));      // no such side
  free(mem);
}

void test_transport_moves_frames_in_order_and_reports_full(void**) {
  TwoRings w;
  uint32_t n = 0;
  while (push(w.x, "abc")) ++n;
  assert_int_equal(n, w.x.geometry().slot_count);
  TransportStatus st;
  assert_null(w.x.tx_reserve(3, &st));
  assert_int_equal(st, TransportStatus::kFull);
  assert_null(w.x.tx_reserve(5000, &st));
  assert_int_equal(st, TransportStatus::kTooLarge);
  char buf[2000];
  uint32_t len;
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kOk);
  assert_int_equal(len, 3);
  assert_memory_equal(buf, "abc", 3);
  assert_int_equal(w.x.tx_free(), 1);
  assert_true(push(w.x, "xyz"));
  w.y.rx_flush();
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kEmpty);
  assert_int_equal(w.y.peer().fault, PeerFault::kNone);
}

void test_transport_rejects_bad_slot_length_and_moves_on(void**) {
  TwoRings w;
  assert_true(push(w.x, "one"));
  assert_true(push(w.x, "two"));
  reinterpret_cast<SlotHeader*>(w.ring_x())->length = 0xFFFFFF00u;
  char buf[2000];
  uint32_t len;
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kBadLength);
  assert_int_equal(len, 0);
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kOk);
  assert_memory_equal(buf, "two", 3);
  assert_true(push(w.x, "big"));
  assert_int_equal(w.y.rx(buf, 2, &len), TransportStatus::kTooLarge);
}

void test_transport_resyncs_after_index_jump(void**) {
  TwoRings w;
  assert_true(push(w.x, "one"));
  w.hx()->prod.value += 100000;  // the peer scribbles its producer index
  char buf[2000];
  uint32_t len;
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kIndexJump);
  assert_int_equal(w.y.index_errors(), 1);
  // The owner rewrites its header on the next publish: the jump goes back.
  w.x.publish(LocalInfo{});
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kIndexJump);
  assert_true(push(w.x, "two"));
  assert_int_equal(w.y.rx(buf, sizeof(buf), &len), TransportStatus::kOk);
  assert_memory_equal(buf, "two", 3);
  // A consumer index past our producer is refused on transmit.
  auto* hy = reinterpret_cast<SideHeader*>(w.mem + kSideHeaderBytes);
  hy->cons.value += 5000;
  TransportStatus st;
  assert_null(w.x.tx_reserve(3, &st));
  assert_int_equal(st, TransportStatus::kIndexJump);
  w.y.publish(LocalInfo{});
  assert_true(push(w.x, "three"));
}

void test_peer_view_reports_header_faults(void**) {
  TwoRings w;
  assert_int_equal(w.y.peer().fault, PeerFault::kNone);
  w.hx()->version = 77;
  assert_int_equal(w.y.peer().fault, PeerFault::kBadVersion);
  w.hx()->version = kRegionVersion;
  w.hx()->slot_size = 64;
  assert_int_equal(w.y.peer().fault, PeerFault::kBadGeometry);
  w.hx()->magic = 0;
  assert_int_equal(w.y.peer().fault, PeerFault::kNoHeader);
  w.x.publish(LocalInfo{3});
  PeerView v = w.y.peer();
  assert_int_equal(v.fault, PeerFault::kNone);
  assert_int_equal(v.state, 3);
}

}  // namespace

void test_board_speed_rounds_down_to_a_link_speed(void**) {
  using vtrn::link::LinkSpeed;
  using vtrn::link::speed_from_gtps;
  assert_int_equal(int(speed_from_gtps(1)), int(LinkSpeed::k2_5GT));
  assert_int_equal(int(speed_from_gtps(5)), int(LinkSpeed::k5GT));
  assert_int_equal(int(speed_from_gtps(15)), int(LinkSpeed::k8GT));
  assert_int_equal(int(speed_from_gtps(32)), int(LinkSpeed::k32GT));
  assert_int_equal(int(speed_from_gtps(128)), int(LinkSpeed::k64GT));
}

void test_chip_timing_replaces_every_timeout_and_keeps_the_rest(void**) {
  vtrn::link::Config base;
  base.replay_frames = 4;
  base.l0s_idle_ns = 123;
  const vtrn::link::Config c = vtrn::link::with_chip_timing(base);
  const vtrn::link::ChipTiming& t = vtrn::link::kChipTiming;
  assert_int_equal(c.peer_timeout_ns, t.peer_timeout_ns);
  assert_int_equal(c.ts_interval_ns, t.ts_interval_ns);
  assert_int_equal(c.training_timeout_ns, t.training_timeout_ns);
  assert_int_equal(c.recovery_timeout_ns, t.recovery_timeout_ns);
  assert_int_equal(c.detect_quiet_ns, t.detect_quiet_ns);
  assert_int_equal(c.replay_timeout_ns, t.replay_timeout_ns);
  assert_int_equal(c.ack_refresh_ns, t.ack_refresh_ns);
  assert_int_equal(c.burst_window_ns, t.burst_window_ns);
  assert_int_equal(c.retrain_fail_window_ns, t.retrain_fail_window_ns);
  assert_int_equal(c.replay_frames, 4);
  assert_int_equal(c.l0s_idle_ns, 123);
  // Patient with a descheduled peer: far longer than the core's defaults.
  assert_true(c.peer_timeout_ns > 10 * base.peer_timeout_ns);
}

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_training_negotiates_common_speed_and_width),
      cmocka_unit_test(test_held_frame_stays_queued_and_holds_back_the_sender),
      cmocka_unit_test(test_width_is_largest_power_of_two_of_common_good_lanes),
      cmocka_unit_test(test_faulty_lane_gives_narrower_link),
      cmocka_unit_test(test_no_common_lane_keeps_link_down_with_reason),
      cmocka_unit_test(test_absent_peer_stays_in_detect_then_trains_when_peer_appears),
      cmocka_unit_test(test_same_side_on_both_ends_is_reported_incompatible),
      cmocka_unit_test(test_bit_errors_are_naked_replayed_and_all_data_arrives_in_order),
      cmocka_unit_test(test_error_burst_triggers_recovery_and_retrain),
      cmocka_unit_test(test_repeated_failed_retrains_downgrade_speed_then_width),
      cmocka_unit_test(test_peer_vanishing_mid_transfer_goes_recovery_then_detect),
      cmocka_unit_test(test_peer_reattach_resets_link_and_retrains),
      cmocka_unit_test(test_force_down_drops_both_ends_and_retrains),
      cmocka_unit_test(test_disabled_port_keeps_peer_in_detect),
      cmocka_unit_test(test_retrain_during_transfer_keeps_every_frame_in_order),
      cmocka_unit_test(test_receiver_that_does_not_read_stops_sender_without_errors),
      cmocka_unit_test(test_idle_link_enters_l0s_then_l1_and_traffic_wakes_it),
      cmocka_unit_test(test_loopback_slave_echoes_master_frames),
      cmocka_unit_test(test_bandwidth_model_paces_data_to_speed_times_width),
      cmocka_unit_test(test_send_rejects_oversized_payload),
      cmocka_unit_test(test_init_rejects_bad_configuration),
      cmocka_unit_test(test_region_geometry_fits_and_rejects_small_regions),
      cmocka_unit_test(test_transport_moves_frames_in_order_and_reports_full),
      cmocka_unit_test(test_transport_rejects_bad_slot_length_and_moves_on),
      cmocka_unit_test(test_transport_resyncs_after_index_jump),
      cmocka_unit_test(test_peer_view_reports_header_faults),
      cmocka_unit_test(test_board_speed_rounds_down_to_a_link_speed),
      cmocka_unit_test(test_chip_timing_replaces_every_timeout_and_keeps_the_rest),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
