// fw::hbm::HbmService: the chip's HBM service, the Manager (fw/hbm_manager.h:
// owners, access check, ECC model, the hbm request routes) plus its
// firmware glue. Set up once at boot from the board DTB over the HBM range
// the DMA service derived (RAM above the firmware's 64 MiB), with its
// metadata in an arena inside the service object: there is no heap after
// boot. At init it hands the DMA service its access policy and the remap
// window of stitched allocations; every turn it logs the ECC records the
// last requests produced and sends each to the host as Event{hbm_ecc}.
//
// The cross-service API is check(): the job executors and the collectives
// call it, with the owner they act for, before touching HBM. Firmware only
// (logging, panics, fw::mmu); the request handling is the Manager's and is
// tested on the host.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/hbm_manager.h"
#include "fw/service.h"
#include "vtrn/hostif.h"

namespace fw::hbm {

// Device addresses of stitched allocations: 0x60_0000_0000 lies above QEMU
// virt's high ECAM (0x40_1000_0000 + 256 MiB) and below its high PCIe MMIO
// window (0x80_0000_0000), in no RAM, inside the firmware's 40-bit VA;
// init() also checks it against every identity mapping made so far.
inline constexpr uint64_t kRemapBase = 0x60'0000'0000ull;

class HbmService final : public Manager {
 public:
  constexpr HbmService() : policy_(this) {}

  // Panics (kPanicBoard) when the board's HBM needs more metadata than the
  // arena holds, or the allocator refuses the geometry. Reserves the remap
  // window (4x the HBM up to mmu::kRemapMaxBytes) in fw::mmu, wires the
  // allocator's Mapper to it, sets kCapHbm (READY publishes it).
  void init(const Boot& boot) override;
  Vectors poll(Turn& turn) override;
  void fill_telemetry(vtrn::hostif::Telemetry* t) const override;
  // After a request that changed the allocations or retired pages: the
  // engines' MPU follows before the response goes out (fw/engines_service.h).
  void served(uint64_t now_ns) override;

 private:
  DmaPolicy policy_;
  uint64_t mpu_layout_ = 0;  // layout_generation() the MPU was last built from
  bool mpu_unchecked_ = false;
};

HbmService& service();

// Whether [addr, addr + len) lies inside one live allocation of `owner`
// with no retired page (kNotOwner: another owner's); any core: reads only
// what core 0 publishes at boot and in requests between job steps.
Access check(uint64_t addr, uint64_t len, uint64_t owner);

}  // namespace fw::hbm
