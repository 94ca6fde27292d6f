// vtrn.api messages as JSON (see json_conv.h).
#include "json_conv.h"

#include "reliability_json.h"
#include "render.h"

namespace tools {
namespace {

nlohmann::json strings(char** items, size_t n) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(items[i]);
  return out;
}

}  // namespace

nlohmann::json to_json(const Vtrn__Api__ChipSummary& chip) {
  nlohmann::json doc = {{"id", chip.id},
          {"state", state_name(chip.state)},
          {"fw_version", chip.fw_version},
          {"uptime_ns", chip.uptime_ns},
          {"pci_address", chip.pci_address},
          {"pci_bus_id", chip.pci_bus_id},
          {"bar2_bytes", chip.bar2_bytes},
          {"board", chip.board},
          {"qemu_pid", chip.qemu_pid},
          {"gdb_port", chip.gdb_port},
          {"boot_ns", chip.boot_ns},
          {"error", chip.error},
          {"last_log", strings(chip.last_log, chip.n_last_log)},
          {"heartbeat", chip.heartbeat},
          {"boot_generation", chip.boot_generation}};
  doc.update({{"resets", chip.resets},
              {"last_reset_reason", chip.last_reset_reason},
              {"recovering", bool(chip.recovering)}});
  return doc;
}

nlohmann::json to_json(const Vtrn__Api__ListResponse& list) {
  nlohmann::json chips = nlohmann::json::array();
  for (size_t i = 0; i < list.n_chips; ++i) chips.push_back(to_json(*list.chips[i]));
  return {{"board", list.board}, {"board_file", list.board_file}, {"chips", chips}};
}

nlohmann::json to_json(const Vtrn__Api__PanicInfo& panic) {
  return {{"cause", panic.cause}, {"ec", panic.ec},         {"esr", panic.esr},
          {"elr", panic.elr},     {"far", panic.far},       {"reason", panic.reason},
          {"cpu", panic.cpu}};
}

nlohmann::json to_json(const Vtrn__Api__ChipInfo& info) {
  nlohmann::json out = {
      {"summary", info.summary != nullptr ? to_json(*info.summary) : nlohmann::json()},
      {"chip_name", info.chip_name},
      {"neuron_cores", info.neuron_cores},
      {"hbm_stacks", info.hbm_stacks},
      {"hbm_bytes_per_stack", info.hbm_bytes_per_stack},
      {"hbm_page_bytes", info.hbm_page_bytes},
      {"hbm_channels", info.hbm_channels},
      {"link_ports", info.link_ports},
      {"power_domains", info.power_domains},
      {"thermal_zones", info.thermal_zones},
      {"telemetry_period_ms", info.telemetry_period_ms},
      {"build_id", info.build_id},
      {"cpu", info.cpu},
      {"timer_hz", info.timer_hz},
      {"gic_version", info.gic_version},
      {"abi_major", info.abi_major},
      {"abi_minor", info.abi_minor},
      {"capabilities", info.capabilities},
      {"qemu_cmdline", info.qemu_cmdline},
      {"panic", info.panic != nullptr ? to_json(*info.panic) : nlohmann::json()}};
  out["reset_history"] = reset_history_json(info.reset_history);
  out["watchdog_timeout_ms"] = info.watchdog_timeout_ms;
  return out;
}

nlohmann::json to_json(const Vtrn__Api__Telemetry& t) {
  nlohmann::json doc = {{"chip", t.chip},
          {"uptime_ns", t.uptime_ns},
          {"heartbeat", t.heartbeat},
          {"period_ms", t.period_ms},
          {"neuron_cores", t.neuron_cores},
          {"idle_ns", t.idle_ns},
          {"idle_ratio", t.idle_ratio},
          {"irq_count", t.irq_count},
          {"doorbell_irq_count", t.doorbell_irq_count},
          {"timer_irq_count", t.timer_irq_count},
          {"wakeups", t.wakeups},
          {"ctrl_requests", t.ctrl_requests},
          {"ctrl_errors", t.ctrl_errors},
          {"events_sent", t.events_sent},
          {"log_bytes", t.log_bytes},
          {"temperature_mc", t.temperature_mc},
          {"host_rx_events", t.host_rx_events},
          {"dma_descriptors", t.dma_descriptors},
          {"dma_completions", t.dma_completions},
          {"dma_bytes", t.dma_bytes},
          {"dma_busy_ns", t.dma_busy_ns}};
  nlohmann::json util = nlohmann::json::array();
  for (size_t i = 0; i < t.n_core_utilization; ++i) util.push_back(t.core_utilization[i]);
  doc.update({{"jobs_queued", t.jobs_queued},
              {"jobs_running", t.jobs_running},
              {"jobs_completed", t.jobs_completed},
              {"jobs_failed", t.jobs_failed},
              {"tensor_busy_ns", t.tensor_busy_ns},
              {"tensor_modeled_ns", t.tensor_modeled_ns},
              {"jobs_submitted", t.jobs_submitted},
              {"jobs_cancelled", t.jobs_cancelled},
              {"jobs_timed_out", t.jobs_timed_out},
              {"jobs_staging", t.jobs_staging},
              {"job_latency_p50_ns", t.job_latency_p50_ns},
              {"job_latency_p90_ns", t.job_latency_p90_ns},
              {"job_latency_p99_ns", t.job_latency_p99_ns},
              {"core_utilization", util}});
  doc.update({{"hbm_total_bytes", t.hbm_total_bytes},
              {"hbm_used_bytes", t.hbm_used_bytes},
              {"hbm_alloc_failures", t.hbm_alloc_failures},
              {"hbm_retired_pages", t.hbm_retired_pages},
              {"ecc_correctable", t.ecc_correctable},
              {"ecc_uncorrectable", t.ecc_uncorrectable}});
  doc.update({{"resets", t.resets},
              {"last_reset_reason", t.last_reset_reason},
              {"last_reset_unix_ms", t.last_reset_unix_ms},
              {"boot_generation", t.boot_generation}});
  return doc;
}

}  // namespace tools
