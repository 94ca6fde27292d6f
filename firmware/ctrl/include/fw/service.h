// fw::Service: the contract every firmware service implements, and the
// route table through which it serves its part of vtrn.ctrl.Request.
//
// The firmware is a table of services (firmware/services.cpp) that fw_main
// iterates, as SCP-firmware's framework iterates its modules: boot calls
// init() on each in table order, the event loop calls poll() on each every
// turn and tick() once per telemetry period, the WFI predicate asks each
// has_work() and next_wake_ns(), telemetry asks each fill_telemetry().
// main names no service. A service's state lives in its own object; other
// services reach it through the typed functions its header declares, never
// through its globals.
//
// Requests: a service lists the vtrn.ctrl.Request body cases it serves in a
// table of Routes, one row per message id with the request and response
// body it was written for and its handler (SCP-firmware's handler table and
// payload-size table in one row, so the two can never differ in length).
// The control dispatcher (fw/ctrl_dispatch.h) runs one validator before any
// handler: the kind must have a route, the decoded body must be the
// message type the route names, the service must be ready(); only then is
// the response body allocated and the handler called. A handler returns a
// vtrn::Error; the dispatcher maps its code to a vtrn.ctrl Status in one
// place.
//
// Portable: no hardware in here, so a service's request handling is unit
// tested on the host through the same dispatcher the chip runs.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <span>

#include "fw/pb_arena.h"
#include "vtrn/error.h"
#include "vtrn/hostif.h"
#include "vtrn_ctrl.pb-c.h"

namespace vtrn::board {
struct Board;
struct Chip;
}  // namespace vtrn::board
namespace hal::gic {
class Gic;
class Gicv2m;
}  // namespace hal::gic
namespace hal::pcie {
class Ecam;
struct Topology;
}  // namespace hal::pcie

namespace fw {

namespace platform {
struct Platform;
}
namespace hostif {
class HostInterface;
}
namespace ctrl {
struct ChipFacts;
}

class Service;

// What boot discovered, for init(). Everything pointed to outlives the
// firmware.
struct Boot {
  const platform::Platform* platform = nullptr;
  const vtrn::board::Board* board = nullptr;
  const vtrn::board::Chip* chip = nullptr;
  const void* board_fdt = nullptr;  // the board DTB (optional properties)
  size_t board_size = 0;
  hostif::HostInterface* hostif = nullptr;  // BAR2 header, rings, heartbeat
  uint8_t* bar2 = nullptr;
  uint64_t bar2_size = 0;
  hal::gic::Gic* gic = nullptr;
  const hal::gic::Gicv2m* v2m = nullptr;
  uint32_t msi_first_free = 0;  // first GICv2m message the host interface did not take
  uint32_t timer_intid = 0;  // the virtual timer PPI
  const hal::pcie::Ecam* ecam = nullptr;
  const hal::pcie::Topology* topology = nullptr;
  uint64_t firmware_end = 0;  // first byte above the image and the board DTB
  const ctrl::ChipFacts* facts = nullptr;
  std::span<Service* const> services;  // the whole table (the dispatcher routes over it)
};

// One turn of the event loop, as poll() and tick() see it.
struct Turn {
  uint64_t idle_ns = 0;  // the boot core's WFI time since boot (set for tick())
  // Set by a service to halt the chip once this turn's responses are out.
  const char* halt = nullptr;
};

// Host doorbell vectors a hook asks the loop to ring: bit n = vector n.
using Vectors = uint32_t;
constexpr Vectors vector(uint16_t v) { return Vectors(1) << v; }

inline constexpr uint64_t kNever = UINT64_MAX;

// A request being served: its time, its arena, and what the handler may ask
// of the dispatcher.
class Call {
 public:
  enum class Action : uint8_t {
    kNone = 0,
    kShutdown = 1,  // the response says OK; the caller halts after queueing it
  };

  Call(const Service& service, pb::Arena& arena, uint64_t now_ns)
      : service_(service), arena_(arena), now_ns_(now_ns) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  [[nodiscard]] uint64_t now_ns() const { return now_ns_; }
  [[nodiscard]] pb::Arena& arena() { return arena_; }

  // A sub-message of the response, from the arena (it outlives packing);
  // nullptr when the arena ran out (return no_memory()).
  template <typename T>
  T* make(void (*init)(T*)) {
    T* p = static_cast<T*>(alloc(sizeof(T)));
    if (p != nullptr) init(p);
    return p;
  }
  // n zeroed elements; nullptr for n == 0 or when the arena ran out.
  template <typename T>
  T* make_array(size_t n) {
    return n == 0 ? nullptr : static_cast<T*>(alloc_zeroed(sizeof(T) * n));
  }
  // The error for an arena that ran dry while building `what`.
  [[nodiscard]] vtrn::Error no_memory(const char* what) const;

  void set_action(Action a) { action_ = a; }
  [[nodiscard]] Action action() const { return action_; }

 private:
  void* alloc(size_t bytes);
  void* alloc_zeroed(size_t bytes);

  const Service& service_;
  pb::Arena& arena_;
  uint64_t now_ns_;
  Action action_ = Action::kNone;
};

// One message id of a service: the Request body case, the Response body
// case that answers it, the sizes of the two body structs the handler takes
// (the validator checks them against the decoded message's descriptor), and
// the handler. Build rows with route<&S::handler>(request, response).
struct Route {
  uint32_t request_case;
  uint32_t response_case;
  size_t request_size;
  size_t response_size;
  vtrn::Error (*handle)(Service& service, const void* request, void* response, Call& call);
};

namespace route_detail {
template <typename F>
struct Handler;
template <typename S, typename Req, typename Resp>
struct Handler<vtrn::Error (S::*)(const Req&, Resp&, Call&)> {
  using Self = S;
  using Request = Req;
  using Response = Resp;
};
template <auto Fn>
vtrn::Error thunk(Service& s, const void* request, void* response, Call& call) {
  using H = Handler<decltype(Fn)>;
  return (static_cast<typename H::Self&>(s).*Fn)(
      *static_cast<const typename H::Request*>(request),
      *static_cast<typename H::Response*>(response), call);
}
}  // namespace route_detail

// A row for `Fn`, a member `vtrn::Error S::fn(const ReqBody&, RespBody&, Call&)`.
template <auto Fn>
constexpr Route route(uint32_t request_case, uint32_t response_case) {
  using H = route_detail::Handler<decltype(Fn)>;
  return Route{request_case, response_case, sizeof(typename H::Request),
               sizeof(typename H::Response), &route_detail::thunk<Fn>};
}

class Service {
 public:
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // The prefix of its log lines and error details ("hbm").
  [[nodiscard]] const char* name() const { return name_; }
  // Its route table, one row per Request body case it serves (none: no
  // requests).
  [[nodiscard]] virtual std::span<const Route> routes() const { return {}; }
  // The route for a Request body case; nullptr when this service has none.
  [[nodiscard]] const Route* find(uint32_t request_case) const;

  // Boot, in table order, before READY. Anything wrong panics, naming it.
  virtual void init(const Boot& boot) { (void)boot; }
  // The validator's last check before a handler of this service runs: a
  // service that is not up answers kNotReady (the host gets BUSY).
  [[nodiscard]] virtual vtrn::Error ready() const { return vtrn::Error(); }
  // After each of this service's requests, before the response is packed:
  // a service whose state the host reads from BAR2 republishes it here, so
  // a host never holds a response newer than the block.
  virtual void served(uint64_t now_ns) { (void)now_ns; }
  // Once, right after the chip went READY.
  virtual Vectors on_ready(uint64_t ready_ns) {
    (void)ready_ns;
    return 0;
  }
  // Every turn of the event loop.
  virtual Vectors poll(Turn& turn) {
    (void)turn;
    return 0;
  }
  // Once per telemetry period, before telemetry is published.
  virtual void tick(Turn& turn) { (void)turn; }
  // The WFI predicate (IRQs masked): true when poll() has work now.
  [[nodiscard]] virtual bool has_work() { return false; }
  // Absolute time (ns) by which poll() must run again; kNever for none.
  [[nodiscard]] virtual uint64_t next_wake_ns() const { return kNever; }
  // Work in flight that tick() watches (jobs queued or running): keeps the
  // tick at the telemetry period. A chip where no service is busy and no
  // interrupt but the timer arrived for a whole period ticks at the idle
  // cadence (vtrn::hostif::kIdleTickMs) instead.
  [[nodiscard]] virtual bool busy() const { return false; }
  // This service's fields of the telemetry block.
  virtual void fill_telemetry(vtrn::hostif::Telemetry* t) const { (void)t; }

 protected:
  // constexpr: every service object is a constant-initialized global, so
  // nothing of the table runs before the MMU is on.
  explicit constexpr Service(const char* name) : name_(name) {}
  ~Service() = default;

 private:
  const char* name_;
};

}  // namespace fw
