// hw_chip_test: vtrn-hw with one real QEMU chip, the way the launcher
// (vtrnd, in phase 2) will run them. It plays the launcher and the host:
//  - creates the chip's RAM as a sparse memfd (QEMU's memory-backend-file
//    through /proc/self/fd, share=on) and the host interface BAR2 memfd with
//    its ivshmem server (drv::IvshmemServer), a DMA doorbell eventfd, and
//    starts vtrn-hw with those fds inherited and a control socketpair;
//  - starts QEMU with two ivshmem-doorbell functions (00:01.0 host
//    interface, 00:02.0 engines) running tests/baremetal engines_check.elf;
//  - when the image opens the host DMA queues, copies 4 MiB host window ->
//    HBM -> host window through them with common/dma's HostQueue, ringing
//    the engine's doorbell and waiting on the DMA completion eventfd;
//  - verifies every GEMM the image ran, engine and core results alike,
//    against the double reference (kern::gemm_verify) by reading HBM
//    through the RAM memfd;
//  - in --crash mode kills vtrn-hw when the image asks and checks that both
//    waiters notice: this harness (control socket EOF, exit status) and the
//    chip (frozen heartbeat).
// Prints the figures (boot time, QEMU RSS, host DMA GB/s) and exits 0 only
// when every check passed. Nothing is left behind: the runtime directory is
// removed and both children are reaped.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../../tests/baremetal/engines_mailbox.h"
#include "vtrn/ctrl_ring.h"
#include "vtrn/dma_host.h"
#include "vtrn/drv/fd.h"
#include "vtrn/drv/hw_process.h"
#include "vtrn/drv/ivshmem_server.h"
#include "vtrn/engine_abi.h"
#include "vtrn/hostif.h"
#include "vtrn/kernels_reference.h"

namespace mb = bm::mailbox;

namespace {

int g_failures = 0;
int g_passes = 0;

void check(bool ok, const std::string& what) {
  printf("hw-chip-test: %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ++(ok ? g_passes : g_failures);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Forks and execs QEMU with `keep` fds inherited as they are (CLOEXEC
// cleared in the child only); stdout+stderr to `out_fd`.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<int>& keep, int out_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  for (int fd : keep) fcntl(fd, F_SETFD, 0);
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  execv(args[0], args.data());
  _exit(127);
}

uint64_t rss_kib(pid_t pid, const char* key) {
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return 0;
  char line[256];
  uint64_t v = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, strlen(key)) == 0) v = strtoull(line + strlen(key) + 1, nullptr, 10);
  }
  fclose(f);
  return v;
}

struct Host {
  uint8_t* bar2;
  uint8_t* ram;
  uint64_t ram_base;
  int doorbell;
  int irq;
};

// 4 MiB host window -> HBM -> window through the engine-served queue 0.
uint32_t host_dma(const Host& h, const mb::Mailbox& m, double* gbps) {
  using namespace vtrn::dma;
  uint8_t* q = h.bar2 + m.dma_region_offset + kDmaQueuesOffset;
  HostQueue hq(reinterpret_cast<QueueControl*>(q), reinterpret_cast<Descriptor*>(q + kQueueSqOffset),
               reinterpret_cast<Completion*>(q + cq_offset(m.depth)), m.depth);
  hq.arm_irq(true);
  const uint32_t n = m.host_bytes;
  uint8_t* win = h.bar2 + m.window_offset;
  for (uint32_t i = 0; i < n; ++i) win[i] = uint8_t(i * 2654435761u >> 24);
  memset(win + n, 0, n);
  const uint64_t t0 = now_ns();
  for (int dir = 0; dir < 2; ++dir) {
    Descriptor d[4];
    for (uint32_t i = 0; i < 4; ++i) {
      const uint32_t piece = n / 4, off = i * piece;
      d[i] = dir == 0 ? Descriptor{off, m.hbm_dst + off, piece, kDescSrcHost, 10u + i}
                      : Descriptor{m.hbm_dst + off, n + off, piece, kDescDstHost, 20u + i};
      d[i].flags |= (i == 0 ? uint32_t(kDescFirst) : 0u) | (i == 3 ? uint32_t(kDescLast | kDescIrq) : 0u);
    }
    if (!hq.submit(d, 4)) return 1;
    const uint64_t one = 1;
    if (write(h.doorbell, &one, sizeof one) != ssize_t(sizeof one)) return 2;
    Completion c;
    uint32_t got = 0;
    const uint64_t deadline = now_ns() + 5000000000ull;
    while (got == 0) {
      pollfd p{h.irq, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        uint64_t v;
        ssize_t r = read(h.irq, &v, sizeof v);
        (void)r;
      }
      got = hq.reap(&c, 1);
      if (now_ns() > deadline) return 3;
    }
    if (c.status != kOk || c.bytes != n || c.cookie != (dir ? 23u : 13u)) return 4;
  }
  *gbps = 2.0 * n / double(now_ns() - t0);
  return memcmp(win, win + n, n) == 0 ? 0 : 5;
}

}  // namespace

int main(int argc, char** argv) {
  std::string qemu = "/usr/bin/qemu-system-aarch64", image, hw, board;
  bool crash = false;
  uint64_t ram_mib = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--qemu" && i + 1 < argc) qemu = argv[++i];
    else if (a == "--image" && i + 1 < argc) image = argv[++i];
    else if (a == "--vtrn-hw" && i + 1 < argc) hw = argv[++i];
    else if (a == "--board" && i + 1 < argc) board = argv[++i];
    else if (a == "--crash") crash = true;
    else {
      fprintf(stderr, "usage: hw_chip_test --image ELF --vtrn-hw PATH --board DTB [--qemu PATH] [--crash]\n");
      return 2;
    }
  }
  if (image.empty() || hw.empty() || board.empty()) {
    fprintf(stderr, "hw_chip_test: --image, --vtrn-hw and --board are required\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/vtrn-hwtest-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;

  const uint64_t ram_bytes = ram_mib << 20;
  drv::ChipHwLink link;  // the chip's RAM memfd and DMA doorbell, as vtrnd makes them
  std::string err;
  if (const drv::Error e = link.create(dir, ram_bytes); !e.ok()) {
    fprintf(stderr, "chip RAM: %s\n", e.detail().c_str());
    return 1;
  }
  drv::Mapping ram_map;
  if (!ram_map.map(link.ram_fd(), ram_bytes).ok()) return 1;
  drv::IvshmemServer hostif;
  if (const drv::Error e = hostif.create(dir + "/host.sock", 16u << 20, vtrn::hostif::kVectorCount); !e.ok()) {
    fprintf(stderr, "host interface: %s\n", e.detail().c_str());
    return 1;
  }
  auto* m = reinterpret_cast<mb::Mailbox*>(hostif.bar2());
  m->mode = crash ? mb::kModeCrash : mb::kModeCheck;
  drv::UniqueFd host_irq_read(dup(hostif.host_eventfd(vtrn::hostif::kVectorDma)));

  std::vector<uint8_t> dtb;
  if (FILE* f = fopen(board.c_str(), "rb")) {
    for (int c; (c = fgetc(f)) != EOF;) dtb.push_back(uint8_t(c));
    fclose(f);
  }
  const std::string eng_sock = link.engines_socket();
  drv::HwProcess hwp;
  const drv::Error started = hwp.start(hw, dtb,
                                       {drv::HwChipSpec{0, link.ram_fd(), hostif.memfd(), link.doorbell_fd(),
                                                        hostif.host_eventfd(vtrn::hostif::kVectorDma), eng_sock}},
                                       10000);
  const bool ready = started.ok();
  check(ready, "vtrn-hw ready on its control socket" + (ready ? std::string() : ": " + started.detail()));
  if (!ready) return 1;
  const pid_t hw_pid = hwp.pid();
  char buf[512];

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return 1;
  const std::string memobj = "memory-backend-file,id=ram,mem-path=/proc/self/fd/" + std::to_string(link.ram_fd()) +
                             ",size=" + std::to_string(ram_mib) + "M,share=on";
  const uint64_t t_launch = now_ns();
  const pid_t qemu_pid =
      spawn({qemu, "-machine", "virt,gic-version=2,memory-backend=ram", "-cpu", "cortex-a53", "-smp", "1,maxcpus=2",
             "-m", std::to_string(ram_mib) + "M", "-object", memobj, "-nographic", "-nodefaults", "-serial", "stdio",
             "-kernel", image, "-chardev", "socket,id=host,path=" + dir + "/host.sock", "-device",
             "ivshmem-doorbell,chardev=host,vectors=" + std::to_string(vtrn::hostif::kVectorCount) +
                 ",bus=pcie.0,addr=01.0",
             "-chardev", "socket,id=eng,path=" + eng_sock, "-device",
             "ivshmem-doorbell,chardev=eng,vectors=" + std::to_string(vtrn::engine::kVectorCount) +
                 ",bus=pcie.0,addr=02.0"},
            {link.ram_fd()}, pipefd[1]);
  close(pipefd[1]);
  drv::UniqueFd qout(pipefd[0]);

  Host host{hostif.bar2(), ram_map.data(), 0x40000000, link.doorbell_fd(), host_irq_read.get()};
  std::string uart, pending;
  bool host_done = false, killed = false, qemu_exited = false, hw_exited = false;
  int qemu_status = 0;
  uint64_t first_line_ns = 0, rss = 0, rss_shmem = 0, kill_ns = 0, hw_noticed_ns = 0;
  double host_gbps = 0;
  const uint64_t deadline = now_ns() + 240000000000ull;
  while (!qemu_exited && now_ns() < deadline) {
    pollfd p[3] = {{hostif.listen_fd(), POLLIN, 0}, {qout.get(), POLLIN, 0}, {hwp.control_fd(), POLLIN, 0}};
    poll(p, 3, 20);
    if (p[0].revents & POLLIN) {
      if (const drv::Error e = hostif.accept_peer(); !e.ok())
        fprintf(stderr, "host interface accept: %s\n", e.detail().c_str());
    }
    if (p[1].revents & (POLLIN | POLLHUP)) {
      const ssize_t r = read(qout.get(), buf, sizeof buf);
      if (r > 0) {
        if (!first_line_ns) first_line_ns = now_ns() - t_launch;
        fwrite(buf, 1, size_t(r), stdout);
        fflush(stdout);
        uart.append(buf, size_t(r));
      }
    }
    if ((p[2].revents & (POLLIN | POLLHUP)) && !hw_noticed_ns && !hwp.read_control()) {
      hw_noticed_ns = now_ns();
      hw_exited = true;
      printf("hw-chip-test: %s, noticed %.1f ms after the kill: every chip of the board fails with that reason\n",
             hwp.exit_reason().c_str(), kill_ns ? (hw_noticed_ns - kill_ns) / 1e6 : 0.0);
    }
    const uint32_t state = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
    if (state == mb::kHostTurn && !host_done) {
      rss = rss_kib(qemu_pid, "VmRSS:");
      rss_shmem = rss_kib(qemu_pid, "RssShmem:");
      m->host_status = host_dma(host, *m, &host_gbps);
      __atomic_store_n(&m->host_state, uint32_t(mb::kHostDone), __ATOMIC_RELEASE);
      host_done = true;
    }
    if (state == mb::kKillNow && !killed) {
      kill_ns = now_ns();
      kill(hw_pid, SIGKILL);
      killed = true;
    }
    if (waitpid(qemu_pid, &qemu_status, WNOHANG) == qemu_pid) qemu_exited = true;
  }
  if (!qemu_exited) {
    kill(qemu_pid, SIGKILL);
    waitpid(qemu_pid, &qemu_status, 0);
  }
  // Drain what the UART still holds.
  for (ssize_t r; (r = read(qout.get(), buf, sizeof buf)) > 0;) {
    fwrite(buf, 1, size_t(r), stdout);
    uart.append(buf, size_t(r));
  }
  check(qemu_exited, "QEMU powered off by itself (" + drv::describe_wait_status(qemu_status) + ")");
  check(uart.find("FAIL") == std::string::npos, "no failure line from the image");
  printf("hw-chip-test: boot (QEMU exec to first UART line) %.1f ms; QEMU RSS %llu KiB of which shared %llu KiB "
         "(RAM memfd %llu MiB, sparse)\n",
         first_line_ns / 1e6, (unsigned long long)rss, (unsigned long long)rss_shmem,
         (unsigned long long)ram_mib);
  if (crash) {
    check(killed, "the image asked for the kill");
    const int st = hwp.wait_status();
    check(hw_exited && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
          "the launcher noticed vtrn-hw die and names why (" + hwp.exit_reason() + ")");
    check(uart.find("engines-crash: DETECTED") != std::string::npos, "the chip noticed its engines stopped");
  } else {
    check(uart.find("engines-check: PASS") != std::string::npos, "engines-check: PASS");
    check(host_done && m->host_status == 0,
          "host DMA through the engine-served BAR2 queues (status " + std::to_string(m->host_status) + ")");
    printf("hw-chip-test: host DMA 2 x %u MiB through the engine at %.2f GB/s (includes eventfd waits)\n",
           m->host_bytes >> 20, host_gbps);
    check(m->gemm_count == 5, "five GEMMs recorded");
    for (uint32_t i = 0; i < m->gemm_count && i < mb::kMaxGemms; ++i) {
      const mb::GemmRecord& g = m->gemms[i];
      const auto dt = vtrn::num::DType(g.dtype);
      auto at = [&](uint64_t addr) { return addr ? ram_map.data() + (addr - 0x40000000) : nullptr; };
      for (int which = 0; which < 2; ++which) {
        vtrn::kern::GemmArgs args{dt, g.m, g.n, g.k, at(g.a), at(g.a_scales), at(g.b), at(g.b_scales),
                                  reinterpret_cast<float*>(at(which ? g.c_core : g.c_engine))};
        vtrn::kern::GemmCheck chk;
        const bool ok = vtrn::kern::gemm_verify(args, &chk);
        char what[200];
        snprintf(what, sizeof what, "%s %ux%ux%u on the %s within the bound (max err/bound %.3f)",
                 vtrn::num::dtype_name(dt), g.m, g.n, g.k, which ? "core  " : "engines", chk.max_bound_ratio);
        check(ok, what);
      }
    }
  }
  if (!hw_exited) check(hwp.stop(5000), "vtrn-hw stopped cleanly on quit");
  hostif.close();
  rmdir(dir.c_str());
  printf("%d passed, %d failed\n", g_passes, g_failures);
  return g_failures == 0 ? 0 : 1;
}
