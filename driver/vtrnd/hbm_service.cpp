// vtrnd's HBM service (see hbm_service.h).
//
// Every firmware answer is checked before use: the body must be the one
// asked for, and counts and addresses are taken as data, not trusted to be
// small (a list page is bounded by what vtrnd asked for, a retired list by
// the store's limit).
#include "hbm_service.h"

#include <string.h>

#include <algorithm>

#include "api_enums.h"
#include "retired_store.h"
#include "vtrn/drv/log.h"
#include "vtrn/hbm.h"

namespace drv {

namespace {

constexpr uint32_t kListPage = 64;          // entries per HbmList ctrl request (firmware's max)
constexpr uint32_t kMaxListEntries = 8192;  // per api answer (two firmware limits' worth)
constexpr uint32_t kStoreMaxPages = 256;    // the firmware's retired-table size
constexpr uint64_t kNoQuota = ~0ull;

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

std::string bytes_text(uint64_t b) {
  char s[48];
  if (b >= (1ull << 30) && b % (1ull << 20) == 0)
    snprintf(s, sizeof s, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20))
    snprintf(s, sizeof s, "%.2f MiB", double(b) / double(1ull << 20));
  else if (b >= 1024)
    snprintf(s, sizeof s, "%.1f KiB", double(b) / 1024.0);
  else
    snprintf(s, sizeof s, "%llu B", (unsigned long long)b);
  return s;
}

std::string owner_text(uint64_t owner) {
  const uint64_t kind = owner >> 32, id = owner & 0xffffffffu;
  if (kind == 0 && id == 0) return "firmware";
  if (kind == HbmService::kOwnerKindClient) return "client " + std::to_string(id);
  if (kind == HbmService::kOwnerKindJob) return "job " + std::to_string(id);
  if (kind == HbmService::kOwnerKindTenant) return "tenant uid " + std::to_string(id) + " (detached)";
  return "owner " + hex(owner);
}

bool valid_owner(uint64_t owner) {
  const uint64_t kind = owner >> 32, id = owner & 0xffffffffu;
  if (kind == 0) return id == 0;
  return (kind == HbmService::kOwnerKindClient || kind == HbmService::kOwnerKindJob ||
          kind == HbmService::kOwnerKindTenant) &&
         id < HbmService::kOwnerIdLimit;
}

uint64_t page_of(const Chip* c) { return c->options().board.hbm.page_bytes; }
uint64_t hbm_bytes_of(const Chip* c) { return c->options().board.hbm.total_bytes(); }

uint64_t round_page(uint64_t bytes, uint64_t page) {
  if (page == 0 || bytes > UINT64_MAX - page) return bytes;
  return (bytes + page - 1) / page * page;
}

}  // namespace

const char* hbm_category_name(uint32_t c) {
  switch (c) {
    case 0: return "tensors";
    case 1: return "code";
    case 2: return "scratch";
    case 3: return "collectives";
    case 4: return "dma-buffers";
  }
  return "unknown";
}

HbmService::HbmService(EventLoop* loop, HbmServiceOptions opts, ReplyFn reply)
    : loop_(loop), opts_(std::move(opts)), reply_(std::move(reply)) {}

HbmService::~HbmService() {
  *alive_ = false;
  for (auto& [chip, ch] : chips_) {
    if (ch->event_sub != 0) chip->unsubscribe_events(ch->event_sub);
  }
}

std::string HbmService::store_path(const Chip* chip) const {
  if (opts_.store_root.empty()) return "";
  return retired_store_path(opts_.store_root, opts_.board_model, chip->id());
}

HbmService::ChipHbm* HbmService::find(Chip* chip) {
  auto it = chips_.find(chip);
  return it == chips_.end() ? nullptr : it->second.get();
}

const HbmService::ChipHbm* HbmService::find(const Chip* chip) const {
  auto it = chips_.find(const_cast<Chip*>(chip));
  return it == chips_.end() ? nullptr : it->second.get();
}

// Tenants.

uint32_t HbmService::owner_tenant(uint64_t owner) const {
  const uint64_t kind = owner >> 32, id = owner & 0xffffffffu;
  if (kind == kOwnerKindClient) return opts_.tenant_of ? opts_.tenant_of(id) : kNoTenant;
  if (kind == kOwnerKindJob) return opts_.job_tenant ? opts_.job_tenant(id) : kNoTenant;
  if (kind == kOwnerKindTenant) return uint32_t(id);
  return kNoTenant;
}

bool HbmService::may_use(uint64_t cid, uint64_t owner) const {
  if (opts_.is_admin && opts_.is_admin(cid)) return true;
  if (owner == client_owner(cid)) return true;
  if (!opts_.tenant_of) return false;
  const uint32_t t = opts_.tenant_of(cid);
  return t != kNoTenant && owner_tenant(owner) == t;
}

Result<uint64_t> HbmService::claim_dma(uint64_t cid, Chip* chip, uint64_t addr, uint64_t len,
                                       const std::string& what) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr) return uint64_t(0);
  const bool admin = opts_.is_admin && opts_.is_admin(cid);
  // Saturated: a range that wraps is the firmware's to refuse (address +
  // length overflows), but it must not slip past this check by wrapping.
  const uint64_t end = len > UINT64_MAX - addr ? UINT64_MAX : addr + std::max<uint64_t>(len, 1);
  const std::string range = "chip " + std::to_string(chip->id()) + ": " + what + " " + hex(addr) + " + " +
                            std::to_string(len);
  std::vector<uint64_t> held;
  auto it = ch->allocs.upper_bound(addr);
  if (it != ch->allocs.begin()) {
    auto prev = std::prev(it);
    if (prev->second.bytes > addr - prev->first) it = prev;  // starts before addr, reaches into it
  }
  // Another tenant's memory is refused without saying what it is (a job's
  // buffer or not is that tenant's business); the tenant's own jobs'
  // buffers are the job's while it holds them: no connection of the tenant
  // reaches them, or a write could land under the NeuronCores and change
  // what the job returns.
  auto job_buffer = [&](uint64_t alloc_addr, uint64_t owner) -> Error {
    if (admin || owner >> 32 != kOwnerKindJob) return Error();
    return Error(Code::kPermissionDenied, range + " reaches the allocation at " + hex(alloc_addr) +
                                              ", a buffer of job " + std::to_string(owner & 0xffffffffu) +
                                              "; only the job reaches it until it ends");
  };
  for (; it != ch->allocs.end() && it->first < end; ++it) {
    if (!may_use(cid, it->second.owner))
      return Error(Code::kPermissionDenied,
                   range + " reaches the allocation at " + hex(it->first) + ", which belongs to another tenant");
    if (Error e = job_buffer(it->first, it->second.owner); !e.ok()) return e;
    held.push_back(it->first);
  }
  // The physical pages behind stitched allocations.
  auto e = ch->extents.upper_bound(addr);
  if (e != ch->extents.begin()) {
    auto prev = std::prev(e);
    if (prev->second.first > addr - prev->first) e = prev;
  }
  for (; e != ch->extents.end() && e->first < end; ++e) {
    auto owner = ch->allocs.find(e->second.second);
    if (owner == ch->allocs.end()) continue;
    if (!may_use(cid, owner->second.owner))
      return Error(Code::kPermissionDenied, range + " reaches HBM behind the stitched allocation at " +
                                                hex(e->second.second) + ", which belongs to another tenant");
    if (Error err = job_buffer(owner->first, owner->second.owner); !err.ok()) return err;
    held.push_back(owner->first);
  }
  // A tenant's range lies wholly in memory it holds: what no allocation
  // covers when the request arrives may be another tenant's when its last
  // chunk runs.
  if (!admin && !opts_.dma_unchecked) {
    uint64_t pos = addr;
    while (pos < end) {
      uint64_t next = pos;
      if (auto a = ch->allocs.upper_bound(pos); a != ch->allocs.begin()) {
        auto p = std::prev(a);
        if (p->second.bytes > pos - p->first) next = p->first + p->second.bytes;
      }
      if (next == pos) {
        if (auto x = ch->extents.upper_bound(pos); x != ch->extents.begin()) {
          auto p = std::prev(x);
          if (p->second.first > pos - p->first && ch->allocs.count(p->second.second) != 0)
            next = p->first + p->second.first;
        }
      }
      if (next == pos)
        return Error(Code::kPermissionDenied, range + " reaches HBM at " + hex(pos) +
                                                  " that no allocation of this tenant covers");
      pos = next;
    }
  }
  if (held.empty()) return uint64_t(0);
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  for (uint64_t a : held) ++ch->allocs[a].dma_claims;
  const uint64_t claim = next_claim_++;
  ch->claims[claim] = std::move(held);
  return claim;
}

void HbmService::release_dma(Chip* chip, uint64_t claim) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr || claim == 0) return;
  auto c = ch->claims.find(claim);
  if (c == ch->claims.end()) return;  // dropped with its epoch
  for (uint64_t a : c->second) {
    auto it = ch->allocs.find(a);
    if (it != ch->allocs.end() && it->second.dma_claims > 0) --it->second.dma_claims;
  }
  ch->claims.erase(c);
  run_after_dma(*ch);
}

bool HbmService::claimed_addr(const ChipHbm& ch, uint64_t addr) {
  auto it = ch.allocs.find(addr);
  return it != ch.allocs.end() && it->second.dma_claims != 0;
}

bool HbmService::claimed_owner(const ChipHbm& ch, uint64_t owner) {
  for (const auto& [addr, a] : ch.allocs)
    if (a.owner == owner && a.dma_claims != 0) return true;
  return false;
}

void HbmService::run_after_dma(ChipHbm& ch) {
  if (ch.after_dma.empty()) return;
  // Taken out before any runs: a free that runs may queue another wait.
  std::vector<AfterDma> ready;
  for (auto it = ch.after_dma.begin(); it != ch.after_dma.end();) {
    const bool waits = it->addr != 0 ? claimed_addr(ch, it->addr) : claimed_owner(ch, it->owner);
    if (waits) {
      ++it;
      continue;
    }
    ready.push_back(std::move(*it));
    it = ch.after_dma.erase(it);
  }
  for (AfterDma& r : ready) r.run();
}

void HbmService::drop_claims(ChipHbm& ch) {
  ch.claims.clear();
  run_after_dma(ch);  // nothing is claimed any more: each fails or goes on by itself
}

void HbmService::add_chip(Chip* chip) {
  auto ch = std::make_unique<ChipHbm>();
  ch->chip = chip;
  ChipHbm* raw = ch.get();
  chips_[chip] = std::move(ch);
  std::weak_ptr<bool> alive = alive_;
  // Chained, not replaced: other services may watch state changes too.
  auto prev = std::move(chip->on_state_change);
  chip->on_state_change = [this, raw, alive, prev](Chip& c) {
    if (prev) prev(c);
    if (auto a = alive.lock(); a && *a) on_state(*raw);
  };
  raw->event_sub = chip->subscribe_events([this, raw](const Vtrn__Ctrl__Event& ev) {
    if (ev.body_case != VTRN__CTRL__EVENT__BODY_HBM_ECC || ev.hbm_ecc == nullptr) return;
    const Vtrn__Ctrl__HbmEccEvent& e = *ev.hbm_ecc;
    if (e.uncorrectable && e.page_retired) persist(*raw, e.page_offset);
  });
  if (chip->state() == ChipState::kReady) on_state(*raw);
}

// Readiness and the retired-page store.

void HbmService::on_state(ChipHbm& ch) {
  const bool now_ready = ch.chip->state() == ChipState::kReady;
  if (now_ready) {
    if (ch.ready || ch.syncing) return;
    sync_retired(ch);
    return;
  }
  if (!ch.ready && !ch.syncing && ch.waiting.empty() && ch.allocs.empty() && ch.after_dma.empty()) return;
  // The chip's memory (and the firmware's allocator) is gone with it.
  ++ch.epoch;
  ch.ready = false;
  ch.syncing = false;
  ch.allocs.clear();
  ch.extents.clear();
  ch.owner_used.clear();
  ch.owner_pending.clear();
  ch.quota_set.clear();
  std::vector<Waiter> w;
  w.swap(ch.waiting);
  const std::string why = ch.chip->not_ready_reason();
  for (Waiter& x : w) x.fail(Error(Code::kNotReady, why));
  drop_claims(ch);
}

void HbmService::sync_retired(ChipHbm& ch) {
  ++ch.epoch;
  ch.syncing = true;
  ch.allocs.clear();
  ch.extents.clear();
  ch.owner_used.clear();
  ch.owner_pending.clear();
  ch.quota_set.clear();
  ch.claims.clear();  // frees still waiting run once the chip is in sync
  const uint32_t chip_id = ch.chip->id();
  std::vector<uint64_t> offs;
  const std::string path = store_path(ch.chip);
  if (!path.empty()) {
    RetiredGeometry g{page_of(ch.chip), hbm_bytes_of(ch.chip), kStoreMaxPages};
    const Result<RetiredList> stored = load_retired(path, g);
    if (!stored.ok()) {
      DRV_LOGW("chip %u: retired-page store ignored: %s", chip_id, stored.error().detail().c_str());
    } else if (stored.value().present) {
      offs = stored.value().offsets;
      DRV_LOGI("chip %u: %zu retired HBM pages from %s", chip_id, offs.size(), path.c_str());
    }
  }
  ch.retired = std::set<uint64_t>(offs.begin(), offs.end());
  Vtrn__Ctrl__HbmImportRetiredRequest ir = VTRN__CTRL__HBM_IMPORT_RETIRED_REQUEST__INIT;
  ir.n_offsets = offs.size();
  ir.offsets = offs.data();
  ir.dma_unchecked = opts_.dma_unchecked;
  const uint64_t epoch = ch.epoch;
  ChipHbm* p = &ch;
  std::weak_ptr<bool> alive = alive_;
  fw_call(*ch.chip, &Vtrn__Ctrl__Request::hbm_import_retired, ir, &Vtrn__Ctrl__Response::hbm_import_retired,
          kCtrlTimeoutMs, [this, p, epoch, alive, chip_id](const FwReply<Vtrn__Ctrl__HbmImportRetiredResponse>& r) {
    if (auto a = alive.lock(); !a || !*a) return;
    if (p->epoch != epoch) return;  // the chip left READY meanwhile
    p->syncing = false;
    if (!r.ok()) {
      // HBM requests still go through and fail on their own merits; a
      // firmware without the HBM service answers each one UNSUPPORTED.
      DRV_LOGW("chip %u: retired-page list not pushed: %s", chip_id, r.error.detail().c_str());
    } else if (r.body->result != 0) {
      DRV_LOGW("chip %u: firmware refused the retired-page list: %s", chip_id,
               vtrn::hbm::error_name(vtrn::hbm::Error(r.body->result)));
    } else if (!p->retired.empty()) {
      DRV_LOGI("chip %u: %u retired HBM pages in force", chip_id, unsigned(r.body->retired_pages));
    }
    p->ready = true;
    std::vector<Waiter> w;
    w.swap(p->waiting);
    for (Waiter& x : w) x.run();
  });
  run_after_dma(ch);
}

void HbmService::when_ready(ChipHbm& ch, std::function<void()> run, std::function<void(const Error&)> fail) {
  if (ch.chip->state() != ChipState::kReady) {
    fail(Error(Code::kNotReady, ch.chip->not_ready_reason()));
    return;
  }
  if (ch.ready) {
    run();
    return;
  }
  if (!ch.syncing) sync_retired(ch);
  ch.waiting.push_back(Waiter{std::move(run), std::move(fail)});
}

void HbmService::persist(ChipHbm& ch, uint64_t offset) {
  const uint64_t page = page_of(ch.chip);
  if (page == 0 || offset % page != 0 || offset >= hbm_bytes_of(ch.chip)) {
    DRV_LOGW("chip %u: firmware reported retired page offset %s outside its HBM; not stored",
             ch.chip->id(), hex(offset).c_str());
    return;
  }
  if (!ch.retired.insert(offset).second) return;
  const std::string path = store_path(ch.chip);
  if (path.empty()) return;
  RetiredGeometry g{page, hbm_bytes_of(ch.chip), kStoreMaxPages};
  const std::vector<uint64_t> v(ch.retired.begin(), ch.retired.end());
  const std::string comment = "vtrn retired HBM pages of board " + opts_.board_model + " chip " +
                              std::to_string(ch.chip->id()) + "; written by vtrnd";
  if (const Error e = save_retired(path, g, v, comment); !e.ok()) {
    DRV_LOGE("chip %u: cannot store retired page %s: %s", ch.chip->id(), hex(offset).c_str(),
             e.detail().c_str());
    return;
  }
  DRV_LOGI("chip %u: retired HBM page +%s stored (%zu in %s)", ch.chip->id(), hex(offset).c_str(),
           v.size(), path.c_str());
}

void HbmService::note_alloc(ChipHbm& ch, uint64_t owner, const Vtrn__Ctrl__HbmAllocResponse& b) {
  ch.allocs[b.addr] = Allocation{owner, b.bytes};
  ch.owner_used[owner] += b.bytes;
  // A stitched allocation's physical pages are its owner's too. The
  // firmware's list is checked before it is believed: paired, non-empty,
  // no wrap, no more than the allocation's own bytes.
  if (b.n_extent_addrs != b.n_extent_bytes) return;
  uint64_t total = 0;
  for (size_t i = 0; i < b.n_extent_addrs; ++i) {
    const uint64_t a = b.extent_addrs[i], n = b.extent_bytes[i];
    if (n == 0 || n > UINT64_MAX - a || n > b.bytes - std::min(total, b.bytes)) {
      DRV_LOGW("chip %u: HbmAlloc extent %s + %llu of %s looks wrong; ignored", ch.chip->id(), hex(a).c_str(),
               (unsigned long long)n, hex(b.addr).c_str());
      continue;
    }
    total += n;
    ch.extents[a] = {n, b.addr};
  }
}

void HbmService::note_free(ChipHbm& ch, uint64_t addr) {
  auto it = ch.allocs.find(addr);
  if (it == ch.allocs.end()) return;
  auto u = ch.owner_used.find(it->second.owner);
  if (u != ch.owner_used.end()) {
    u->second -= std::min(u->second, it->second.bytes);
    if (u->second == 0) ch.owner_used.erase(u);
  }
  forget_extents(ch, addr);
  ch.allocs.erase(it);
}

void HbmService::forget_extents(ChipHbm& ch, uint64_t addr) {
  for (auto e = ch.extents.begin(); e != ch.extents.end();)
    e = e->second.second == addr ? ch.extents.erase(e) : std::next(e);
}

// The async API.

void HbmService::ctrl_alloc(ChipHbm& ch, uint64_t owner, uint32_t category, uint64_t bytes,
                            uint64_t align, bool set_quota, uint64_t quota,
                            FwDone<Vtrn__Ctrl__HbmAllocResponse> done) {
  Vtrn__Ctrl__HbmAllocRequest ar = VTRN__CTRL__HBM_ALLOC_REQUEST__INIT;
  ar.owner = owner;
  ar.category = category;
  ar.bytes = bytes;
  ar.align = align;
  ar.set_quota = set_quota;
  ar.quota_bytes = quota;
  fw_call(*ch.chip, &Vtrn__Ctrl__Request::hbm_alloc, ar, &Vtrn__Ctrl__Response::hbm_alloc, kCtrlTimeoutMs,
          std::move(done));
}

uint64_t HbmService::charge_key(uint64_t owner) const {
  const uint32_t t = owner_tenant(owner);
  return t == kNoTenant ? owner : (kTenantKey | t);
}

uint64_t HbmService::charged(const ChipHbm& ch, uint64_t key) const {
  uint64_t n = 0;
  for (const auto& [o, b] : ch.owner_used) n += charge_key(o) == key ? b : 0;
  for (const auto& [o, b] : ch.owner_pending) n += charge_key(o) == key ? b : 0;
  return n;
}

std::string HbmService::charge_text(uint64_t key) {
  if ((key & kTenantKey) != 0) return "tenant uid " + std::to_string(uint32_t(key));
  return owner_text(key);
}

void HbmService::add_pending(ChipHbm& ch, uint64_t owner, uint64_t bytes) { ch.owner_pending[owner] += bytes; }

void HbmService::drop_pending(ChipHbm& ch, uint64_t owner, uint64_t bytes) {
  auto it = ch.owner_pending.find(owner);
  if (it == ch.owner_pending.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) ch.owner_pending.erase(it);
}

std::string HbmService::alloc_error(ChipHbm& ch, uint32_t result, const std::string& who, uint64_t bytes,
                                    uint64_t align, uint64_t used, uint64_t quota) const {
  const std::string chip = "chip " + std::to_string(ch.chip->id());
  const std::string what = bytes_text(bytes) + (align ? " aligned to " + bytes_text(align) : "");
  switch (vtrn::hbm::Error(result)) {
    case vtrn::hbm::Error::kNoMemory:
      return chip + ": no free HBM block fits " + what + " (out of memory)";
    case vtrn::hbm::Error::kQuota:
      return chip + ": HBM quota exceeded: " + who + " holds " + bytes_text(used) +
             " of its " + bytes_text(quota) + " quota (vtrnd --hbm-quota-mib), " +
             bytes_text(round_page(bytes, page_of(ch.chip))) + " more refused";
    case vtrn::hbm::Error::kBadArgument:
      return chip + ": HBM allocation of " + what +
             " refused: size 0 or beyond HBM, or alignment not a power of two up to 2 MiB";
    case vtrn::hbm::Error::kTooManyAllocations:
      return chip + ": the firmware's allocation table is full";
    case vtrn::hbm::Error::kTooManyOwners:
      return chip + ": the firmware's owner table is full";
    default: break;
  }
  return chip + ": HBM allocation failed: " + vtrn::hbm::error_name(vtrn::hbm::Error(result));
}

void HbmService::alloc(Chip* chip, uint64_t owner, uint32_t category, uint64_t bytes,
                       uint64_t align, AllocDone done) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr) return done(Error(Code::kInternal, "chip has no HBM service"));
  if (!valid_owner(owner))
    return done(Error(Code::kInvalidArgument, "HBM owner " + hex(owner) + " is outside the owner scheme"));
  if (category >= vtrn::hbm::kCategoryCount)
    return done(Error(Code::kInvalidArgument, "unknown HBM category " + std::to_string(category)));
  std::weak_ptr<bool> alive = alive_;
  auto fail = [done](const Error& e) { done(e); };
  when_ready(*ch, [this, ch, owner, category, bytes, align, done, alive] {
    const uint64_t epoch = ch->epoch;
    // A job's buffers count against its submitter's quota (issue 15 item 9).
    const uint64_t quota = opts_.client_quota_bytes;
    const uint64_t key = charge_key(owner);
    const bool charged_here = quota != 0 && (owner >> 32) == kOwnerKindJob && (key & kTenantKey) != 0;
    const uint64_t rounded = round_page(bytes, page_of(ch->chip));
    if (charged_here) {
      const uint64_t held = charged(*ch, key);
      if (rounded > quota || held > quota - rounded) {
        ++ch->quota_refusals;
        return done(Error(Code::kChipError, alloc_error(*ch, uint32_t(vtrn::hbm::Error::kQuota), charge_text(key),
                                                        bytes, align, held, quota)));
      }
      add_pending(*ch, owner, rounded);
    }
    ctrl_alloc(*ch, owner, category, bytes, align, false, 0,
               [this, ch, owner, bytes, align, done, alive, epoch, charged_here, rounded](
                   const FwReply<Vtrn__Ctrl__HbmAllocResponse>& r) {
                 if (auto a = alive.lock(); !a || !*a) return done(Error(Code::kStopping, "vtrnd is shutting down"));
                 if (charged_here && ch->epoch == epoch) drop_pending(*ch, owner, rounded);
                 if (!r.ok()) return done(r.error);
                 const Vtrn__Ctrl__HbmAllocResponse& b = *r.body;
                 if (b.result != 0)
                   return done(Error(b.result == uint32_t(vtrn::hbm::Error::kBadArgument) ? Code::kInvalidArgument
                                                                                        : Code::kChipError,
                                     alloc_error(*ch, b.result, owner_text(owner), bytes, align, b.owner_used_bytes,
                                                 b.owner_quota_bytes)));
                 if (ch->epoch == epoch) note_alloc(*ch, owner, b);
                 done(b.addr);
               });
  }, fail);
}

void HbmService::free(Chip* chip, uint64_t owner, uint64_t addr, FreeDone done) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr) return done(Error(Code::kInternal, "chip has no HBM service"));
  if (!valid_owner(owner))
    return done(Error(Code::kInvalidArgument, "HBM owner " + hex(owner) + " is outside the owner scheme"));
  if (claimed_addr(*ch, addr)) {
    ch->after_dma.push_back(AfterDma{addr, 0, [this, chip, owner, addr, done] { free(chip, owner, addr, done); }});
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  when_ready(*ch, [this, ch, owner, addr, done, alive] {
    Vtrn__Ctrl__HbmFreeRequest fr = VTRN__CTRL__HBM_FREE_REQUEST__INIT;
    fr.owner = owner;
    fr.addr = addr;
    const uint64_t epoch = ch->epoch;
    fw_call(*ch->chip, &Vtrn__Ctrl__Request::hbm_free, fr, &Vtrn__Ctrl__Response::hbm_free, kCtrlTimeoutMs,
            [this, ch, addr, done, alive, epoch](const FwReply<Vtrn__Ctrl__HbmFreeResponse>& r) {
      if (auto a = alive.lock(); !a || !*a) return done(Error(Code::kStopping, "vtrnd is shutting down"));
      if (!r.ok()) return done(r.error);
      const uint32_t res = r.body->result;
      if (res == uint32_t(vtrn::hbm::Error::kPinned))
        return done(Error(Code::kBusy, "chip " + std::to_string(ch->chip->id()) + ": cannot free " + hex(addr) +
                                           ": a job the chip has not ended still uses it"));
      if (res != 0) {
        std::string why = vtrn::hbm::error_name(vtrn::hbm::Error(res));
        if (res == uint32_t(vtrn::hbm::Error::kNoSuchAllocation)) why = "no allocation starts there";
        if (res == uint32_t(vtrn::hbm::Error::kNotOwner)) why = "it belongs to another owner";
        return done(Error(Code::kInvalidArgument,
                          "chip " + std::to_string(ch->chip->id()) + ": cannot free " + hex(addr) + ": " + why));
      }
      if (ch->epoch == epoch) note_free(*ch, addr);
      done(Error());
    });
  }, done);
}

void HbmService::free_owner(Chip* chip, uint64_t owner, FreeOwnerDone done) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr) return done(Error(Code::kInternal, "chip has no HBM service"));
  if (!valid_owner(owner))
    return done(Error(Code::kInvalidArgument, "HBM owner " + hex(owner) + " is outside the owner scheme"));
  // Not ready means not READY or syncing: in both cases the chip holds
  // nothing for this owner that the retired-list push would let through.
  if (ch->chip->state() != ChipState::kReady) {
    ch->owner_used.erase(owner);
    return done(uint64_t(0));
  }
  if (claimed_owner(*ch, owner)) {
    ch->after_dma.push_back(AfterDma{0, owner, [this, chip, owner, done] { free_owner(chip, owner, done); }});
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  auto fail = [done](const Error& e) { done(e); };
  when_ready(*ch, [this, ch, owner, done, alive] {
    Vtrn__Ctrl__HbmFreeOwnerRequest fr = VTRN__CTRL__HBM_FREE_OWNER_REQUEST__INIT;
    fr.owner = owner;
    const uint64_t epoch = ch->epoch;
    fw_call(*ch->chip, &Vtrn__Ctrl__Request::hbm_free_owner, fr, &Vtrn__Ctrl__Response::hbm_free_owner,
            kCtrlTimeoutMs, [this, ch, owner, done, alive, epoch](const FwReply<Vtrn__Ctrl__HbmFreeOwnerResponse>& r) {
      if (auto a = alive.lock(); !a || !*a) return done(Error(Code::kStopping, "vtrnd is shutting down"));
      if (!r.ok()) return done(r.error);
      // Pinned: a job of this owner still runs on the chip; nothing was
      // freed, so the book keeps it.
      if (r.body->result == uint32_t(vtrn::hbm::Error::kPinned))
        return done(Error(Code::kBusy, "chip " + std::to_string(ch->chip->id()) + ": the HBM of owner " + hex(owner) +
                                           " is pinned by a job the chip has not ended"));
      if (r.body->result != 0)
        return done(Error(Code::kChipError, "chip " + std::to_string(ch->chip->id()) + ": freeing the HBM of owner " +
                                                hex(owner) + " failed: " +
                                                vtrn::hbm::error_name(vtrn::hbm::Error(r.body->result))));
      if (ch->epoch == epoch) {
        for (auto it = ch->allocs.begin(); it != ch->allocs.end();) {
          if (it->second.owner != owner) {
            ++it;
            continue;
          }
          forget_extents(*ch, it->first);
          it = ch->allocs.erase(it);
        }
        ch->owner_used.erase(owner);
        ch->quota_set.erase(owner);
      }
      done(r.body->bytes);
    });
  }, fail);
}

// Client requests.

void HbmService::reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err) {
  drv::reply_error(reply_, cid, id, st, err);
}

std::span<const Route> HbmService::bodies() const {
  static constexpr Route kRoutes[] = {
      {VTRN__API__REQUEST__BODY_HBM_ALLOC, true},
      {VTRN__API__REQUEST__BODY_HBM_FREE, true},
      {VTRN__API__REQUEST__BODY_HBM_STATS, true},
      {VTRN__API__REQUEST__BODY_HBM_LIST, true},
      {VTRN__API__REQUEST__BODY_HBM_INJECT_ECC, true, true},
  };
  return kRoutes;
}

void HbmService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  ChipHbm* ch = find(chip);
  if (ch == nullptr) return reply_error(cid, req.id, VTRN__API__STATUS__STATUS_INTERNAL, "chip has no HBM service");
  switch (req.body_case) {
    case VTRN__API__REQUEST__BODY_HBM_ALLOC: return do_alloc(cid, req.id, *ch, *req.hbm_alloc);
    case VTRN__API__REQUEST__BODY_HBM_FREE: return do_free(cid, req.id, *ch, req.hbm_free->addr);
    case VTRN__API__REQUEST__BODY_HBM_STATS: return do_stats(cid, req.id, *ch);
    case VTRN__API__REQUEST__BODY_HBM_LIST: return do_list(cid, req.id, *ch);
    case VTRN__API__REQUEST__BODY_HBM_INJECT_ECC: return do_inject(cid, req.id, *ch, *req.hbm_inject_ecc);
    default: return reply_error(cid, req.id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "not an HBM request");
  }
}

void HbmService::do_alloc(uint64_t cid, uint64_t id, ChipHbm& ch, const Vtrn__Api__HbmAllocRequest& r) {
  const std::string chip = "chip " + std::to_string(ch.chip->id());
  if (cid >= kOwnerIdLimit)
    return reply_error(cid, id, VTRN__API__STATUS__STATUS_INTERNAL, "client id " + std::to_string(cid) + " is beyond the HBM owner range");
  // Detached: the tenant's, so it needs one whose uid the firmware can name.
  const uint32_t uid = opts_.tenant_of ? opts_.tenant_of(cid) : kNoTenant;
  if (r.detached && (uid == kNoTenant || uid >= kOwnerIdLimit))
    return reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                       chip + ": a detached allocation needs a tenant uid below " + std::to_string(kOwnerIdLimit));
  const uint64_t owner = r.detached ? tenant_owner(uid) : client_owner(cid);
  if (r.bytes == 0) return reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "HBM allocation of 0 bytes");
  if (uint32_t(r.category) >= vtrn::hbm::kCategoryCount)
    return reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, "unknown HBM category " + std::to_string(int(r.category)));
  if (r.align != 0 && ((r.align & (r.align - 1)) != 0 || r.align > vtrn::hbm::kMaxAlignment))
    return reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                       "HBM alignment " + std::to_string(r.align) + " is not a power of two up to 2 MiB");
  const uint64_t t0 = monotonic_ns();
  std::weak_ptr<bool> alive = alive_;
  ChipHbm* p = &ch;
  // A departing connection frees what it owns here; nothing detached.
  if (!r.detached) ch.clients.insert(owner);
  const uint64_t bytes = r.bytes, align = r.align;
  const uint32_t category = uint32_t(r.category);
  when_ready(ch, [this, p, cid, id, owner, bytes, align, category, t0, alive] {
    const uint64_t quota = opts_.client_quota_bytes;
    const uint64_t rounded = round_page(bytes, page_of(p->chip));
    // Charged to the tenant: every connection of its uid and its jobs.
    const uint64_t key = charge_key(owner);
    const uint64_t held = charged(*p, key);
    if (quota != 0 && (rounded > quota || held > quota - rounded)) {
      ++p->quota_refusals;
      return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR,
                         alloc_error(*p, uint32_t(vtrn::hbm::Error::kQuota), charge_text(key), bytes, align, held, quota));
    }
    // The firmware gets the quota with the client's first allocation on
    // this chip, a second bound per owner.
    const bool set_quota = quota != 0 && !p->quota_set.count(owner);
    add_pending(*p, owner, rounded);
    const uint64_t epoch = p->epoch;
    ctrl_alloc(*p, owner, category, bytes, align, set_quota, quota ? quota : kNoQuota,
               [this, p, cid, id, owner, bytes, align, rounded, t0, alive, epoch, set_quota](const FwReply<Vtrn__Ctrl__HbmAllocResponse>& r) {
                 if (auto a = alive.lock(); !a || !*a) return;
                 if (p->epoch == epoch) drop_pending(*p, owner, rounded);
                 if (!r.ok()) return reply_error(cid, id, to_api(r.error), r.error.detail());
                 const Vtrn__Ctrl__HbmAllocResponse& b = *r.body;
                 if (set_quota && p->epoch == epoch) p->quota_set.insert(owner);
                 if (b.result != 0) {
                   if (b.result == uint32_t(vtrn::hbm::Error::kQuota)) ++p->quota_refusals;
                   return reply_error(cid, id,
                                      b.result == uint32_t(vtrn::hbm::Error::kBadArgument) ? VTRN__API__STATUS__STATUS_BAD_REQUEST
                                                                                          : VTRN__API__STATUS__STATUS_CHIP_ERROR,
                                      alloc_error(*p, b.result, owner_text(owner), bytes, align, b.owner_used_bytes,
                                                  b.owner_quota_bytes));
                 }
                 if (b.bytes == 0 || b.addr < p->chip->dma().hbm_base()) {
                   DRV_LOGW("chip %u: HbmAlloc answer %s + %llu looks wrong", p->chip->id(), hex(b.addr).c_str(),
                            (unsigned long long)b.bytes);
                 }
                 if (p->epoch == epoch) {
                   note_alloc(*p, owner, b);
                 }
                 Vtrn__Api__HbmAllocResponse ar = VTRN__API__HBM_ALLOC_RESPONSE__INIT;
                 ar.addr = b.addr;
                 ar.bytes = b.bytes;
                 ar.owner = owner;
                 ar.client_used_bytes = p->epoch == epoch ? charged(*p, charge_key(owner)) : b.bytes;
                 ar.client_quota_bytes = opts_.client_quota_bytes;
                 ar.elapsed_ns = monotonic_ns() - t0;
                 reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_HBM_ALLOC, &ar.base);
               });
  }, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

void HbmService::do_free(uint64_t cid, uint64_t id, ChipHbm& ch, uint64_t addr) {
  const uint64_t t0 = monotonic_ns();
  std::weak_ptr<bool> alive = alive_;
  ChipHbm* p = &ch;
  // Whose it is, from vtrnd's own book of what it allocated: a job's buffer
  // is freed by the job's end alone (an executor may be writing it); a
  // client's by a connection of the same tenant, or the admin. One the book
  // does not know goes to the firmware as ours, which refuses another's.
  bool any_owner = false;
  if (auto a = ch.allocs.find(addr); a != ch.allocs.end()) {
    const uint64_t owner = a->second.owner, kind = owner >> 32, oid = owner & 0xffffffffu;
    const std::string what = "chip " + std::to_string(ch.chip->id()) + ": the allocation at " + hex(addr);
    if (!may_use(cid, owner))
      return reply_error(cid, id, VTRN__API__STATUS__STATUS_PERMISSION_DENIED, what + " belongs to another tenant");
    if (kind == kOwnerKindJob)
      return reply_error(cid, id, VTRN__API__STATUS__STATUS_PERMISSION_DENIED,
                         what + " is a buffer of job " + std::to_string(oid) + "; it is freed when the job ends");
    any_owner = true;
    // DMA this tenant queued to it runs first (the answer waits for it).
    if (a->second.dma_claims != 0) {
      ch.after_dma.push_back(AfterDma{addr, 0, [this, cid, id, p, addr] { do_free(cid, id, *p, addr); }});
      return;
    }
  }
  const uint64_t own = client_owner(cid);
  when_ready(ch, [this, p, cid, id, addr, t0, alive, any_owner, own] {
    Vtrn__Ctrl__HbmFreeRequest fr = VTRN__CTRL__HBM_FREE_REQUEST__INIT;
    fr.addr = addr;
    fr.owner = own;
    fr.any_owner = any_owner;
    const uint64_t epoch = p->epoch;
    fw_call(*p->chip, &Vtrn__Ctrl__Request::hbm_free, fr, &Vtrn__Ctrl__Response::hbm_free, kCtrlTimeoutMs,
            [this, p, cid, id, addr, t0, alive, epoch](const FwReply<Vtrn__Ctrl__HbmFreeResponse>& r) {
      if (auto a = alive.lock(); !a || !*a) return;
      if (!r.ok()) return reply_error(cid, id, to_api(r.error), r.error.detail());
      const Vtrn__Ctrl__HbmFreeResponse& b = *r.body;
      if (b.result != 0)
        return reply_error(cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST,
                           "chip " + std::to_string(p->chip->id()) + ": no allocation starts at " + hex(addr) + " (" +
                               vtrn::hbm::error_name(vtrn::hbm::Error(b.result)) + ")");
      if (p->epoch == epoch) note_free(*p, addr);
      Vtrn__Api__HbmFreeResponse fr2 = VTRN__API__HBM_FREE_RESPONSE__INIT;
      fr2.bytes = b.bytes;
      fr2.owner = b.owner;
      fr2.elapsed_ns = monotonic_ns() - t0;
      reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_HBM_FREE, &fr2.base);
    });
  }, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

void HbmService::do_stats(uint64_t cid, uint64_t id, ChipHbm& ch) {
  std::weak_ptr<bool> alive = alive_;
  ChipHbm* p = &ch;
  when_ready(ch, [this, p, cid, id, alive] {
    Vtrn__Ctrl__HbmStatsRequest sr = VTRN__CTRL__HBM_STATS_REQUEST__INIT;
    fw_call(*p->chip, &Vtrn__Ctrl__Request::hbm_stats, sr, &Vtrn__Ctrl__Response::hbm_stats, kCtrlTimeoutMs,
            [this, p, cid, id, alive](const FwReply<Vtrn__Ctrl__HbmStatsResponse>& r) {
      if (auto a = alive.lock(); !a || !*a) return;
      if (!r.ok()) return reply_error(cid, id, to_api(r.error), r.error.detail());
      // Checked, then copied whole (packed and unpacked: the ctrl response
      // is valid during this callback only, and the retired list needs a
      // second round trip). The firmware's repeated fields are bounded by
      // its answer's frame; a chip has at most 16 stacks and categories.
      if (r.body->stats == nullptr)
        return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR,
                           "chip " + std::to_string(p->chip->id()) + ": HbmStats answer without statistics");
      std::vector<uint8_t> packed(protobuf_c_message_get_packed_size(&r.body->stats->base));
      protobuf_c_message_pack(&r.body->stats->base, packed.data());
      std::shared_ptr<Vtrn__Types__HbmStats> stats(
          vtrn__types__hbm_stats__unpack(nullptr, packed.size(), packed.data()),
          [](Vtrn__Types__HbmStats* m) { vtrn__types__hbm_stats__free_unpacked(m, nullptr); });
      if (!stats) return reply_error(cid, id, VTRN__API__STATUS__STATUS_INTERNAL, "HbmStats copy failed");
      stats->n_category_bytes = std::min<size_t>(stats->n_category_bytes, 16);
      stats->n_category_allocations = std::min<size_t>(stats->n_category_allocations, 16);
      stats->n_correctable_per_stack = std::min<size_t>(stats->n_correctable_per_stack, 16);
      stats->n_retired_per_stack = std::min<size_t>(stats->n_retired_per_stack, 16);
      Vtrn__Ctrl__HbmRetiredRequest rr = VTRN__CTRL__HBM_RETIRED_REQUEST__INIT;
      fw_call(*p->chip, &Vtrn__Ctrl__Request::hbm_retired, rr, &Vtrn__Ctrl__Response::hbm_retired, kCtrlTimeoutMs,
              [this, p, cid, id, alive, stats](const FwReply<Vtrn__Ctrl__HbmRetiredResponse>& r2) {
        if (auto a = alive.lock(); !a || !*a) return;
        if (!r2.ok()) return reply_error(cid, id, to_api(r2.error), r2.error.detail());
        const Vtrn__Ctrl__HbmRetiredResponse& rb = *r2.body;
        std::vector<uint64_t> addrs;
        for (size_t i = 0; i < rb.n_offsets && i < kStoreMaxPages; ++i) addrs.push_back(stats->hbm_base + rb.offsets[i]);
        Vtrn__Api__HbmStatsResponse out = VTRN__API__HBM_STATS_RESPONSE__INIT;
        out.stats = stats.get();
        out.client_quota_bytes = opts_.client_quota_bytes;
        out.vtrnd_quota_refusals = p->quota_refusals;
        out.n_retired_addrs = addrs.size();
        out.retired_addrs = addrs.data();
        std::string path = store_path(p->chip);
        out.store_path = path.data();
        reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_HBM_STATS, &out.base);
      });
    });
  }, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

void HbmService::do_list(uint64_t cid, uint64_t id, ChipHbm& ch) {
  ChipHbm* p = &ch;
  when_ready(ch, [this, p, cid, id] {
    list_page(cid, id, *p, p->epoch, 0, std::make_shared<std::vector<Vtrn__Api__HbmAllocationInfo>>());
  }, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

void HbmService::list_page(uint64_t cid, uint64_t id, ChipHbm& ch, uint64_t epoch, uint64_t from,
                           std::shared_ptr<std::vector<Vtrn__Api__HbmAllocationInfo>> acc) {
  Vtrn__Ctrl__HbmListRequest lr = VTRN__CTRL__HBM_LIST_REQUEST__INIT;
  lr.from_addr = from;
  lr.max = kListPage;
  std::weak_ptr<bool> alive = alive_;
  ChipHbm* p = &ch;
  fw_call(*ch.chip, &Vtrn__Ctrl__Request::hbm_list, lr, &Vtrn__Ctrl__Response::hbm_list, kCtrlTimeoutMs,
          [this, p, cid, id, epoch, from, acc, alive](const FwReply<Vtrn__Ctrl__HbmListResponse>& r) {
    if (auto a = alive.lock(); !a || !*a) return;
    if (!r.ok()) return reply_error(cid, id, to_api(r.error), r.error.detail());
    if (p->epoch != epoch)
      return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_NOT_READY, "chip was reset while listing");
    const Vtrn__Ctrl__HbmListResponse& b = *r.body;
    if (b.n_allocations > kListPage)
      return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR, "firmware sent more list entries than asked for");
    uint64_t last = from;
    for (size_t i = 0; i < b.n_allocations; ++i) {
      const Vtrn__Ctrl__HbmAllocation& e = *b.allocations[i];
      if (e.addr < last)
        return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR, "firmware list is not in address order");
      last = e.addr + 1;
      Vtrn__Api__HbmAllocationInfo x = VTRN__API__HBM_ALLOCATION_INFO__INIT;
      x.addr = e.addr;
      x.bytes = e.bytes;
      x.owner = e.owner;
      x.owner_kind = uint32_t(e.owner >> 32);
      x.owner_id = e.owner & 0xffffffffu;
      x.category = Vtrn__Api__HbmCategory(e.category < vtrn::hbm::kCategoryCount ? e.category : 0);
      x.poisoned = e.poisoned;
      x.stitched = e.stitched;
      x.extents = e.extents;
      x.detached = x.owner_kind == kOwnerKindTenant;
      const uint32_t tenant = owner_tenant(e.owner);
      x.uid = tenant == kNoTenant ? -1 : int64_t(tenant);
      // Another tenant's allocations are left out (the admin sees all).
      if (!may_use(cid, e.owner)) continue;
      acc->push_back(x);
    }
    if (b.more && b.next_addr > from && acc->size() < kMaxListEntries)
      return list_page(cid, id, *p, epoch, b.next_addr, acc);
    std::vector<Vtrn__Api__HbmAllocationInfo*> ptrs;
    for (auto& x : *acc) ptrs.push_back(&x);
    Vtrn__Api__HbmListResponse lr2 = VTRN__API__HBM_LIST_RESPONSE__INIT;
    lr2.n_allocations = ptrs.size();
    lr2.allocations = ptrs.data();
    lr2.all_tenants = opts_.is_admin && opts_.is_admin(cid);
    reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_HBM_LIST, &lr2.base);
  });
}

void HbmService::do_inject(uint64_t cid, uint64_t id, ChipHbm& ch, const Vtrn__Api__HbmInjectEccRequest& r) {
  std::weak_ptr<bool> alive = alive_;
  ChipHbm* p = &ch;
  const uint64_t addr = r.addr;
  const bool unc = r.uncorrectable;
  when_ready(ch, [this, p, cid, id, addr, unc, alive] {
    Vtrn__Ctrl__HbmInjectEccRequest ir = VTRN__CTRL__HBM_INJECT_ECC_REQUEST__INIT;
    ir.addr = addr;
    ir.uncorrectable = unc;
    fw_call(*p->chip, &Vtrn__Ctrl__Request::hbm_inject_ecc, ir, &Vtrn__Ctrl__Response::hbm_inject_ecc, kCtrlTimeoutMs,
            [this, p, cid, id, addr, alive](const FwReply<Vtrn__Ctrl__HbmInjectEccResponse>& r) {
      if (auto a = alive.lock(); !a || !*a) return;
      if (!r.ok()) return reply_error(cid, id, to_api(r.error), r.error.detail());
      if (r.body->event == nullptr)
        return reply_error(cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR,
                           "chip " + std::to_string(p->chip->id()) + ": firmware answered hbm_inject_ecc without its event");
      const Vtrn__Ctrl__HbmInjectEccResponse& b = *r.body;
      const Vtrn__Ctrl__HbmEccEvent& e = *b.event;
      const bool already = b.result == uint32_t(vtrn::hbm::Error::kAlreadyRetired);
      if (b.result != 0 && !already) {
        const bool range = b.result == uint32_t(vtrn::hbm::Error::kOutOfRange);
        return reply_error(cid, id, range ? VTRN__API__STATUS__STATUS_BAD_REQUEST : VTRN__API__STATUS__STATUS_CHIP_ERROR,
                           "chip " + std::to_string(p->chip->id()) + ": ECC injection at " + hex(addr) + " refused: " +
                               (range ? std::string("address outside HBM [") + hex(p->chip->dma().hbm_base()) + ", " +
                                            hex(p->chip->dma().hbm_base() + hbm_bytes_of(p->chip)) + ")"
                                      : vtrn::hbm::error_name(vtrn::hbm::Error(b.result))));
      }
      bool persisted = false;
      if (e.uncorrectable && (e.page_retired || already)) {
        persist(*p, e.page_offset);
        persisted = !store_path(p->chip).empty() && p->retired.count(e.page_offset) != 0;
      }
      Vtrn__Api__HbmInjectEccResponse out = VTRN__API__HBM_INJECT_ECC_RESPONSE__INIT;
      out.addr = e.addr;
      out.page_addr = p->chip->dma().hbm_base() + e.page_offset;
      out.stack = e.stack;
      out.uncorrectable = e.uncorrectable;
      out.page_retired = e.page_retired;
      out.already_retired = already;
      out.allocation_poisoned = e.allocation_poisoned;
      out.allocation_addr = e.allocation_addr;
      out.owner = e.owner;
      out.correctable_on_stack = e.correctable_on_stack;
      out.retired_pages = e.retired_pages;
      out.persisted = persisted;
      reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_HBM_INJECT_ECC, &out.base);
    });
  }, [this, cid, id](const Error& e) { reply_error(cid, id, to_api(e), e.detail()); });
}

void HbmService::client_gone(uint64_t cid) {
  const uint64_t owner = client_owner(cid);
  for (auto& [chip, ch] : chips_) {
    // Only chips the client ever asked for memory get a request; one of its
    // allocations may still be queued or in flight, and the chip serves
    // requests in order, so the free comes after it.
    if (ch->clients.erase(owner) == 0) continue;
    const uint32_t chip_id = chip->id();
    free_owner(chip, owner, [chip_id, cid](Result<uint64_t> bytes) {
      if (!bytes.ok()) {
        DRV_LOGW("chip %u: freeing HBM of departed client %llu failed: %s", chip_id, (unsigned long long)cid,
                 bytes.error().detail().c_str());
      } else if (bytes.value() != 0) {
        DRV_LOGD("chip %u: client %llu gone, %llu bytes of HBM freed", chip_id, (unsigned long long)cid,
                 (unsigned long long)bytes.value());
      }
    });
  }
}

}  // namespace drv
