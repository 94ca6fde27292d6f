// The retired-page store (see retired_store.h). File format, one item per
// line, '\n' line ends:
//   # <comment>                  (any number of comment lines first)
//   vtrn-retired-pages 1
//   page-bytes <decimal>
//   hbm-bytes <decimal>
//   page 0x<hex offset>          (zero or more, ascending)
//   crc32 0x<8 hex digits>       (CRC32 of every byte before this line)
#include "retired_store.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "vtrn/crc32.h"
#include "vtrn/drv/fd.h"

namespace drv {
namespace {

bool parse_u64(const std::string& s, int base, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (base == 10 && !(c >= '0' && c <= '9')) return false;
    if (base == 16 && !isxdigit(static_cast<unsigned char>(c))) return false;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

Error mkdirs(const std::string& dir) {
  std::string cur;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos) next = dir.size();
    cur = dir.substr(0, next);
    if (!cur.empty() && mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
      return Error(Code::kSystem, "cannot create " + cur + ": " + strerror(errno));
    pos = next + 1;
  }
  return Error();
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

bool geometry_ok(const RetiredGeometry& g) {
  return g.page_bytes != 0 && (g.page_bytes & (g.page_bytes - 1)) == 0 && g.hbm_bytes != 0 &&
         g.hbm_bytes % g.page_bytes == 0;
}

}  // namespace

std::string retired_store_root() {
  if (const char* d = getenv("VTRN_STATE_DIR"); d != nullptr && d[0] != '\0') return d;
  if (const char* x = getenv("XDG_STATE_HOME"); x != nullptr && x[0] != '\0')
    return std::string(x) + "/vtrn";
  if (const char* h = getenv("HOME"); h != nullptr && h[0] != '\0')
    return std::string(h) + "/.local/state/vtrn";
  return "";
}

std::string retired_store_path(const std::string& root, const std::string& board_model,
                               uint32_t chip) {
  std::string b;
  for (char c : board_model) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    b += ok ? c : '_';
  }
  if (b.empty() || b == "." || b == "..") b = "board";
  return root + "/" + b + "/chip" + std::to_string(chip) + ".retired";
}

Result<RetiredList> load_retired(const std::string& path, const RetiredGeometry& g) {
  RetiredList list;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return list;
    return Error(Code::kSystem, path + ": cannot open: " + strerror(errno));
  }
  struct stat st{};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Error(Code::kDecode, path + ": not a regular file");
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(Code::kSystem, path + ": read failed: " + strerror(errno));
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kRetiredStoreMaxBytes)
      return Error(Code::kDecode, path + ": larger than " + std::to_string(kRetiredStoreMaxBytes) + " bytes");
  }
  auto reject = [&](size_t line, const std::string& why) {
    return Error(Code::kDecode, path + ":" + std::to_string(line) + ": " + why);
  };
  if (!geometry_ok(g)) return reject(0, "the chip's HBM geometry is invalid");
  enum { kHeader, kPageBytes, kHbmBytes, kPages, kDone } stage = kHeader;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return reject(line_no + 1, "last line has no line end");
    const std::string line = text.substr(pos, nl - pos);
    const size_t line_start = pos;
    pos = nl + 1;
    ++line_no;
    if (stage == kDone) return reject(line_no, "text after the crc32 line");
    if (stage == kHeader && !line.empty() && line[0] == '#') continue;
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string val = sp == std::string::npos ? "" : line.substr(sp + 1);
    uint64_t v = 0;
    switch (stage) {
      case kHeader:
        if (line != "vtrn-retired-pages 1") return reject(line_no, "expected 'vtrn-retired-pages 1'");
        stage = kPageBytes;
        break;
      case kPageBytes:
        if (key != "page-bytes" || !parse_u64(val, 10, &v)) return reject(line_no, "expected 'page-bytes N'");
        if (v != g.page_bytes)
          return reject(line_no, "page size " + std::to_string(v) + " is not the chip's " +
                                     std::to_string(g.page_bytes));
        stage = kHbmBytes;
        break;
      case kHbmBytes:
        if (key != "hbm-bytes" || !parse_u64(val, 10, &v)) return reject(line_no, "expected 'hbm-bytes N'");
        if (v != g.hbm_bytes)
          return reject(line_no, "HBM size " + std::to_string(v) + " is not the chip's " +
                                     std::to_string(g.hbm_bytes));
        stage = kPages;
        break;
      case kPages:
        if (key == "page") {
          if (val.size() < 3 || val.compare(0, 2, "0x") != 0 || !parse_u64(val.substr(2), 16, &v))
            return reject(line_no, "expected 'page 0x<offset>'");
          if (v % g.page_bytes != 0) return reject(line_no, "offset " + val + " is not page-aligned");
          if (v >= g.hbm_bytes) return reject(line_no, "offset " + val + " is outside HBM");
          if (!list.offsets.empty() && v <= list.offsets.back())
            return reject(line_no, "offsets not strictly ascending");
          if (list.offsets.size() >= g.max_pages)
            return reject(line_no, "more than " + std::to_string(g.max_pages) + " pages");
          list.offsets.push_back(v);
        } else if (key == "crc32") {
          if (val.size() != 10 || val.compare(0, 2, "0x") != 0 || !parse_u64(val.substr(2), 16, &v))
            return reject(line_no, "expected 'crc32 0x<8 hex digits>'");
          const uint32_t crc = vtrn::crc32(text.data(), line_start);
          if (crc != uint32_t(v)) return reject(line_no, "CRC mismatch (file damaged or edited)");
          stage = kDone;
        } else {
          return reject(line_no, "unexpected '" + key.substr(0, 32) + "'");
        }
        break;
      case kDone: break;
    }
  }
  if (stage != kDone) return reject(line_no, "no crc32 line (file truncated)");
  list.present = true;
  return list;
}

Error save_retired(const std::string& path, const RetiredGeometry& g,
                   const std::vector<uint64_t>& offsets, const std::string& comment) {
  if (!geometry_ok(g)) return Error(Code::kInvalidArgument, "invalid HBM geometry");
  std::vector<uint64_t> v = offsets;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  if (v.size() > g.max_pages)
    return Error(Code::kTooMany, std::to_string(v.size()) + " pages, the store holds " + std::to_string(g.max_pages));
  std::string body = "# " + comment + "\nvtrn-retired-pages 1\npage-bytes " +
                     std::to_string(g.page_bytes) + "\nhbm-bytes " + std::to_string(g.hbm_bytes) + "\n";
  for (uint64_t off : v) {
    if (off % g.page_bytes != 0 || off >= g.hbm_bytes)
      return Error(Code::kInvalidArgument, "offset " + std::to_string(off) + " is not a page of this HBM");
    char b[40];
    snprintf(b, sizeof b, "page 0x%llx\n", (unsigned long long)off);
    body += b;
  }
  char c[32];
  snprintf(c, sizeof c, "crc32 0x%08x\n", unsigned(vtrn::crc32(body.data(), body.size())));
  body += c;

  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (Error e = mkdirs(dir); !e.ok()) return e;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return Error(Code::kSystem, "cannot create " + tmp + ": " + strerror(errno));
    if (!write_all(fd.get(), body) || fsync(fd.get()) != 0) {
      Error e(Code::kSystem, "cannot write " + tmp + ": " + strerror(errno));
      unlink(tmp.c_str());
      return e;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    Error e(Code::kSystem, "cannot rename " + tmp + " to " + path + ": " + strerror(errno));
    unlink(tmp.c_str());
    return e;
  }
  // The rename itself is durable only once the directory is synced.
  UniqueFd d(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) (void)fsync(d.get());
  return Error();
}

}  // namespace drv
