// The board's link fabric inside vtrn-hw. See vtrn/hw/board_links.h.
#include "vtrn/hw/board_links.h"

#include "vtrn/board.h"

namespace vtrn::hw {

BoardLinks::~BoardLinks() { stop(); }

bool BoardLinks::start(const uint8_t* dtb, size_t size, const std::vector<ChipHw*>& chips, std::string* err) {
  std::vector<int> doorbells;
  auto board_chip = std::make_unique<board::Chip>();
  for (ChipHw* c : chips) {
    const Error r = board::parse_chip(dtb, size, c->id(), board_chip.get());
    if (!r.ok()) {
      *err = "chip " + std::to_string(c->id()) + ": " + r.detail();
      return false;
    }
    if (board_chip->port_count == 0) continue;
    // Ports are sorted by reg; the engine of port p is LinkEngineBlock p.
    const uint32_t ports = board_chip->ports[board_chip->port_count - 1].index + 1;
    if (!fabric_.attach(c->id(), c->memory(), *c, c->errors(), ports, err)) return false;
    for (uint32_t p = 0; p < ports; ++p) doorbells.push_back(c->link_doorbell_fd(p));
    chips_.push_back(c);
    ports_ += ports;
  }
  if (chips_.empty()) return true;
  auto topo = std::make_unique<board::Topology>();
  const Error r = board::parse_topology(dtb, size, topo.get());
  if (!r.ok()) {
    *err = r.detail();
    return false;
  }
  if (!fabric_.wire_topology(*topo, err, &wires_)) return false;
  thread_ = std::make_unique<LinkFabricThread>(fabric_);
  if (!thread_->start(doorbells, err)) {
    thread_.reset();
    return false;
  }
  for (ChipHw* c : chips_) c->set_links(&fabric_, thread_.get());
  return true;
}

void BoardLinks::stop() {
  for (ChipHw* c : chips_) c->set_links(nullptr, nullptr);
  if (thread_) thread_->stop();
  thread_.reset();
}

}  // namespace vtrn::hw
