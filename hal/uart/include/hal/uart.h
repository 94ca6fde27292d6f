// hal::Pl011: ARM PrimeCell PL011 UART driver (the console of QEMU virt).
//
// Polled transmit only needs two registers, but init programs the whole line
// the way real silicon requires: QEMU ignores the baud divisor, a real PL011
// does not, and LCR_H must be written after IBRD/FBRD because the LCR_H write
// is what latches the divisor. Every wait on a flag is bounded by a spin
// count from the caller so a wedged UART produces kTimeout instead of a hang
// (the panic path prints through this driver).
//
// Not interrupt driven and not a console layer: no buffering, no locking.
// The base address and reference clock come from the DT node
// ("arm,pl011", reg and the apb_pclk clock).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/status.h"

namespace hal::uart {

// PL011 register block (ARM DDI 0183, table 3-1).
struct Pl011Regs {
  uint32_t DR;        // 0x000 data
  uint32_t RSR_ECR;   // 0x004 receive status / error clear
  uint32_t reserved0[4];
  uint32_t FR;        // 0x018 flags
  uint32_t reserved1;
  uint32_t ILPR;      // 0x020 IrDA low-power counter
  uint32_t IBRD;      // 0x024 integer baud divisor
  uint32_t FBRD;      // 0x028 fractional baud divisor
  uint32_t LCR_H;     // 0x02C line control
  uint32_t CR;        // 0x030 control
  uint32_t IFLS;      // 0x034 FIFO level select
  uint32_t IMSC;      // 0x038 interrupt mask set/clear
  uint32_t RIS;       // 0x03C raw interrupt status
  uint32_t MIS;       // 0x040 masked interrupt status
  uint32_t ICR;       // 0x044 interrupt clear
  uint32_t DMACR;     // 0x048 DMA control
};
static_assert(offsetof(Pl011Regs, DR) == 0x000);
static_assert(offsetof(Pl011Regs, RSR_ECR) == 0x004);
static_assert(offsetof(Pl011Regs, FR) == 0x018);
static_assert(offsetof(Pl011Regs, ILPR) == 0x020);
static_assert(offsetof(Pl011Regs, IBRD) == 0x024);
static_assert(offsetof(Pl011Regs, FBRD) == 0x028);
static_assert(offsetof(Pl011Regs, LCR_H) == 0x02C);
static_assert(offsetof(Pl011Regs, CR) == 0x030);
static_assert(offsetof(Pl011Regs, IFLS) == 0x034);
static_assert(offsetof(Pl011Regs, IMSC) == 0x038);
static_assert(offsetof(Pl011Regs, RIS) == 0x03C);
static_assert(offsetof(Pl011Regs, MIS) == 0x040);
static_assert(offsetof(Pl011Regs, ICR) == 0x044);
static_assert(offsetof(Pl011Regs, DMACR) == 0x048);

// FR bits.
inline constexpr uint32_t kFrBusy = 1u << 3;
inline constexpr uint32_t kFrRxfe = 1u << 4;  // receive FIFO empty
inline constexpr uint32_t kFrTxff = 1u << 5;  // transmit FIFO full
inline constexpr uint32_t kFrRxff = 1u << 6;
inline constexpr uint32_t kFrTxfe = 1u << 7;
// LCR_H bits.
inline constexpr uint32_t kLcrhFen = 1u << 4;        // FIFOs enabled
inline constexpr uint32_t kLcrhWlen8 = 3u << 5;      // 8 data bits; no parity, 1 stop = 0
// CR bits.
inline constexpr uint32_t kCrUarten = 1u << 0;
inline constexpr uint32_t kCrTxe = 1u << 8;
inline constexpr uint32_t kCrRxe = 1u << 9;
// All interrupt sources in IMSC/ICR (bits 0..10).
inline constexpr uint32_t kIntAll = 0x7FF;
// DR receive error flags (FE, PE, BE, OE).
inline constexpr uint32_t kDrErrors = 0xF00;

struct Pl011Config {
  uintptr_t base = 0;           // DT reg
  uint32_t clock_hz = 0;        // UARTCLK from the DT clocks (virt: 24 MHz)
  uint32_t baud = 115200;
  // Reads of FR allowed while waiting for TXFF (per character) or BUSY
  // (init/flush) to clear before giving up with kTimeout.
  uint32_t spin_limit = 1u << 20;
};

// Divisors for a baud rate: BAUDDIV = clock / (16 * baud), IBRD its integer
// part, FBRD its fraction in 1/64ths, rounded to nearest.
struct Divisors {
  uint32_t ibrd;
  uint32_t fbrd;
};
// kInvalidArgument if clock or baud is zero or the divisor falls outside the
// PL011 range (IBRD 1..65535, and FBRD 0 when IBRD is 65535).
Status compute_divisors(uint32_t clock_hz, uint32_t baud, Divisors* out);

class Pl011 {
 public:
  Pl011() = default;
  Pl011(const Pl011&) = delete;
  Pl011& operator=(const Pl011&) = delete;

  // Disables the UART, waits (bounded) for the transmitter to drain, flushes
  // the FIFOs, programs IBRD/FBRD then LCR_H = 8N1 + FIFO, masks and clears
  // every interrupt, then enables UART, TX and RX.
  Status init(const Pl011Config& cfg);

  // Waits while TXFF is set (at most spin_limit reads of FR), then writes
  // the byte to DR. kTimeout leaves the character unsent.
  Status putc(char c);
  // Writes `len` bytes, sending "\r\n" for every '\n'. Stops at the first
  // error and returns it.
  Status write(const char* buf, size_t len);
  // NUL-terminated convenience over write().
  Status puts(const char* s);
  // Waits (bounded) until the transmitter is idle (BUSY clear).
  Status flush();
  // Non-blocking read: kNotFound when the receive FIFO is empty. A byte with
  // a framing/parity/break/overrun error is still returned; the error flags
  // are cleared through ECR.
  Status getc(char* out);

  bool ready() const { return regs_ != nullptr; }

 private:
  volatile Pl011Regs* regs_ = nullptr;
  uint32_t spin_limit_ = 0;
};

}  // namespace hal::uart
