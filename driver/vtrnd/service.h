// vtrnd's service contract: what a service is to the daemon, and the
// registry that routes requests to services and fans the daemon's hooks out
// to them. The daemon itself is the transport (socket, clients, frames) plus
// this registry plus its own two requests about itself (hello, shutdown).
//
// A service serves a closed set of vtrn.api Request bodies (bodies()), each
// body by exactly one service (the registry refuses a second claim). Before
// any handler runs the daemon has decoded the request, refused it while
// shutting down, and, for the bodies that name one chip (marked so in the
// service's Route), looked the chip up and answered "no chip N on this
// board" itself; a handler gets the Chip. Services reach each other through
// the typed functions their headers declare (DmaService::write/read,
// HbmService::alloc/free_owner), never through forged client requests.
//
// What it is not: a plugin system (the registry is filled in Daemon::start,
// in start order), nor a thread boundary (everything runs on the one
// EventLoop).
#pragma once

#include <stdint.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "proto_arena.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/fw_call.h"
#include "vtrn_api.pb-c.h"
#include "vtrn_ctrl.pb-c.h"

namespace drv {

// The one text of STATUS_UNKNOWN_CHIP (the daemon's validator, and the
// requests that name a chip only sometimes: job submit, link list).
inline std::string no_chip_text(uint64_t chip) { return "no chip " + std::to_string(chip) + " on this board"; }

using RequestBody = Vtrn__Api__Request__BodyCase;

// One request kind a service serves. `chip`: the body names one chip in its
// `chip` field, and the daemon looks it up before handle() (answering "no
// chip N on this board" itself); false for bodies that name a chip only
// sometimes or not at all. `admin`: the request changes the board for every
// tenant (resets, fault injection, power and link control), so the daemon
// answers PERMISSION_DENIED to anyone but the admin before handle().
struct Route {
  RequestBody body;
  bool chip = false;
  bool admin = false;
};

class Service {
 public:
  virtual ~Service() = default;

  // The request kinds the registry routes here.
  [[nodiscard]] virtual std::span<const Route> bodies() const = 0;
  // One request of a kind bodies() lists. `chip`: the chip its body names
  // when its route says so, else null.
  virtual void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) = 0;
  // The client connection closed: drop its queued work, free what it owned.
  virtual void client_gone(uint64_t cid) { (void)cid; }
  // A chip changed state (after the chip's own bookkeeping and the
  // per-chip hooks a service set in its add_chip).
  virtual void on_chip_state(Chip& chip) { (void)chip; }
  // An event the chip's firmware sent.
  virtual void on_event(uint32_t chip, const Vtrn__Ctrl__Event& ev) {
    (void)chip;
    (void)ev;
  }
  // Its fields of one chip's entry in a TelemetryResponse; `a` owns what
  // they point at until the response is packed.
  virtual void fill_telemetry(Chip& chip, Vtrn__Api__Telemetry& t, ProtoArena& a) {
    (void)chip;
    (void)t;
    (void)a;
  }
};

// The services of one daemon in start order: hooks run in that order,
// destruction goes in reverse (a service may use any service added before
// it until it is gone).
class ServiceRegistry {
 public:
  ServiceRegistry() = default;
  ~ServiceRegistry() { clear(); }
  ServiceRegistry(const ServiceRegistry&) = delete;
  ServiceRegistry& operator=(const ServiceRegistry&) = delete;

  // Adds a service and its routes and returns it; null (and nothing added)
  // when one of its bodies is already routed to another service.
  template <typename S>
  [[nodiscard]] S* add(std::unique_ptr<S> s) {
    for (const Route& r : s->bodies()) {
      if (routes_.count(r.body) != 0) return nullptr;
    }
    for (const Route& r : s->bodies()) routes_[r.body] = {s.get(), r.chip, r.admin};
    S* raw = s.get();
    owned_.push_back(std::move(s));
    return raw;
  }
  // The service that serves `body`, or null.
  [[nodiscard]] Service* route(RequestBody body) const {
    auto it = routes_.find(body);
    return it == routes_.end() ? nullptr : it->second.service;
  }
  // Whether a service's body names one chip the daemon looks up.
  [[nodiscard]] bool names_chip(RequestBody body) const {
    auto it = routes_.find(body);
    return it != routes_.end() && it->second.chip;
  }
  // Whether a service's body is the admin's alone.
  [[nodiscard]] bool admin_only(RequestBody body) const {
    auto it = routes_.find(body);
    return it != routes_.end() && it->second.admin;
  }
  template <typename F>
  void each(F&& f) {
    for (auto& s : owned_) f(*s);
  }
  // Destroys the services, last added first.
  void clear() {
    routes_.clear();
    while (!owned_.empty()) owned_.pop_back();
  }

 private:
  std::vector<std::unique_ptr<Service>> owned_;
  struct Target {
    Service* service;
    bool chip;
    bool admin;
  };
  std::map<RequestBody, Target> routes_;
};

}  // namespace drv
