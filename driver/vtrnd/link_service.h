// vtrnd's link service: the board's chip-to-chip links on the host side.
//
// Before any chip starts it creates one shared region per link (a
// LinkMedium) and hands each chip the QEMU arguments that map its end as an
// ivshmem-plain function at PCI slot kPortSlotBase + port
// (vtrn/links_abi.h). It runs the switch ends of switched boards itself (one
// vtrn::link::Port per wired switch port, polled on the event loop), reads
// every chip's link status block from BAR2 (kRegionLinks, seqlock, validated)
// for LinkList and Topo, and forwards LinkControl to the owning chip's
// firmware. stop() removes every region it created.
//
// It is not the link protocol (common/link), and chips never talk through
// vtrnd: both QEMUs map the same memory. The medium is an interface so that
// a network transport between hosts can replace the shared file for links
// whose ends live on different machines (a forwarder on each host would then
// own one side of a local region and move frames over a socket).
#pragma once

#include "reply.h"
#include "service.h"

#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vtrn/board.h"
#include "vtrn/drv/board_file.h"
#include "vtrn/drv/chip.h"
#include "vtrn/drv/error.h"
#include "vtrn/drv/event_loop.h"
#include "vtrn/link.h"
#include "vtrn/links_abi.h"
#include "vtrn_api.pb-c.h"

namespace drv {

// The bytes of one link, as both ends see them.
class LinkMedium {
 public:
  virtual ~LinkMedium() = default;
  // Creates the backing store (zero-filled); kSystem when it cannot.
  virtual Error create() = 0;
  // QEMU arguments that map this link into a chip as an ivshmem-plain
  // function at `slot` on pcie.0; `tag` makes the object ids unique.
  [[nodiscard]] virtual std::vector<std::string> qemu_args(const std::string& tag,
                                                           uint32_t slot) const = 0;
  // vtrnd's own mapping (for switch ends), nullptr when there is none.
  [[nodiscard]] virtual uint8_t* host_map() = 0;
  [[nodiscard]] virtual uint64_t bytes() const = 0;
  // Unmaps and deletes the backing store.
  virtual void destroy() = 0;
};

// A file on tmpfs shared by both QEMUs (memory-backend-file, share=on).
class ShmFileMedium final : public LinkMedium {
 public:
  ShmFileMedium(std::string path, uint64_t bytes) : path_(std::move(path)), bytes_(bytes) {}
  ~ShmFileMedium() override { destroy(); }
  Error create() override;
  [[nodiscard]] std::vector<std::string> qemu_args(const std::string& tag,
                                                   uint32_t slot) const override;
  uint8_t* host_map() override;
  [[nodiscard]] uint64_t bytes() const override { return bytes_; }
  void destroy() override;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t bytes_;
  bool created_ = false;
  uint8_t* map_ = nullptr;
};

// The chip's link status block (vtrn/links_abi.h) copied under its seqlock
// and checked (magic, version, geometry): kNotReady (with the chip's
// reason) when the chip is not READY, kBadHardware when the block is
// invalid, kBusy when it is rewritten on every try. The one reader of that
// block in vtrnd (the link service and the metrics exporter).
Error read_links_block(const Chip& chip, vtrn::links::LinksBlock* out);

class LinkService final : public Service {
 public:
  using ReplyFn = drv::ReplyFn;

  LinkService(EventLoop* loop, const BoardSpec& board, std::string runtime_dir, ReplyFn reply);
  ~LinkService();
  LinkService(const LinkService&) = delete;
  LinkService& operator=(const LinkService&) = delete;

  // Parses the wiring (its error keeps the board parser's code) and
  // creates the regions (kSystem). Call before the chips start.
  Error prepare();
  // The extra QEMU arguments of chip `id` (its wired ports' functions).
  [[nodiscard]] std::vector<std::string> qemu_args(uint32_t chip_id) const;
  void add_chip(Chip* chip);
  // Starts the switch ports (after prepare).
  void start();
  // Stops the switch ports and removes every region.
  void stop();

  void list(uint64_t cid, uint64_t id, const Vtrn__Api__LinkListRequest& r);
  // `chip` resolved by the daemon from r.chip.
  void control(uint64_t cid, uint64_t id, Chip* chip, const Vtrn__Api__LinkControlRequest& r);
  void topo(uint64_t cid, uint64_t id);

  [[nodiscard]] std::span<const Route> bodies() const override;
  void handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) override;

 private:
  struct SwitchPort;
  struct PortView {  // a chip port as last read from its BAR2 block
    bool valid = false;
    std::string error;
    vtrn::links::PortStatus s{};
  };

  void poll_switches();
  Error read_chip(Chip* chip, vtrn::links::LinksBlock* out) const;
  void reply_error(uint64_t cid, uint64_t id, Vtrn__Api__Status st, const std::string& err);

  EventLoop* loop_;
  const BoardSpec& board_;
  std::string runtime_dir_;
  ReplyFn reply_;
  std::string dir_;
  bool own_dir_ = false;
  std::unique_ptr<vtrn::board::Topology> topo_;
  std::vector<std::unique_ptr<LinkMedium>> media_;  // indexed like topo_->links
  std::vector<std::unique_ptr<SwitchPort>> switch_ports_;
  std::vector<Chip*> chips_;
  EventLoop::TimerId timer_ = 0;
  bool timer_armed_ = false;
};

}  // namespace drv
