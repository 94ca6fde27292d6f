// Unit tests of vtrnd's DMA service (driver/vtrnd/dma_service.cpp) end to
// end over a Chip in test mode whose BAR2 is an in-process fake chip
// (fake_dma_chip.h) running the real device-side queue engine in a thread:
// requests in, vtrn.api responses out, data compared, several clients.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../vtrnd/dma_service.h"
#include "fake_dma_chip.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/event_loop.h"

extern "C" {
#include <cmocka.h>
}

using fake::FakeDmaChip;

namespace {

struct Reply {
  uint64_t cid = 0, id = 0;
  Vtrn__Api__Status status = VTRN__API__STATUS__STATUS_OK;
  std::string error;
  int body = 0;
  std::vector<uint8_t> data;  // read data
  uint32_t dma_status = 0;
  uint64_t bytes = 0, descriptors = 0;
  double gbps = 0;
};

struct Fixture {
  FakeDmaChip fake{4, 64, 8u << 20};
  drv::EventLoop loop;
  std::unique_ptr<drv::Chip> chip;
  std::unique_ptr<drv::DmaService> svc;
  std::vector<Reply> replies;
};

// The daemon's hbm_claim (HbmService::claim_dma) in miniature:
// [kHbmBase + 4 MiB, + 1 MiB) is tenant 2's (connections 20..29); every
// range asked about is recorded, and every claim handed out is live until
// released.
const uint64_t kTheirs = FakeDmaChip::kHbmBase + (4u << 20);
std::vector<std::string>* g_asked = nullptr;
std::set<uint64_t> g_live_claims;
uint64_t g_next_claim = 1, g_bad_releases = 0;
// What a release sets off in the daemon: a free that waited for the claim
// may be answered before release_dma returns (its firmware answer can be
// in the ring already).
std::function<void(uint64_t claim)> g_on_release;
drv::Result<uint64_t> theirs_claim(uint64_t cid, drv::Chip*, uint64_t addr, uint64_t len, const std::string& what) {
  if (g_asked) g_asked->push_back(what);
  if (cid / 10 == 2 || addr >= kTheirs + (1u << 20) || addr + len <= kTheirs) {
    g_live_claims.insert(g_next_claim);
    return g_next_claim++;
  }
  return drv::Error(drv::Code::kPermissionDenied, what + " reaches the allocation at kTheirs, which belongs to another tenant");
}
void release_claim(drv::Chip*, uint64_t claim) {
  if (g_live_claims.erase(claim) != 1) ++g_bad_releases;
  if (g_on_release) g_on_release(claim);
}

int setup_with(void** state, bool hbm_access) {
  auto* f = new Fixture;
  drv::ChipOptions o;
  o.board.id = 0;
  o.board.bar2_mib = uint32_t(FakeDmaChip::kBar2 >> 20);
  f->chip = std::make_unique<drv::Chip>(&f->loop, o);
  drv::DmaServiceOptions so;
  so.allow_raw = true;
  so.chunk_bytes = 64 * 1024;
  // Connections 10..19 are one tenant, 20..29 another (the daemon maps a
  // connection to its uid).
  so.tenant_of = [](uint64_t cid) { return uint32_t(cid / 10); };
  so.max_queued_requests = 8;
  so.max_queued_bytes = 6u << 20;
  if (hbm_access) {
    g_live_claims.clear();
    g_bad_releases = 0;
    g_on_release = nullptr;
    so.hbm_claim = theirs_claim;
    so.hbm_release = release_claim;
  }
  f->svc = std::make_unique<drv::DmaService>(&f->loop, so, [f](uint64_t cid, Vtrn__Api__Response* r) {
    Reply x;
    x.cid = cid;
    x.id = r->id;
    x.status = r->status;
    x.error = r->error ? r->error : "";
    x.body = int(r->body_case);
    if (r->body_case == VTRN__API__RESPONSE__BODY_DMA_READ)
      x.data.assign(r->dma_read->data.data, r->dma_read->data.data + r->dma_read->data.len);
    if (r->body_case == VTRN__API__RESPONSE__BODY_DMA_COPY) {
      x.dma_status = r->dma_copy->dma_status;
      x.bytes = r->dma_copy->bytes;
    }
    if (r->body_case == VTRN__API__RESPONSE__BODY_DMA_BENCH) {
      x.bytes = r->dma_bench->bytes;
      x.descriptors = r->dma_bench->descriptors;
      x.gbps = r->dma_bench->gbytes_per_s;
    }
    f->replies.push_back(x);
  });
  f->svc->add_chip(f->chip.get());
  f->chip->attach_for_test(f->fake.bar2(), FakeDmaChip::kBar2);
  f->fake.set_ready();
  f->chip->poll_for_test();
  if (f->chip->state() != drv::ChipState::kReady || !f->chip->dma().attached()) {
    delete f;
    return -1;
  }
  f->fake.start();
  *state = f;
  return 0;
}

int setup(void** state) { return setup_with(state, false); }
int setup_tenants(void** state) { return setup_with(state, true); }

int teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  g_on_release = nullptr;
  f->fake.stop();
  f->svc.reset();
  f->chip.reset();
  delete f;
  return 0;
}

// Runs the loop until `n` replies arrived (or 5 s passed).
void run_until(Fixture* f, size_t n) {
  const uint64_t until = drv::monotonic_ns() + 5'000'000'000ull;
  while (f->replies.size() < n && drv::monotonic_ns() < until)
    assert_true(f->loop.run_once(5).ok());
  assert_true(f->replies.size() >= n);
}

const Reply* find(Fixture* f, uint64_t cid, uint64_t id) {
  for (const Reply& r : f->replies)
    if (r.cid == cid && r.id == id) return &r;
  return nullptr;
}

void write_req(Fixture* f, uint64_t cid, uint64_t id, uint64_t addr, std::vector<uint8_t>& data) {
  Vtrn__Api__DmaWriteRequest w = VTRN__API__DMA_WRITE_REQUEST__INIT;
  w.hbm_addr = addr;
  w.data.data = data.data();
  w.data.len = data.size();
  f->svc->write(cid, id, f->chip.get(), w);
}

void read_req(Fixture* f, uint64_t cid, uint64_t id, uint64_t addr, uint32_t len) {
  Vtrn__Api__DmaReadRequest r = VTRN__API__DMA_READ_REQUEST__INIT;
  r.hbm_addr = addr;
  r.length = len;
  f->svc->read(cid, id, f->chip.get(), r);
}

void test_write_then_read_round_trips_across_chunks(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::mt19937 rng(7);
  std::vector<uint8_t> data(300000 + 17);
  for (auto& b : data) b = uint8_t(rng());
  const uint64_t addr = FakeDmaChip::kHbmBase + 12345;
  write_req(f, 1, 1, addr, data);
  read_req(f, 1, 2, addr, uint32_t(data.size()));  // same client: runs after the write
  run_until(f, 2);
  const Reply* w = find(f, 1, 1);
  const Reply* r = find(f, 1, 2);
  assert_non_null(w);
  assert_non_null(r);
  assert_int_equal(w->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(r->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(r->data.size(), data.size());
  assert_memory_equal(r->data.data(), data.data(), data.size());
  assert_memory_equal(f->fake.hbm() + 12345, data.data(), data.size());
  // Every staging buffer came back.
  assert_int_equal(f->chip->dma().window_free_bytes(), f->chip->dma().window_size());
}

void test_small_read_of_second_client_is_not_stuck_behind_a_large_write(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint8_t> big(4u << 20, 0xab);
  write_req(f, 1, 1, FakeDmaChip::kHbmBase, big);
  read_req(f, 2, 1, FakeDmaChip::kHbmBase + (6u << 20), 64);
  run_until(f, 2);
  assert_int_equal(f->replies[0].cid, 2);  // the small one is answered first
  assert_int_equal(f->replies[0].status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(f->replies[1].cid, 1);
  assert_int_equal(f->replies[1].status, VTRN__API__STATUS__STATUS_OK);
}

void test_requests_outside_hbm_are_refused_before_any_dma(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint8_t> d(16, 1);
  write_req(f, 1, 1, FakeDmaChip::kHbmBase + (8u << 20) - 8, d);
  read_req(f, 1, 2, FakeDmaChip::kHbmBase - 1, 4);
  read_req(f, 1, 3, FakeDmaChip::kHbmBase, 0);
  assert_int_equal(f->replies.size(), 3);
  for (const Reply& r : f->replies) assert_int_equal(r.status, VTRN__API__STATUS__STATUS_BAD_REQUEST);
  drv::DmaQueueSnapshot s;
  assert_true(f->chip->dma().snapshot(0, &s));
  assert_int_equal(s.chains_submitted, 0);
}

void test_raw_copy_reports_the_device_verdict(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Vtrn__Api__DmaCopyRequest c = VTRN__API__DMA_COPY_REQUEST__INIT;
  c.raw = true;
  c.queue = -1;
  c.src_addr = FakeDmaChip::kHbmBase;
  c.dst_addr = FakeDmaChip::kHbmBase + (16u << 20);  // past the end of HBM
  c.length = 4096;
  c.segments = 4;
  f->svc->copy(1, 1, f->chip.get(), c);
  c.raw = false;
  c.dst_addr = FakeDmaChip::kHbmBase + (1u << 20);
  f->svc->copy(1, 2, f->chip.get(), c);  // a good chain of 4 descriptors
  run_until(f, 2);
  const Reply* bad = find(f, 1, 1);
  const Reply* good = find(f, 1, 2);
  assert_int_equal(bad->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(bad->dma_status, vtrn::dma::kErrDstRange);
  assert_int_equal(good->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(good->dma_status, vtrn::dma::kOk);
  assert_int_equal(good->bytes, 4096);
}

void test_bench_moves_the_requested_bytes(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.direction = VTRN__API__DMA_DIRECTION__DMA_DIR_H2D;
  b.transfer_bytes = 4096;
  b.depth = 16;
  b.queues = 2;
  b.batch = 8;
  b.total_bytes = 4096 * 8 * 20;
  f->svc->bench(1, 1, f->chip.get(), b);
  run_until(f, 1);
  const Reply& r = f->replies[0];
  assert_int_equal(r.status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(r.bytes, 4096 * 8 * 20);
  assert_int_equal(r.descriptors, 8 * 20);
  assert_true(r.gbps > 0);
}

void test_departed_client_work_is_dropped_and_buffers_freed(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint8_t> big(2u << 20, 1);
  write_req(f, 1, 1, FakeDmaChip::kHbmBase, big);
  f->svc->client_gone(1);
  read_req(f, 2, 1, FakeDmaChip::kHbmBase, 16);
  run_until(f, 1);
  assert_int_equal(f->replies[0].cid, 2);
  const uint64_t until = drv::monotonic_ns() + 2'000'000'000ull;
  while (f->chip->dma().in_flight_all() != 0 && drv::monotonic_ns() < until)
    assert_true(f->loop.run_once(5).ok());
  for (int i = 0; i < 5; ++i) assert_true(f->loop.run_once(2).ok());
  assert_int_equal(f->replies.size(), 1);  // nothing answered to the departed client
  assert_int_equal(f->chip->dma().window_free_bytes(), f->chip->dma().window_size());
}

void test_requests_past_the_tenant_cap_are_busy_across_its_connections(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  for (uint64_t i = 0; i < 8; ++i) read_req(f, 10 + i % 2, i + 1, FakeDmaChip::kHbmBase + i * 4096, 4096);
  assert_int_equal(f->replies.size(), 0);  // all eight queued or running
  read_req(f, 11, 100, FakeDmaChip::kHbmBase, 4096);  // a second connection of the same tenant
  assert_int_equal(f->replies.size(), 1);
  assert_int_equal(f->replies[0].status, VTRN__API__STATUS__STATUS_BUSY);
  assert_non_null(strstr(f->replies[0].error.c_str(), "uid 1 has 8 DMA requests queued (cap 8)"));
  read_req(f, 20, 1, FakeDmaChip::kHbmBase, 4096);  // another tenant is not held back
  run_until(f, 10);
  for (const Reply& r : f->replies)
    if (r.id != 100) assert_int_equal(r.status, VTRN__API__STATUS__STATUS_OK);
  // Finished work gives the cap back.
  read_req(f, 10, 200, FakeDmaChip::kHbmBase, 4096);
  run_until(f, 11);
  assert_int_equal(find(f, 10, 200)->status, VTRN__API__STATUS__STATUS_OK);
}

void test_queued_bytes_past_the_tenant_cap_are_busy_before_any_allocation(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint8_t> big(4u << 20, 0x5a);
  write_req(f, 10, 1, FakeDmaChip::kHbmBase, big);
  read_req(f, 11, 2, FakeDmaChip::kHbmBase, 3u << 20);  // 4 + 3 MiB > 6 MiB
  assert_int_equal(f->replies.size(), 1);
  assert_int_equal(f->replies[0].status, VTRN__API__STATUS__STATUS_BUSY);
  assert_non_null(strstr(f->replies[0].error.c_str(), "bytes of DMA queued"));
  read_req(f, 11, 3, FakeDmaChip::kHbmBase, 1u << 20);  // 5 MiB fits
  run_until(f, 3);
  assert_int_equal(find(f, 10, 1)->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(find(f, 11, 3)->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(find(f, 11, 3)->data.size(), 1u << 20);
}

void test_bench_with_a_total_near_two_to_the_64_runs_and_is_released(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.direction = VTRN__API__DMA_DIRECTION__DMA_DIR_H2D;
  b.transfer_bytes = 4096;
  b.depth = 16;
  b.batch = 8;
  b.total_bytes = UINT64_MAX;  // (total + per_chunk - 1) wrapped to 0 chunks: never ran, never ended
  f->svc->bench(10, 1, f->chip.get(), b);
  const uint64_t until = drv::monotonic_ns() + 2'000'000'000ull;
  drv::DmaQueueSnapshot s;
  do {
    assert_true(f->loop.run_once(2).ok());
    assert_true(f->chip->dma().snapshot(0, &s));
  } while (s.chains_completed < 64 && drv::monotonic_ns() < until);
  assert_true(s.chains_completed >= 64);
  assert_int_equal(f->replies.size(), 0);  // still running
  f->svc->client_gone(10);
  while (f->chip->dma().in_flight_all() != 0 && drv::monotonic_ns() < until + 2'000'000'000ull)
    assert_true(f->loop.run_once(5).ok());
  for (int i = 0; i < 5; ++i) assert_true(f->loop.run_once(2).ok());
  assert_int_equal(f->chip->dma().window_free_bytes(), f->chip->dma().window_size());
}

// Another tenant's HBM: every client request that reaches it, on any HBM
// side, is PERMISSION_DENIED before anything is queued; its owner and a
// service transfer (a job's staging) still reach it.
void test_another_tenants_hbm_is_refused_before_any_dma(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<std::string> asked;
  g_asked = &asked;
  std::vector<uint8_t> d(64, 0x5a);
  write_req(f, 11, 1, kTheirs + 4096, d);
  read_req(f, 11, 2, kTheirs - 32, 64);  // starts below it, reaches into it
  Vtrn__Api__DmaCopyRequest c = VTRN__API__DMA_COPY_REQUEST__INIT;
  c.queue = -1;
  c.src_addr = kTheirs;
  c.dst_addr = FakeDmaChip::kHbmBase;
  c.length = 4096;
  f->svc->copy(11, 3, f->chip.get(), c);
  c.src_addr = FakeDmaChip::kHbmBase;
  c.dst_addr = kTheirs + 8192;
  c.segments = 2;
  f->svc->copy(11, 4, f->chip.get(), c);
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.direction = VTRN__API__DMA_DIRECTION__DMA_DIR_H2D;
  b.transfer_bytes = 4096;
  b.total_bytes = 1u << 20;
  f->svc->bench(11, 5, f->chip.get(), b);  // no span: all of HBM
  const char* sides[] = {"DMA write to", "DMA read of", "DMA copy from", "DMA copy to", "DMA bench span"};
  for (size_t i = 0; i < 5; ++i) {
    const Reply* r = find(f, 11, i + 1);
    if (r == nullptr || r->status != VTRN__API__STATUS__STATUS_PERMISSION_DENIED ||
        r->error.find(sides[i]) == std::string::npos || r->error.find("belongs to another tenant") == std::string::npos)
      fail_msg("%s another tenant's HBM was not refused PERMISSION_DENIED at once: %s", sides[i],
               r == nullptr ? "no answer (queued)" : r->error.c_str());
  }
  drv::DmaQueueSnapshot s;
  assert_true(f->chip->dma().snapshot(0, &s));
  assert_int_equal(s.chains_submitted, 0);
  // The owner's write and a service transfer go through; only the client's
  // request was asked about.
  asked.clear();
  write_req(f, 21, 6, kTheirs + 4096, d);
  bool service_done = false;
  f->svc->write(f->chip.get(), kTheirs, d.data(), d.size(), [&](drv::Result<std::vector<uint8_t>> r) {
    assert_true(r.ok());
    service_done = true;
  });
  run_until(f, 6);
  const uint64_t until = drv::monotonic_ns() + 5'000'000'000ull;
  while (!service_done && drv::monotonic_ns() < until) assert_true(f->loop.run_once(5).ok());
  assert_true(service_done);
  assert_int_equal(find(f, 21, 6)->status, VTRN__API__STATUS__STATUS_OK);
  assert_memory_equal(f->fake.hbm() + (4u << 20) + 4096, d.data(), d.size());
  assert_int_equal(asked.size(), 1);
  g_asked = nullptr;
}

// What a client's request claims is held while any of it can still reach
// HBM and let go exactly once when its job ends: answered, refused half-way
// (a copy whose second side is another tenant's), or drained after its
// client left with chunks in flight.
void test_claims_are_held_until_the_job_ends_and_released_once(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint8_t> big(1u << 20, 0x33);  // 16 chunks of 64 KiB
  write_req(f, 21, 1, kTheirs, big);
  read_req(f, 21, 2, kTheirs, 256 * 1024);
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.direction = VTRN__API__DMA_DIRECTION__DMA_DIR_H2D;
  b.transfer_bytes = 4096;
  b.total_bytes = 1u << 20;
  b.hbm_addr = kTheirs;
  b.hbm_bytes = 1u << 20;
  f->svc->bench(21, 3, f->chip.get(), b);
  assert_int_equal(g_live_claims.size(), 3);  // queued or running: all held
  run_until(f, 3);
  for (uint64_t id = 1; id <= 3; ++id) assert_int_equal(find(f, 21, id)->status, VTRN__API__STATUS__STATUS_OK);
  assert_int_equal(g_live_claims.size(), 0);
  // The source side is claimed, the destination refused: nothing stays held.
  Vtrn__Api__DmaCopyRequest c = VTRN__API__DMA_COPY_REQUEST__INIT;
  c.queue = -1;
  c.src_addr = FakeDmaChip::kHbmBase;
  c.dst_addr = kTheirs;
  c.length = 4096;
  f->svc->copy(11, 4, f->chip.get(), c);
  assert_int_equal(find(f, 11, 4)->status, VTRN__API__STATUS__STATUS_PERMISSION_DENIED);
  assert_int_equal(g_live_claims.size(), 0);
  // A bench refused for an argument after its span was claimed.
  b.depth = 1u << 20;
  f->svc->bench(21, 5, f->chip.get(), b);
  assert_int_equal(find(f, 21, 5)->status, VTRN__API__STATUS__STATUS_BAD_REQUEST);
  assert_int_equal(g_live_claims.size(), 0);
  // The client leaves with chunks in flight: held until they drained.
  write_req(f, 22, 6, kTheirs, big);
  assert_true(f->chip->dma().in_flight_all() != 0);
  f->svc->client_gone(22);
  assert_int_equal(g_live_claims.size(), 1);
  const uint64_t until = drv::monotonic_ns() + 5'000'000'000ull;
  while (!g_live_claims.empty() && drv::monotonic_ns() < until) assert_true(f->loop.run_once(5).ok());
  assert_int_equal(g_live_claims.size(), 0);
  assert_int_equal(g_bad_releases, 0);
}

void test_a_transfer_is_answered_before_its_claims_are_released(void** state) {
  // A free that waited for the transfer's claim is answered once the claim
  // is released, possibly at once; the client must have the transfer's
  // answer first (a free answered before the DMA queued ahead of it would
  // say the DMA may still be moving the freed memory).
  auto* f = static_cast<Fixture*>(*state);
  std::vector<std::pair<uint64_t, size_t>> released;  // claim, replies by then
  g_on_release = [f, &released](uint64_t claim) { released.emplace_back(claim, f->replies.size()); };
  std::vector<uint8_t> big(512 * 1024, 0x5c);  // 8 chunks
  const uint64_t first = g_next_claim;
  write_req(f, 21, 1, kTheirs, big);
  read_req(f, 21, 2, kTheirs, 256 * 1024);
  Vtrn__Api__DmaBenchRequest b = VTRN__API__DMA_BENCH_REQUEST__INIT;
  b.direction = VTRN__API__DMA_DIRECTION__DMA_DIR_D2H;
  b.transfer_bytes = 4096;
  b.total_bytes = 256 * 1024;
  b.hbm_addr = kTheirs;
  b.hbm_bytes = 1u << 20;
  f->svc->bench(21, 3, f->chip.get(), b);
  run_until(f, 3);
  // One client's jobs end in order, one claim each.
  assert_int_equal(released.size(), 3);
  for (size_t k = 0; k < released.size(); ++k) {
    assert_int_equal(released[k].first, first + k);
    assert_int_equal(find(f, 21, k + 1)->status, VTRN__API__STATUS__STATUS_OK);
    assert_true(released[k].second >= k + 1);  // job k + 1 was answered before its claim went
  }
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_write_then_read_round_trips_across_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_small_read_of_second_client_is_not_stuck_behind_a_large_write, setup, teardown),
      cmocka_unit_test_setup_teardown(test_requests_outside_hbm_are_refused_before_any_dma, setup, teardown),
      cmocka_unit_test_setup_teardown(test_raw_copy_reports_the_device_verdict, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bench_moves_the_requested_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_departed_client_work_is_dropped_and_buffers_freed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_requests_past_the_tenant_cap_are_busy_across_its_connections, setup, teardown),
      cmocka_unit_test_setup_teardown(test_queued_bytes_past_the_tenant_cap_are_busy_before_any_allocation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bench_with_a_total_near_two_to_the_64_runs_and_is_released, setup, teardown),
      cmocka_unit_test_setup_teardown(test_another_tenants_hbm_is_refused_before_any_dma, setup_tenants, teardown),
      cmocka_unit_test_setup_teardown(test_claims_are_held_until_the_job_ends_and_released_once, setup_tenants,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_transfer_is_answered_before_its_claims_are_released, setup_tenants,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
