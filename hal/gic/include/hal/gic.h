// hal::gic: ARM GICv2 distributor + CPU interface, and the GICv2m MSI frame.
//
// QEMU virt with gic-version=2 has no security extensions unless secure=on,
// so every interrupt stays in group 0 (the reset value) and group 0 is
// signalled as IRQ (GICC_CTLR.FIQEn = 0). Enables and pending bits are
// write-1-to-set / write-1-to-clear registers: the driver never does a
// read-modify-write on them, so it cannot race another core. Priority and
// target registers are byte-accessible in GICv2 and are written one byte at
// a time for the same reason.
//
// GICv2m is how PCIe MSI-X reaches a GICv2: a 4 KiB frame whose
// MSI_SETSPI_NS register (frame + 0x40) raises SPI n when n is written to it.
// A function's MSI-X entry therefore gets address = frame base + 0x40 and
// data = SPI number; the SPI must be configured edge-triggered at the
// distributor (an MSI is an event, not a level).
//
// Not a handler dispatcher: the firmware's IRQ vector calls acknowledge(),
// dispatches, then end_of_interrupt(). Base addresses come from the DT
// ("arm,cortex-a15-gic" reg: distributor then CPU interface;
// "arm,gic-v2m-frame" reg).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hal/status.h"

namespace hal::gic {

// Distributor register block (ARM IHI 0048B, table 4-1).
struct GicdRegs {
  uint32_t CTLR;                 // 0x000
  uint32_t TYPER;                // 0x004
  uint32_t IIDR;                 // 0x008
  uint32_t reserved0[29];
  uint32_t IGROUPR[32];          // 0x080
  uint32_t ISENABLER[32];        // 0x100
  uint32_t ICENABLER[32];        // 0x180
  uint32_t ISPENDR[32];          // 0x200
  uint32_t ICPENDR[32];          // 0x280
  uint32_t ISACTIVER[32];        // 0x300
  uint32_t ICACTIVER[32];        // 0x380
  uint8_t IPRIORITYR[1020];      // 0x400, one byte per INTID
  uint32_t reserved1;
  uint8_t ITARGETSR[1020];       // 0x800, one byte per INTID (CPU mask)
  uint32_t reserved2;
  uint32_t ICFGR[64];            // 0xC00, two bits per INTID
  uint32_t reserved3[64];
  uint32_t NSACR[64];            // 0xE00
  uint32_t SGIR;                 // 0xF00
  uint32_t reserved4[3];
  uint8_t CPENDSGIR[16];         // 0xF10
  uint8_t SPENDSGIR[16];         // 0xF20
};
static_assert(offsetof(GicdRegs, CTLR) == 0x000);
static_assert(offsetof(GicdRegs, TYPER) == 0x004);
static_assert(offsetof(GicdRegs, IIDR) == 0x008);
static_assert(offsetof(GicdRegs, IGROUPR) == 0x080);
static_assert(offsetof(GicdRegs, ISENABLER) == 0x100);
static_assert(offsetof(GicdRegs, ICENABLER) == 0x180);
static_assert(offsetof(GicdRegs, ISPENDR) == 0x200);
static_assert(offsetof(GicdRegs, ICPENDR) == 0x280);
static_assert(offsetof(GicdRegs, ISACTIVER) == 0x300);
static_assert(offsetof(GicdRegs, ICACTIVER) == 0x380);
static_assert(offsetof(GicdRegs, IPRIORITYR) == 0x400);
static_assert(offsetof(GicdRegs, ITARGETSR) == 0x800);
static_assert(offsetof(GicdRegs, ICFGR) == 0xC00);
static_assert(offsetof(GicdRegs, NSACR) == 0xE00);
static_assert(offsetof(GicdRegs, SGIR) == 0xF00);
static_assert(offsetof(GicdRegs, CPENDSGIR) == 0xF10);
static_assert(offsetof(GicdRegs, SPENDSGIR) == 0xF20);

// CPU interface register block (ARM IHI 0048B, table 4-2).
struct GiccRegs {
  uint32_t CTLR;    // 0x00
  uint32_t PMR;     // 0x04 priority mask
  uint32_t BPR;     // 0x08 binary point
  uint32_t IAR;     // 0x0C interrupt acknowledge (read has side effects)
  uint32_t EOIR;    // 0x10 end of interrupt
  uint32_t RPR;     // 0x14 running priority
  uint32_t HPPIR;   // 0x18 highest priority pending
  uint32_t ABPR;    // 0x1C
  uint32_t AIAR;    // 0x20
  uint32_t AEOIR;   // 0x24
  uint32_t AHPPIR;  // 0x28
  uint32_t reserved0[41];
  uint32_t APR[4];  // 0xD0
  uint32_t NSAPR[4];  // 0xE0
  uint32_t reserved1[3];
  uint32_t IIDR;    // 0xFC
};
static_assert(offsetof(GiccRegs, CTLR) == 0x00);
static_assert(offsetof(GiccRegs, PMR) == 0x04);
static_assert(offsetof(GiccRegs, BPR) == 0x08);
static_assert(offsetof(GiccRegs, IAR) == 0x0C);
static_assert(offsetof(GiccRegs, EOIR) == 0x10);
static_assert(offsetof(GiccRegs, RPR) == 0x14);
static_assert(offsetof(GiccRegs, HPPIR) == 0x18);
static_assert(offsetof(GiccRegs, ABPR) == 0x1C);
static_assert(offsetof(GiccRegs, AIAR) == 0x20);
static_assert(offsetof(GiccRegs, AEOIR) == 0x24);
static_assert(offsetof(GiccRegs, AHPPIR) == 0x28);
static_assert(offsetof(GiccRegs, APR) == 0xD0);
static_assert(offsetof(GiccRegs, NSAPR) == 0xE0);
static_assert(offsetof(GiccRegs, IIDR) == 0xFC);

// GICv2m MSI frame (ARM Server Base System Architecture, GICv2m appendix).
struct V2mRegs {
  uint32_t reserved0[2];
  uint32_t MSI_TYPER;      // 0x008
  uint32_t reserved1[13];
  uint32_t MSI_SETSPI_NS;  // 0x040
  uint32_t reserved2[994];
  uint32_t MSI_IIDR;       // 0xFCC
};
static_assert(offsetof(V2mRegs, MSI_TYPER) == 0x008);
static_assert(offsetof(V2mRegs, MSI_SETSPI_NS) == 0x040);
static_assert(offsetof(V2mRegs, MSI_IIDR) == 0xFCC);

inline constexpr uint32_t kGicdCtlrEnable = 1u << 0;     // group 0 forwarding
inline constexpr uint32_t kTyperItLinesMask = 0x1F;      // lines = 32 * (N + 1)
inline constexpr uint32_t kGiccCtlrEnable = 1u << 0;     // group 0 signalling
inline constexpr uint32_t kIarIntidMask = 0x3FF;
inline constexpr uint32_t kIarCpuidShift = 10;           // source CPU of an SGI
inline constexpr uint32_t kIcfgrEdge = 2u;               // upper bit of the 2-bit field
inline constexpr uint32_t kV2mTyperCountMask = 0x3FF;    // MSI_TYPER[9:0]
inline constexpr uint32_t kV2mTyperBaseShift = 16;       // MSI_TYPER[25:16]
inline constexpr uint32_t kV2mTyperBaseMask = 0x3FF;

inline constexpr uint32_t kFirstPpi = 16;
inline constexpr uint32_t kFirstSpi = 32;
inline constexpr uint32_t kMaxIntid = 1020;       // INTIDs 1020..1023 are special
inline constexpr uint32_t kSpuriousIntid = 1023;
inline constexpr uint8_t kDefaultPriority = 0xA0; // written to every SPI by init
inline constexpr uint8_t kLowestPriorityMask = 0xFF;  // PMR: let every priority through

enum class Trigger : uint8_t { kLevel = 0, kEdge = 1 };

struct GicConfig {
  uintptr_t dist_base = 0;  // DT reg[0]
  uintptr_t cpu_base = 0;   // DT reg[1]
};

// What acknowledge() read from GICC_IAR. Pass it back unchanged to
// end_of_interrupt(): for SGIs the EOIR write must carry the source CPU too.
struct Irq {
  uint32_t iar;       // raw IAR value
  uint32_t intid;     // iar & 0x3FF
  bool spurious;      // intid 1020..1023: nothing to handle, no EOI allowed
};

class Gic {
 public:
  Gic() = default;
  Gic(const Gic&) = delete;
  Gic& operator=(const Gic&) = delete;

  // Distributor then this core's CPU interface:
  //  GICD_CTLR = 0; read TYPER (kBadHardware if it reports no SPIs);
  //  every INTID: ICENABLER/ICPENDR/ICACTIVER all-ones;
  //  every SPI: priority kDefaultPriority, level-triggered, targeted at
  //  this core (the mask the banked ITARGETSR0 reads back; CPU 0 if it
  //  reads zero, as on a uniprocessor GIC);
  //  GICD_CTLR = enable; then init_cpu_interface().
  // kInvalidArgument on a zero base address.
  Status init(const GicConfig& cfg);
  // PMR = 0xFF, BPR = 0 (all priority bits are group priority), CTLR = enable.
  // Called by init(); secondary cores call it for their banked interface.
  Status init_cpu_interface();

  // Implemented INTIDs: 32 * (GICD_TYPER.ITLinesNumber + 1), at most 1020.
  uint32_t line_count() const { return lines_; }
  // kOk if intid < line_count(), kOutOfRange otherwise, kNotReady before init.
  Status check_intid(uint32_t intid) const;

  // Write-1-to-set / write-1-to-clear enable bits.
  Status enable(uint32_t intid);
  Status disable(uint32_t intid);
  // Lower value = higher priority. The GIC may implement fewer than 8 bits.
  Status set_priority(uint32_t intid, uint8_t priority);
  // SGIs have fixed configuration (kInvalidArgument). PPIs and SPIs accepted.
  // A read-modify-write of GICD_ICFGR (two bits per INTID): configure at
  // boot, from one core, while the INTID is disabled.
  Status set_trigger(uint32_t intid, Trigger trigger);
  // CPU target mask (bit n = CPU n); SPIs only (kInvalidArgument otherwise),
  // mask must be non-zero.
  Status set_target(uint32_t intid, uint8_t cpu_mask);
  Status clear_pending(uint32_t intid);
  // True if the INTID's pending bit is set (false for an invalid INTID).
  bool is_pending(uint32_t intid) const;
  bool is_enabled(uint32_t intid) const;

  // Reads GICC_IAR (this acknowledges the interrupt: it becomes active).
  Irq acknowledge();
  // Writes the IAR value to GICC_EOIR. A spurious Irq is not written
  // (the architecture forbids EOI of 1020..1023): kInvalidArgument.
  Status end_of_interrupt(const Irq& irq);

 private:
  volatile GicdRegs* dist_ = nullptr;
  volatile GiccRegs* cpu_ = nullptr;
  uint32_t lines_ = 0;
};

// An MSI message: what a PCI function writes, and where, to raise an SPI.
struct MsiMessage {
  uint64_t address;
  uint32_t data;
};

class Gicv2m {
 public:
  Gicv2m() = default;
  Gicv2m(const Gicv2m&) = delete;
  Gicv2m& operator=(const Gicv2m&) = delete;

  // Reads MSI_TYPER. `frame_base` is the physical address of the frame (the
  // firmware is identity mapped; the address is also what devices write to).
  // `gic_lines` (Gic::line_count(), or 0 to skip the check) bounds the SPI
  // range. kBadHardware if the frame reports zero SPIs, a base below 32 or
  // a range beyond 1020 / gic_lines.
  Status init(uintptr_t frame_base, uint32_t gic_lines);

  uint32_t spi_base() const { return spi_base_; }
  uint32_t spi_count() const { return spi_count_; }
  // Doorbell address: frame base + 0x40 (MSI_SETSPI_NS).
  uint64_t doorbell_address() const { return frame_ + offsetof(V2mRegs, MSI_SETSPI_NS); }

  // Message for MSI number n (0-based within this frame): address = doorbell,
  // data = spi_base + n. kOutOfRange if n >= spi_count, kNotReady before init.
  Status message(uint32_t n, MsiMessage* out) const;
  // The SPI raised by MSI number n (same checks), to enable it at the GIC.
  Status spi_for(uint32_t n, uint32_t* spi) const;

 private:
  uintptr_t frame_ = 0;
  uint32_t spi_base_ = 0;
  uint32_t spi_count_ = 0;
};

}  // namespace hal::gic
