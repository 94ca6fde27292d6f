// Unit tests of the QEMU monitor policy (driver/vtrnd/qmp_policy.h): HMP
// lines and QMP objects parsed as hostile text, and the read-only allow list
// that `vtrn qmp` passes by default (what changes the machine or reads guest
// memory is refused, what only shows state passes).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <string>

extern "C" {
#include <cmocka.h>
}

#include "../vtrnd/qmp_policy.h"

namespace {

bool hmp_allowed(const std::string& line) {
  drv::Result<drv::MonitorCommand> c = drv::hmp_command(line);
  assert_true(c.ok());
  return drv::check_read_only(*c).ok();
}

bool qmp_allowed(const std::string& json) {
  drv::Result<drv::MonitorCommand> c = drv::qmp_command(json);
  assert_true(c.ok());
  return drv::check_read_only(*c).ok();
}

void test_hmp_lines_are_normalised_into_human_monitor_command(void**) {
  drv::Result<drv::MonitorCommand> c = drv::hmp_command("  info \t registers   -a ");
  assert_true(c.ok());
  assert_string_equal(c->execute.c_str(), "human-monitor-command");
  assert_string_equal(c->hmp.c_str(), "info registers -a");
  assert_string_equal(c->arguments_json.c_str(), R"({"command-line":"info registers -a"})");
}

void test_hostile_hmp_lines_are_refused(void**) {
  assert_false(drv::hmp_command("").ok());
  assert_false(drv::hmp_command("   ").ok());
  assert_false(drv::hmp_command("info pci\nsystem_reset").ok());
  assert_false(drv::hmp_command(std::string("info pci\0quit", 13)).ok());
  assert_false(drv::hmp_command(std::string(drv::kMaxHmpLineBytes + 1, 'a')).ok());
  drv::Result<drv::MonitorCommand> c = drv::hmp_command("info\x1b[2Jpci");
  assert_false(c.ok());
  assert_int_equal(int(c.error().code()), int(drv::Code::kInvalidArgument));
}

void test_read_only_hmp_passes_and_the_rest_is_refused(void**) {
  for (const char* ok : {"info pci", "info mtree -f", "info registers", "info registers -a", "info qtree",
                         "info status", "info", "help info", "info cpus"})
    assert_true(hmp_allowed(ok));
  for (const char* no : {"system_reset", "stop", "cont", "quit", "x /16x 0x40000000", "xp /4g 0x80000000",
                         "pmemsave 0 4096 /tmp/x", "info pcix", "information pci", "device_del x",
                         "info registers; quit", "infopci"})
    assert_false(hmp_allowed(no));
  drv::Result<drv::MonitorCommand> c = drv::hmp_command("system_reset");
  drv::Error e = drv::check_read_only(*c);
  assert_int_equal(int(e.code()), int(drv::Code::kInvalidArgument));
  assert_non_null(strstr(e.detail().c_str(), "'system_reset'"));
}

void test_qmp_objects_are_checked_member_by_member(void**) {
  assert_true(qmp_allowed(R"({"execute":"query-status"})"));
  assert_true(qmp_allowed(R"({"execute":"query-pci","arguments":{}})"));
  assert_true(qmp_allowed(R"({"execute":"qom-list","arguments":{"path":"/machine"}})"));
  assert_false(qmp_allowed(R"({"execute":"system_reset"})"));
  assert_false(qmp_allowed(R"({"execute":"quit"})"));
  assert_false(qmp_allowed(R"({"execute":"qom-set","arguments":{"path":"/machine","property":"x","value":1}})"));
  for (const char* bad : {"", "[]", "\"query-status\"", "{", R"({"execute":3})", R"({"execute":""})",
                          R"({"execute":"query status"})", R"({"arguments":{}})",
                          R"({"execute":"query-status","id":1})", R"({"execute":"query-pci","arguments":[]})",
                          R"({"execute":"human-monitor-command"})",
                          R"({"execute":"human-monitor-command","arguments":{"command-line":7}})"})
    assert_false(drv::qmp_command(bad).ok());
  assert_false(drv::qmp_command(std::string(drv::kMaxQmpJsonBytes + 1, ' ')).ok());
}

void test_hmp_inside_qmp_follows_the_hmp_list(void**) {
  assert_true(qmp_allowed(R"({"execute":"human-monitor-command","arguments":{"command-line":"info pci"}})"));
  assert_false(qmp_allowed(R"({"execute":"human-monitor-command","arguments":{"command-line":"system_reset"}})"));
  drv::Result<drv::MonitorCommand> c =
      drv::qmp_command(R"({"execute":"human-monitor-command","arguments":{"command-line":" info  pci ","cpu-index":1}})");
  assert_true(c.ok());
  assert_string_equal(c->hmp.c_str(), "info pci");
  assert_non_null(strstr(c->arguments_json.c_str(), "\"cpu-index\":1"));
  assert_non_null(strstr(c->arguments_json.c_str(), "\"command-line\":\"info pci\""));
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_hmp_lines_are_normalised_into_human_monitor_command),
      cmocka_unit_test(test_hostile_hmp_lines_are_refused),
      cmocka_unit_test(test_read_only_hmp_passes_and_the_rest_is_refused),
      cmocka_unit_test(test_qmp_objects_are_checked_member_by_member),
      cmocka_unit_test(test_hmp_inside_qmp_follows_the_hmp_list),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
