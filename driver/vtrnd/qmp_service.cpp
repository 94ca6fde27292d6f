// vtrnd's QMP service (see qmp_service.h).
#include "qmp_service.h"

#include <string>

#include <nlohmann/json.hpp>

#include "api_enums.h"
#include "qmp_policy.h"
#include "vtrn/drv/log.h"

namespace drv {
namespace {

constexpr Route kRoutes[] = {{VTRN__API__REQUEST__BODY_QMP, true}};

// HMP answers with "\r\n" line ends (it writes for a terminal).
std::string unix_lines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;
    out += s[i];
  }
  return out;
}

}  // namespace

std::span<const Route> QmpService::bodies() const { return kRoutes; }

void QmpService::handle(uint64_t cid, const Vtrn__Api__Request& req, Chip* chip) {
  const Vtrn__Api__QmpRequest& r = *req.qmp;
  const uint64_t id = req.id;
  const std::string label = "chip " + std::to_string(chip->id());
  auto refuse = [&](const std::string& why) {
    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_BAD_REQUEST, label + ": " + why);
  };
  if (!is_admin_(cid)) return refuse("the QEMU monitor is for vtrnd's own user or root only");
  Result<MonitorCommand> c = Error(Code::kInvalidArgument, "QmpRequest needs hmp or qmp_json");
  const bool hmp = r.command_case == VTRN__API__QMP_REQUEST__COMMAND_HMP;
  if (hmp) c = hmp_command(r.hmp ? r.hmp : "");
  else if (r.command_case == VTRN__API__QMP_REQUEST__COMMAND_QMP_JSON) c = qmp_command(r.qmp_json ? r.qmp_json : "");
  if (!c.ok()) return refuse(c.error().detail());
  if (!opts_.allow_write) {
    Error e = check_read_only(*c);
    if (!e.ok()) return refuse(e.detail() + " (start vtrnd with --allow-qmp-write)");
  }
  if (Error e = chip->monitor_ready(); !e.ok()) return reply_error(reply_, cid, id, to_api(e), e.detail());
  const std::string what = hmp ? c->hmp : c->execute;
  DRV_LOGI("%s: monitor command from client %llu: %s", label.c_str(), (unsigned long long)cid, what.c_str());
  const std::string executed = c->execute;
  chip->monitor(c->execute, c->arguments_json,
                [this, cid, id, label, hmp, executed](bool ok, const std::string& ret) {
                  if (!ok) {
                    reply_error(reply_, cid, id, VTRN__API__STATUS__STATUS_CHIP_ERROR, label + ": QEMU: " + ret);
                    return;
                  }
                  std::string output, return_json = ret, name = executed;
                  if (hmp) {
                    // human-monitor-command returns the text as a JSON string.
                    nlohmann::json j = nlohmann::json::parse(ret, nullptr, false);
                    output = unix_lines(j.is_string() ? j.get<std::string>() : ret);
                    return_json.clear();
                  }
                  Vtrn__Api__QmpResponse qr = VTRN__API__QMP_RESPONSE__INIT;
                  qr.output = output.data();
                  qr.return_json = return_json.data();
                  qr.executed = name.data();
                  reply_body(reply_, cid, id, VTRN__API__RESPONSE__BODY_QMP, &qr.base);
                });
}

}  // namespace drv
