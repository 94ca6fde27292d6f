// QEMU command line and process start (see vtrn/drv/qemu_launch.h).
#include "vtrn/drv/qemu_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

namespace drv {
namespace {

#include "qemu_chip_args.inc"

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool is_executable(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

}  // namespace

const char* chip_args_template() { return kChipArgsTemplate; }

Result<std::vector<std::string>> build_qemu_argv(const char* tmpl, const std::string& qemu,
                                                const QemuParams& p) {
  const std::map<std::string, std::string> vars = {
      {"chip", std::to_string(p.chip)},
      {"cores", std::to_string(p.cores)},
      {"maxcpus", std::to_string(p.cores < 2 ? 2 : p.cores)},
      {"mem_mib", std::to_string(p.mem_mib)},
      {"firmware", p.firmware},
      {"board_dtb", p.board_dtb},
      {"board_size", std::to_string(p.board_size)},
      {"ivshmem_sock", p.ivshmem_sock},
      {"qmp_sock", p.qmp_sock},
      {"uart_log", p.uart_log},
      {"vectors", std::to_string(p.vectors)},
      {"gdb_port", std::to_string(p.gdb_port)},
      {"ram_fd", std::to_string(p.ram_fd)},
      {"engines_sock", p.engines_sock},
      {"engine_vectors", std::to_string(p.engine_vectors)},
      {"copy_engine", p.copy_engine},
  };
  std::vector<std::string> argv{qemu};
  std::string text = tmpl;
  size_t line_no = 0, pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("[gdb]", 0) == 0) {
      if (!p.gdb) continue;
      line = trim(line.substr(5));
    }
    // Substitute placeholders.
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '{') {
        out += line[i];
        continue;
      }
      size_t close = line.find('}', i);
      if (close == std::string::npos)
        return Error(Code::kDecode, "qemu/chip.args line " + std::to_string(line_no) + ": unterminated {");
      std::string name = line.substr(i + 1, close - i - 1);
      auto it = vars.find(name);
      if (it == vars.end())
        return Error(Code::kDecode, "qemu/chip.args line " + std::to_string(line_no) +
                                        ": unknown placeholder {" + name + "}");
      out += it->second;
      i = close;
    }
    size_t sp = out.find_first_of(" \t");
    if (sp == std::string::npos) {
      argv.push_back(out);
    } else {
      argv.push_back(out.substr(0, sp));
      argv.push_back(trim(out.substr(sp + 1)));
    }
  }
  return argv;
}

Result<std::string> find_qemu(const std::string& flag) {
  const char* env = getenv("VTRN_QEMU");
  std::string want = !flag.empty() ? flag : (env != nullptr && env[0] != '\0') ? env : "";
  if (!want.empty()) {
    if (want.find('/') == std::string::npos) {
      // A bare name is looked up on PATH below.
    } else if (is_executable(want)) {
      return want;
    } else {
      return Error(Code::kNotFound,
                   want + " not found or not executable (install qemu-system-arm or set VTRN_QEMU)");
    }
  }
  std::string name = want.empty() ? "qemu-system-aarch64" : want;
  const char* path_env = getenv("PATH");
  std::string dirs = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (is_executable(candidate)) return candidate;
  }
  return Error(Code::kNotFound, name + " not found (install qemu-system-arm or set VTRN_QEMU)");
}

Result<pid_t> spawn_qemu(const std::vector<std::string>& argv, const std::vector<int>& inherit,
                         int* stderr_read) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Error(Code::kSystem, std::string("pipe: ") + strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // QEMU's own start-up is most of a chip's boot time, and much of that is
  // page faults in glibc malloc's heap: transparent huge pages for it cut
  // about 30 ms (measured: 100 -> 70 ms from exec to a guest power-off).
  // Appended to whatever tunables the user already set.
  std::vector<std::string> env_store;
  bool have_tunables = false;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("GLIBC_TUNABLES=", 0) == 0) {
      have_tunables = true;
      if (kv.find("glibc.malloc.hugetlb") == std::string::npos)
        kv += (kv.size() > 15 ? ":" : "") + std::string("glibc.malloc.hugetlb=1");
    }
    env_store.push_back(std::move(kv));
  }
  if (!have_tunables) env_store.emplace_back("GLIBC_TUNABLES=glibc.malloc.hugetlb=1");
  std::vector<char*> envp;
  for (std::string& kv : env_store) envp.push_back(kv.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    Error e(Code::kSystem, std::string("fork: ") + strerror(errno));
    close(pipefd[0]);
    close(pipefd[1]);
    return e;
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // vtrnd died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // vtrnd blocks signals for signalfd
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(pipefd[1], STDOUT_FILENO);
    dup2(pipefd[1], STDERR_FILENO);
    for (int fd : inherit) fcntl(fd, F_SETFD, 0);
    execve(args[0], args.data(), envp.data());
    const char msg[] = "vtrnd: exec of QEMU failed\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  close(pipefd[1]);
  fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
  *stderr_read = pipefd[0];
  return pid;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t'\"\\$`") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) {
        if (c == '\'') out += "'\\''";
        else out += c;
      }
      out += '\'';
    }
  }
  return out;
}

}  // namespace drv
