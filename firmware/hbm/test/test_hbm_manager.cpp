// Host unit tests of fw::hbm::Manager (firmware/hbm): owner mapping, the
// access check the DMA policy uses, the ECC model, lifespans and quotas,
// and the vtrn.ctrl handlers through the firmware's dispatcher (its
// validator and Status mapping), including that the largest answers fit one
// control slot, and stitching through a checked shadow map standing in for
// fw::mmu (a stitched allocation listed, counted and hit by ECC at its
// remap-window address). The allocator itself has its own tests in
// common/hbm.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <algorithm>
#include <utility>
#include <vector>

#include "../../../common/hbm/test/hbm_shadow_map.h"
#include "fw/ctrl_dispatch.h"
#include "fw/hbm_manager.h"
#include "vtrn/hostif.h"

namespace {

using fw::hbm::Access;
using fw::hbm::Manager;
using fw::hbm::Status;

constexpr uint64_t kBase = 0x44000000;
constexpr uint64_t kPage = 64 * 1024;
constexpr uint64_t kStack = 16ull << 20;
constexpr uint64_t kClient1 = fw::hbm::client_owner(1);
constexpr uint64_t kClient2 = fw::hbm::client_owner(2);

struct Fixture {
  Manager m;
  std::vector<uint64_t> arena;
  alignas(16) uint8_t pb_buf[16384];
  fw::pb::Arena pb{pb_buf, sizeof pb_buf};
  char error[128] = {};
};

vtrn::board::HbmGeometry geometry() {
  vtrn::board::HbmGeometry g;
  g.stacks = 2;
  g.bytes_per_stack = kStack;
  g.page_bytes = uint32_t(kPage);
  g.channels = 8;
  return g;
}

int setup(void** state) {
  auto* f = new Fixture;
  const size_t need = Manager::arena_bytes(geometry(), kBase);
  if (need == 0) return -1;
  f->arena.assign(need / 8 + 1, 0);
  if (f->m.init(geometry(), kBase, f->arena.data(), f->arena.size() * 8) != Status::kOk) return -1;
  *state = f;
  return 0;
}

int teardown(void** state) {
  delete static_cast<Fixture*>(*state);
  return 0;
}

Vtrn__Ctrl__Response serve(Fixture* f, const Vtrn__Ctrl__Request& req) {
  Vtrn__Ctrl__Response resp = VTRN__CTRL__RESPONSE__INIT;
  f->error[0] = '\0';
  assert_true(fw::ctrl::serve(f->m, req, 0, f->pb, &resp, f->error, sizeof f->error));
  return resp;
}

void test_owner_ids_map_to_allocator_keys_and_back(void**) {
  uint32_t key = 0;
  assert_true(fw::hbm::owner_key(0, &key));
  assert_int_equal(key, 0);
  assert_true(fw::hbm::owner_key(fw::hbm::client_owner(7), &key));
  assert_int_equal(fw::hbm::owner_from_key(key), fw::hbm::client_owner(7));
  assert_true(fw::hbm::owner_key(fw::hbm::job_owner((1u << 28) - 1), &key));
  assert_int_equal(fw::hbm::owner_from_key(key), fw::hbm::job_owner((1u << 28) - 1));
  assert_int_not_equal(key, vtrn::hbm::kAnyOwner);
  // A tenant (a detached allocation), uid 0 included, is its own owner.
  assert_true(fw::hbm::owner_key(fw::hbm::tenant_owner(0), &key));
  assert_int_equal(fw::hbm::owner_from_key(key), fw::hbm::tenant_owner(0));
  assert_true(fw::hbm::owner_key(fw::hbm::tenant_owner(65534), &key));
  assert_int_equal(fw::hbm::owner_from_key(key), fw::hbm::tenant_owner(65534));
  assert_int_not_equal(key, vtrn::hbm::kAnyOwner);
  // Ids that would alias another owner, unknown kinds, firmware with an id.
  assert_false(fw::hbm::owner_key(fw::hbm::client_owner(1u << 28), &key));
  assert_false(fw::hbm::owner_key(fw::hbm::tenant_owner(1u << 28), &key));
  assert_false(fw::hbm::owner_key(4ull << 32, &key));
  assert_false(fw::hbm::owner_key(5, &key));
}

void test_check_allows_only_ranges_inside_one_live_allocation(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t a = 0, b = 0;
  assert_int_equal(f->m.alloc(kClient1, 0, 3 * kPage, 0, &a), Status::kOk);
  assert_int_equal(f->m.alloc(kClient1, 0, kPage, 0, &b), Status::kOk);
  assert_int_equal(f->m.check(a, 3 * kPage), Access::kOk);
  assert_int_equal(f->m.check(a + 100, 5000), Access::kOk);
  assert_int_equal(f->m.check(a, 3 * kPage + 1), Access::kNotAllocated);
  assert_int_equal(f->m.check(kBase - 4096, 16), Access::kNotAllocated);
  const fw::hbm::DmaPolicy policy(&f->m);
  assert_int_equal(policy.check(a, 64), vtrn::dma::kOk);
  assert_int_equal(f->m.free(kClient1, a), Status::kOk);
  assert_int_equal(f->m.check(a, 64), Access::kNotAllocated);
  assert_int_equal(policy.check(a, 64), vtrn::dma::kErrNotAllocated);
}

void test_check_with_an_owner_allows_only_that_owners_allocations(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t a = 0, b = 0;
  assert_int_equal(f->m.alloc(kClient1, 0, 2 * kPage, 0, &a), Status::kOk);
  assert_int_equal(f->m.alloc(kClient2, 0, 2 * kPage, 0, &b), Status::kOk);
  assert_int_equal(f->m.check(a + 100, kPage, kClient1), Access::kOk);
  assert_int_equal(f->m.check(b, 2 * kPage, kClient2), Access::kOk);
  assert_int_equal(f->m.check(b, 64, kClient1), Access::kNotOwner);
  assert_int_equal(f->m.check(a + kPage, 64, kClient2), Access::kNotOwner);
  // No owner stands for another: not the firmware, not a job of the same id.
  assert_int_equal(f->m.check(a, 64, fw::hbm::kOwnerFirmware), Access::kNotOwner);
  assert_int_equal(f->m.check(a, 64, fw::hbm::job_owner(1)), Access::kNotOwner);
  // Not inside one allocation stays not allocated, whoever asks.
  const uint64_t lo = a < b ? a : b;
  assert_int_equal(f->m.check(lo + kPage, 2 * kPage, kClient1), Access::kNotAllocated);
  assert_int_equal(f->m.check(kBase - 4096, 16, kClient1), Access::kNotAllocated);
  // Another owner's poisoned allocation is another owner's first; one's own
  // is an ECC error.
  fw::hbm::EccRecord r;
  assert_int_equal(f->m.inject_ecc(b + kPage, true, &r), Status::kOk);
  assert_int_equal(f->m.check(b, 64, kClient1), Access::kNotOwner);
  assert_int_equal(f->m.check(b, 64, kClient2), Access::kEccError);
  // Freed: nobody's, so not allocated for its former owner too.
  assert_int_equal(f->m.free(kClient1, a), Status::kOk);
  assert_int_equal(f->m.check(a, 64, kClient1), Access::kNotAllocated);
}

void test_unchecked_dma_allows_unallocated_ranges_but_never_retired_pages(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const fw::hbm::DmaPolicy policy(&f->m);
  assert_int_equal(policy.check(kBase, 64), vtrn::dma::kErrNotAllocated);
  Vtrn__Ctrl__HbmImportRetiredRequest ir = VTRN__CTRL__HBM_IMPORT_RETIRED_REQUEST__INIT;
  uint64_t off = 3 * kPage;
  ir.n_offsets = 1;
  ir.offsets = &off;
  ir.dma_unchecked = true;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_IMPORT_RETIRED;
  req.hbm_import_retired = &ir;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.hbm_import_retired->result, 0);
  assert_int_equal(policy.check(kBase, 64), vtrn::dma::kOk);
  assert_int_equal(policy.check(kBase + 3 * kPage + 8, 64), vtrn::dma::kErrEcc);
  assert_int_equal(policy.check(kBase + 2 * kPage, 2 * kPage), vtrn::dma::kErrEcc);
  // The next boot's import decides again; the default is checked.
  ir.dma_unchecked = false;
  ir.n_offsets = 0;
  resp = serve(f, req);
  assert_int_equal(policy.check(kBase, 64), vtrn::dma::kErrNotAllocated);
}

void test_free_by_another_owner_is_refused(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t a = 0;
  assert_int_equal(f->m.alloc(kClient1, 2, kPage, 0, &a), Status::kOk);
  assert_int_equal(f->m.free(kClient2, a), Status::kNotOwner);
  assert_int_equal(f->m.free(kClient1, a), Status::kOk);
  assert_int_equal(f->m.alloc(fw::hbm::client_owner(1u << 28), 0, kPage, 0, &a),
                   Status::kBadArgument);
  assert_int_equal(f->m.alloc(kClient1, 5, kPage, 0, &a), Status::kBadArgument);
}

void test_uncorrectable_error_retires_page_and_poisons_its_allocation(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t a = 0;
  assert_int_equal(f->m.alloc(kClient1, 0, 4 * kPage, 0, &a), Status::kOk);
  fw::hbm::EccRecord r;
  assert_int_equal(f->m.inject_ecc(a + 2 * kPage + 12, true, &r), Status::kOk);
  assert_true(r.page_retired);
  assert_true(r.allocation_poisoned);
  assert_int_equal(r.allocation_addr, a);
  assert_int_equal(r.owner, kClient1);
  assert_int_equal(r.page_offset, a - kBase + 2 * kPage);
  assert_int_equal(r.retired_pages, 1);
  // The whole allocation is refused now, not only the bad page.
  assert_int_equal(f->m.check(a, 64), Access::kEccError);
  assert_int_equal(fw::hbm::DmaPolicy(&f->m).check(a, 64), vtrn::dma::kErrEcc);
  // Freed: the page stays out of circulation and still reads as ECC.
  assert_int_equal(f->m.free(kClient1, a), Status::kOk);
  assert_int_equal(f->m.check(a + 2 * kPage, 16), Access::kEccError);
  assert_int_equal(f->m.check(a, 16), Access::kNotAllocated);
  // A second error on the same page retires nothing new.
  assert_int_equal(f->m.inject_ecc(a + 2 * kPage, true, &r), Status::kAlreadyRetired);
  assert_false(r.page_retired);
  const fw::hbm::Totals t = f->m.totals();
  assert_int_equal(t.ecc_uncorrectable, 2);
  assert_int_equal(t.retired_pages, 1);
  // Never handed out again: allocate everything that is left.
  uint64_t x = 0;
  while (f->m.alloc(kClient2, 0, kPage, 0, &x) == Status::kOk) {
    assert_false(x <= a + 2 * kPage && a + 2 * kPage < x + kPage);
  }
  assert_int_equal(f->m.totals().used_bytes, 2 * kStack - kPage);
}

void test_correctable_errors_are_counted_per_stack(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  fw::hbm::EccRecord r;
  assert_int_equal(f->m.inject_ecc(kBase + 5, false, &r), Status::kOk);
  assert_int_equal(f->m.inject_ecc(kBase + kStack + 5, false, &r), Status::kOk);
  assert_int_equal(f->m.inject_ecc(kBase + kStack + kPage, false, &r), Status::kOk);
  assert_int_equal(r.stack, 1);
  assert_int_equal(r.correctable_on_stack, 2);
  assert_false(r.page_retired);
  assert_int_equal(f->m.totals().ecc_correctable, 3);
  assert_int_equal(f->m.totals().retired_pages, 0);
  assert_int_equal(f->m.inject_ecc(kBase + 2 * kStack, false, &r), Status::kOutOfRange);
  // Records are queued for the glue in order; the out-of-range one is not.
  uint32_t n = 0;
  while (f->m.take_ecc(&r)) ++n;
  assert_int_equal(n, 3);
}

void test_ecc_queue_keeps_the_newest_records(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  fw::hbm::EccRecord r;
  for (uint64_t i = 0; i < 20; ++i) (void)f->m.inject_ecc(kBase + i * kPage, false, &r);
  uint64_t first = 0, n = 0;
  while (f->m.take_ecc(&r)) {
    if (n++ == 0) first = r.addr;
  }
  assert_int_equal(n, 8);
  assert_int_equal(first, kBase + 12 * kPage);
}

void test_free_owner_frees_everything_the_owner_held(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t a = 0;
  for (int i = 0; i < 5; ++i) assert_int_equal(f->m.alloc(kClient1, 1, kPage * 3, 0, &a), Status::kOk);
  assert_int_equal(f->m.alloc(kClient2, 0, kPage, 0, &a), Status::kOk);
  uint32_t n = 0;
  uint64_t bytes = 0;
  assert_int_equal(f->m.free_owner(kClient1, &bytes, &n), Status::kOk);
  assert_int_equal(bytes, 15 * kPage);
  assert_int_equal(n, 5);
  assert_int_equal(f->m.totals().used_bytes, kPage);
  assert_int_equal(f->m.free_owner(kClient1, &bytes, &n), Status::kOk);
  assert_int_equal(bytes, 0);
  assert_int_equal(n, 0);
  assert_int_equal(f->m.free_owner(7ull << 32, &bytes, &n), Status::kBadArgument);
  assert_int_equal(bytes, 0);
  assert_int_equal(f->m.allocator().audit(), Status::kOk);
}

uint64_t g_pinned_owner = 0;  // the owner the test's pin check says is pinned
bool pin_test_owner(uint64_t owner) { return g_pinned_owner != 0 && owner == g_pinned_owner; }

Vtrn__Ctrl__Response serve_free(Fixture* f, uint64_t owner, uint64_t addr, bool any_owner) {
  static Vtrn__Ctrl__HbmFreeRequest fr;
  fr = VTRN__CTRL__HBM_FREE_REQUEST__INIT;
  fr.owner = owner;
  fr.addr = addr;
  fr.any_owner = any_owner;
  static Vtrn__Ctrl__Request req;
  req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_FREE;
  req.hbm_free = &fr;
  return serve(f, req);
}

// Issue 15: a job's buffers stay until the chip has ended the job, whoever
// asks (the owner, any_owner, free_owner), and go once it has.
void test_pinned_owner_memory_is_freed_by_nobody_until_unpinned(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t job = fw::hbm::job_owner(9);
  uint64_t a = 0, b = 0;
  assert_int_equal(f->m.alloc(job, 0, kPage, 0, &a), Status::kOk);
  assert_int_equal(f->m.alloc(job, 0, 2 * kPage, 0, &b), Status::kOk);
  f->m.set_pin_check(&pin_test_owner);
  g_pinned_owner = job;
  assert_true(f->m.pinned(job));
  assert_false(f->m.pinned(kClient1));
  assert_int_equal(f->m.free(job, a), Status::kPinned);
  assert_int_equal(serve_free(f, job, a, false).hbm_free->result, uint32_t(Status::kPinned));
  Vtrn__Ctrl__Response resp = serve_free(f, 0, b, true);
  assert_int_equal(resp.hbm_free->result, uint32_t(Status::kPinned));
  assert_int_equal(resp.hbm_free->owner, job);  // names whose it is
  uint64_t bytes = 1;
  uint32_t n = 1;
  assert_int_equal(f->m.free_owner(job, &bytes, &n), Status::kPinned);
  assert_int_equal(bytes, 0);
  assert_int_equal(n, 0);
  Vtrn__Ctrl__HbmFreeOwnerRequest fo = VTRN__CTRL__HBM_FREE_OWNER_REQUEST__INIT;
  fo.owner = job;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_FREE_OWNER;
  req.hbm_free_owner = &fo;
  resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(resp.hbm_free_owner->result, uint32_t(Status::kPinned));
  assert_int_equal(f->m.totals().used_bytes, 3 * kPage);  // nothing went
  // Another owner is not held by the pin.
  uint64_t c = 0;
  assert_int_equal(f->m.alloc(kClient1, 0, kPage, 0, &c), Status::kOk);
  assert_int_equal(f->m.free(kClient1, c), Status::kOk);
  // The job ended: its owner's memory goes.
  g_pinned_owner = 0;
  resp = serve(f, req);
  assert_int_equal(resp.hbm_free_owner->result, 0);
  assert_int_equal(resp.hbm_free_owner->bytes, 3 * kPage);
  assert_int_equal(resp.hbm_free_owner->allocations, 2);
  assert_int_equal(f->m.totals().used_bytes, 0);
  f->m.set_pin_check(nullptr);
  assert_int_equal(f->m.allocator().audit(), Status::kOk);
}

void test_alloc_request_sets_quota_and_refuses_beyond_it(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  ar.owner = kClient1;
  ar.bytes = 3 * kPage;
  ar.set_quota = true;
  ar.quota_bytes = 4 * kPage;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_ALLOC;
  req.hbm_alloc = &ar;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(resp.body_case, VTRN__CTRL__RESPONSE__BODY_HBM_ALLOC);
  assert_int_equal(resp.hbm_alloc->result, 0);
  assert_int_equal(resp.hbm_alloc->bytes, 3 * kPage);
  assert_int_equal(resp.hbm_alloc->owner_used_bytes, 3 * kPage);
  assert_int_equal(resp.hbm_alloc->owner_quota_bytes, 4 * kPage);
  ar.bytes = 2 * kPage;
  resp = serve(f, req);
  assert_int_equal(resp.hbm_alloc->result, uint32_t(Status::kQuota));
  assert_int_equal(resp.hbm_alloc->owner_used_bytes, 3 * kPage);
  ar.bytes = kPage / 2;  // rounds up to one page: exactly at the quota
  resp = serve(f, req);
  assert_int_equal(resp.hbm_alloc->result, 0);
  assert_int_equal(f->m.totals().alloc_failures, 1);
}

std::vector<std::pair<uint64_t, uint64_t>> g_scrubbed;  // (addr, bytes) per scrub call
void record_scrub(uint64_t addr, uint64_t bytes) { g_scrubbed.emplace_back(addr, bytes); }

void test_every_new_allocation_is_scrubbed_whole_before_it_is_handed_out(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  g_scrubbed.clear();
  f->m.set_scrub(&record_scrub);
  // Through the service API (jobs' buffers): the granted pages, not the ask.
  uint64_t a = 0;
  assert_int_equal(f->m.alloc(kClient1, 0, kPage + 1, 0, &a), Status::kOk);
  assert_int_equal(g_scrubbed.size(), 1);
  assert_int_equal(g_scrubbed[0].first, a);
  assert_int_equal(g_scrubbed[0].second, 2 * kPage);
  // Through the vtrn.ctrl handler (clients' allocations).
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  ar.owner = kClient2;
  ar.bytes = 3 * kPage;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_ALLOC;
  req.hbm_alloc = &ar;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.hbm_alloc->result, 0);
  assert_int_equal(g_scrubbed.size(), 2);
  assert_int_equal(g_scrubbed[1].first, resp.hbm_alloc->addr);
  assert_int_equal(g_scrubbed[1].second, 3 * kPage);
  assert_int_equal(resp.hbm_alloc->bytes, 3 * kPage);
  // A refused allocation scrubs nothing.
  ar.bytes = 4 * kStack;
  resp = serve(f, req);
  assert_int_not_equal(resp.hbm_alloc->result, 0);
  uint64_t b = 0;
  assert_int_not_equal(f->m.alloc(kClient1, 0, 4 * kStack, 0, &b), Status::kOk);
  assert_int_equal(g_scrubbed.size(), 2);
}

void test_requests_with_bad_owner_category_or_list_size_are_bad_requests(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  ar.owner = 9ull << 32;
  ar.bytes = kPage;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_ALLOC;
  req.hbm_alloc = &ar;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(f->error, "hbm_alloc.owner"));
  ar.owner = kClient1;
  ar.category = 9;
  resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(f->error, "hbm_alloc.category"));

  Vtrn__Ctrl__HbmListRequest lr = VTRN__CTRL__HBM_LIST_REQUEST__INIT;
  lr.max = fw::hbm::kMaxListEntries + 1;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_LIST;
  req.hbm_list = &lr;
  resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(f->error, "hbm_list.max"));

  uint64_t offs[2] = {0, 2 * kStack};
  Vtrn__Ctrl__HbmImportRetiredRequest ir = VTRN__CTRL__HBM_IMPORT_RETIRED_REQUEST__INIT;
  ir.n_offsets = 2;
  ir.offsets = offs;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_IMPORT_RETIRED;
  req.hbm_import_retired = &ir;
  resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_BAD_REQUEST);
  assert_non_null(strstr(f->error, "offsets[1]"));
  assert_int_equal(f->m.totals().retired_pages, 0);  // nothing applied

  Vtrn__Ctrl__Request other = VTRN__CTRL__REQUEST__INIT;
  other.body_case = VTRN__CTRL__REQUEST__BODY_PING;
  Vtrn__Ctrl__Response r2 = VTRN__CTRL__RESPONSE__INIT;
  assert_false(fw::ctrl::serve(f->m, other, 0, f->pb, &r2, f->error, sizeof f->error));
}

void test_import_then_export_round_trips_the_retired_list(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  uint64_t offs[3] = {5 * kPage, kStack + 7 * kPage, 5 * kPage};
  Vtrn__Ctrl__HbmImportRetiredRequest ir = VTRN__CTRL__HBM_IMPORT_RETIRED_REQUEST__INIT;
  ir.n_offsets = 3;
  ir.offsets = offs;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_IMPORT_RETIRED;
  req.hbm_import_retired = &ir;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_OK);
  assert_int_equal(resp.hbm_import_retired->result, 0);
  assert_int_equal(resp.hbm_import_retired->retired_pages, 2);
  // Misaligned: refused by the allocator, reported in result.
  uint64_t bad = 5 * kPage + 1;
  ir.n_offsets = 1;
  ir.offsets = &bad;
  resp = serve(f, req);
  assert_int_not_equal(resp.hbm_import_retired->result, 0);

  Vtrn__Ctrl__HbmRetiredRequest rr = VTRN__CTRL__HBM_RETIRED_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_RETIRED;
  req.hbm_retired = &rr;
  resp = serve(f, req);
  assert_int_equal(resp.hbm_retired->n_offsets, 2);
  assert_int_equal(resp.hbm_retired->offsets[0], 5 * kPage);
  assert_int_equal(resp.hbm_retired->offsets[1], kStack + 7 * kPage);
  assert_int_equal(f->m.check(kBase + 5 * kPage, 1), Access::kEccError);
}

void test_list_pages_through_allocations_in_address_order(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  std::vector<uint64_t> addrs;
  for (int i = 0; i < 100; ++i) {
    uint64_t a = 0;
    assert_int_equal(f->m.alloc(fw::hbm::job_owner(uint32_t(i)), uint32_t(i % 5), kPage, 0, &a),
                     Status::kOk);
    addrs.push_back(a);
  }
  std::vector<uint64_t> seen;
  Vtrn__Ctrl__HbmListRequest lr = VTRN__CTRL__HBM_LIST_REQUEST__INIT;
  lr.max = fw::hbm::kMaxListEntries;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_LIST;
  req.hbm_list = &lr;
  for (int pages = 0; pages < 10; ++pages) {
    f->pb.reset();
    Vtrn__Ctrl__Response resp = serve(f, req);
    assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_OK);
    // Every page of the list fits one control slot.
    assert_true(vtrn__ctrl__response__get_packed_size(&resp) <= vtrn::hostif::kCtrlMaxPayload);
    for (size_t i = 0; i < resp.hbm_list->n_allocations; ++i) {
      const Vtrn__Ctrl__HbmAllocation* e = resp.hbm_list->allocations[i];
      assert_int_equal(e->owner >> 32, fw::hbm::kOwnerKindJob);
      seen.push_back(e->addr);
    }
    if (!resp.hbm_list->more) break;
    lr.from_addr = resp.hbm_list->next_addr;
  }
  std::sort(addrs.begin(), addrs.end());
  assert_true(seen == addrs);
}

void test_largest_stats_and_retired_answers_fit_one_control_slot(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  fw::hbm::EccRecord r;
  for (uint32_t i = 0; i < fw::hbm::kLimits.max_retired_pages; ++i)
    assert_int_equal(f->m.inject_ecc(kBase + 2 * kStack - (i + 1) * kPage, true, &r), Status::kOk);
  assert_int_equal(f->m.inject_ecc(kBase, true, &r), Status::kTooManyRetired);
  Vtrn__Ctrl__HbmRetiredRequest rr = VTRN__CTRL__HBM_RETIRED_REQUEST__INIT;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_RETIRED;
  req.hbm_retired = &rr;
  Vtrn__Ctrl__Response resp = serve(f, req);
  assert_int_equal(resp.hbm_retired->n_offsets, fw::hbm::kLimits.max_retired_pages);
  assert_true(vtrn__ctrl__response__get_packed_size(&resp) <= vtrn::hostif::kCtrlMaxPayload);
  f->pb.reset();
  Vtrn__Ctrl__HbmStatsRequest sr = VTRN__CTRL__HBM_STATS_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_STATS;
  req.hbm_stats = &sr;
  resp = serve(f, req);
  assert_int_equal(resp.hbm_stats->stats->retired_pages, fw::hbm::kLimits.max_retired_pages);
  assert_int_equal(resp.hbm_stats->stats->n_retired_per_stack, 2);
  assert_int_equal(resp.hbm_stats->stats->retired_per_stack[1], fw::hbm::kLimits.max_retired_pages);
  assert_int_equal(resp.hbm_stats->stats->total_bytes, 2 * kStack);
  assert_int_equal(resp.hbm_stats->stats->hbm_base, kBase);
  assert_true(vtrn__ctrl__response__get_packed_size(&resp) <= vtrn::hostif::kCtrlMaxPayload);
}

constexpr uint64_t kRemapBase = 0x60'0000'0000ull;

void test_stitched_allocation_is_listed_counted_and_retired_through_its_remap_address(void**) {
  vtrn::hbm::test::ShadowMap shadow;
  shadow.page = kPage;
  shadow.hbm_base = kBase;
  shadow.hbm_bytes = 2 * kStack;
  shadow.remap_base = kRemapBase;
  shadow.remap_bytes = 8 * kStack;
  const vtrn::hbm::Mapper mapper = shadow.mapper();
  const fw::hbm::Remap remap{&mapper, kRemapBase, 8 * kStack};
  Fixture f;
  const size_t need = Manager::arena_bytes(geometry(), kBase, remap);
  assert_true(need > Manager::arena_bytes(geometry(), kBase));
  f.arena.assign(need / 8 + 1, 0);
  assert_int_equal(f.m.init(geometry(), kBase, f.arena.data(), f.arena.size() * 8, remap), Status::kOk);
  // 1 MiB pieces over all of HBM, every other one freed: 1 MiB holes.
  std::vector<uint64_t> pieces;
  uint64_t a = 0;
  while (f.m.alloc(kClient1, 0, 1 << 20, 0, &a) == Status::kOk) pieces.push_back(a);
  assert_int_equal(pieces.size(), 2 * kStack >> 20);
  for (size_t i = 0; i < pieces.size(); i += 2) assert_int_equal(f.m.free(kClient1, pieces[i]), Status::kOk);
  uint64_t s = 0;
  assert_int_equal(f.m.alloc(kClient2, 0, 3 << 20, 0, &s), Status::kOk);
  assert_true(s >= kRemapBase && s < kRemapBase + 8 * kStack);
  assert_int_equal(shadow.mapped_bytes, 3 << 20);
  assert_int_equal(f.m.check(s + (2 << 20), 4096), Access::kOk);
  assert_int_equal(f.m.check(s + (2 << 20), 4096, kClient2), Access::kOk);
  assert_int_equal(f.m.check(s + (2 << 20), 4096, kClient1), Access::kNotOwner);
  // Listed as stitched; the stats show both fragmentation figures.
  Vtrn__Ctrl__HbmListRequest lr = VTRN__CTRL__HBM_LIST_REQUEST__INIT;
  lr.from_addr = kRemapBase;
  lr.max = 4;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_LIST;
  req.hbm_list = &lr;
  Vtrn__Ctrl__Response resp = serve(&f, req);
  assert_int_equal(resp.hbm_list->n_allocations, 1);
  assert_int_equal(resp.hbm_list->allocations[0]->addr, s);
  assert_true(resp.hbm_list->allocations[0]->stitched);
  assert_int_equal(resp.hbm_list->allocations[0]->extents, 3);
  f.pb.reset();
  Vtrn__Ctrl__HbmStatsRequest sr = VTRN__CTRL__HBM_STATS_REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_STATS;
  req.hbm_stats = &sr;
  resp = serve(&f, req);
  assert_int_equal(resp.hbm_stats->stats->remap_base, kRemapBase);
  assert_int_equal(resp.hbm_stats->stats->remap_bytes, 8 * kStack);
  assert_int_equal(resp.hbm_stats->stats->stitched_allocations, 1);
  assert_int_equal(resp.hbm_stats->stats->stitched_extents, 3);
  assert_int_equal(resp.hbm_stats->stats->largest_contiguous_free_bytes, 1 << 20);
  assert_true(resp.hbm_stats->stats->largest_free_bytes > resp.hbm_stats->stats->largest_contiguous_free_bytes);
  assert_true(resp.hbm_stats->stats->fragmentation < resp.hbm_stats->stats->contiguous_fragmentation);
  // ECC at the remap address: the physical page behind it is retired.
  fw::hbm::EccRecord r;
  assert_int_equal(f.m.inject_ecc(s + (2 << 20) + 100, true, &r), Status::kOk);
  assert_true(r.page_retired && r.allocation_poisoned);
  assert_int_equal(r.allocation_addr, s);
  assert_int_equal(r.owner, kClient2);
  assert_true(r.page_offset < 2 * kStack);
  assert_int_equal(f.m.check(s, 16), Access::kEccError);
  assert_int_equal(f.m.check(kBase + r.page_offset, 16), Access::kEccError);
  assert_int_equal(f.m.inject_ecc(kRemapBase + 7 * kStack, true, &r), Status::kNotFound);
  // Unchecked DMA never reaches an unmapped part of the remap window.
  f.m.set_dma_unchecked(true);
  const fw::hbm::DmaPolicy policy(&f.m);
  assert_int_equal(policy.check(kRemapBase + 7 * kStack, 64), vtrn::dma::kErrNotAllocated);
  assert_int_equal(policy.check(kBase + kPage, 64), vtrn::dma::kOk);  // a freed 1 MiB hole
  f.m.set_dma_unchecked(false);
  uint64_t bytes = 0;
  assert_int_equal(f.m.free_owner(kClient2, &bytes), Status::kOk);
  assert_int_equal(bytes, 3 << 20);
  assert_int_equal(shadow.mapped_bytes, 0);
  assert_int_equal(shadow.violations, 0);
  assert_int_equal(f.m.allocator().audit(), Status::kOk);
}

void test_uninitialised_manager_refuses_everything(void**) {
  Manager m;
  uint64_t a = 0;
  assert_int_equal(m.alloc(kClient1, 0, kPage, 0, &a), Status::kNotInitialised);
  assert_int_equal(m.check(kBase, 1), Access::kNotAllocated);
  uint64_t bytes = 1;
  assert_int_equal(m.free_owner(kClient1, &bytes), Status::kNotInitialised);
  assert_int_equal(bytes, 0);
  alignas(16) uint8_t buf[1024];
  fw::pb::Arena pb(buf, sizeof buf);
  char err[96];
  Vtrn__Ctrl__HbmStatsRequest sr = VTRN__CTRL__HBM_STATS_REQUEST__INIT;
  Vtrn__Ctrl__Request req = VTRN__CTRL__REQUEST__INIT;
  req.body_case = VTRN__CTRL__REQUEST__BODY_HBM_STATS;
  req.hbm_stats = &sr;
  Vtrn__Ctrl__Response resp = VTRN__CTRL__RESPONSE__INIT;
  assert_true(fw::ctrl::serve(m, req, 0, pb, &resp, err, sizeof err));
  assert_int_equal(resp.status, VTRN__CTRL__STATUS__STATUS_BUSY);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_owner_ids_map_to_allocator_keys_and_back),
      cmocka_unit_test_setup_teardown(test_check_allows_only_ranges_inside_one_live_allocation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_with_an_owner_allows_only_that_owners_allocations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unchecked_dma_allows_unallocated_ranges_but_never_retired_pages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_by_another_owner_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_uncorrectable_error_retires_page_and_poisons_its_allocation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_correctable_errors_are_counted_per_stack, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ecc_queue_keeps_the_newest_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_owner_frees_everything_the_owner_held, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pinned_owner_memory_is_freed_by_nobody_until_unpinned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alloc_request_sets_quota_and_refuses_beyond_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_requests_with_bad_owner_category_or_list_size_are_bad_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_then_export_round_trips_the_retired_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_pages_through_allocations_in_address_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_largest_stats_and_retired_answers_fit_one_control_slot, setup, teardown),
      cmocka_unit_test(test_stitched_allocation_is_listed_counted_and_retired_through_its_remap_address),
      cmocka_unit_test(test_uninitialised_manager_refuses_everything),
      cmocka_unit_test_setup_teardown(test_every_new_allocation_is_scrubbed_whole_before_it_is_handed_out, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
