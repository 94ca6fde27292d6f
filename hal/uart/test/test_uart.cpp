// PL011 driver tests against a RAM register block: divisor math, the init
// write sequence, bounded waits on TXFF/BUSY, and '\n' -> "\r\n".
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

extern "C" {  // cmocka 1.1 headers carry no C++ linkage of their own
#include <cmocka.h>
}

#include <vector>

#include "hal/fake_mmio.h"
#include "hal/uart.h"

using hal::Status;
using hal::fake::addr_of;
using namespace hal::uart;

namespace {

Pl011Regs regs;
// FR emulation: report `txff_reads` reads with TXFF set, then clear.
uint32_t txff_reads;
uint32_t fr_reads;
bool busy_forever;

int setup(void**) {
  hal::fake::reset();
  memset(&regs, 0, sizeof(regs));
  txff_reads = 0;
  fr_reads = 0;
  busy_forever = false;
  hal::fake::add_region(addr_of(&regs.FR), 4,
                        [](uintptr_t, unsigned, uint64_t& v) {
                          ++fr_reads;
                          v = kFrTxfe;
                          if (txff_reads > 0) {
                            --txff_reads;
                            v = kFrTxff;
                          }
                          if (busy_forever)
                            v |= kFrBusy;
                        },
                        nullptr);
  return 0;
}

Pl011Config config(uint32_t spin_limit = 16) {
  Pl011Config cfg;
  cfg.base = reinterpret_cast<uintptr_t>(&regs);
  cfg.clock_hz = 24000000;
  cfg.baud = 115200;
  cfg.spin_limit = spin_limit;
  return cfg;
}

std::vector<uint8_t> dr_bytes() {
  std::vector<uint8_t> out;
  for (const auto& a : hal::fake::writes())
    if (a.addr == addr_of(&regs.DR))
      out.push_back(static_cast<uint8_t>(a.value));
  return out;
}

void test_divisors_for_24mhz_at_115200(void**) {
  Divisors d{};
  assert_int_equal(compute_divisors(24000000, 115200, &d), Status::kOk);
  // 24e6 / (16 * 115200) = 13.0208: IBRD 13, FBRD round(0.0208 * 64) = 1.
  assert_int_equal(d.ibrd, 13);
  assert_int_equal(d.fbrd, 1);
  assert_int_equal(compute_divisors(48000000, 9600, &d), Status::kOk);
  assert_int_equal(d.ibrd, 312);  // 312.5
  assert_int_equal(d.fbrd, 32);
}

void test_divisors_reject_zero_and_out_of_range(void**) {
  Divisors d{};
  assert_int_equal(compute_divisors(0, 115200, &d), Status::kInvalidArgument);
  assert_int_equal(compute_divisors(24000000, 0, &d), Status::kInvalidArgument);
  assert_int_equal(compute_divisors(1000000, 115200, &d), Status::kInvalidArgument);  // IBRD 0
  assert_int_equal(compute_divisors(4000000000u, 300, &d), Status::kInvalidArgument);  // IBRD > 65535
}

void test_init_programs_line_then_enables_last(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config()), Status::kOk);
  const auto w = hal::fake::writes();
  struct Expect {
    volatile uint32_t* reg;
    uint32_t value;
  } expected[] = {
      {&regs.CR, 0},
      {&regs.LCR_H, 0},
      {&regs.IBRD, 13},
      {&regs.FBRD, 1},
      {&regs.LCR_H, kLcrhWlen8 | kLcrhFen},
      {&regs.IMSC, 0},
      {&regs.ICR, kIntAll},
      {&regs.CR, kCrUarten | kCrTxe | kCrRxe},
  };
  assert_int_equal(w.size(), sizeof(expected) / sizeof(expected[0]));
  for (size_t i = 0; i < w.size(); ++i) {
    assert_true(w[i].addr == addr_of(expected[i].reg));
    assert_int_equal(w[i].value, expected[i].value);
  }
  assert_int_equal(regs.LCR_H, 0x70);
  assert_int_equal(regs.CR, 0x301);
  assert_true(uart.ready());
}

void test_init_times_out_when_busy_never_clears(void**) {
  busy_forever = true;
  Pl011 uart;
  assert_int_equal(uart.init(config(8)), Status::kTimeout);
  assert_int_equal(fr_reads, 8);
  assert_int_equal(regs.CR, 0);  // disabled, never re-enabled
  assert_false(uart.ready());
  assert_int_equal(uart.putc('x'), Status::kNotReady);
}

void test_init_rejects_missing_clock(void**) {
  Pl011Config cfg = config();
  cfg.clock_hz = 0;
  Pl011 uart;
  assert_int_equal(uart.init(cfg), Status::kInvalidArgument);
  assert_int_equal(hal::fake::log().size(), 0);
}

void test_write_translates_newline_to_crlf(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config()), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(uart.write("a\nb\n", 4), Status::kOk);
  const std::vector<uint8_t> want{'a', '\r', '\n', 'b', '\r', '\n'};
  assert_true(dr_bytes() == want);
}

void test_putc_waits_while_txff_is_set(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config()), Status::kOk);
  hal::fake::clear_log();
  fr_reads = 0;
  txff_reads = 3;
  assert_int_equal(uart.putc('z'), Status::kOk);
  assert_int_equal(fr_reads, 4);  // three full, one clear
  const auto& log = hal::fake::log();
  assert_int_equal(log.size(), 5);
  assert_true(log[4].is_write && log[4].addr == addr_of(&regs.DR) && log[4].value == 'z');
}

void test_putc_gives_up_after_spin_limit(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config(5)), Status::kOk);
  hal::fake::clear_log();
  fr_reads = 0;
  txff_reads = 1000;
  assert_int_equal(uart.putc('q'), Status::kTimeout);
  assert_int_equal(fr_reads, 5);
  assert_true(dr_bytes().empty());
}

void test_write_stops_at_first_timeout(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config(4)), Status::kOk);
  hal::fake::clear_log();
  assert_int_equal(uart.putc('a'), Status::kOk);
  txff_reads = 1000;
  assert_int_equal(uart.write("bc", 2), Status::kTimeout);
  assert_int_equal(dr_bytes().size(), 1);
}

void test_getc_returns_byte_and_clears_errors(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config()), Status::kOk);
  char c = 0;
  // The FR hook reports RXFE clear (only TXFE set), so a byte is available.
  regs.DR = 0x400 | 'k';  // break error flagged with the byte
  hal::fake::clear_log();
  assert_int_equal(uart.getc(&c), Status::kOk);
  assert_int_equal(c, 'k');
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_true(w[0].addr == addr_of(&regs.RSR_ECR));
}

void test_getc_reports_empty_fifo(void**) {
  Pl011 uart;
  assert_int_equal(uart.init(config()), Status::kOk);
  hal::fake::add_region(addr_of(&regs.FR), 4, [](uintptr_t, unsigned, uint64_t& v) { v = kFrRxfe; },
                        nullptr);
  char c = 0;
  assert_int_equal(uart.getc(&c), Status::kNotFound);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_divisors_for_24mhz_at_115200, setup),
      cmocka_unit_test_setup(test_divisors_reject_zero_and_out_of_range, setup),
      cmocka_unit_test_setup(test_init_programs_line_then_enables_last, setup),
      cmocka_unit_test_setup(test_init_times_out_when_busy_never_clears, setup),
      cmocka_unit_test_setup(test_init_rejects_missing_clock, setup),
      cmocka_unit_test_setup(test_write_translates_newline_to_crlf, setup),
      cmocka_unit_test_setup(test_putc_waits_while_txff_is_set, setup),
      cmocka_unit_test_setup(test_putc_gives_up_after_spin_limit, setup),
      cmocka_unit_test_setup(test_write_stops_at_first_timeout, setup),
      cmocka_unit_test_setup(test_getc_returns_byte_and_clears_errors, setup),
      cmocka_unit_test_setup(test_getc_reports_empty_fifo, setup),
  };
  return cmocka_run_group_tests_name("hal_uart", tests, nullptr, nullptr);
}
