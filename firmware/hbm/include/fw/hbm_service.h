// fw::hbm: the chip's HBM service as the rest of the firmware sees it. One
// Manager (fw/hbm_manager.h) per chip, set up once at boot from the board
// DTB over the HBM range the DMA service derived (RAM above the firmware's
// 64 MiB, fw::dma::derive_hbm), with its metadata in a static arena: there
// is no heap after boot.
//
// The free functions are the cross-service API (session2.md): the DMA
// engine's HBM policy and the job executors call check() before touching
// HBM; executors allocate job buffers with owner job_owner(id) and call
// free_owner() when the job ends. They are plain forwards to the one
// Manager, so host unit tests of other services can link hbm_api.cpp and
// init manager() themselves; init(), service_events() and the logging live
// in hbm_service.cpp, which is firmware only.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fw/hbm_manager.h"
#include "vtrn/board.h"
#include "vtrn/hostif.h"

namespace fw::hbm {

// The chip's one manager (portable: hbm_api.cpp).
Manager& manager();

Status alloc(uint64_t owner, uint32_t category, uint64_t bytes, uint64_t align, uint64_t* addr);
Status free(uint64_t owner, uint64_t addr);
uint64_t free_owner(uint64_t owner);  // bytes freed
Access check(uint64_t addr, uint64_t len);
// The vtrn.ctrl hbm range (for ChipBackend::do_serve).
bool serve(const Vtrn__Ctrl__Request& req, Vtrn__Ctrl__Response* resp, pb::Arena& arena,
           char* error, size_t error_cap);
// The policy to hand to the DMA service (valid for the firmware's lifetime).
const vtrn::dma::HbmPolicy* dma_policy();
// Telemetry v2 HBM/ECC fields.
void fill_telemetry(vtrn::hostif::Telemetry* t);

// ---- firmware only (hbm_service.cpp) ----
// Boot: panics (kPanicBoard) when the board's HBM needs more metadata than
// the static arena holds, or the allocator refuses the geometry; then sets
// kCapHbm in `header` (READY publishes it).
// It also reserves the remap window of stitched allocations in fw::mmu
// (kRemapBase, 4x the HBM up to mmu::kRemapMaxBytes) and wires the
// allocator's Mapper to it.
void init(const vtrn::board::Chip& chip, uint64_t hbm_base, uint64_t hbm_size,
          vtrn::hostif::FwHeader* header);
// Device addresses of stitched allocations: 0x60_0000_0000 lies above QEMU
// virt's high ECAM (0x40_1000_0000 + 256 MiB) and below its high PCIe MMIO
// window (0x80_0000_0000), in no RAM, inside the firmware's 40-bit VA;
// init() also checks it against every identity mapping made so far.
inline constexpr uint64_t kRemapBase = 0x60'0000'0000ull;
// The window after init() (bytes 0 before).
void remap_window(uint64_t* base, uint64_t* bytes);
// Logs every ECC record not yet seen and hands each to `send` (an Event to
// the host); returns how many were handled. `send` may be null.
uint32_t service_events(bool (*send)(const EccRecord& r));

}  // namespace fw::hbm
