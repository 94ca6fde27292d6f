// The client socket wire format of vtrnd: each message is a little-endian
// uint32 byte length followed by that many bytes of a packed protobuf-c
// message (vtrn.api.Request from clients, vtrn.api.Response from vtrnd).
//
// Two ways to use it: blocking helpers (send_frame / recv_frame) for clients
// such as the vtrn CLI, and FrameDecoder, an incremental decoder for vtrnd's
// non-blocking event loop, which may see a frame arrive one byte at a time.
// This is framing only; which messages go over it is vtrn_api.proto.
// A length above kMaxFrame is a protocol error: the peer is out of sync or
// hostile, so the connection is closed rather than resynchronised.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include <protobuf-c/protobuf-c.h>

#include "vtrn/drv/error.h"

namespace drv {

inline constexpr uint32_t kMaxFrame = 4u << 20;
// The vtrn.api version vtrnd speaks (HelloResponse): the major changes when a
// client built for the previous one could be misread, the minor when
// messages or fields are only added. 2.0: Hello, oneof presence instead of -1
// for "every chip" / "any queue", end frames on the logs stream. 2.1:
// statuses BUSY and PERMISSION_DENIED (tenants, DMA caps), fault kind
// DMA_ENGINE, the engines' reset-history fields. 2.2: Telemetry.wakeups.
// 2.3: tenants' views: HbmAllocationInfo.uid, JobInfo.uid, all_tenants in
// HbmListResponse and JobListResponse.
// 2.4: fault kind JOB_STUCK; the HBM quota and HbmAllocResponse.client_used_bytes
// are the tenant's.
// 3.0: HbmStatsResponse carries the chip's figures as one vtrn.types.HbmStats
// (`stats`, the message the firmware sends), its own fields renumbered 2..5.
// 3.1: detached HBM (HbmAllocRequest.detached, HbmAllocationInfo.detached,
// owner kind 3: the tenant).
inline constexpr uint32_t kApiMajor = 3;
inline constexpr uint32_t kApiMinor = 1;
inline constexpr size_t kFrameHeader = 4;

// $VTRN_RUNTIME_DIR, else default_runtime_dir().
std::string runtime_dir();
// ${XDG_RUNTIME_DIR:-/tmp}/vtrn-<uid>: the directory nobody named.
std::string default_runtime_dir();
// runtime_dir() + "/vtrnd.sock".
std::string socket_path();

// Appends one frame holding `msg` to `out`. kInvalidArgument when the packed
// message is larger than kMaxFrame (nothing is appended then).
Error encode_frame(const ProtobufCMessage* msg, std::vector<uint8_t>* out);

// Blocking frame I/O on a stream socket (a non-blocking fd is waited on with
// poll). Failures: kClosed when the peer hung up (EPIPE, ECONNRESET, a write
// of nothing; for recv_frame an orderly EOF at a frame boundary), kDecode for
// a bad frame (length above kMaxFrame, or EOF inside a frame), kTimeout when
// `timeout_ms` (>= 0) passes first (timeout_ms < 0 blocks), kInvalidArgument
// from encode_frame, and kSystem naming the call with its strerror.
Error send_frame(int fd, const ProtobufCMessage* msg);
Error recv_frame(int fd, std::vector<uint8_t>* payload, int timeout_ms);

// Incremental decoder: feed whatever bytes arrived, then take complete
// frames out one by one.
class FrameDecoder {
 public:
  void feed(const uint8_t* data, size_t length);
  // true: a frame was moved into *payload; false: need more bytes; kDecode:
  // the stream announced a frame above kMaxFrame (the decoder stays broken).
  Result<bool> next(std::vector<uint8_t>* payload);
  [[nodiscard]] size_t buffered() const { return buf_.size() - start_; }

 private:
  std::vector<uint8_t> buf_;
  size_t start_ = 0;
  bool broken_ = false;
};

}  // namespace drv
