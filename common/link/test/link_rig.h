// Test rig for the link layer: two ports over one in-process shared region
// (the same ShmTransport the firmware uses over ivshmem-plain), a fake
// nanosecond clock, and helpers that poll both ends in lock step. Host-only.
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "vtrn/link.h"

namespace linktest {

using namespace vtrn::link;

inline Config test_config() {
  Config c;
  c.max_payload = 1024;
  c.replay_frames = 8;
  c.rx_frames = 8;
  c.frames_per_poll = 8;
  c.model_bandwidth = false;
  c.peer_timeout_ns = 200'000;
  c.ts_interval_ns = 5'000;
  c.training_timeout_ns = 2'000'000;
  c.recovery_timeout_ns = 1'000'000;
  c.detect_quiet_ns = 50'000;
  c.replay_timeout_ns = 50'000;
  c.ack_refresh_ns = 20'000;
  c.burst_errors = 1000;
  c.burst_window_ns = 100'000;
  c.retrain_fail_window_ns = 1'000'000;
  c.downgrade_after = 2;
  return c;
}

struct End {
  ShmTransport t;
  Port port;
  std::vector<uint64_t> storage;
  bool polled = true;
};

struct Rig {
  static constexpr size_t kRegion = 256 * 1024;
  uint8_t* region = nullptr;
  uint64_t now = 1'000'000;
  uint64_t step_ns = 1'000;
  End a, b;
  Config cfg_a, cfg_b;
  uint32_t epoch = 1;

  Rig() {
    region = static_cast<uint8_t*>(aligned_alloc(4096, kRegion));
    memset(region, 0, kRegion);
    cfg_a = cfg_b = test_config();
  }
  ~Rig() { free(region); }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  bool attach(End& e, uint32_t side, const Capabilities& caps, const Config& cfg) {
    if (!e.t.attach(region, kRegion, side, uint32_t(sizeof(FrameHeader)) + cfg.max_payload, epoch++)) {
      return false;
    }
    e.storage.assign(Port::storage_bytes(cfg) / 8 + 1, 0);
    return e.port.init(&e.t, caps, cfg, reinterpret_cast<uint8_t*>(e.storage.data()),
                       e.storage.size() * 8, now) == LinkStatus::kOk;
  }
  bool attach_both(const Capabilities& ca, const Capabilities& cb) {
    return attach(a, 0, ca, cfg_a) && attach(b, 1, cb, cfg_b);
  }
  void step() {
    now += step_ns;
    if (a.polled) a.port.poll(now);
    if (b.polled) b.port.poll(now);
  }
  void run(uint32_t steps) {
    for (uint32_t i = 0; i < steps; ++i) step();
  }
  // Polls until both ends are in `s` (or the step budget runs out).
  bool run_until_both(LinkState s, uint32_t max_steps) {
    for (uint32_t i = 0; i < max_steps; ++i) {
      if (a.port.state() == s && b.port.state() == s) return true;
      step();
    }
    return a.port.state() == s && b.port.state() == s;
  }
};

inline Capabilities caps(LinkSpeed s, uint8_t lanes, uint32_t good) { return Capabilities{s, lanes, good}; }

// Deterministic payload for frame number n: its number, then a pattern.
inline std::vector<uint8_t> payload(uint32_t n, uint32_t len) {
  std::vector<uint8_t> p(len);
  for (uint32_t i = 0; i < len; ++i) p[i] = uint8_t(n * 131 + i * 7 + (i >> 8));
  if (len >= 4) memcpy(p.data(), &n, 4);
  return p;
}

// Streams `count` frames from `from` to `to`, reading as they arrive; returns
// how many arrived intact and in order (stops at the first wrong one).
struct Stream {
  uint32_t sent = 0, received = 0, bad = 0;
  uint32_t len_base = 200;
  uint32_t length(uint32_t n) const { return len_base + (n * 37) % 800; }
  void pump(End& from, End& to, uint32_t count) {
    while (sent < count) {
      std::vector<uint8_t> p = payload(sent, length(sent));
      if (from.port.send(p.data(), uint32_t(p.size())) != LinkStatus::kOk) break;
      ++sent;
    }
    uint8_t buf[4096];
    uint32_t len = 0;
    while (to.port.receive(buf, sizeof(buf), &len) == LinkStatus::kOk) {
      std::vector<uint8_t> want = payload(received, length(received));
      if (len != want.size() || memcmp(buf, want.data(), len) != 0) {
        ++bad;
      }
      ++received;
    }
  }
};

}  // namespace linktest
