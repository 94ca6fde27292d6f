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

bool read_file(const std::string& path, std::vector<uint8_t>* out, std::string* err) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    *err = strerror(errno);
    return false;
  }
  out->clear();
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      out->insert(out->end(), buf, buf + n);
      if (out->size() > (64u << 20)) {
        *err = "larger than 64 MiB";
        return false;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = strerror(errno);
      return false;
    }
    return true;
  }
}

// Runs dtc on a .dts; on failure *err is dtc's first error line.
bool compile_dts(const std::string& dtc, const std::string& dts, std::vector<uint8_t>* out,
                 std::string* err) {
  char tmp[] = "/tmp/vtrn-board-XXXXXX";
  UniqueFd tfd(mkstemp(tmp));
  if (!tfd) {
    *err = std::string("temporary file: ") + strerror(errno);
    return false;
  }
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    unlink(tmp);
    *err = std::string("pipe: ") + strerror(errno);
    return false;
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
  bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0;
  if (ok) ok = read_file(tmp, out, err);
  unlink(tmp);
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    *err = dtc + " not found (install device-tree-compiler)";
    return false;
  }
  if (!ok && err->empty()) {
    std::string first = errtext.substr(0, errtext.find('\n'));
    *err = "dtc: " + (first.empty() ? std::string("failed") : first);
  }
  return ok;
}

}  // namespace

bool decode_board(const std::string& label, std::vector<uint8_t> dtb, uint32_t chips,
                  BoardSpec* out, std::string* err) {
  const std::string prefix = "board " + label + ": ";
  vtrn::board::Board board;
  vtrn::Error r = vtrn::board::parse_board(dtb.data(), dtb.size(), &board);
  if (!r.ok()) {
    *err = prefix + r.detail();
    return false;
  }
  if (chips != 0 && chips != board.chip_count) {
    if (chips > vtrn::board::kMaxChips) {
      *err = prefix + "--chips " + std::to_string(chips) + " above the limit of " +
             std::to_string(vtrn::board::kMaxChips);
      return false;
    }
    // A clone adds at most one chip subtree per extra chip.
    size_t cap = dtb.size() * (size_t(chips) + 2) + 4096;
    std::vector<uint8_t> resized(cap);
    r = vtrn::board::resize_board(dtb.data(), dtb.size(), chips, resized.data(), cap);
    if (!r.ok()) {
      *err = prefix + r.detail();
      return false;
    }
    if (fdt_pack(resized.data()) == 0) resized.resize(fdt_totalsize(resized.data()));
    dtb = std::move(resized);
    r = vtrn::board::parse_board(dtb.data(), dtb.size(), &board);
    if (!r.ok()) {
      *err = prefix + r.detail();
      return false;
    }
  }
  out->chips.clear();
  for (uint32_t i = 0; i < board.chip_count; ++i) {
    vtrn::board::Chip chip;
    r = vtrn::board::parse_chip(dtb.data(), dtb.size(), board.chip_ids[i], &chip);
    if (!r.ok()) {
      *err = prefix + r.detail();
      return false;
    }
    out->chips.push_back(chip);
  }
  out->file = label;
  out->board = board;
  out->dtb = std::move(dtb);
  return true;
}

bool load_board(const std::string& file, uint32_t chips, const std::string& dtc, BoardSpec* out,
                std::string* err) {
  std::vector<uint8_t> dtb;
  std::string why;
  bool ok = ends_with(file, ".dts") ? compile_dts(dtc, file, &dtb, &why)
                                    : read_file(file, &dtb, &why);
  if (!ok) {
    *err = "board " + file + ": " + why;
    return false;
  }
  return decode_board(file, std::move(dtb), chips, out, err);
}

}  // namespace drv
