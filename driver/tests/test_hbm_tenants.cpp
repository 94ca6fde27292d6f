// Unit tests of whose HBM an owner is in vtrnd's HBM service
// (driver/vtrnd/hbm_service.h): a connection's, a job's and a detached
// allocation's tenant, and which connections may act on each. No chip:
// these are the service's own rules, the ones HbmFree, HbmList and DMA
// claims ask before anything reaches the firmware.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include "../vtrnd/hbm_service.h"
#include "vtrn/drv/event_loop.h"

extern "C" {
#include <cmocka.h>
}

namespace {

using drv::HbmService;

// Connections 10..19 are uid 1, 20..29 uid 2; connection 99 is the admin;
// job 7 was submitted by uid 1.
struct Fixture {
  drv::EventLoop loop;
  HbmService hbm;
  static drv::HbmServiceOptions options() {
    drv::HbmServiceOptions o;
    o.tenant_of = [](uint64_t cid) { return uint32_t(cid / 10); };
    o.is_admin = [](uint64_t cid) { return cid == 99; };
    o.job_tenant = [](uint64_t job) { return job == 7 ? 1u : HbmService::kNoTenant; };
    return o;
  }
  Fixture() : hbm(&loop, options(), [](uint64_t, Vtrn__Api__Response*) {}) {}
};

int setup(void** state) {
  *state = new Fixture();
  return 0;
}

int teardown(void** state) {
  delete static_cast<Fixture*>(*state);
  return 0;
}

void test_a_detached_allocation_belongs_to_its_uid_not_to_a_connection(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t detached = HbmService::tenant_owner(1);
  assert_int_equal(detached >> 32, HbmService::kOwnerKindTenant);
  assert_int_equal(f->hbm.owner_tenant(detached), 1);
  assert_int_equal(f->hbm.owner_tenant(HbmService::tenant_owner(65534)), 65534);
  // Unlike a connection's owner, whose tenant is the connection's uid.
  assert_int_equal(f->hbm.owner_tenant(HbmService::client_owner(25)), 2);
  assert_int_equal(f->hbm.owner_tenant(HbmService::job_owner(7)), 1);
}

void test_only_the_tenants_connections_and_the_admin_act_on_detached_memory(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const uint64_t detached = HbmService::tenant_owner(1);
  // Any connection of uid 1, including one that did not allocate it.
  assert_true(f->hbm.may_use(10, detached));
  assert_true(f->hbm.may_use(19, detached));
  assert_true(f->hbm.may_use(99, detached));
  // Never another tenant's, nor one whose uid only matches the owner id's
  // low bits under another kind.
  assert_false(f->hbm.may_use(20, detached));
  assert_false(f->hbm.may_use(29, HbmService::tenant_owner(1)));
  assert_false(f->hbm.may_use(10, HbmService::tenant_owner(2)));
  assert_false(f->hbm.may_use(10, HbmService::client_owner(1)));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_detached_allocation_belongs_to_its_uid_not_to_a_connection, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_only_the_tenants_connections_and_the_admin_act_on_detached_memory, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
