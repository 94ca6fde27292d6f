"""Integration: a 2-chip board booted under real QEMU through `vtrn up`,
exercised with every CLI command, then brought down with nothing left.

Each test class boots its own board in its own runtime directory
(vtrn_harness.Session), so classes cannot disturb one another.
"""

import json
import os
import re
import select
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


def sig3(value, unit):
    """The CLI's three significant digits (host-tools/vtrn/render.cpp)."""
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def format_ns(ns):
    for scale, unit in ((1, "ns"), (1e3, "us"), (1e6, "ms"), (1e9, "s")):
        if ns < scale * 1e3 or unit == "s":
            return sig3(ns / scale, unit)


def format_bytes(n):
    units, value, i = ("B", "KiB", "MiB", "GiB", "TiB"), float(n), 0
    while value >= 1024 and i + 1 < len(units):
        value, i = value / 1024, i + 1
    return f"{int(value)} {units[i]}" if value == int(value) else f"{value:.1f} {units[i]}"


def parse_ns(value, unit):
    return float(value) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


class BootedBoard(h.BoardTestCase):
    """Read-only checks against one running 2-chip board."""

    session_name = "board"
    up_args = ("--chips", 2)

    def test_up_prints_a_table_with_both_chips_ready(self):
        rows = [l.split() for l in self.up_stdout.splitlines() if l[:1].isdigit()]
        self.assertEqual([(r[0], r[1]) for r in rows], [("0", "READY"), ("1", "READY")], self.up_stdout)

    def test_ls_json_shows_two_ready_chips_with_sane_fields(self):
        doc = self.s.vtrn_json("ls")
        self.assertTrue(doc["board"])
        self.assertEqual([c["id"] for c in doc["chips"]], [0, 1])
        for c in doc["chips"]:
            with self.subTest(chip=c["id"]):
                self.assertEqual(c["state"], "READY")
                self.assertRegex(c["fw_version"], r"^\d+\.\d+\.\d+")
                self.assertRegex(c["pci_address"], r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
                self.assertRegex(c["pci_bus_id"], r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
                self.assertGreaterEqual(c["bar2_bytes"], 4 << 20)
                self.assertEqual(c["bar2_bytes"] & (c["bar2_bytes"] - 1), 0, "BAR2 size is a power of two")
                self.assertGreater(c["uptime_ns"], 0)
                self.assertGreater(c["boot_ns"], 0)
                self.assertTrue(h.process_alive(c["qemu_pid"]))
                self.assertEqual(c["error"], "")
                self.assertEqual(c["gdb_port"], 0)
        # Each card at its own host address, as a host enumerates them.
        self.assertEqual(len({c["pci_bus_id"] for c in doc["chips"]}), len(doc["chips"]), doc["chips"])
        print(f"\nboot time (QEMU launch to READY): "
              + ", ".join(f"chip {c['id']} {c['boot_ns'] / 1e6:.1f} ms" for c in doc["chips"]), file=sys.stderr)

    def test_ls_table_matches_json(self):
        before = {c["id"]: c for c in self.s.vtrn_json("ls")["chips"]}
        r = self.s.vtrn("ls")
        after = self.s.vtrn_json("ls")
        self.assertEqual(r.returncode, 0, r.stderr)
        head, *rows = r.stdout.rstrip("\n").split("\n")
        self.assertEqual(head.split(), ["CHIP", "STATE", "FIRMWARE", "UPTIME", "PCI", "BAR2", "BOARD", "BOOT"])
        self.assertEqual(len(rows), len(after["chips"]), r.stdout)
        for row, chip in zip(rows, after["chips"]):
            with self.subTest(chip=chip["id"]):
                cells = row.split()
                self.assertEqual(len(cells), 11, row)  # uptime, BAR2 and boot are "<value> <unit>"
                self.assertEqual(cells[:3], [str(chip["id"]), chip["state"], chip["fw_version"]])
                self.assertEqual(cells[5], chip["pci_bus_id"])
                self.assertEqual(" ".join(cells[6:8]), format_bytes(chip["bar2_bytes"]))
                self.assertEqual(cells[8], chip["board"])
                self.assertEqual(cells[8], after["board"])
                self.assertEqual(" ".join(cells[9:11]), format_ns(chip["boot_ns"]))
                # The table was taken between the two JSON documents.
                shown = parse_ns(*cells[3:5])
                self.assertGreaterEqual(shown, before[chip["id"]]["uptime_ns"] * (1 - 0.005))
                self.assertLessEqual(shown, chip["uptime_ns"] * (1 + 0.005))

    def test_info_json_describes_chip_zero(self):
        info = self.s.vtrn_json("info", 0)
        self.assertEqual(info["summary"]["id"], 0)
        self.assertEqual(info["summary"]["state"], "READY")
        self.assertGreaterEqual(info["neuron_cores"], 1)
        self.assertGreaterEqual(info["hbm_stacks"], 1)
        self.assertGreater(info["hbm_bytes_per_stack"], 0)
        self.assertGreater(info["telemetry_period_ms"], 0)
        self.assertGreater(info["timer_hz"], 0)
        self.assertIn(info["gic_version"], (2, 3))
        self.assertGreaterEqual(info["abi_major"], 1)
        self.assertIn("qemu-system-aarch64", info["qemu_cmdline"])
        self.assertIsNone(info["panic"])

    def test_ping_chip_one_fifty_times_loses_none(self):
        doc = self.s.vtrn_json("ping", 1, "--count", 50)
        self.assertEqual(doc["chip"], 1)
        self.assertEqual(len(doc["rtt_ns"]), 50)
        self.assertEqual(doc["lost"], 0)
        self.assertTrue(all(v > 0 for v in doc["rtt_ns"]))
        st = doc["stats"]
        self.assertLessEqual(st["min_ns"], st["median_ns"])
        self.assertLessEqual(st["median_ns"], st["p99_ns"])
        self.assertLessEqual(st["p99_ns"], st["max_ns"])

    def test_ping_with_payload_and_spin_wait_is_answered(self):
        doc = self.s.vtrn_json("ping", 0, "--count", 20, "--size", 1024, "--wait", "spin")
        self.assertEqual((len(doc["rtt_ns"]), doc["lost"], doc["wait"]), (20, 0, "spin"))

    def test_logs_json_contains_boot_lines(self):
        doc = self.s.vtrn_json("logs", 0)
        self.assertEqual(doc["chip"], 0)
        self.assertGreater(len(doc["lines"]), 0)
        # Every firmware log line is "<level digit> <uptime us> <text>".
        for line in doc["lines"]:
            self.assertRegex(line, r"^[0-7] \d+ ")
        self.assertTrue(any("ready" in l.lower() for l in doc["lines"]), doc["lines"])

    def test_logs_show_each_chip_found_and_reset_its_engines(self):
        # vtrn-dev2: vtrn,dma-engines = 2 per chip, one tensor engine per NeuronCore (4).
        for chip in (0, 1):
            with self.subTest(chip=chip):
                lines = self.s.vtrn_json("logs", chip)["lines"]
                found = [l for l in lines if "engines: 2 DMA" in l and "4 tensor" in l and "MPU 256 windows" in l]
                self.assertEqual(len(found), 1, lines)
                self.assertFalse([l for l in lines if "the cores do all the work" in l], lines)

    def test_logs_tail_limits_the_lines(self):
        doc = self.s.vtrn_json("logs", 1, "--tail", 2)
        self.assertEqual(len(doc["lines"]), 2, doc["lines"])

    def test_telemetry_heartbeat_and_uptime_advance(self):
        first = {c["chip"]: c for c in self.s.vtrn_json("telemetry")["chips"]}
        self.assertEqual(sorted(first), [0, 1])
        for chip in (0, 1):
            self.assertGreater(first[chip]["period_ms"], 0)
        # A few telemetry periods on an idle host; the bound is for a loaded one.
        second = h.wait_until(
            "both chips' heartbeat and uptime to advance",
            lambda: {c["chip"]: c for c in self.s.vtrn_json("telemetry")["chips"]},
            lambda t: all(t[c]["heartbeat"] > first[c]["heartbeat"] and t[c]["uptime_ns"] > first[c]["uptime_ns"]
                          for c in (0, 1)),
            timeout=30)
        self.assertEqual(sorted(second), [0, 1])

    def test_telemetry_of_one_chip_has_only_that_chip(self):
        doc = self.s.vtrn_json("telemetry", 1)
        self.assertEqual([c["chip"] for c in doc["chips"]], [1])

    def test_concurrent_pings_and_log_follower_all_succeed(self):
        follower = self.s.popen("logs", 0, "-f", "--json")
        try:
            pings = [self.s.popen("ping", i % 2, "--count", 100, "--json") for i in range(4)]
            results = [p.communicate(timeout=60) + (p.returncode,) for p in pings]
            for out, err, rc in results:
                self.assertEqual(rc, 0, err)
                doc = json.loads(out)
                self.assertEqual((len(doc["rtt_ns"]), doc["lost"]), (100, 0))
            # The follower is still streaming, and its first frame holds the
            # log so far.
            self.assertIsNone(follower.poll(), "logs -f ended early")
            ready, _, _ = select.select([follower.stdout], [], [], 10)
            self.assertTrue(ready, "logs -f printed nothing in 10 s")
            first = json.loads(follower.stdout.readline())
            self.assertGreater(len(first["lines"]), 0)
        finally:
            follower.terminate()
            follower.communicate(timeout=10)

    def test_unknown_chip_exits_4_naming_the_board_range(self):
        for args in (("info", 7), ("ping", 7), ("logs", 7), ("telemetry", 7)):
            with self.subTest(args=args):
                r = self.s.vtrn(*args)
                self.assert_one_error_line(r, h.EXIT_UNKNOWN_CHIP, "unknown chip 7 (board has chips 0-1)")

    def test_second_up_refuses_while_running(self):
        pid = self.s.vtrnd_pid()
        r = self.s.vtrn("up")
        self.assert_one_error_line(r, h.EXIT_FAILED, "already running")
        self.assertEqual(self.s.vtrnd_pid(), pid)
        self.assertEqual(len(self.s.vtrn_json("ls")["chips"]), 2)

    def test_idle_chips_come_to_rest(self):
        # An idle chip sleeps in WFI: one look at its QEMU finds every thread
        # asleep. The CPU share that costs is a figure of
        # tests/bench/board/board_bench.py.
        for c in self.s.vtrn_json("ls")["chips"]:
            with self.subTest(chip=c["id"]):
                h.wait_process_at_rest(c["qemu_pid"])


class DownLeavesNothingBehind(h.SessionTestCase):
    session_name = "down"

    def test_down_stops_processes_and_removes_socket_runtime_dir_and_memfds(self):
        r = self.s.vtrn("up", "--chips", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        vtrnd = self.s.vtrnd_pid()
        qemus = [c["qemu_pid"] for c in self.s.vtrn_json("ls")["chips"]]
        self.assertEqual(len(qemus), 2)
        hw = h.vtrn_hw_pids(self.s)
        self.assertEqual(len(hw), 1, "one vtrn-hw for the board")
        holders = [vtrnd] + qemus + hw
        memfds = {p: [t for t in h.open_fds(p) if "memfd:" in t] for p in holders}
        self.assertTrue(memfds[vtrnd], "vtrnd holds no memfd: the BAR2 check below would prove nothing")
        for q in qemus:
            self.assertTrue([t for t in memfds[q] if "vtrn-ram" in t], f"QEMU {q}: its RAM is not the chip memfd")
        self.assertEqual(len([t for t in h.mapped_memfds(hw[0]) if "vtrn-ram" in t]), 2,
                         "vtrn-hw maps both chips' RAM")

        down = self.s.vtrn("down", "--json")
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assertEqual(json.loads(down.stdout)["chips_stopped"], 2)

        for p in holders:
            self.assertFalse(h.process_alive(p), f"pid {p} still running after down")
            self.assertEqual([t for t in h.open_fds(p) if "memfd:" in t], [], f"pid {p} still holds memfds")
        self.assertFalse(os.path.exists(os.path.join(self.s.runtime_dir, "vtrnd.sock")))
        self.assertEqual(h.shm_files_of(vtrnd), [], "left in /dev/shm")
        self.assert_nothing_left()

        again = self.s.vtrn("down")
        self.assert_one_error_line(again, h.EXIT_NOT_RUNNING, "vtrnd is not running")


class GdbStubs(h.SessionTestCase):
    session_name = "gdb"

    def test_up_with_gdb_prints_attach_commands_and_ports_listen(self):
        # Port 0: QEMU binds a free port per chip and vtrnd reports it, so
        # the test never guesses a port that something else may hold.
        r = self.s.vtrn("up", "--chips", 2, "--gdb", "--gdb-port", 0, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        doc = json.loads(r.stdout)
        ports = [c["gdb_port"] for c in doc["chips"]]
        self.assertTrue(all(0 < p < 65536 for p in ports), ports)
        self.assertEqual(len(set(ports)), 2, ports)
        self.assertEqual([g["port"] for g in doc["gdb"]], ports)
        self.assertEqual([c["gdb_port"] for c in self.s.vtrn_json("ls")["chips"]], ports)
        for g in doc["gdb"]:
            self.assertIn("gdb-multiarch", g["command"])
            self.assertIn("firmware.elf", g["command"])
            self.assertIn(f"target remote 127.0.0.1:{g['port']}", g["command"])
            # The gdbstub answers the remote protocol: "?" asks why the
            # target stopped; any "$...#xx" packet is an answer.
            with socket.create_connection(("127.0.0.1", g["port"]), timeout=10) as sock:
                sock.sendall(b"$?#3f")
                reply = b""
                while b"#" not in reply.lstrip(b"+"):
                    chunk = sock.recv(256)
                    self.assertTrue(chunk, f"port {g['port']} closed without a gdb packet: {reply!r}")
                    reply += chunk
                self.assertRegex(reply.lstrip(b"+"), rb"^\$[^#]*#")
        down = self.s.vtrn("down")
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assert_nothing_left()


class PacedBoot(h.SessionTestCase):
    """vtrnd boots a board a few chips at a time (--boot-parallel): a chip
    is launched only when one launched before it has settled, and each
    chip's boot timeout counts from its own launch."""

    session_name = "paced"

    def boot_events(self):
        """(chip, "launch" | "ready") in vtrnd.log order."""
        events = []
        with open(os.path.join(self.s.runtime_dir, "vtrnd.log")) as f:
            for line in f:
                m = re.search(r"chip (\d+): (launching |READY in )", line)
                if m:
                    events.append((int(m.group(1)), "launch" if m.group(2) == "launching " else "ready"))
        return events

    def up_and_check(self, parallel):
        ring4 = os.path.join(os.path.dirname(h.BOARD_DTB), "vtrn-ring4.dtb")
        r = self.s.vtrn("up", "--board", ring4, "--boot-parallel", parallel, "--boot-timeout-ms", 60000,
                        timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            chips = self.s.vtrn_json("ls")["chips"]
            self.assertEqual([c["state"] for c in chips], ["READY"] * 4)
            events = self.boot_events()
            self.assertEqual(sorted(c for c, e in events if e == "launch"), [0, 1, 2, 3], events)
            in_flight, most = set(), 0
            for chip, event in events:
                if event == "launch":
                    self.assertNotIn(chip, in_flight, events)
                    in_flight.add(chip)
                    most = max(most, len(in_flight))
                else:
                    in_flight.discard(chip)
            self.assertEqual(most, parallel, f"--boot-parallel {parallel}: {events}")
            self.assertEqual([c for c, e in events if e == "launch"], [0, 1, 2, 3], "launched out of chip order")
        finally:
            down = self.s.vtrn("down")
            self.assertEqual(down.returncode, 0, down.stderr)
        self.assert_nothing_left()

    def test_one_at_a_time_launches_each_chip_after_the_one_before_is_ready(self):
        self.up_and_check(1)

    def test_two_at_a_time_never_has_three_booting(self):
        self.up_and_check(2)

    def test_a_bad_boot_parallel_is_one_line(self):
        r = self.s.vtrn("up", "--boot-parallel", 0)
        self.assert_one_error_line(r, 2, "--boot-parallel")
        self.assertFalse(os.path.exists(self.s.runtime_dir))


if __name__ == "__main__":
    h.main()
