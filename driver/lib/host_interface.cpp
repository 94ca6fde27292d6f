// Host-side BAR2 access (see vtrn/drv/host_interface.h).
#include "vtrn/drv/host_interface.h"

#include <string.h>

#include <algorithm>

#include "vtrn/power.h"
#include "vtrn/seqlock.h"

namespace drv {

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) out += (c >= 0x20 && c < 0x7f) || c == '\t' ? char(c) : '?';
  return out;
}

using namespace vtrn::hostif;

namespace {

template <typename T>
T load_acquire_field(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

}  // namespace

const char* fw_state_name(uint32_t s) {
  switch (s) {
    case kStateOff: return "OFF";
    case kStateBooting: return "BOOTING";
    case kStateReady: return "READY";
    case kStateHalted: return "HALTED";
    case kStatePanic: return "PANIC";
    default: return "INVALID";
  }
}

void HostInterface::attach(uint8_t* base, uint64_t size) {
  *this = HostInterface{};
  base_ = base;
  size_ = size;
}

uint32_t HostInterface::fw_state() const {
  if (base_ == nullptr || size_ < sizeof(FwHeader)) return kStateOff;
  return load_acquire_field(&reinterpret_cast<const FwHeader*>(base_)->state);
}

uint64_t HostInterface::heartbeat() const {
  if (base_ == nullptr || size_ < sizeof(FwHeader)) return 0;
  return load_acquire_field(&reinterpret_cast<const FwHeader*>(base_)->heartbeat);
}

FwHeader HostInterface::header_snapshot() const {
  FwHeader h{};
  if (base_ == nullptr || size_ < sizeof(FwHeader)) return h;
  // Acquire on the state word orders the copy after the firmware's
  // publication of READY (it writes the header, then the state).
  (void)fw_state();
  memcpy(&h, base_, sizeof h);
  h.build_id[sizeof h.build_id - 1] = '\0';
  return h;
}

Error HostInterface::bring_up() {
  up_ = false;
  if (base_ == nullptr || size_ < kMinBar2Size)
    return Error(Code::kNotReady, "BAR2 mapping missing or smaller than the ABI minimum");
  hdr_ = header_snapshot();
  if (const vtrn::Error e = validate_layout(hdr_, size_, &layout_); !e.ok())
    return Error(e).prefix("invalid BAR2 layout: ");
  const Region& idx = layout_.at(kRegionCtrlIndex);
  indexes_ = reinterpret_cast<CtrlIndexes*>(base_ + idx.offset);
  RingMemory req{};
  req.slots = base_ + layout_.at(kRegionCtrlReq).offset;
  req.slot_count = kCtrlSlots;
  req.slot_size = kCtrlSlotSize;
  req.prod = &indexes_->req_prod;
  req.cons = &indexes_->req_cons;
  req.my_error = &indexes_->host_error;
  RingMemory resp = req;
  resp.slots = base_ + layout_.at(kRegionCtrlResp).offset;
  resp.prod = &indexes_->resp_prod;
  resp.cons = &indexes_->resp_cons;
  req_ = RingProducer(req);
  resp_ = RingConsumer(resp, (1u << kSlotResponse) | (1u << kSlotEvent));
  const Region& log = layout_.at(kRegionLog);
  log_ = LogReader(reinterpret_cast<const LogRingHeader*>(base_ + log.offset),
                   log.size - sizeof(LogRingHeader));
  log_lost_seen_ = 0;
  telemetry_ = reinterpret_cast<const Telemetry*>(base_ + layout_.at(kRegionTelemetry).offset);
  up_ = true;
  return Error();
}

RingStatus HostInterface::push_request(uint32_t seq, const void* payload, uint32_t length) {
  if (!up_) return RingStatus::kBroken;
  return req_.push(kSlotRequest, seq, payload, length);
}

RingStatus HostInterface::pop_response(SlotHeader* hdr, std::vector<uint8_t>* payload) {
  if (!up_) return RingStatus::kBroken;
  payload->resize(kCtrlMaxPayload);
  RingStatus s = resp_.pop(hdr, payload->data(), uint32_t(payload->size()));
  payload->resize(s == RingStatus::kOk ? hdr->length : 0);
  return s;
}

bool HostInterface::response_pending() { return up_ && resp_.has_pending(); }

uint32_t HostInterface::fw_ring_error() const {
  if (!up_) return kCtrlOk;
  return load_acquire(&indexes_->fw_error);
}

bool HostInterface::read_telemetry(Telemetry* out) const {
  if (!up_) return false;
  // The firmware refreshes the block for a few microseconds every period;
  // SeqlockRetry waits out a vCPU descheduled mid-update.
  vtrn::hostif::SeqlockRetry retry;
  return vtrn::hostif::seqlock_read(telemetry_, out, retry);
}

namespace {
const char* check_power_block(const vtrn::power::PowerTelemetry& p) {
  namespace vp = vtrn::power;
  if (p.version == 0 || p.version > vp::kPowerTelemetryVersion) return "unsupported version";
  if (p.core_count == 0 || p.core_count > vp::kMaxCores) return "core_count out of range";
  if (p.zone_count > vp::kMaxThermalZones) return "zone_count out of range";
  if (p.port_count > vp::kMaxPorts) return "port_count out of range";
  if (p.pstate_count == 0 || p.pstate_count > vp::kMaxOperatingPoints) return "pstate_count out of range";
  if (p.pstate >= p.pstate_count) return "pstate out of range";
  if (p.device_state >= vp::kDeviceStateCount) return "device_state unknown";
  if (p.clock_duty_ppm > 1000000) return "clock_duty_ppm out of range";
  if (p.frequency_mhz > p.max_frequency_mhz) return "frequency_mhz above max_frequency_mhz";
  if (p.clock_event_reasons & ~vp::kReasonMask) return "clock_event_reasons has unknown bits";
  for (uint32_t i = 0; i < p.core_count; ++i) {
    const vp::PowerTelemetryCore& c = p.cores[i];
    if (c.state >= vp::kCoreStateCount) return "core state unknown";
    if (c.utilization_permille > 1000 || c.intensity_permille > 1000) return "core permille out of range";
  }
  for (uint32_t i = 0; i < p.zone_count; ++i) {
    const vp::PowerTelemetryZone& z = p.zones[i];
    // Below absolute zero or above 1000 C is not a temperature.
    if (z.temperature_mc < -273150 || z.temperature_mc > 1000000) return "zone temperature out of range";
  }
  for (uint32_t i = 0; i < p.port_count; ++i) {
    if (p.links[i].state >= vp::kLinkStateCount) return "link state unknown";
  }
  return nullptr;
}
}  // namespace

Error HostInterface::read_power(vtrn::power::PowerTelemetry* out) const {
  if (!up_) return Error(Code::kNotReady, "host interface not up");
  if ((hdr_.capabilities & kCapPower) == 0)
    return Error(Code::kUnsupported, "chip does not publish power telemetry (no kCapPower)");
  const Region& r = layout_.at(kRegionPower);
  if (r.size < sizeof(vtrn::power::PowerTelemetry) || r.offset % 8 != 0)
    return Error(Code::kBadHardware, "power region smaller than the PowerTelemetry block or misaligned");
  const auto* block = reinterpret_cast<const vtrn::power::PowerTelemetry*>(base_ + r.offset);
  vtrn::hostif::SeqlockRetry retry;
  if (!vtrn::hostif::seqlock_read(block, out, retry))
    return Error(Code::kTimeout, "power block: the firmware never held still (seqlock)");
  if (const char* why = check_power_block(*out)) return Error(Code::kBadHardware, std::string("power block: ") + why);
  return Error();
}

bool HostInterface::read_panic(PanicRecord* out) const {
  if (base_ == nullptr) return false;
  uint64_t offset = kPanicOffset;
  if (up_) {
    offset = layout_.at(kRegionPanic).offset;
  } else {
    // No validated table: accept the published one only if it lies inside
    // BAR2, else fall back to the ABI default.
    FwHeader h = header_snapshot();
    for (uint32_t i = 0; i < h.region_count && i < kMaxRegions; ++i) {
      const Region& r = h.regions[i];
      if (r.type == kRegionPanic && r.offset >= sizeof(FwHeader) && r.offset <= size_ &&
          sizeof(PanicRecord) <= size_ - r.offset && r.size >= sizeof(PanicRecord)) {
        offset = r.offset;
      }
    }
  }
  if (offset + sizeof(PanicRecord) > size_) return false;
  memcpy(out, base_ + offset, sizeof *out);
  out->reason[sizeof out->reason - 1] = '\0';
  return out->magic == kPanicMagic;
}

void HostInterface::read_log_lines(std::vector<std::string>* lines, uint64_t* lost_bytes) {
  *lost_bytes = 0;
  if (!up_) return;
  char buf[8192];
  // At most one ring's worth a call (issue 15: bounded work per call): a
  // firmware that writes as fast as this reads cannot hold the caller here;
  // what it wrote meanwhile is read on the next call, or counted lost.
  for (uint64_t budget = std::max<uint64_t>(log_.size(), sizeof buf); budget != 0;) {
    size_t n = log_.read(buf, size_t(std::min<uint64_t>(sizeof buf, budget)));
    if (n == 0) break;
    budget -= n;
    size_t start = 0;
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') continue;
      lines->emplace_back(buf + start, i - start);
      start = i + 1;
    }
    // LogReader hands out complete lines only; a tail without '\n' is a
    // line longer than our buffer: keep it rather than lose it.
    if (start < n) lines->emplace_back(buf + start, n - start);
  }
  *lost_bytes = log_.lost_bytes() - log_lost_seen_;
  log_lost_seen_ = log_.lost_bytes();
}

}  // namespace drv
