"""Integration: chips that hang, panic, lose their QEMU or get a corrupted DMA
ring under real QEMU, and the board that keeps going.

On a 2-chip board, chip 1 is broken on purpose with `vtrn inject` while chip
0 is pinged and moves DMA the whole time: the faulty chip must be detected
(watchdog, panic record, child exit, latched queue), reset and READY again,
the other chip must not notice, nothing may hang, and every error must say
what happened. A second board resets a chip by hand while a ping, an HBM
allocation, a DMA write and a job all wait on it (its firmware stalled, so
none of them can finish first): each must end with the reset as its
reason. A third checks the give-up rule (a chip that keeps failing ends
FAILED with the reason, and `vtrn reset` brings it back); a fourth kills
vtrnd itself and starts again, and checks the socket's owner rule and the
cancellation of a disconnected client's DMA.

Detection and recovery are waited for, never timed here: how long they take
is a figure of tests/bench/board/board_bench.py.
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
MANUAL_RESET = "chip 0 was reset: manual reset (vtrn reset)"


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


def wait_ready(s, chip, timeout=60):
    return h.wait_until(f"chip {chip} READY", lambda: [x for x in s.vtrn_json("ls")["chips"] if x["id"] == chip][0],
                        lambda c: c["state"] == "READY" and not c["recovering"], timeout)


def inject(s, kind, chip, *extra, timeout=60):
    """`vtrn inject KIND CHIP --wait --json`: the document, or AssertionError."""
    r = s.vtrn("inject", kind, chip, "--wait", "--json", *extra, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"vtrn inject {kind} {chip} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


class FaultsOnOneChip(h.BoardTestCase):
    """Chip 1 is broken in every way while chip 0 keeps working."""

    session_name = "reliab"
    # A 1 s give-up window: each fault here is a fresh one, so no reset
    # waits out a back-off (GivingUp tests the window).
    up_args = ("--chips", 2)
    up_env = {"VTRN_RESET_LIMIT": "50", "VTRN_RESET_WINDOW_MS": "1000"}

    @classmethod
    def end_of_class_problems(cls):
        return h.board_health_problems(cls.s, (0, 1))

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
            h.wait_until("a first round of background work on chip 0", lambda: bg.rounds, bool, 60)
            doc = inject(self.s, kind, 1)
            # Chip 0 keeps working after chip 1 came back, too.
            done = bg.rounds
            h.wait_until("another round of background work on chip 0", lambda: bg.rounds,
                         lambda n: n > done or bg.errors, 60)
        self.assertEqual(bg.errors, [], f"chip 0 was disturbed by {kind} on chip 1")
        hist = doc["reset_history"]
        self.assertEqual(hist["last_cause"], cause, hist)
        self.assertEqual(hist["count"], before["reset_history"]["count"] + 1, hist)
        # vtrn-hw stopped the chip's engines before the chip was reset.
        self.assertEqual(hist["engines_quiesced"], before["reset_history"]["engines_quiesced"] + 1, hist)
        self.assertFalse(hist["recovering"])
        self.assertGreater(hist["last_recover_ns"], 0)
        self.assertTrue(hist["last_log"], "the last log lines of the boot that went down were kept")
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
        # vtrnd's own account: the heartbeat had stopped for at least the
        # watchdog's timeout when it fired (the watchdog does not fire early).
        silent_ms = int(re.search(r"no heartbeat for (\d+) ms", hist["last_reason"]).group(1))
        self.assertGreaterEqual(silent_ms, WATCHDOG_MS, hist["last_reason"])
        self.assertGreater(hist["last_detect_ns"], 0)
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
        self.assertGreater(hist["last_detect_ns"], 0)
        self.assertEqual(after["reset_history"]["last_panic"], hist["last_panic"])
        r = self.s.vtrn("info", 1)
        self.assertIn("last panic", r.stdout)
        self.assertIn("panic", r.stdout.split("resets")[1].splitlines()[0])

    def test_chunk_that_ignores_stop_panics_the_chip_naming_the_job_and_it_comes_back(self):
        before = self.s.vtrn_json("info", 1)["reset_history"]
        r = self.s.vtrn("inject", "job-stuck", 1, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ignores stop", json.loads(r.stdout)["detail"])
        # 256 x 1024 f32: 8 chunks over the executors; the first one
        # an executor core runs never returns, so the step never completes.
        r = self.s.vtrn("run", "add", "--m", 256, "--n", 1024, "--chip", 1, "--timeout-ms", 1000, timeout=60)
        self.assertEqual(r.returncode, h.EXIT_TIMEOUT, r.stdout + r.stderr)
        self.assertIn("timed out after 1000 ms", r.stdout + r.stderr)
        # Its cores never left it: 5 s after the timeout the firmware panics
        # (job stuck) and vtrnd resets the chip.
        h.wait_until("chip 1 reset for the stuck job and READY again",
                     lambda: [x for x in self.s.vtrn_json("ls")["chips"] if x["id"] == 1][0],
                     lambda c: c["resets"] > before["count"] and c["state"] == "READY" and not c["recovering"], 30)
        hist = self.s.vtrn_json("info", 1)["reset_history"]
        self.assertEqual(hist["count"], before["count"] + 1, hist)
        self.assertEqual(hist["last_cause"], "panic", hist)
        self.assertIn("firmware panic", hist["last_reason"])
        self.assertRegex(hist["last_panic"], r"^job stuck on cpu \d+: job \d+: cores 0x[0-9a-f]+ did not stop "
                                             r"within 5000 ms of its timeout \(step 0 of 1\)")
        self.assertGreater(hist["last_recover_ns"], 0)
        # The chip runs the same job again (the injection was one chunk's).
        r = self.s.vtrn("run", "add", "--m", 256, "--n", 1024, "--chip", 1, "--timeout-ms", 20000, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_chip1_works()

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

    def test_telemetry_and_ls_report_resets_and_the_last_reason(self):
        t_before_ms = time.time() * 1000
        r = self.s.vtrn("reset", 1, timeout=60)
        t_after_ms = time.time() * 1000
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"chip 1: reset, READY again after .* \(boot generation \d+")
        tel = self.s.vtrn_json("telemetry", 1)
        t = tel["chips"][0] if isinstance(tel, dict) and "chips" in tel else tel[0]
        self.assertGreaterEqual(t["resets"], 1)
        self.assertEqual(t["last_reset_reason"], "manual reset (vtrn reset)")
        # vtrnd's wall clock of the reset lies within the reset command
        # (the same host clock; 1 ms of rounding).
        self.assertGreaterEqual(t["last_reset_unix_ms"], t_before_ms - 1)
        self.assertLessEqual(t["last_reset_unix_ms"], t_after_ms + 1)
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


class ManualResetWithWaiters(h.BoardTestCase):
    """`vtrn reset` while one request of every kind waits on the chip."""

    session_name = "mreset"
    # No watchdog: the stalled firmware below stays stalled until the
    # manual reset, which is then the only reset.
    up_args = ("--chips", 1)
    # The firmware's CPU copier: a stalled firmware holds the DMA write in
    # flight only there (the DMA engines are hardware and keep copying).
    up_env = {"VTRN_WATCHDOG_MS": "0", "VTRN_COPY_ENGINE": "cpu"}

    def send(self, client, body_field, body):
        """Sends one request without waiting for its answer, then a List on
        the same connection: once that is answered, vtrnd has read the
        request (a connection is read in order). Returns the request id."""
        rid = client.next_id
        client.next_id += 1
        frame = h.pb_encode([(1, rid), (body_field, body)])
        client.sock.sendall(len(frame).to_bytes(4, "little") + frame)
        client.call(10, [])
        return rid

    def answer(self, client, rid):
        """(status, error) of the answer to request rid."""
        while True:
            n = int.from_bytes(client._recv_exact(4), "little")
            resp = h.pb_decode(client._recv_exact(n))
            if h.pb_uint(resp, 1) == rid:
                return h.pb_uint(resp, 2), resp.get(3, [b""])[-1].decode(errors="replace")

    def test_manual_reset_ends_every_kind_of_waiter_with_the_reset(self):
        before = self.s.vtrn_json("info", 0)
        path = os.path.join(self.s.tmp, "long.json")
        with open(path, "w") as f:
            json.dump(h.LONG_GEMM_JOB, f)
        job_id = self.s.vtrn_json("submit", path)["job"]["id"]
        h.wait_until("the job to run", lambda: self.s.vtrn_json("job", "show", job_id)["state"],
                     lambda st: st == "RUNNING", 60)
        job_waiter = self.s.popen("job", "wait", job_id, "--json")
        clients = [h.ApiClient(self.s) for _ in range(3)]
        try:
            dma, ping, hbm = clients
            addr, _ = h.hbm_alloc(dma, 0, 3 * MiB)
            # The firmware stops serving anything: from here nothing sent to
            # the chip can be answered by it. (No --wait: with the watchdog
            # off nothing recovers it but the reset below.)
            r = self.s.vtrn("inject", "stall", 0, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            waiting = {
                "dma": (dma, self.send(dma, 30, [(1, 0), (2, addr), (3, bytes(3 * MiB))])),
                "hbm": (hbm, self.send(hbm, 40, [(1, 0), (2, MiB), (3, 0), (4, 0)])),
                # Last: vtrnd gives a ping one second.
                "ping": (ping, self.send(ping, 12, [(1, 0), (2, 1)])),
            }
            with h.ApiClient(self.s) as probe:
                self.assertGreater(sum(q["in_flight"] for q in probe.dma_stats(0)["queues"]), 0,
                                   "the DMA write is not in flight")
            r = self.s.vtrn("reset", 0, "--json", timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc["reset_history"]["last_cause"], "manual")
            self.assertGreater(doc["boot_generation"], before["summary"]["boot_generation"])
            # Control requests fail with the chip's state and the reset's
            # reason; the DMA chain in flight ends with DMA status RESET.
            for kind, (client, rid) in waiting.items():
                with self.subTest(waiter=kind):
                    status, error = self.answer(client, rid)
                    if kind == "dma":
                        self.assertEqual(status, h.API_STATUS_CHIP_ERROR, error)
                        self.assertRegex(error, r"^chip 0: DMA write chunk at 0x[0-9a-f]+ failed: queue reset$")
                    else:
                        self.assertEqual(status, h.API_STATUS_CHIP_NOT_READY, error)
                        self.assertIn(MANUAL_RESET, error)
        finally:
            for c in clients:
                c.close()
            out, err = job_waiter.communicate(timeout=60)
        self.assertEqual(job_waiter.returncode, h.EXIT_FAILED, err)
        j = json.loads(out)
        self.assertEqual(j["state"], "FAILED", (out, err))
        self.assertIn("chip reset", j["reason"])
        # The chip works again: a ping, and DMA through a new allocation.
        self.assertEqual(self.s.vtrn("ping", 0, "--count", 5).returncode, 0)
        with h.ApiClient(self.s) as c:
            base, _ = h.hbm_alloc(c, 0, MiB)
            data = os.urandom(MiB)
            c.dma_write(0, base, data)
            self.assertEqual(c.dma_read(0, base, MiB)[0], data)


class ManualResetWithEngineWork(h.BoardTestCase):
    """`vtrn reset` with DMA queued on the chip's DMA engines (the default
    copy path), held there by halting every engine: vtrn-hw stops the
    engines before the chip resets, the write in flight ends with the
    reset, and nothing of it lands afterwards."""

    session_name = "ereset"
    up_args = ("--chips", 1)
    up_env = {"VTRN_WATCHDOG_MS": "0"}

    def test_reset_stops_the_engines_first_and_ends_their_queued_dma_with_the_reset(self):
        self.assertEqual(h.copy_engine_problems(self.s, (0,)), [])
        said = [l for l in self.s.vtrn_json("logs", 0)["lines"] if "copy engine: " in l][-1]
        engines = int(re.search(r"copy engine: (\d+) DMA engines", said).group(1))
        before = self.s.vtrn_json("info", 0)["reset_history"]
        with h.ApiClient(self.s) as c:
            addr, _ = h.hbm_alloc(c, 0, 3 * MiB)
        for e in range(engines):
            r = self.s.vtrn("inject", "dma-engine", 0, "--engine", e, "--halt")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"DMA engine {e} halts before its next descriptor", r.stdout)
        dma = h.ApiClient(self.s)
        try:
            rid = ManualResetWithWaiters.send(self, dma, 30, [(1, 0), (2, addr), (3, os.urandom(3 * MiB))])
            time.sleep(0.3)
            with h.ApiClient(self.s) as probe:
                self.assertGreater(sum(q["in_flight"] for q in probe.dma_stats(0)["queues"]), 0,
                                   "the halted engines consumed the DMA write")
            r = self.s.vtrn("reset", 0, "--json", timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            hist = json.loads(r.stdout)["reset_history"]
            self.assertEqual(hist["engines_quiesced"], before["engines_quiesced"] + 1, hist)
            self.assertGreater(hist["last_engines_quiesce_ns"], 0, hist)
            status, error = ManualResetWithWaiters.answer(self, dma, rid)
            self.assertEqual(status, h.API_STATUS_CHIP_ERROR, error)
            self.assertRegex(error, r"^chip 0: DMA write chunk at 0x[0-9a-f]+ failed: queue reset$")
        finally:
            dma.close()
        # The new boot hands out the same HBM again: what is written there now
        # stays (the chain queued before the reset never runs), and the
        # engines serve again (the halt ended with the reset).
        with h.ApiClient(self.s) as c:
            again, _ = h.hbm_alloc(c, 0, 3 * MiB)
            self.assertEqual(again, addr)
            data = os.urandom(3 * MiB)
            c.dma_write(0, again, data)
            time.sleep(0.3)
            self.assertEqual(c.dma_read(0, again, 3 * MiB)[0], data)


class GivingUp(h.BoardTestCase):
    """A chip that keeps failing is not reset forever."""

    session_name = "giveup"
    up_args = ("--chips", 1)
    up_env = {"VTRN_RESET_LIMIT": "1"}
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


class EnginesProcessCrash(h.SessionTestCase):
    """The board's vtrn-hw dies: every chip fails with a reason naming it."""

    session_name = "hwcrash"

    def tearDown(self):
        problems = h.down_and_check(self.s)
        self.assertEqual(problems, [])

    def test_killed_vtrn_hw_fails_every_chip_naming_it_and_resets_are_refused(self):
        r = self.s.vtrn("up", "--chips", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        hw = h.vtrn_hw_pids(self.s)
        self.assertEqual(len(hw), 1, "one vtrn-hw for the board")
        qemus = [c["qemu_pid"] for c in self.s.vtrn_json("ls")["chips"]]
        os.kill(hw[0], signal.SIGKILL)
        # A chip given up on is FAILED at once and kills its QEMU; ls shows
        # qemu_pid 0 only once vtrnd has reaped it, a moment later.
        chips = h.wait_until("both chips FAILED without a QEMU after vtrn-hw was killed",
                             lambda: self.s.vtrn_json("ls")["chips"],
                             lambda cs: all(c["state"] == "FAILED" and c["qemu_pid"] == 0 for c in cs), 30)
        for c in chips:
            with self.subTest(chip=c["id"]):
                self.assertIn(f"vtrn-hw (pid {hw[0]}) killed by signal 9", c["error"])
        h.wait_until("the chips' QEMUs gone", lambda: [p for p in qemus if h.process_alive(p)],
                     lambda left: not left, 30)
        r = self.s.vtrn("reset", 1, timeout=30)
        self.assert_one_error_line(r, h.EXIT_CHIP_NOT_READY, "vtrn-hw", "killed by signal 9", "vtrn down")
        self.assertEqual(self.s.vtrn_json("ls")["chips"][1]["state"], "FAILED")


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
        hw = h.vtrn_hw_pids(self.s)
        self.assertEqual(len(hw), 1, "one vtrn-hw for the board")
        qemus += hw
        os.kill(pid, signal.SIGKILL)

        def alive():
            h.reap_children()
            return [p for p in qemus + [pid] if h.process_alive(p)]

        h.wait_until("vtrnd, its QEMUs and its vtrn-hw gone after SIGKILL of vtrnd", alive,
                     lambda left: not left, 30)
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
        with h.ApiClient(self.s) as probe:
            def stats():
                st = probe.call(34, [(1, 0)])
                queues = [h.pb_decode(q) for q in st.get(1, [])]
                return {"waiting": h.pb_uint(st, 9), "in_flight": sum(h.pb_uint(q, 12) for q in queues),
                        "submitted": sum(h.pb_uint(q, 14) for q in queues)}

            before = stats()
            # In D3hot the device serves no DMA queue: what the client queues
            # now can only end by being cancelled, never by finishing first.
            self.s.vtrn_json("power", 0, "--state", "d3")
            try:
                h.wait_until("D3hot", lambda: self.s.vtrn_json("telemetry", 0)["chips"][0]["power"]["device_state"],
                             lambda st: st == "D3hot", 10)
                c = h.ApiClient(self.s)
                base, _ = h.hbm_alloc(c, 0, 18 * MiB)
                # Six large writes without reading any answer: more chunks
                # (256 KiB each) than vtrnd puts in flight at once.
                writes, size = 6, 3 * MiB
                for i in range(writes):
                    frame = h.pb_encode([(1, 100 + i), (30, [(1, 0), (2, base + i * size), (3, bytes(size))])])
                    c.sock.sendall(len(frame).to_bytes(4, "little") + frame)
                h.wait_until("work in flight on the ring and more queued in vtrnd", stats,
                             lambda st: st["in_flight"] > 0 and st["waiting"] > 0, 30)
                c.close()
                # vtrnd drops what it had not submitted; what the device holds
                # stays in flight until the device runs again.
                dropped = h.wait_until("the departed client's queued work dropped", stats,
                                       lambda st: st["waiting"] == 0, 30)
            finally:
                self.s.vtrn("power", 0, "--state", "d0")
            after = h.wait_until("nothing in flight", stats, lambda st: st["in_flight"] == 0, 30)
        chunks = writes * size // (256 * 1024)
        self.assertLess(dropped["submitted"] - before["submitted"], chunks,
                        "every chunk of the departed client's writes reached the ring")
        self.assertEqual(after["submitted"], dropped["submitted"], "chunks were submitted after the client left")
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
    h.main()
