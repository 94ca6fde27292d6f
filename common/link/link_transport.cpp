// ShmTransport: two single-producer single-consumer frame rings in one shared
// region, one per direction (layout in vtrn/link_transport.h).
//
// Ordering, as in virtio: the producer writes the slot, then publishes its
// index with a release store; the consumer loads the index with acquire,
// copies the slot out, then publishes its own index with release, which also
// orders its reads of the slot before the producer may reuse it. Header
// fields other than the two indexes are single-writer words read with relaxed
// loads and validated after the copy. Under TCG with maxcpus=1 read-modify-
// write atomics are not atomic across chips, so nothing here uses them: every
// shared word is plainly stored by its one writer.
#include "vtrn/link_transport.h"

#include <string.h>

namespace vtrn::link {
namespace {

template <typename T>
T load_relaxed(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <typename T>
void store_relaxed(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
uint32_t load_acquire(const RegionIndex* idx) { return __atomic_load_n(&idx->value, __ATOMIC_ACQUIRE); }
void store_release(RegionIndex* idx, uint32_t v) { __atomic_store_n(&idx->value, v, __ATOMIC_RELEASE); }

uint32_t floor_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p <= v / 2) p <<= 1;
  return v == 0 ? 0 : p;
}

}  // namespace

RegionGeometry region_geometry(size_t region_bytes, uint32_t max_frame) {
  RegionGeometry g{};
  if (max_frame == 0 || max_frame > (1u << 24) || region_bytes < 2 * kSideHeaderBytes) return g;
  const uint32_t slot_size =
      (uint32_t(sizeof(SlotHeader)) + max_frame + kRegionAlign - 1) & ~(kRegionAlign - 1);
  const size_t per_ring = (region_bytes - 2 * kSideHeaderBytes) / 2;
  size_t slots = per_ring / slot_size;
  if (slots > kMaxSlots) slots = kMaxSlots;
  const uint32_t count = floor_pow2(uint32_t(slots));
  if (count < kMinSlots) return g;
  g.slot_count = count;
  g.slot_size = slot_size;
  g.max_frame = slot_size - uint32_t(sizeof(SlotHeader));
  return g;
}

bool ShmTransport::attach(void* region, size_t region_bytes, uint32_t side, uint32_t max_frame,
                          uint32_t epoch) {
  if (region == nullptr || (uintptr_t(region) & (kRegionAlign - 1)) != 0 || side > 1) return false;
  const RegionGeometry g = region_geometry(region_bytes, max_frame);
  if (g.slot_count == 0) return false;
  auto* base = static_cast<uint8_t*>(region);
  auto* headers = reinterpret_cast<SideHeader*>(base);
  uint8_t* rings = base + 2 * kSideHeaderBytes;
  const size_t ring_bytes = size_t(g.slot_count) * g.slot_size;
  geo_ = g;
  side_ = side;
  epoch_ = epoch;
  mine_ = &headers[side];
  theirs_ = &headers[side ^ 1];
  my_ring_ = rings + side * ring_bytes;
  their_ring_ = rings + (side ^ 1) * ring_bytes;
  // Continue our own producer index when the header is ours from an earlier
  // attach, so a live peer sees the ring move forward instead of jumping
  // back; anything else left in the region is not ours and is ignored.
  const bool ours = load_relaxed(&mine_->magic) == kRegionMagic &&
                    load_relaxed(&mine_->version) == kRegionVersion &&
                    load_relaxed(&mine_->side) == side &&
                    load_relaxed(&mine_->slot_count) == g.slot_count &&
                    load_relaxed(&mine_->slot_size) == g.slot_size;
  prod_ = ours ? load_relaxed(&mine_->prod.value) : 0;
  heartbeat_ = ours ? load_relaxed(&mine_->heartbeat) : 0;
  cons_ = load_acquire(&theirs_->prod);
  index_errors_ = 0;
  state_ = 0;
  publish(LocalInfo{});
  return true;
}

void ShmTransport::publish(const LocalInfo& info) {
  state_ = info.state;
  ++heartbeat_;
  store_relaxed(&mine_->magic, kRegionMagic);
  store_relaxed(&mine_->version, kRegionVersion);
  store_relaxed(&mine_->side, side_);
  store_relaxed(&mine_->state, state_);
  store_relaxed(&mine_->slot_count, geo_.slot_count);
  store_relaxed(&mine_->slot_size, geo_.slot_size);
  store_relaxed(&mine_->epoch, epoch_);
  store_relaxed(&mine_->heartbeat, heartbeat_);
  // Release: a peer that sees these indexes also sees the slots they cover.
  store_release(&mine_->prod, prod_);
  store_release(&mine_->cons, cons_);
}

PeerView ShmTransport::peer() {
  PeerView v{};
  const uint32_t magic = load_relaxed(&theirs_->magic);
  const uint32_t version = load_relaxed(&theirs_->version);
  const uint32_t side = load_relaxed(&theirs_->side);
  const uint32_t count = load_relaxed(&theirs_->slot_count);
  const uint32_t size = load_relaxed(&theirs_->slot_size);
  v.state = load_relaxed(&theirs_->state);
  v.epoch = load_relaxed(&theirs_->epoch);
  v.heartbeat = load_relaxed(&theirs_->heartbeat);
  if (magic != kRegionMagic) {
    v.fault = PeerFault::kNoHeader;
  } else if (version != kRegionVersion) {
    v.fault = PeerFault::kBadVersion;
  } else if (side != (side_ ^ 1)) {
    v.fault = PeerFault::kBadSide;
  } else if (count != geo_.slot_count || size != geo_.slot_size) {
    v.fault = PeerFault::kBadGeometry;
  } else {
    v.fault = PeerFault::kNone;
  }
  return v;
}

uint32_t ShmTransport::tx_free() {
  const uint32_t used = prod_ - load_acquire(&theirs_->cons);
  return used > geo_.slot_count ? 0 : geo_.slot_count - used;
}

uint8_t* ShmTransport::tx_reserve(uint32_t length, TransportStatus* status) {
  TransportStatus st = TransportStatus::kOk;
  uint8_t* out = nullptr;
  // Acquire: the peer's reads of a slot happen before we overwrite it.
  const uint32_t used = prod_ - load_acquire(&theirs_->cons);
  if (length > geo_.max_frame) {
    st = TransportStatus::kTooLarge;
  } else if (used > geo_.slot_count) {
    // The peer claims to have consumed slots we never published. Its own
    // consumer resynchronises on its next receive; until then we wait.
    ++index_errors_;
    st = TransportStatus::kIndexJump;
  } else if (used == geo_.slot_count) {
    st = TransportStatus::kFull;
  } else {
    out = slot(my_ring_, prod_) + sizeof(SlotHeader);
  }
  if (status != nullptr) *status = st;
  return out;
}

void ShmTransport::tx_commit(uint32_t length) {
  auto* h = reinterpret_cast<SlotHeader*>(slot(my_ring_, prod_));
  store_relaxed(&h->length, length);
  store_relaxed(&h->reserved, 0u);
  ++prod_;
  // Release: the slot contents are visible before the index that covers them.
  store_release(&mine_->prod, prod_);
}

TransportStatus ShmTransport::rx(void* buf, uint32_t capacity, uint32_t* length) {
  *length = 0;
  const uint32_t p = load_acquire(&theirs_->prod);
  const uint32_t avail = p - cons_;
  if (avail == 0) return TransportStatus::kEmpty;
  if (avail > geo_.slot_count) {
    // Resynchronise to whatever the peer says now; the sequence numbers one
    // layer up notice any frame this skipped.
    ++index_errors_;
    cons_ = p;
    store_release(&mine_->cons, cons_);
    return TransportStatus::kIndexJump;
  }
  const uint8_t* s = slot(their_ring_, cons_);
  const uint32_t len = load_relaxed(&reinterpret_cast<const SlotHeader*>(s)->length);
  TransportStatus st = TransportStatus::kOk;
  if (len == 0 || len > geo_.max_frame) {
    st = TransportStatus::kBadLength;
  } else if (len > capacity) {
    st = TransportStatus::kTooLarge;
  } else {
    memcpy(buf, s + sizeof(SlotHeader), len);
    *length = len;
  }
  ++cons_;
  // Release: our copy of the slot is complete before the peer may reuse it.
  store_release(&mine_->cons, cons_);
  return st;
}

void ShmTransport::rx_flush() {
  cons_ = load_acquire(&theirs_->prod);
  store_release(&mine_->cons, cons_);
}

}  // namespace vtrn::link
