// dma_engine_bench: vtrn-hw's DMA engines as the host will see them once
// they are the default, against native memcpy in the same run. In process,
// but every piece is the real one: the chip's RAM and BAR2 are sparse memfds
// (as the launcher creates them), vtrn::hw::ChipHw maps them and runs its
// engine threads (spinning after work only while nobody else wants the CPU,
// blocking on eventfds when idle), the host is libvtrn's drv::DmaEngine over
// BAR2 (submit, one doorbell per refill, completion eventfd, reap, collect),
// and this process plays the firmware (BAR2 layout and DMA region header, the
// engine's DmaConfig, an MPU table of 16 windows so every HBM range is
// checked). Not a correctness test beyond every completion's status and the
// bytes the last descriptor of each run moved.
//
// Cases, as `vtrn dma bench` runs them in tests/bench/dma/dma_bench.py:
// host -> HBM, HBM -> host, HBM -> HBM at 1 and 4 MiB (8 in flight, batches
// of 4, an interrupt per batch); 64 B host -> HBM descriptors in batches of
// 32 with 128 in flight (an interrupt per batch, as vtrnd asks for with 4
// batches in flight); and the round trip of single 64 B descriptors. HBM
// addresses cycle through the bench's allocation (--hbm-mib, default 256 MiB
// as the dev boards, so more than the 32 MiB L3; --span-mib to shrink it);
// HBM -> HBM copies its lower half to its upper half; the host side is one
// transfer-sized window buffer, as vtrnd's bench allocates. Addresses facing
// each other are skewed by 17 pages (vtrnd's kBenchSkew). The host sleeps on
// the completion eventfd whenever nothing completed (vtrnd's event loop
// does), or polls for --host-spin-us first.
//
// The reference: memcpy on the host thread of exactly the same (src, dst)
// pairs in the same order through the engine's own mappings, with the
// engine thread asleep, so buffer sizes, placement, 4 KiB shmem pages and
// cache state are the engine's (by default streaming: every copy misses the
// caches on one side at least). Engine and reference runs alternate
// (--trials, default 3, of --seconds each, default 0.5) and each side keeps
// its best, so a burst of load from other processes does not land on one
// side only.
//
// Before the cases one warm-up pass writes the allocation through the
// engine: the first touch of a page of a sparse memfd is a page fault
// (allocate and zero 4 KiB) that real HBM never takes; its rate and fault
// count get their own line, and each case prints its faults (0 once warm).
// On a shared machine a figure means little without the load behind it, so
// the bench prints /proc/loadavg and, per case, the CPU time its threads got
// (on_cpu, in CPUs) and the time they were runnable but waited for a CPU
// (runq_wait, from /proc/self/task/*/schedstat); cpu_ns_per_desc is CPU time
// (host, engine and kernel) per 64 B descriptor. Last, the CPU time of one
// idle second (the engine asleep) is printed.
//
// Goals (issue 13): copies >= 0.5x memcpy; >= 5 M descriptors/s. Printed,
// not asserted.
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "vtrn/drv/dma_engine.h"
#include "vtrn/drv/fd.h"
#include "vtrn/hw/chip.h"
#include "vtrn/layout.h"

using namespace vtrn;

namespace {

constexpr uint64_t kRamBase = 0x40000000;
constexpr uint64_t kFwBytes = 64u << 20;  // firmware part of RAM, below HBM
constexpr uint64_t kBar2Bytes = 16u << 20;
constexpr uint32_t kQueues = 4;
constexpr uint32_t kDepth = 256;
constexpr uint64_t kSkew = 17 * 4096;
constexpr uint32_t kMpuOthers = 14;  // live allocations besides the bench's span
constexpr uint64_t kOtherBytes = 1u << 20;
constexpr uint32_t kWarmPiece = 4u << 20;
constexpr size_t kLatencySamples = 100000;

[[noreturn]] void die(const std::string& m) {
  fprintf(stderr, "dma_engine_bench: %s\n", m.c_str());
  exit(2);
}

void print_loadavg(const char* when) {
  char buf[128] = {};
  FILE* f = fopen("/proc/loadavg", "r");
  if (f && fgets(buf, sizeof buf, f)) buf[strcspn(buf, "\n")] = 0;
  if (f) fclose(f);
  printf("dma_engine loadavg_%s=\"%s\"\n", when, buf);
}

// Summed over this process's threads: minor faults, time on a CPU, and time
// runnable but waiting for one (/proc/self/task/*/schedstat), which says
// how much of a figure other processes took.
struct Usage {
  long minor_faults = 0;
  double cpu_s = 0;
  double runq_s = 0;
};

Usage usage() {
  Usage u;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  u.minor_faults = ru.ru_minflt;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/schedstat";
    unsigned long long run = 0, wait = 0;
    if (FILE* f = fopen(path.c_str(), "r")) {
      if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
        u.cpu_s += double(run) / 1e9;
        u.runq_s += double(wait) / 1e9;
      }
      fclose(f);
    }
  }
  if (d) closedir(d);
  return u;
}

int memfd(const char* name, uint64_t bytes) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) die(std::string("memfd ") + name + ": " + strerror(errno));
  return fd;
}

struct Options {
  double seconds = 0.5;
  int trials = 3;
  uint64_t hbm_mib = 256;
  uint64_t span_mib = 0;  // 0: all of the bench's allocation
  uint64_t spin_us = 50;
  uint64_t host_spin_us = 0;
  std::string only;  // run only the cases whose name starts with this
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      die("usage: dma_engine_bench [--seconds S] [--trials N] [--hbm-mib M] [--span-mib M] [--spin-us U] "
          "[--host-spin-us U] [--case PREFIX]");
    const char* v = argv[++i];
    if (a == "--seconds") {
      o.seconds = atof(v);
    } else if (a == "--trials") {
      o.trials = atoi(v);
    } else if (a == "--hbm-mib") {
      o.hbm_mib = strtoull(v, nullptr, 0);
    } else if (a == "--span-mib") {
      o.span_mib = strtoull(v, nullptr, 0);
    } else if (a == "--spin-us") {
      o.spin_us = strtoull(v, nullptr, 0);
    } else if (a == "--host-spin-us") {
      o.host_spin_us = strtoull(v, nullptr, 0);
    } else if (a == "--case") {
      o.only = v;
    } else {
      die("unknown option " + a);
    }
  }
  if (o.seconds <= 0 || o.trials < 1 || o.hbm_mib < 32 || o.hbm_mib > 4096 || (o.span_mib && o.span_mib < 10))
    die("option out of range (--hbm-mib 32..4096, --span-mib >= 10)");
  return o;
}

// The board: RAM and BAR2 memfds mapped here (the firmware's and the host's
// views), one ChipHw with the engines, the host's libvtrn DmaEngine.
class Board {
 public:
  explicit Board(const Options& o) : hbm_bytes_(o.hbm_mib << 20) {
    const uint64_t ram_bytes = kFwBytes + hbm_bytes_;
    drv::UniqueFd ram(memfd("vtrn-bench-ram", ram_bytes)), bar2(memfd("vtrn-bench-bar2", kBar2Bytes));
    if (!bar2_map_.map(bar2.get(), kBar2Bytes).ok()) die("mmap");
    doorbell_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    host_irq_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!doorbell_ || !host_irq_) die("eventfd");
    publish_bar2();
    std::string err;
    props_.dma_engines = 1;
    props_.tensor_engines = 0;
    props_.dma_bytes_per_s = 100ull * 1000000000ull;
    hw::ChipFds f;
    f.id = 0;
    f.ram_fd = ram.release();
    f.ram_base = kRamBase;
    f.bar2_fd = bar2.release();
    f.doorbell_fd = dup(doorbell_.get());
    f.host_irq_fd = dup(host_irq_.get());
    f.socket = sock_dir() + "/engines.sock";
    if (!chip_.start(f, props_, o.spin_us * 1000, &err)) die("ChipHw: " + err);
    configure_engine();
    drv::DmaEngine::Hooks hooks;
    hooks.irq_fd = host_irq_.get();
    const int db = doorbell_.get();
    hooks.ring_chip = [db] {
      const uint64_t one = 1;
      (void)!write(db, &one, sizeof one);
    };
    if (const drv::Error e = host_.attach(bar2_map_.data(), layout_, hooks); !e.ok()) die("attach: " + e.detail());
    host_.arm_irq(true);
  }

  ~Board() {
    host_.detach();
    chip_.stop();
    unlink((sock_dir_ + "/engines.sock").c_str());
    rmdir(sock_dir_.c_str());
  }

  drv::DmaEngine& host() { return host_; }
  [[nodiscard]] uint64_t hbm_base() const { return kRamBase + kFwBytes; }
  // The bench's allocation: HBM above the other allocations, in whole
  // 4 MiB (the warm-up's pieces), below the retired page.
  [[nodiscard]] uint64_t span_base() const { return hbm_base() + kMpuOthers * kOtherBytes; }
  [[nodiscard]] uint64_t span_bytes() const {
    return (hbm_bytes_ - kMpuOthers * kOtherBytes - 4096) & ~uint64_t(kWarmPiece - 1);
  }
  // The engines' own mappings: the reference copies through the very
  // addresses the engine copies through.
  [[nodiscard]] uint8_t* ram(uint64_t a) const { return chip_.memory().ram + (a - kRamBase); }
  [[nodiscard]] uint8_t* window(uint64_t off) const {
    return chip_.memory().bar2 + layout_.at(hostif::kRegionHostWindow).offset + off;
  }
  [[nodiscard]] int host_irq_fd() const { return host_irq_.get(); }

 private:
  std::string sock_dir() {
    char tmpl[] = "/tmp/dma-engine-bench-XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    sock_dir_ = tmpl;
    return sock_dir_;
  }

  // The firmware's half of BAR2: header with the region table, DMA region.
  void publish_bar2() {
    auto* hdr = reinterpret_cast<hostif::FwHeader*>(bar2_map_.data());
    hdr->magic = hostif::kMagic;
    hdr->abi_major = hostif::kAbiMajor;
    hdr->abi_minor = hostif::kAbiMinor;
    hdr->bar2_size = kBar2Bytes;
    if (!hostif::publish_layout(hdr, kBar2Bytes, kQueues, kDepth)) die("publish_layout");
    if (const vtrn::Error e = hostif::validate_layout(*hdr, kBar2Bytes, &layout_); !e.ok()) die(e.detail());
    dma::DmaRegionHeader h{};
    h.version = dma::kDmaRegionVersion;
    h.queue_count = kQueues;
    h.depth = kDepth;
    h.max_desc_bytes = dma::kMaxDescBytes;
    h.queue_stride = dma::queue_stride(kDepth);
    h.hbm_base = hbm_base();
    h.hbm_size = hbm_bytes_;
    h.max_chain_descs = dma::kMaxChainDescs;
    memcpy(bar2_map_.data() + layout_.at(hostif::kRegionDma).offset, &h, sizeof h);
  }

  void ring_engine(uint16_t vector) {
    const uint64_t one = 1;
    (void)!write(chip_.chip_doorbell_fd(vector), &one, sizeof one);
  }

  // The firmware's half of the engine region: the MPU (the bench's span is
  // one live allocation among others, a retired page above it) and the
  // engine's host queues.
  void configure_engine() {
    const hw::ChipMemory& m = chip_.memory();
    engine::MpuBlock* mpu = m.mpu();
    const uint32_t gen = 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < kMpuOthers; ++i)
      mpu->bank[gen & 1][n++] =
          engine::MpuWindow{hbm_base() + i * kOtherBytes, kOtherBytes, engine::kMpuValid, i + 1, 0};
    mpu->bank[gen & 1][n++] = engine::MpuWindow{span_base(), span_bytes(), engine::kMpuValid, 100, 0};
    mpu->bank[gen & 1][n++] = engine::MpuWindow{span_base() + span_bytes(), 4096,
                                                engine::kMpuValid | engine::kMpuPoison, 101, 0};
    __atomic_store_n(&mpu->bank_count[gen & 1], n, __ATOMIC_RELEASE);
    __atomic_store_n(&mpu->header.count.value, n, __ATOMIC_RELEASE);
    __atomic_store_n(&mpu->header.generation.value, gen, __ATOMIC_RELEASE);

    engine::DmaConfig c{};
    c.host_queue_mask = (1u << kQueues) - 1;
    c.dma_region_offset = layout_.at(hostif::kRegionDma).offset;
    c.queue_count = kQueues;
    c.depth = kDepth;
    c.host_window_offset = layout_.at(hostif::kRegionHostWindow).offset;
    c.host_window_size = layout_.at(hostif::kRegionHostWindow).size;
    c.hbm_base = hbm_base();
    c.hbm_size = hbm_bytes_;
    engine::DmaEngineBlock* b = m.dma(0);
    memcpy(&b->config, &c, sizeof c);
    __atomic_store_n(&b->config.config_gen, 1u, __ATOMIC_RELEASE);
    ring_engine(uint16_t(engine::kVectorDma0));
    while (__atomic_load_n(&b->config_ack, __ATOMIC_ACQUIRE) != 1 ||
           __atomic_load_n(&mpu->header.dma_ack[0].value, __ATOMIC_ACQUIRE) != gen) {
      usleep(100);
      ring_engine(uint16_t(engine::kVectorDma0));
    }
    if (b->config_status != engine::kEngineOk) die("engine refused the config: " + std::to_string(b->config_status));
  }

  uint64_t hbm_bytes_;
  drv::Mapping bar2_map_;
  drv::UniqueFd doorbell_, host_irq_;
  hostif::Layout layout_;
  hw::EngineProps props_;
  hw::ChipHw chip_;
  drv::DmaEngine host_;
  std::string sock_dir_;
};

// One direction and size: descriptor i of a run copies src(i) -> dst(i).
struct Case {
  const char* name;
  uint32_t size;
  uint32_t depth;
  uint32_t batch;
  bool src_host, dst_host;
  uint64_t src_base, dst_base;  // HBM address or window offset of slot 0
  uint64_t src_stride, dst_stride;  // 0: the same buffer every time
  uint64_t slots;
};

struct RunResult {
  double seconds = 0;
  uint64_t descriptors = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  uint64_t last = 0;  // index of the last descriptor completed
  double p50_us = 0, p99_us = 0;  // submit -> reaped, over the first kLatencySamples chains
};

class Runner {
 public:
  // The latency samples are written once here, so no run takes page
  // faults on them.
  Runner(Board& b, uint64_t host_spin_ns) : b_(b), host_spin_ns_(host_spin_ns), latency_ns_(kLatencySamples, 0) {}

  // Engine: batches of c.batch chains, c.depth descriptors in flight, an
  // interrupt on each batch's last chain; the host reaps when the ring is
  // full and sleeps on the completion eventfd when nothing completed. Stops
  // issuing after `secs` or `limit` descriptors.
  RunResult engine(const Case& c, double secs, uint64_t* cursor, uint64_t limit = UINT64_MAX) {
    drv::DmaEngine& e = b_.host();
    std::vector<drv::DmaSegment> segs(c.batch);
    std::vector<drv::DmaChain> chains(c.batch);
    std::vector<uint64_t> handles(c.batch);
    std::vector<drv::DmaResult> done;
    done.reserve(kDepth);
    RunResult r;
    size_t samples = 0;
    uint64_t in_flight = 0, issued = *cursor;
    const uint64_t first = issued;
    const uint64_t t0 = hw::monotonic_ns(), until = t0 + uint64_t(secs * 1e9);
    bool open = true;
    uint64_t last_done = t0;
    while (open || in_flight) {
      // One doorbell per refill, however many batches it submits (vtrnd's
      // loop turn does the same).
      e.hold_doorbell();
      while (open && in_flight + c.batch <= c.depth) {
        for (uint32_t i = 0; i < c.batch; ++i) {
          const uint64_t k = (issued + i) % c.slots;
          segs[i] = drv::DmaSegment{c.src_base + k * c.src_stride, c.dst_base + k * c.dst_stride, c.size, c.src_host,
                                    c.dst_host};
          chains[i] = drv::DmaChain{&segs[i], 1, i + 1 == c.batch};
        }
        const drv::DmaError err = e.submit(0, chains.data(), c.batch, handles.data());
        if (err != drv::DmaError::kOk) die(std::string("submit: ") + drv::dma_error_name(err));
        issued += c.batch;
        in_flight += c.batch;
        if (hw::monotonic_ns() >= until || issued - first >= limit) open = false;
      }
      e.release_doorbell();
      e.poll(0);
      done.clear();
      e.collect(&done);
      for (const drv::DmaResult& d : done) {
        r.errors += d.status != dma::kOk;
        r.bytes += d.bytes;
        if (samples < kLatencySamples) latency_ns_[samples++] = d.latency_ns;
      }
      r.descriptors += done.size();
      in_flight -= done.size();
      if (!done.empty()) last_done = hw::monotonic_ns();
      if (done.empty() && in_flight && hw::monotonic_ns() - last_done >= host_spin_ns_) {
        pollfd p{b_.host_irq_fd(), POLLIN, 0};
        if (poll(&p, 1, 1) > 0) {
          uint64_t v;
          (void)!read(b_.host_irq_fd(), &v, sizeof v);
        }
      }
    }
    r.seconds = double(hw::monotonic_ns() - t0) / 1e9;
    r.last = first + r.descriptors - 1;
    *cursor = issued;
    std::sort(latency_ns_.begin(), latency_ns_.begin() + samples);
    auto at = [&](double q) { return samples ? double(latency_ns_[size_t(q * double(samples - 1))]) / 1e3 : 0; };
    r.p50_us = at(0.5);
    r.p99_us = at(0.99);
    return r;
  }

  // Reference: the same pairs, memcpy on this thread.
  RunResult reference(const Case& c, double secs, uint64_t* cursor) {
    RunResult r;
    const uint64_t t0 = hw::monotonic_ns(), until = t0 + uint64_t(secs * 1e9);
    uint64_t k = *cursor;
    while (hw::monotonic_ns() < until) {
      for (uint32_t i = 0; i < c.batch; ++i, ++k) {
        memcpy(dst(c, k), src(c, k), c.size);
        asm volatile("" : : "r"(dst(c, k)) : "memory");
      }
      r.descriptors += c.batch;
    }
    r.seconds = double(hw::monotonic_ns() - t0) / 1e9;
    r.bytes = r.descriptors * c.size;
    r.last = k - 1;
    *cursor = k;
    return r;
  }

  uint8_t* src(const Case& c, uint64_t k) const { return ptr(c.src_host, c.src_base + (k % c.slots) * c.src_stride); }
  uint8_t* dst(const Case& c, uint64_t k) const { return ptr(c.dst_host, c.dst_base + (k % c.slots) * c.dst_stride); }

 private:
  uint8_t* ptr(bool host, uint64_t a) const { return host ? b_.window(a) : b_.ram(a); }

  Board& b_;
  uint64_t host_spin_ns_;
  std::vector<uint64_t> latency_ns_;
};

// Stamps every HBM slot and the host buffer with distinct bytes, so the
// check after a run fails unless the last descriptor really moved its bytes.
void stamp(const Case& c, Runner& run, uint64_t seed) {
  for (uint64_t k = 0; k < c.slots; ++k) {
    uint64_t v = seed * 1000003 + k * 2 + 1;
    memcpy(run.src(c, k), &v, sizeof v);
    v += 1u << 30;
    memcpy(run.dst(c, k), &v, sizeof v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  print_loadavg("start");
  Board b(o);
  drv::DmaEngine& e = b.host();
  drv::DmaBuffer buf;
  if (e.alloc(4u << 20, &buf) != drv::DmaError::kOk) die("no 4 MiB host window buffer");
  for (uint64_t i = 0; i < buf.bytes; ++i) buf.ptr[i] = uint8_t(i * 31 + 7);
  Runner run(b, o.host_spin_us * 1000);
  const uint64_t hbm = b.span_base();
  const uint64_t span = o.span_mib ? std::min(b.span_bytes(), o.span_mib << 20) : b.span_bytes();
  int failed = 0;

  {
    // Warm-up: every HBM page written once through the engine.
    const Case warm{"warmup", kWarmPiece, 8, 4, true, false, buf.offset, hbm, 0, kWarmPiece, span / kWarmPiece};
    uint64_t cursor = 0;
    const Usage u0 = usage();
    const uint64_t t0 = hw::monotonic_ns();
    const RunResult r = run.engine(warm, 1e9, &cursor, warm.slots);
    const double secs = double(hw::monotonic_ns() - t0) / 1e9;
    const long faults = usage().minor_faults - u0.minor_faults;
    if (r.errors) ++failed;
    printf("dma_engine warmup bytes=%llu first_touch_gbps=%.2f minor_faults=%ld faults_per_mib=%.0f errors=%llu\n",
           (unsigned long long)r.bytes, double(r.bytes) / secs / 1e9, faults, double(faults) / double(r.bytes >> 20),
           (unsigned long long)r.errors);
  }

  std::vector<Case> cases;
  for (uint32_t size : {1u << 20, 4u << 20}) {
    const uint64_t slots = (span - kSkew) / size;
    const uint64_t half_slots = (span / 2 - kSkew) / size;
    cases.push_back({"host_to_hbm", size, 8, 4, true, false, buf.offset, hbm + kSkew, 0, size, slots});
    cases.push_back({"hbm_to_host", size, 8, 4, false, true, hbm + kSkew, buf.offset, size, 0, slots});
    cases.push_back({"hbm_to_hbm", size, 8, 4, false, false, hbm, hbm + span / 2 + kSkew, size, size, half_slots});
  }
  cases.push_back({"desc64", 64, 128, 32, true, false, buf.offset, hbm + kSkew, 0, 64, (span - kSkew) / 64});
  cases.push_back({"latency64", 64, 1, 1, true, false, buf.offset, hbm + kSkew, 0, 64, (span - kSkew) / 64});

  uint64_t seed = 1;
  size_t ran = 0;
  for (const Case& c : cases) {
    if (strncmp(c.name, o.only.c_str(), o.only.size()) != 0) continue;
    ++ran;
    stamp(c, run, seed++);
    RunResult best_e, best_r;
    uint64_t ce = 0, cr = 0, errors = 0;
    long faults = 0;
    double cpu_ns_per_desc = 0, cpu_share = 0, runq_share = 0;
    for (int t = 0; t < o.trials; ++t) {
      const Usage u0 = usage();
      const RunResult re = run.engine(c, o.seconds, &ce);
      const Usage u1 = usage();
      faults += u1.minor_faults - u0.minor_faults;
      errors += re.errors;
      const bool better = !best_e.descriptors || re.descriptors / re.seconds > best_e.descriptors / best_e.seconds;
      if (re.descriptors && better) {
        best_e = re;
        cpu_ns_per_desc = (u1.cpu_s - u0.cpu_s) * 1e9 / double(re.descriptors);
        cpu_share = (u1.cpu_s - u0.cpu_s) / re.seconds;
        runq_share = (u1.runq_s - u0.runq_s) / re.seconds;
      }
      if (memcmp(run.dst(c, re.last), run.src(c, re.last), c.size) != 0) {
        fprintf(stderr, "dma_engine_bench: %s %u: descriptor %llu did not move its bytes\n", c.name, c.size,
                (unsigned long long)re.last);
        ++errors;
      }
      // The engine idles (blocks) before the reference runs.
      usleep(useconds_t(o.spin_us + 1000));
      if (c.size > 64) {
        const RunResult rr = run.reference(c, o.seconds, &cr);
        if (!best_r.descriptors || rr.descriptors / rr.seconds > best_r.descriptors / best_r.seconds) best_r = rr;
      }
    }
    if (errors) {
      fprintf(stderr, "dma_engine_bench: %s: %llu completions failed\n", c.name, (unsigned long long)errors);
      ++failed;
    }
    const double rate = best_e.descriptors / best_e.seconds;
    if (c.depth == 1) {
      printf("dma_engine latency desc_bytes=%u p50_us=%.1f p99_us=%.1f round_trips_per_s=%.0f on_cpu=%.2f "
             "runq_wait=%.2f\n",
             c.size, best_e.p50_us, best_e.p99_us, rate, cpu_share, runq_share);
    } else if (c.size > 64) {
      const double eg = double(best_e.bytes) / best_e.seconds / 1e9, rg = double(best_r.bytes) / best_r.seconds / 1e9;
      printf("dma_engine dir=%s size=%u engine_gbps=%.2f memcpy_gbps=%.2f ratio=%.3f on_cpu=%.2f runq_wait=%.2f "
             "minor_faults=%ld\n",
             c.name, c.size, eg, rg, eg / rg, cpu_share, runq_share, faults);
    } else {
      printf("dma_engine desc_bytes=64 batch=%u in_flight=%u descriptors_per_s=%.0f mdesc_per_s=%.2f "
             "cpu_ns_per_desc=%.0f on_cpu=%.2f runq_wait=%.2f minor_faults=%ld\n",
             c.batch, c.depth, rate, rate / 1e6, cpu_ns_per_desc, cpu_share, runq_share, faults);
    }
  }
  {
    // An idle engine must cost nothing: it sleeps on its eventfds.
    const Usage u0 = usage();
    usleep(1000000);
    const Usage u1 = usage();
    printf("dma_engine idle seconds=1 cpu_ms=%.2f\n", (u1.cpu_s - u0.cpu_s) * 1e3);
  }
  (void)e.free(buf);
  print_loadavg("end");
  printf("dma_engine_bench: done cases=%zu failed=%d\n", ran, failed);
  return failed ? 1 : 0;
}
