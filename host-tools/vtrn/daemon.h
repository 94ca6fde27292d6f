// How the vtrn CLI talks to vtrnd: one DaemonConnection per command over
// drv::Client, typed request helpers, and the mapping from transport errors
// and vtrn.api.Status values to the CLI's exit codes (cli_error.h).
//
// It is not the daemon's lifecycle (starting, stopping: board_control.h).
// Everything here throws CliError; a returned response always has status OK
// and the body the request asked for.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

#include "vtrn/drv/client.h"

namespace tools {

inline constexpr int kCallTimeoutMs = 30000;

class DaemonConnection {
 public:
  // Connects to drv::socket_path(); CliError(kNotRunning) when no vtrnd
  // listens there.
  static DaemonConnection open();

  // Sends `req` and returns its response. Transport failures map to
  // kTimeout (no answer in time), kNotRunning (vtrnd went away) or kFailed;
  // a non-OK status maps by exit_for_status(), and STATUS_UNKNOWN_CHIP gets
  // the message "unknown chip 7 (board has chips 0-1)".
  drv::ResponsePtr call(Vtrn__Api__Request* req, int timeout_ms = kCallTimeoutMs);
  // call(), and the response must carry the body `want`; anything else is
  // kFailed "vtrnd answered with an unexpected message (body N)".
  drv::ResponsePtr call(Vtrn__Api__Request* req, Vtrn__Api__Response__BodyCase want,
                        int timeout_ms = kCallTimeoutMs);

  // Streaming (logs -f): send once, then next() until it returns nullptr
  // (vtrnd closed the stream). Frames with a non-OK status throw.
  void send(Vtrn__Api__Request* req);
  drv::ResponsePtr next();

  drv::Client& client() { return client_; }

 private:
  explicit DaemonConnection(drv::Client client) : client_(std::move(client)) {}
  // `chip` is the chip the request named (-1: none), for the unknown-chip
  // message.
  [[noreturn]] void throw_for_status(int64_t chip, const Vtrn__Api__Response& resp);
  drv::Client client_;
  int64_t stream_chip_ = -1;
};

struct PingParams {
  uint32_t chip = 0;
  uint32_t count = 10;
  uint32_t payload_bytes = 0;
  Vtrn__Api__WaitMode wait = VTRN__API__WAIT_MODE__WAIT_BLOCK;
  uint32_t interval_us = 0;
};

drv::ResponsePtr request_list(DaemonConnection& conn, int timeout_ms = kCallTimeoutMs);
drv::ResponsePtr request_info(DaemonConnection& conn, uint32_t chip);
drv::ResponsePtr request_ping(DaemonConnection& conn, const PingParams& params);
// chip < 0: every chip.
drv::ResponsePtr request_telemetry(DaemonConnection& conn, int32_t chip);

// HBM through DMA, in pieces of kDmaPieceBytes (one DmaWrite / DmaRead frame
// each; vtrnd refuses bigger frames). dma_write_hbm returns the chip-side
// time the pieces took, summed; dma_read_hbm fails on a short piece.
inline constexpr uint64_t kDmaPieceBytes = 2u << 20;
uint64_t dma_write_hbm(DaemonConnection& conn, uint32_t chip, uint64_t addr, const uint8_t* data, uint64_t n);
std::vector<uint8_t> dma_read_hbm(DaemonConnection& conn, uint32_t chip, uint64_t addr, uint64_t n);
drv::ResponsePtr request_shutdown(DaemonConnection& conn);

// "chips 0-1", "chip 0", "no chips".
std::string describe_chip_range(size_t chip_count);
// CliError(kUnknownChip, "unknown chip 7 (board has chips 0-1)"): the one
// wording of that error, whoever finds it.
[[noreturn]] void throw_unknown_chip(int64_t chip, size_t chip_count);

}  // namespace tools
