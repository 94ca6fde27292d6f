// fw_main: the boot sequence of one vtrn chip and its event loop.
//
// Order matters and each step depends on the previous one: MMU (libfdt and
// picolibc need Normal memory) -> console (from the platform DTB) -> the
// rest of the platform DTB -> timer, GIC -> PCIe and the host-interface
// function -> BAR2 header BOOTING + log ring -> board DTB (what this chip
// is; parsed after BAR2 so a bad board is reported to the host) -> DMA
// region and queues (firmware/dma) -> control service -> READY + boot
// event. Every failure stops in fw::panic with a reason naming what was
// wrong.
//
// The event loop never busy-waits: interrupt handlers only count and set
// flags, the loop does the work, and when there is none it sleeps in WFI
// with IRQs masked (a pending IRQ still wakes it; unmasking then takes it),
// which closes the race between "checked for work" and "went to sleep".
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fw/arch.h"
#include "fw/console.h"
#include "fw/ctrl_dispatch.h"
#include "fw/ctrl_service.h"
#include "fw/dma_service.h"
#include "fw/hbm_service.h"  // ---- HBM ----
#include "fw/jobs_service.h"  // ---- jobs ----
#include "fw/exceptions.h"
#include "fw/host_interface.h"
#include "fw/links_service.h"  // ---- links ----
#include "fw/collectives_service.h"  // ---- collectives (links) ----
#include "fw/log.h"
#include "fw/mmu.h"
#include "fw/panic.h"
#include "fw/pb_arena.h"
#include "fw/power_service.h"  // ---- power ----
#include "fw/reliability.h"  // ---- reliability ----
#include "fw/platform.h"
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
alignas(16) uint8_t g_arena_buffer[16384];
pb::Arena g_arena(g_arena_buffer, sizeof g_arena_buffer);
ctrl::Service g_ctrl;
dma::Service g_dma;  // firmware/dma
power::Service g_power;  // ---- power (firmware/power) ----

// Shared between IRQ handlers and the loop; the loop only reads them with
// IRQs masked or through atomics.
volatile uint32_t g_ticks_pending = 0;
uint64_t g_timer_irqs = 0;
uint64_t g_doorbell_irqs = 0;
uint64_t g_period_ticks = 0;
uint64_t g_next_deadline = 0;
uint64_t g_idle_ticks = 0;

class ChipBackend final : public ctrl::Backend {
 private:
  uint64_t do_uptime_ns() override { return arch::now_ns(); }
  void do_set_log_level(uint32_t level) override {
    (void)logging::set_level(level);
    log(kLogInfo, "log: level set to %u by host", unsigned(level));
  }
  // Service requests: one line per service, each owning its oneof range.
  bool do_serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
                char* error, size_t error_cap) override {
    if (g_power.serve(req, resp, arena, error, error_cap)) return true;  // ---- power ----
    if (hbm::serve(req, resp, arena, error, error_cap)) return true;  // ---- HBM ----
    // ---- reliability ----
    if (reliability::serve(req, resp, arena, error, error_cap, g_hostif.heartbeat())) return true;
    // ---- end reliability ----
    if (links::serve(req, resp, arena, error, error_cap)) return true;  // ---- links ----
    if (collectives::serve(req, resp, arena, error, error_cap)) return true;  // ---- collectives ----
    if (jobs::serve(req, resp, arena, error, error_cap)) return true;  // ---- jobs ----
    return false;
  }
};
ChipBackend g_backend;
ctrl::Dispatcher g_dispatcher(g_facts, g_backend, g_arena);

void on_timer(uint32_t, void*) {
  ++g_timer_irqs;
  // Drift-free period: the next deadline follows the previous one, not
  // "now"; after a long stall (a paused VM) skip missed ticks instead of
  // firing a burst.
  const uint64_t now = arch::now_ticks();
  // ---- links: the loop may arm the timer before the period ends (link
  // polling); such an early IRQ only wakes the loop and is not a tick ----
  if (now < g_next_deadline) {
    if (g_timer.arm_at(g_next_deadline) != hal::Status::kOk) g_timer.disarm();
    return;
  }
  // ---- end links ----
  g_next_deadline += g_period_ticks;
  if (g_next_deadline <= now) g_next_deadline = now + g_period_ticks;
  if (g_timer.arm_at(g_next_deadline) != hal::Status::kOk) {
    g_timer.disarm();
  }
  g_ticks_pending = g_ticks_pending + 1;
}

void on_doorbell(uint32_t, void*) {
  // Only a wake-up hint: the loop re-reads the ring indexes.
  ++g_doorbell_irqs;
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
  vtrn::board::Result r = vtrn::board::parse_board(fdt, size_t(size), &g_board);
  if (!r.ok()) panic(kPanicBoard, "%s", r.message);
  r = vtrn::board::parse_chip(fdt, size_t(size), p.chip_id, &g_chip);
  if (!r.ok()) panic(kPanicBoard, "%s", r.message);
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
      irq::register_handler(first_spi + v, on_doorbell, nullptr);
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

void ring_host(uint16_t vector) {
  if (g_have_doorbell) (void)g_doorbell.ring(vtrn::hostif::kHostPeerId, vector);
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

// ---- DMA (firmware/dma): HBM above the firmware's RAM, queues in BAR2 ----
void init_dma(const hal::ivshmem::SharedMemory& bar2) {
  dma::ServiceConfig c;
  c.bar2 = reinterpret_cast<uint8_t*>(uintptr_t(bar2.cpu_base));
  c.bar2_size = bar2.size;
  c.queues = g_chip.dma_queues;
  c.depth = g_chip.dma_queue_depth;
  c.hbm.ram_base = g_platform.ram.base;
  c.hbm.ram_size = g_platform.ram.size;
  c.hbm.hbm_bytes = g_chip.hbm.total_bytes();
  const uint64_t image_end = reinterpret_cast<uintptr_t>(__image_end);
  const uint64_t board_end = g_platform.board_address + g_platform.board_size;
  c.hbm.firmware_end = image_end > board_end ? image_end : board_end;
  g_dma.init(c);
}
// ---- end DMA ----

// ---- HBM (firmware/hbm): the manager over the range the DMA service uses ----
void init_hbm() {
  dma::HbmInputs in;
  in.ram_base = g_platform.ram.base;
  in.ram_size = g_platform.ram.size;
  in.hbm_bytes = g_chip.hbm.total_bytes();
  const uint64_t image_end = reinterpret_cast<uintptr_t>(__image_end);
  const uint64_t board_end = g_platform.board_address + g_platform.board_size;
  in.firmware_end = image_end > board_end ? image_end : board_end;
  dma::HbmRange r;
  char err[160];
  if (!dma::derive_hbm(in, &r, err, sizeof err)) panic(kPanicPlatform, "%s", err);
  hbm::init(g_chip, r.base, r.size, g_hostif.header());
  // From now on DMA reaches only live, unpoisoned allocations.
  g_dma.set_hbm_policy(hbm::dma_policy());
  uint64_t remap_base = 0, remap_bytes = 0;  // stitched allocations' device addresses
  hbm::remap_window(&remap_base, &remap_bytes);
  g_dma.set_remap_window(remap_base, remap_bytes);
}

bool send_hbm_event(const hbm::EccRecord& r) {
  Vtrn__Ctrl__HbmEccEvent body = VTRN__CTRL__HBM_ECC_EVENT__INIT;
  hbm::fill_ecc_event(r, &body);
  Vtrn__Ctrl__Event ev = VTRN__CTRL__EVENT__INIT;
  ev.body_case = VTRN__CTRL__EVENT__BODY_HBM_ECC;
  ev.hbm_ecc = &body;
  return g_ctrl.send_event(ev);
}
// ---- end HBM ----

// ---- power (firmware/power): model, governor, D0/D3hot, BAR2 power block ----
void init_power(const hal::ivshmem::SharedMemory& bar2) {
  power::ServiceConfig c;
  c.header = g_hostif.header();
  c.bar2 = reinterpret_cast<uint8_t*>(uintptr_t(bar2.cpu_base));
  c.bar2_size = bar2.size;
  c.chip = &g_chip;
  c.board_fdt = reinterpret_cast<const void*>(uintptr_t(g_platform.board_address));
  c.board_size = size_t(g_platform.board_size);
  c.gic = &g_gic;
  c.timer_intid = g_platform.virt_timer_intid;
  g_power.init(c);
}
// ---- end power ----

// ---- links (firmware/links): one port per ivshmem-plain function ----
void init_links(const hal::ivshmem::SharedMemory& bar2) {
  const uint32_t fns = links::attach_pcie(g_ecam, g_topology);
  log(kLogDebug, "links: %u link functions on the bus", unsigned(fns));
  links::init(g_chip, reinterpret_cast<uint8_t*>(uintptr_t(bar2.cpu_base + vtrn::hostif::kLinksOffset)),
              vtrn::hostif::kLinksSize, arch::now_ns());
  g_hostif.header()->capabilities = g_hostif.header()->capabilities | vtrn::hostif::kCapLinks;
}

// Called with IRQs masked right before WFI: wakes the loop for the next
// link poll when that comes before the next tick.
void arm_for_links() {
  const uint64_t due_ns = links::next_poll_ns();
  if (due_ns == UINT64_MAX) return;
  const uint64_t now_ns = arch::now_ns();
  const uint64_t wait_ticks = due_ns > now_ns ? g_timer.ns_to_ticks(due_ns - now_ns) : 0;
  const uint64_t at = arch::now_ticks() + wait_ticks;
  if (at < g_next_deadline) (void)g_timer.arm_at(at);
}
// ---- end links ----

// ---- jobs (firmware/jobs): NeuronCores 1..N-1 come up as executors ----
void init_jobs(const hal::ivshmem::SharedMemory& bar2) {
  jobs::ServiceConfig c;
  c.bar2 = reinterpret_cast<uint8_t*>(uintptr_t(bar2.cpu_base));
  c.bar2_size = bar2.size;
  c.header = g_hostif.header();
  c.neuron_cores = g_chip.neuron_cores;
  (void)jobs::init(c, g_platform, &g_gic);
}

bool send_job_event(const Vtrn__Ctrl__Event& ev) { return g_ctrl.send_event(ev); }
// ---- end jobs ----

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
  t.ctrl_requests = g_dispatcher.requests();
  t.ctrl_errors = g_dispatcher.errors();
  t.events_sent = g_ctrl.events_sent();
  t.log_bytes = logging::ring_bytes();
  const dma::Totals& d = g_dma.totals();  // firmware/dma
  t.dma_descriptors = d.descriptors;
  t.dma_completions = d.completions;
  t.dma_bytes = d.bytes;
  t.dma_busy_ns = d.busy_ns;
  hbm::fill_telemetry(&t);  // ---- HBM ----
  jobs::fill_telemetry(&t);  // ---- jobs ----
  t.temperature_mc = g_power.die_temperature_mc();  // ---- power ----
  g_hostif.publish_telemetry(t);
}

}  // namespace
}  // namespace fw

extern "C" [[noreturn]] void fw_main() {
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
  init_dma(bar2);
  init_hbm();  // ---- HBM ----
  init_power(bar2);  // ---- power ----
  init_links(bar2);  // ---- links ----
  collectives::init();  // ---- collectives (links): frame client of the link ports ----
  init_jobs(bar2);  // ---- jobs: after every mapping the executors use ----
  g_ctrl.init(g_hostif.request_ring(), g_hostif.response_ring(), &g_dispatcher);

  g_period_ticks = g_timer.ns_to_ticks(uint64_t(g_chip.telemetry_period_ms) * 1000000ull);
  g_next_deadline = arch::now_ticks() + g_period_ticks;
  check(g_timer.arm_at(g_next_deadline), "timer: arm");
  refresh_telemetry();

  g_hostif.set_state(vtrn::hostif::kStateReady);
  const uint64_t ready_ns = arch::now_ns();
  log(kLogInfo, "ready: boot generation %u, %llu us since reset, %llu us since entry",
      unsigned(g_hostif.boot_generation()), (unsigned long long)(ready_ns / 1000),
      (unsigned long long)((ready_ns - arch::ticks_to_ns(fw_entry_ticks)) / 1000));
  if (!g_ctrl.send_boot_event(g_hostif.boot_generation(), ready_ns)) {
    log(kLogErr, "ctrl: could not queue the boot event");
  }
  ring_host(vtrn::hostif::kVectorControl);
  arch::irq_enable();

  uint32_t ticks_seen = 0;
  for (;;) {
    const uint32_t ticks = g_ticks_pending;
    if (ticks != ticks_seen) {
      ticks_seen = ticks;
      g_hostif.beat();
      g_power.refresh(arch::ticks_to_ns(g_idle_ticks), g_dma.totals().bytes);  // ---- power ----
      jobs::tick();  // ---- jobs: timeouts, BAR2 job table ----
      refresh_telemetry();
      if (logging::take_new_lines()) ring_host(vtrn::hostif::kVectorLog);
    }
    // ---- power: a control request or queued DMA is a resume trigger ----
    if (g_ctrl.has_work()) g_power.note_activity();
    // ---- end power ----
    if (g_ctrl.poll() > 0) ring_host(vtrn::hostif::kVectorControl);
    // ---- HBM ----
    // ECC errors the last requests produced: logged, and an Event each.
    if (hbm::service_events(send_hbm_event) > 0) ring_host(vtrn::hostif::kVectorControl);
    // ---- end HBM ----
    // ---- jobs: step advance, dispatch, end events; core 0 runs chunks only
    // on a chip without secondary cores ----
    if (jobs::poll(send_job_event)) ring_host(vtrn::hostif::kVectorControl);
    // ---- collectives (links): the end event of a finished collective ----
    if (collectives::poll(send_job_event)) ring_host(vtrn::hostif::kVectorControl);
    jobs::run_on_service_core();
    // ---- end jobs ----
    // DMA: one bounded round-robin pass over the queues with work (firmware/dma).
    // ---- power: no DMA pass unless the device is in D0 ----
    if (g_dma.wants_run(irq::count())) g_power.note_activity();
    g_power.poll();
    if (power::device_active() && g_dma.run(irq::count())) ring_host(vtrn::hostif::kVectorDma);
    // ---- end power ----
    // ---- reliability ----
    reliability::poll();  // an injected fault, once its response is out
    // ---- end reliability ----
    links::poll(arch::now_ns());  // ---- links: does nothing until a port is due ----
    if (g_ctrl.shutdown_requested()) {
      log(kLogInfo, "shutdown requested by the host: halting");
      g_hostif.set_state(vtrn::hostif::kStateHalted);
      refresh_telemetry();
      ring_host(vtrn::hostif::kVectorLog);
      arch::psci_system_off();
    }

    arch::irq_disable();
    if (g_ticks_pending == ticks_seen && !g_ctrl.has_work() &&
        !(power::device_active() && g_dma.wants_run(irq::count())) &&
        !g_power.has_work() &&  // ---- power: in D3hot queued DMA waits ----
        !jobs::has_work() &&  // ---- jobs ----
        !collectives::has_work() &&  // ---- collectives ----
        links::next_poll_ns() > arch::now_ns()) {  // ---- links ----
      arm_for_links();  // ---- links ----
      const uint64_t t0 = arch::now_ticks();
      arch::wait_for_interrupt();
      g_idle_ticks += arch::now_ticks() - t0;
    }
    arch::irq_enable();
  }
}
