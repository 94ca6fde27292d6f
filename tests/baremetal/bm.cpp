// bm_main and the support functions of bm.h. The MMU setup is the smallest
// that makes hal_copy_memcpy legal and reaches QEMU virt's PCIe: 1 GiB
// blocks (VA = PA), Device-nGnRnE for MMIO (UART, GIC, PCIe registers and
// ECAM), Normal write-back for RAM and the 64-bit PCI window where ivshmem
// shared memory lands, SCTLR_EL1.A clear. hal_copy_memcpy does unaligned q
// accesses, which fault on Device memory, i.e. with the MMU off.
#include "bm.h"

#include "hal/timer.h"
#include "hal/uart.h"

namespace {

hal::uart::Pl011 g_uart;
hal::timer::Timer g_timer;

// TCR_EL1 with T0SZ = 24 (40 bits of VA, what QEMU virt's high PCIe ECAM
// and 64-bit MMIO window need) starts the 4 KiB-granule walk at level 0:
// entry 0 covers the first 512 GiB through g_l1, entry 1 the next 512 GiB
// (the 64-bit PCI window at 0x80_0000_0000) through g_l1_high.
alignas(4096) uint64_t g_l0[512];
alignas(4096) uint64_t g_l1[512];
alignas(4096) uint64_t g_l1_high[512];

constexpr uint64_t kAttrDevice = 0;  // MAIR index: 0x00 Device-nGnRnE
constexpr uint64_t kAttrNormal = 1;  // MAIR index: 0xff Normal WB RW-allocate
constexpr uint64_t kMair = (0x00ull << (8 * kAttrDevice)) | (0xffull << (8 * kAttrNormal));
constexpr uint64_t kBlock = 1ull << 0;  // valid, block (bit 1 clear)
constexpr uint64_t kTable = 3ull << 0;  // valid, next-level table
constexpr uint64_t kAf = 1ull << 10;
constexpr uint64_t kShInner = 3ull << 8;
constexpr uint64_t kPxn = 1ull << 53;
constexpr uint64_t kUxn = 1ull << 54;
constexpr uint64_t kGiB = 1ull << 30;
// T0SZ 24, walks inner/outer write-back cacheable, inner shareable, 4 KiB
// granule, TTBR1 walks disabled (EPD1), IPS 40 bits.
constexpr uint64_t kTcr = 24 | (1ull << 8) | (1ull << 10) | (3ull << 12) | (1ull << 23) | (2ull << 32);
constexpr uint64_t kSctlrM = 1ull << 0;
constexpr uint64_t kSctlrA = 1ull << 1;
constexpr uint64_t kSctlrC = 1ull << 2;
constexpr uint64_t kSctlrI = 1ull << 12;

uint64_t device_block(uint64_t pa) { return pa | kBlock | kAf | (kAttrDevice << 2) | kPxn | kUxn; }
uint64_t normal_block(uint64_t pa) { return pa | kBlock | kAf | kShInner | (kAttrNormal << 2); }

void mmu_enable() {
  // First GiB: UART, GIC, low PCIe windows (BAR0 registers, MSI-X tables).
  g_l1[0] = device_block(0);
  // RAM from 0x40000000, up to 3 GiB.
  for (uint64_t i = 1; i < 4; ++i) g_l1[i] = normal_block(i * kGiB);
  // High PCIe ECAM (0x40_1000_0000) in the GiB at 0x40_0000_0000.
  g_l1[256] = device_block(256 * kGiB);
  // The first GiB of the 64-bit PCI window: prefetchable BARs, i.e. ivshmem
  // shared memory, which is RAM and mapped as such (unaligned accesses and
  // the optimised copy are legal there).
  g_l1_high[0] = normal_block(512 * kGiB);
  g_l0[0] = reinterpret_cast<uintptr_t>(g_l1) | kTable;
  g_l0[1] = reinterpret_cast<uintptr_t>(g_l1_high) | kTable;
  uint64_t sctlr;
  asm volatile(
      "msr mair_el1, %1\n"
      "msr tcr_el1, %2\n"
      "msr ttbr0_el1, %3\n"
      "dsb ish\n"
      "isb\n"
      "tlbi vmalle1\n"
      "dsb ish\n"
      "isb\n"
      "mrs %0, sctlr_el1\n"
      : "=r"(sctlr)
      : "r"(kMair), "r"(kTcr), "r"(reinterpret_cast<uintptr_t>(g_l0))
      : "memory");
  sctlr = (sctlr | kSctlrM | kSctlrC | kSctlrI) & ~kSctlrA;
  asm volatile("msr sctlr_el1, %0\n isb" : : "r"(sctlr) : "memory");
}

[[noreturn]] void system_off() {
  (void)g_uart.flush();
  register uint64_t x0 asm("x0") = 0x84000008;  // PSCI SYSTEM_OFF
  asm volatile("hvc #0" : "+r"(x0) : : "memory");
  for (;;) asm volatile("wfi");
}

}  // namespace

namespace bm {

void print(const char* s) { (void)g_uart.puts(s); }

void print_u64(uint64_t v) {
  char buf[21];
  int i = 20;
  buf[i] = '\0';
  do {
    buf[--i] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  print(&buf[i]);
}

void print_hex(uint64_t v) {
  char buf[19];
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xF];
  buf[18] = '\0';
  print(buf);
}

void print_milli(uint64_t milli) {
  print_u64(milli / 1000);
  char frac[5] = {'.', char('0' + milli / 100 % 10), char('0' + milli / 10 % 10),
                  char('0' + milli % 10), '\0'};
  print(frac);
}

uint64_t now_ticks() { return g_timer.now(); }
uint64_t ticks_to_ns(uint64_t ticks) { return g_timer.ticks_to_ns(ticks); }

void power_off() { system_off(); }

void arm_wakeup_ns(uint64_t ns) { (void)g_timer.arm_after_ns(ns); }
void disarm_wakeup() { g_timer.disarm(); }

uint64_t midr() {
  uint64_t v;
  asm volatile("mrs %0, midr_el1" : "=r"(v));
  return v;
}

}  // namespace bm

extern "C" [[noreturn]] void bm_exception(uint64_t entry, uint64_t esr, uint64_t elr,
                                          uint64_t far) {
  bm::print("\nEXCEPTION FAIL vector=");
  bm::print_u64(entry);
  bm::print(" esr=");
  bm::print_hex(esr);
  bm::print(" elr=");
  bm::print_hex(elr);
  bm::print(" far=");
  bm::print_hex(far);
  bm::print("\n");
  system_off();
}

extern "C" [[noreturn]] void bm_main() {
  hal::uart::Pl011Config uart{};
  uart.base = bm::kUartBase;
  uart.clock_hz = bm::kUartClockHz;
  // Nothing can be reported without a console; power off so QEMU exits and
  // the test fails on missing output instead of timing out.
  if (g_uart.init(uart) != hal::Status::kOk)
    system_off();
  if (g_timer.init(bm::kTimerPpi) != hal::Status::kOk) {
    bm::print("bm: generic timer: bad CNTFRQ FAIL\n");
    system_off();
  }
  mmu_enable();
  bm_run();
  system_off();
}
