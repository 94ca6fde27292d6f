// link_bench: throughput and round-trip latency of the link layer between two
// threads (one Port each) over one shared buffer with real clocks, each
// against a raw shared-memory SPSC copy ring measured in the same run with the
// same slot size and slot count, so the ratio shows what framing, CRC32,
// sequence numbers, ACKs and the replay copy cost. Host-only; it reports, it
// does not judge (no thresholds). On a machine shared with other work the
// absolute numbers wander; the ratios are the result. Throughput threads
// yield their core when they make no progress (on an oversubscribed host a
// spinning thread otherwise burns the quantum its peer needs); round trips
// spin on both sides. A one-thread run of each (both ends stepped in turn)
// gives the CPU cost per byte without any scheduling effects.
//
// Usage: link_bench [scale]   (scale multiplies the iteration counts; default 1)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "vtrn/link.h"

using namespace vtrn::link;

namespace {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

struct Region {
  size_t bytes;
  uint8_t* mem;
  explicit Region(size_t n) : bytes(n), mem(static_cast<uint8_t*>(aligned_alloc(4096, n))) {
    memset(mem, 0, n);
  }
  ~Region() { free(mem); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
};

Config bench_config(uint32_t payload, uint32_t frames) {
  Config c;
  c.max_payload = payload;
  c.replay_frames = frames;
  c.rx_frames = frames;
  c.frames_per_poll = frames;
  c.model_bandwidth = false;  // measure the implementation, not the model
  c.peer_timeout_ns = 2'000'000'000;  // a descheduled thread is not a dead chip
  c.recovery_timeout_ns = 4'000'000'000;
  c.training_timeout_ns = 4'000'000'000;
  c.replay_timeout_ns = 200'000'000;
  return c;
}

struct Endpoint {
  ShmTransport t;
  Port port;
  std::vector<uint64_t> storage;
};

// Both ports attached and trained (each thread polls its own port).
bool setup(Region& r, Endpoint& a, Endpoint& b, const Config& c) {
  const Capabilities caps{LinkSpeed::k32GT, 16, 0xFFFF};
  Endpoint* e[2] = {&a, &b};
  for (uint32_t side = 0; side < 2; ++side) {
    if (!e[side]->t.attach(r.mem, r.bytes, side, uint32_t(sizeof(FrameHeader)) + c.max_payload, side + 1)) {
      return false;
    }
    e[side]->storage.assign(Port::storage_bytes(c) / 8 + 1, 0);
    if (e[side]->port.init(&e[side]->t, caps, c, reinterpret_cast<uint8_t*>(e[side]->storage.data()),
                           e[side]->storage.size() * 8, now_ns()) != LinkStatus::kOk) {
      return false;
    }
  }
  std::atomic<bool> done{false};
  std::thread tb([&] {
    while (!done.load()) b.port.poll(now_ns());
  });
  const uint64_t give_up = now_ns() + 5'000'000'000ull;
  while (!(a.port.up() && b.port.up()) && now_ns() < give_up) a.port.poll(now_ns());
  done = true;
  tb.join();
  return a.port.up() && b.port.up();
}

// The raw reference: one SPSC ring of fixed slots, memcpy in and out
struct RawRing {
  alignas(64) std::atomic<uint32_t> prod{0};
  alignas(64) std::atomic<uint32_t> cons{0};
  uint8_t* slots = nullptr;
  uint32_t count = 0, size = 0;
  bool push(const void* p, uint32_t n) {
    const uint32_t pr = prod.load(std::memory_order_relaxed);
    if (pr - cons.load(std::memory_order_acquire) == count) return false;
    uint8_t* s = slots + size_t(pr & (count - 1)) * size;
    memcpy(s, &n, 4);
    memcpy(s + 8, p, n);
    prod.store(pr + 1, std::memory_order_release);
    return true;
  }
  bool pop(void* p, uint32_t* n) {
    const uint32_t c = cons.load(std::memory_order_relaxed);
    if (prod.load(std::memory_order_acquire) == c) return false;
    const uint8_t* s = slots + size_t(c & (count - 1)) * size;
    memcpy(n, s, 4);
    memcpy(p, s + 8, *n);
    cons.store(c + 1, std::memory_order_release);
    return true;
  }
};

double raw_throughput(uint32_t transfer, uint32_t count, uint32_t slots, uint32_t slot_size) {
  Region r(size_t(2) * slots * slot_size + 4096);
  RawRing ring;
  ring.slots = r.mem + 4096;
  ring.count = slots;
  ring.size = slot_size;
  std::vector<uint8_t> src(transfer, 0x5A);
  const uint64_t t0 = now_ns();
  std::thread rx([&] {
    std::vector<uint8_t> dst(transfer);
    uint32_t n, got = 0;
    while (got < count) {
      if (ring.pop(dst.data(), &n)) {
        ++got;
      } else {
        std::this_thread::yield();
      }
    }
  });
  for (uint32_t sent = 0; sent < count;) {
    if (ring.push(src.data(), transfer)) {
      ++sent;
    } else {
      std::this_thread::yield();
    }
  }
  rx.join();
  return double(transfer) * count / (double(now_ns() - t0) * 1e-9);
}

double raw_rtt_ns(uint32_t bytes, uint32_t iters) {
  Region r(1 << 20);
  RawRing ab, ba;
  ab.slots = r.mem + 4096;
  ba.slots = r.mem + 4096 + 64 * 1024;
  ab.count = ba.count = 16;
  ab.size = ba.size = 256;
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    uint8_t buf[256];
    uint32_t n;
    while (!stop.load(std::memory_order_relaxed)) {
      if (ab.pop(buf, &n)) {
        while (!ba.push(buf, n)) {
        }
      }
    }
  });
  uint8_t msg[256] = {1}, buf[256];
  uint32_t n;
  const uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < iters; ++i) {
    while (!ab.push(msg, bytes)) {
    }
    while (!ba.pop(buf, &n)) {
    }
  }
  const uint64_t t = now_ns() - t0;
  stop = true;
  echo.join();
  return double(t) / iters;
}

struct LinkResult {
  double value = 0;
  bool ok = false;
  Counters a{}, b{};
};

LinkResult link_throughput(uint32_t transfer, uint32_t count, uint32_t frames, size_t region_bytes) {
  LinkResult res;
  Region r(region_bytes);
  Endpoint a, b;
  const Config c = bench_config(transfer, frames);
  if (!setup(r, a, b, c)) return res;
  std::vector<uint8_t> src(transfer);
  for (uint32_t i = 0; i < transfer; ++i) src[i] = uint8_t(i * 13);
  std::atomic<bool> bad{false};
  const uint64_t t0 = now_ns();
  std::thread rx([&] {
    std::vector<uint8_t> dst(transfer);
    uint32_t len, got = 0;
    const uint64_t give_up = now_ns() + 60'000'000'000ull;
    while (got < count && now_ns() < give_up) {
      b.port.poll(now_ns());
      bool any = false;
      while (b.port.receive(dst.data(), transfer, &len) == LinkStatus::kOk) {
        if (len != transfer || dst[transfer - 1] != src[transfer - 1]) bad = true;
        ++got;
        any = true;
      }
      if (!any) std::this_thread::yield();
    }
    if (got < count) bad = true;
  });
  uint32_t sent = 0;
  const uint64_t give_up = now_ns() + 60'000'000'000ull;
  while ((sent < count || a.port.tx_outstanding() != 0) && now_ns() < give_up) {
    const uint32_t before = sent;
    while (sent < count && a.port.send(src.data(), transfer) == LinkStatus::kOk) ++sent;
    a.port.poll(now_ns());
    if (sent == before) std::this_thread::yield();
  }
  rx.join();
  const uint64_t t = now_ns() - t0;
  res.value = double(transfer) * count / (double(t) * 1e-9);
  res.ok = !bad && sent == count;
  res.a = a.port.counters();
  res.b = b.port.counters();
  return res;
}

// One thread steps both ends: CPU cost, free of scheduling.
double raw_one_thread(uint32_t transfer, uint32_t count, uint32_t slots, uint32_t slot_size) {
  Region r(size_t(slots) * slot_size + 4096);
  RawRing ring;
  ring.slots = r.mem + 4096;
  ring.count = slots;
  ring.size = slot_size;
  std::vector<uint8_t> src(transfer, 0x5A), dst(transfer);
  uint32_t n, sent = 0, got = 0;
  const uint64_t t0 = now_ns();
  while (got < count) {
    while (sent < count && ring.push(src.data(), transfer)) ++sent;
    while (ring.pop(dst.data(), &n)) ++got;
  }
  return double(transfer) * count / (double(now_ns() - t0) * 1e-9);
}

LinkResult link_one_thread(uint32_t transfer, uint32_t count, uint32_t frames, size_t region_bytes) {
  LinkResult res;
  Region r(region_bytes);
  Endpoint a, b;
  const Config c = bench_config(transfer, frames);
  if (!setup(r, a, b, c)) return res;
  std::vector<uint8_t> src(transfer, 0x5A), dst(transfer);
  uint32_t len, sent = 0, got = 0;
  const uint64_t t0 = now_ns();
  const uint64_t give_up = t0 + 60'000'000'000ull;
  while (got < count && now_ns() < give_up) {
    while (sent < count && a.port.send(src.data(), transfer) == LinkStatus::kOk) ++sent;
    a.port.poll(now_ns());
    b.port.poll(now_ns());
    while (b.port.receive(dst.data(), transfer, &len) == LinkStatus::kOk) ++got;
  }
  res.value = double(transfer) * count / (double(now_ns() - t0) * 1e-9);
  res.ok = got == count;
  res.a = a.port.counters();
  res.b = b.port.counters();
  return res;
}

LinkResult link_rtt_ns(uint32_t bytes, uint32_t iters) {
  LinkResult res;
  Region r(1 << 20);
  Endpoint a, b;
  const Config c = bench_config(256, 16);
  if (!setup(r, a, b, c)) return res;
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    uint8_t buf[256];
    uint32_t n;
    while (!stop.load(std::memory_order_relaxed)) {
      b.port.poll(now_ns());
      while (b.port.receive(buf, sizeof(buf), &n) == LinkStatus::kOk) {
        while (b.port.send(buf, n) != LinkStatus::kOk) b.port.poll(now_ns());
      }
    }
  });
  uint8_t msg[256] = {1}, buf[256];
  uint32_t n;
  bool ok = true;
  const uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < iters && ok; ++i) {
    while (a.port.send(msg, bytes) != LinkStatus::kOk) a.port.poll(now_ns());
    const uint64_t give_up = now_ns() + 5'000'000'000ull;
    for (;;) {
      a.port.poll(now_ns());
      if (a.port.receive(buf, sizeof(buf), &n) == LinkStatus::kOk) break;
      if (now_ns() > give_up) {
        ok = false;
        break;
      }
    }
  }
  const uint64_t t = now_ns() - t0;
  stop = true;
  echo.join();
  res.value = double(t) / iters;
  res.ok = ok;
  res.a = a.port.counters();
  res.b = b.port.counters();
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? atof(argv[1]) : 1.0;
  if (!(scale > 0)) {
    fprintf(stderr, "usage: link_bench [scale > 0]\n");
    return 2;
  }
  int status = 0;
  printf("%-28s %14s %14s %8s  %s\n", "measurement", "link", "raw shm", "ratio", "link counters (tx side)");
  struct Case {
    uint32_t transfer, count, frames;
    size_t region;
  } cases[] = {{4096, uint32_t(40000 * scale), 64, 1 << 20},
               {65536, uint32_t(3000 * scale), 16, 4 << 20}};
  for (const Case& k : cases) {
    const RegionGeometry g = region_geometry(k.region, uint32_t(sizeof(FrameHeader)) + k.transfer);
    const LinkResult l = link_throughput(k.transfer, k.count, k.frames, k.region);
    const double raw = raw_throughput(k.transfer, k.count, g.slot_count, g.slot_size);
    char name[64];
    snprintf(name, sizeof(name), "throughput %u KiB (MB/s)", k.transfer / 1024);
    printf("%-28s %14.0f %14.0f %8.3f  frames=%llu replays=%llu crc_errors=%llu%s\n", name, l.value / 1e6,
           raw / 1e6, l.value / raw, (unsigned long long)l.a.tx_frames, (unsigned long long)l.a.replays,
           (unsigned long long)l.b.crc_errors, l.ok ? "" : "  FAILED (data or timeout)");
    if (!l.ok) status = 1;
    const LinkResult l1 = link_one_thread(k.transfer, k.count, k.frames, k.region);
    const double raw1 = raw_one_thread(k.transfer, k.count, g.slot_count, g.slot_size);
    snprintf(name, sizeof(name), "  one thread, CPU cost");
    printf("%-28s %14.0f %14.0f %8.3f%s\n", name, l1.value / 1e6, raw1 / 1e6, l1.value / raw1,
           l1.ok ? "" : "  FAILED (data or timeout)");
    if (!l1.ok) status = 1;
  }
  const uint32_t iters = uint32_t(20000 * scale);
  const LinkResult l = link_rtt_ns(64, iters);
  const double raw = raw_rtt_ns(64, iters);
  printf("%-28s %14.2f %14.2f %8.3f  frames=%llu retrains=%llu%s\n", "round trip 64 B (us)",
         l.value / 1e3, raw / 1e3, raw / l.value, (unsigned long long)l.a.tx_frames, (unsigned long long)l.a.retrains,
         l.ok ? "" : "  FAILED (timeout)");
  printf("(ratio: link/raw for throughput, raw/link for latency; 1.0 = as fast as a bare SPSC copy)\n");
  if (!l.ok) status = 1;
  return status;
}
