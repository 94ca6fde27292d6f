// vtrn-hw: the board's silicon as one process. It runs the DMA and tensor
// engines of every chip it is given, natively, and is the ivshmem server of
// each chip's engine function. It is not a driver: nothing here decides
// what the engines do; the firmware programs them through the engine region
// and the host reaches them only through BAR2 and its DMA doorbell.
//
// The launcher (vtrnd; a test harness) starts it before the chips' QEMUs and
// hands it, per chip, inherited fds: the chip's RAM memfd, its BAR2 memfd,
// the host's DMA doorbell eventfd and DMA completion eventfd. vtrn-hw writes
// "ready" on the control fd once every engine socket listens (QEMU must find
// it listening), then serves line requests there:
//   reset <chip>   quiesce and restart that chip's engines -> "reset <chip> ok <us>"
//   quit           stop every engine and exit 0
// The control fd reaching EOF (the launcher died) is a quit: the engines
// stop, so nothing keeps writing a board whose driver is gone.
//
// Usage:
//   vtrn-hw --board board.dtb [--control-fd N] [--spin-us U]
//           --chip id=0,ram-fd=4,bar2-fd=5,doorbell-fd=6,host-irq-fd=7,socket=PATH[,ram-base=0x40000000]
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/board.h"
#include "vtrn/hw/board_links.h"
#include "vtrn/hw/chip.h"

namespace {

using vtrn::hw::ChipFds;
using vtrn::hw::ChipHw;

[[noreturn]] void die(const std::string& msg) {
  fprintf(stderr, "vtrn-hw: %s\n", msg.c_str());
  exit(1);
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = strtoull(s.c_str(), &end, 0);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

ChipFds parse_chip(const std::string& spec) {
  ChipFds f;
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) die("--chip " + spec + ": '" + item + "' is not key=value");
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  auto num = [&](const char* key, bool required, uint64_t def) {
    auto it = kv.find(key);
    if (it == kv.end()) {
      if (required) die("--chip " + spec + ": missing " + key);
      return def;
    }
    uint64_t v;
    if (!parse_u64(it->second, &v)) die("--chip " + spec + ": " + key + "=" + it->second + " is not a number");
    kv.erase(it);
    return v;
  };
  f.id = uint32_t(num("id", true, 0));
  f.ram_fd = int(num("ram-fd", true, 0));
  f.bar2_fd = int(num("bar2-fd", true, 0));
  f.doorbell_fd = int(num("doorbell-fd", true, 0));
  f.host_irq_fd = int(num("host-irq-fd", true, 0));
  f.ram_base = num("ram-base", false, 0x40000000);
  auto sock = kv.find("socket");
  if (sock == kv.end()) die("--chip " + spec + ": missing socket");
  f.socket = sock->second;
  kv.erase(sock);
  if (!kv.empty()) die("--chip " + spec + ": unknown key " + kv.begin()->first);
  return f;
}

void send_line(int fd, const std::string& line) {
  if (fd < 0) return;
  const std::string s = line + "\n";
  ssize_t n = write(fd, s.data(), s.size());
  (void)n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string board_path;
  int control_fd = -1;
  uint64_t spin_us = 50;
  std::vector<ChipFds> specs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    uint64_t v;
    if (a == "--board") {
      board_path = value();
    } else if (a == "--control-fd") {
      if (!parse_u64(value(), &v)) die("--control-fd needs a number");
      control_fd = int(v);
    } else if (a == "--spin-us") {
      if (!parse_u64(value(), &spin_us) || spin_us > 1000000) die("--spin-us needs 0..1000000");
    } else if (a == "--chip") {
      specs.push_back(parse_chip(value()));
    } else {
      die("unknown argument " + a + " (usage: vtrn-hw --board DTB [--control-fd N] [--spin-us U] --chip ...)");
    }
  }
  if (board_path.empty() || specs.empty()) die("--board and at least one --chip are required");

  std::ifstream in(board_path, std::ios::binary);
  std::vector<uint8_t> dtb((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (dtb.empty()) die("cannot read board " + board_path);

  // Engines run in parallel; each sgemm call stays on its engine's thread.
  vtrn::hw::blas_single_threaded();

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  drv::UniqueFd sigfd(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));

  std::vector<std::unique_ptr<ChipHw>> chips;
  for (const ChipFds& f : specs) {
    auto chip = std::make_unique<vtrn::board::Chip>();
    const vtrn::Error r = vtrn::board::parse_chip(dtb.data(), dtb.size(), f.id, chip.get());
    if (!r.ok()) die("board " + board_path + ": " + r.detail());
    vtrn::hw::EngineProps props;
    char err[200];
    if (!vtrn::hw::read_engine_props(dtb.data(), f.id, chip->neuron_cores, &props, err, sizeof err))
      die("board " + board_path + ": " + err);
    auto hw = std::make_unique<ChipHw>();
    std::string e;
    if (!hw->start(f, props, spin_us * 1000, &e)) die("chip " + std::to_string(f.id) + ": " + e);
    fprintf(stderr, "vtrn-hw: chip %u: %u DMA engines (%llu GB/s modeled), %u tensor engines, engine function at %s\n",
            f.id, props.dma_engines, (unsigned long long)(props.dma_bytes_per_s / 1000000000ull),
            props.tensor_engines, f.socket.c_str());
    chips.push_back(std::move(hw));
  }
  // The link engines of every chip with link ports, wired as /links says.
  vtrn::hw::BoardLinks links;
  {
    std::vector<ChipHw*> served;
    for (auto& c : chips) served.push_back(c.get());
    std::string e;
    if (!links.start(dtb.data(), dtb.size(), served, &e)) die("board " + board_path + ": link engines: " + e);
    if (links.running())
      fprintf(stderr, "vtrn-hw: link engines: %u ports, %u chip-to-chip wires\n", links.ports(), links.wires());
  }

  drv::UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  drv::UniqueFd tick(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  itimerspec its{};
  its.it_interval.tv_nsec = its.it_value.tv_nsec = long(vtrn::engine::kHeartbeatMs) * 1000000L;
  timerfd_settime(tick.get(), 0, &its, nullptr);

  // epoll data: kind << 32 | chip index.
  enum Kind : uint64_t { kSignal = 1, kTick, kControl, kListen, kPeer, kVector };
  auto watch = [&](int fd, Kind kind, uint32_t chip, uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = (uint64_t(kind) << 32) | chip;
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0) die(std::string("epoll_ctl: ") + strerror(errno));
  };
  watch(sigfd.get(), kSignal, 0);
  watch(tick.get(), kTick, 0);
  if (control_fd >= 0) watch(control_fd, kControl, 0, EPOLLIN | EPOLLRDHUP);
  for (uint32_t i = 0; i < chips.size(); ++i) {
    watch(chips[i]->listen_fd(), kListen, i);
    watch(chips[i]->control_fd(), kVector, i);
  }
  send_line(control_fd, "ready");

  std::string pending;
  bool running = true;
  while (running) {
    epoll_event evs[16];
    const int n = epoll_wait(ep.get(), evs, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die(std::string("epoll_wait: ") + strerror(errno));
    for (int e = 0; e < n && running; ++e) {
      const Kind kind = Kind(evs[e].data.u64 >> 32);
      const uint32_t ci = uint32_t(evs[e].data.u64);
      switch (kind) {
        case kSignal: {
          signalfd_siginfo si;
          while (read(sigfd.get(), &si, sizeof si) == ssize_t(sizeof si)) {
            if (si.ssi_signo != SIGPIPE) running = false;
          }
          break;
        }
        case kTick: {
          uint64_t ticks;
          ssize_t r = read(tick.get(), &ticks, sizeof ticks);
          (void)r;
          for (auto& c : chips) c->heartbeat();
          break;
        }
        case kControl: {
          char buf[256];
          const ssize_t r = read(control_fd, buf, sizeof buf);
          if (r <= 0) {
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
            running = false;  // the launcher is gone
            break;
          }
          pending.append(buf, size_t(r));
          size_t nl;
          while ((nl = pending.find('\n')) != std::string::npos) {
            const std::string line = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            unsigned id = 0;
            if (line == "quit") {
              running = false;
            } else if (sscanf(line.c_str(), "reset %u", &id) == 1) {
              bool found = false;
              for (auto& c : chips) {
                if (c->id() != id) continue;
                found = true;
                const uint64_t ns = c->reset();
                send_line(control_fd, "reset " + std::to_string(id) + " ok " + std::to_string(ns / 1000));
              }
              if (!found) send_line(control_fd, "reset " + std::to_string(id) + " error no such chip");
            } else {
              send_line(control_fd, "error unknown request: " + line);
            }
          }
          break;
        }
        case kListen: {
          std::string err;
          if (!chips[ci]->accept_peer(&err)) {
            fprintf(stderr, "vtrn-hw: chip %u: %s\n", chips[ci]->id(), err.c_str());
          } else {
            watch(chips[ci]->peer_fd(), kPeer, ci, EPOLLRDHUP | EPOLLHUP | EPOLLIN);
          }
          break;
        }
        case kPeer: {
          // QEMU never sends after the handshake: readable means closed.
          epoll_ctl(ep.get(), EPOLL_CTL_DEL, chips[ci]->peer_fd(), nullptr);
          chips[ci]->peer_gone();
          fprintf(stderr, "vtrn-hw: chip %u: QEMU disconnected; engines reset\n", chips[ci]->id());
          break;
        }
        case kVector:
          chips[ci]->control_vector();
          break;
      }
    }
  }
  links.stop();
  for (auto& c : chips) c->stop();
  return 0;
}
