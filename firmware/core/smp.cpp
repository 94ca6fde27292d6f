// fw::smp implementation: PSCI CPU_ON for each secondary core, the per-core
// context it starts from, the secondary's C entry, and SGI wake-ups. See
// fw/smp.h.
//
// Ordering: core 0 writes a core's SecondaryBoot record and TLS copy, cleans
// them to the point of coherency (the secondary reads them with its MMU and
// caches still off), then calls CPU_ON. The secondary publishes "online"
// with a release store after its MMU, GIC interface and SGIs are set up;
// core 0 reads it with acquire. Boot does not wait for them: under TCG on a
// loaded host a vCPU thread can take tens of milliseconds to be scheduled,
// and nothing before READY needs a secondary.
#include "fw/smp.h"

#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/exceptions.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "hal/gic.h"
#include "hal/mmio.h"

extern "C" {
// boot/firmware.ld
extern char __secondary_stacks_start[];
extern char __secondary_stacks_end[];
extern char __secondary_stack_size[];
extern char __secondary_exception_stack_size[];
extern char __tls_base[];
extern char __tbss_start[];
extern char __tbss_end[];
extern char __arm64_tls_tcb_offset[];
extern char __tls_align[];
// boot/start.S
void _secondary_start();
}

namespace fw::smp {

// What _secondary_start reads (offsets are ABI with boot/start.S).
struct alignas(64) SecondaryBoot {
  uint64_t exception_sp;  // +0
  uint64_t sp;            // +8
  uint64_t tp;            // +16 TPIDR_EL0: picolibc's TLS pointer
  uint64_t core;          // +24 TPIDR_EL1: the core index
};
static_assert(offsetof(SecondaryBoot, exception_sp) == 0);
static_assert(offsetof(SecondaryBoot, sp) == 8);
static_assert(offsetof(SecondaryBoot, tp) == 16);
static_assert(offsetof(SecondaryBoot, core) == 24);

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kStackBytes = 32 * 1024;      // ABI with boot/firmware.ld
constexpr uint64_t kExceptionBytes = 8 * 1024;
constexpr uint64_t kBlockBytes = kPage + kStackBytes + kPage + kExceptionBytes;
constexpr size_t kTlsBytes = 512;

// PSCI 0.2+ function ids (SMC64 calling convention) and return codes.
constexpr uint64_t kPsciCpuOn = 0xC4000003;
constexpr int64_t kPsciSuccess = 0;
constexpr int64_t kPsciAlreadyOn = -4;

SecondaryBoot g_boot[kMaxCores];
alignas(64) uint8_t g_tls[kMaxCores][kTlsBytes];
uint32_t g_online[kMaxCores];  // written by the core itself (release)
hal::gic::Gic* g_gic = nullptr;
uintptr_t g_gicd = 0;
Entry g_entry = nullptr;
uint64_t g_started_ns[kMaxCores];
uint64_t g_online_ns[kMaxCores];  // written by the core itself, before g_online
uint64_t g_mpidr[kMaxCores];
uint32_t g_requested = 1;  // cores 0..g_requested-1 were started
uint32_t g_reported = 1;   // cores whose online (or timeout) has been logged
uint32_t g_timer_ppi = 0;

uintptr_t sym(const char* p) { return reinterpret_cast<uintptr_t>(p); }

int64_t psci_call(platform::PsciMethod method, uint64_t fn, uint64_t a1, uint64_t a2,
                  uint64_t a3) {
  register uint64_t x0 asm("x0") = fn;
  register uint64_t x1 asm("x1") = a1;
  register uint64_t x2 asm("x2") = a2;
  register uint64_t x3 asm("x3") = a3;
  // SMCCC: x4-x17 may be clobbered by the callee (SMCCC v1.0 rules).
  if (method == platform::PsciMethod::kSmc) {
    asm volatile("smc #0"
                 : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3)::"x4", "x5", "x6", "x7", "x8", "x9",
                   "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17", "memory");
  } else {
    asm volatile("hvc #0"
                 : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3)::"x4", "x5", "x6", "x7", "x8", "x9",
                   "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17", "memory");
  }
  return int64_t(x0);
}

// The secondary reads these with its caches off.
void clean_to_poc(const void* p, size_t n) {
  const uintptr_t end = uintptr_t(p) + n;
  for (uintptr_t a = uintptr_t(p) & ~uintptr_t(63); a < end; a += 64) {
    asm volatile("dc cvac, %0" ::"r"(a) : "memory");
  }
  asm volatile("dsb sy" ::: "memory");
}

void on_wake(uint32_t, void*) {}

void on_stop(uint32_t, void*) { panic_park_this_core(); }

void send_sgi(uint32_t filter, uint32_t mask, uint32_t intid) {
  if (!g_gicd) return;
  auto* d = hal::mmio::block_at<hal::gic::GicdRegs>(g_gicd);
  // The wake condition is published before the SGI can arrive.
  asm volatile("dsb ish" ::: "memory");
  hal::mmio::write32(&d->SGIR, (filter << 24) | ((mask & 0xff) << 16) | (intid & 0xf));
}

}  // namespace

CoreStacks stacks_of(uint32_t core) {
  const uint64_t block = sym(__secondary_stacks_start) + uint64_t(core - 1) * kBlockBytes;
  CoreStacks s;
  s.guard = block;
  s.top = block + kPage + kStackBytes;
  s.exception_guard = s.top;
  s.exception_top = s.exception_guard + kPage + kExceptionBytes;
  return s;
}

uint32_t guard_pages(uint64_t* out, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t core = 1; core < kMaxCores && n + 2 <= cap; ++core) {
    const CoreStacks s = stacks_of(core);
    out[n++] = s.guard;
    out[n++] = s.exception_guard;
  }
  return n;
}

uint32_t this_core() {
  uint64_t v;
  asm volatile("mrs %0, tpidr_el1" : "=r"(v));
  return uint32_t(v) < kMaxCores ? uint32_t(v) : 0;
}

bool online(uint32_t core) {
  if (core == 0) return true;
  return core < kMaxCores && __atomic_load_n(&g_online[core], __ATOMIC_ACQUIRE) != 0;
}

void wake(uint32_t mask) {
  mask &= ~(1u << this_core());
  if (mask) send_sgi(0, mask, kSgiWake);
}

void stop_others() { send_sgi(1, 0, kSgiStop); }

uint32_t start(const platform::Platform& p, hal::gic::Gic* gic, uint32_t cores, Entry entry) {
  g_gic = gic;
  g_gicd = uintptr_t(p.gicd_base);
  g_entry = entry;
  g_timer_ppi = p.virt_timer_intid;
  irq::register_handler(kSgiWake, on_wake, nullptr);
  irq::register_handler(kSgiStop, on_stop, nullptr);
  // SGI enables are banked: this enables them on core 0 only.
  (void)gic->enable(kSgiWake);
  (void)gic->enable(kSgiStop);

  const uint64_t block_check =
      sym(__secondary_stack_size) + sym(__secondary_exception_stack_size) + 2 * kPage;
  FW_CHECK(block_check == kBlockBytes, "smp: secondary stack sizes differ from firmware.ld");
  FW_CHECK(sym(__secondary_stacks_end) - sym(__secondary_stacks_start) ==
               (kMaxCores - 1) * kBlockBytes,
           "smp: secondary stack area is not %u blocks", unsigned(kMaxCores - 1));
  if (cores > p.cpu_count) cores = p.cpu_count;
  if (cores > kMaxCores) cores = kMaxCores;
  if (cores <= 1) return 1;
  if (p.psci_method == platform::PsciMethod::kNone || !p.cpus_use_psci) {
    log(kLogWarn, "smp: no PSCI in the platform DTB: running on core 0 only");
    return 1;
  }

  // picolibc's TLS block: .tdata (template) then .tbss (zeros).
  const size_t tls_size = sym(__tbss_end) - sym(__tls_base);
  const size_t tdata_size = sym(__tbss_start) - sym(__tls_base);
  const uint64_t tls_align = sym(__tls_align);
  FW_CHECK(tls_size <= kTlsBytes && tls_align <= 64,
           "smp: TLS block of %zu bytes (align %llu) does not fit the per-core copy", tls_size,
           (unsigned long long)tls_align);

  const uint64_t entry_pa = reinterpret_cast<uintptr_t>(&_secondary_start);
  mmu::share_with_secondaries();
  for (uint32_t c = 1; c < cores; ++c) {
    memset(g_tls[c], 0, kTlsBytes);
    memcpy(g_tls[c], __tls_base, tdata_size);
    const CoreStacks s = stacks_of(c);
    g_boot[c].exception_sp = s.exception_top;
    g_boot[c].sp = s.top;
    g_boot[c].tp = reinterpret_cast<uintptr_t>(g_tls[c]) - sym(__arm64_tls_tcb_offset);
    g_boot[c].core = c;
    clean_to_poc(&g_boot[c], sizeof g_boot[c]);
    clean_to_poc(g_tls[c], kTlsBytes);
    g_started_ns[c] = arch::now_ns();
    g_mpidr[c] = p.cpu_mpidr[c];
    const int64_t rc = psci_call(p.psci_method, kPsciCpuOn, p.cpu_mpidr[c], entry_pa,
                                 reinterpret_cast<uintptr_t>(&g_boot[c]));
    if (rc != kPsciSuccess && rc != kPsciAlreadyOn) {
      log(kLogErr, "smp: PSCI CPU_ON for core %u (mpidr 0x%llx) failed: %lld", unsigned(c),
          (unsigned long long)p.cpu_mpidr[c], (long long)rc);
    }
  }

  log(kLogInfo, "smp: CPU_ON sent to %u cores in %llu us", unsigned(cores - 1),
      (unsigned long long)((arch::now_ns() - g_started_ns[1]) / 1000));
  g_requested = cores;
  return cores;
}

uint32_t collect_online(uint64_t timeout_ns) {
  uint32_t mask = 1;
  const uint64_t now = arch::now_ns();
  for (uint32_t c = 1; c < g_requested; ++c) {
    if (online(c)) {
      mask |= 1u << c;
      if (!(g_reported & (1u << c))) {
        g_reported |= 1u << c;
        log(kLogInfo, "smp: core %u online (mpidr 0x%llx), %llu us after CPU_ON", unsigned(c),
            (unsigned long long)g_mpidr[c],
            (unsigned long long)((g_online_ns[c] - g_started_ns[c]) / 1000));
      }
    } else if (!(g_reported & (1u << c)) && now - g_started_ns[c] > timeout_ns) {
      g_reported |= 1u << c;
      log(kLogErr, "smp: core %u (mpidr 0x%llx) did not come online within %llu ms", unsigned(c),
          (unsigned long long)g_mpidr[c], (unsigned long long)(timeout_ns / 1000000));
    }
  }
  return mask;
}

bool all_reported() {
  for (uint32_t c = 1; c < g_requested; ++c) {
    if (!(g_reported & (1u << c))) return false;
  }
  return true;
}

}  // namespace fw::smp

// C entry of a secondary core (from _secondary_start, on its own stacks).
extern "C" [[noreturn]] void fw_secondary_main(fw::smp::SecondaryBoot* boot) {
  asm volatile(".cfi_undefined x30");  // outermost frame: see fw_main
  using namespace fw;
  const uint32_t core = uint32_t(boot->core);
  mmu::enable_this_core();
  // The banked half of the GIC: this core's CPU interface and SGI enables.
  if (smp::g_gic) {
    (void)smp::g_gic->init_cpu_interface();
    (void)smp::g_gic->enable(smp::kSgiWake);
    (void)smp::g_gic->enable(smp::kSgiStop);
    // The virtual timer PPI lets fw::power::pace sleep in WFI on this
    // core's own timer; pace keeps the timer disabled whenever IRQs are
    // unmasked, so the PPI is never taken here.
    if (smp::g_timer_ppi) (void)smp::g_gic->enable(smp::g_timer_ppi);
  }
  smp::g_online_ns[core] = arch::now_ns();
  __atomic_store_n(&smp::g_online[core], 1u, __ATOMIC_RELEASE);
  smp::wake(1u);  // core 0 logs the arrival and hands the core work
  smp::g_entry(core);
  panic(vtrn::hostif::kPanicAssert, "smp: core %u's entry function returned", unsigned(core));
}
