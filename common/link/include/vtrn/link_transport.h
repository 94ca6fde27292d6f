// The byte-moving half of a chip-to-chip link: an abstract Transport that
// carries opaque frames each way plus the peer's liveness, and ShmTransport,
// its implementation over one memory region that both ends map (a plain
// buffer in host tests, the ivshmem-plain BAR in the firmware).
//
// It is not the link protocol: no sequence numbers, CRC, ACK or training live
// here (common/link/include/vtrn/link.h has those). A network transport between
// hosts would implement the same interface.
//
// The shape comes from what the region is: memory that the other chip can
// scribble on at any time, and that either chip may find left over from a
// previous life. So every field has one writer (its side), each side rewrites
// its whole header from private copies on every publish() (a scribbled header
// heals on the owner's next poll), and everything read from the peer (header,
// indexes, slot lengths) is copied once, then checked, then used. A violation
// is reported and resynchronised, never trusted: sequence numbers and CRC one
// layer up recover whatever data it cost.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace vtrn::link {

// Outcome of one transport operation. Closed list.
enum class TransportStatus : uint32_t {
  kOk = 0,
  kEmpty = 1,      // rx: no frame waiting
  kFull = 2,       // tx: no free slot
  kIndexJump = 3,  // the peer's index claims more slots than the ring holds, or runs backwards
  kBadLength = 4,  // a slot's length is zero, below the minimum or above the slot capacity
  kTooLarge = 5,   // caller: frame larger than max_frame() / buffer smaller than the frame
};

// Why the peer's side of the region is not usable. Closed list.
enum class PeerFault : uint32_t {
  kNone = 0,
  kNoHeader = 1,      // wrong magic: nothing (alive) has ever attached there
  kBadVersion = 2,    // a different link ABI version
  kBadSide = 3,       // the header claims to be our side: both ends were given the same side
  kBadGeometry = 4,   // slot size or count differs from ours (different region size or MTU)
};

// What one side tells the other besides frames, refreshed on every poll.
struct LocalInfo {
  uint32_t state = 0;  // the port's LinkState, advisory (a Disabled port says so)
};

// A snapshot of the peer's header, copied out of shared memory.
struct PeerView {
  PeerFault fault = PeerFault::kNoHeader;
  uint32_t state = 0;
  uint64_t heartbeat = 0;  // advances while the peer polls
  uint32_t epoch = 0;      // changes each time the peer attaches
};

class Transport {
 public:
  // Largest frame, in bytes, one send or receive carries.
  [[nodiscard]] virtual uint32_t max_frame() const = 0;
  // Refreshes this side's header (and advances its heartbeat).
  virtual void publish(const LocalInfo& info) = 0;
  [[nodiscard]] virtual PeerView peer() = 0;
  // Space to build one frame of `length` bytes in place; nullptr when the
  // ring is full (*status says why). Nothing is visible to the peer until
  // tx_commit(length).
  [[nodiscard]] virtual uint8_t* tx_reserve(uint32_t length, TransportStatus* status) = 0;
  virtual void tx_commit(uint32_t length) = 0;
  // Free frame slots towards the peer, as far as this side can tell.
  [[nodiscard]] virtual uint32_t tx_free() = 0;
  // Copies the oldest frame into buf. Errors consume the offending slot (or
  // resynchronise the ring) so the next call makes progress.
  [[nodiscard]] virtual TransportStatus rx(void* buf, uint32_t capacity, uint32_t* length) = 0;
  // Drops everything the peer has sent so far.
  virtual void rx_flush() = 0;

 protected:
  ~Transport() = default;
};

// The shared region (link ABI v1)
//
//   offset 0                  SideHeader of side 0 (writer: side 0)
//   offset kSideHeaderBytes   SideHeader of side 1 (writer: side 1)
//   offset 2*kSideHeaderBytes ring written by side 0 (slot_count slots)
//   then                      ring written by side 1
// Each slot: SlotHeader then up to max_frame bytes. Which chip is side 0
// comes from the board description (the lower chip id of the link).

inline constexpr uint32_t kRegionMagic = 0x4b4e4c56;  // "VLNK" as little-endian bytes
inline constexpr uint32_t kRegionVersion = 1;
inline constexpr uint32_t kRegionAlign = 64;
inline constexpr uint32_t kSideHeaderBytes = 256;
inline constexpr uint32_t kMinSlots = 2;
inline constexpr uint32_t kMaxSlots = 4096;

struct alignas(64) RegionIndex {
  uint32_t value;
  uint32_t pad[15];
};
static_assert(sizeof(RegionIndex) == 64);

struct SideHeader {
  uint32_t magic;       // kRegionMagic
  uint32_t version;     // kRegionVersion
  uint32_t side;        // 0 or 1
  uint32_t state;       // LocalInfo::state
  uint32_t slot_count;  // power of two
  uint32_t slot_size;   // bytes, multiple of kRegionAlign
  uint32_t epoch;       // changes on every attach
  uint32_t reserved0;
  uint64_t heartbeat;
  uint8_t reserved1[24];
  RegionIndex prod;     // slots this side has published into its ring (free-running)
  RegionIndex cons;     // slots of the peer's ring this side has consumed (free-running)
  uint8_t reserved2[kSideHeaderBytes - 192];
};
static_assert(sizeof(SideHeader) == kSideHeaderBytes);
static_assert(offsetof(SideHeader, heartbeat) == 32);
static_assert(offsetof(SideHeader, prod) == 64);
static_assert(offsetof(SideHeader, cons) == 128);

struct SlotHeader {
  uint32_t length;  // frame bytes that follow
  uint32_t reserved;
};
static_assert(sizeof(SlotHeader) == 8);

struct RegionGeometry {
  uint32_t slot_count = 0;
  uint32_t slot_size = 0;
  uint32_t max_frame = 0;  // slot_size - sizeof(SlotHeader)
};

// The geometry both ends derive from the region size and the frame size; a
// slot_count of 0 means the region is too small (fewer than kMinSlots).
[[nodiscard]] RegionGeometry region_geometry(size_t region_bytes, uint32_t max_frame);

class ShmTransport final : public Transport {
 public:
  ShmTransport() = default;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // Attaches as `side` (0 or 1) to `region` (kRegionAlign-aligned). Frames
  // carry at most `max_frame` bytes (the slot may round up). `epoch` should
  // differ between attaches (a boot counter or the clock). Returns false when
  // the arguments cannot form a ring.
  [[nodiscard]] bool attach(void* region, size_t region_bytes, uint32_t side, uint32_t max_frame,
                            uint32_t epoch);

  [[nodiscard]] uint32_t max_frame() const override { return geo_.max_frame; }
  void publish(const LocalInfo& info) override;
  [[nodiscard]] PeerView peer() override;
  [[nodiscard]] uint8_t* tx_reserve(uint32_t length, TransportStatus* status) override;
  void tx_commit(uint32_t length) override;
  [[nodiscard]] uint32_t tx_free() override;
  [[nodiscard]] TransportStatus rx(void* buf, uint32_t capacity, uint32_t* length) override;
  void rx_flush() override;

  [[nodiscard]] const RegionGeometry& geometry() const { return geo_; }
  // Index violations seen (each also returned as a status).
  [[nodiscard]] uint64_t index_errors() const { return index_errors_; }

 private:
  uint8_t* slot(uint8_t* ring, uint32_t index) const {
    return ring + size_t(index & (geo_.slot_count - 1)) * geo_.slot_size;
  }

  SideHeader* mine_ = nullptr;
  SideHeader* theirs_ = nullptr;
  uint8_t* my_ring_ = nullptr;
  uint8_t* their_ring_ = nullptr;
  RegionGeometry geo_{};
  uint32_t side_ = 0;
  uint32_t epoch_ = 0;
  uint32_t state_ = 0;
  uint64_t heartbeat_ = 0;
  uint32_t prod_ = 0;  // private truth for mine_->prod
  uint32_t cons_ = 0;  // private truth for mine_->cons
  uint64_t index_errors_ = 0;
};

}  // namespace vtrn::link
