// Starting and stopping vtrnd for `vtrn up` / `vtrn down` (see
// board_control.h).
#include "board_control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "cli_error.h"
#include "daemon.h"
#include "render.h"

namespace tools {
namespace {

// Time vtrnd gets to create its socket and launch QEMU on top of the boot
// timeout itself: a loaded 2-core machine needs seconds for a few QEMUs.
constexpr int kStartMarginMs = 10000;
constexpr int kPollMs = 10;
constexpr size_t kLogTailLines = 12;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, long(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool path_exists(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0;
}

std::optional<std::string> search_path(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

// Directory of this executable, e.g. <build>/host-tools.
std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string exe(buf, size_t(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

std::string find_vtrnd() {
  if (const char* env = getenv("VTRN_VTRND"); env != nullptr && env[0] != '\0') {
    if (!is_executable_file(env))
      throw CliError(Exit::kFailed, std::string("vtrnd not found: VTRN_VTRND=") + env +
                                        " is not an executable file");
    return absolute(env);
  }
  const std::string in_tree = self_dir() + "/../driver/vtrnd";
  if (is_executable_file(in_tree)) return absolute(in_tree);
  if (auto found = search_path("vtrnd")) return absolute(*found);
  throw CliError(Exit::kFailed, "vtrnd not found: not at " + in_tree +
                                    ", not on PATH, and VTRN_VTRND is not set");
}

// QEMU is checked here, before vtrnd starts, so a missing QEMU costs
// nothing to undo; vtrnd then gets the resolved path in VTRN_QEMU.
std::string find_qemu() {
  if (const char* env = getenv("VTRN_QEMU"); env != nullptr && env[0] != '\0') {
    const std::string q = env;
    if (q.find('/') == std::string::npos) {
      if (auto found = search_path(q)) return absolute(*found);
      throw CliError(Exit::kFailed, "QEMU not found: VTRN_QEMU=" + q + " is not on PATH");
    }
    if (!is_executable_file(q))
      throw CliError(Exit::kFailed, "QEMU not found: VTRN_QEMU=" + q + " is not an executable file");
    return absolute(q);
  }
  if (auto found = search_path("qemu-system-aarch64")) return absolute(*found);
  throw CliError(Exit::kFailed,
                 "QEMU not found: qemu-system-aarch64 is not on PATH (install qemu-system-arm or "
                 "set VTRN_QEMU)");
}

std::optional<pid_t> read_pid_file() {
  std::ifstream in(drv::runtime_dir() + "/vtrnd.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  return pid_t(pid);
}

// True while `pid` runs. Reaps it when it is our child (vtrnd started by
// this process) and treats a zombie as gone: the daemon may have been
// reparented to an init that does not reap, and a zombie holds no fds,
// sockets or memory.
bool process_alive(pid_t pid, int* exit_status = nullptr) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) {
    if (exit_status != nullptr) *exit_status = status;
    return false;
  }
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat_file, text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

// A pid file can outlive its daemon and the pid be reused; only a process
// that is vtrnd counts as "already running".
bool is_vtrnd(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return std::getline(comm, name) && name.rfind("vtrnd", 0) == 0;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// The daemon's log as seen from this process: a write fd handed to vtrnd as
// stdout/stderr, and a read fd positioned where this run's output starts.
class DaemonLog {
 public:
  explicit DaemonLog(const std::string& path) {
    write_fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (write_fd_ < 0)
      throw CliError(Exit::kFailed, "cannot open " + path + ": " + strerror(errno));
    read_fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (read_fd_ < 0) {
      ::close(write_fd_);
      throw CliError(Exit::kFailed, "cannot read " + path + ": " + strerror(errno));
    }
    start_ = lseek(read_fd_, 0, SEEK_END);
  }
  ~DaemonLog() {
    close_write();
    if (read_fd_ >= 0) ::close(read_fd_);
  }
  DaemonLog(const DaemonLog&) = delete;
  DaemonLog& operator=(const DaemonLog&) = delete;

  [[nodiscard]] int write_fd() const { return write_fd_; }
  void close_write() {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }

  // Last non-empty lines written by this run of vtrnd.
  [[nodiscard]] std::vector<std::string> tail(size_t lines) const {
    std::string text;
    char buf[4096];
    off_t at = start_;
    for (;;) {
      const ssize_t n = pread(read_fd_, buf, sizeof buf, at);
      if (n <= 0) break;
      text.append(buf, size_t(n));
      at += n;
    }
    std::vector<std::string> all;
    std::stringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) all.push_back(line);
    if (all.size() > lines) all.erase(all.begin(), all.end() - ptrdiff_t(lines));
    return all;
  }

 private:
  int write_fd_ = -1;
  int read_fd_ = -1;
  off_t start_ = 0;
};

// fork, setsid, stdin from /dev/null, stdout/stderr to the log, exec. The
// child has no controlling terminal and none of the caller's pipes, so a
// test harness reading vtrn's output sees EOF when vtrn exits.
pid_t spawn_detached(const std::vector<std::string>& argv, int log_fd,
                     const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw CliError(Exit::kFailed, std::string("/dev/null: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(devnull);
    throw CliError(Exit::kFailed, std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setsid();
    dup2(devnull, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (chdir("/") != 0) _exit(126);
    execv(args[0], args.data());
    dprintf(STDERR_FILENO, "vtrn: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  ::close(devnull);
  return pid;
}

// An existing runtime directory is used only if it is a real directory of
// ours that nobody else can write: anything else may hold someone's socket
// or a symlink where vtrnd.log is about to be written.
void refuse_foreign_dir(const std::string& dir) {
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0)
    throw CliError(Exit::kFailed, "cannot stat runtime directory " + dir + ": " + strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw CliError(Exit::kUntrusted, "runtime directory " + dir + " is not a directory (a symlink or file)");
  if (st.st_uid != getuid())
    throw CliError(Exit::kUntrusted, "runtime directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                                         ", not to you (uid " + std::to_string(getuid()) + ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw CliError(Exit::kUntrusted, "runtime directory " + dir + " is writable by other users (mode " +
                                         std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                                         std::to_string(st.st_mode & 7) + ")");
}

void refuse_if_running() {
  drv::Client probe;
  if (probe.connect(drv::socket_path()).ok())
    throw CliError(Exit::kFailed, "vtrnd is already running (socket " + drv::socket_path() +
                                      "); run `vtrn down` first");
  if (auto pid = read_pid_file(); pid && process_alive(*pid) && is_vtrnd(*pid))
    throw CliError(Exit::kFailed, "vtrnd is already running (pid " + std::to_string(*pid) +
                                      "); run `vtrn down` first");
}

// vtrnd's log lines start "<UTC time> vtrnd[<pid>] <level>: "; the CLI's
// one-line error needs only what follows.
std::string strip_log_prefix(const std::string& line) {
  const size_t tag = line.find(" vtrnd[");
  if (tag == std::string::npos) return line;
  const size_t colon = line.find(": ", tag);
  return colon == std::string::npos ? line : line.substr(colon + 2);
}

bool chip_settling(const Vtrn__Api__ChipSummary& chip) {
  // vtrnd asks a chip for its Info right after READY; until that answer is in,
  // the summary lacks the firmware's own facts (its PCI address, say).
  if (chip.state == VTRN__API__CHIP_STATE__CHIP_STATE_READY)
    return chip.pci_address == nullptr || chip.pci_address[0] == '\0';
  return chip.state == VTRN__API__CHIP_STATE__CHIP_STATE_STARTING ||
         chip.state == VTRN__API__CHIP_STATE__CHIP_STATE_BOOTING ||
         chip.state == VTRN__API__CHIP_STATE__CHIP_STATE_UNKNOWN;
}

bool chip_failed(const Vtrn__Api__ChipSummary& chip) {
  return chip.state != VTRN__API__CHIP_STATE__CHIP_STATE_READY && !chip_settling(chip);
}

// Undoes a start that went wrong: asks vtrnd to shut down (SIGTERM when it
// does not answer), waits for it, and as a last resort kills it. Then
// removes what this run created and vtrnd did not remove. Never throws.
void abandon_start(pid_t pid, bool created_dir, const std::string& dir, int timeout_ms) {
  {
    drv::Client client;
    bool asked = false;
    if (client.connect(drv::socket_path()).ok()) {
      Vtrn__Api__Request req;
      Vtrn__Api__ShutdownRequest body;
      vtrn__api__request__init(&req);
      vtrn__api__shutdown_request__init(&body);
      req.body_case = VTRN__API__REQUEST__BODY_SHUTDOWN;
      req.shutdown = &body;
      asked = client.call(&req, 5000).ok();
    }
    if (!asked && process_alive(pid)) kill(pid, SIGTERM);
  }
  const uint64_t deadline = now_ns() + uint64_t(timeout_ms) * 1000000u;
  while (process_alive(pid) && now_ns() < deadline) sleep_ms(kPollMs);
  if (process_alive(pid)) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (created_dir) {
    // Only files this run made: the log (already quoted in the error) and
    // the directory itself, and only when nothing else is in it.
    unlink((dir + "/vtrnd.log").c_str());
    rmdir(dir.c_str());
  }
}

std::string chip_list_text(const Vtrn__Api__ListResponse& list) {
  std::string out;
  for (size_t i = 0; i < list.n_chips; ++i) {
    if (!out.empty()) out += ", ";
    out += "chip " + std::to_string(list.chips[i]->id) + " " + state_name(list.chips[i]->state);
  }
  return out.empty() ? "no chips listed" : out;
}

}  // namespace

std::string firmware_elf_path() {
  if (const char* env = getenv("VTRN_FIRMWARE"); env != nullptr && env[0] != '\0') return absolute(env);
  const std::string in_tree = self_dir() + "/../firmware/firmware.elf";
  if (path_exists(in_tree)) return absolute(in_tree);
#ifdef VTRN_DEFAULT_FIRMWARE
  return VTRN_DEFAULT_FIRMWARE;
#else
  return in_tree;
#endif
}

namespace {

// One self-overwriting line on a terminal's stderr while a board of more
// than a few chips boots; nothing when stderr is not a terminal (scripts
// and --json read stdout and the exit code).
class BootProgress {
 public:
  BootProgress() : on_(isatty(STDERR_FILENO) == 1) {}
  void show(size_t ready, size_t settled, size_t chips) {
    if (!on_ || chips <= kQuietChips) return;
    char line[128];
    snprintf(line, sizeof line, "\rvtrn: %zu of %zu chips ready, %zu failed, %zu booting or queued ", ready,
             chips, settled - ready, chips - settled);
    if (line == shown_) return;
    shown_ = line;
    fputs(line, stderr);
    fflush(stderr);
  }
  void clear() {
    if (shown_.empty()) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    shown_.clear();
  }

 private:
  static constexpr size_t kQuietChips = 8;
  bool on_;
  std::string shown_;
};

}  // namespace

BoardUp start_board(const UpOptions& options) {
  const uint64_t t0 = now_ns();
  refuse_if_running();
  const std::string qemu = find_qemu();
  const std::string vtrnd = find_vtrnd();

  std::vector<std::string> argv{vtrnd};
  if (!options.board.empty()) {
    if (!path_exists(options.board))
      throw CliError(Exit::kUsage, "board file " + options.board + " does not exist");
    argv.insert(argv.end(), {"--board", absolute(options.board)});
  }
  if (options.chips > 0) argv.insert(argv.end(), {"--chips", std::to_string(options.chips)});
  if (options.gdb) argv.insert(argv.end(), {"--gdb", "--gdb-port", std::to_string(options.gdb_port)});
  argv.insert(argv.end(), {"--boot-timeout-ms", std::to_string(options.boot_timeout_ms)});
  if (!options.group.empty()) {
    if (getgrnam(options.group.c_str()) == nullptr)
      throw CliError(Exit::kUsage, "--group " + options.group + ": no such group");
    argv.insert(argv.end(), {"--group", options.group});
  }
  if (!options.copy_engine.empty()) argv.insert(argv.end(), {"--copy-engine", options.copy_engine});
  if (options.boot_parallel > 0)
    argv.insert(argv.end(), {"--boot-parallel", std::to_string(options.boot_parallel)});

  const std::string dir = drv::runtime_dir();
  bool created_dir = false;
  if (mkdir(dir.c_str(), 0700) == 0) {
    created_dir = true;
  } else if (errno != EEXIST) {
    throw CliError(Exit::kFailed, "cannot create runtime directory " + dir + ": " + strerror(errno));
  } else {
    refuse_foreign_dir(dir);
  }
  const std::string abs_dir = absolute(dir);
  std::vector<std::pair<std::string, std::string>> env{{"VTRN_RUNTIME_DIR", abs_dir},
                                                       {"VTRN_QEMU", qemu}};
  if (const char* fw = getenv("VTRN_FIRMWARE"); fw != nullptr && fw[0] != '\0')
    env.emplace_back("VTRN_FIRMWARE", absolute(fw));

  DaemonLog log(abs_dir + "/vtrnd.log");
  const pid_t pid = spawn_detached(argv, log.write_fd(), env);
  log.close_write();

  // vtrnd boots a big board a few chips at a time, each with its own boot
  // timeout: the wait ends when no chip has settled for a whole budget, not
  // at a fixed total. A terminal sees how far the board has come.
  const int budget_ms = int(options.boot_timeout_ms) + kStartMarginMs;
  uint64_t deadline = t0 + uint64_t(budget_ms) * 1000000u;
  size_t settled_before = 0;
  BootProgress progress;
  std::optional<DaemonConnection> conn;
  drv::ResponsePtr last;
  for (;;) {
    int status = 0;
    if (!process_alive(pid, &status)) {
      std::vector<std::string> tail = log.tail(kLogTailLines);
      abandon_start(pid, created_dir, abs_dir, 1000);
      std::string why = tail.empty() ? "no output" : strip_log_prefix(tail.back());
      if (!tail.empty()) tail.pop_back();
      throw CliError(Exit::kFailed, "vtrnd " + describe_exit(status) + " during start-up: " + why,
                     tail);
    }
    try {
      if (!conn) conn.emplace(DaemonConnection::open());
      if (conn) {
        last = request_list(*conn, 5000);
        const Vtrn__Api__ListResponse& list = *last->list;
        size_t settled = 0, ready = 0;
        for (size_t i = 0; i < list.n_chips; ++i) {
          settled += !chip_settling(*list.chips[i]);
          ready += list.chips[i]->state == VTRN__API__CHIP_STATE__CHIP_STATE_READY;
        }
        if (settled > settled_before) {
          settled_before = settled;
          deadline = now_ns() + uint64_t(budget_ms) * 1000000u;
        }
        progress.show(ready, settled, list.n_chips);
        if (settled == list.n_chips && list.n_chips > 0) break;
      }
    } catch (const CliError&) {
      // The daemon is between states (socket up, not yet serving) or has
      // just exited; the liveness check above decides on the next turn.
      conn.reset();
    }
    if (now_ns() >= deadline) {
      const std::string states = last ? chip_list_text(*last->list) : "vtrnd never answered";
      std::vector<std::string> tail = log.tail(kLogTailLines);
      progress.clear();
      conn.reset();
      abandon_start(pid, created_dir, abs_dir, 10000);
      throw CliError(Exit::kTimeout,
                     "timed out after " + std::to_string(budget_ms) + " ms without a chip settling, waiting for the board (" +
                         states + ")",
                     tail);
    }
    // A list of a big board is work for vtrnd too: poll it less often.
    sleep_ms(last ? std::max<int>(kPollMs, int(last->list->n_chips)) : kPollMs);
  }
  progress.clear();

  const Vtrn__Api__ListResponse& list = *last->list;
  std::string first_error;
  std::vector<std::string> details;
  for (size_t i = 0; i < list.n_chips; ++i) {
    const Vtrn__Api__ChipSummary& chip = *list.chips[i];
    if (!chip_failed(chip)) continue;
    const std::string line = "chip " + std::to_string(chip.id) + " failed to boot (" +
                             state_name(chip.state) + "): " +
                             (chip.error[0] != '\0' ? chip.error : "no error recorded");
    if (first_error.empty())
      first_error = line;
    else
      details.push_back(line);
    for (size_t j = 0; j < chip.n_last_log; ++j)
      details.push_back("chip " + std::to_string(chip.id) + " | " + chip.last_log[j]);
    if (chip.n_last_log == 0)
      details.push_back("chip " + std::to_string(chip.id) + " | (no firmware log or UART output)");
  }
  if (!first_error.empty()) {
    conn.reset();
    abandon_start(pid, created_dir, abs_dir, 20000);
    throw CliError(Exit::kChipNotReady, first_error, details);
  }

  BoardUp up;
  up.vtrnd_pid = pid;
  up.wall_ns = now_ns() - t0;
  up.list = std::move(last);
  return up;
}

BoardDown stop_board(int timeout_ms) {
  BoardDown down;
  const std::optional<pid_t> pid = read_pid_file();
  down.vtrnd_pid = pid.value_or(-1);
  DaemonConnection conn = DaemonConnection::open();
  try {
    drv::ResponsePtr resp = request_shutdown(conn);
    down.chips_stopped = resp->shutdown->chips_stopped;
  } catch (const CliError& e) {
    // A daemon already shutting down is what we want; wait for it below.
    if (e.code() != Exit::kNotRunning) throw;
  }
  conn.client().close();

  const std::string sock = drv::socket_path();
  const uint64_t deadline = now_ns() + uint64_t(timeout_ms) * 1000000u;
  for (;;) {
    const bool running = pid && process_alive(*pid);
    const bool socket_left = path_exists(sock);
    if (!running && !socket_left) break;
    if (now_ns() >= deadline) {
      const std::string what = running ? "vtrnd (pid " + std::to_string(*pid) + ") is still running"
                                       : "its socket " + sock + " is still there";
      throw CliError(Exit::kTimeout,
                     "vtrnd did not finish shutting down within " + std::to_string(timeout_ms) +
                         " ms: " + what);
    }
    sleep_ms(kPollMs);
  }
  return down;
}

}  // namespace tools
