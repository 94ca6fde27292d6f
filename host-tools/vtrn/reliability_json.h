// JSON and one-line text for vtrn.api.ResetHistory, shared by `vtrn reset`,
// `vtrn inject` and `vtrn info`. Field names are the proto's; the cause is
// its short name ("watchdog", "panic", ...).
#pragma once

#include <stdint.h>

#include <string>

#include <nlohmann/json.hpp>

#include "render.h"
#include "vtrn_api.pb-c.h"

namespace tools {

inline std::string reset_cause_name(Vtrn__Api__ResetCause c) {
  switch (c) {
    case VTRN__API__RESET_CAUSE__RESET_CAUSE_MANUAL: return "manual";
    case VTRN__API__RESET_CAUSE__RESET_CAUSE_WATCHDOG: return "watchdog";
    case VTRN__API__RESET_CAUSE__RESET_CAUSE_PANIC: return "panic";
    case VTRN__API__RESET_CAUSE__RESET_CAUSE_QEMU_EXIT: return "qemu-exit";
    case VTRN__API__RESET_CAUSE__RESET_CAUSE_BROKEN: return "broken";
    default: return "none";
  }
}

inline nlohmann::json reset_history_json(const Vtrn__Api__ResetHistory* h) {
  nlohmann::json j = {{"count", 0}, {"last_cause", "none"}, {"last_reason", ""}, {"last_unix_ms", 0},
                      {"last_detect_ns", 0}, {"last_recover_ns", 0}, {"last_panic", ""},
                      {"last_log", nlohmann::json::array()}, {"recent", 0}, {"qemu_relaunches", 0},
                      {"recovering", false}, {"engines_quiesced", 0}, {"last_engines_quiesce_ns", 0}};
  if (h == nullptr) return j;
  j["count"] = h->count;
  j["last_cause"] = reset_cause_name(h->last_cause);
  j["last_reason"] = h->last_reason ? h->last_reason : "";
  j["last_unix_ms"] = h->last_unix_ms;
  j["last_detect_ns"] = h->last_detect_ns;
  j["last_recover_ns"] = h->last_recover_ns;
  j["last_panic"] = h->last_panic ? h->last_panic : "";
  for (size_t i = 0; i < h->n_last_log; ++i) j["last_log"].push_back(h->last_log[i]);
  j["recent"] = h->recent;
  j["qemu_relaunches"] = h->qemu_relaunches;
  j["recovering"] = bool(h->recovering);
  j["engines_quiesced"] = h->engines_quiesced;
  j["last_engines_quiesce_ns"] = h->last_engines_quiesce_ns;
  return j;
}

// "2 (last: watchdog, detected in 1.10 s, READY 85.0 ms later: <reason>)" or "0".
inline std::string reset_history_text(const nlohmann::json& h) {
  const uint32_t n = h.at("count").get<uint32_t>();
  if (n == 0) return "0";
  std::string s = std::to_string(n) + " (last: " + h.at("last_cause").get<std::string>();
  if (h.at("last_detect_ns").get<uint64_t>() > 0)
    s += ", detected in " + format_ns(h.at("last_detect_ns").get<uint64_t>());
  if (h.at("recovering").get<bool>()) {
    s += ", recovering";
  } else if (h.at("last_recover_ns").get<uint64_t>() > 0) {
    s += ", READY " + format_ns(h.at("last_recover_ns").get<uint64_t>()) + " later";
  }
  return s + ": " + h.at("last_reason").get<std::string>() + ")";
}

}  // namespace tools
