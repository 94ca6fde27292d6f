// BAR2 region table: the firmware's default layout and the host's check of
// whatever the firmware actually published.
#include "vtrn/layout.h"

#include "vtrn/dma_abi.h"

#include <stdio.h>
#include <string.h>

namespace vtrn::hostif {
namespace {

struct Rule {
  RegionType type;
  const char* name;
  uint64_t min_size;
  uint64_t exact_size;  // 0 = any size >= min_size
  bool required;
};

constexpr Rule kRules[] = {
    {kRegionPanic, "panic", sizeof(PanicRecord), 0, true},
    {kRegionTelemetry, "telemetry", sizeof(Telemetry), 0, true},
    {kRegionCtrlIndex, "ctrl-index", sizeof(CtrlIndexes), 0, true},
    {kRegionCtrlReq, "ctrl-req", 0, uint64_t(kCtrlSlots) * kCtrlSlotSize, true},
    {kRegionCtrlResp, "ctrl-resp", 0, uint64_t(kCtrlSlots) * kCtrlSlotSize, true},
    {kRegionLog, "log", sizeof(LogRingHeader) + 4096, 0, true},
    {kRegionHostWindow, "host-window", 4096, 0, false},
    {kRegionDma, "dma", dma::dma_region_bytes(1, dma::kMinDepth), 0, false},
    // Service regions: their owners check their own headers; here only the
    // table's bounds. Optional so an older firmware still attaches.
    {kRegionPower, "power", 4096, 0, false},
    {kRegionLinks, "links", 4096, 0, false},
    {kRegionJobs, "jobs", 4096, 0, false},
};

const Rule* rule_for(uint32_t type) {
  for (const Rule& r : kRules) {
    if (r.type == type) return &r;
  }
  return nullptr;
}

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

}  // namespace

bool publish_layout(FwHeader* hdr, uint64_t bar2_size, uint32_t dma_queues, uint32_t dma_depth) {
  const uint64_t dma_bytes = dma_queues ? dma::dma_region_bytes(dma_queues, dma_depth) : 0;
  const uint64_t window = dma_queues ? (kDmaOffset + dma_bytes + 0xFFFFF) & ~uint64_t(0xFFFFF) : kHostWindowOffset;
  if (window + 0x100000 > bar2_size) return false;
  const Region table[] = {
      {kRegionPanic, 0, kPanicOffset, 0x1000},
      {kRegionTelemetry, 0, kTelemetryOffset, kCtrlIndexOffset - kTelemetryOffset},
      {kRegionCtrlIndex, 0, kCtrlIndexOffset, 0x1000},
      {kRegionCtrlReq, 0, kCtrlReqOffset, uint64_t(kCtrlSlots) * kCtrlSlotSize},
      {kRegionCtrlResp, 0, kCtrlRespOffset, uint64_t(kCtrlSlots) * kCtrlSlotSize},
      {kRegionLog, 0, kLogOffset, sizeof(LogRingHeader) + kLogDataSize},
      {kRegionHostWindow, 0, window, bar2_size - window},
      {kRegionDma, 0, kDmaOffset, dma_bytes},
      {kRegionPower, 0, kPowerOffset, kPowerSize},
      {kRegionLinks, 0, kLinksOffset, kLinksSize},
      {kRegionJobs, 0, kJobsOffset, kJobsSize},
  };
  static_assert(sizeof table / sizeof table[0] <= kMaxRegions);
  uint32_t n = 0;
  for (const Region& r : table) {
    if (r.size) hdr->regions[n++] = r;
  }
  for (uint32_t i = n; i < kMaxRegions; ++i) hdr->regions[i] = Region{};
  hdr->region_count = n;
  hdr->bar2_size = bar2_size;
  return true;
}

vtrn::Error validate_layout(const FwHeader& h, uint64_t bar2_size, Layout* out) {
  auto fail = [](const char* fmt, auto... args) { return vtrn::Error(vtrn::Code::kBadHardware, fmt, args...); };
  if (h.magic != kMagic) return fail("bad magic 0x%08x (want 0x%08x)", h.magic, kMagic);
  if (h.abi_major != kAbiMajor)
    return fail("firmware ABI %u.%u, host speaks %u.x", h.abi_major, h.abi_minor, kAbiMajor);
  if (h.bar2_size != bar2_size)
    return fail("firmware sized BAR2 at %llu bytes, host mapped %llu",
                (unsigned long long)h.bar2_size, (unsigned long long)bar2_size);
  if (h.region_count == 0 || h.region_count > kMaxRegions)
    return fail("region count %u outside 1..%u", h.region_count, kMaxRegions);

  Layout l{};
  l.bar2_size = bar2_size;
  for (uint32_t i = 0; i < h.region_count; ++i) {
    const Region& r = h.regions[i];
    const Rule* rule = rule_for(r.type);
    if (!rule) return fail("region %u: unknown type %u", i, r.type);
    if (l.regions[r.type].size) return fail("region %s listed twice", rule->name);
    if (r.offset % 4096) return fail("region %s: offset 0x%llx not 4 KiB aligned", rule->name,
                                     (unsigned long long)r.offset);
    if (r.offset < sizeof(FwHeader) || r.offset > bar2_size || r.size > bar2_size - r.offset)
      return fail("region %s: [0x%llx, +0x%llx) outside BAR2 (0x%llx)", rule->name,
                  (unsigned long long)r.offset, (unsigned long long)r.size,
                  (unsigned long long)bar2_size);
    if (r.size < rule->min_size || (rule->exact_size && r.size != rule->exact_size))
      return fail("region %s: size 0x%llx invalid", rule->name, (unsigned long long)r.size);
    if (r.type == kRegionLog && !is_pow2(r.size - sizeof(LogRingHeader)))
      return fail("region log: ring size 0x%llx not a power of two",
                  (unsigned long long)(r.size - sizeof(LogRingHeader)));
    for (uint32_t t = 0; t < kRegionTypeCount; ++t) {
      const Region& o = l.regions[t];
      if (o.size && r.offset < o.offset + o.size && o.offset < r.offset + r.size)
        return fail("region %s overlaps region %s", rule->name, rule_for(t)->name);
    }
    l.regions[r.type] = r;
  }
  for (const Rule& rule : kRules) {
    if (rule.required && !l.regions[rule.type].size)
      return fail("required region %s missing", rule.name);
  }
  if (out) *out = l;
  return {};
}

}  // namespace vtrn::hostif
