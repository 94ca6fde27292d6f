// The cross-service HBM API: forwards to the chip's one Manager. Portable
// (no logging, no panics), so other services' host tests can link it. See
// fw/hbm_service.h.
#include "fw/hbm_service.h"

namespace fw::hbm {
namespace {
Manager g_manager;
DmaPolicy g_policy(&g_manager);
}  // namespace

Manager& manager() { return g_manager; }

Status alloc(uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align, uint64_t* addr) {
  return g_manager.alloc(owner, category, bytes, align, addr);
}

Status free(uint64_t owner, uint64_t addr) { return g_manager.free(owner, addr); }

uint64_t free_owner(uint64_t owner) { return g_manager.free_owner(owner); }

Access check(uint64_t addr, uint64_t len) { return g_manager.check(addr, len); }

bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap) {
  return g_manager.serve(req, resp, arena, error, error_cap);
}

const vtrn::dma::HbmPolicy* dma_policy() { return &g_policy; }

void fill_telemetry(vtrn::hostif::Telemetry* t) {
  const Totals x = g_manager.totals();
  t->hbm_total_bytes = x.total_bytes;
  t->hbm_used_bytes = x.used_bytes;
  t->hbm_alloc_failures = x.alloc_failures;
  t->hbm_retired_pages = x.retired_pages;
  t->ecc_correctable = x.ecc_correctable;
  t->ecc_uncorrectable = x.ecc_uncorrectable;
}

}  // namespace fw::hbm
