// Hostile-peer tests of the link layer: a peer (or anything else with the
// region mapped) writes garbage into headers, indexes, slot lengths and frame
// bytes, or sends well-formed frames with impossible contents. The port must
// never crash, hang or read outside its buffers (run under ASan/UBSan with
// -DVTRN_SANITIZE=ON), and once the garbage stops the link must train again
// and carry data intact.
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
#include "vtrn/crc32.h"

using namespace linktest;

namespace {

const Capabilities kX4 = caps(LinkSpeed::k8GT, 4, 0xF);

uint64_t rnd(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

// After the scribbling stops, both ends must come back to L0 and move data.
void assert_heals(Rig& r) {
  assert_true(r.run_until_both(LinkState::kL0, 200000));
  // Let any retrain triggered by leftovers settle, then prove data flows.
  Stream s;
  for (uint32_t i = 0; i < 100000 && s.received < 100; ++i) {
    s.pump(r.a, r.b, 100);
    r.step();
  }
  s.pump(r.a, r.b, 100);
  assert_int_equal(s.bad, 0);
  assert_int_equal(s.received, 100);
}

void scribble_run(uint64_t seed) {
  Rig r;
  assert_true(r.attach_both(kX4, kX4));
  assert_true(r.run_until_both(LinkState::kL0, 5000));
  // While the region is garbage nothing can be promised about the data (a
  // scribble can forge a frame with a matching CRC only by luck, but a
  // scribbled index can drop frames between sessions): only "no crash, no
  // out-of-bounds, lengths within bounds" is checked, then healing.
  for (uint32_t round = 0; round < 20000; ++round) {
    const uint32_t writes = uint32_t(rnd(&seed) % 4);
    for (uint32_t w = 0; w < writes; ++w) {
      const uint64_t v = rnd(&seed);
      const uint32_t where = uint32_t(rnd(&seed) % 8);
      size_t off;
      // Bias towards the words that matter: headers and slot lengths.
      if (where < 3) {
        off = (rnd(&seed) % (2 * kSideHeaderBytes)) & ~size_t(3);
      } else if (where < 5) {
        const RegionGeometry& g = r.a.t.geometry();
        off = 2 * kSideHeaderBytes + (rnd(&seed) % (2 * g.slot_count)) * g.slot_size;
      } else {
        off = (rnd(&seed) % Rig::kRegion) & ~size_t(3);
      }
      const uint32_t v32 = uint32_t(v);
      memcpy(r.region + off, &v32, 4);
    }
    std::vector<uint8_t> p = payload(round, 64 + round % 900);
    (void)r.a.port.send(p.data(), uint32_t(p.size()));
    (void)r.b.port.send(p.data(), uint32_t(p.size()));
    uint8_t buf[2048];
    uint32_t len;
    while (r.a.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) assert_true(len <= 1024);
    while (r.b.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) assert_true(len <= 1024);
    r.step();
  }
  Counters ca = r.a.port.counters(), cb = r.b.port.counters();
  assert_true(ca.crc_errors + cb.crc_errors + ca.transport_errors + cb.transport_errors > 0);
  // Drain what the garbage left queued, then check the link heals.
  r.run(2000);
  uint8_t buf[2048];
  uint32_t len;
  while (r.b.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) {
  }
  while (r.a.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) {
  }
  assert_heals(r);
}

void test_random_scribbles_over_the_region_never_crash(void**) {
  for (uint64_t seed : {0x1234567887654321ull, 0x9E3779B97F4A7C15ull, 0xDEADBEEFCAFEF00Dull, 5ull}) {
    scribble_run(seed);
  }
}

// A hostile peer: well-formed transport slots and good CRCs, bad contents.
struct Forger {
  ShmTransport t;
  void frame(uint8_t type, uint32_t seq, uint32_t credit, const void* payload, uint32_t len,
             int32_t length_delta = 0, bool good_crc = true) {
    FrameHeader h{type, 0, 0, uint32_t(int32_t(len) + length_delta), seq, credit, 0, 0};
    FrameHeader z = h;
    uint32_t c = vtrn::crc32(&z, sizeof(z));
    if (len != 0) c = vtrn::crc32(payload, len, c);
    h.crc = good_crc ? c : ~c;
    TransportStatus st;
    uint8_t* p = t.tx_reserve(uint32_t(sizeof(h)) + len, &st);
    if (p == nullptr) return;
    memcpy(p, &h, sizeof(h));
    if (len != 0) memcpy(p + sizeof(h), payload, len);
    t.tx_commit(uint32_t(sizeof(h)) + len);
  }
};

void test_forged_frames_with_impossible_contents_are_counted_not_trusted(void**) {
  Rig r;
  assert_true(r.attach(r.a, 0, kX4, r.cfg_a));
  Forger f;
  assert_true(f.t.attach(r.region, Rig::kRegion, 1, sizeof(FrameHeader) + r.cfg_a.max_payload, 77));
  r.b.polled = false;
  uint64_t seed = 99;
  for (uint32_t i = 0; i < 20000; ++i) {
    f.t.publish(LocalInfo{uint32_t(rnd(&seed) % 12)});
    uint8_t junk[64];
    for (auto& b : junk) b = uint8_t(rnd(&seed));
    TrainingSet ts{};
    memcpy(&ts, junk, sizeof(ts));
    switch (rnd(&seed) % 7) {
      case 0: f.frame(kFrameTs1, 0, 0, &ts, sizeof(ts)); break;
      case 1: f.frame(kFrameTs2, 0, 0, &ts, sizeof(ts)); break;
      case 2: f.frame(kFrameAck, uint32_t(rnd(&seed)), uint32_t(rnd(&seed)), nullptr, 0); break;
      case 3: f.frame(kFrameNak, uint32_t(rnd(&seed)), uint32_t(rnd(&seed)), nullptr, 0); break;
      case 4: f.frame(kFrameData, uint32_t(rnd(&seed) % 8), 0, junk, 64, int32_t(rnd(&seed) % 3) - 1); break;
      case 5: f.frame(uint8_t(rnd(&seed)), 0, 0, junk, 16); break;
      default: f.frame(kFrameData, 0, 0, junk, 32, 0, false); break;
    }
    // A valid TS1 now and then lets A get past Polling so the deeper states see garbage too.
    if (i % 50 == 0) {
      TrainingSet good{uint8_t(LinkState::kPolling), 3, 16, 4, 0xF, 8, 0, 0, 0, 0};
      f.frame(kFrameTs1, 0, 0, &good, sizeof(good));
      TrainingSet good2 = good;
      good2.state = uint8_t(LinkState::kConfiguration);
      good2.neg_speed = 3;
      good2.neg_width = 4;
      f.frame(kFrameTs2, 0, 0, &good2, sizeof(good2));
    }
    (void)r.a.port.send(junk, 64);
    uint8_t buf[2048];
    uint32_t len;
    while (r.a.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) assert_true(len <= 1024);
    r.step();
  }
  Counters c = r.a.port.counters();
  assert_true(c.protocol_errors > 0);
  assert_true(c.crc_errors > 0);
  assert_true(c.link_ups > 0);  // the forger did train it, and A survived what followed
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_random_scribbles_over_the_region_never_crash),
      cmocka_unit_test(test_forged_frames_with_impossible_contents_are_counted_not_trusted),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
