// vtrnd requests and error mapping for the vtrn CLI (see daemon.h).
#include "daemon.h"

#include <algorithm>
#include <utility>

#include "cli_error.h"
#include "render.h"

namespace tools {
namespace {

Exit exit_for_status(Vtrn__Api__Status status) {
  switch (status) {
    case VTRN__API__STATUS__STATUS_OK: return Exit::kOk;
    case VTRN__API__STATUS__STATUS_UNKNOWN_CHIP: return Exit::kUnknownChip;
    case VTRN__API__STATUS__STATUS_CHIP_NOT_READY: return Exit::kChipNotReady;
    case VTRN__API__STATUS__STATUS_TIMEOUT: return Exit::kTimeout;
    case VTRN__API__STATUS__STATUS_SHUTTING_DOWN: return Exit::kNotRunning;
    // The parser validates every field the user controls, so a bad request
    // is a failure of the operation, not a usage error.
    case VTRN__API__STATUS__STATUS_BAD_REQUEST:
    case VTRN__API__STATUS__STATUS_CHIP_ERROR:
    case VTRN__API__STATUS__STATUS_INTERNAL:
    default: return Exit::kFailed;
  }
}

// The exit status of a transport failure follows its code. A vtrnd that
// closes the connection in the middle of a command has stopped (vtrn down,
// a crash): the same condition, and exit code, as one that was never
// running, for every command (`top`, `telemetry --interval`, a wait).
[[noreturn]] void throw_transport(const drv::Error& err) {
  switch (err.code()) {
    case drv::Code::kTimeout: throw CliError(Exit::kTimeout, err.detail());
    case drv::Code::kNotRunning: throw CliError(Exit::kNotRunning, err.detail());
    case drv::Code::kUntrusted: throw CliError(Exit::kUntrusted, err.detail());
    case drv::Code::kClosed: throw CliError(Exit::kNotRunning, "vtrnd stopped (it closed the connection)");
    default: throw CliError(Exit::kFailed, err.detail());
  }
}

// The chip a request names, or -1: the body's field called "chip", found
// through the protobuf-c descriptors, so every request that names a chip
// (info, mem, link, power, reset, jobs, ...) gets the same unknown-chip
// message without a list to keep up to date here.
int64_t requested_chip(const Vtrn__Api__Request& req) {
  const ProtobufCFieldDescriptor* body =
      protobuf_c_message_descriptor_get_field(&vtrn__api__request__descriptor, unsigned(req.body_case));
  if (body == nullptr || body->type != PROTOBUF_C_TYPE_MESSAGE) return -1;
  const auto* msg = *reinterpret_cast<const ProtobufCMessage* const*>(
      reinterpret_cast<const uint8_t*>(&req) + body->offset);
  if (msg == nullptr) return -1;
  const ProtobufCFieldDescriptor* chip = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, "chip");
  if (chip == nullptr || chip->label == PROTOBUF_C_LABEL_REPEATED) return -1;
  const uint8_t* at = reinterpret_cast<const uint8_t*>(msg) + chip->offset;
  switch (chip->type) {
    case PROTOBUF_C_TYPE_UINT32: return *reinterpret_cast<const uint32_t*>(at);
    case PROTOBUF_C_TYPE_INT32: return *reinterpret_cast<const int32_t*>(at);
    case PROTOBUF_C_TYPE_UINT64: return int64_t(*reinterpret_cast<const uint64_t*>(at));
    case PROTOBUF_C_TYPE_INT64: return *reinterpret_cast<const int64_t*>(at);
    default: return -1;
  }
}

void expect_body(const Vtrn__Api__Response& resp, Vtrn__Api__Response__BodyCase body) {
  if (resp.body_case != body)
    throw CliError(Exit::kFailed, "vtrnd answered with an unexpected message (body " +
                                      std::to_string(int(resp.body_case)) + ")");
}

}  // namespace

void throw_unknown_chip(int64_t chip, size_t chip_count) {
  throw CliError(Exit::kUnknownChip,
                 "unknown chip " + std::to_string(chip) + " (board has " + describe_chip_range(chip_count) + ")");
}

std::string describe_chip_range(size_t chip_count) {
  if (chip_count == 0) return "no chips";
  if (chip_count == 1) return "chip 0";
  return "chips 0-" + std::to_string(chip_count - 1);
}

DaemonConnection DaemonConnection::open() {
  drv::Client client;
  if (const drv::Error err = client.connect(drv::socket_path()); !err.ok()) {
    if (err.code() == drv::Code::kNotRunning) throw CliError(Exit::kNotRunning, "vtrnd is not running");
    throw_transport(err);
  }
  return DaemonConnection(std::move(client));
}

void DaemonConnection::throw_for_status(int64_t chip, const Vtrn__Api__Response& resp) {
  const Exit code = exit_for_status(resp.status);
  std::string message = resp.error != nullptr && resp.error[0] != '\0'
                            ? resp.error
                            : "vtrnd refused the request (status " + std::to_string(int(resp.status)) + ")";
  if (resp.status == VTRN__API__STATUS__STATUS_UNKNOWN_CHIP) {
    // The daemon's text may not say what the board has; ask, so the user
    // sees the valid range. A failure of that second question keeps the
    // daemon's own message.
    Vtrn__Api__Request list_req;
    Vtrn__Api__ListRequest list;
    vtrn__api__request__init(&list_req);
    vtrn__api__list_request__init(&list);
    list_req.body_case = VTRN__API__REQUEST__BODY_LIST;
    list_req.list = &list;
    if (chip >= 0) {
      drv::Result<drv::ResponsePtr> list_resp = client_.call(&list_req, kCallTimeoutMs);
      if (list_resp.ok() && list_resp.value()->status == VTRN__API__STATUS__STATUS_OK &&
          list_resp.value()->body_case == VTRN__API__RESPONSE__BODY_LIST) {
        throw_unknown_chip(chip, list_resp.value()->list->n_chips);
      }
    }
  }
  throw CliError(code, message);
}

drv::ResponsePtr DaemonConnection::call(Vtrn__Api__Request* req, int timeout_ms) {
  drv::Result<drv::ResponsePtr> r = client_.call(req, timeout_ms);
  if (!r.ok()) throw_transport(r.error());
  drv::ResponsePtr resp = std::move(r.value());
  if (resp->status != VTRN__API__STATUS__STATUS_OK) throw_for_status(requested_chip(*req), *resp);
  return resp;
}

drv::ResponsePtr DaemonConnection::call(Vtrn__Api__Request* req, Vtrn__Api__Response__BodyCase want,
                                        int timeout_ms) {
  drv::ResponsePtr resp = call(req, timeout_ms);
  expect_body(*resp, want);
  return resp;
}

void DaemonConnection::send(Vtrn__Api__Request* req) {
  stream_chip_ = requested_chip(*req);
  if (const drv::Error err = client_.send(req); !err.ok()) throw_transport(err);
}

drv::ResponsePtr DaemonConnection::next() {
  drv::Result<drv::ResponsePtr> r = client_.recv(-1);
  if (!r.ok()) {
    if (r.error().code() == drv::Code::kClosed) return nullptr;
    throw_transport(r.error());
  }
  drv::ResponsePtr resp = std::move(r.value());
  if (resp->status != VTRN__API__STATUS__STATUS_OK) throw_for_status(stream_chip_, *resp);
  return resp;
}

drv::ResponsePtr request_list(DaemonConnection& conn, int timeout_ms) {
  Vtrn__Api__Request req;
  Vtrn__Api__ListRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__list_request__init(&body);
  req.body_case = VTRN__API__REQUEST__BODY_LIST;
  req.list = &body;
  drv::ResponsePtr resp = conn.call(&req, timeout_ms);
  expect_body(*resp, VTRN__API__RESPONSE__BODY_LIST);
  return resp;
}

drv::ResponsePtr request_info(DaemonConnection& conn, uint32_t chip) {
  Vtrn__Api__Request req;
  Vtrn__Api__InfoRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__info_request__init(&body);
  body.chip = chip;
  req.body_case = VTRN__API__REQUEST__BODY_INFO;
  req.info = &body;
  drv::ResponsePtr resp = conn.call(&req);
  expect_body(*resp, VTRN__API__RESPONSE__BODY_INFO);
  if (resp->info->info == nullptr || resp->info->info->summary == nullptr)
    throw CliError(Exit::kFailed, "vtrnd sent an InfoResponse without chip information");
  return resp;
}

drv::ResponsePtr request_ping(DaemonConnection& conn, const PingParams& params) {
  Vtrn__Api__Request req;
  Vtrn__Api__PingRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__ping_request__init(&body);
  body.chip = params.chip;
  body.count = params.count;
  body.payload_bytes = params.payload_bytes;
  body.wait = params.wait;
  body.interval_us = params.interval_us;
  req.body_case = VTRN__API__REQUEST__BODY_PING;
  req.ping = &body;
  // Each ping may take up to a chip timeout; allow for the pauses asked for.
  const uint64_t budget_ms =
      uint64_t(kCallTimeoutMs) + uint64_t(params.count) * (params.interval_us / 1000 + 1);
  drv::ResponsePtr resp = conn.call(&req, int(std::min<uint64_t>(budget_ms, 1u << 30)));
  expect_body(*resp, VTRN__API__RESPONSE__BODY_PING);
  return resp;
}

drv::ResponsePtr request_telemetry(DaemonConnection& conn, int32_t chip) {
  Vtrn__Api__Request req;
  Vtrn__Api__TelemetryRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__telemetry_request__init(&body);
  if (chip >= 0) {  // unset: every chip
    body.select_case = VTRN__API__TELEMETRY_REQUEST__SELECT_CHIP;
    body.chip = chip;
  }
  req.body_case = VTRN__API__REQUEST__BODY_TELEMETRY;
  req.telemetry = &body;
  drv::ResponsePtr resp = conn.call(&req);
  expect_body(*resp, VTRN__API__RESPONSE__BODY_TELEMETRY);
  return resp;
}

drv::ResponsePtr request_shutdown(DaemonConnection& conn) {
  Vtrn__Api__Request req;
  Vtrn__Api__ShutdownRequest body;
  vtrn__api__request__init(&req);
  vtrn__api__shutdown_request__init(&body);
  req.body_case = VTRN__API__REQUEST__BODY_SHUTDOWN;
  req.shutdown = &body;
  drv::ResponsePtr resp = conn.call(&req);
  expect_body(*resp, VTRN__API__RESPONSE__BODY_SHUTDOWN);
  return resp;
}

uint64_t dma_write_hbm(DaemonConnection& conn, uint32_t chip, uint64_t addr, const uint8_t* data, uint64_t n) {
  uint64_t ns = 0;
  for (uint64_t off = 0; off < n; off += kDmaPieceBytes) {
    Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
    Vtrn__Api__DmaWriteRequest w = VTRN__API__DMA_WRITE_REQUEST__INIT;
    w.chip = chip;
    w.hbm_addr = addr + off;
    w.data.data = const_cast<uint8_t*>(data + off);  // protobuf-c packs from it, never writes
    w.data.len = std::min<uint64_t>(kDmaPieceBytes, n - off);
    req.body_case = VTRN__API__REQUEST__BODY_DMA_WRITE;
    req.dma_write = &w;
    drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_WRITE);
    ns += resp->dma_write->elapsed_ns;
  }
  return ns;
}

std::vector<uint8_t> dma_read_hbm(DaemonConnection& conn, uint32_t chip, uint64_t addr, uint64_t n) {
  std::vector<uint8_t> out;
  out.reserve(n);
  for (uint64_t off = 0; off < n; off += kDmaPieceBytes) {
    Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
    Vtrn__Api__DmaReadRequest r = VTRN__API__DMA_READ_REQUEST__INIT;
    r.chip = chip;
    r.hbm_addr = addr + off;
    r.length = uint32_t(std::min<uint64_t>(kDmaPieceBytes, n - off));
    req.body_case = VTRN__API__REQUEST__BODY_DMA_READ;
    req.dma_read = &r;
    drv::ResponsePtr resp = conn.call(&req, VTRN__API__RESPONSE__BODY_DMA_READ);
    const ProtobufCBinaryData& d = resp->dma_read->data;
    if (d.len != r.length)
      throw CliError(Exit::kFailed, "DMA read at " + hex(r.hbm_addr) + " returned " + std::to_string(d.len) +
                                        " bytes, asked for " + std::to_string(r.length));
    out.insert(out.end(), d.data, d.data + d.len);
  }
  return out;
}

}  // namespace tools
