// `vtrn mem stats|ls|alloc|free|read|write CHIP ...` and `vtrn inject ecc`:
// a chip's device memory (HBM) through vtrnd's HBM service.
//
// An allocation belongs to the client connection that made it and dies with
// it, as device memory does with the process that opened the device. So
// `vtrn mem alloc` alone only proves an allocation can be made (it is
// released as the command exits, and says so); `--hold` keeps this process
// and its connection alive, holding the memory, until it gets SIGINT,
// SIGTERM or SIGHUP, which is what demos and tests use to own a buffer that
// `mem read`/`mem write` (DMA, which the chip allows only inside a live
// allocation) then work on. `--detach` instead makes the allocation the
// tenant's (the uid's, not the connection's), as `vtrn submit` detaches a
// job: it stays after the command exits, counts against the tenant's quota,
// and `mem free CHIP ADDR` from any process of that uid (or the admin) ends
// it. `mem free` frees the allocation that starts at ADDR if it is this
// uid's (or the caller is the admin); another tenant's is refused (exit 8).
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "render.h"

namespace tools {
namespace {

constexpr const char* kCategories[] = {"tensors", "code", "scratch", "collectives", "dma-buffers"};

uint64_t parse_addr(const std::string& s, const char* what) {
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(s, &used, 0);
    if (used != s.size() || s.empty() || s[0] == '-') throw std::invalid_argument("trailing characters");
    return v;
  } catch (const std::exception&) {
    throw CliError(Exit::kUsage, std::string(what) + " " + s + ": expected a number (0x... for hex)");
  }
}

std::string owner_name(uint32_t kind, uint64_t id) {
  if (kind == 0) return "firmware";
  if (kind == 1) return "client " + std::to_string(id);
  if (kind == 2) return "job " + std::to_string(id);
  if (kind == 3) return "uid " + std::to_string(id) + " (detached)";
  return "owner " + std::to_string(kind) + ":" + std::to_string(id);
}

std::string category_name(uint32_t c) { return c < 5 ? kCategories[c] : "unknown"; }

struct MemChipOptions {
  uint32_t chip = 0;
  bool json = false;
};

// Stats.

void run_mem_stats(const MemChipOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmStatsRequest r = VTRN__API__HBM_STATS_REQUEST__INIT;
  r.chip = o.chip;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_STATS;
  req.hbm_stats = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_STATS);
  const Vtrn__Api__HbmStatsResponse& out = *resp->hbm_stats;
  if (out.stats == nullptr) throw CliError(Exit::kFailed, "vtrnd answered HbmStats without statistics");
  const Vtrn__Types__HbmStats& s = *out.stats;
  nlohmann::json cats = nlohmann::json::array();
  Table ct({"category", "allocations", "bytes"});
  for (size_t c = 0; c < s.n_category_bytes && c < 5; ++c) {
    const uint32_t n = c < s.n_category_allocations ? s.category_allocations[c] : 0;
    cats.push_back({{"category", kCategories[c]}, {"allocations", n}, {"bytes", s.category_bytes[c]}});
    ct.add({kCategories[c], std::to_string(n), format_bytes(s.category_bytes[c])});
  }
  nlohmann::json stacks = nlohmann::json::array();
  Table st({"stack", "correctable ECC", "retired pages"});
  for (size_t i = 0; i < s.n_correctable_per_stack; ++i) {
    const uint32_t ret = i < s.n_retired_per_stack ? s.retired_per_stack[i] : 0;
    stacks.push_back({{"stack", i}, {"ecc_correctable", s.correctable_per_stack[i]}, {"retired_pages", ret}});
    st.add({std::to_string(i), std::to_string(s.correctable_per_stack[i]), std::to_string(ret)});
  }
  const uint64_t failures = s.fail_no_memory + s.fail_quota + s.fail_bad_argument + s.fail_no_metadata;
  const nlohmann::json doc = {
      {"chip", o.chip},
      {"hbm_base", s.hbm_base},
      {"page_bytes", s.page_bytes},
      {"stacks", s.stacks},
      {"bytes_per_stack", s.bytes_per_stack},
      {"channels", s.channels},
      {"total_bytes", s.total_bytes},
      {"used_bytes", s.used_bytes},
      {"free_bytes", s.free_bytes},
      {"retired_bytes", s.retired_bytes},
      {"largest_free_bytes", s.largest_free_bytes},
      {"fragmentation", s.fragmentation},
      {"largest_contiguous_free_bytes", s.largest_contiguous_free_bytes},
      {"contiguous_fragmentation", s.contiguous_fragmentation},
      {"remap_base", s.remap_base},
      {"remap_bytes", s.remap_bytes},
      {"remap_used_bytes", s.remap_used_bytes},
      {"stitched_allocations", s.stitched_allocations},
      {"stitched_extents", s.stitched_extents},
      {"stitches", s.stitches},
      {"stitch_extents_max", s.stitch_extents_max},
      {"live_allocations", s.live_allocations},
      {"free_blocks", s.free_blocks},
      {"owners", s.owners},
      {"allocs", s.allocs},
      {"frees", s.frees},
      {"alloc_failures", failures},
      {"fail_no_memory", s.fail_no_memory},
      {"fail_quota", s.fail_quota},
      {"fail_bad_argument", s.fail_bad_argument},
      {"fail_no_metadata", s.fail_no_metadata},
      {"vtrnd_quota_refusals", out.vtrnd_quota_refusals},
      {"client_quota_bytes", out.client_quota_bytes},
      {"retired_pages", s.retired_pages},
      {"retired_addrs", std::vector<uint64_t>(out.retired_addrs, out.retired_addrs + out.n_retired_addrs)},
      {"poisoned_allocations", s.poisoned_allocations},
      {"ecc_uncorrectable", s.ecc_uncorrectable},
      {"categories", cats},
      {"per_stack", stacks},
      {"store", out.store_path ? out.store_path : ""}};
  if (o.json) {
    print_json(doc);
    return;
  }
  // Both figures: "largest free" is the largest request that would succeed
  // (stitching included), "contiguous" the largest single free block.
  char frag[16], cfrag[16];
  snprintf(frag, sizeof frag, "%.1f%%", s.fragmentation * 100.0);
  snprintf(cfrag, sizeof cfrag, "%.1f%%", s.contiguous_fragmentation * 100.0);
  std::cout << "chip " << o.chip << ": HBM " << s.stacks << " x " << format_bytes(s.bytes_per_stack) << " at "
            << hex(s.hbm_base) << ", " << format_bytes(s.page_bytes) << " pages, " << s.channels
            << " channels per stack\n";
  Table t({"total", "used", "free", "largest free", "fragmentation", "largest contiguous", "contiguous frag",
           "allocations", "alloc failures", "retired pages"});
  t.add({format_bytes(s.total_bytes), format_bytes(s.used_bytes), format_bytes(s.free_bytes),
         format_bytes(s.largest_free_bytes), frag, format_bytes(s.largest_contiguous_free_bytes), cfrag,
         std::to_string(s.live_allocations), std::to_string(failures), std::to_string(s.retired_pages)});
  std::cout << t.render() << "\n" << ct.render() << "\n" << st.render();
  std::cout << "failures: " << s.fail_no_memory << " no memory, " << s.fail_quota << " quota (firmware), "
            << out.vtrnd_quota_refusals << " quota (vtrnd), " << s.fail_bad_argument << " bad argument, "
            << s.fail_no_metadata << " table full\n";
  if (s.remap_bytes)
    std::cout << "stitching: remap window " << hex(s.remap_base) << " + " << format_bytes(s.remap_bytes) << ", "
              << s.stitched_allocations << " stitched live (" << s.stitched_extents << " extents, "
              << format_bytes(s.remap_used_bytes) << "), " << s.stitches << " stitched since boot, at most "
              << s.stitch_extents_max << " extents\n";
  else
    std::cout << "stitching: off (the firmware has no remap window)\n";
  std::cout << "tenant quota: " << (out.client_quota_bytes ? format_bytes(out.client_quota_bytes) : "none")
            << "; poisoned allocations: " << s.poisoned_allocations << "; uncorrectable ECC since boot: "
            << s.ecc_uncorrectable << "\n";
  if (out.n_retired_addrs) {
    std::cout << "retired:";
    for (size_t i = 0; i < out.n_retired_addrs; ++i) std::cout << " " << hex(out.retired_addrs[i]);
    std::cout << "\n";
  }
  if (out.store_path && out.store_path[0]) std::cout << "retired-page store: " << out.store_path << "\n";
}

// Ls.

void run_mem_ls(const MemChipOptions& o) {
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmListRequest r = VTRN__API__HBM_LIST_REQUEST__INIT;
  r.chip = o.chip;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_LIST;
  req.hbm_list = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_LIST);
  const Vtrn__Api__HbmListResponse& l = *resp->hbm_list;
  nlohmann::json rows = nlohmann::json::array();
  // A tenant gets its own allocations; the admin every tenant's, with the
  // tenant (uid) of each as a column.
  const bool all = l.all_tenants;
  std::vector<std::string> cols = {"addr", "bytes", "owner", "category", "placement", "state"};
  if (all) cols.insert(cols.begin() + 3, "uid");
  Table t(cols);
  for (size_t i = 0; i < l.n_allocations; ++i) {
    const Vtrn__Api__HbmAllocationInfo& a = *l.allocations[i];
    rows.push_back({{"addr", a.addr},
                    {"bytes", a.bytes},
                    {"owner", a.owner},
                    {"owner_kind", a.owner_kind == 0   ? "firmware"
                                   : a.owner_kind == 1 ? "client"
                                   : a.owner_kind == 2 ? "job"
                                   : a.owner_kind == 3 ? "tenant"
                                                       : "unknown"},
                    {"detached", bool(a.detached)},
                    {"owner_id", a.owner_id},
                    {"uid", a.uid >= 0 ? nlohmann::json(a.uid) : nlohmann::json(nullptr)},
                    {"category", category_name(uint32_t(a.category))},
                    {"poisoned", bool(a.poisoned)},
                    {"stitched", bool(a.stitched)},
                    {"extents", a.extents}});
    std::vector<std::string> row = {hex(a.addr), format_bytes(a.bytes), owner_name(a.owner_kind, a.owner_id),
                                    category_name(uint32_t(a.category)),
                                    a.stitched ? "stitched x" + std::to_string(a.extents) : "contiguous",
                                    a.poisoned ? "POISONED (ECC)" : "ok"};
    if (all) row.insert(row.begin() + 3, a.uid >= 0 ? std::to_string(a.uid) : "-");
    t.add(row);
  }
  if (o.json) {
    print_json({{"chip", o.chip}, {"all_tenants", all}, {"allocations", rows}});
    return;
  }
  if (l.n_allocations == 0) {
    std::cout << "chip " << o.chip << ": no live HBM allocations\n";
    return;
  }
  std::cout << t.render();
}

// Alloc / free.

struct AllocOptions {
  uint32_t chip = 0;
  uint64_t size = 0;
  uint64_t align = 0;
  std::string category = "tensors";
  bool hold = false;
  bool detach = false;
  bool json = false;
};

void wait_for_release_signal() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  int sig = 0;
  (void)sigwait(&set, &sig);
}

void run_alloc(const AllocOptions& o) {
  uint32_t cat = 0;
  while (cat < 5 && o.category != kCategories[cat]) ++cat;
  if (o.hold) {
    // Blocked before anything can arrive, so a signal sent as soon as the
    // address is printed is taken by sigwait, not by the default action.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmAllocRequest r = VTRN__API__HBM_ALLOC_REQUEST__INIT;
  r.chip = o.chip;
  r.bytes = o.size;
  r.align = o.align;
  r.category = Vtrn__Api__HbmCategory(cat);
  r.detached = o.detach;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_ALLOC;
  req.hbm_alloc = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_ALLOC);
  const Vtrn__Api__HbmAllocResponse& a = *resp->hbm_alloc;
  const nlohmann::json doc = {{"chip", o.chip},
                              {"addr", a.addr},
                              {"bytes", a.bytes},
                              {"category", o.category},
                              {"owner", a.owner},
                              {"client_used_bytes", a.client_used_bytes},
                              {"client_quota_bytes", a.client_quota_bytes},
                              {"elapsed_ns", a.elapsed_ns},
                              {"held", o.hold},
                              {"detached", o.detach}};
  if (o.json) {
    print_json(doc);
  } else {
    std::cout << "chip " << o.chip << ": " << format_bytes(a.bytes) << " of HBM at " << hex(a.addr) << " ("
              << o.category << ", " << format_ns(a.elapsed_ns) << " in vtrnd)"
              << (o.hold     ? ", held until SIGINT/SIGTERM"
                  : o.detach ? ", detached: kept after this command exits until `vtrn mem free " +
                                   std::to_string(o.chip) + " " + hex(a.addr) + "` from this uid"
                             : ", released as this command exits")
              << "\n";
  }
  std::cout.flush();
  if (o.hold) wait_for_release_signal();
}

struct FreeOptions {
  uint32_t chip = 0;
  std::string addr;
  bool json = false;
};

void run_free(const FreeOptions& o) {
  const uint64_t addr = parse_addr(o.addr, "ADDR");
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmFreeRequest r = VTRN__API__HBM_FREE_REQUEST__INIT;
  r.chip = o.chip;
  r.addr = addr;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_FREE;
  req.hbm_free = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_FREE);
  const Vtrn__Api__HbmFreeResponse& f = *resp->hbm_free;
  if (o.json) {
    print_json({{"chip", o.chip}, {"addr", addr}, {"bytes", f.bytes}, {"owner", f.owner}, {"elapsed_ns", f.elapsed_ns}});
  } else {
    std::cout << "chip " << o.chip << ": freed " << format_bytes(f.bytes) << " at " << hex(addr) << " (held by "
              << owner_name(uint32_t(f.owner >> 32), f.owner & 0xffffffffu) << ")\n";
  }
}

// Read / write through DMA.

struct ReadOptions {
  uint32_t chip = 0;
  std::string addr;
  uint64_t length = 0;
  std::string out;
  bool json = false;
};

std::string hexdump(uint64_t base, const std::vector<uint8_t>& d) {
  std::string s;
  char b[96];
  for (size_t i = 0; i < d.size(); i += 16) {
    int n = snprintf(b, sizeof b, "%010llx:", (unsigned long long)(base + i));
    s.append(b, size_t(n));
    for (size_t j = i; j < i + 16 && j < d.size(); ++j) {
      n = snprintf(b, sizeof b, " %02x", d[j]);
      s.append(b, size_t(n));
    }
    s += "\n";
  }
  return s;
}

void run_read(const ReadOptions& o) {
  const uint64_t addr = parse_addr(o.addr, "ADDR");
  if (o.length == 0) throw CliError(Exit::kUsage, "--length must be at least 1 byte");
  if (o.out.empty() && o.length > (1u << 20))
    throw CliError(Exit::kUsage, "more than 1 MiB to the terminal: use --out FILE");
  DaemonConnection conn = DaemonConnection::open();
  const std::vector<uint8_t> data = dma_read_hbm(conn, o.chip, addr, o.length);
  if (!o.out.empty()) {
    std::ofstream f(o.out, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    if (!f) throw CliError(Exit::kFailed, "cannot write " + o.out);
  }
  if (o.json) {
    nlohmann::json doc = {{"chip", o.chip}, {"addr", addr}, {"bytes", data.size()}};
    if (!o.out.empty()) {
      doc["out"] = o.out;
    } else {
      std::string h;
      char b[4];
      for (uint8_t x : data) {
        snprintf(b, sizeof b, "%02x", x);
        h += b;
      }
      doc["data_hex"] = h;
    }
    print_json(doc);
  } else if (!o.out.empty()) {
    std::cout << "chip " << o.chip << ": " << format_bytes(data.size()) << " from " << hex(addr) << " to " << o.out << "\n";
  } else {
    std::cout << hexdump(addr, data);
  }
}

struct WriteOptions {
  uint32_t chip = 0;
  std::string addr;
  std::string in;
  int pattern = -1;
  uint64_t length = 0;
  bool json = false;
};

void run_write(const WriteOptions& o) {
  const uint64_t addr = parse_addr(o.addr, "ADDR");
  std::vector<uint8_t> data;
  if (!o.in.empty()) {
    std::ifstream f(o.in, std::ios::binary);
    if (!f) throw CliError(Exit::kFailed, "cannot read " + o.in);
    data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (data.empty()) throw CliError(Exit::kFailed, o.in + " is empty");
  } else {
    if (o.length == 0) throw CliError(Exit::kUsage, "--pattern needs --length");
    data.assign(o.length, uint8_t(o.pattern));
  }
  DaemonConnection conn = DaemonConnection::open();
  const uint64_t ns = dma_write_hbm(conn, o.chip, addr, data.data(), data.size());
  if (o.json) {
    print_json({{"chip", o.chip}, {"addr", addr}, {"bytes", data.size()}, {"elapsed_ns", ns}});
  } else {
    std::cout << "chip " << o.chip << ": wrote " << format_bytes(data.size()) << " at " << hex(addr) << " ("
              << format_ns(ns) << ")\n";
  }
}

// Inject ecc.

struct EccOptions {
  uint32_t chip = 0;
  std::string addr;
  bool correctable = false;
  bool uncorrectable = false;
  bool json = false;
};

void run_inject_ecc(const EccOptions& o) {
  const uint64_t addr = parse_addr(o.addr, "ADDR");
  DaemonConnection conn = DaemonConnection::open();
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__HbmInjectEccRequest r = VTRN__API__HBM_INJECT_ECC_REQUEST__INIT;
  r.chip = o.chip;
  r.addr = addr;
  r.uncorrectable = o.uncorrectable;
  req.body_case = VTRN__API__REQUEST__BODY_HBM_INJECT_ECC;
  req.hbm_inject_ecc = &r;
  drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_HBM_INJECT_ECC);
  const Vtrn__Api__HbmInjectEccResponse& e = *resp->hbm_inject_ecc;
  if (o.json) {
    print_json({{"chip", o.chip},
                {"addr", e.addr},
                {"kind", e.uncorrectable ? "uncorrectable" : "correctable"},
                {"page_addr", e.page_addr},
                {"stack", e.stack},
                {"page_retired", bool(e.page_retired)},
                {"already_retired", bool(e.already_retired)},
                {"allocation_poisoned", bool(e.allocation_poisoned)},
                {"allocation_addr", e.allocation_addr},
                {"owner", e.owner},
                {"correctable_on_stack", e.correctable_on_stack},
                {"retired_pages", e.retired_pages},
                {"persisted", bool(e.persisted)}});
    return;
  }
  std::cout << "chip " << o.chip << ": " << (e.uncorrectable ? "uncorrectable" : "correctable") << " ECC error at "
            << hex(e.addr) << " (stack " << e.stack << ")";
  if (!e.uncorrectable) {
    std::cout << ": corrected, " << e.correctable_on_stack << " on this stack\n";
    return;
  }
  if (e.already_retired) {
    std::cout << ": page " << hex(e.page_addr) << " was already retired\n";
    return;
  }
  std::cout << ": page " << hex(e.page_addr) << " retired (" << e.retired_pages << " in total"
            << (e.persisted ? ", stored" : ", not stored") << ")";
  if (e.allocation_poisoned)
    std::cout << "; allocation " << hex(e.allocation_addr) << " of "
              << owner_name(uint32_t(e.owner >> 32), e.owner & 0xffffffffu) << " is poisoned";
  std::cout << "\n";
}

}  // namespace

void add_mem_command(CLI::App& app, Action* action) {
  CLI::App* mem = app.add_subcommand("mem", "A chip's device memory (HBM)");
  mem->require_subcommand(1);

  auto stats = std::make_shared<MemChipOptions>();
  CLI::App* s = mem->add_subcommand("stats", "Totals, fragmentation, failures, ECC and retired pages");
  s->add_option("chip", stats->chip, "Chip id")->required()->check(chip_id_validator());
  s->add_flag("--json", stats->json, "Print one JSON document instead of text");
  s->callback([stats, action] { *action = [stats] { run_mem_stats(*stats); }; });

  auto ls = std::make_shared<MemChipOptions>();
  CLI::App* l = mem->add_subcommand(
      "ls", "Live allocations by owner and category: your own (every tenant's, with a uid column, for the admin)");
  l->add_option("chip", ls->chip, "Chip id")->required()->check(chip_id_validator());
  l->add_flag("--json", ls->json, "Print one JSON document instead of text");
  l->callback([ls, action] { *action = [ls] { run_mem_ls(*ls); }; });

  auto al = std::make_shared<AllocOptions>();
  CLI::App* a =
      mem->add_subcommand("alloc", "Allocate HBM (released when this command exits unless --hold or --detach)");
  a->add_option("chip", al->chip, "Chip id")->required()->check(chip_id_validator());
  a->add_option("size", al->size, "Bytes (K, M, G suffixes)")->required()->transform(size_validator(1, kMaxHbmBytes));
  a->add_option("--align", al->align, "Alignment, a power of two up to 2M (default one page)")
      ->transform(size_validator(1, uint64_t(2) << 20));
  a->add_option("--category", al->category, "tensors, code, scratch, collectives or dma-buffers")
      ->check(CLI::IsMember({"tensors", "code", "scratch", "collectives", "dma-buffers"}));
  CLI::Option* hold =
      a->add_flag("--hold", al->hold, "Keep the allocation (and this process) until SIGINT/SIGTERM/SIGHUP");
  a->add_flag("--detach", al->detach,
              "Keep the allocation after this command exits, your uid's until `vtrn mem free` (counts against the quota)")
      ->excludes(hold);
  a->add_flag("--json", al->json, "Print one JSON document instead of text");
  a->callback([al, action] { *action = [al] { run_alloc(*al); }; });

  auto fr = std::make_shared<FreeOptions>();
  CLI::App* f = mem->add_subcommand("free", "Free the allocation that starts at ADDR: one of your own (any tenant's for the admin)");
  f->add_option("chip", fr->chip, "Chip id")->required()->check(chip_id_validator());
  f->add_option("addr", fr->addr, "Start address of the allocation")->required();
  f->add_flag("--json", fr->json, "Print one JSON document instead of text");
  f->callback([fr, action] { *action = [fr] { run_free(*fr); }; });

  auto rd = std::make_shared<ReadOptions>();
  CLI::App* r = mem->add_subcommand("read", "Read HBM through DMA (inside a live allocation of yours)");
  r->add_option("chip", rd->chip, "Chip id")->required()->check(chip_id_validator());
  r->add_option("addr", rd->addr, "HBM address")->required();
  r->add_option("--length", rd->length, "Bytes (K, M suffixes)")->required()->transform(size_validator(1, kMaxCliBuffer));
  r->add_option("--out", rd->out, "Write the bytes to FILE (default: hex dump on stdout)");
  r->add_flag("--json", rd->json, "Print one JSON document instead of text");
  r->callback([rd, action] { *action = [rd] { run_read(*rd); }; });

  auto wr = std::make_shared<WriteOptions>();
  CLI::App* w = mem->add_subcommand("write", "Write HBM through DMA (inside a live allocation of yours)");
  w->add_option("chip", wr->chip, "Chip id")->required()->check(chip_id_validator());
  w->add_option("addr", wr->addr, "HBM address")->required();
  auto* in = w->add_option("--in", wr->in, "Bytes to write")->check(CLI::ExistingFile);
  auto* pat = w->add_option("--pattern", wr->pattern, "Fill with this byte value")->check(CLI::Range(0, 255));
  w->add_option("--length", wr->length, "Bytes of --pattern (K, M suffixes)")->transform(size_validator(1, kMaxCliBuffer));
  in->excludes(pat);
  pat->excludes(in);
  w->add_flag("--json", wr->json, "Print one JSON document instead of text");
  w->callback([wr, action, in, pat] {
    if (in->count() == 0 && pat->count() == 0) throw CLI::ValidationError("--in or --pattern", "one of them is required");
    *action = [wr] { run_write(*wr); };
  });
}

void add_inject_ecc_subcommand(CLI::App& inject, Action* action) {
  auto o = std::make_shared<EccOptions>();
  CLI::App* e = inject.add_subcommand("ecc", "An ECC error in HBM: counted, or the page retired");
  e->add_option("chip", o->chip, "Chip id")->required()->check(chip_id_validator());
  e->add_option("addr", o->addr, "HBM address")->required();
  auto* c = e->add_flag("--correctable", o->correctable, "A corrected error (counted per stack)");
  auto* u = e->add_flag("--uncorrectable", o->uncorrectable,
                        "An uncorrectable error: the page is retired and its allocation poisoned");
  c->excludes(u);
  u->excludes(c);
  e->add_flag("--json", o->json, "Print one JSON document instead of text");
  e->callback([o, action, c, u] {
    if (c->count() == 0 && u->count() == 0)
      throw CLI::ValidationError("--correctable or --uncorrectable", "one of them is required");
    *action = [o] { run_inject_ecc(*o); };
  });
}

}  // namespace tools
