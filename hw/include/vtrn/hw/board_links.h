// vtrn::hw::BoardLinks: the link engines of a board inside vtrn-hw (engine
// ABI 1.4). It owns the board's LinkFabric and the LinkFabricThread that
// runs it, and joins them to the chips vtrn-hw serves:
//   - every chip whose board DT node has link ports is attached with
//     (highest vtrn,link-port reg + 1) link engines, so its IdBlock
//     advertises kCapLinkEngines and link_ports;
//   - the wires are the board DT's /links (LinkFabric::wire_topology): a
//     chip-to-chip link whose two chips are both served joins their ports;
//     a switch end or a chip not served leaves the port unwired;
//   - the thread sleeps on every attached port's doorbell (the eventfd the
//     chip's QEMU writes for kVectorLink0 + p) and raises completions and
//     arrivals through each chip's MSI-X (ChipHw::chip_irq);
//   - each ChipHw is given the fabric (ChipHw::set_links): its reset takes
//     the chip out of the fabric first (sends of other chips in flight to it
//     complete with kLinkPeerReset, its link blocks are zeroed), and puts it
//     back before reset_ack; its control vector (MPU updates) kicks the
//     thread, which acknowledges the new MPU generation for the link ports.
// A board with no link ports starts nothing.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "vtrn/hw/chip.h"
#include "vtrn/hw/link_engine.h"

namespace vtrn::hw {

class BoardLinks {
 public:
  BoardLinks() = default;
  ~BoardLinks();
  BoardLinks(const BoardLinks&) = delete;
  BoardLinks& operator=(const BoardLinks&) = delete;

  // `chips` are started and must outlive stop(). False (err names the chip
  // or link) on a board DT that does not parse or a wiring the fabric refuses.
  bool start(const uint8_t* dtb, size_t size, const std::vector<ChipHw*>& chips, std::string* err);
  // Stops the thread and detaches every chip (they keep running without links).
  void stop();

  [[nodiscard]] bool running() const { return thread_ != nullptr; }
  // Attached link ports over every chip, and wires between two of them.
  [[nodiscard]] uint32_t ports() const { return ports_; }
  [[nodiscard]] uint32_t wires() const { return wires_; }
  [[nodiscard]] LinkFabric& fabric() { return fabric_; }
  [[nodiscard]] uint64_t wakeups() const { return thread_ ? thread_->wakeups() : 0; }

 private:
  LinkFabric fabric_;
  std::unique_ptr<LinkFabricThread> thread_;
  std::vector<ChipHw*> chips_;
  uint32_t ports_ = 0;
  uint32_t wires_ = 0;
};

}  // namespace vtrn::hw
