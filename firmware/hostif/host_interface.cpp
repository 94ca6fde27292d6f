// BAR2 header, telemetry and state publication. See fw/host_interface.h.
// BAR2 is mapped Normal memory; the ordering the ABI asks for comes from
// release stores and fences, exactly as on the host side.
#include "fw/host_interface.h"

#include <string.h>

#include "fw/arch.h"
#include "fw/panic.h"
#include "vtrn/layout.h"

namespace fw::hostif {

using namespace vtrn::hostif;

void HostInterface::init(uint64_t base, const HeaderInfo& info) {
  base_ = reinterpret_cast<uint8_t*>(uintptr_t(base));
  header_ = reinterpret_cast<FwHeader*>(base_);
  indexes_ = reinterpret_cast<CtrlIndexes*>(base_ + kCtrlIndexOffset);

  // Read the previous boot's generation before anything is overwritten. The
  // value is host-writable memory: it only feeds a counter, never an index.
  const uint32_t old_magic = __atomic_load_n(&header_->magic, __ATOMIC_ACQUIRE);
  const uint32_t old_gen = header_->boot_generation;
  generation_ = (old_magic == kMagic ? old_gen : 0) + 1;
  if (generation_ == 0) generation_ = 1;

  __atomic_store_n(&header_->state, uint32_t(kStateOff), __ATOMIC_RELEASE);
  memset(base_ + kPanicOffset, 0, sizeof(PanicRecord));
  memset(base_ + kTelemetryOffset, 0, sizeof(Telemetry));
  telemetry_.attach(reinterpret_cast<Telemetry*>(base_ + kTelemetryOffset));
  memset(indexes_, 0, sizeof(CtrlIndexes));
  memset(base_ + kLogOffset, 0, sizeof(LogRingHeader));

  FwHeader h{};
  h.magic = kMagic;
  h.abi_major = kAbiMajor;
  h.abi_minor = kAbiMinor;
  h.state = kStateOff;
  h.fw_version = info.fw_version;
  h.heartbeat = 0;
  h.capabilities = kCapControlQueue | kCapLogRing | kCapTelemetry | kCapPanicRecord;
  h.chip_id = info.chip_id;
  h.boot_counter_ns = arch::now_ns();
  h.boot_generation = generation_;
  strncpy(h.build_id, info.build_id, sizeof h.build_id - 1);
  if (!publish_layout(&h, info.bar2_size)) {
    panic(kPanicPlatform, "host interface: BAR2 of %llu bytes cannot hold the v1 layout",
          (unsigned long long)info.bar2_size);
  }
  memcpy(header_, &h, sizeof h);
  set_state(kStateBooting);
}

PanicRecord* HostInterface::panic_record() const {
  return reinterpret_cast<PanicRecord*>(base_ + kPanicOffset);
}

LogRingHeader* HostInterface::log_ring() const {
  return reinterpret_cast<LogRingHeader*>(base_ + kLogOffset);
}

RingMemory HostInterface::request_ring() const {
  RingMemory m;
  m.slots = base_ + kCtrlReqOffset;
  m.slot_count = kCtrlSlots;
  m.slot_size = kCtrlSlotSize;
  m.prod = &indexes_->req_prod;
  m.cons = &indexes_->req_cons;
  m.my_error = &indexes_->fw_error;
  return m;
}

RingMemory HostInterface::response_ring() const {
  RingMemory m;
  m.slots = base_ + kCtrlRespOffset;
  m.slot_count = kCtrlSlots;
  m.slot_size = kCtrlSlotSize;
  m.prod = &indexes_->resp_prod;
  m.cons = &indexes_->resp_cons;
  m.my_error = &indexes_->fw_error;
  return m;
}

void HostInterface::set_state(FwState state) {
  // Release: everything published before (header, rings, a response) is
  // visible to a host that observes the new state.
  __atomic_store_n(&header_->state, uint32_t(state), __ATOMIC_RELEASE);
}

void HostInterface::beat() {
  ++heartbeat_;
  __atomic_store_n(&header_->heartbeat, heartbeat_, __ATOMIC_RELEASE);
}

void HostInterface::publish_telemetry(const Telemetry& t) {
  Telemetry copy = t;
  copy.version = vtrn::hostif::kTelemetryVersion;
  telemetry_.publish(copy);
}

}  // namespace fw::hostif
