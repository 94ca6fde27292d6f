// fw::links::attach_pcie: picks the chip-to-chip link functions out of the
// enumerated PCIe bus. Link functions are ivshmem-plain (no MSI-X
// capability) at the slots vtrnd reserves for link ports (vtrn/links_abi.h);
// the host interface is ivshmem-doorbell and is left alone. BAR2 of each is
// already inside the 64-bit window that main.cpp maps as Normal memory
// (hal::pcie places prefetchable 64-bit BARs there).
#include <stdint.h>

#include "fw/links_service.h"
#include "fw/log.h"
#include "hal/ivshmem.h"
#include "hal/pcie.h"

namespace fw::links {

uint32_t attach_pcie(const hal::pcie::Ecam& ecam, const hal::pcie::Topology& topo) {
  uint32_t taken = 0;
  for (uint32_t i = 0; i < topo.count; ++i) {
    const hal::pcie::Function& fn = topo.functions[i];
    if (!hal::ivshmem::is_ivshmem(fn)) continue;
    hal::ivshmem::Kind kind;
    if (hal::ivshmem::classify(ecam, fn, &kind) != hal::Status::kOk ||
        kind != hal::ivshmem::Kind::kPlain) {
      continue;
    }
    hal::ivshmem::SharedMemory shm;
    if (hal::ivshmem::shared_memory(fn, &shm) != hal::Status::kOk) {
      log(kLogWarn, "links: %02x:%02x.%x ivshmem-plain without an assigned BAR2, ignored",
          fn.bdf.bus, fn.bdf.dev, fn.bdf.fn);
      continue;
    }
    if (fn.bdf.bus != 0 || fn.bdf.fn != 0 ||
        !add_function(fn.bdf.dev, reinterpret_cast<uint8_t*>(uintptr_t(shm.cpu_base)), shm.size)) {
      log(kLogWarn, "links: %02x:%02x.%x ivshmem-plain outside the link-port slots, ignored",
          fn.bdf.bus, fn.bdf.dev, fn.bdf.fn);
      continue;
    }
    ++taken;
  }
  return taken;
}

}  // namespace fw::links
