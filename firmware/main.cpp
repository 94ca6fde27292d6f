// fw_main: the boot sequence of one vtrn chip and its event loop, over the
// service table (firmware/services.cpp). main brings up what every service
// stands on and names none of them.
//
// Order matters and each step depends on the previous one: MMU (libfdt and
// picolibc need Normal memory) -> console (from the platform DTB) -> the
// rest of the platform DTB -> timer, GIC -> PCIe and the host-interface
// function -> BAR2 header BOOTING + log ring -> board DTB (what this chip
// is; parsed after BAR2 so a bad board is reported to the host) -> every
// service's init, in table order -> periodic timer, telemetry -> READY ->
// every service's on_ready (the boot event). Every failure stops in
// fw::panic with a reason naming what was wrong.
//
// The event loop never busy-waits: interrupt handlers only count and set
// flags, the loop does the work (each service's poll, and on a tick each
// service's tick and the telemetry), and when no service has work it sleeps
// in WFI with IRQs masked (a pending IRQ still wakes it; unmasking then
// takes it), which closes the race between "checked for work" and "went to
// sleep". The timer is armed for the earliest of the next tick and every
// service's next_wake_ns.
//
// Tickless when idle: the tick runs every telemetry period while the chip
// is busy (an interrupt other than the timer's, a service with work or
// busy()); after one whole quiet period it runs every kIdleTickMs, as
// often as the host watchdog needs a heartbeat, and the first interrupt or
// busy service brings the period back at once. A host that wants fresh
// telemetry rings kVectorAux and gets a tick's refresh without a beat.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/console.h"
#include "fw/ctrl_dispatch.h"
#include "fw/exceptions.h"
#include "fw/host_interface.h"
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/platform.h"
#include "fw/service.h"
#include "fw/services.h"
#include "hal/gic.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"
#include "hal/timer.h"
#include "vtrn/board.h"

extern "C" {
// Linker script symbols.
extern void (*__init_array_start[])();
extern void (*__init_array_end[])();
extern char __image_start[];
extern char __image_end[];
// boot/start.S: CNTVCT at the first instruction of the image.
uint64_t fw_entry_ticks;
}

namespace fw {
namespace {

using vtrn::hostif::kPanicBoard;
using vtrn::hostif::kPanicPlatform;

constexpr uint32_t kFwVersion =
    (VTRN_FW_VERSION_MAJOR << 16) | (VTRN_FW_VERSION_MINOR << 8) | VTRN_FW_VERSION_PATCH;
constexpr uint32_t kUsedVectors = vtrn::hostif::kVectorCount;

// Boot-time state: large objects live here rather than on the 64 KiB stack.
platform::Platform g_platform;
vtrn::board::Board g_board;
vtrn::board::Chip g_chip;
hal::timer::Timer g_timer;
hal::gic::Gic g_gic;
hal::gic::Gicv2m g_v2m;
hal::pcie::Ecam g_ecam;
hal::pcie::Topology g_topology;
hal::ivshmem::IvshmemDoorbell g_doorbell;
bool g_have_doorbell = false;
hostif::HostInterface g_hostif;
ctrl::ChipFacts g_facts;

// Shared between IRQ handlers and the loop; the loop only reads them with
// IRQs masked or through atomics.
volatile uint32_t g_ticks_pending = 0;
uint64_t g_timer_irqs = 0;
uint64_t g_doorbell_irqs = 0;
uint64_t g_period_ticks = 0;  // the tick while busy: the board's telemetry period
uint64_t g_idle_period_ticks = 0;  // the tick while idle (kIdleTickMs, at least the period)
uint64_t g_tick_ticks = 0;  // the one in force (written by the loop with IRQs masked)
uint64_t g_next_deadline = 0;
volatile uint32_t g_refresh_asks = 0;  // host doorbells on kVectorAux
uint64_t g_idle_ticks = 0;
uint64_t g_wakeups = 0;  // WFI exits of the boot core

void on_timer(uint32_t, void*) {
  ++g_timer_irqs;
  // Drift-free period: the next deadline follows the previous one, not
  // "now"; after a long stall (a paused VM) skip missed ticks instead of
  // firing a burst.
  const uint64_t now = arch::now_ticks();
  // The loop may arm the timer before the period ends (a service's
  // next_wake_ns); such an early IRQ only wakes the loop and is not a tick.
  if (now < g_next_deadline) {
    if (g_timer.arm_at(g_next_deadline) != hal::Status::kOk) g_timer.disarm();
    return;
  }
  g_next_deadline += g_tick_ticks;
  if (g_next_deadline <= now) g_next_deadline = now + g_tick_ticks;
  if (g_timer.arm_at(g_next_deadline) != hal::Status::kOk) {
    g_timer.disarm();
  }
  g_ticks_pending = g_ticks_pending + 1;
}

void on_doorbell(uint32_t, void*) {
  // Only a wake-up hint: the loop re-reads the ring indexes.
  ++g_doorbell_irqs;
}

void on_refresh_doorbell(uint32_t, void*) {
  ++g_doorbell_irqs;
  g_refresh_asks = g_refresh_asks + 1;
}

void check(hal::Status s, const char* what) {
  if (s != hal::Status::kOk) panic(kPanicPlatform, "%s: %s", what, hal::status_name(s));
}

void copy_text(char* dst, size_t cap, const char* src) { snprintf(dst, cap, "%s", src); }

void run_init_array() {
  for (auto* f = __init_array_start; f != __init_array_end; ++f) (*f)();
}

void map_platform() {
  const platform::Platform& p = g_platform;
  mmu::map(p.ram.base, p.ram.size, mmu::Memory::kNormal, "ram");
  mmu::map(p.gicd_base, p.gicd_size, mmu::Memory::kDevice, "gic distributor");
  mmu::map(p.gicc_base, p.gicc_size, mmu::Memory::kDevice, "gic cpu interface");
  mmu::map(p.v2m_base, p.v2m_size, mmu::Memory::kDevice, "gicv2m frame");
  mmu::map(p.ecam.base, p.ecam.size, mmu::Memory::kDevice, "pcie ecam");
  mmu::map(p.mmio32.cpu_base, p.mmio32.size, mmu::Memory::kDevice, "pcie 32-bit window");
  // The 64-bit window holds prefetchable BARs only (hal::pcie places
  // non-prefetchable ones in the 32-bit window): BAR2 is shared RAM.
  mmu::map(p.mmio64.cpu_base, p.mmio64.size, mmu::Memory::kNormalNoExec, "pcie 64-bit window");
}

void load_board() {
  const platform::Platform& p = g_platform;
  const uint64_t img_lo = reinterpret_cast<uintptr_t>(__image_start);
  const uint64_t img_hi = reinterpret_cast<uintptr_t>(__image_end);
  const uint64_t lo = p.board_address;
  const uint64_t size = p.board_size;
  if (size < 40 || lo < p.ram.base || lo - p.ram.base > p.ram.size ||
      size > p.ram.size - (lo - p.ram.base)) {
    panic(kPanicBoard, "board dtb: [0x%llx, +%llu) is not inside RAM", (unsigned long long)lo,
          (unsigned long long)size);
  }
  if (lo < img_hi && img_lo < lo + size) {
    panic(kPanicBoard, "board dtb: [0x%llx, +%llu) overlaps the firmware image",
          (unsigned long long)lo, (unsigned long long)size);
  }
  const void* fdt = reinterpret_cast<const void*>(uintptr_t(lo));
  vtrn::Error r = vtrn::board::parse_board(fdt, size_t(size), &g_board);
  if (!r.ok()) panic(kPanicBoard, "%s", r.detail());
  r = vtrn::board::parse_chip(fdt, size_t(size), p.chip_id, &g_chip);
  if (!r.ok()) panic(kPanicBoard, "%s", r.detail());
}

void init_interrupts() {
  const platform::Platform& p = g_platform;
  check(g_timer.init(p.virt_timer_intid), "timer");
  check(g_gic.init(hal::gic::GicConfig{uintptr_t(p.gicd_base), uintptr_t(p.gicc_base)}), "gic");
  panic_set_gicc(uintptr_t(p.gicc_base));
  irq::attach_gic(&g_gic);
  check(g_v2m.init(uintptr_t(p.v2m_base), g_gic.line_count()), "gicv2m");
  irq::register_handler(p.virt_timer_intid, on_timer, nullptr);
  check(g_gic.enable(p.virt_timer_intid), "gic: enable timer PPI");
}

// Finds the ivshmem function that is the host interface; returns BAR2.
hal::ivshmem::SharedMemory init_pcie() {
  const platform::Platform& p = g_platform;
  check(g_ecam.init(uintptr_t(p.ecam.base), p.ecam.size, p.bus_start, p.bus_end), "pcie ecam");
  hal::pcie::Windows w;
  w.mmio32 = hal::pcie::Window{p.mmio32.cpu_base, p.mmio32.pci_base, p.mmio32.size};
  w.mmio64 = hal::pcie::Window{p.mmio64.cpu_base, p.mmio64.pci_base, p.mmio64.size};
  const uint64_t t0 = arch::now_ns();
  const hal::Status s = hal::pcie::enumerate(g_ecam, w, &g_topology);
  if (s != hal::Status::kOk) {
    const hal::pcie::Bdf& b = g_topology.failed_bdf;
    panic(kPanicPlatform, "pcie: enumeration failed: %s (%02x:%02x.%x BAR%u)",
          hal::status_name(s), b.bus, b.dev, b.fn, unsigned(g_topology.failed_bar));
  }
  log(kLogDebug, "pcie: %u functions enumerated in %llu us", unsigned(g_topology.count),
      (unsigned long long)((arch::now_ns() - t0) / 1000));
  const hal::pcie::Function* fn =
      g_topology.find(hal::ivshmem::kVendorId, hal::ivshmem::kDeviceId, 0);
  if (!fn) {
    panic(kPanicPlatform, "pcie: no ivshmem function (%04x:%04x) for the host interface",
          hal::ivshmem::kVendorId, hal::ivshmem::kDeviceId);
  }
  snprintf(g_facts.pci_address, sizeof g_facts.pci_address, "0000:%02x:%02x.%x", fn->bdf.bus,
           fn->bdf.dev, fn->bdf.fn);

  hal::ivshmem::Kind kind;
  check(hal::ivshmem::classify(g_ecam, *fn, &kind), "pcie: ivshmem");
  hal::ivshmem::SharedMemory shm;
  check(hal::ivshmem::shared_memory(*fn, &shm), "pcie: ivshmem BAR2");
  if (kind == hal::ivshmem::Kind::kDoorbell) {
    check(g_doorbell.init(g_ecam, *fn), "ivshmem-doorbell");
    if (g_doorbell.vector_count() < kUsedVectors) {
      panic(kPanicPlatform, "ivshmem-doorbell: %u MSI-X vectors, the host interface needs %u",
            unsigned(g_doorbell.vector_count()), unsigned(kUsedVectors));
    }
    uint32_t first_spi = 0;
    check(g_doorbell.route_to_v2m(g_v2m, 0, &first_spi), "ivshmem-doorbell: MSI-X routing");
    for (uint32_t v = 0; v < g_doorbell.vector_count(); ++v) {
      // MSIs are events: edge-triggered at the distributor.
      check(g_gic.set_trigger(first_spi + v, hal::gic::Trigger::kEdge), "gic: MSI trigger");
      irq::register_handler(first_spi + v,
                            v == vtrn::hostif::kVectorAux ? on_refresh_doorbell : on_doorbell,
                            nullptr);
      check(g_gic.enable(first_spi + v), "gic: enable MSI SPI");
    }
    check(g_doorbell.enable_msix(), "ivshmem-doorbell: enable MSI-X");
    g_have_doorbell = true;
    log(kLogInfo, "pcie: %s %04x:%04x bar2 %llu MiB at 0x%llx, MSI-X %u vectors -> SPI %u..%u",
        g_facts.pci_address, fn->vendor_id, fn->device_id, (unsigned long long)(shm.size >> 20),
        (unsigned long long)shm.cpu_base, unsigned(g_doorbell.vector_count()), unsigned(first_spi),
        unsigned(first_spi + g_doorbell.vector_count() - 1));
  } else {
    log(kLogInfo, "pcie: %s %04x:%04x bar2 %llu MiB at 0x%llx", g_facts.pci_address,
        fn->vendor_id, fn->device_id, (unsigned long long)(shm.size >> 20),
        (unsigned long long)shm.cpu_base);
    log(kLogWarn, "pcie: host interface is ivshmem-plain (no MSI-X): doorbells unavailable, "
                  "control requests are noticed on timer ticks only");
  }
  return shm;
}

void ring_host(Vectors vectors) {
  if (!g_have_doorbell) return;
  for (uint16_t v = 0; vectors != 0; ++v, vectors >>= 1) {
    if (vectors & 1u) (void)g_doorbell.ring(vtrn::hostif::kHostPeerId, v);
  }
}

void fill_facts(uint64_t bar2_size) {
  ctrl::ChipFacts& f = g_facts;
  f.chip_id = g_chip.id;
  copy_text(f.board_model, sizeof f.board_model, g_board.model);
  copy_text(f.chip_name, sizeof f.chip_name, g_chip.name);
  snprintf(f.fw_version, sizeof f.fw_version, "%u.%u.%u", unsigned(VTRN_FW_VERSION_MAJOR),
           unsigned(VTRN_FW_VERSION_MINOR), unsigned(VTRN_FW_VERSION_PATCH));
  copy_text(f.build_id, sizeof f.build_id, VTRN_FW_BUILD_ID);
  f.neuron_cores = g_chip.neuron_cores;
  f.hbm_stacks = g_chip.hbm.stacks;
  f.hbm_bytes_per_stack = g_chip.hbm.bytes_per_stack;
  f.hbm_page_bytes = g_chip.hbm.page_bytes;
  f.hbm_channels = g_chip.hbm.channels;
  f.link_ports = g_chip.port_count;
  f.power_domains = g_chip.power_domain_count;
  f.thermal_zones = g_chip.thermal_zone_count;
  f.telemetry_period_ms = g_chip.telemetry_period_ms;
  f.bar2_bytes = bar2_size;
  f.boot_generation = g_hostif.boot_generation();
  arch::cpu_name(f.cpu, sizeof f.cpu);
  f.timer_hz = g_timer.frequency();
  f.gic_version = 2;
}

void print_banner() {
  const vtrn::board::Chip& c = g_chip;
  log(kLogInfo, "chip %u (%s) of board \"%s\": %u NeuronCores, HBM %u x %llu MiB "
      "(page %u KiB, %u ch), %u link ports, %u power domains, %u thermal zones, period %u ms",
      unsigned(c.id), c.name, g_board.model, unsigned(c.neuron_cores), unsigned(c.hbm.stacks),
      (unsigned long long)(c.hbm.bytes_per_stack >> 20), unsigned(c.hbm.page_bytes >> 10),
      unsigned(c.hbm.channels), unsigned(c.port_count), unsigned(c.power_domain_count),
      unsigned(c.thermal_zone_count), unsigned(c.telemetry_period_ms));
  if (g_platform.cpu_count != c.neuron_cores) {
    log(kLogWarn, "platform has %u cores but the board gives chip %u %u NeuronCores",
        unsigned(g_platform.cpu_count), unsigned(c.id), unsigned(c.neuron_cores));
  }
}

// The first byte above everything the firmware occupies: its image and the
// board DTB (HBM must start above it).
uint64_t firmware_end() {
  const uint64_t image_end = reinterpret_cast<uintptr_t>(__image_end);
  const uint64_t board_end = g_platform.board_address + g_platform.board_size;
  return image_end > board_end ? image_end : board_end;
}

void refresh_telemetry() {
  vtrn::hostif::Telemetry t{};
  t.uptime_ns = arch::now_ns();
  t.heartbeat = g_hostif.heartbeat();
  t.period_ms = g_chip.telemetry_period_ms;
  t.neuron_cores = g_chip.neuron_cores;
  t.idle_ns = arch::ticks_to_ns(g_idle_ticks);
  t.irq_count = irq::count();
  t.doorbell_irq_count = __atomic_load_n(&g_doorbell_irqs, __ATOMIC_RELAXED);
  t.timer_irq_count = __atomic_load_n(&g_timer_irqs, __ATOMIC_RELAXED);
  t.log_bytes = logging::ring_bytes();
  t.wakeups = g_wakeups;
  for (Service* s : services()) s->fill_telemetry(&t);
  g_hostif.publish_telemetry(t);
}

// Boots every service in table order with what boot found.
void init_services(const hal::ivshmem::SharedMemory& bar2) {
  Boot b;
  b.platform = &g_platform;
  b.board = &g_board;
  b.chip = &g_chip;
  b.board_fdt = reinterpret_cast<const void*>(uintptr_t(g_platform.board_address));
  b.board_size = size_t(g_platform.board_size);
  b.hostif = &g_hostif;
  b.bar2 = reinterpret_cast<uint8_t*>(uintptr_t(bar2.cpu_base));
  b.bar2_size = bar2.size;
  b.gic = &g_gic;
  b.v2m = &g_v2m;
  b.msi_first_free = g_have_doorbell ? g_doorbell.vector_count() : 0;
  b.timer_intid = g_platform.virt_timer_intid;
  b.ecam = &g_ecam;
  b.topology = &g_topology;
  b.firmware_end = firmware_end();
  b.facts = &g_facts;
  b.services = services();
  for (Service* s : services()) s->init(b);
}

// Interrupts other than the timer's since boot: the loop's activity signal.
uint64_t other_irqs() { return irq::count() - g_timer_irqs; }

// With IRQs masked: the tick back at the telemetry period, due within one
// period from now (a chip leaving idle does not wait out an idle tick).
void tick_busy() {
  if (g_tick_ticks == g_period_ticks) return;
  g_tick_ticks = g_period_ticks;
  const uint64_t soon = arch::now_ticks() + g_period_ticks;
  if (g_next_deadline > soon) {
    g_next_deadline = soon;
    if (g_timer.arm_at(g_next_deadline) != hal::Status::kOk) g_timer.disarm();
  }
}

// On a tick: busy when anything but the timer interrupted during the last
// period or a service is busy(); idle (the slow tick) otherwise.
uint64_t g_irqs_at_tick = 0;
bool g_worked = false;  // a service had work since the last tick
void choose_tick() {
  bool busy = false;
  for (Service* s : services()) busy = busy || s->busy();
  arch::irq_disable();
  const uint64_t irqs = other_irqs();
  busy = busy || irqs != g_irqs_at_tick || g_worked;
  g_irqs_at_tick = irqs;
  g_worked = false;
  if (busy) {
    tick_busy();
  } else {
    g_tick_ticks = g_idle_period_ticks;
  }
  arch::irq_enable();
}

// With IRQs masked: true when the loop may sleep. Then the timer is armed
// for the earliest service wake-up before the next tick.
bool may_sleep(uint32_t ticks_seen, uint32_t asks_seen) {
  if (g_ticks_pending != ticks_seen || g_refresh_asks != asks_seen) return false;
  // An interrupt since the last tick (a request, an engine) ends idle now.
  if (other_irqs() != g_irqs_at_tick) tick_busy();
  uint64_t due_ns = kNever;
  for (Service* s : services()) {
    if (s->has_work()) {
      g_worked = true;
      tick_busy();
      return false;
    }
    const uint64_t d = s->next_wake_ns();
    if (d < due_ns) due_ns = d;
  }
  if (due_ns == kNever) return true;
  const uint64_t now_ns = arch::now_ns();
  if (due_ns <= now_ns) return false;
  const uint64_t at = arch::now_ticks() + g_timer.ns_to_ticks(due_ns - now_ns);
  if (at < g_next_deadline) (void)g_timer.arm_at(at);
  return true;
}

[[noreturn]] void halt(const char* why) {
  log(kLogInfo, "%s: halting", why);
  g_hostif.set_state(vtrn::hostif::kStateHalted);
  refresh_telemetry();
  ring_host(vector(vtrn::hostif::kVectorLog));
  arch::psci_system_off();
}

}  // namespace
}  // namespace fw

extern "C" [[noreturn]] void fw_main() {
  // The outermost C frame: it never returns, so GCC keeps no return address
  // and its CFI would say x30 still holds the caller's, which is a return
  // address inside fw_main itself; gdb then unwinds fw_main forever. Marking
  // x30 undefined ends the backtrace here (same in fw_secondary_main).
  asm volatile(".cfi_undefined x30");
  using namespace fw;
  run_init_array();
  mmu::init_early(platform::kPlatformDtbAddress);

  // Console first, so every later failure is printed.
  uint64_t uart_base = 0;
  uint32_t uart_clock = 0;
  platform::parse_console(platform::kPlatformDtbAddress, &uart_base, &uart_clock);
  mmu::map(uart_base, 0x1000, mmu::Memory::kDevice, "uart");
  if (console::init(uintptr_t(uart_base), uart_clock) == hal::Status::kOk) {
    logging::console_attached();
  }
  platform::parse(platform::kPlatformDtbAddress, &g_platform);
  map_platform();
  log(kLogInfo, "vtrn firmware %s, chip %u, entered at %llu us, bootargs \"%s\"",
      VTRN_FW_BUILD_ID, unsigned(g_platform.chip_id),
      (unsigned long long)(arch::ticks_to_ns(fw_entry_ticks) / 1000), g_platform.bootargs);

  init_interrupts();
  char cpu[48];
  arch::cpu_name(cpu, sizeof cpu);
  log(kLogInfo, "platform: %s x%u, RAM %llu MiB at 0x%llx, timer %llu Hz (INTID %u), "
      "GICv2 %u lines, v2m SPI %u+%u",
      cpu, unsigned(g_platform.cpu_count), (unsigned long long)(g_platform.ram.size >> 20),
      (unsigned long long)g_platform.ram.base, (unsigned long long)g_timer.frequency(),
      unsigned(g_platform.virt_timer_intid), unsigned(g_gic.line_count()),
      unsigned(g_v2m.spi_base()), unsigned(g_v2m.spi_count()));

  // The host interface comes up before the board DTB is parsed so that a bad
  // board reaches the host as a panic record in BAR2, not only on the UART.
  const hal::ivshmem::SharedMemory bar2 = init_pcie();
  if (bar2.size < vtrn::hostif::kMinBar2Size) {
    panic(kPanicPlatform, "host interface: BAR2 is %llu bytes, at least %llu needed",
          (unsigned long long)bar2.size, (unsigned long long)vtrn::hostif::kMinBar2Size);
  }
  hostif::HeaderInfo hi;
  hi.bar2_size = bar2.size;
  hi.chip_id = g_platform.chip_id;
  hi.fw_version = kFwVersion;
  hi.build_id = VTRN_FW_BUILD_ID;
  g_hostif.init(bar2.cpu_base, hi);
  panic_attach(g_hostif.header(), g_hostif.panic_record());
  logging::attach_ring(g_hostif.log_ring(), g_hostif.log_data_size());

  load_board();
  print_banner();
  if (bar2.size != uint64_t(g_chip.bar2_mib) << 20) {
    log(kLogWarn, "host interface: BAR2 is %llu MiB but the board says %u MiB",
        (unsigned long long)(bar2.size >> 20), unsigned(g_chip.bar2_mib));
  }

  fill_facts(bar2.size);
  init_services(bar2);

  g_period_ticks = g_timer.ns_to_ticks(uint64_t(g_chip.telemetry_period_ms) * 1000000ull);
  const uint32_t idle_ms = g_chip.telemetry_period_ms > vtrn::hostif::kIdleTickMs
                               ? g_chip.telemetry_period_ms
                               : vtrn::hostif::kIdleTickMs;
  g_idle_period_ticks = g_timer.ns_to_ticks(uint64_t(idle_ms) * 1000000ull);
  g_tick_ticks = g_period_ticks;
  if (g_have_doorbell) {
    vtrn::hostif::FwHeader* h = g_hostif.header();
    h->capabilities = h->capabilities | vtrn::hostif::kCapTelemetryOnDemand;
  }
  g_next_deadline = arch::now_ticks() + g_period_ticks;
  check(g_timer.arm_at(g_next_deadline), "timer: arm");
  refresh_telemetry();

  g_hostif.set_state(vtrn::hostif::kStateReady);
  const uint64_t ready_ns = arch::now_ns();
  log(kLogInfo, "ready: boot generation %u, %llu us since reset, %llu us since entry",
      unsigned(g_hostif.boot_generation()), (unsigned long long)(ready_ns / 1000),
      (unsigned long long)((ready_ns - arch::ticks_to_ns(fw_entry_ticks)) / 1000));
  Vectors ready_vectors = 0;
  for (Service* s : services()) ready_vectors |= s->on_ready(ready_ns);
  ring_host(ready_vectors);
  arch::irq_enable();

  uint32_t ticks_seen = 0;
  uint32_t asks_seen = 0;
  g_irqs_at_tick = other_irqs();
  for (;;) {
    Turn turn;
    const uint32_t ticks = g_ticks_pending;
    const uint32_t asks = g_refresh_asks;
    if (ticks != ticks_seen || asks != asks_seen) {
      // A host's refresh request runs the tick's work without a heartbeat:
      // the heartbeat stays the timer's, so the watchdog still watches it.
      const bool timer_tick = ticks != ticks_seen;
      ticks_seen = ticks;
      asks_seen = asks;
      turn.idle_ns = arch::ticks_to_ns(g_idle_ticks);
      if (timer_tick) {
        g_hostif.beat();
        choose_tick();
      }
      for (Service* s : services()) s->tick(turn);
      refresh_telemetry();
      if (logging::take_new_lines()) ring_host(vector(vtrn::hostif::kVectorLog));
    }
    for (Service* s : services()) ring_host(s->poll(turn));
    if (turn.halt != nullptr) halt(turn.halt);

    arch::irq_disable();
    if (may_sleep(ticks_seen, asks_seen)) {
      const uint64_t t0 = arch::now_ticks();
      arch::wait_for_interrupt();
      g_idle_ticks += arch::now_ticks() - t0;
      ++g_wakeups;
    }
    arch::irq_enable();
  }
}
