// One chip's engines, their threads and reset. See vtrn/hw/chip.h.
#include "vtrn/hw/chip.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vtrn/ctrl_ring.h"

#ifndef VTRN_HW_BUILD
#define VTRN_HW_BUILD "vtrn-hw"
#endif

namespace vtrn::hw {

using hostif::load_acquire;
using hostif::store_release;

namespace {

// How long a preempted engine thread goes without spinning, and how often
// a spinning one looks for preemption (a getrusage call).
constexpr uint64_t kSpinBackoffNs = 100'000'000;
constexpr uint64_t kPreemptCheckNs = 10'000;

void drain(int fd) {
  uint64_t v;
  while (read(fd, &v, sizeof v) == ssize_t(sizeof v)) {
  }
}

// This thread's involuntary context switches: the scheduler took the CPU
// from it because another thread wanted it.
long preemptions() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

void poke(int fd) {
  const uint64_t one = 1;
  // EAGAIN: the counter is saturated, a wake-up is pending anyway.
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
}

bool map_fd(int fd, drv::Mapping* m, const char* what, std::string* err) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    *err = std::string(what) + ": fd " + std::to_string(fd) + " is not a sized file";
    return false;
  }
  if (drv::Error e = m->map(fd, size_t(st.st_size)); !e.ok()) {
    *err = std::string(what) + ": " + e.detail();
    return false;
  }
  return true;
}

}  // namespace

ChipHw::~ChipHw() { stop(); }

void ChipHw::write_id() {
  engine::IdBlock id{};
  id.magic = engine::kMagic;
  id.abi_major = engine::kAbiMajor;
  id.abi_minor = engine::kAbiMinor;
  id.region_bytes = uint32_t(engine::kRegionBytes);
  id.vector_count = engine::kVectorCount;
  id.capabilities = engine::kCapDmaFwQueue | engine::kCapDmaHostQueues | engine::kCapTensorGemm | engine::kCapMpu |
                    engine::kCapFaultInject | engine::kCapModeledTime | engine::kCapTensorRemap;
  id.dma_engines = props_.dma_engines;
  id.tensor_engines = props_.tensor_engines;
  id.dtype_mask = (1u << num::kDTypeCount) - 1;
  id.mpu_windows = engine::kMpuWindows;
  id.dma_fw_depth = engine::kDmaFwDepth;
  id.tensor_depth = engine::kTensorDepth;
  id.hbm_base = mem_.ram_base;
  id.hbm_size = mem_.ram_size;
  id.dma_bytes_per_s = props_.dma_bytes_per_s;
  for (uint32_t d = 0; d < num::kDTypeCount; ++d) id.tensor_flops_per_s[d] = props_.tensor_flops_per_s[d];
  id.chip_id = id_;
  strncpy(id.hw_build, VTRN_HW_BUILD, sizeof id.hw_build - 1);
  memcpy(mem_.id(), &id, sizeof id);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

bool ChipHw::start(const ChipFds& f, const EngineProps& props, uint64_t spin_ns, std::string* err) {
  id_ = f.id;
  props_ = props;
  spin_ns_ = spin_ns;
  doorbell_.reset(f.doorbell_fd);
  host_irq_.reset(f.host_irq_fd);
  if (!map_fd(f.ram_fd, &ram_, "RAM", err) || !map_fd(f.bar2_fd, &bar2_, "BAR2", err)) return false;
  // The BAR2 mapping keeps its file alive; the RAM fd stays open for the
  // DMA engines' remap views (translated MPU windows map RAM pages again).
  ram_fd_.reset(f.ram_fd);
  close(f.bar2_fd);
  if (drv::Error e = server_.create(f.socket, engine::kRegionBytes, engine::kVectorCount); !e.ok()) {
    *err = "engine function " + f.socket + ": " + e.detail();
    return false;
  }
  mem_.region = server_.bar2();
  mem_.bar2 = bar2_.data();
  mem_.bar2_size = bar2_.size();
  mem_.ram = ram_.data();
  mem_.ram_base = f.ram_base;
  mem_.ram_size = ram_.size();
  mem_.ram_fd = ram_fd_.get();
  errors_ = std::make_unique<ErrorLog>(mem_, *this);
  write_id();
  for (uint32_t i = 0; i < props_.dma_engines; ++i)
    dma_.push_back(std::make_unique<DmaEngine>(mem_, i, props_, *this, *errors_, monotonic_ns));
  for (uint32_t j = 0; j < props_.tensor_engines; ++j)
    tensor_.push_back(std::make_unique<TensorEngine>(mem_, j, props_, *this, *errors_, monotonic_ns));
  for (uint32_t k = 0; k < props_.dma_engines + props_.tensor_engines; ++k) {
    auto w = std::make_unique<Worker>();
    w->dma = k < props_.dma_engines;
    w->index = w->dma ? k : k - props_.dma_engines;
    w->wake.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!w->wake) {
      *err = std::string("eventfd: ") + strerror(errno);
      return false;
    }
    const uint16_t v = w->dma ? uint16_t(engine::kVectorDma0 + w->index) : uint16_t(engine::kVectorTensor0 + w->index);
    w->doorbell = server_.host_eventfd(v);
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* p = w.get();
    w->thread = std::thread([this, p] { run(p); });
  }
  return true;
}

void ChipHw::stop() {
  if (workers_.empty()) return;
  stop_ = true;
  for (auto& w : workers_) poke(w->wake.get());
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  workers_.clear();
  server_.close();
}

void ChipHw::chip_irq(uint16_t vector) { (void)server_.notify_chip(vector); }

void ChipHw::host_irq() {
  if (host_irq_) poke(host_irq_.get());
}

bool ChipHw::pass(Worker* w) {
  if (w->dma) return dma_[w->index]->run_pass().worked;
  return tensor_[w->index]->run_pass();
}

bool ChipHw::has_work(Worker* w) {
  if (w->dma) return dma_[w->index]->has_work();
  return tensor_[w->index]->has_work();
}

void ChipHw::reset_model(Worker* w) {
  if (w->dma) {
    dma_[w->index]->reset();
  } else {
    tensor_[w->index]->reset();
  }
}

void ChipHw::run(Worker* w) {
  drv::UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  auto watch = [&](int fd, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  watch(w->wake.get(), EPOLLIN);
  watch(w->doorbell, EPOLLIN);
  // The host's DMA doorbell reaches every DMA engine directly, edge
  // triggered: each write wakes each engine that sleeps, and nobody needs
  // to drain it for the next write to wake them again (two engines draining
  // one level-triggered eventfd could take each other's wake-up). While an
  // engine spins, the host's writes cost the host a syscall and nobody a
  // wake-up.
  const int host_db = w->dma ? doorbell_.get() : -1;
  if (host_db >= 0) watch(host_db, EPOLLIN | EPOLLET);
  // An event from epoll_wait: level-triggered fds are drained; true when it
  // means work (`counts` false: a host doorbell edge that only needs taking).
  auto take = [&](bool counts, const epoll_event& ev) {
    if (ev.data.fd != host_db) {
      drain(ev.data.fd);
      return counts;
    }
    return counts && dma_[w->index]->serves_host();
  };
  // Spinning after work saves the next batch a wake-up (tens of
  // microseconds when the host CPU was idle), but only while the CPU is one
  // nobody else wants: on an oversubscribed host the spin holds off the very
  // thread that would bring the next batch (measured on 2 loaded cores: 64 B
  // descriptors 1.6 M/s with a 50 us spin, 5.9 M/s without, and a higher
  // latency too). So after this thread is preempted, working or spinning,
  // it does not spin for kSpinBackoffNs: it sleeps as soon as it runs out
  // of work.
  uint64_t last_work = 0, last_check = 0, no_spin_until = 0;
  long preempt_mark = preemptions();
  bool backing_off = false;
  auto preempted = [&](uint64_t now) {
    last_check = now;
    const long p = preemptions();
    if (p == preempt_mark) return false;
    preempt_mark = p;
    no_spin_until = now + kSpinBackoffNs;
    backing_off = true;
    return true;
  };
  // While backing off there is nothing to look for; the backoff ends with
  // a fresh count.
  auto may_spin = [&](uint64_t now) {
    if (now < no_spin_until) return false;
    if (backing_off) {
      backing_off = false;
      last_check = now;
      preempt_mark = preemptions();
    }
    return true;
  };
  while (!stop_.load()) {
    const uint32_t epoch = reset_epoch_.load(std::memory_order_acquire);
    if (epoch != w->reset_seen) {
      reset_model(w);
      w->reset_seen = epoch;
      std::lock_guard<std::mutex> lock(mu_);
      ++acked_;
      cv_.notify_all();
      continue;
    }
    if (pass(w)) {
      last_work = monotonic_ns();
      continue;
    }
    const uint64_t now = monotonic_ns();
    if (now - last_work < spin_ns_ && may_spin(now)) {
      if (now - last_check < kPreemptCheckNs || !preempted(now)) {
        __builtin_ia32_pause();
        continue;
      }
    }
    // Sleep. Host doorbell edges from while we spun are taken first, then
    // the rings are re-checked (covering what those edges announced), so a
    // doorbell rung after the check is an edge the wait below returns on.
    // A wake-up or chip doorbell already pending ends the sleep at once.
    epoll_event evs[3];
    bool woken = false;
    for (int i = 0, n = epoll_wait(ep.get(), evs, 3, 0); i < n; ++i) woken |= take(evs[i].data.fd != host_db, evs[i]);
    if (woken || has_work(w) || stop_.load() || reset_epoch_.load() != w->reset_seen) {
      if (woken) last_work = monotonic_ns();
      continue;
    }
    if (!backing_off) preempted(now);
    const int n = epoll_wait(ep.get(), evs, 3, -1);
    // A doorbell or a wake-up is work arriving: spin after it as after work, so
    // the batch that follows a first descriptor finds the engine awake. A
    // host doorbell is no work for an engine that serves no host queue.
    for (int i = 0; i < n; ++i) woken |= take(true, evs[i]);
    if (woken) last_work = monotonic_ns();
  }
}

void ChipHw::control_vector() {
  drain(control_fd());
  const uint32_t req = load_acquire(&mem_.control()->reset_req);
  if (req != fw_reset_seen_) {
    reset();
    return;
  }
  // MPU update or fault injection: every engine refreshes on its next pass.
  for (auto& w : workers_) poke(w->wake.get());
  if (link_thread_ != nullptr) link_thread_->kick();
}

void ChipHw::set_links(LinkFabric* fabric, LinkFabricThread* thread) {
  links_ = fabric;
  link_thread_ = thread;
}

void ChipHw::heartbeat() {
  engine::ControlBlock* c = mem_.control();
  store_release(&c->heartbeat, c->heartbeat.value + 1);
}

uint64_t ChipHw::reset() {
  const uint64_t t0 = monotonic_ns();
  // Out of the link fabric first: from here nothing of it writes this chip.
  if (links_ != nullptr) links_->begin_reset(id_);
  {
    std::unique_lock<std::mutex> lock(mu_);
    acked_ = 0;
    reset_epoch_.fetch_add(1, std::memory_order_acq_rel);
    for (auto& w : workers_) poke(w->wake.get());
    cv_.wait(lock, [&] { return acked_ == workers_.size(); });
  }
  // Every engine is idle at index 0 now; the shared blocks restart.
  errors_->reset();
  engine::MpuBlock* mpu = mem_.mpu();
  memset(mpu, 0, sizeof *mpu);
  engine::ControlBlock* c = mem_.control();
  store_release(&c->error_irq_armed, 0);
  write_id();
  // Back in the fabric (kCapLinkEngines, link_ports) before the ack.
  if (links_ != nullptr) links_->end_reset(id_);
  fw_reset_seen_ = load_acquire(&c->reset_req);
  store_release(&c->reset_ack, fw_reset_seen_);
  ++resets_;
  if (link_thread_ != nullptr) link_thread_->kick();
  return monotonic_ns() - t0;
}

bool ChipHw::accept_peer(std::string* err) {
  drv::Error e = server_.accept_peer();
  if (!e.ok()) *err = e.detail();
  return e.ok();
}

void ChipHw::peer_gone() {
  server_.drop_peer();
  // The chip's QEMU is gone: nothing may keep writing its memory.
  reset();
}

}  // namespace vtrn::hw
