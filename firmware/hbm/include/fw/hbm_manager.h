// fw::hbm::Manager: the chip's HBM service logic, portable C++ with no
// hardware in it, built into the firmware image and into host unit tests.
// It wraps the allocator core (vtrn::hbm::Allocator, common/hbm) with what
// the chip needs around it: 64-bit owner ids as vtrnd chooses them, the
// access check the DMA engine and the job executors call before touching
// HBM, the ECC model (correctable errors counted per stack, uncorrectable
// ones retire the page and poison the allocation holding it), and the
// route table of the vtrn.ctrl hbm requests (proto/vtrn_ctrl_hbm.proto).
//
// Not the firmware glue: where the metadata arena lives, logging and the
// Event sent to the host are in HbmService (hbm_service.cpp). Not the
// allocator either: placement, splitting, coalescing and accounting are
// common/hbm's, and its results (vtrn::hbm::Error) travel in the hbm
// responses as their own numbers; a request the manager refuses outright is
// a vtrn::Error like any other service's.
//
// The quirk that shaped it: the allocator names owners with 32 bits, the
// protocol with 64 (kind << 32 | id). The mapping packs the kind into the
// top 4 bits of the allocator's owner (ids below 2^28), so the firmware
// can report every owner back exactly, and an id that does not fit is
// refused instead of aliasing another owner.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/pb_arena.h"
#include "fw/service.h"
#include "vtrn/board.h"
#include "vtrn/dma_queue.h"
#include "vtrn/hbm.h"
#include "vtrn_ctrl.pb-c.h"

namespace fw::hbm {

// Outcomes of alloc/free are the allocator's closed list (common/hbm/
// include/vtrn/hbm.h), values stable: they travel in HbmAllocResponse.result.
using Status = vtrn::hbm::Error;

// What check() says about a range; closed list.
enum class Access : uint32_t {
  kOk = 0,            // inside one live allocation with no retired page
  kNotAllocated = 1,  // not inside one live allocation (or outside HBM)
  kEccError = 2,      // the allocation holding it, or the range itself, has a retired page
  kNotOwner = 3,      // inside one live allocation, but another owner's (check with an owner)
};

// Owner ids (session2.md): kind in the top 32 bits, id in the low 32.
inline constexpr uint64_t kOwnerFirmware = 0;
inline constexpr uint32_t kOwnerKindFirmware = 0;
inline constexpr uint32_t kOwnerKindClient = 1;
inline constexpr uint32_t kOwnerKindJob = 2;
inline constexpr uint32_t kOwnerKindTenant = 3;  // a detached allocation: id is the uid
inline constexpr uint32_t kOwnerIdBits = 28;
constexpr uint64_t client_owner(uint32_t client) { return (uint64_t(kOwnerKindClient) << 32) | client; }
constexpr uint64_t job_owner(uint32_t job) { return (uint64_t(kOwnerKindJob) << 32) | job; }
constexpr uint64_t tenant_owner(uint32_t uid) { return (uint64_t(kOwnerKindTenant) << 32) | uid; }
// The allocator's 32-bit owner for a protocol owner; false when the kind is
// unknown or the id does not fit kOwnerIdBits (or kind 0 with an id).
[[nodiscard]] bool owner_key(uint64_t owner, uint32_t* key);
uint64_t owner_from_key(uint32_t key);

// Limits of the metadata the firmware reserves (see arena_bytes).
// 1,024 extents: stitched allocations are the exception (a few extents
// each on the churn), and each extent costs two block records.
inline constexpr vtrn::hbm::Limits kLimits{4096, 256, 256, 1024};

// The remap window of stitched allocations and who maps it (the firmware:
// fw::mmu; host tests: a shadow map). mapper == nullptr: no stitching.
struct Remap {
  const vtrn::hbm::Mapper* mapper = nullptr;
  uint64_t base = 0;
  uint64_t bytes = 0;
};
inline constexpr uint32_t kMaxListEntries = 64;  // per HbmListResponse (fits one ctrl slot)

// One ECC error as the model handled it; also the Event sent to the host.
struct EccRecord {
  Status result = Status::kOk;
  uint64_t addr = 0;
  uint64_t page_offset = 0;
  uint32_t stack = 0;
  bool uncorrectable = false;
  bool page_retired = false;        // newly retired
  bool allocation_poisoned = false;
  uint64_t allocation_addr = 0;
  uint64_t owner = 0;
  uint64_t correctable_on_stack = 0;
  uint32_t retired_pages = 0;
};

struct Totals {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t alloc_failures = 0;
  uint64_t retired_pages = 0;
  uint64_t ecc_correctable = 0;
  uint64_t ecc_uncorrectable = 0;
};

class Manager : public Service {
 public:
  constexpr Manager() : Service("hbm") {}
  [[nodiscard]] std::span<const Route> routes() const override;
  ~Manager() = default;
  using Service::init;

  // Arena bytes init() needs for this geometry with kLimits; 0 if invalid.
  [[nodiscard]] static size_t arena_bytes(const vtrn::board::HbmGeometry& g, uint64_t base,
                                         const Remap& remap = Remap{});
  // HBM of geometry g starts at chip address `base` (2 MiB aligned).
  Status init(const vtrn::board::HbmGeometry& g, uint64_t base, void* arena, size_t arena_size,
              const Remap& remap = Remap{});

  // Zeroes [addr, addr + bytes) at the address the allocation is used by
  // (its remap-window address when stitched, mapped by then). Every new
  // allocation, whole pages, goes through it before it is handed out, so no
  // owner reads what the previous one left (issue 15). Unset: no scrub.
  using Scrub = void (*)(uint64_t addr, uint64_t bytes);
  void set_scrub(Scrub s) { scrub_ = s; }

  // Whether `owner`'s memory is pinned: a job the chip has not ended uses
  // it (the jobs service answers; issue 15). A pinned owner's allocations
  // are not freed, by their owner or by anyone: kPinned. Unset: nothing
  // is pinned.
  using PinCheck = bool (*)(uint64_t owner);
  void set_pin_check(PinCheck p) { pin_check_ = p; }
  [[nodiscard]] bool pinned(uint64_t owner) const { return pin_check_ != nullptr && pin_check_(owner); }

  Status alloc(uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align, uint64_t* addr);
  // kPinned when the allocation's owner is pinned.
  Status free(uint64_t owner, uint64_t addr);
  // Frees everything owner holds and forgets its quota; *bytes freed.
  // kPinned (nothing freed) when the owner is pinned.
  Status free_owner(uint64_t owner, uint64_t* bytes, uint32_t* allocations = nullptr);
  [[nodiscard]] Access check(uint64_t addr, uint64_t len) const;
  // check(), and the allocation holding the range must be `owner`'s
  // (exactly: no owner, the firmware's included, stands for another);
  // kNotOwner otherwise, before any ECC verdict on another owner's memory.
  [[nodiscard]] Access check(uint64_t addr, uint64_t len, uint64_t owner) const;
  // Whether DMA may use HBM outside live allocations (vtrnd's choice per
  // boot; off after init). ECC refusals apply either way.
  void set_dma_unchecked(bool on) { dma_unchecked_ = on; }
  [[nodiscard]] bool dma_unchecked() const { return dma_unchecked_; }

  // The ECC model. `out` receives what happened (also queued for take_ecc).
  Status inject_ecc(uint64_t addr, bool uncorrectable, EccRecord* out);
  // Oldest ECC record not yet taken (the glue logs it and tells the host);
  // the queue keeps the newest kEccQueue records when nobody takes them.
  bool take_ecc(EccRecord* out);

  // Requests are refused (BUSY) until init() succeeded.
  [[nodiscard]] vtrn::Error ready() const override;

  // The handlers of the hbm routes.
  vtrn::Error serve_alloc(const Vtrn__Ctrl__HbmAllocRequest& r, Vtrn__Ctrl__HbmAllocResponse& out,
                          Call& c);
  vtrn::Error serve_free(const Vtrn__Ctrl__HbmFreeRequest& r, Vtrn__Ctrl__HbmFreeResponse& out,
                         Call& c);
  vtrn::Error serve_free_owner(const Vtrn__Ctrl__HbmFreeOwnerRequest& r,
                               Vtrn__Ctrl__HbmFreeOwnerResponse& out, Call& c);
  vtrn::Error serve_stats(const Vtrn__Ctrl__HbmStatsRequest& r, Vtrn__Ctrl__HbmStatsResponse& out,
                          Call& c);
  vtrn::Error serve_list(const Vtrn__Ctrl__HbmListRequest& r, Vtrn__Ctrl__HbmListResponse& out,
                         Call& c);
  vtrn::Error serve_retired(const Vtrn__Ctrl__HbmRetiredRequest& r,
                            Vtrn__Ctrl__HbmRetiredResponse& out, Call& c);
  vtrn::Error serve_import(const Vtrn__Ctrl__HbmImportRetiredRequest& r,
                           Vtrn__Ctrl__HbmImportRetiredResponse& out, Call& c);
  vtrn::Error serve_inject(const Vtrn__Ctrl__HbmInjectEccRequest& r,
                           Vtrn__Ctrl__HbmInjectEccResponse& out, Call& c);

  [[nodiscard]] Totals totals() const;
  [[nodiscard]] const vtrn::hbm::Allocator& allocator() const { return a_; }
  // Bumped by every change of what is allocated or retired (the engines'
  // MPU table is rebuilt when it moved).
  [[nodiscard]] uint64_t layout_generation() const { return layout_generation_; }
  [[nodiscard]] uint64_t base() const { return base_; }
  [[nodiscard]] uint64_t size() const { return a_.total_bytes(); }

 private:
  static constexpr uint32_t kEccQueue = 8;

  void push_ecc(const EccRecord& r);
  // check() once the allocator found no allocation holding the range.
  Access check_unallocated(uint64_t addr, uint64_t len) const;
  // The scrub of a new allocation at addr; its granted size in *bytes.
  void scrub_new(uint64_t addr, uint64_t* bytes) const;

  vtrn::hbm::Allocator a_;
  vtrn::board::HbmGeometry geometry_;
  uint64_t base_ = 0;
  Scrub scrub_ = nullptr;
  PinCheck pin_check_ = nullptr;
  bool ready_ = false;
  bool dma_unchecked_ = false;
  uint64_t layout_generation_ = 0;
  uint64_t ecc_uncorrectable_ = 0;
  EccRecord ecc_[kEccQueue];
  uint32_t ecc_head_ = 0;  // next to take
  uint32_t ecc_count_ = 0;
  // The extents a stitched allocation's answer lists (valid until the next
  // alloc is served: the answer is packed before that).
  vtrn::hbm::Extent extents_[vtrn::hbm::kMaxExtents] = {};
  uint64_t extent_addrs_[vtrn::hbm::kMaxExtents] = {};
  uint64_t extent_bytes_[vtrn::hbm::kMaxExtents] = {};
};

// The DMA engine's HBM policy (vtrn::dma::HbmPolicy) over a Manager:
// kNotAllocated -> kErrNotAllocated (allowed when the manager is
// dma_unchecked), kEccError -> kErrEcc.
class DmaPolicy final : public vtrn::dma::HbmPolicy {
 public:
  explicit constexpr DmaPolicy(const Manager* m) : m_(m) {}
  [[nodiscard]] vtrn::dma::Status check(uint64_t addr, uint64_t length) const override;

 private:
  const Manager* m_;
};

// Fills an Event{hbm_ecc} body from a record (fields allocated by the caller).
void fill_ecc_event(const EccRecord& r, Vtrn__Ctrl__HbmEccEvent* ev);

}  // namespace fw::hbm
