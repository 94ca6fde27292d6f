// vtrnd's HBM service: the HbmAlloc / HbmFree / HbmStats / HbmList /
// HbmInjectEcc requests of vtrn.api, and the async API other vtrnd services
// (jobs) use for device memory. The firmware's manager (firmware/hbm) does
// the allocating; this side adds what only the host can know:
//  - owners: a client connection is owner (1<<32)|cid, a job (2<<32)|job id
//    (the jobs service picks those); everything a client owned is freed on
//    the chip when the connection closes (client_gone -> HbmFreeOwner);
//  - detached allocations (HbmAllocRequest.detached): owner (3<<32)|uid,
//    the tenant's rather than the connection's, as a detached job is. No
//    connection's close frees them; any connection of the tenant, or the
//    admin, frees one by naming it (HbmFree), another tenant neither frees
//    nor lists it, and they count against the tenant's quota like the rest
//    (the bound on how much: without --hbm-quota-mib a tenant may keep HBM
//    detached as it may keep it with an open connection). The chip leaving
//    READY drops them with everything else;
//  - quotas: each tenant (uid; see tenant_of) may hold at most
//    `client_quota_bytes` per chip (vtrnd --hbm-quota-mib) over all its
//    connections and its jobs' buffers, so a new connection is not new
//    quota and a job cannot hold what its submitter may not. An owner
//    without a tenant (a collective, a departed connection, any owner when
//    tenant_of is unset) is charged alone. vtrnd refuses beyond it before
//    asking the chip, counting requests still in flight, and also sets the
//    quota per owner in the firmware allocator as a second bound;
//  - the persistent retired-page list (retired_store.h): loaded and pushed
//    to the firmware each time the chip reaches READY, before any HBM
//    request is let through (they wait for it), and rewritten whenever the
//    firmware reports a newly retired page (inject response or ECC event).
//
// When the chip leaves READY (reset, failure, halt) every allocation on it is
// gone with the firmware's memory: the bookkeeping is dropped and waiting
// requests fail with CHIP_NOT_READY.
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "vtrn/drv/chip.h"
#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/drv/fw_call.h"
#include "vtrn_api.pb-c.h"

namespace drv {

struct HbmServiceOptions {
  uint64_t client_quota_bytes = 0;  // per client per chip; 0 = no quota
  std::string store_root;           // retired_store_root(); empty = no persistent store
  std::string board_model;
  // DMA may touch HBM outside live allocations (vtrnd --hbm-dma-unchecked,
  // for clients written before HBM management); ECC refusals stay.
  bool dma_unchecked = false;
  // A client connection's tenant (uid) and whether it is the admin. A
  // tenant's memory (its connections' allocations, its jobs' buffers) is
  // freed, listed and reached by DMA by that tenant and the admin alone;
  // unset: each connection is a tenant of its own.
  std::function<uint32_t(uint64_t cid)> tenant_of;
  std::function<bool(uint64_t cid)> is_admin;
  // The tenant of job `job_id`'s buffers (owner job_owner(job_id)): its
  // submitter's uid, kept with the job; kNoTenant for a job vtrnd runs for
  // nobody in particular (a collective). Unset: every job's is kNoTenant.
  std::function<uint32_t(uint64_t job_id)> job_tenant;
};

class HbmService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;
  // The address allocated, success (free), the bytes freed (free_owner).
  using AllocDone = std::function<void(Result<uint64_t> addr)>;
  using FreeDone = std::function<void(const Error& error)>;
  using FreeOwnerDone = std::function<void(Result<uint64_t> bytes)>;

  static constexpr uint32_t kCtrlTimeoutMs = 5000;
  static constexpr uint64_t kOwnerKindClient = 1;
  static constexpr uint64_t kOwnerKindJob = 2;
  static constexpr uint64_t kOwnerKindTenant = 3;        // detached allocations; id = uid
  static constexpr uint64_t kOwnerIdLimit = 1ull << 28;  // the firmware's owner id range
  static constexpr uint32_t kNoTenant = UINT32_MAX;      // the firmware's, vtrnd's own, a departed client's

  HbmService(EventLoop* loop, HbmServiceOptions opts, ReplyFn reply);
  ~HbmService();
  HbmService(const HbmService&) = delete;
  HbmService& operator=(const HbmService&) = delete;

  // Registers a chip: chains its on_state_change and subscribes to its events.
  void add_chip(Chip* chip);

  // The async API. `done` may run before the call returns (chip not READY,
  // bad arguments). category: vtrn.api.HbmCategory. A job owner with a
  // tenant is charged to that tenant's quota (refused with kChipError and
  // the quota text past it); other owners are not (the caller decides what
  // they may hold). A free the firmware refuses because a job of the owner
  // has not ended on the chip is kBusy.
  void alloc(Chip* chip, uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align,
             AllocDone done);
  void free(Chip* chip, uint64_t owner, uint64_t addr, FreeDone done);
  void free_owner(Chip* chip, uint64_t owner, FreeOwnerDone done);

  [[nodiscard]] std::span<const Route> bodies() const override;
  // A client request in the hbm range, for `chip` (resolved by the server).
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;
  // The client disconnected: everything it owns on every chip is freed.
  void client_gone(uint64_t cid) override;

  // The one place owner ids are made: a client connection, a job (its
  // buffers, and a collective's, which runs as one job per chip).
  static uint64_t client_owner(uint64_t cid) { return (kOwnerKindClient << 32) | cid; }
  static uint64_t job_owner(uint64_t job_id) { return (kOwnerKindJob << 32) | (job_id & 0xffffffffull); }
  static uint64_t tenant_owner(uint32_t uid) { return (kOwnerKindTenant << 32) | uid; }
  [[nodiscard]] std::string store_path(const Chip* chip) const;

  // Tenants. The tenant (uid) an HBM owner belongs to: a client
  // connection's uid, a job's submitter's, a detached allocation's own
  // (the owner id); kNoTenant for the firmware's own
  // memory, a collective's buffers and a connection already gone.
  [[nodiscard]] uint32_t owner_tenant(uint64_t owner) const;
  // Whether client connection `cid` may act on memory of `owner`: the admin
  // always; otherwise a connection of the owner's tenant (without
  // tenant_of: the owning connection itself).
  [[nodiscard]] bool may_use(uint64_t cid, uint64_t owner) const;
  // A client's DMA to [addr, addr + len) of `chip`, checked and held.
  // Checked: a tenant reaches only memory it may use (may_use): every live
  // allocation the range overlaps, the physical pages behind stitched ones,
  // and, unless vtrnd runs with --hbm-dma-unchecked, the range lies wholly
  // in such allocations (HBM no allocation covers now may be another
  // tenant's by the time a queued chunk runs). No job's buffer is reached,
  // the tenant's own jobs' included: it is the job's until the job ends.
  // The admin reaches any range. A refusal is kPermissionDenied naming `what` ("DMA write to",
  // ...) and the first allocation or address at fault.
  // Held: the allocations the range reaches are pinned for DMA under the
  // returned claim (0: nothing to hold) until release_dma. A free of a
  // pinned allocation (HbmFree, free, free_owner, a departing client's)
  // waits until its last claim is released, so no chunk still queued can
  // land in memory the chip has meanwhile handed to someone else.
  [[nodiscard]] Result<uint64_t> claim_dma(uint64_t cid, Chip* chip, uint64_t addr, uint64_t len,
                                           const std::string& what);
  void release_dma(Chip* chip, uint64_t claim);

 private:
  struct Waiter {
    std::function<void()> run;
    std::function<void(const Error&)> fail;
  };
  struct Allocation {
    uint64_t owner = 0;
    uint64_t bytes = 0;
    uint32_t dma_claims = 0;  // DMA requests holding it (claim_dma)
  };
  // A free that waits for DMA claims on what it frees: of the allocation at
  // `addr`, or (addr unused) of everything `owner` holds.
  struct AfterDma {
    uint64_t addr = 0;
    uint64_t owner = 0;
    std::function<void()> run;
  };
  struct ChipHbm {
    Chip* chip = nullptr;
    bool ready = false;        // retired list pushed since the chip became READY
    bool syncing = false;
    uint64_t epoch = 0;        // bumped on every READY entry and exit
    std::vector<Waiter> waiting;
    std::map<uint64_t, Allocation> allocs;     // addr -> owner, bytes
    // The physical extents behind stitched allocations: phys addr -> the
    // extent's bytes and the allocation (remap-window addr) it belongs to.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> extents;
    std::map<uint64_t, uint64_t> owner_used;   // owner -> bytes live
    std::map<uint64_t, uint64_t> owner_pending;  // owner -> bytes asked, not answered
    std::set<uint64_t> quota_set;              // owners whose firmware quota is set
    std::set<uint64_t> clients;                // client owners that asked for memory here
    std::set<uint64_t> retired;                // offsets, as persisted
    std::map<uint64_t, std::vector<uint64_t>> claims;  // DMA claim -> the allocations it holds
    std::vector<AfterDma> after_dma;
    uint64_t quota_refusals = 0;
    int event_sub = 0;
  };

  ChipHbm* find(Chip* chip);
  [[nodiscard]] const ChipHbm* find(const Chip* chip) const;
  void on_state(ChipHbm& ch);
  void sync_retired(ChipHbm& ch);
  void when_ready(ChipHbm& ch, std::function<void()> run, std::function<void(const Error&)> fail);
  void persist(ChipHbm& ch, uint64_t offset);
  void note_alloc(ChipHbm& ch, uint64_t owner, const Vtrn__Ctrl__HbmAllocResponse& b);
  void note_free(ChipHbm& ch, uint64_t addr);
  void forget_extents(ChipHbm& ch, uint64_t addr);
  // DMA claims: whether a free of `addr` / of all of `owner` must wait;
  // frees whose wait is over run; a new epoch drops every claim.
  [[nodiscard]] static bool claimed_addr(const ChipHbm& ch, uint64_t addr);
  [[nodiscard]] static bool claimed_owner(const ChipHbm& ch, uint64_t owner);
  void run_after_dma(ChipHbm& ch);
  void drop_claims(ChipHbm& ch);
  void ctrl_alloc(ChipHbm& ch, uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align,
                  bool set_quota, uint64_t quota, FwDone<Vtrn__Ctrl__HbmAllocResponse> done);
  // `who` holds `used` of `quota` (the quota refusal's text).
  std::string alloc_error(ChipHbm& ch, uint32_t result, const std::string& who, uint64_t bytes,
                          uint64_t align, uint64_t used, uint64_t quota) const;
  // Quotas. What an owner is charged to: its tenant's key (kTenantKey |
  // uid) when it has a tenant, else the owner itself; the bytes live and
  // in flight charged to a key on one chip; the key as a user reads it.
  static constexpr uint64_t kTenantKey = 1ull << 63;
  [[nodiscard]] uint64_t charge_key(uint64_t owner) const;
  [[nodiscard]] uint64_t charged(const ChipHbm& ch, uint64_t key) const;
  [[nodiscard]] static std::string charge_text(uint64_t key);
  // Adds (or takes back) bytes in flight for owner.
  static void add_pending(ChipHbm& ch, uint64_t owner, uint64_t bytes);
  static void drop_pending(ChipHbm& ch, uint64_t owner, uint64_t bytes);

  void do_alloc(uint64_t cid, uint64_t id, ChipHbm& ch, const Vtrn__Api__HbmAllocRequest& r);
  void do_free(uint64_t cid, uint64_t id, ChipHbm& ch, uint64_t addr);
  void do_stats(uint64_t cid, uint64_t id, ChipHbm& ch);
  void do_list(uint64_t cid, uint64_t id, ChipHbm& ch);
  void list_page(uint64_t cid, uint64_t id, ChipHbm& ch, uint64_t epoch, uint64_t from,
                 std::shared_ptr<std::vector<Vtrn__Api__HbmAllocationInfo>> acc);
  void do_inject(uint64_t cid, uint64_t id, ChipHbm& ch, const Vtrn__Api__HbmInjectEccRequest& r);
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);

  EventLoop* loop_;
  HbmServiceOptions opts_;
  ReplyFn reply_;
  std::map<Chip*, std::unique_ptr<ChipHbm>> chips_;
  uint64_t next_claim_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

const char* hbm_category_name(uint32_t category);

}  // namespace drv
