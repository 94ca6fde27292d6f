"""Integration: every NeuronCore of every chip comes up. The default board's
chips are QEMU machines with one vCPU per NeuronCore; the firmware starts
cores 1..N-1 with PSCI CPU_ON after READY and each reports online, which
core 0 logs ("smp: core <n> online", then "jobs: <n> of <n> NeuronCores
online"). Idle executors sleep in WFI, so a chip with all its cores up must
still cost the host next to nothing (the board lifecycle test bounds one
chip's idle CPU; here the bound holds with every secondary online).
"""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


class SecondaryCores(h.SessionTestCase):
    session_name = "smp"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = cls.s.vtrn("up")
        if r.returncode != 0:
            cls.s.cleanup()
            raise AssertionError(f"vtrn up failed: {r.stderr}")
        cls.s.remember_pids()
        cls.chips = cls.s.vtrn_json("ls")["chips"]

    def wait_for_log(self, chip, pattern, timeout=10.0):
        deadline = time.monotonic() + timeout
        lines = []
        while time.monotonic() < deadline:
            lines = self.s.vtrn_json("logs", chip)["lines"]
            if any(re.search(pattern, line) for line in lines):
                return lines
            time.sleep(0.1)
        self.fail(f"chip {chip}: no log line matches {pattern!r}; last lines: {lines[-10:]}")

    def test_board_gives_every_chip_at_least_two_cores(self):
        for chip in self.chips:
            info = self.s.vtrn_json("info", chip["id"])
            self.assertGreaterEqual(info["neuron_cores"], 2, info)

    def test_every_core_of_every_chip_reports_online(self):
        for chip in self.chips:
            cores = self.s.vtrn_json("info", chip["id"])["neuron_cores"]
            lines = self.wait_for_log(chip["id"], r"jobs: \d+ of \d+ NeuronCores online")
            summary = next(l for l in lines if "NeuronCores online" in l)
            self.assertIn(f"jobs: {cores} of {cores} NeuronCores online", summary)
            self.assertIn("core 0 serves only", summary)
            for core in range(1, cores):
                self.assertTrue(any(f"smp: core {core} online" in l for l in lines),
                                f"chip {chip['id']} core {core} missing: {lines[-15:]}")
            self.assertFalse(any("did not come online" in l for l in lines), lines[-15:])

    def test_idle_chips_with_all_cores_up_stay_cheap(self):
        for chip in self.chips:
            self.wait_for_log(chip["id"], r"NeuronCores online")
        pids = {c["id"]: c["qemu_pid"] for c in self.chips}
        start = {i: h.cpu_seconds(p) for i, p in pids.items()}
        t0 = time.monotonic()
        time.sleep(1.5)
        elapsed = time.monotonic() - t0
        for i, p in pids.items():
            share = (h.cpu_seconds(p) - start[i]) / elapsed
            self.assertLess(share, 0.15, f"chip {i} used {100 * share:.1f}% of a core while idle")

    @classmethod
    def tearDownClass(cls):
        cls.s.vtrn("down", timeout=60)
        super().tearDownClass()


if __name__ == "__main__":
    unittest.main(verbosity=2)
