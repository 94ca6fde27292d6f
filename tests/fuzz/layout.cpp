// Fuzzes the host's check of the firmware's BAR2 region table
// (vtrn::hostif::validate_layout) with arbitrary FwHeader bytes.
//
// Input: one flags byte, a little-endian u64 BAR2 size, then the header bytes
// (zero-padded to sizeof(FwHeader)). Flag bit 0 makes the host's BAR2 size
// equal the header's claim, so the fuzzer reaches the region checks without
// first having to guess a matching size; the other bits are unused.
//
// When validation passes, this file checks the result independently of
// layout.cpp: every required region present, every region inside BAR2, 4 KiB
// aligned, clear of the header, no two overlapping, ring sizes as the ABI
// says, and every table entry reflected in the Layout. When it fails, the
// error must carry a code and a message, and `out` must be untouched.
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "vtrn/layout.h"

using namespace vtrn::hostif;

namespace {

void check_valid(const FwHeader& h, uint64_t bar2, const Layout& l) {
  FUZZ_CHECK(l.bar2_size == bar2, "layout bar2 %llu", (unsigned long long)l.bar2_size);
  for (uint32_t t = kRegionPanic; t < kRegionTypeCount; ++t) {
    const Region& r = l.regions[t];
    // Optional regions: the host window, DMA and the service regions.
    const bool optional = t == kRegionHostWindow || t == kRegionDma || t == kRegionPower ||
                          t == kRegionLinks || t == kRegionJobs;
    if (!optional) FUZZ_CHECK(r.size != 0, "required region %u absent", t);
    if (r.size == 0) continue;
    FUZZ_CHECK(r.type == t, "slot %u holds type %u", t, r.type);
    FUZZ_CHECK(r.offset >= sizeof(FwHeader) && r.offset <= bar2 && r.size <= bar2 - r.offset,
               "region %u [0x%llx,+0x%llx) outside BAR2 0x%llx", t,
               (unsigned long long)r.offset, (unsigned long long)r.size,
               (unsigned long long)bar2);
    FUZZ_CHECK(r.offset % 4096 == 0, "region %u offset unaligned", t);
    bool listed = false;
    for (uint32_t i = 0; i < h.region_count; ++i) {
      listed = listed || memcmp(&h.regions[i], &r, sizeof r) == 0;
    }
    FUZZ_CHECK(listed, "region %u not taken from the table", t);
    for (uint32_t o = t + 1; o < kRegionTypeCount; ++o) {
      const Region& q = l.regions[o];
      if (q.size == 0) continue;
      // Both ranges are inside BAR2 (checked above for t, below for o), so
      // the ends cannot wrap.
      FUZZ_CHECK(r.offset + r.size <= q.offset || q.offset + q.size <= r.offset,
                 "regions %u and %u overlap", t, o);
    }
  }
  FUZZ_CHECK(l.regions[kRegionCtrlReq].size == uint64_t(kCtrlSlots) * kCtrlSlotSize &&
                 l.regions[kRegionCtrlResp].size == uint64_t(kCtrlSlots) * kCtrlSlotSize,
             "control rings sized 0x%llx / 0x%llx",
             (unsigned long long)l.regions[kRegionCtrlReq].size,
             (unsigned long long)l.regions[kRegionCtrlResp].size);
  const uint64_t ring = l.regions[kRegionLog].size - sizeof(LogRingHeader);
  FUZZ_CHECK(ring >= 4096 && (ring & (ring - 1)) == 0, "log ring of 0x%llx bytes",
             (unsigned long long)ring);
  FUZZ_CHECK(l.regions[kRegionPanic].size >= sizeof(PanicRecord) &&
                 l.regions[kRegionTelemetry].size >= sizeof(Telemetry) &&
                 l.regions[kRegionCtrlIndex].size >= sizeof(CtrlIndexes),
             "a fixed-size block does not fit its region");
  FUZZ_CHECK(h.region_count >= 1 && h.region_count <= kMaxRegions, "region count %u",
             h.region_count);
  for (uint32_t i = 0; i < h.region_count; ++i) {
    const Region& e = h.regions[i];
    FUZZ_CHECK(e.type > kRegionNone && e.type < kRegionTypeCount &&
                   memcmp(&l.regions[e.type], &e, sizeof e) == 0,
               "table entry %u (type %u) accepted but not in the layout", i, e.type);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vtrn::fuzz::Input in(data, size);
  const uint8_t flags = in.u8();
  uint64_t bar2 = in.u64();
  FwHeader h;
  in.bytes(&h, sizeof h);
  if (flags & 1) bar2 = h.bar2_size;

  Layout sentinel;
  memset(&sentinel, 0xa5, sizeof sentinel);
  Layout out = sentinel;

  const vtrn::Error e = validate_layout(h, bar2, &out);
  const bool ok = e.ok();
  if (ok) {
    check_valid(h, bar2, out);
  } else {
    FUZZ_CHECK(memcmp(&out, &sentinel, sizeof out) == 0, "failed validation wrote the layout");
    FUZZ_CHECK(e.code() == vtrn::Code::kBadHardware, "failure with code %u", unsigned(e.code()));
    FUZZ_CHECK(memchr(e.detail(), 0, vtrn::Error::kDetailCap) != nullptr, "unterminated message");
    FUZZ_CHECK(e.detail()[0] != 0, "failure without a message");
  }
  // The same header must validate the same way without an output.
  FUZZ_CHECK(validate_layout(h, bar2, nullptr).ok() == ok, "result depends on out");
  return 0;
}
