// Chip memory helpers and the error ring. See vtrn/hw/engine_context.h.
#include "vtrn/hw/engine_context.h"

#include <time.h>

#include "vtrn/ctrl_ring.h"

namespace vtrn::hw {

using hostif::load_acquire;
using hostif::store_release;

uint8_t* ChipMemory::ram_at(uint64_t addr, uint64_t length) const {
  if (addr < ram_base || addr - ram_base > ram_size || length > ram_size - (addr - ram_base)) return nullptr;
  return ram + (addr - ram_base);
}

void ErrorLog::post(engine::ErrorRecord r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine::ErrorBlock* b = mem_.errors();
    r.seq = prod_;
    b->records[prod_ % engine::kErrorRecords] = r;
    // Release: the record is visible before the index that publishes it.
    store_release(&b->prod, ++prod_);
    ++posted_;
  }
  if (load_acquire(&mem_.control()->error_irq_armed)) signals_.chip_irq(engine::kVectorControl);
}

void ErrorLog::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  prod_ = 0;
  store_release(&mem_.errors()->prod, 0);
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace vtrn::hw
