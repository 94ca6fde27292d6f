"""Integration: ring collectives (all-reduce, all-gather) as jobs over the
chip-to-chip links, on real QEMU chips, driven through `vtrn run allreduce`
and `vtrn run allgather`. The CLI verifies every chip's output bit for bit
against its host reference (fixed order of additions, see
firmware/collectives/include/fw/collective.h), so a zero exit status and
"verified" mean the data is right; here we check that and the ring the
board implies. A retrain and injected bit errors in the middle of a
collective must end it DONE with correct data, or FAILED with a reason
naming the step, within a bound: never a hang. A switched board (no
direct chip-to-chip links, the switch does not forward) gives one error
line.

Timings are bounds, never measurements.
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

BOARD_DIR = os.path.dirname(h.BOARD_DTB)
RING4 = os.path.join(BOARD_DIR, "vtrn-ring4.dtb")
SWITCH = os.path.join(BOARD_DIR, "vtrn-switch.dtb")
UP_STATES = ("L0", "L0s", "L1")
TRAIN_TIMEOUT_S = 60


def wait_links_up(s):
    deadline = time.monotonic() + TRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        ps = s.vtrn_json("link", "ls")["ports"]
        if all(p["state"] in UP_STATES for p in ps if p["wired"] and p["peer_on_board"]):
            return
        time.sleep(0.2)
    raise AssertionError("links did not train")


class BoardSession(h.SessionTestCase):
    board = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        args = ["up", "--boot-timeout-ms", 30000] + (["--board", cls.board] if cls.board else [])
        r = cls.s.vtrn(*args, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"vtrn up failed: {r.stderr}")
        cls.s.remember_pids()

    @classmethod
    def tearDownClass(cls):
        cls.s.vtrn("down", timeout=60)
        super().tearDownClass()

    def run_verified(self, op, nbytes, chips, ring):
        r = self.s.vtrn("run", op, "--bytes", nbytes, "--seed", 11, "--json", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["state"], "DONE")
        self.assertTrue(doc["verified"])
        self.assertEqual(doc["chips"], chips)
        self.assertEqual(doc["ring"], ring)
        self.assertEqual(len(doc["per_chip"]), chips)
        for c in doc["per_chip"]:
            self.assertEqual(c["state"], "DONE", c)
            self.assertTrue(c["verified"], c)
            self.assertGreater(c["chip_run_ns"], 0)
        self.assertGreater(doc["bus_bw_bytes_per_s"], 0)
        return doc


class TwoChipCollectives(BoardSession):
    session_name = "coll2"

    def test_allreduce_and_allgather_verify_on_two_chips(self):
        wait_links_up(self.s)
        self.run_verified("allreduce", 65536, 2, [0, 1])
        self.run_verified("allgather", 32768, 2, [0, 1])
        r = self.s.vtrn("run", "allreduce", "--bytes", 4096)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("every chip verified", r.stdout)

    def test_bytes_not_a_multiple_of_four_is_a_usage_error(self):
        r = self.s.vtrn("run", "allreduce", "--bytes", 4097)
        self.assert_one_error_line(r, 2, "multiple of 4")


class FourChipRingCollectives(BoardSession):
    session_name = "coll4"
    board = RING4

    def test_allreduce_and_allgather_verify_on_the_ring(self):
        wait_links_up(self.s)
        self.run_verified("allreduce", 131072, 4, [0, 1, 2, 3])
        self.run_verified("allgather", 32768, 4, [0, 1, 2, 3])

    def test_retrain_and_bit_errors_mid_collective_end_done_or_failed_with_reason(self):
        wait_links_up(self.s)
        t0 = time.monotonic()
        p = self.s.popen("run", "allreduce", "--bytes", 524288, "--step-timeout-ms", 5000,
                         "--timeout-ms", 30000, "--json")
        time.sleep(0.3)
        self.s.vtrn_json("link", "retrain", 1, 0)
        self.s.vtrn_json("link", "inject", 2, 0, "--ber", "1e-5")
        out, err = p.communicate(timeout=90)
        self.assertLess(time.monotonic() - t0, 60, "the collective took too long to end")
        self.s.vtrn_json("link", "inject", 2, 0, "--ber", "0")
        if p.returncode == 0:
            doc = json.loads(out)
            self.assertTrue(doc["verified"])
        else:
            # A failure is a clear one-line status naming the step.
            self.assertEqual(p.returncode, 1, err)
            self.assertTrue(err.startswith("vtrn: allreduce failed: "), err)
            self.assertIn("step", err)
        ps = self.s.vtrn_json("link", "ls")["ports"]
        self.assertGreater(sum(x["counters"]["retrains"] for x in ps), 0)
        # The ring still works afterwards.
        wait_links_up(self.s)
        for chip, port in ((2, 0), (3, 1)):
            self.s.vtrn_json("link", "inject", chip, port, "--restore")
        wait_links_up(self.s)
        self.run_verified("allreduce", 16384, 4, [0, 1, 2, 3])


class SwitchedBoardCollective(BoardSession):
    session_name = "collsw"
    board = SWITCH

    def test_board_without_a_ring_of_direct_links_gives_one_error_line(self):
        r = self.s.vtrn("run", "allreduce", "--bytes", 4096)
        self.assert_one_error_line(r, 1, "cannot form a ring", "switch")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
