"""Integration: `vtrn qmp`, a chip's QEMU monitor through vtrnd's own QMP
connection, on real chips. What only shows state passes and the chip keeps
running under it (the gdbstub would stop it); what would change the machine
or read guest memory is refused with one line naming the command, and the
chip is untouched; with vtrnd's --allow-qmp-write the same commands act.
Also each chip's host-side PCI address: unique on the board, shown by `ls`
and `info`, with the chip-internal address kept beside it.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


class ReadOnlyMonitor(h.BoardTestCase):
    session_name = "qmp"
    up_args = ("--chips", 2)

    def test_info_pci_shows_both_ivshmem_functions_of_the_chip(self):
        r = self.s.vtrn("qmp", 0, "info", "pci")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\r", r.stdout)
        # The host interface (00:01.0) and the engine function (00:02.0) are
        # ivshmem-doorbell devices, 1af4:1110, with their BAR2.
        for dev in (1, 2):
            block = r.stdout.split(f"Bus  0, device   {dev}, function 0:", 1)
            self.assertEqual(len(block), 2, r.stdout)
            self.assertIn("PCI device 1af4:1110", block[1].split("Bus ", 1)[0])
            self.assertIn("BAR2: 64 bit prefetchable memory", block[1].split("Bus ", 1)[0])

    def test_the_chip_keeps_running_under_the_monitor(self):
        before = self.s.vtrn_json("info", 1)["summary"]
        r = self.s.vtrn("qmp", 1, "--", "info", "registers", "-a")
        self.assertEqual(r.returncode, 0, r.stderr)
        cores = self.s.vtrn_json("info", 1)["neuron_cores"]
        self.assertEqual(r.stdout.count(" PC="), cores, r.stdout[:400])
        self.assertEqual(self.s.vtrn("qmp", 1, "info", "status").stdout.strip(), "VM status: running")
        ping = self.s.vtrn("ping", 1, "--count", 3)
        self.assertEqual(ping.returncode, 0, ping.stderr)
        after = h.wait_until("chip 1's heartbeat", lambda: self.s.vtrn_json("info", 1)["summary"],
                             lambda s: s["heartbeat"] > before["heartbeat"], 30)
        self.assertEqual(after["boot_generation"], before["boot_generation"])

    def test_json_is_raw_qmp(self):
        doc = self.s.vtrn_json("qmp", 0, "query-status")
        self.assertEqual(set(doc), {"return"})
        self.assertEqual(doc["return"]["status"], "running")
        self.assertTrue(doc["return"]["running"])
        # The same through a whole QMP object and through arguments.
        self.assertEqual(self.s.vtrn_json("qmp", 0, '{"execute":"query-status"}'), doc)
        kids = self.s.vtrn_json("qmp", 0, "qom-list", '{"path":"/machine"}')["return"]
        self.assertIn("peripheral-anon", {k["name"] for k in kids})
        hmp = self.s.vtrn_json("qmp", 0, "human-monitor-command", '{"command-line":"info status"}')
        self.assertEqual(hmp["return"].strip(), "VM status: running")

    def test_what_changes_the_machine_or_reads_memory_is_refused(self):
        gen = self.s.vtrn_json("info", 0)["summary"]["boot_generation"]
        pid = self.s.vtrn_json("info", 0)["summary"]["qemu_pid"]
        for args, named in ((("system_reset",), "'system_reset'"), (("stop",), "'stop'"),
                            (("x", "/4x", "0x40000000"), "'x /4x 0x40000000'"),
                            (("--json", "quit"), "'quit'"), (("--json", "system_reset"), "'system_reset'"),
                            (("--json", "human-monitor-command", '{"command-line":"stop"}'), "'stop'")):
            with self.subTest(args=args):
                r = self.s.vtrn("qmp", 0, *args)
                self.assert_one_error_line(r, h.EXIT_FAILED, named, "--allow-qmp-write")
        self.assertEqual(self.s.vtrn("qmp", 0, "info", "status").stdout.strip(), "VM status: running")
        summary = self.s.vtrn_json("info", 0)["summary"]
        self.assertEqual((summary["boot_generation"], summary["qemu_pid"], summary["resets"]), (gen, pid, 0))

    def test_monitor_errors_and_bad_command_lines(self):
        r = self.s.vtrn("qmp", 0, "--json", "query-no-such-thing")
        self.assert_one_error_line(r, h.EXIT_FAILED, "chip 0: QEMU:", "query-no-such-thing")
        self.assertEqual(json.loads(r.stdout)["error"]["name"], "failed")
        self.assert_one_error_line(self.s.vtrn("qmp", 0), h.EXIT_USAGE, "command")
        # The words after the command reach the monitor as typed: CLI11
        # would read '[1,2]' as a list of two values.
        for arg in ("[1]", "[1,2]", "[]"):
            with self.subTest(arg=arg):
                self.assert_one_error_line(self.s.vtrn("qmp", 0, "--json", "qom-list", arg), h.EXIT_USAGE,
                                           f"arguments '{arg}' are not a JSON object")
        self.assert_one_error_line(self.s.vtrn("qmp", 0, "info", "--bogus", "pci"), h.EXIT_USAGE,
                                   "unknown option '--bogus'", "put -- before")
        self.assert_one_error_line(self.s.vtrn("qmp", 0, "--json", '{"execute":"query-status","id":1}'),
                                   h.EXIT_FAILED, "'id'")
        self.assert_one_error_line(self.s.vtrn("qmp", 0, "info\x1bpci"), h.EXIT_FAILED, "control character")
        self.assert_one_error_line(self.s.vtrn("qmp", 2, "info", "pci"), h.EXIT_UNKNOWN_CHIP, "unknown chip 2")

    def test_every_chip_has_its_own_host_pci_address(self):
        chips = self.s.vtrn_json("ls")["chips"]
        ids = [c["pci_bus_id"] for c in chips]
        self.assertEqual(ids, ["0000:10:00.0", "0000:10:01.0"])
        for c in chips:
            self.assertEqual(c["pci_address"], "0000:00:01.0")  # the same function inside every chip
        table = self.s.vtrn("ls").stdout.splitlines()
        for line, c in zip(table[1:], chips):
            self.assertRegex(line, rf"^{c['id']}\s+READY\s.*\s{c['pci_bus_id']}\s+16 MiB\s")
        info = self.s.vtrn("info", 1).stdout
        self.assertRegex(info, r"PCI\s+0000:10:01\.0 \(inside the chip 0000:00:01\.0\), BAR2 16 MiB")


class WritableMonitor(h.BoardTestCase):
    session_name = "qmp-write"
    up_args = ("--chips", 1)
    # The watchdog off: a paused chip's heartbeat stops, which is the point.
    up_env = {"VTRN_ALLOW_QMP_WRITE": "1", "VTRN_WATCHDOG_MS": "0"}

    def heartbeat(self):
        return self.s.vtrn_json("ls")["chips"][0]["heartbeat"]

    def test_with_allow_qmp_write_stop_and_cont_act_on_the_chip(self):
        r = self.s.vtrn("qmp", 0, "stop")
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertEqual(self.s.vtrn("qmp", 0, "info", "status").stdout.strip(), "VM status: paused")
            # `ls` reads the heartbeat from BAR2; `info` would ask the
            # paused firmware and time out.
            hb = self.heartbeat()
            time.sleep(0.3)  # a paused chip cannot beat, however long this takes
            self.assertEqual(self.heartbeat(), hb)
        finally:
            r = self.s.vtrn("qmp", 0, "--json", "cont")
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"return": {}})
        self.assertEqual(self.s.vtrn("qmp", 0, "info", "status").stdout.strip(), "VM status: running")
        h.wait_until("the heartbeat again", self.heartbeat, lambda v: v > hb, 30)
        self.assertEqual(self.s.vtrn("ping", 0).returncode, 0)


if __name__ == "__main__":
    h.main()
