// Fuzzes the board DTB parser (vtrn::board::parse_board, parse_chip,
// resize_board) with arbitrary bytes as the tree.
//
// libfdt comes from the distribution and is not instrumented, so ASan cannot
// see its reads; the input is placed right before a PROT_NONE page
// (guarded_copy.h) so a read past it by libfdt faults. The seed
// corpus is the compiled board/*.dts.
//
// Invariants: a parse either fails with a closed error code and a terminated,
// non-empty message, or succeeds with every field inside the range board.h
// documents; parse_chip fails whenever parse_board does (they share the
// board-level checks); a successful resize produces a tree that parses with
// exactly the requested chip count, and a cloned chip parses exactly when the
// chip it was cloned from does.
#include <memory>

#include "fuzz_check.h"
#include "guarded_copy.h"
#include "vtrn/board.h"

using namespace vtrn::board;
using vtrn::fuzz::GuardedCopy;

namespace {

bool terminated(const char* s, size_t cap) { return memchr(s, 0, cap) != nullptr; }
bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

void check_result(const vtrn::Error& r) {
  const vtrn::Code c = r.code();
  FUZZ_CHECK(c == vtrn::Code::kOk || (uint32_t(c) >= uint32_t(vtrn::Code::kBadTree) &&
                                      uint32_t(c) <= uint32_t(vtrn::Code::kNoSuchChip)),
             "error %u outside the board codes", uint32_t(c));
  FUZZ_CHECK(terminated(r.detail(), vtrn::Error::kDetailCap), "unterminated message");
  if (!r.ok()) FUZZ_CHECK(r.detail()[0] != 0, "error %s without a message", vtrn::code_name(c));
}

void check_chip(const Chip& c, uint32_t id) {
  FUZZ_CHECK(c.id == id, "chip id %u, asked for %u", c.id, id);
  FUZZ_CHECK(terminated(c.name, kNameLen), "chip name unterminated");
  FUZZ_CHECK(c.neuron_cores >= 1 && c.neuron_cores <= kMaxNeuronCores, "neuron cores %u",
             c.neuron_cores);
  FUZZ_CHECK(c.telemetry_period_ms >= 10 && c.telemetry_period_ms <= 10000, "period %u",
             c.telemetry_period_ms);
  FUZZ_CHECK(pow2(c.bar2_mib) && c.bar2_mib >= 4 && c.bar2_mib <= 1024, "bar2 %u MiB", c.bar2_mib);
  const HbmGeometry& h = c.hbm;
  FUZZ_CHECK(h.stacks >= 1 && h.stacks <= 8, "hbm stacks %u", h.stacks);
  FUZZ_CHECK(pow2(h.page_bytes) && h.page_bytes >= 4096 && h.page_bytes <= (2u << 20),
             "hbm page %u", h.page_bytes);
  FUZZ_CHECK(h.bytes_per_stack >= (16ull << 20) && h.bytes_per_stack % h.page_bytes == 0,
             "hbm stack bytes %llu", (unsigned long long)h.bytes_per_stack);
  FUZZ_CHECK(h.total_bytes() / h.stacks == h.bytes_per_stack, "hbm total overflows");
  FUZZ_CHECK(h.channels >= 1 && h.channels <= 32, "hbm channels %u", h.channels);
  FUZZ_CHECK(c.port_count <= kMaxPorts, "%u ports", c.port_count);
  for (uint32_t i = 0; i < c.port_count; ++i) {
    const LinkPort& p = c.ports[i];
    FUZZ_CHECK(p.index < kMaxPorts, "port index %u", p.index);
    FUZZ_CHECK(p.max_speed_gtps >= 1 && p.max_speed_gtps <= 128, "port speed %u",
               p.max_speed_gtps);
    FUZZ_CHECK(pow2(p.lanes) && p.lanes <= 16, "port lanes %u", p.lanes);
  }
  FUZZ_CHECK(c.power_domain_count <= kMaxPowerDomains, "%u power domains", c.power_domain_count);
  for (uint32_t i = 0; i < c.power_domain_count; ++i) {
    FUZZ_CHECK(terminated(c.power_domains[i].name, kNameLen), "domain name unterminated");
    FUZZ_CHECK((c.power_domains[i].core_mask >> c.neuron_cores) == 0,
               "domain %u names core mask 0x%x beyond %u cores", i, c.power_domains[i].core_mask,
               c.neuron_cores);
  }
  FUZZ_CHECK(c.thermal_zone_count <= kMaxThermalZones, "%u zones", c.thermal_zone_count);
  for (uint32_t i = 0; i < c.thermal_zone_count; ++i) {
    const ThermalZone& z = c.thermal_zones[i];
    FUZZ_CHECK(terminated(z.name, kNameLen), "zone name unterminated");
    FUZZ_CHECK(z.critical_mc > z.throttle_mc, "zone %u critical %d <= throttle %d", i,
               z.critical_mc, z.throttle_mc);
  }
}

// Resizes to `chips` and checks the output when it succeeds.
void check_resize(const uint8_t* fdt, size_t size, uint32_t chips, size_t out_cap,
                  const Board& board, bool last_chip_ok) {
  auto out = std::make_unique<uint8_t[]>(out_cap);
  const vtrn::Error r = resize_board(fdt, size, chips, out.get(), out_cap);
  check_result(r);
  if (!r.ok()) return;
  GuardedCopy copy(out.get(), out_cap, 8);
  auto b = std::make_unique<Board>();
  const vtrn::Error rb = parse_board(copy.data(), out_cap, b.get());
  FUZZ_CHECK(rb.ok() && b->chip_count == chips, "resized tree: %s, %u chips instead of %u",
             rb.detail(), b->chip_count, chips);
  if (chips > board.chip_count) {
    auto c = std::make_unique<Chip>();
    const vtrn::Error rc = parse_chip(copy.data(), out_cap, chips - 1, c.get());
    FUZZ_CHECK(rc.ok() == last_chip_ok, "clone of chip %u parses %s, original %s: %s",
               board.chip_count - 1, rc.ok() ? "ok" : "not", last_chip_ok ? "ok" : "not",
               rc.detail());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  GuardedCopy in(data, size, 8);
  const uint8_t* fdt = in.data();

  auto board = std::make_unique<Board>();
  const vtrn::Error rb = parse_board(fdt, size, board.get());
  check_result(rb);
  auto chip = std::make_unique<Chip>();
  if (!rb.ok()) {
    const vtrn::Error rc = parse_chip(fdt, size, 0, chip.get());
    FUZZ_CHECK(!rc.ok(), "chip 0 parses on a board that does not (%s)", rb.detail());
    return 0;
  }
  FUZZ_CHECK(board->chip_count >= 1 && board->chip_count <= kMaxChips, "%u chips",
             board->chip_count);
  FUZZ_CHECK(terminated(board->model, kNameLen), "model unterminated");
  for (uint32_t i = 0; i < board->chip_count; ++i) {
    FUZZ_CHECK(board->chip_ids[i] == i, "chip ids not dense");
  }

  bool last_ok = false;
  const uint32_t n = board->chip_count;
  for (uint32_t id : {0u, n - 1}) {
    const vtrn::Error rc = parse_chip(fdt, size, id, chip.get());
    check_result(rc);
    if (rc.ok()) check_chip(*chip, id);
    if (id == n - 1) last_ok = rc.ok();
  }
  const vtrn::Error none = parse_chip(fdt, size, n, chip.get());
  FUZZ_CHECK(none.code() == vtrn::Code::kNoSuchChip, "chip %u of %u: %s", n, n, none.detail());

  // Resizing costs several full parses; spending it on one input in four
  // (chosen by a hash of the bytes, so a replay repeats the choice) keeps the
  // fuzzer's rate up for the parser, which is the part that sees user files.
  uint32_t hash = 2166136261u;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 16777619u;
  if ((hash & 3) != 0) return 0;
  const size_t cap = 2 * size + 4096;
  check_resize(fdt, size, 1, cap, *board, last_ok);
  if (n < kMaxChips) check_resize(fdt, size, n + 1, cap + size, *board, last_ok);
  check_resize(fdt, size, n, size / 2 + 64, *board, last_ok);
  return 0;
}
