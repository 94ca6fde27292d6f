// The host's view of one chip's BAR2 (include/vtrn/hostif.h): header state,
// control ring pair, log ring, telemetry seqlock and panic record, over a
// mapping owned elsewhere (IvshmemServer in vtrnd, plain memory in tests).
//
// Nothing the firmware writes is trusted: the header is copied and
// validated (validate_layout) before any region is touched, rings check
// indexes, lengths, kinds and CRCs (common/hostif), the telemetry block is
// read with a bounded seqlock retry and the panic record is copied and its
// strings bounded. This class has no I/O and no timing: doorbells and
// timeouts belong to Chip.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/ctrl_ring.h"
#include "vtrn/drv/error.h"
#include "vtrn/hostif.h"
#include "vtrn/layout.h"
#include "vtrn/log_ring.h"
#include "vtrn/power_telemetry.h"

namespace drv {

// Text from the chip made printable ASCII (other bytes become '?'):
// firmware and UART bytes are untrusted, and protobuf strings must be valid
// UTF-8.
std::string printable(const std::string& s);

class HostInterface {
 public:
  // Forgets any previous bring-up.
  void attach(uint8_t* base, uint64_t size);

  // FwHeader::state as the firmware last published it (raw, may be any
  // value; compare against hostif::FwState).
  [[nodiscard]] uint32_t fw_state() const;
  [[nodiscard]] uint64_t heartbeat() const;
  // A snapshot of the header (the firmware may be writing it concurrently;
  // only a validated copy is ever used for region addresses).
  [[nodiscard]] vtrn::hostif::FwHeader header_snapshot() const;

  // Copies and validates the header, then sets up the rings, log reader and
  // telemetry pointer. false + *err (one line) when the layout is invalid.
  Error bring_up();
  [[nodiscard]] bool up() const { return up_; }
  [[nodiscard]] const vtrn::hostif::FwHeader& header() const { return hdr_; }
  [[nodiscard]] const vtrn::hostif::Layout& layout() const { return layout_; }
  // The mapping (for DmaEngine, which takes its regions from layout()).
  [[nodiscard]] uint8_t* bar2() const { return base_; }

  // Control queue (only after bring_up).
  vtrn::hostif::RingStatus push_request(uint32_t seq, const void* payload, uint32_t length);
  // Pops one response or event into *hdr / *payload.
  vtrn::hostif::RingStatus pop_response(vtrn::hostif::SlotHeader* hdr,
                                        std::vector<uint8_t>* payload);
  [[nodiscard]] bool response_pending();
  [[nodiscard]] vtrn::hostif::CtrlError request_ring_error() const { return req_.error(); }
  [[nodiscard]] vtrn::hostif::CtrlError response_ring_error() const { return resp_.error(); }
  // The firmware's own latched error word (0 = healthy).
  [[nodiscard]] uint32_t fw_ring_error() const;

  // Seqlock read; false when the writer never held still (bounded retries).
  bool read_telemetry(vtrn::hostif::Telemetry* out) const;
  // The power/thermal block (kRegionPower) under its seqlock, validated:
  // kCapPower set, the region large enough, version not newer than ours,
  // counts within the fixed arrays, enumerations and ranges sane. false +
  // *err (one line) otherwise, or when the writer never held still.
  Error read_power(vtrn::power::PowerTelemetry* out) const;
  // Copies the panic record (from the validated region, or the default
  // offset when the firmware panicked before publishing its layout); false
  // when there is no valid record. The reason is NUL-terminated.
  bool read_panic(vtrn::hostif::PanicRecord* out) const;

  // New complete log lines since the last call, each without its '\n'.
  // *lost_bytes receives the bytes lost to overrun since the last call.
  // Reads at most one ring's worth (or 8 KiB) per call.
  void read_log_lines(std::vector<std::string>* lines, uint64_t* lost_bytes);

 private:
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool up_ = false;
  vtrn::hostif::FwHeader hdr_{};
  vtrn::hostif::Layout layout_{};
  vtrn::hostif::RingProducer req_;
  vtrn::hostif::RingConsumer resp_;
  vtrn::hostif::LogReader log_;
  uint64_t log_lost_seen_ = 0;
  const vtrn::hostif::Telemetry* telemetry_ = nullptr;
  vtrn::hostif::CtrlIndexes* indexes_ = nullptr;
};

const char* fw_state_name(uint32_t s);

}  // namespace drv
