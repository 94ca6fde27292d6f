// GICv2 and GICv2m driver tests against RAM register blocks: the init
// sequence, write-1-to-set enables, INTID validation against GICD_TYPER,
// IAR/EOIR pairing, spurious handling, and v2m MSI messages.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include "hal/fake_mmio.h"
#include "hal/gic.h"

using hal::Status;
using hal::fake::addr_of;
using namespace hal::gic;

namespace {

GicdRegs dist;
GiccRegs cpu;
V2mRegs frame;
uint32_t iar_value;

constexpr uint32_t kVirtTyper = 8;  // ITLinesNumber 8: 288 INTIDs, as QEMU virt reports
constexpr uint32_t kVirtLines = 288;

int setup(void**) {
  hal::fake::reset();
  memset(&dist, 0, sizeof(dist));
  memset(&cpu, 0, sizeof(cpu));
  memset(&frame, 0, sizeof(frame));
  dist.TYPER = kVirtTyper;
  iar_value = kSpuriousIntid;
  hal::fake::add_region(addr_of(&cpu.IAR), 4,
                        [](uintptr_t, unsigned, uint64_t& v) { v = iar_value; }, nullptr);
  return 0;
}

GicConfig config() {
  return GicConfig{reinterpret_cast<uintptr_t>(&dist), reinterpret_cast<uintptr_t>(&cpu)};
}

// Index in the log of the first write to addr with value, or -1.
long find_write(uintptr_t addr, uint64_t value, size_t from = 0) {
  const auto& log = hal::fake::log();
  for (size_t i = from; i < log.size(); ++i)
    if (log[i].is_write && log[i].addr == addr && log[i].value == value)
      return static_cast<long>(i);
  return -1;
}

void test_init_reads_line_count_from_typer(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  assert_int_equal(gic.line_count(), kVirtLines);
  assert_int_equal(gic.check_intid(kVirtLines - 1), Status::kOk);
  assert_int_equal(gic.check_intid(kVirtLines), Status::kOutOfRange);
}

void test_init_disables_everything_before_enabling_distributor(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  const auto w = hal::fake::writes();
  assert_true(w.front().addr == addr_of(&dist.CTLR) && w.front().value == 0);
  const long enable = find_write(addr_of(&dist.CTLR), kGicdCtlrEnable);
  assert_true(enable > 0);
  for (uint32_t i = 0; i < kVirtLines / 32; ++i) {
    const long clr = find_write(addr_of(&dist.ICENABLER[i]), 0xFFFFFFFFu);
    assert_true(clr >= 0 && clr < enable);
    assert_true(find_write(addr_of(&dist.ICPENDR[i]), 0xFFFFFFFFu) >= 0);
    assert_true(find_write(addr_of(&dist.ICACTIVER[i]), 0xFFFFFFFFu) >= 0);
  }
  // Nothing beyond the implemented lines is touched.
  assert_int_equal(hal::fake::accesses_to(addr_of(&dist.ICENABLER[kVirtLines / 32])).size(), 0);
  for (uint32_t intid = kFirstSpi; intid < kVirtLines; ++intid) {
    assert_int_equal(dist.IPRIORITYR[intid], kDefaultPriority);
    assert_int_equal(dist.ITARGETSR[intid], 0x01);
  }
  assert_int_equal(dist.IPRIORITYR[kVirtLines], 0);
  // CPU interface after the distributor, enable last.
  const long pmr = find_write(addr_of(&cpu.PMR), 0xFF);
  const long bpr = find_write(addr_of(&cpu.BPR), 0);
  const long ctlr = find_write(addr_of(&cpu.CTLR), kGiccCtlrEnable);
  assert_true(enable < pmr && pmr < ctlr && bpr < ctlr);
}

void test_init_targets_spis_at_the_cpu_reading_itargetsr0(void**) {
  dist.ITARGETSR[0] = 0x04;  // banked: this core is CPU 2
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  assert_int_equal(dist.ITARGETSR[40], 0x04);
}

void test_init_configures_spis_level_triggered(void**) {
  memset(dist.ICFGR, 0xAA, sizeof(dist.ICFGR));
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  for (uint32_t i = kFirstSpi / 16; i < kVirtLines / 16; ++i)
    assert_int_equal(dist.ICFGR[i], 0);
  assert_int_equal(dist.ICFGR[1], 0xAAAAAAAAu);  // PPIs left as the hardware has them
}

void test_init_rejects_gic_without_spis(void**) {
  dist.TYPER = 0;
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kBadHardware);
  assert_int_equal(gic.enable(27), Status::kNotReady);
}

void test_line_count_is_capped_at_1020(void**) {
  dist.TYPER = 31;
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  assert_int_equal(gic.line_count(), 1020);
  assert_int_equal(gic.enable(1020), Status::kOutOfRange);
}

void test_enable_and_disable_write_one_bit_without_reading(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(gic.enable(27), Status::kOk);
  assert_int_equal(gic.enable(81), Status::kOk);
  assert_int_equal(gic.disable(81), Status::kOk);
  const auto& log = hal::fake::log();
  assert_int_equal(log.size(), 3);
  assert_true(log[0].is_write && log[0].addr == addr_of(&dist.ISENABLER[0]) && log[0].value == (1u << 27));
  assert_true(log[1].is_write && log[1].addr == addr_of(&dist.ISENABLER[2]) && log[1].value == (1u << 17));
  assert_true(log[2].is_write && log[2].addr == addr_of(&dist.ICENABLER[2]) && log[2].value == (1u << 17));
}

void test_intid_beyond_typer_is_rejected_without_access(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(gic.enable(kVirtLines), Status::kOutOfRange);
  assert_int_equal(gic.set_priority(500, 0x10), Status::kOutOfRange);
  assert_int_equal(gic.set_trigger(kVirtLines + 5, Trigger::kEdge), Status::kOutOfRange);
  assert_int_equal(hal::fake::log().size(), 0);
}

void test_set_priority_writes_one_byte(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(gic.set_priority(81, 0x40), Status::kOk);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_int_equal(w[0].width, 1);
  assert_int_equal(dist.IPRIORITYR[81], 0x40);
  assert_int_equal(dist.IPRIORITYR[80], kDefaultPriority);
  assert_int_equal(dist.IPRIORITYR[82], kDefaultPriority);
}

void test_set_trigger_edge_preserves_neighbours(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  dist.ICFGR[5] = 0x80000002u;  // INTIDs 80 and 95 already edge
  assert_int_equal(gic.set_trigger(81, Trigger::kEdge), Status::kOk);
  assert_int_equal(dist.ICFGR[5], 0x8000000Au);
  assert_int_equal(gic.set_trigger(80, Trigger::kLevel), Status::kOk);
  assert_int_equal(dist.ICFGR[5], 0x80000008u);
}

void test_sgi_trigger_and_ppi_target_are_rejected(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  assert_int_equal(gic.set_trigger(3, Trigger::kEdge), Status::kInvalidArgument);
  assert_int_equal(gic.set_target(27, 0x1), Status::kInvalidArgument);
  assert_int_equal(gic.set_target(40, 0x0), Status::kInvalidArgument);
  assert_int_equal(gic.set_target(40, 0x2), Status::kOk);
  assert_int_equal(dist.ITARGETSR[40], 0x2);
}

void test_eoi_writes_back_the_acknowledged_iar(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  hal::fake::clear_log();
  iar_value = (1u << kIarCpuidShift) | 5;  // SGI 5 from CPU 1
  const Irq irq = gic.acknowledge();
  assert_int_equal(irq.intid, 5);
  assert_false(irq.spurious);
  assert_int_equal(gic.end_of_interrupt(irq), Status::kOk);
  const auto& log = hal::fake::log();
  assert_int_equal(log.size(), 2);
  assert_true(!log[0].is_write && log[0].addr == addr_of(&cpu.IAR));
  assert_true(log[1].is_write && log[1].addr == addr_of(&cpu.EOIR) && log[1].value == iar_value);
}

void test_spurious_1023_is_never_eoied(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  hal::fake::clear_log();
  iar_value = kSpuriousIntid;
  const Irq irq = gic.acknowledge();
  assert_true(irq.spurious);
  assert_int_equal(irq.intid, 1023);
  assert_int_equal(gic.end_of_interrupt(irq), Status::kInvalidArgument);
  assert_int_equal(hal::fake::writes().size(), 0);
}

void test_pending_and_enabled_read_their_bits(void**) {
  Gic gic;
  assert_int_equal(gic.init(config()), Status::kOk);
  dist.ISPENDR[2] = 1u << 17;
  dist.ISENABLER[0] = 1u << 27;
  assert_true(gic.is_pending(81));
  assert_false(gic.is_pending(80));
  assert_true(gic.is_enabled(27));
  assert_false(gic.is_pending(kVirtLines));
  assert_int_equal(gic.clear_pending(81), Status::kOk);
  assert_int_equal(dist.ICPENDR[2], 1u << 17);
}

void test_v2m_reads_spi_base_and_count(void**) {
  frame.MSI_TYPER = (80u << kV2mTyperBaseShift) | 64;  // QEMU virt: SPIs 80..143
  Gicv2m v2m;
  assert_int_equal(v2m.init(reinterpret_cast<uintptr_t>(&frame), kVirtLines), Status::kOk);
  assert_int_equal(v2m.spi_base(), 80);
  assert_int_equal(v2m.spi_count(), 64);
}

void test_v2m_message_is_setspi_address_and_spi_number(void**) {
  frame.MSI_TYPER = (80u << kV2mTyperBaseShift) | 64;
  Gicv2m v2m;
  assert_int_equal(v2m.init(reinterpret_cast<uintptr_t>(&frame), kVirtLines), Status::kOk);
  MsiMessage msg{};
  assert_int_equal(v2m.message(3, &msg), Status::kOk);
  assert_true(msg.address == addr_of(&frame.MSI_SETSPI_NS));
  assert_true(msg.address == reinterpret_cast<uintptr_t>(&frame) + 0x40);
  assert_int_equal(msg.data, 83);
  assert_int_equal(v2m.message(63, &msg), Status::kOk);
  assert_int_equal(msg.data, 143);
}

void test_v2m_rejects_vector_beyond_spi_count(void**) {
  frame.MSI_TYPER = (80u << kV2mTyperBaseShift) | 64;
  Gicv2m v2m;
  MsiMessage msg{1, 2};
  assert_int_equal(v2m.message(0, &msg), Status::kNotReady);
  assert_int_equal(v2m.init(reinterpret_cast<uintptr_t>(&frame), kVirtLines), Status::kOk);
  assert_int_equal(v2m.message(64, &msg), Status::kOutOfRange);
  uint32_t spi = 0;
  assert_int_equal(v2m.spi_for(1000, &spi), Status::kOutOfRange);
  assert_true(msg.address == 1 && msg.data == 2);  // untouched on error
}

void test_v2m_rejects_bad_typer(void**) {
  Gicv2m v2m;
  const uintptr_t base = reinterpret_cast<uintptr_t>(&frame);
  frame.MSI_TYPER = 80u << kV2mTyperBaseShift;  // zero SPIs
  assert_int_equal(v2m.init(base, kVirtLines), Status::kBadHardware);
  frame.MSI_TYPER = (16u << kV2mTyperBaseShift) | 8;  // base inside the PPIs
  assert_int_equal(v2m.init(base, kVirtLines), Status::kBadHardware);
  frame.MSI_TYPER = (80u << kV2mTyperBaseShift) | 64;  // beyond a 96-line GIC
  assert_int_equal(v2m.init(base, 96), Status::kBadHardware);
  assert_int_equal(v2m.init(0, 96), Status::kInvalidArgument);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_init_reads_line_count_from_typer, setup),
      cmocka_unit_test_setup(test_init_disables_everything_before_enabling_distributor, setup),
      cmocka_unit_test_setup(test_init_targets_spis_at_the_cpu_reading_itargetsr0, setup),
      cmocka_unit_test_setup(test_init_configures_spis_level_triggered, setup),
      cmocka_unit_test_setup(test_init_rejects_gic_without_spis, setup),
      cmocka_unit_test_setup(test_line_count_is_capped_at_1020, setup),
      cmocka_unit_test_setup(test_enable_and_disable_write_one_bit_without_reading, setup),
      cmocka_unit_test_setup(test_intid_beyond_typer_is_rejected_without_access, setup),
      cmocka_unit_test_setup(test_set_priority_writes_one_byte, setup),
      cmocka_unit_test_setup(test_set_trigger_edge_preserves_neighbours, setup),
      cmocka_unit_test_setup(test_sgi_trigger_and_ppi_target_are_rejected, setup),
      cmocka_unit_test_setup(test_eoi_writes_back_the_acknowledged_iar, setup),
      cmocka_unit_test_setup(test_spurious_1023_is_never_eoied, setup),
      cmocka_unit_test_setup(test_pending_and_enabled_read_their_bits, setup),
      cmocka_unit_test_setup(test_v2m_reads_spi_base_and_count, setup),
      cmocka_unit_test_setup(test_v2m_message_is_setspi_address_and_spi_number, setup),
      cmocka_unit_test_setup(test_v2m_rejects_vector_beyond_spi_count, setup),
      cmocka_unit_test_setup(test_v2m_rejects_bad_typer, setup),
  };
  return cmocka_run_group_tests_name("hal_gic", tests, nullptr, nullptr);
}
