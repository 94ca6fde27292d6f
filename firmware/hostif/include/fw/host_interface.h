// The firmware side of host interface v1 in BAR2 (include/vtrn/hostif.h):
// header and region table, telemetry seqlock, heartbeat, state changes, and
// the ring memory descriptors the control service runs on.
//
// Boot protocol on BAR2 (the host must not write BAR2 before READY): the
// firmware first sets state OFF (a host that saw the previous boot's READY
// stops trusting the header), clears the panic record, telemetry, control
// indexes and log header, writes the header with the new boot_generation
// (previous + 1 when the old header is valid, so a reset is visible), the
// region table, and finally state BOOTING with release order. Indexes
// therefore restart at 0 every boot generation.
#pragma once

#include <stdint.h>

#include "vtrn/ctrl_ring.h"
#include "vtrn/hostif.h"
#include "vtrn/seqlock.h"

namespace fw::hostif {

struct HeaderInfo {
  uint64_t bar2_size = 0;
  uint32_t chip_id = 0;
  uint32_t fw_version = 0;  // major << 16 | minor << 8 | patch
  const char* build_id = "";
};

class HostInterface {
 public:
  HostInterface() = default;
  HostInterface(const HostInterface&) = delete;
  HostInterface& operator=(const HostInterface&) = delete;

  // Publishes the header (state BOOTING) in the BAR2 at `base`.
  void init(uint64_t base, const HeaderInfo& info);

  [[nodiscard]] vtrn::hostif::FwHeader* header() const { return header_; }
  [[nodiscard]] vtrn::hostif::PanicRecord* panic_record() const;
  [[nodiscard]] vtrn::hostif::LogRingHeader* log_ring() const;
  [[nodiscard]] uint64_t log_data_size() const { return vtrn::hostif::kLogDataSize; }
  [[nodiscard]] uint32_t boot_generation() const { return generation_; }
  // Request ring (host produces) and response ring (firmware produces); both
  // report errors in CtrlIndexes::fw_error.
  [[nodiscard]] vtrn::hostif::RingMemory request_ring() const;
  [[nodiscard]] vtrn::hostif::RingMemory response_ring() const;

  void set_state(vtrn::hostif::FwState state);
  void beat();
  // Heartbeats published so far (our copy; BAR2 is host-writable).
  [[nodiscard]] uint64_t heartbeat() const { return heartbeat_; }
  // Copies `t` into the telemetry block under its seqlock (seq and version
  // fields of `t` are ignored).
  void publish_telemetry(const vtrn::hostif::Telemetry& t);

 private:
  uint8_t* base_ = nullptr;
  vtrn::hostif::FwHeader* header_ = nullptr;
  vtrn::hostif::SeqlockWriter<vtrn::hostif::Telemetry> telemetry_;
  vtrn::hostif::CtrlIndexes* indexes_ = nullptr;
  uint32_t generation_ = 0;
  uint64_t heartbeat_ = 0;
};

}  // namespace fw::hostif
