"""Integration: every NeuronCore of every chip comes up. The default board's
chips are QEMU machines with one vCPU per NeuronCore; the firmware starts
cores 1..N-1 with PSCI CPU_ON after READY and each reports online, which
core 0 logs ("smp: core <n> online", then "jobs: <n> of <n> NeuronCores
online"). Idle executors sleep in WFI, so a chip with all its cores up must
come to rest: a look at its QEMU finds every thread asleep (a vCPU that
spins instead of waiting never is). How much of a core an idle chip costs
is a figure of tests/bench/board/board_bench.py, not a pass/fail bound.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


class SecondaryCores(h.BoardTestCase):
    session_name = "smp"

    @classmethod
    def board_ready(cls):
        cls.chips = cls.s.vtrn_json("ls")["chips"]

    def wait_for_log(self, chip, pattern, timeout=30.0):
        doc = h.wait_until(f"chip {chip}: a log line matching {pattern!r}",
                           lambda: self.s.vtrn_json("logs", chip),
                           lambda d: any(re.search(pattern, line) for line in d["lines"]), timeout, 0.1)
        return doc["lines"]

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

    def test_idle_chips_with_all_cores_up_come_to_rest(self):
        for chip in self.chips:
            self.wait_for_log(chip["id"], r"NeuronCores online")
            self.assertGreaterEqual(len(h.thread_states(chip["qemu_pid"])), chip_cores(self, chip["id"]),
                                    "fewer QEMU threads than vCPUs: the look below would miss a core")
            h.wait_process_at_rest(chip["qemu_pid"])


def chip_cores(test, chip):
    return test.s.vtrn_json("info", chip)["neuron_cores"]


if __name__ == "__main__":
    h.main()
