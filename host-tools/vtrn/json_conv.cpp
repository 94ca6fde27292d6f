// vtrn.api messages as JSON (see json_conv.h).
#include "json_conv.h"

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
  return {{"id", chip.id},
          {"state", state_name(chip.state)},
          {"fw_version", chip.fw_version},
          {"uptime_ns", chip.uptime_ns},
          {"pci_address", chip.pci_address},
          {"bar2_bytes", chip.bar2_bytes},
          {"board", chip.board},
          {"qemu_pid", chip.qemu_pid},
          {"gdb_port", chip.gdb_port},
          {"boot_ns", chip.boot_ns},
          {"error", chip.error},
          {"last_log", strings(chip.last_log, chip.n_last_log)},
          {"heartbeat", chip.heartbeat},
          {"boot_generation", chip.boot_generation}};
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
  return out;
}

nlohmann::json to_json(const Vtrn__Api__Telemetry& t) {
  return {{"chip", t.chip},
          {"uptime_ns", t.uptime_ns},
          {"heartbeat", t.heartbeat},
          {"period_ms", t.period_ms},
          {"neuron_cores", t.neuron_cores},
          {"idle_ns", t.idle_ns},
          {"idle_ratio", t.idle_ratio},
          {"irq_count", t.irq_count},
          {"doorbell_irq_count", t.doorbell_irq_count},
          {"timer_irq_count", t.timer_irq_count},
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
}

}  // namespace tools
