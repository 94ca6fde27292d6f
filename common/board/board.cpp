// Board DTB parser (vtrn/board.h): turns a board tree from board/*.dts into
// the fixed-capacity Board and Chip structs, and rewrites a tree to a new chip
// count for `vtrn up --chips N`.
//
// It is not a general device-tree library and it does not apply defaults for
// required properties: a property the bindings call required is either there
// with a valid value or the parse fails with the node path and property name,
// because on the firmware side that message becomes the boot panic reason.
//
// The same object file is linked into the bare-metal firmware, so it uses only
// libfdt, <string.h> and snprintf: no heap, no exceptions, no libstdc++. The
// input is untrusted (a user-supplied file on the host, a blob the host wrote
// into guest RAM on the firmware side, a fuzzer everywhere): the whole
// structure block is checked with fdt_check_full before any lookup, every
// property length is checked before its bytes are read, and every loop is
// capped even though libfdt's offsets only ever move forward.

#include "vtrn/board.h"

#include <libfdt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace vtrn::board {
namespace {

using vtrn::Code;
using vtrn::Error;

// Generous caps on iteration over things the bindings do not bound: a node
// with more properties or children than this is not a board we wrote.
constexpr int kMaxPropsPerNode = 128;
constexpr int kMaxChildrenPerNode = 512;
constexpr size_t kPathLen = 112;

constexpr uint64_t kMiB = 1024ull * 1024ull;
constexpr uint64_t kGiB = 1024ull * kMiB;
constexpr uint64_t kMinStackBytes = 16 * kMiB;
constexpr uint64_t kMaxStackBytes = 64 * kGiB;  // keeps stacks * bytes far from overflow
constexpr int32_t kMaxMilliCelsius = 150000;

// A node and its path, built while descending so error messages can name it
// without a second walk of the tree.
struct Node {
  int off = -1;
  char path[kPathLen] = {};
};

// picolibc's integer-only printf variants may lack %llu; 64-bit values in
// messages go through this instead.
void format_u64(char* buf, size_t cap, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof(tmp));
  size_t i = 0;
  for (; i < n && i + 1 < cap; ++i) buf[i] = tmp[n - 1 - i];
  if (cap != 0) buf[i] = '\0';
}

__attribute__((format(printf, 3, 4))) bool fail_plain(Error* r, Code c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  *r = Error::vformat(c, fmt, ap);
  va_end(ap);
  return false;
}

// Sets "<path>: <prop>: <text>" (or "<path>: <text>" without a property) and
// returns false so callers can write `return fail(...)`.
__attribute__((format(printf, 5, 6))) bool fail(Error* r, Code c, const Node& n,
                                                const char* prop, const char* fmt, ...) {
  char text[Error::kDetailCap];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  *r = prop != nullptr ? Error(c, "%s: %s: %s", n.path, prop, text) : Error(c, "%s: %s", n.path, text);
  return false;
}

#define PARSE_TRY(expr)        \
  do {                         \
    if (!(expr)) return false; \
  } while (0)

Node root_node() {
  Node n;
  n.off = 0;
  n.path[0] = '/';
  n.path[1] = '\0';
  return n;
}

// Sets out->path to parent's path + "/" + name, cut short if it does not
// fit: a hostile tree can have arbitrarily long names, and a truncated path
// in an error message is better than none.
void join_path(Node* out, const Node& parent, const char* name, size_t name_len) {
  size_t at = 0;
  const size_t cap = sizeof(out->path) - 1;
  for (size_t i = 0; parent.path[i] != '\0' && at < cap; ++i) out->path[at++] = parent.path[i];
  const bool parent_is_root = parent.path[0] == '/' && parent.path[1] == '\0';
  if (!parent_is_root && at < cap) out->path[at++] = '/';
  for (size_t i = 0; i < name_len && at < cap; ++i) out->path[at++] = name[i];
  out->path[at] = '\0';
}

bool make_child(const void* fdt, const Node& parent, int off, Node* out, Error* r) {
  int len = 0;
  const char* name = fdt_get_name(fdt, off, &len);
  if (name == nullptr) return fail(r, Code::kBadTree, parent, nullptr, "unreadable child node: %s",
                                   fdt_strerror(len));
  out->off = off;
  join_path(out, parent, name, static_cast<size_t>(len));
  return true;
}

// Finds property `name`. A name that appears twice in one node is rejected
// rather than resolved to the first copy: dtc cannot produce that, so the
// blob was made by hand and the two sides could disagree about it.
bool lookup(const void* fdt, const Node& n, const char* name, const uint8_t** data, int* len,
            bool* present, Error* r) {
  *present = false;
  int count = 0;
  int off;
  fdt_for_each_property_offset(off, fdt, n.off) {
    if (++count > kMaxPropsPerNode)
      return fail(r, Code::kTooMany, n, nullptr, "more than %d properties", kMaxPropsPerNode);
    const char* pname = nullptr;
    int plen = 0;
    const void* pdata = fdt_getprop_by_offset(fdt, off, &pname, &plen);
    if (pdata == nullptr || pname == nullptr)
      return fail(r, Code::kBadTree, n, nullptr, "unreadable property: %s", fdt_strerror(plen));
    // libfdt returns a stored length above INT_MAX as a negative one.
    if (plen < 0) return fail(r, Code::kBadTree, n, pname, "length %d", plen);
    if (strcmp(pname, name) != 0) continue;
    if (*present) return fail(r, Code::kDuplicate, n, name, "appears twice");
    *present = true;
    *data = static_cast<const uint8_t*>(pdata);
    *len = plen;
  }
  if (off != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, n, nullptr, "corrupt property list: %s", fdt_strerror(off));
  return true;
}

bool require(const void* fdt, const Node& n, const char* name, const uint8_t** data, int* len,
             Error* r) {
  bool present = false;
  PARSE_TRY(lookup(fdt, n, name, data, len, &present, r));
  if (!present) return fail(r, Code::kMissingProperty, n, name, "missing");
  return true;
}

bool decode_u32(const Node& n, const char* name, const uint8_t* data, int len, uint32_t* v,
                Error* r) {
  if (len != 4)
    return fail(r, Code::kBadProperty, n, name, "length %d, expected 4 (one u32 cell)", len);
  *v = fdt32_ld(reinterpret_cast<const fdt32_t*>(data));
  return true;
}

bool read_u32(const void* fdt, const Node& n, const char* name, uint32_t* v, Error* r) {
  const uint8_t* data = nullptr;
  int len = 0;
  PARSE_TRY(require(fdt, n, name, &data, &len, r));
  return decode_u32(n, name, data, len, v, r);
}

bool read_u32_optional(const void* fdt, const Node& n, const char* name, uint32_t fallback,
                       uint32_t* v, Error* r) {
  const uint8_t* data = nullptr;
  int len = 0;
  bool present = false;
  PARSE_TRY(lookup(fdt, n, name, &data, &len, &present, r));
  if (!present) {
    *v = fallback;
    return true;
  }
  return decode_u32(n, name, data, len, v, r);
}

bool read_u32_range(const void* fdt, const Node& n, const char* name, uint32_t lo, uint32_t hi,
                    uint32_t* v, Error* r) {
  PARSE_TRY(read_u32(fdt, n, name, v, r));
  if (*v < lo || *v > hi)
    return fail(r, Code::kBadProperty, n, name, "%u out of range %u..%u", *v, lo, hi);
  return true;
}

bool read_u64(const void* fdt, const Node& n, const char* name, uint64_t* v, Error* r) {
  const uint8_t* data = nullptr;
  int len = 0;
  PARSE_TRY(require(fdt, n, name, &data, &len, r));
  if (len != 8)
    return fail(r, Code::kBadProperty, n, name,
                "length %d, expected 8 (one u64, /bits/ 64 or two cells)", len);
  *v = fdt64_ld(reinterpret_cast<const fdt64_t*>(data));
  return true;
}

// A single string: NUL-terminated within its length, no embedded NUL, not
// empty, printable ASCII (it ends up in logs, JSON and panic records), and
// short enough for a kNameLen field.
bool read_string(const void* fdt, const Node& n, const char* name, char* out, size_t cap,
                 Error* r) {
  const uint8_t* data = nullptr;
  int len = 0;
  PARSE_TRY(require(fdt, n, name, &data, &len, r));
  if (len < 1 || data[len - 1] != '\0')
    return fail(r, Code::kBadProperty, n, name, "not a NUL-terminated string");
  size_t chars = static_cast<size_t>(len) - 1;
  if (chars == 0) return fail(r, Code::kBadProperty, n, name, "empty string");
  if (chars + 1 > cap)
    return fail(r, Code::kBadProperty, n, name, "%lu characters, at most %lu allowed",
                static_cast<unsigned long>(chars), static_cast<unsigned long>(cap - 1));
  for (size_t i = 0; i < chars; ++i) {
    if (data[i] < 0x20 || data[i] > 0x7e)
      return fail(r, Code::kBadProperty, n, name,
                  "byte %lu is 0x%02x: one printable ASCII string expected",
                  static_cast<unsigned long>(i), data[i]);
  }
  memcpy(out, data, chars + 1);
  return true;
}

bool check_compatible(const void* fdt, const Node& n, const char* want, Error* r) {
  const uint8_t* data = nullptr;
  int len = 0;
  PARSE_TRY(require(fdt, n, "compatible", &data, &len, r));
  if (len < 1 || data[len - 1] != '\0')
    return fail(r, Code::kBadProperty, n, "compatible", "not a NUL-terminated string list");
  if (fdt_stringlist_contains(reinterpret_cast<const char*>(data), len, want) == 0)
    return fail(r, Code::kBadProperty, n, "compatible", "must contain \"%s\"", want);
  return true;
}

// The unit address is the reg value in lowercase hex with no leading zeros
// (DT spec 2.2.1), so chip 10 is "chip@a". A mismatch usually means a node
// was copied and only one of the two numbers edited.
bool check_unit_address(const void* fdt, const Node& n, const char* prefix, uint32_t reg,
                        Error* r) {
  char expected[24];
  int want = snprintf(expected, sizeof(expected), "%s@%x", prefix, reg);
  int len = 0;
  const char* name = fdt_get_name(fdt, n.off, &len);
  if (name == nullptr)
    return fail(r, Code::kBadTree, n, nullptr, "unreadable node name: %s", fdt_strerror(len));
  if (len != want || memcmp(name, expected, static_cast<size_t>(want)) != 0)
    return fail(r, Code::kBadProperty, n, "reg", "%u requires node name %s", reg, expected);
  return true;
}

// Reads reg (one cell, the parent has #address-cells = 1 and #size-cells =
// 0), range-checks it; the caller checks duplicates and then the unit address.
bool read_reg(const void* fdt, const Node& n, uint32_t max, uint32_t* reg, Error* r) {
  return read_u32_range(fdt, n, "reg", 0, max, reg, r);
}

// Finds the child called exactly `name` (no unit address); two such children
// are rejected for the same reason as duplicate properties.
bool find_child(const void* fdt, const Node& parent, const char* name, Node* out, bool* present,
                Error* r) {
  *present = false;
  size_t want = strlen(name);
  int count = 0;
  int child;
  fdt_for_each_subnode(child, fdt, parent.off) {
    if (++count > kMaxChildrenPerNode)
      return fail(r, Code::kTooMany, parent, nullptr, "more than %d child nodes",
                  kMaxChildrenPerNode);
    int len = 0;
    const char* cname = fdt_get_name(fdt, child, &len);
    if (cname == nullptr)
      return fail(r, Code::kBadTree, parent, nullptr, "unreadable child node: %s",
                  fdt_strerror(len));
    if (static_cast<size_t>(len) != want || memcmp(cname, name, want) != 0) continue;
    if (*present) return fail(r, Code::kDuplicate, parent, nullptr, "two \"%s\" nodes", name);
    *present = true;
    PARSE_TRY(make_child(fdt, parent, child, out, r));
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, parent, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

// Containers of reg-addressed children must say how reg is encoded; we only
// accept the one encoding the bindings define rather than guessing from the
// DT defaults (2 and 1), which would make every reg three cells long.
bool check_cells(const void* fdt, const Node& n, Error* r) {
  uint32_t v = 0;
  PARSE_TRY(read_u32(fdt, n, "#address-cells", &v, r));
  if (v != 1) return fail(r, Code::kBadProperty, n, "#address-cells", "%u, must be 1", v);
  PARSE_TRY(read_u32(fdt, n, "#size-cells", &v, r));
  if (v != 0) return fail(r, Code::kBadProperty, n, "#size-cells", "%u, must be 0", v);
  return true;
}

// Fails with kTooMany when `parent` has more than `cap` children. Counted
// up front so the diagnosis does not depend on node order: a 17th port is
// "too many ports" even when it comes first and has a bad reg of its own.
bool check_child_count(const void* fdt, const Node& parent, uint32_t cap, const char* what,
                       Error* r) {
  uint32_t n = 0;
  int child;
  fdt_for_each_subnode(child, fdt, parent.off) {
    if (++n > cap) return fail(r, Code::kTooMany, parent, nullptr, "more than %u %s", cap, what);
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, parent, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

bool check_header(const void* fdt, size_t size, Error* r) {
  if (fdt == nullptr) return fail_plain(r, Code::kBadTree, "board: no buffer");
  if (size < sizeof(fdt_header))
    return fail_plain(r, Code::kBadTree, "board: %lu bytes, smaller than a DTB header",
                      static_cast<unsigned long>(size));
  int err = fdt_check_header(fdt);
  if (err != 0) return fail_plain(r, Code::kBadTree, "board: bad DTB header: %s", fdt_strerror(err));
  if (fdt_totalsize(fdt) > size)
    return fail_plain(r, Code::kBadTree, "board: DTB totalsize %u exceeds the %lu-byte buffer",
                      fdt_totalsize(fdt), static_cast<unsigned long>(size));
  // fdt_check_header accepts versions down to 2, but libfdt 1.6.1's
  // fdt_check_full dereferences a NULL root name on pre-16 blobs (found by
  // fuzzing). dtc and libfdt's writers emit 17; nothing older is a vtrn board.
  if (fdt_version(fdt) < 17)
    return fail_plain(r, Code::kBadTree, "board: DTB version %u, 17 required", fdt_version(fdt));
  err = fdt_check_full(fdt, size);
  if (err != 0) return fail_plain(r, Code::kBadTree, "board: corrupt DTB: %s", fdt_strerror(err));
  return true;
}

// What a walk of /chips found: the board fields, and the node of the chip
// asked for (off = -1 when there is none).
struct ChipsWalk {
  Board* board = nullptr;  // optional
  uint32_t want = UINT32_MAX;
  Node found;
  Node chips;
  uint32_t count = 0;
};

// Shared by parse_board and parse_chip, so the firmware gets every board-level
// check (root compatible, model, distinct and dense chip ids) even when it only
// asks for its own chip.
bool walk_board(const void* fdt, size_t size, ChipsWalk* w, Error* r) {
  PARSE_TRY(check_header(fdt, size, r));
  Node root = root_node();
  PARSE_TRY(check_compatible(fdt, root, "vtrn,board", r));
  char model[kNameLen] = {};
  PARSE_TRY(read_string(fdt, root, "model", model, sizeof(model), r));
  if (w->board != nullptr) memcpy(w->board->model, model, sizeof(model));

  bool present = false;
  PARSE_TRY(find_child(fdt, root, "chips", &w->chips, &present, r));
  if (!present) {
    Node missing;
    snprintf(missing.path, sizeof(missing.path), "/chips");
    return fail(r, Code::kMissingNode, missing, nullptr, "missing");
  }
  PARSE_TRY(check_cells(fdt, w->chips, r));
  PARSE_TRY(check_child_count(fdt, w->chips, kMaxChips, "chips", r));

  uint32_t seen[kMaxChips / 32] = {};
  int child;
  fdt_for_each_subnode(child, fdt, w->chips.off) {
    if (w->count == kMaxChips)
      return fail(r, Code::kTooMany, w->chips, nullptr, "more than %u chips", kMaxChips);
    Node cn;
    PARSE_TRY(make_child(fdt, w->chips, child, &cn, r));
    PARSE_TRY(check_compatible(fdt, cn, "vtrn,chip", r));
    uint32_t id = 0;
    PARSE_TRY(read_reg(fdt, cn, kMaxChips - 1, &id, r));
    if ((seen[id / 32] >> (id % 32)) & 1u)
      return fail(r, Code::kDuplicate, cn, "reg", "chip %u is already defined", id);
    seen[id / 32] |= 1u << (id % 32);
    PARSE_TRY(check_unit_address(fdt, cn, "chip", id, r));
    ++w->count;
    if (id == w->want) w->found = cn;
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, w->chips, nullptr, "corrupt node list: %s",
                fdt_strerror(child));
  if (w->count == 0) return fail(r, Code::kMissingNode, w->chips, nullptr, "no chip nodes");
  // Chip ids index arrays on the host and name QEMU instances, so they are
  // dense: with n chips, ids are exactly 0..n-1.
  for (uint32_t id = 0; id < w->count; ++id) {
    if (((seen[id / 32] >> (id % 32)) & 1u) == 0) {
      Node gap;
      char name[16];
      int len = snprintf(name, sizeof(name), "chip@%x", id);
      join_path(&gap, w->chips, name, static_cast<size_t>(len));
      return fail(r, Code::kMissingNode, gap, nullptr,
                  "missing (chip ids must run 0..%u without gaps)", w->count - 1);
    }
  }
  if (w->board != nullptr) {
    w->board->chip_count = w->count;
    for (uint32_t id = 0; id < w->count; ++id) w->board->chip_ids[id] = id;
  }
  return true;
}

bool parse_hbm(const void* fdt, const Node& chip, HbmGeometry* hbm, Error* r) {
  Node n;
  bool present = false;
  PARSE_TRY(find_child(fdt, chip, "hbm", &n, &present, r));
  if (!present) {
    join_path(&n, chip, "hbm", 3);
    return fail(r, Code::kMissingNode, n, nullptr, "missing");
  }
  PARSE_TRY(check_compatible(fdt, n, "vtrn,hbm", r));
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,stacks", 1, 8, &hbm->stacks, r));
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,page-bytes", 4096, 2 * 1024 * 1024, &hbm->page_bytes, r));
  if ((hbm->page_bytes & (hbm->page_bytes - 1)) != 0)
    return fail(r, Code::kBadProperty, n, "vtrn,page-bytes", "%u is not a power of two",
                hbm->page_bytes);
  PARSE_TRY(read_u64(fdt, n, "vtrn,stack-bytes", &hbm->bytes_per_stack, r));
  if (hbm->bytes_per_stack < kMinStackBytes || hbm->bytes_per_stack > kMaxStackBytes) {
    char v[24];
    format_u64(v, sizeof(v), hbm->bytes_per_stack);
    return fail(r, Code::kBadProperty, n, "vtrn,stack-bytes",
                "%s out of range 16 MiB..64 GiB", v);
  }
  if (hbm->bytes_per_stack % hbm->page_bytes != 0)
    return fail(r, Code::kBadProperty, n, "vtrn,stack-bytes",
                "must be a multiple of vtrn,page-bytes (%u)", hbm->page_bytes);
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,channels", 1, 32, &hbm->channels, r));
  return true;
}

// Optional container: absent means none. Present means well-formed.
bool open_container(const void* fdt, const Node& chip, const char* name, Node* n, bool* present,
                    Error* r) {
  PARSE_TRY(find_child(fdt, chip, name, n, present, r));
  if (*present) PARSE_TRY(check_cells(fdt, *n, r));
  return true;
}

bool parse_ports(const void* fdt, const Node& chip, Chip* out, Error* r) {
  Node ports;
  bool present = false;
  PARSE_TRY(open_container(fdt, chip, "ports", &ports, &present, r));
  if (!present) return true;
  PARSE_TRY(check_child_count(fdt, ports, kMaxPorts, "ports", r));
  int child;
  fdt_for_each_subnode(child, fdt, ports.off) {
    if (out->port_count == kMaxPorts)
      return fail(r, Code::kTooMany, ports, nullptr, "more than %u ports", kMaxPorts);
    Node n;
    PARSE_TRY(make_child(fdt, ports, child, &n, r));
    PARSE_TRY(check_compatible(fdt, n, "vtrn,link-port", r));
    LinkPort p;
    PARSE_TRY(read_reg(fdt, n, kMaxPorts - 1, &p.index, r));
    for (uint32_t i = 0; i < out->port_count; ++i) {
      if (out->ports[i].index == p.index)
        return fail(r, Code::kDuplicate, n, "reg", "port %u is already defined", p.index);
    }
    PARSE_TRY(check_unit_address(fdt, n, "port", p.index, r));
    PARSE_TRY(read_u32_range(fdt, n, "vtrn,max-speed-gtps", 1, 128, &p.max_speed_gtps, r));
    PARSE_TRY(read_u32(fdt, n, "vtrn,lanes", &p.lanes, r));
    if (p.lanes != 1 && p.lanes != 2 && p.lanes != 4 && p.lanes != 8 && p.lanes != 16)
      return fail(r, Code::kBadProperty, n, "vtrn,lanes", "%u, must be 1, 2, 4, 8 or 16",
                  p.lanes);
    PARSE_TRY(read_u32_optional(fdt, n, "vtrn,faulty-lanes", 0, &p.faulty_lane_mask, r));
    const uint32_t lane_bits = (1u << p.lanes) - 1u;
    if ((p.faulty_lane_mask & ~lane_bits) != 0)
      return fail(r, Code::kBadProperty, n, "vtrn,faulty-lanes",
                  "0x%x names lanes beyond the %u of vtrn,lanes", p.faulty_lane_mask, p.lanes);
    PARSE_TRY(read_u32_optional(fdt, n, "vtrn,l0s-idle-us", kDefaultL0sIdleUs, &p.l0s_idle_us, r));
    if (p.l0s_idle_us > kMaxLinkIdleUs)
      return fail(r, Code::kBadProperty, n, "vtrn,l0s-idle-us", "%u out of range 0..%u",
                  p.l0s_idle_us, kMaxLinkIdleUs);
    PARSE_TRY(read_u32_optional(fdt, n, "vtrn,l1-idle-us", kDefaultL1IdleUs, &p.l1_idle_us, r));
    if (p.l1_idle_us > kMaxLinkIdleUs)
      return fail(r, Code::kBadProperty, n, "vtrn,l1-idle-us", "%u out of range 0..%u",
                  p.l1_idle_us, kMaxLinkIdleUs);
    // L1 is the deeper state: with both on, it comes after L0s (the link
    // layer enters L1 only once the peer is idle in L0s or L1).
    if (p.l0s_idle_us != 0 && p.l1_idle_us != 0 && p.l1_idle_us < p.l0s_idle_us)
      return fail(r, Code::kBadProperty, n, "vtrn,l1-idle-us",
                  "%u is shorter than vtrn,l0s-idle-us (%u)", p.l1_idle_us, p.l0s_idle_us);
    // Keep ports sorted by index so consumers can iterate in port order.
    uint32_t at = out->port_count;
    while (at > 0 && out->ports[at - 1].index > p.index) {
      out->ports[at] = out->ports[at - 1];
      --at;
    }
    out->ports[at] = p;
    ++out->port_count;
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, ports, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

bool parse_power_domains(const void* fdt, const Node& chip, Chip* out, Error* r) {
  Node domains;
  bool present = false;
  PARSE_TRY(open_container(fdt, chip, "power-domains", &domains, &present, r));
  if (!present) return true;
  PARSE_TRY(check_child_count(fdt, domains, kMaxPowerDomains, "power domains", r));
  const uint32_t all_cores = (1u << out->neuron_cores) - 1u;
  int child;
  fdt_for_each_subnode(child, fdt, domains.off) {
    if (out->power_domain_count == kMaxPowerDomains)
      return fail(r, Code::kTooMany, domains, nullptr, "more than %u power domains",
                  kMaxPowerDomains);
    Node n;
    PARSE_TRY(make_child(fdt, domains, child, &n, r));
    PARSE_TRY(check_compatible(fdt, n, "vtrn,power-domain", r));
    PowerDomain d;
    PARSE_TRY(read_reg(fdt, n, kMaxPowerDomains - 1, &d.index, r));
    for (uint32_t i = 0; i < out->power_domain_count; ++i) {
      if (out->power_domains[i].index == d.index)
        return fail(r, Code::kDuplicate, n, "reg", "domain %u is already defined", d.index);
    }
    PARSE_TRY(check_unit_address(fdt, n, "domain", d.index, r));
    PARSE_TRY(read_string(fdt, n, "vtrn,name", d.name, sizeof(d.name), r));
    PARSE_TRY(read_u32_optional(fdt, n, "vtrn,cores", 0, &d.core_mask, r));
    if ((d.core_mask & ~all_cores) != 0)
      return fail(r, Code::kBadProperty, n, "vtrn,cores",
                  "0x%x names cores beyond the chip's %u NeuronCores", d.core_mask,
                  out->neuron_cores);
    for (uint32_t i = 0; i < out->power_domain_count; ++i) {
      const PowerDomain& other = out->power_domains[i];
      if (strcmp(other.name, d.name) == 0)
        return fail(r, Code::kDuplicate, n, "vtrn,name", "\"%s\" is already used by domain@%x",
                    d.name, other.index);
      // A core gated by two domains would have two owners for its power state.
      if ((other.core_mask & d.core_mask) != 0)
        return fail(r, Code::kBadProperty, n, "vtrn,cores",
                    "0x%x overlaps domain@%x (0x%x): a core belongs to one domain", d.core_mask,
                    other.index, other.core_mask);
    }
    uint32_t at = out->power_domain_count;
    while (at > 0 && out->power_domains[at - 1].index > d.index) {
      out->power_domains[at] = out->power_domains[at - 1];
      --at;
    }
    out->power_domains[at] = d;
    ++out->power_domain_count;
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, domains, nullptr, "corrupt node list: %s",
                fdt_strerror(child));
  return true;
}

bool read_millicelsius(const void* fdt, const Node& n, const char* name, int32_t* v, Error* r) {
  uint32_t raw = 0;
  PARSE_TRY(read_u32(fdt, n, name, &raw, r));
  // Cells are unsigned; a negative threshold arrives as a huge value and is
  // caught here as out of range.
  if (raw > static_cast<uint32_t>(kMaxMilliCelsius))
    return fail(r, Code::kBadProperty, n, name, "%u out of range 0..%d", raw, kMaxMilliCelsius);
  *v = static_cast<int32_t>(raw);
  return true;
}

bool parse_thermal_zones(const void* fdt, const Node& chip, Chip* out, Error* r) {
  Node zones;
  bool present = false;
  PARSE_TRY(open_container(fdt, chip, "thermal-zones", &zones, &present, r));
  if (!present) return true;
  PARSE_TRY(check_child_count(fdt, zones, kMaxThermalZones, "thermal zones", r));
  int child;
  fdt_for_each_subnode(child, fdt, zones.off) {
    if (out->thermal_zone_count == kMaxThermalZones)
      return fail(r, Code::kTooMany, zones, nullptr, "more than %u thermal zones",
                  kMaxThermalZones);
    Node n;
    PARSE_TRY(make_child(fdt, zones, child, &n, r));
    PARSE_TRY(check_compatible(fdt, n, "vtrn,thermal-zone", r));
    ThermalZone z;
    PARSE_TRY(read_reg(fdt, n, kMaxThermalZones - 1, &z.index, r));
    for (uint32_t i = 0; i < out->thermal_zone_count; ++i) {
      if (out->thermal_zones[i].index == z.index)
        return fail(r, Code::kDuplicate, n, "reg", "zone %u is already defined", z.index);
    }
    PARSE_TRY(check_unit_address(fdt, n, "zone", z.index, r));
    PARSE_TRY(read_string(fdt, n, "vtrn,name", z.name, sizeof(z.name), r));
    for (uint32_t i = 0; i < out->thermal_zone_count; ++i) {
      if (strcmp(out->thermal_zones[i].name, z.name) == 0)
        return fail(r, Code::kDuplicate, n, "vtrn,name", "\"%s\" is already used by zone@%x",
                    z.name, out->thermal_zones[i].index);
    }
    PARSE_TRY(read_millicelsius(fdt, n, "vtrn,throttle-millicelsius", &z.throttle_mc, r));
    PARSE_TRY(read_millicelsius(fdt, n, "vtrn,critical-millicelsius", &z.critical_mc, r));
    if (z.critical_mc <= z.throttle_mc)
      return fail(r, Code::kBadProperty, n, "vtrn,critical-millicelsius",
                  "%d must be above vtrn,throttle-millicelsius (%d)", z.critical_mc,
                  z.throttle_mc);
    uint32_t at = out->thermal_zone_count;
    while (at > 0 && out->thermal_zones[at - 1].index > z.index) {
      out->thermal_zones[at] = out->thermal_zones[at - 1];
      --at;
    }
    out->thermal_zones[at] = z;
    ++out->thermal_zone_count;
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, zones, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

bool parse_chip_node(const void* fdt, const Node& n, uint32_t id, Chip* out, Error* r) {
  out->id = id;
  int len = 0;
  const char* name = fdt_get_name(fdt, n.off, &len);
  // walk_board already matched the name against "chip@<hex id>", so it fits.
  if (name == nullptr || static_cast<size_t>(len) >= sizeof(out->name))
    return fail(r, Code::kBadTree, n, nullptr, "unreadable node name");
  memcpy(out->name, name, static_cast<size_t>(len));
  out->name[len] = '\0';
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,neuron-cores", 1, kMaxNeuronCores, &out->neuron_cores, r));
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,telemetry-period-ms", 10, 10000,
                          &out->telemetry_period_ms, r));
  PARSE_TRY(read_u32_range(fdt, n, "vtrn,bar2-mib", 4, 1024, &out->bar2_mib, r));
  if ((out->bar2_mib & (out->bar2_mib - 1)) != 0)
    return fail(r, Code::kBadProperty, n, "vtrn,bar2-mib", "%u is not a power of two",
                out->bar2_mib);
  PARSE_TRY(read_u32_optional(fdt, n, "vtrn,dma-queues", kDefaultDmaQueues, &out->dma_queues, r));
  if (out->dma_queues < 1 || out->dma_queues > kMaxDmaQueues)
    return fail(r, Code::kBadProperty, n, "vtrn,dma-queues", "%u outside 1..%u", out->dma_queues,
                kMaxDmaQueues);
  PARSE_TRY(read_u32_optional(fdt, n, "vtrn,dma-queue-depth", kDefaultDmaQueueDepth,
                             &out->dma_queue_depth, r));
  if (out->dma_queue_depth < 16 || out->dma_queue_depth > 4096 ||
      (out->dma_queue_depth & (out->dma_queue_depth - 1)) != 0)
    return fail(r, Code::kBadProperty, n, "vtrn,dma-queue-depth",
                "%u is not a power of two in 16..4096", out->dma_queue_depth);
  PARSE_TRY(parse_hbm(fdt, n, &out->hbm, r));
  PARSE_TRY(parse_ports(fdt, n, out, r));
  PARSE_TRY(parse_power_domains(fdt, n, out, r));
  PARSE_TRY(parse_thermal_zones(fdt, n, out, r));
  return true;
}

// /switches and /links (bindings vtrn,switch and vtrn,link)

// Reads one end: exactly one of "<prefix>-chip" and "<prefix>-switch", each
// two cells <id port>.
bool read_end(const void* fdt, const Node& n, const char* prefix, LinkEnd* end, Error* r) {
  char chip_name[24];
  char switch_name[24];
  snprintf(chip_name, sizeof(chip_name), "vtrn,%s-chip", prefix);
  snprintf(switch_name, sizeof(switch_name), "vtrn,%s-switch", prefix);
  const uint8_t* cdata = nullptr;
  const uint8_t* sdata = nullptr;
  int clen = 0;
  int slen = 0;
  bool cpresent = false;
  bool spresent = false;
  PARSE_TRY(lookup(fdt, n, chip_name, &cdata, &clen, &cpresent, r));
  PARSE_TRY(lookup(fdt, n, switch_name, &sdata, &slen, &spresent, r));
  if (cpresent == spresent)
    return fail(r, cpresent ? Code::kBadProperty : Code::kMissingProperty, n, chip_name,
                cpresent ? "and %s both given, exactly one allowed" : "missing (or %s)",
                switch_name);
  const char* name = cpresent ? chip_name : switch_name;
  const uint8_t* data = cpresent ? cdata : sdata;
  const int len = cpresent ? clen : slen;
  if (len != 8) return fail(r, Code::kBadProperty, n, name, "%d bytes, must be 2 cells", len);
  end->kind = cpresent ? EndKind::kChip : EndKind::kSwitch;
  end->id = fdt32_ld(reinterpret_cast<const fdt32_t*>(data));
  end->port = fdt32_ld(reinterpret_cast<const fdt32_t*>(data + 4));
  const uint32_t max_id = cpresent ? kMaxChips : kMaxSwitches;
  const uint32_t max_port = cpresent ? kMaxPorts : kMaxSwitchPorts;
  if (end->id >= max_id)
    return fail(r, Code::kBadProperty, n, name, "id %u out of range 0..%u", end->id, max_id - 1);
  if (end->port >= max_port)
    return fail(r, Code::kBadProperty, n, name, "port %u out of range 0..%u", end->port,
                max_port - 1);
  return true;
}

bool same_end(const LinkEnd& x, const LinkEnd& y) {
  return x.kind == y.kind && x.id == y.id && x.port == y.port;
}

// One /links child: compatible, reg (unique, checked by the caller's
// bitmap), unit address, both ends.
bool read_link(const void* fdt, const Node& n, uint32_t* seen, Link* out, Error* r) {
  PARSE_TRY(check_compatible(fdt, n, "vtrn,link", r));
  PARSE_TRY(read_reg(fdt, n, kMaxLinks - 1, &out->index, r));
  if ((seen[out->index / 32] >> (out->index % 32)) & 1u)
    return fail(r, Code::kDuplicate, n, "reg", "link %u is already defined", out->index);
  seen[out->index / 32] |= 1u << (out->index % 32);
  PARSE_TRY(check_unit_address(fdt, n, "link", out->index, r));
  PARSE_TRY(read_end(fdt, n, "a", &out->a, r));
  PARSE_TRY(read_end(fdt, n, "b", &out->b, r));
  if (out->a.kind == EndKind::kSwitch && out->b.kind == EndKind::kSwitch)
    return fail(r, Code::kBadProperty, n, nullptr, "both ends are switches (one must be a chip)");
  if (same_end(out->a, out->b))
    return fail(r, Code::kBadProperty, n, nullptr, "both ends name the same port");
  return true;
}

// Visits every /links child in document order; absent /links visits none.
template <typename Visit>
bool for_each_link(const void* fdt, Visit visit, Error* r) {
  Node root = root_node();
  Node links;
  bool present = false;
  PARSE_TRY(find_child(fdt, root, "links", &links, &present, r));
  if (!present) return true;
  PARSE_TRY(check_cells(fdt, links, r));
  PARSE_TRY(check_child_count(fdt, links, kMaxLinks, "links", r));
  uint32_t seen[kMaxLinks / 32] = {};
  int child;
  fdt_for_each_subnode(child, fdt, links.off) {
    Node n;
    PARSE_TRY(make_child(fdt, links, child, &n, r));
    Link l;
    PARSE_TRY(read_link(fdt, n, seen, &l, r));
    PARSE_TRY(visit(n, l));
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, links, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

// Fills the wiring of chip `out` (its ports already parsed) from /links.
bool attach_links(const void* fdt, uint32_t chip_count, Chip* out, Error* r) {
  return for_each_link(
      fdt,
      [&](const Node& n, const Link& l) -> bool {
        for (uint32_t side = 0; side < 2; ++side) {
          const LinkEnd& me = side == 0 ? l.a : l.b;
          const LinkEnd& other = side == 0 ? l.b : l.a;
          if (me.kind != EndKind::kChip || me.id != out->id) continue;
          LinkPort* p = nullptr;
          for (uint32_t i = 0; i < out->port_count; ++i) {
            if (out->ports[i].index == me.port) p = &out->ports[i];
          }
          if (p == nullptr)
            return fail(r, Code::kBadProperty, n, side == 0 ? "vtrn,a-chip" : "vtrn,b-chip",
                        "chip %u has no port %u", me.id, me.port);
          if (p->connected)
            return fail(r, Code::kDuplicate, n, nullptr,
                        "chip %u port %u is already wired by link %u", me.id, me.port, p->link);
          p->connected = true;
          p->link = l.index;
          p->side = side;
          p->peer = other;
          p->peer_on_board = other.kind == EndKind::kSwitch || other.id < chip_count;
        }
        return true;
      },
      r);
}

bool parse_switches(const void* fdt, Topology* out, Error* r) {
  Node root = root_node();
  Node sw;
  bool present = false;
  PARSE_TRY(find_child(fdt, root, "switches", &sw, &present, r));
  if (!present) return true;
  PARSE_TRY(check_cells(fdt, sw, r));
  PARSE_TRY(check_child_count(fdt, sw, kMaxSwitches, "switches", r));
  int child;
  fdt_for_each_subnode(child, fdt, sw.off) {
    Node n;
    PARSE_TRY(make_child(fdt, sw, child, &n, r));
    PARSE_TRY(check_compatible(fdt, n, "vtrn,switch", r));
    Switch s;
    PARSE_TRY(read_reg(fdt, n, kMaxSwitches - 1, &s.id, r));
    for (uint32_t i = 0; i < out->switch_count; ++i) {
      if (out->switches[i].id == s.id)
        return fail(r, Code::kDuplicate, n, "reg", "switch %u is already defined", s.id);
    }
    PARSE_TRY(check_unit_address(fdt, n, "switch", s.id, r));
    PARSE_TRY(read_u32_range(fdt, n, "vtrn,ports", 1, kMaxSwitchPorts, &s.ports, r));
    PARSE_TRY(read_u32_range(fdt, n, "vtrn,max-speed-gtps", 1, 128, &s.max_speed_gtps, r));
    PARSE_TRY(read_u32(fdt, n, "vtrn,lanes", &s.lanes, r));
    if (s.lanes != 1 && s.lanes != 2 && s.lanes != 4 && s.lanes != 8 && s.lanes != 16)
      return fail(r, Code::kBadProperty, n, "vtrn,lanes", "%u, must be 1, 2, 4, 8 or 16",
                  s.lanes);
    out->switches[out->switch_count++] = s;
  }
  if (child != -FDT_ERR_NOTFOUND)
    return fail(r, Code::kBadTree, sw, nullptr, "corrupt node list: %s", fdt_strerror(child));
  return true;
}

bool parse_topology_into(const void* fdt, size_t size, Topology* out, Error* r) {
  ChipsWalk w;
  PARSE_TRY(walk_board(fdt, size, &w, r));
  PARSE_TRY(parse_switches(fdt, out, r));
  // Which ports each chip defines, from the chip nodes themselves.
  uint16_t defined[kMaxChips] = {};
  uint16_t used[kMaxChips] = {};
  int child;
  fdt_for_each_subnode(child, fdt, w.chips.off) {
    Node cn;
    PARSE_TRY(make_child(fdt, w.chips, child, &cn, r));
    uint32_t id = 0;
    PARSE_TRY(read_reg(fdt, cn, kMaxChips - 1, &id, r));
    Chip c;
    c.id = id;
    PARSE_TRY(parse_ports(fdt, cn, &c, r));
    for (uint32_t i = 0; i < c.port_count; ++i) defined[id] |= uint16_t(1u << c.ports[i].index);
  }
  static_assert(kMaxPorts <= 16, "port bitmaps are 16 bits");
  uint8_t sw_used[kMaxSwitches][kMaxSwitchPorts / 8] = {};
  return for_each_link(
      fdt,
      [&](const Node& n, const Link& link) -> bool {
        Link l = link;
        for (uint32_t side = 0; side < 2; ++side) {
          const LinkEnd& e = side == 0 ? l.a : l.b;
          const char* prop = e.kind == EndKind::kChip ? (side == 0 ? "vtrn,a-chip" : "vtrn,b-chip")
                                                      : (side == 0 ? "vtrn,a-switch" : "vtrn,b-switch");
          bool on_board = true;
          if (e.kind == EndKind::kChip) {
            on_board = e.id < w.count;
            if (on_board) {
              if (((defined[e.id] >> e.port) & 1u) == 0)
                return fail(r, Code::kBadProperty, n, prop, "chip %u has no port %u", e.id, e.port);
              if ((used[e.id] >> e.port) & 1u)
                return fail(r, Code::kDuplicate, n, prop, "chip %u port %u is wired twice", e.id,
                            e.port);
              used[e.id] |= uint16_t(1u << e.port);
            }
          } else {
            const Switch* s = nullptr;
            for (uint32_t i = 0; i < out->switch_count; ++i) {
              if (out->switches[i].id == e.id) s = &out->switches[i];
            }
            if (s == nullptr) return fail(r, Code::kBadProperty, n, prop, "no switch %u", e.id);
            if (e.port >= s->ports)
              return fail(r, Code::kBadProperty, n, prop, "switch %u has %u ports, no port %u",
                          e.id, s->ports, e.port);
            if ((sw_used[e.id][e.port / 8] >> (e.port % 8)) & 1u)
              return fail(r, Code::kDuplicate, n, prop, "switch %u port %u is wired twice", e.id,
                          e.port);
            sw_used[e.id][e.port / 8] |= uint8_t(1u << (e.port % 8));
          }
          (side == 0 ? l.a_on_board : l.b_on_board) = on_board;
        }
        uint32_t at = out->link_count;
        while (at > 0 && out->links[at - 1].index > l.index) {
          out->links[at] = out->links[at - 1];
          --at;
        }
        out->links[at] = l;
        ++out->link_count;
        return true;
      },
      r);
}

// resize_board: a streaming copy through libfdt's sequential-write API.
// Read-write insertion (fdt_add_subnode) would put every new node first under
// its parent, so clones would come out in reverse order ahead of the
// originals; copying tag by tag keeps the source order and appends clones at
// the end of /chips.

bool sw_check(int err, size_t out_cap, Error* r) {
  if (err == 0) return true;
  if (err == -FDT_ERR_NOSPACE)
    return fail_plain(r, Code::kTooMany, "resize: output buffer of %lu bytes is too small",
                      static_cast<unsigned long>(out_cap));
  return fail_plain(r, Code::kBadTree, "resize: writing the tree failed: %s", fdt_strerror(err));
}

// Copies the subtree at `src` (a chip node) as chip `id`: node name and reg
// renumbered, phandles dropped (they must stay unique, and nothing can refer
// to a node that did not exist in the source).
bool emit_clone(const void* fdt, int src, uint32_t id, void* out, size_t out_cap, Error* r) {
  int depth = 0;
  int off = src;
  for (;;) {
    int next = 0;
    uint32_t tag = fdt_next_tag(fdt, off, &next);
    if (next < 0) return sw_check(next, out_cap, r);
    switch (tag) {
      case FDT_BEGIN_NODE: {
        int len = 0;
        const char* name = fdt_get_name(fdt, off, &len);
        if (name == nullptr) return sw_check(len, out_cap, r);
        char renamed[24] = {};
        if (depth == 0) snprintf(renamed, sizeof(renamed), "chip@%x", id);
        ++depth;
        PARSE_TRY(sw_check(fdt_begin_node(out, depth == 1 ? renamed : name), out_cap, r));
        break;
      }
      case FDT_PROP: {
        const char* pname = nullptr;
        int plen = 0;
        const void* data = fdt_getprop_by_offset(fdt, off, &pname, &plen);
        if (data == nullptr) return sw_check(plen, out_cap, r);
        if (plen < 0)
          return fail_plain(r, Code::kBadTree, "resize: property %s has length %d", pname, plen);
        if (strcmp(pname, "phandle") == 0 || strcmp(pname, "linux,phandle") == 0) break;
        if (depth == 1 && strcmp(pname, "reg") == 0) {
          fdt32_t reg = cpu_to_fdt32(id);
          PARSE_TRY(sw_check(fdt_property(out, "reg", &reg, sizeof(reg)), out_cap, r));
        } else {
          PARSE_TRY(sw_check(fdt_property(out, pname, data, plen), out_cap, r));
        }
        break;
      }
      case FDT_END_NODE:
        PARSE_TRY(sw_check(fdt_end_node(out), out_cap, r));
        if (--depth == 0) return true;
        break;
      case FDT_NOP:
        break;
      default:
        return fail_plain(r, Code::kBadTree, "resize: unexpected tag %u in chip node", tag);
    }
    off = next;
  }
}

bool resize_into(const void* fdt, const ChipsWalk& w, int last_chip, uint32_t chips, void* out,
                 size_t out_cap, Error* r) {
  int cap = out_cap > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(out_cap);
  PARSE_TRY(sw_check(fdt_create(out, cap), out_cap, r));
  int rsv = fdt_num_mem_rsv(fdt);
  for (int i = 0; i < rsv; ++i) {
    uint64_t addr = 0;
    uint64_t bytes = 0;
    PARSE_TRY(sw_check(fdt_get_mem_rsv(fdt, i, &addr, &bytes), out_cap, r));
    PARSE_TRY(sw_check(fdt_add_reservemap_entry(out, addr, bytes), out_cap, r));
  }
  PARSE_TRY(sw_check(fdt_finish_reservemap(out), out_cap, r));

  int depth = 0;
  int chips_depth = -1;  // depth of /chips while inside it
  int skip_depth = -1;   // depth of a dropped chip node while inside it
  int off = 0;
  for (;;) {
    int next = 0;
    uint32_t tag = fdt_next_tag(fdt, off, &next);
    if (next < 0) return sw_check(next, out_cap, r);
    if (tag == FDT_END) break;
    switch (tag) {
      case FDT_BEGIN_NODE: {
        ++depth;
        if (skip_depth >= 0) break;
        if (off == w.chips.off) chips_depth = depth;
        if (chips_depth >= 0 && depth == chips_depth + 1) {
          int len = 0;
          const void* reg = fdt_getprop(fdt, off, "reg", &len);
          // walk_board validated every chip's reg; re-checked so a bug here
          // cannot read past the property.
          if (reg == nullptr || len != 4)
            return fail_plain(r, Code::kBadTree, "resize: chip node lost its reg");
          if (fdt32_ld(static_cast<const fdt32_t*>(reg)) >= chips) {
            skip_depth = depth;
            break;
          }
        }
        int len = 0;
        const char* name = fdt_get_name(fdt, off, &len);
        if (name == nullptr) return sw_check(len, out_cap, r);
        PARSE_TRY(sw_check(fdt_begin_node(out, name), out_cap, r));
        break;
      }
      case FDT_PROP: {
        if (skip_depth >= 0) break;
        const char* pname = nullptr;
        int plen = 0;
        const void* data = fdt_getprop_by_offset(fdt, off, &pname, &plen);
        if (data == nullptr) return sw_check(plen, out_cap, r);
        if (plen < 0)
          return fail_plain(r, Code::kBadTree, "resize: property %s has length %d", pname, plen);
        PARSE_TRY(sw_check(fdt_property(out, pname, data, plen), out_cap, r));
        break;
      }
      case FDT_END_NODE:
        if (skip_depth >= 0) {
          if (depth == skip_depth) skip_depth = -1;
          --depth;
          break;
        }
        if (depth == chips_depth) {
          for (uint32_t id = w.count; id < chips; ++id)
            PARSE_TRY(emit_clone(fdt, last_chip, id, out, out_cap, r));
          chips_depth = -1;
        }
        PARSE_TRY(sw_check(fdt_end_node(out), out_cap, r));
        --depth;
        break;
      case FDT_NOP:
        break;
      default:
        return fail_plain(r, Code::kBadTree, "resize: unexpected tag %u", tag);
    }
    off = next;
  }
  PARSE_TRY(sw_check(fdt_finish(out), out_cap, r));
  fdt_set_boot_cpuid_phys(out, fdt_boot_cpuid_phys(fdt));
  return true;
}

}  // namespace

Error parse_board(const void* fdt, size_t size, Board* out) {
  Error r;
  if (out == nullptr) {
    fail_plain(&r, Code::kBadTree, "board: no output");
    return r;
  }
  *out = Board{};
  ChipsWalk w;
  w.board = out;
  if (!walk_board(fdt, size, &w, &r)) *out = Board{};
  return r;
}

Error parse_chip(const void* fdt, size_t size, uint32_t chip_id, Chip* out) {
  Error r;
  if (out == nullptr) {
    fail_plain(&r, Code::kBadTree, "board: no output");
    return r;
  }
  *out = Chip{};
  ChipsWalk w;
  w.want = chip_id;
  if (!walk_board(fdt, size, &w, &r)) {
    *out = Chip{};
    return r;
  }
  if (w.found.off < 0) {
    fail(&r, Code::kNoSuchChip, w.chips, nullptr, "no chip %u (the board has chips 0..%u)",
         chip_id, w.count - 1);
    return r;
  }
  if (!parse_chip_node(fdt, w.found, chip_id, out, &r) || !attach_links(fdt, w.count, out, &r))
    *out = Chip{};
  return r;
}

Error parse_topology(const void* fdt, size_t size, Topology* out) {
  Error r;
  if (out == nullptr) {
    fail_plain(&r, Code::kBadTree, "board: no output");
    return r;
  }
  *out = Topology{};
  if (!parse_topology_into(fdt, size, out, &r)) *out = Topology{};
  return r;
}

Error resize_board(const void* fdt, size_t size, uint32_t chips, void* out, size_t out_cap) {
  Error r;
  if (chips == 0 || chips > kMaxChips) {
    fail_plain(&r, Code::kBadProperty, "resize: %u chips requested, must be 1..%u", chips,
               kMaxChips);
    return r;
  }
  if (out == nullptr) {
    fail_plain(&r, Code::kBadTree, "resize: no output buffer");
    return r;
  }
  ChipsWalk w;
  if (!walk_board(fdt, size, &w, &r)) return r;
  const uint8_t* in_lo = static_cast<const uint8_t*>(fdt);
  const uint8_t* out_lo = static_cast<const uint8_t*>(out);
  if (out_lo < in_lo + size && in_lo < out_lo + out_cap) {
    fail_plain(&r, Code::kBadTree, "resize: output buffer overlaps the input");
    return r;
  }
  // Clones copy the highest-numbered chip: boards list chips in id order,
  // so it is the last one a reader of the .dts saw.
  ChipsWalk last;
  last.want = w.count - 1;
  if (!walk_board(fdt, size, &last, &r)) return r;
  if (!resize_into(fdt, w, last.found.off, chips, out, out_cap, &r)) return r;

  // Our own output must satisfy the same checks as any input.
  Board check;
  r = parse_board(out, fdt_totalsize(out), &check);
  if (r.ok() && check.chip_count != chips)
    fail_plain(&r, Code::kBadTree, "resize: produced %u chips instead of %u", check.chip_count,
               chips);
  return r;
}

}  // namespace vtrn::board
