// What every engine model of one chip shares: the memory it reaches (the
// engine region, the chip's BAR2, the chip's RAM with HBM inside it), the
// way it raises interrupts, and the chip's error-record ring.
//
// The models (dma_engine.h, tensor_engine.h) are plain objects driven one
// pass at a time by their engine thread (hw/src/chip.cpp); Signals is how
// they reach the outside (eventfd writes in vtrn-hw, a recorder in unit
// tests), so the models have no file descriptors and no threads in them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <mutex>

#include "vtrn/engine_abi.h"
#include "vtrn/seqlock.h"

namespace vtrn::hw {

struct ChipMemory {
  uint8_t* region = nullptr;  // engine region, engine::kRegionBytes
  uint8_t* bar2 = nullptr;    // the host interface BAR2 (host DMA rings and window)
  uint64_t bar2_size = 0;
  uint8_t* ram = nullptr;     // the chip's RAM as vtrn-hw maps it
  uint64_t ram_base = 0;      // chip physical address of ram[0]
  uint64_t ram_size = 0;
  int ram_fd = -1;            // the memfd behind `ram` (offset 0 = ram_base), for the
                              // DMA engines' remap views; -1: no translation

  [[nodiscard]] engine::IdBlock* id() const {
    return reinterpret_cast<engine::IdBlock*>(region + engine::kIdOffset);
  }
  [[nodiscard]] engine::ControlBlock* control() const {
    return reinterpret_cast<engine::ControlBlock*>(region + engine::kControlOffset);
  }
  [[nodiscard]] engine::ErrorBlock* errors() const {
    return reinterpret_cast<engine::ErrorBlock*>(region + engine::kErrorOffset);
  }
  [[nodiscard]] engine::MpuBlock* mpu() const {
    return reinterpret_cast<engine::MpuBlock*>(region + engine::kMpuOffset);
  }
  [[nodiscard]] engine::DmaEngineBlock* dma(uint32_t i) const {
    return reinterpret_cast<engine::DmaEngineBlock*>(region + engine::dma_engine_offset(i));
  }
  [[nodiscard]] engine::TensorEngineBlock* tensor(uint32_t j) const {
    return reinterpret_cast<engine::TensorEngineBlock*>(region + engine::tensor_engine_offset(j));
  }
  // ram + (addr - ram_base) when [addr, addr + length) lies inside RAM, else null.
  [[nodiscard]] uint8_t* ram_at(uint64_t addr, uint64_t length) const;
};

class Signals {
 public:
  // MSI-X vector `vector` of the engine function into the chip's GIC.
  virtual void chip_irq(uint16_t vector) = 0;
  // The host's DMA completion vector (hostif::kVectorDma), straight to the host.
  virtual void host_irq() = 0;

 protected:
  ~Signals() = default;
};

// The chip's error ring (engine::ErrorBlock). Engines of one chip post from
// their own threads; the ring has one writer side (hw), so posts are
// serialised here.
class ErrorLog {
 public:
  ErrorLog(const ChipMemory& mem, Signals& signals) : mem_(mem), signals_(signals) {}
  ErrorLog(const ErrorLog&) = delete;
  ErrorLog& operator=(const ErrorLog&) = delete;

  // Writes the record (seq filled in), publishes prod, and raises
  // kVectorControl when the fw armed error interrupts.
  void post(engine::ErrorRecord r);
  // Chip reset: the ring restarts at 0.
  void reset();
  [[nodiscard]] uint64_t posted() const { return posted_; }

 private:
  const ChipMemory& mem_;
  Signals& signals_;
  std::mutex mu_;
  uint32_t prod_ = 0;
  uint64_t posted_ = 0;
};

using Clock = uint64_t (*)();
uint64_t monotonic_ns();

// An engine's engine::EngineStats block (one writer thread): counted in a
// private copy (stats_->x += n), then publish()ed through the one seqlock
// (common/hostif). The copy starts from what the block held, so counts go on
// across an engine rebuilt over the same memory.
class StatsWriter {
 public:
  explicit StatsWriter(engine::EngineStats* shared) {
    if (shared == nullptr) return;
    if (!vtrn::hostif::seqlock_read(shared, &v_, 1)) v_ = engine::EngineStats{};
    writer_.attach(shared);
    publish();
  }
  engine::EngineStats* operator->() { return &v_; }
  void publish() {
    if (writer_.attached()) writer_.publish(v_);
  }

 private:
  engine::EngineStats v_{};
  vtrn::hostif::SeqlockWriter<engine::EngineStats> writer_;
};

}  // namespace vtrn::hw
