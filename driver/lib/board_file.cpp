// Board file loading (see vtrn/drv/board_file.h).
#include "vtrn/drv/board_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libfdt.h>

#include "vtrn/drv/fd.h"

namespace drv {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

Error read_file(const std::string& path, std::vector<uint8_t>* out) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error(errno == ENOENT ? Code::kNotFound : Code::kSystem, strerror(errno));
  out->clear();
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      out->insert(out->end(), buf, buf + n);
      if (out->size() > (64u << 20)) return Error(Code::kCapacity, "larger than 64 MiB");
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(Code::kSystem, strerror(errno));
    return Error();
  }
}

// Runs dtc on a .dts; a failure's detail is dtc's first error line.
Error compile_dts(const std::string& dtc, const std::string& dts, std::vector<uint8_t>* out) {
  char tmp[] = "/tmp/vtrn-board-XXXXXX";
  UniqueFd tfd(mkstemp(tmp));
  if (!tfd) return Error(Code::kSystem, std::string("temporary file: ") + strerror(errno));
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    unlink(tmp);
    return Error(Code::kSystem, std::string("pipe: ") + strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    execlp(dtc.c_str(), dtc.c_str(), "-q", "-I", "dts", "-O", "dtb", "-o", tmp, dts.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  std::string errtext;
  char buf[1024];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (errtext.size() < 8192) errtext.append(buf, size_t(n));
  }
  close(pipefd[0]);
  int status = 0;
  const bool exited = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status);
  Error result;
  if (exited && WEXITSTATUS(status) == 127) {
    result = Error(Code::kNotFound, dtc + " not found (install device-tree-compiler)");
  } else if (exited && WEXITSTATUS(status) == 0) {
    result = read_file(tmp, out);
  } else {
    std::string first = errtext.substr(0, errtext.find('\n'));
    result = Error(Code::kBadTree, "dtc: " + (first.empty() ? std::string("failed") : first));
  }
  unlink(tmp);
  return result;
}

}  // namespace

Result<BoardSpec> decode_board(const std::string& label, std::vector<uint8_t> dtb, uint32_t chips) {
  const std::string prefix = "board " + label + ": ";
  vtrn::board::Board board;
  vtrn::Error r = vtrn::board::parse_board(dtb.data(), dtb.size(), &board);
  if (!r.ok()) return Error(r).prefix(prefix);
  if (chips != 0 && chips != board.chip_count) {
    if (chips > vtrn::board::kMaxChips)
      return Error(Code::kTooMany, prefix + "--chips " + std::to_string(chips) +
                                       " above the limit of " + std::to_string(vtrn::board::kMaxChips));
    // A clone adds at most one chip subtree per extra chip.
    size_t cap = dtb.size() * (size_t(chips) + 2) + 4096;
    std::vector<uint8_t> resized(cap);
    r = vtrn::board::resize_board(dtb.data(), dtb.size(), chips, resized.data(), cap);
    if (!r.ok()) return Error(r).prefix(prefix);
    if (fdt_pack(resized.data()) == 0) resized.resize(fdt_totalsize(resized.data()));
    dtb = std::move(resized);
    r = vtrn::board::parse_board(dtb.data(), dtb.size(), &board);
    if (!r.ok()) return Error(r).prefix(prefix);
  }
  BoardSpec out;
  for (uint32_t i = 0; i < board.chip_count; ++i) {
    vtrn::board::Chip chip;
    r = vtrn::board::parse_chip(dtb.data(), dtb.size(), board.chip_ids[i], &chip);
    if (!r.ok()) return Error(r).prefix(prefix);
    out.chips.push_back(chip);
  }
  out.file = label;
  out.board = board;
  out.dtb = std::move(dtb);
  return out;
}

Result<BoardSpec> load_board(const std::string& file, uint32_t chips, const std::string& dtc) {
  std::vector<uint8_t> dtb;
  Error e = ends_with(file, ".dts") ? compile_dts(dtc, file, &dtb) : read_file(file, &dtb);
  if (!e.ok()) return e.prefix("board " + file + ": ");
  return decode_board(file, std::move(dtb), chips);
}

}  // namespace drv
