"""Integration: chips that hang, panic, lose their QEMU or get a corrupted DMA
ring under real QEMU, and the board that keeps going.

On a 2-chip board, chip 1 is broken on purpose with `vtrn inject` while chip
0 is pinged and moves DMA the whole time: the faulty chip must be detected
(watchdog, panic record, child exit, latched queue), reset and READY again,
the other chip must not notice, nothing may hang, and every error must say
what happened. A second board checks the give-up rule (a chip that keeps
failing ends FAILED with the reason, and `vtrn reset` brings it back); a
third kills vtrnd itself and starts again, and checks the socket's owner
rule and the cancellation of a disconnected client's DMA.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

MiB = 1 << 20
WATCHDOG_MS = 1000  # the default: 10 telemetry periods of 100 ms, at least 1 s


class Background:
    """Pings chip 0 and writes/reads/verifies DMA on it from a thread until
    stopped; records every failure with its message."""

    def __init__(self, session, chip=0):
        self.s, self.chip = session, chip
        self.stop_flag = threading.Event()
        self.errors, self.rounds = [], 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        try:
            with h.ApiClient(self.s, timeout=30) as c:
                # DMA reaches only HBM the connection has allocated.
                base, _ = h.hbm_alloc(c, self.chip, 64 * 1024)
                i = 0
                while not self.stop_flag.is_set():
                    data = bytes((i * 7 + k) & 0xFF for k in range(4096)) * 16
                    c.dma_write(self.chip, base, data)
                    back, _ = c.dma_read(self.chip, base, len(data))
                    if back != data:
                        self.errors.append(f"chip {self.chip}: DMA round {i} read back different bytes")
                    r = self.s.vtrn("ping", self.chip, "--count", 5, "--json", timeout=30)
                    if r.returncode != 0:
                        self.errors.append(f"chip {self.chip}: ping exited {r.returncode}: {r.stderr.strip()}")
                    i += 1
                    self.rounds = i
        except Exception as e:  # noqa: BLE001 - any failure here is the finding
            self.errors.append(f"chip {self.chip}: background work failed: {e!r}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join(60)


def wait_ready(s, chip, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        doc = s.vtrn_json("ls")
        c = [x for x in doc["chips"] if x["id"] == chip][0]
        if c["state"] == "READY" and not c["recovering"]:
            return c
        if time.monotonic() > deadline:
            raise AssertionError(f"chip {chip} not READY within {timeout} s: {c}")
        time.sleep(0.05)


def inject(s, kind, chip, *extra, timeout=60):
    """`vtrn inject KIND CHIP --wait --json`: the document, or AssertionError."""
    r = s.vtrn("inject", kind, chip, "--wait", "--json", *extra, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"vtrn inject {kind} {chip} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


class FaultsOnOneChip(h.SessionTestCase):
    """Chip 1 is broken in every way while chip 0 keeps working."""

    session_name = "reliab"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A 1 s give-up window: each fault here is a fresh one, so no reset
        # waits out a back-off (GivingUp tests the window). DMA is checked
        # against live allocations, as in production: a write issued after a
        # reset to an allocation from before it must fail, not land.
        r = cls.s.vtrn("up", "--chips", 2, env={"VTRN_RESET_LIMIT": "50", "VTRN_RESET_WINDOW_MS": "1000",
                                                 "VTRN_HBM_DMA_UNCHECKED": "0"})
        if r.returncode != 0:
            cls.s.cleanup()
            raise AssertionError(f"vtrn up --chips 2 exited {r.returncode}: {r.stderr}")
        cls.s.remember_pids()

    @classmethod
    def tearDownClass(cls):
        problems = []
        try:
            problems += h.board_health_problems(cls.s, (0, 1))
        except Exception as e:  # noqa: BLE001
            problems.append(f"health check failed: {e!r}")
        problems += h.down_and_check(cls.s)
        super().tearDownClass()
        if problems:
            raise AssertionError("after the fault tests: " + "; ".join(problems))

    def setUp(self):
        wait_ready(self.s, 0)
        wait_ready(self.s, 1)

    def check_chip1_works(self):
        r = self.s.vtrn("ping", 1, "--count", 10, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        with h.ApiClient(self.s) as c:
            base, _ = h.hbm_alloc(c, 1, 256 * 1024)
            data = os.urandom(256 * 1024)
            c.dma_write(1, base, data)
            self.assertEqual(c.dma_read(1, base, len(data))[0], data)

    def fault_round(self, kind, cause):
        before = self.s.vtrn_json("info", 1)
        with Background(self.s) as bg:
            t0 = time.monotonic()
            doc = inject(self.s, kind, 1)
            wall = time.monotonic() - t0
            time.sleep(0.2)
        self.assertEqual(bg.errors, [], f"chip 0 was disturbed by {kind} on chip 1")
        self.assertGreater(bg.rounds, 0, "the background work on chip 0 never completed a round")
        hist = doc["reset_history"]
        self.assertEqual(hist["last_cause"], cause, hist)
        self.assertEqual(hist["count"], before["reset_history"]["count"] + 1, hist)
        self.assertFalse(hist["recovering"])
        self.assertGreater(hist["last_recover_ns"], 0)
        self.assertTrue(hist["last_log"], "the last log lines of the boot that went down were kept")
        self.assertLess(wall, 30, f"{kind}: detection and recovery took {wall:.1f} s")
        after = self.s.vtrn_json("info", 1)
        self.assertGreater(after["summary"]["boot_generation"], before["summary"]["boot_generation"])
        self.assertEqual(after["summary"]["error"], "")
        self.assertEqual(after["reset_history"]["last_cause"], cause)
        self.check_chip1_works()
        print(f"\n  {kind}: detected in {hist['last_detect_ns'] / 1e6:.0f} ms, READY "
              f"{hist['last_recover_ns'] / 1e6:.0f} ms later ({hist['last_reason']})", file=sys.stderr)
        return doc, before, after

    def test_hang_is_caught_by_the_watchdog_and_the_chip_comes_back(self):
        doc, _, after = self.fault_round("hang", "watchdog")
        hist = doc["reset_history"]
        self.assertIn("no heartbeat", hist["last_reason"])
        # Measured from the firmware's acknowledgement; the last heartbeat
        # came up to one 100 ms period before it. Detection is bounded by the
        # watchdog plus one 200 ms check period (and a loaded machine's noise).
        self.assertGreaterEqual(hist["last_detect_ns"], WATCHDOG_MS * 1e6 * 0.8)
        self.assertLess(hist["last_detect_ns"], (WATCHDOG_MS + 1500) * 1e6)
        self.assertIn("reliability: committing injected fault: hang", "\n".join(hist["last_log"]))
        self.assertEqual(after["watchdog_timeout_ms"], WATCHDOG_MS)

    def test_stall_with_interrupts_on_is_caught_by_the_watchdog_too(self):
        doc, _, _ = self.fault_round("stall", "watchdog")
        self.assertIn("no heartbeat", doc["reset_history"]["last_reason"])

    def test_panic_keeps_its_record_and_the_chip_comes_back(self):
        doc, _, after = self.fault_round("panic", "panic")
        hist = doc["reset_history"]
        self.assertIn("firmware panic", hist["last_reason"])
        self.assertRegex(hist["last_panic"], r"exception on cpu \d+: ec 0x25 .*far 0x7fdead0000")
        self.assertLess(hist["last_detect_ns"], 1.5e9, "a panic is seen within a poll period")
        self.assertEqual(after["reset_history"]["last_panic"], hist["last_panic"])
        r = self.s.vtrn("info", 1)
        self.assertIn("last panic", r.stdout)
        self.assertIn("panic", r.stdout.split("resets")[1].splitlines()[0])

    def test_killed_qemu_is_replaced_and_the_chip_comes_back(self):
        old_pid = self.s.vtrn_json("info", 1)["summary"]["qemu_pid"]
        doc, before, after = self.fault_round("qemu-kill", "qemu-exit")
        self.assertEqual(doc["qemu_pid"], old_pid)
        self.assertIn(f"pid {old_pid}", doc["reset_history"]["last_reason"])
        self.assertIn("Killed", doc["reset_history"]["last_reason"])
        new_pid = after["summary"]["qemu_pid"]
        self.assertNotEqual(new_pid, old_pid)
        self.assertFalse(h.process_alive(old_pid))
        self.assertTrue(h.process_alive(new_pid))
        self.assertEqual(after["reset_history"]["qemu_relaunches"],
                         before["reset_history"]["qemu_relaunches"] + 1)
        self.s.known_pids.add(new_pid)

    def test_corrupted_dma_ring_latches_only_that_queue_until_dma_reset(self):
        with Background(self.s) as bg:
            doc = inject(self.s, "dma-corrupt", 1, "--queue", 0)
            self.assertIn("queue 0", doc["detail"])
            self.assertTrue(doc["dma_fault"], doc)
            with h.ApiClient(self.s) as c:
                q0 = c.dma_stats(1)["queues"][0]
                self.assertNotEqual((q0["device_error"], q0["host_fault"]), (0, ""), q0)
                others = [q for q in c.dma_stats(1)["queues"][1:] if q["device_error"] or q["host_fault"]]
                self.assertEqual(others, [], "only the corrupted queue latched")
            r = self.s.vtrn("dma", "reset", 1)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(bg.errors, [])
        self.assertEqual(h.board_health_problems(self.s, (1,)), [])
        self.check_chip1_works()
        self.assertEqual(self.s.vtrn_json("ls")["chips"][1]["state"], "READY")

    def test_manual_reset_fails_what_is_in_flight_with_the_reason(self):
        before = self.s.vtrn_json("info", 1)
        ping = self.s.popen("ping", 1, "--count", 100000, "--interval-us", 1000)
        dma_result = {}

        def dma_loop():
            with h.ApiClient(self.s) as c:
                base, _ = h.hbm_alloc(c, 1, 3 * MiB)
                try:
                    while True:
                        c.dma_write(1, base, bytes(3 * MiB))
                except h.ApiError as e:
                    dma_result["error"] = e

        t = threading.Thread(target=dma_loop, daemon=True)
        t.start()
        time.sleep(0.5)
        r = self.s.vtrn("reset", 1, "--json", timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["reset_history"]["last_cause"], "manual")
        self.assertGreater(doc["boot_generation"], before["summary"]["boot_generation"])
        out, err = ping.communicate(timeout=30)
        self.assertEqual(ping.returncode, h.EXIT_CHIP_NOT_READY, err)
        # In flight when the reset began, or submitted while it ran.
        self.assertRegex(err, r"chip 1 (was reset: |is being reset \()manual reset \(vtrn reset\)")
        t.join(30)
        self.assertFalse(t.is_alive(), "a DMA write in flight during the reset never returned")
        self.assertIn("error", dma_result)
        # In flight: "queue reset"; queued: the chip's state; issued after the
        # reboot: the allocation went with the chip's old HBM allocator.
        self.assertRegex(dma_result["error"].error, r"reset|BOOTING|STARTING|HBM range not allocated")
        self.check_chip1_works()

    def test_telemetry_and_ls_report_resets_and_the_last_reason(self):
        r = self.s.vtrn("reset", 1, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"chip 1: reset, READY again after .* \(boot generation \d+")
        tel = self.s.vtrn_json("telemetry", 1)
        t = tel["chips"][0] if isinstance(tel, dict) and "chips" in tel else tel[0]
        self.assertGreaterEqual(t["resets"], 1)
        self.assertEqual(t["last_reset_reason"], "manual reset (vtrn reset)")
        self.assertGreater(t["last_reset_unix_ms"], (time.time() - 600) * 1000)
        chips = self.s.vtrn_json("ls")["chips"]
        self.assertEqual(chips[0]["resets"], 0, "chip 0 was never reset")
        self.assertGreaterEqual(chips[1]["resets"], 1)

    def test_inject_mistakes_are_one_line_errors(self):
        r = self.s.vtrn("inject", "hang", 7)
        self.assert_one_error_line(r, h.EXIT_UNKNOWN_CHIP, "chip 7")
        r = self.s.vtrn("inject", "melt", 1)
        self.assert_one_error_line(r, h.EXIT_USAGE)
        r = self.s.vtrn("inject", "dma-corrupt", 1, "--queue", 15)
        self.assert_one_error_line(r, h.EXIT_FAILED, "no DMA queue 15")
        r = self.s.vtrn("reset", 9)
        self.assert_one_error_line(r, h.EXIT_UNKNOWN_CHIP, "chip 9")


class GivingUp(h.SessionTestCase):
    """A chip that keeps failing is not reset forever."""

    session_name = "giveup"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = cls.s.vtrn("up", "--chips", 1, env={"VTRN_RESET_LIMIT": "1"})
        if r.returncode != 0:
            cls.s.cleanup()
            raise AssertionError(f"vtrn up --chips 1 exited {r.returncode}: {r.stderr}")
        cls.s.remember_pids()

    @classmethod
    def tearDownClass(cls):
        problems = h.down_and_check(cls.s)
        super().tearDownClass()
        if problems:
            raise AssertionError("; ".join(problems))

    def test_second_panic_within_the_window_ends_failed_and_manual_reset_revives(self):
        inject(self.s, "panic", 0)
        r = self.s.vtrn("inject", "panic", 0, "--wait", timeout=60)
        self.assert_one_error_line(r, h.EXIT_CHIP_NOT_READY, "did not recover from panic", "FAILED",
                                   "gave up after 2 resets within 60 s", "firmware panic")
        c = self.s.vtrn_json("ls")["chips"][0]
        self.assertEqual(c["state"], "FAILED")
        self.assertEqual(c["qemu_pid"], 0, "a chip given up on keeps no QEMU burning a core")
        r = self.s.vtrn("ping", 0)
        self.assert_one_error_line(r, h.EXIT_CHIP_NOT_READY, "gave up")
        r = self.s.vtrn("reset", 0, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        c = wait_ready(self.s, 0)
        self.s.known_pids.add(c["qemu_pid"])
        self.assertEqual(self.s.vtrn("ping", 0, "--count", 5).returncode, 0)


class DaemonAndClients(h.SessionTestCase):
    """vtrnd killed and restarted; clients that leave; clients of another uid."""

    session_name = "daemon"

    def up(self):
        r = self.s.vtrn("up", "--chips", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()

    def tearDown(self):
        problems = h.down_and_check(self.s)
        self.assertEqual(problems, [])

    def test_sigkilled_vtrnd_takes_its_qemus_along_and_up_starts_clean(self):
        self.up()
        pid = self.s.vtrnd_pid()
        qemus = [c["qemu_pid"] for c in self.s.vtrn_json("ls")["chips"]]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(h.process_alive(p) for p in qemus + [pid]):
            time.sleep(0.02)
        h.reap_children()
        self.assertEqual([p for p in qemus + [pid] if h.process_alive(p)], [],
                         "QEMU or vtrnd still running 5 s after SIGKILL of vtrnd")
        # What the dead vtrnd left: its pid file, socket and chip directories.
        self.assertTrue(os.path.exists(os.path.join(self.s.runtime_dir, "vtrnd.pid")))
        r = self.s.vtrn("ls")
        self.assertEqual(r.returncode, h.EXIT_NOT_RUNNING, r.stderr)
        self.up()
        chips = self.s.vtrn_json("ls")["chips"]
        self.assertEqual([c["state"] for c in chips], ["READY", "READY"])
        self.assertNotEqual(self.s.vtrnd_pid(), pid)
        with open(os.path.join(self.s.runtime_dir, "vtrnd.log")) as f:
            self.assertIn(f"removing stale runtime state of vtrnd pid {pid}", f.read())

    def test_client_that_leaves_mid_dma_has_its_work_cancelled(self):
        self.up()
        c = h.ApiClient(self.s)
        base, _ = h.hbm_alloc(c, 0, 18 * MiB)
        # Queue several large writes without reading any answer, then leave.
        for i in range(6):
            frame = h.pb_encode([(1, 100 + i), (30, [(1, 0), (2, base + i * 3 * MiB), (3, bytes(3 * MiB))])])
            c.sock.sendall(len(frame).to_bytes(4, "little") + frame)
        time.sleep(0.05)
        c.close()
        deadline = time.monotonic() + 10
        while True:
            with h.ApiClient(self.s) as probe:
                st = probe.call(34, [(1, 0)])
            waiting = h.pb_uint(st, 9)
            busy = [h.pb_uint(h.pb_decode(q), 12) for q in st.get(1, [])]
            if waiting == 0 and not any(busy):
                break
            self.assertLess(time.monotonic(), deadline, f"clients_waiting={waiting} in_flight={busy}")
            time.sleep(0.05)
        self.assertEqual(self.s.vtrn("ping", 0, "--count", 5).returncode, 0)

    def test_malformed_frames_are_rejected_and_logged_and_the_daemon_keeps_serving(self):
        self.up()
        with h.ApiClient(self.s) as c:
            junk = b"\xff\xff\xff\xff\x0f garbage"
            c.sock.sendall(len(junk).to_bytes(4, "little") + junk)
            n = int.from_bytes(c._recv_exact(4), "little")
            resp = h.pb_decode(c._recv_exact(n))
            self.assertEqual(h.pb_uint(resp, 2), h.API_STATUS_BAD_REQUEST)
            self.assertIn(b"does not decode", resp[3][-1])
            # Still the same connection: a valid request is answered.
            self.assertGreater(len(c.dma_stats(0)["queues"]), 0)
        with h.ApiClient(self.s) as c:
            c.sock.sendall((64 << 20).to_bytes(4, "little") + b"x" * 16)
            self.assertEqual(c.sock.recv(4), b"", "an oversized frame closes the connection")
        with open(os.path.join(self.s.runtime_dir, "vtrnd.log")) as f:
            text = f.read()
        self.assertIn("request does not decode, rejected", text)
        self.assertIn("frame above", text)
        self.assertEqual(self.s.vtrn("ping", 0, "--count", 3).returncode, 0)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv")
    def test_socket_refuses_a_client_of_another_uid_even_when_its_mode_allows_it(self):
        self.up()
        sock = os.path.join(self.s.runtime_dir, "vtrnd.sock")
        self.assertEqual(os.stat(sock).st_mode & 0o777, 0o600)
        self.assertEqual(os.stat(self.s.runtime_dir).st_mode & 0o777, 0o700)
        probe = ("import socket,sys\n"
                 "s=socket.socket(socket.AF_UNIX);s.settimeout(5)\n"
                 "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('connect', e.errno); sys.exit(0)\n"
                 "f=bytes([0x08,1,0x52,0])\n"
                 "try:\n s.sendall(len(f).to_bytes(4,'little')+f); print('answer' if s.recv(4) else 'closed')\n"
                 "except (BrokenPipeError, ConnectionResetError):\n print('closed')\n")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe, sock]
        # The mode bits stop it first.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        self.assertIn("connect 13", r.stdout, r.stderr)
        # Loosened modes: the uid check still refuses, and says so in the log.
        # Only the session's own directories are opened up (mkdtemp made
        # them 0700); everything above them is the machine's /tmp.
        parents = [(d, os.stat(d).st_mode & 0o777) for d in (self.s.runtime_dir, self.s.tmp)]
        try:
            for d, mode in parents:
                os.chmod(d, mode | 0o011)
            os.chmod(sock, 0o666)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        finally:
            os.chmod(sock, 0o600)
            for d, mode in parents:
                os.chmod(d, mode)
        self.assertIn("closed", r.stdout, r.stderr)
        with open(os.path.join(self.s.runtime_dir, "vtrnd.log")) as f:
            self.assertIn("refused a client with uid 65534", f.read())
        self.assertEqual(self.s.vtrn("ping", 0).returncode, 0, "the owner is still served")


if __name__ == "__main__":
    unittest.main(verbosity=2)
