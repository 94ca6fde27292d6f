// Fuzzes the board DTB parser (vtrn::board::parse_board, parse_chip,
// parse_topology, resize_board) with arbitrary bytes as the tree: what
// `vtrn up --board FILE` feeds it from a user's file.
//
// libfdt comes from the distribution and is not instrumented, so ASan cannot
// see its reads; the input is placed right before a PROT_NONE page
// (guarded_copy.h) so a read past it by libfdt faults. The seed corpus is
// every board the project ships (board/*.dts and the ring, torus, switch
// and UltraServer boards board/gen_board.py writes; make_seeds.py).
//
// Invariants: a parse either fails with a closed error code and a terminated,
// non-empty message, or succeeds with every field inside the range board.h
// documents; parse_chip fails whenever parse_board does (they share the
// board-level checks); the wiring of a board that parses is either refused
// (leaving an empty Topology) or holds what parse_topology promises: links
// sorted by index, at least one chip end each, a chip end on the board names
// a port its chip defines, one off the board names a chip id past the last,
// a switch end names a switch of the board and a port below its vtrn,ports,
// and no end is used twice; a successful resize produces a tree that parses
// with exactly the requested chip count, and a cloned chip parses exactly
// when the chip it was cloned from does.
#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

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

// Port indexes (reg values) chip `id` defines, parsed once per input.
// parse_topology reads the wiring, not every chip: a chip that does not
// parse for reasons of its own (vtrnd refuses the board for it) has no
// port list to hold an end against.
class PortsOfChips {
 public:
  PortsOfChips(const uint8_t* fdt, size_t size)
      : fdt_(fdt), size_(size), chip_(std::make_unique<Chip>()) {}
  // nullptr when the chip itself does not parse.
  const std::vector<uint32_t>* of(uint32_t id) {
    auto it = std::find_if(known_.begin(), known_.end(),
                           [id](const Known& k) { return k.id == id; });
    if (it == known_.end()) {
      Known k{id, parse_chip(fdt_, size_, id, chip_.get()).ok(), {}};
      if (k.parses)
        for (uint32_t i = 0; i < chip_->port_count; ++i) k.ports.push_back(chip_->ports[i].index);
      known_.push_back(std::move(k));
      it = known_.end() - 1;
    }
    return it->parses ? &it->ports : nullptr;
  }

 private:
  struct Known {
    uint32_t id;
    bool parses;
    std::vector<uint32_t> ports;
  };
  const uint8_t* fdt_;
  size_t size_;
  std::unique_ptr<Chip> chip_;
  std::vector<Known> known_;
};

void check_topology(const uint8_t* fdt, size_t size, const Board& board) {
  auto t = std::make_unique<Topology>();
  const vtrn::Error r = parse_topology(fdt, size, t.get());
  check_result(r);
  if (!r.ok()) {
    FUZZ_CHECK(t->switch_count == 0 && t->link_count == 0,
               "refused wiring left %u switches, %u links", t->switch_count, t->link_count);
    return;
  }
  FUZZ_CHECK(t->switch_count <= kMaxSwitches, "%u switches", t->switch_count);
  FUZZ_CHECK(t->link_count <= kMaxLinks, "%u links", t->link_count);
  for (uint32_t i = 0; i < t->switch_count; ++i) {
    const Switch& sw = t->switches[i];
    FUZZ_CHECK(sw.ports >= 1 && sw.ports <= kMaxSwitchPorts, "switch %u: %u ports", sw.id,
               sw.ports);
    FUZZ_CHECK(sw.max_speed_gtps >= 1 && sw.max_speed_gtps <= 128, "switch %u: speed %u", sw.id,
               sw.max_speed_gtps);
    FUZZ_CHECK(pow2(sw.lanes) && sw.lanes <= 16, "switch %u: %u lanes", sw.id, sw.lanes);
    for (uint32_t j = 0; j < i; ++j)
      FUZZ_CHECK(t->switches[j].id != sw.id, "switch id %u twice", sw.id);
  }
  PortsOfChips chips(fdt, size);
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> ends;
  auto check_end = [&](uint32_t link, const LinkEnd& e, bool on_board) {
    ends.emplace_back(uint32_t(e.kind), e.id, e.port);
    if (e.kind == EndKind::kChip) {
      FUZZ_CHECK(on_board == (e.id < board.chip_count),
                 "link %u: chip %u on_board %d with %u chips", link, e.id, on_board,
                 board.chip_count);
      const std::vector<uint32_t>* ports = on_board ? chips.of(e.id) : nullptr;
      if (ports != nullptr)
        FUZZ_CHECK(std::find(ports->begin(), ports->end(), e.port) != ports->end(),
                   "link %u: chip %u has no port %u", link, e.id, e.port);
      return;
    }
    FUZZ_CHECK(e.kind == EndKind::kSwitch, "link %u: end kind %u", link, uint32_t(e.kind));
    FUZZ_CHECK(on_board, "link %u: switch end marked off the board", link);
    const Switch* sw = std::find_if(t->switches, t->switches + t->switch_count,
                                    [&](const Switch& s) { return s.id == e.id; });
    FUZZ_CHECK(sw != t->switches + t->switch_count, "link %u: no switch %u", link, e.id);
    FUZZ_CHECK(e.port < sw->ports, "link %u: switch %u port %u of %u", link, e.id, e.port,
               sw->ports);
  };
  for (uint32_t i = 0; i < t->link_count; ++i) {
    const Link& l = t->links[i];
    if (i > 0)
      FUZZ_CHECK(t->links[i - 1].index < l.index, "links not sorted: %u after %u", l.index,
                 t->links[i - 1].index);
    FUZZ_CHECK(l.a.kind == EndKind::kChip || l.b.kind == EndKind::kChip,
               "link %u has no chip end", l.index);
    check_end(l.index, l.a, l.a_on_board);
    check_end(l.index, l.b, l.b_on_board);
  }
  std::sort(ends.begin(), ends.end());
  FUZZ_CHECK(std::adjacent_find(ends.begin(), ends.end()) == ends.end(),
             "a link end is used twice");
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
    // The clone copies the last chip's node but not its links, so a chip
    // that fails only because of its links (a port wired twice, say) has a
    // clone that parses: a good original must clone into a good chip, and
    // the original itself must parse in the resized tree exactly as before.
    auto c = std::make_unique<Chip>();
    const vtrn::Error rc = parse_chip(copy.data(), out_cap, chips - 1, c.get());
    FUZZ_CHECK(rc.ok() || !last_chip_ok, "clone of chip %u does not parse, the original does: %s",
               board.chip_count - 1, rc.detail());
    const vtrn::Error ro = parse_chip(copy.data(), out_cap, board.chip_count - 1, c.get());
    FUZZ_CHECK(ro.ok() == last_chip_ok, "chip %u parses %s after the resize, %s before: %s",
               board.chip_count - 1, ro.ok() ? "ok" : "not", last_chip_ok ? "ok" : "not", ro.detail());
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
  check_topology(fdt, size, *board);

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
