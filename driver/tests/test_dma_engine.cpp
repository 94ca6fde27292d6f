// Unit tests of libvtrn's DMA engine (drv::DmaEngine) against an in-process
// fake chip (fake_dma_chip.h) that runs the real device-side queue engine
// over a BAR2 and HBM in ordinary memory. Hostile-device cases write the
// completion ring by hand instead.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_dma_chip.h"
#include "vtrn/drv/dma_engine.h"
#include "vtrn/drv/fd.h"

extern "C" {
#include <cmocka.h>
}

using namespace vtrn::dma;
using drv::DmaBuffer;
using drv::DmaChain;
using drv::DmaEngine;
using drv::DmaError;
using drv::DmaFault;
using drv::DmaResult;
using drv::DmaSegment;
using drv::DmaWait;
using fake::FakeDmaChip;

namespace {

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kHbm = 4u << 20;

struct Fixture {
  FakeDmaChip chip{4, 64, kHbm};
  DmaEngine eng;
};

int setup(void** state) {
  auto* f = new Fixture;
  DmaEngine::Hooks hooks;
  hooks.irq_fd = f->chip.irq_fd();
  hooks.ring_chip = [f] { f->chip.ring(); };
  if (const drv::Error err = f->eng.attach(f->chip.bar2(), f->chip.layout(), hooks); !err.ok()) {
    fprintf(stderr, "attach: %s\n", err.detail().c_str());
    delete f;
    return -1;
  }
  *state = f;
  return 0;
}

int teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->chip.stop();
  delete f;
  return 0;
}

DmaSegment h2d(uint64_t win, uint64_t hbm, uint32_t len) { return {win, hbm, len, true, false}; }
DmaSegment d2h(uint64_t hbm, uint64_t win, uint32_t len) { return {hbm, win, len, false, true}; }

// Submits one chain on `q` and waits for it.
DmaResult run_chain(Fixture* f, uint32_t q, const std::vector<DmaSegment>& segs, DmaWait mode) {
  DmaChain c{segs.data(), uint32_t(segs.size())};
  uint64_t h = 0;
  assert_int_equal(int(f->eng.submit(q, &c, 1, &h)), int(DmaError::kOk));
  DmaResult r;
  assert_int_equal(int(f->eng.wait(h, &r, mode, 5 * kSecond)), int(DmaError::kOk));
  assert_int_equal(r.handle, h);
  return r;
}

// Thread-safe variant (cmocka asserts must stay on the main thread).
bool try_chain(Fixture* f, uint32_t q, const std::vector<DmaSegment>& segs, DmaWait mode, DmaResult* r) {
  DmaChain c{segs.data(), uint32_t(segs.size())};
  uint64_t h = 0;
  DmaError e;
  // Another thread may fill the shared queue for a moment.
  while ((e = f->eng.submit(q, &c, 1, &h)) == DmaError::kQueueFull) std::this_thread::yield();
  if (e != DmaError::kOk) return false;
  return f->eng.wait(h, r, mode, 5 * kSecond) == DmaError::kOk && r->handle == h;
}

// Attach.

void test_attach_rejects_depth_not_power_of_two(void**) {
  FakeDmaChip chip(2, 64, kHbm);
  chip.region()->depth = 48;
  DmaEngine eng;
  const drv::Error err = eng.attach(chip.bar2(), chip.layout(), {});
  assert_false(err.ok());
  assert_non_null(strstr(err.detail().c_str(), "depth"));
  assert_false(eng.attached());
}

void test_attach_rejects_layout_without_dma_region(void**) {
  FakeDmaChip chip(2, 64, kHbm);
  vtrn::hostif::Layout l = chip.layout();
  l.regions[vtrn::hostif::kRegionDma] = {};
  DmaEngine eng;
  const drv::Error err = eng.attach(chip.bar2(), l, {});
  assert_int_equal(int(err.code()), int(drv::Code::kNotFound));
  assert_non_null(strstr(err.detail().c_str(), "no DMA region"));
  uint64_t h;
  DmaSegment s = h2d(0, FakeDmaChip::kHbmBase, 8);
  DmaChain c{&s, 1};
  assert_int_equal(int(eng.submit(0, &c, 1, &h)), int(DmaError::kNotAttached));
}

void test_attach_reports_geometry_from_region(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  assert_int_equal(f->eng.queue_count(), 4);
  assert_int_equal(f->eng.depth(), 64);
  assert_int_equal(f->eng.hbm_base(), FakeDmaChip::kHbmBase);
  assert_int_equal(f->eng.hbm_size(), kHbm);
  assert_int_equal(f->eng.window_size(), f->chip.layout().at(vtrn::hostif::kRegionHostWindow).size);
}

// Window buffers.

void test_window_buffers_do_not_overlap_and_exhaust_cleanly(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t win = f->eng.window_size();
  std::vector<DmaBuffer> bufs;
  DmaBuffer b;
  while (f->eng.alloc(100000, &b) == DmaError::kOk) bufs.push_back(b);
  assert_true(bufs.size() >= win / 102400 - 1);
  for (size_t i = 0; i < bufs.size(); ++i) {
    assert_int_equal(bufs[i].offset % drv::kDmaBufferGranule, 0);
    assert_true(bufs[i].offset + bufs[i].bytes <= win);
    assert_ptr_equal(bufs[i].ptr, f->eng.window() + bufs[i].offset);
    for (size_t j = i + 1; j < bufs.size(); ++j)
      assert_true(bufs[i].offset + bufs[i].bytes <= bufs[j].offset ||
                  bufs[j].offset + bufs[j].bytes <= bufs[i].offset);
  }
  assert_int_equal(int(f->eng.alloc(100000, &b)), int(DmaError::kNoMemory));
  for (auto& x : bufs) assert_int_equal(int(f->eng.free(x)), int(DmaError::kOk));
  assert_int_equal(f->eng.window_free_bytes(), win);
  assert_int_equal(int(f->eng.free(bufs[0])), int(DmaError::kBadArgument));  // double free
  assert_int_equal(int(f->eng.alloc(0, &b)), int(DmaError::kBadArgument));
  assert_int_equal(int(f->eng.alloc(win + 1, &b)), int(DmaError::kNoMemory));
}

// Host-side validation.

void test_host_validation_refuses_bad_chains_without_touching_the_ring(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t base = FakeDmaChip::kHbmBase;
  const uint64_t win = f->eng.window_size();
  struct Case {
    DmaSegment s;
    uint32_t status;
  } cases[] = {
      {h2d(0, base, 0), kErrZeroLength},
      {h2d(0, base, kMaxDescBytes + 1), kErrTooLong},
      {h2d(win - 8, base, 16), kErrSrcRange},
      {h2d(0, base + kHbm - 8, 16), kErrDstRange},
      {h2d(0, base - 4096, 16), kErrDstRange},
      {{UINT64_MAX - 4, base, 16, true, false}, kErrAddrOverflow},
      {{base, base + 8, 16, false, false}, kErrOverlap},
  };
  for (const Case& c : cases) {
    DmaSegment segs[2] = {h2d(0, base, 64), c.s};
    DmaChain chains[2] = {{segs, 1}, {segs, 2}};
    uint64_t h[2];
    drv::DmaInvalid bad;
    assert_int_equal(int(f->eng.submit(0, chains, 2, h, &bad)), int(DmaError::kInvalidChain));
    assert_int_equal(bad.chain, 1);
    assert_int_equal(bad.segment, 1);
    assert_int_equal(bad.status, c.status);
  }
  std::vector<DmaSegment> many(kMaxChainDescs + 1, h2d(0, base, 64));
  DmaChain longc{many.data(), uint32_t(many.size())};
  uint64_t h;
  drv::DmaInvalid bad;
  assert_int_equal(int(f->eng.submit(0, &longc, 1, &h, &bad)), int(DmaError::kInvalidChain));
  assert_int_equal(bad.status, kErrChainTooLong);
  // Nothing reached the device.
  assert_int_equal(f->chip.ctl(0)->sq_prod.value, 0);
  assert_int_equal(f->eng.in_flight_all(), 0);
  assert_int_equal(int(f->eng.submit(7, &longc, 1, &h)), int(DmaError::kBadQueue));
  assert_int_equal(int(f->eng.submit(0, &longc, 0, &h)), int(DmaError::kBadArgument));
}

void test_raw_mode_lets_the_device_reject_and_queue_stays_healthy(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Descriptor d[3] = {};
  // Outside HBM, zero length, and an unknown flag bit: each a one-descriptor chain.
  d[0] = {0, FakeDmaChip::kHbmBase + kHbm, 64, kDescFirst | kDescLast | kDescSrcHost, 0};
  d[1] = {0, FakeDmaChip::kHbmBase, 0, kDescFirst | kDescLast | kDescSrcHost, 0};
  d[2] = {0, FakeDmaChip::kHbmBase, 64, kDescFirst | kDescLast | kDescSrcHost | (1u << 20), 0};
  uint64_t h[3];
  assert_int_equal(int(f->eng.submit_raw(1, d, 3, h)), int(DmaError::kOk));
  f->chip.serve();
  const uint32_t want[3] = {kErrDstRange, kErrZeroLength, kErrBadFlags};
  for (int i = 0; i < 3; ++i) {
    DmaResult r;
    assert_int_equal(int(f->eng.wait(h[i], &r, DmaWait::kPoll, kSecond)), int(DmaError::kOk));
    assert_int_equal(r.status, want[i]);
    assert_false(r.local);
  }
  assert_int_equal(int(f->eng.fault(1)), int(DmaFault::kNone));
  DmaBuffer b;
  assert_int_equal(int(f->eng.alloc(64, &b)), int(DmaError::kOk));
  DmaSegment s = h2d(b.offset, FakeDmaChip::kHbmBase, 64);
  DmaChain c{&s, 1};
  uint64_t ok;
  assert_int_equal(int(f->eng.submit(1, &c, 1, &ok)), int(DmaError::kOk));
  f->chip.serve();
  DmaResult r;
  assert_int_equal(int(f->eng.wait(ok, &r, DmaWait::kPoll, kSecond)), int(DmaError::kOk));
  assert_int_equal(r.status, kOk);
  assert_int_equal(r.bytes, 64);
}

// Data integrity.

// Random chain shapes, sizes and alignments, host -> HBM -> host, from
// several threads over several queues (two threads share queue 0), half of
// them waiting by polling and half blocking on the interrupt.
void test_random_chains_round_trip_intact_from_several_threads(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->chip.start();
  constexpr int kThreads = 5;
  constexpr int kIters = 60;
  const uint64_t slice = kHbm / kThreads;
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      const uint32_t q = uint32_t(t) % f->eng.queue_count();
      const DmaWait mode = t % 2 ? DmaWait::kBlock : DmaWait::kPoll;
      const uint64_t hbm = FakeDmaChip::kHbmBase + slice * uint64_t(t);
      for (int it = 0; it < kIters && failures == 0; ++it) {
        const uint32_t nseg = 1 + uint32_t(rng() % 8);
        const uint32_t len = 1 + uint32_t(rng() % 48000);
        const uint32_t src_align = uint32_t(rng() % 64), hbm_align = uint32_t(rng() % 4096);
        DmaBuffer src, dst;
        if (f->eng.alloc(len + 64, &src) != DmaError::kOk) { ++failures; return; }
        if (f->eng.alloc(len + 64, &dst) != DmaError::kOk) { ++failures; return; }
        for (uint32_t i = 0; i < len; ++i) src.ptr[src_align + i] = uint8_t(rng());
        memset(dst.ptr, 0, dst.bytes);
        // Split len into nseg pieces (the last takes the rest).
        std::vector<DmaSegment> out, in;
        uint32_t off = 0;
        for (uint32_t s = 0; s < nseg && off < len; ++s) {
          uint32_t piece = s + 1 == nseg ? len - off : 1 + uint32_t(rng() % (len - off));
          out.push_back(h2d(src.offset + src_align + off, hbm + hbm_align + off, piece));
          in.push_back(d2h(hbm + hbm_align + off, dst.offset + src_align + off, piece));
          off += piece;
        }
        DmaResult r1, r2;
        if (!try_chain(f, q, out, mode, &r1) || !try_chain(f, q, in, mode, &r2) || r1.status != kOk || r2.status != kOk || r1.bytes != len || r2.bytes != len ||
            memcmp(src.ptr + src_align, dst.ptr + src_align, len) != 0)
          ++failures;
        (void)f->eng.free(src);
        (void)f->eng.free(dst);
      }
    });
  }
  for (auto& t : ts) t.join();
  f->chip.stop();
  assert_int_equal(failures.load(), 0);
  assert_int_equal(f->eng.in_flight_all(), 0);
  for (uint32_t q = 0; q < f->eng.queue_count(); ++q) {
    drv::DmaQueueSnapshot s;
    assert_true(f->eng.snapshot(q, &s));
    assert_true(s.device_stats_valid);
    assert_int_equal(s.device.chains, s.chains_completed);
    assert_int_equal(s.device.errors, 0);
    assert_int_equal(s.fault, int(DmaFault::kNone));
  }
}

// A batch of chains goes out with one index store and one doorbell.
void test_batch_submission_publishes_once_and_completes_all(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  DmaBuffer b;
  assert_int_equal(int(f->eng.alloc(32 * 64, &b)), int(DmaError::kOk));
  for (uint32_t i = 0; i < 32 * 64; ++i) b.ptr[i] = uint8_t(i * 13);
  std::vector<DmaSegment> segs;
  std::vector<DmaChain> chains;
  for (uint32_t i = 0; i < 32; ++i) segs.push_back(h2d(b.offset + i * 64, FakeDmaChip::kHbmBase + i * 4096, 64));
  for (uint32_t i = 0; i < 32; ++i) chains.push_back({&segs[i], 1, false});
  uint64_t h[32];
  const uint64_t rings = f->chip.doorbells();
  assert_int_equal(int(f->eng.submit(2, chains.data(), 32, h)), int(DmaError::kOk));
  assert_int_equal(f->chip.doorbells(), rings + 1);
  assert_int_equal(f->chip.ctl(2)->sq_prod.value, 32);
  f->chip.serve();
  assert_int_equal(f->eng.poll(2), 32);
  std::vector<DmaResult> rs;
  assert_int_equal(f->eng.collect(&rs), 32);
  for (auto& r : rs) assert_int_equal(r.status, kOk);
  for (uint32_t i = 0; i < 32; ++i)
    assert_memory_equal(f->chip.hbm() + i * 4096, b.ptr + i * 64, 64);
  // A batch larger than the ring is refused whole.
  std::vector<DmaChain> big(65, chains[0]);
  uint64_t hb[65];
  assert_int_equal(int(f->eng.submit(2, big.data(), 65, hb)), int(DmaError::kQueueFull));
}

// Under a doorbell hold, several submissions ring the chip once, on the last
// release of nested holds; a hold with nothing submitted rings nothing.
void test_doorbell_hold_rings_once_on_last_release(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  DmaBuffer b;
  assert_int_equal(int(f->eng.alloc(4096, &b)), int(DmaError::kOk));
  DmaSegment seg = h2d(b.offset, FakeDmaChip::kHbmBase, 64);
  DmaChain chain{&seg, 1, false};
  uint64_t h;
  const uint64_t rings = f->chip.doorbells();
  f->eng.hold_doorbell();
  f->eng.release_doorbell();
  assert_int_equal(f->chip.doorbells(), rings);
  f->eng.hold_doorbell();
  f->eng.hold_doorbell();
  for (uint32_t q = 0; q < 3; ++q) assert_int_equal(int(f->eng.submit(q, &chain, 1, &h)), int(DmaError::kOk));
  assert_int_equal(f->chip.doorbells(), rings);
  f->eng.release_doorbell();
  assert_int_equal(f->chip.doorbells(), rings);
  f->eng.release_doorbell();
  assert_int_equal(f->chip.doorbells(), rings + 1);
  // Without a hold each submission rings again.
  assert_int_equal(int(f->eng.submit(0, &chain, 1, &h)), int(DmaError::kOk));
  assert_int_equal(f->chip.doorbells(), rings + 2);
}

void test_blocking_wait_wakes_on_interrupt_and_times_out_when_unserved(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  DmaBuffer b;
  assert_int_equal(int(f->eng.alloc(4096, &b)), int(DmaError::kOk));
  DmaSegment s = h2d(b.offset, FakeDmaChip::kHbmBase, 4096);
  DmaChain c{&s, 1, true};
  uint64_t h;
  assert_int_equal(int(f->eng.submit(3, &c, 1, &h)), int(DmaError::kOk));
  DmaResult r;
  const uint64_t t0 = drv::monotonic_ns();
  assert_int_equal(int(f->eng.wait(h, &r, DmaWait::kBlock, 30'000'000)), int(DmaError::kTimeout));
  assert_true(drv::monotonic_ns() - t0 >= 30'000'000);
  assert_int_equal(f->chip.ctl(3)->irq_armed.value, 1);  // the blocking wait armed it
  f->chip.start();
  assert_int_equal(int(f->eng.wait(h, &r, DmaWait::kBlock, 5 * kSecond)), int(DmaError::kOk));
  assert_int_equal(r.status, kOk);
  assert_true(f->chip.irqs() >= 1);
  assert_int_equal(int(f->eng.wait(h, &r, DmaWait::kBlock, kSecond)), int(DmaError::kUnknownHandle));
}

// Hostile device.

// Writes a completion straight into queue q's ring and publishes it.
void device_complete(FakeDmaChip& chip, uint32_t q, uint64_t cookie, uint32_t status, uint32_t bytes) {
  vtrn::dma::QueueControl* c = chip.ctl(q);
  const uint32_t prod = c->cq_prod.value;
  chip.cq(q)[prod & 63] = Completion{cookie, status, bytes};
  __atomic_store_n(&c->cq_prod.value, prod + 1, __ATOMIC_RELEASE);
}

// Two chains in flight on queue 0, one on queue 1 (which must keep working).
void submit_three(Fixture* f, uint64_t h0[2], uint64_t* h1) {
  DmaSegment s = h2d(0, FakeDmaChip::kHbmBase, 128);
  DmaChain c[2] = {{&s, 1}, {&s, 1}};
  assert_int_equal(int(f->eng.submit(0, c, 2, h0)), int(DmaError::kOk));
  assert_int_equal(int(f->eng.submit(1, c, 1, h1)), int(DmaError::kOk));
}

// taken: how many of h0 (from the first) the test completed and took before
// the fault; every later one was in flight and must be flushed locally.
void expect_latched(Fixture* f, const uint64_t h0[2], DmaFault want, uint64_t h1, int taken = 0) {
  // At least one of the two was in flight: its flush status is checked below.
  assert_in_range(taken, 0, 1);
  f->eng.poll_all();
  std::string text;
  assert_int_equal(int(f->eng.fault(0, &text)), int(want));
  assert_false(text.empty());
  for (int i = 0; i < 2; ++i) {
    DmaResult r;
    const DmaError e = f->eng.try_take(h0[i], &r);
    if (i < taken) {
      assert_int_equal(int(e), int(DmaError::kUnknownHandle));
      continue;
    }
    assert_int_equal(int(e), int(DmaError::kOk));
    assert_int_equal(r.status, kErrQueueBroken);
    assert_true(r.local);
  }
  DmaSegment s = h2d(0, FakeDmaChip::kHbmBase, 128);
  DmaChain c{&s, 1};
  uint64_t h;
  assert_int_equal(int(f->eng.submit(0, &c, 1, &h)), int(DmaError::kQueueBroken));
  // Queue 1 is unaffected: the real device engine serves it.
  f->chip.serve();
  DmaResult r;
  assert_int_equal(int(f->eng.wait(h1, &r, DmaWait::kPoll, kSecond)), int(DmaError::kOk));
  assert_int_equal(r.status, kOk);
  assert_int_equal(int(f->eng.fault(1)), int(DmaFault::kNone));
}

void test_completion_for_unknown_cookie_latches_the_queue(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  device_complete(f->chip, 0, 0xdead, kOk, 128);
  expect_latched(f, h0, DmaFault::kUnknownCookie, h1);
}

void test_completion_carrying_another_queues_cookie_is_unknown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  device_complete(f->chip, 0, h1, kOk, 128);
  expect_latched(f, h0, DmaFault::kUnknownCookie, h1);
}

void test_duplicate_completion_latches_the_queue(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  device_complete(f->chip, 0, h0[0], kOk, 128);
  f->eng.poll(0);
  DmaResult r;
  assert_int_equal(int(f->eng.try_take(h0[0], &r)), int(DmaError::kOk));
  assert_int_equal(r.status, kOk);
  device_complete(f->chip, 0, h0[0], kOk, 128);
  expect_latched(f, h0, DmaFault::kDuplicateCompletion, h1, 1);
}

void test_completion_index_jump_latches_the_queue(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  __atomic_store_n(&f->chip.ctl(0)->cq_prod.value, 64 + 3, __ATOMIC_RELEASE);
  expect_latched(f, h0, DmaFault::kCqIndexJump, h1);
}

void test_device_latched_error_is_reported(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  __atomic_store_n(&f->chip.ctl(0)->error.value, kQueueSqIndexJump, __ATOMIC_RELEASE);
  expect_latched(f, h0, DmaFault::kDeviceLatched, h1);
  std::string text;
  (void)f->eng.fault(0, &text);
  assert_non_null(strstr(text.c_str(), "sq index jump"));
}

// Reset.

void test_reset_fails_in_flight_with_reset_status_and_revives_the_queue(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t h0[2], h1;
  submit_three(f, h0, &h1);
  device_complete(f->chip, 0, 0xbad, kOk, 1);
  f->eng.poll(0);
  assert_int_equal(int(f->eng.fault(0)), int(DmaFault::kUnknownCookie));
  // A second, healthy queue with chains in flight is reset too.
  assert_int_equal(int(f->eng.begin_reset(1)), int(DmaError::kOk));
  DmaResult r;
  assert_int_equal(int(f->eng.try_take(h1, &r)), int(DmaError::kOk));
  assert_int_equal(r.status, kErrReset);
  assert_true(r.local);
  DmaSegment s = h2d(0, FakeDmaChip::kHbmBase, 128);
  DmaChain c{&s, 1};
  uint64_t h;
  assert_int_equal(int(f->eng.submit(1, &c, 1, &h)), int(DmaError::kResetting));
  assert_false(f->eng.reset_done(1));
  f->chip.serve();  // the device acknowledges
  assert_true(f->eng.reset_done(1));

  f->chip.start();
  assert_int_equal(int(f->eng.reset(0, kSecond)), int(DmaError::kOk));
  assert_int_equal(int(f->eng.fault(0)), int(DmaFault::kNone));
  DmaBuffer b;
  assert_int_equal(int(f->eng.alloc(128, &b)), int(DmaError::kOk));
  memset(b.ptr, 0x5a, 128);
  for (uint32_t q : {0u, 1u}) {
    DmaResult x = run_chain(f, q, {h2d(b.offset, FakeDmaChip::kHbmBase + 4096 * q, 128)}, DmaWait::kPoll);
    assert_int_equal(x.status, kOk);
    assert_int_equal(f->chip.hbm()[4096 * q + 127], 0x5a);
  }
  drv::DmaQueueSnapshot snap;
  assert_true(f->eng.snapshot(0, &snap));
  assert_int_equal(snap.resets, 1);
  assert_int_equal(snap.host_by_status[kErrQueueBroken], 2);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_attach_rejects_depth_not_power_of_two),
      cmocka_unit_test(test_attach_rejects_layout_without_dma_region),
      cmocka_unit_test_setup_teardown(test_attach_reports_geometry_from_region, setup, teardown),
      cmocka_unit_test_setup_teardown(test_window_buffers_do_not_overlap_and_exhaust_cleanly, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_validation_refuses_bad_chains_without_touching_the_ring, setup, teardown),
      cmocka_unit_test_setup_teardown(test_raw_mode_lets_the_device_reject_and_queue_stays_healthy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_chains_round_trip_intact_from_several_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_submission_publishes_once_and_completes_all, setup, teardown),
      cmocka_unit_test_setup_teardown(test_doorbell_hold_rings_once_on_last_release, setup, teardown),
      cmocka_unit_test_setup_teardown(test_blocking_wait_wakes_on_interrupt_and_times_out_when_unserved, setup, teardown),
      cmocka_unit_test_setup_teardown(test_completion_for_unknown_cookie_latches_the_queue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_completion_carrying_another_queues_cookie_is_unknown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_completion_latches_the_queue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_completion_index_jump_latches_the_queue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_latched_error_is_reported, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reset_fails_in_flight_with_reset_status_and_revives_the_queue, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
