"""Bench smoke test for tests/bench/board/board_bench.py: one short run
produces every figure with its reference and ratio (the bench itself
exits 1 when `vtrn down` leaves anything of its board behind). Shape and internal consistency only: timing on a shared machine is
not a pass/fail criterion, so no threshold here.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402


class BoardBenchSmoke(h.SessionTestCase):
    session_name = "boardbench-smoke"

    def test_board_bench_reports_idle_faults_and_cancel_with_their_references(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "board_bench.py"), "--seconds", "0.5",
                            "--cancels", "2", "--json"], env=self.s.env, capture_output=True, text=True, timeout=280)
        self.assertEqual(r.returncode, 0, r.stderr)
        sys.stderr.write(r.stderr)  # the bench's report: ctest -V shows the figures
        doc = json.loads(r.stdout)
        self.assertEqual([i["chip"] for i in doc["idle"]], [0, 1])
        for i in doc["idle"]:
            with self.subTest(chip=i["chip"]):
                self.assertGreaterEqual(i["idle_core_share"], 0)
                self.assertGreater(i["busy_core_share"], 0)
                self.assertAlmostEqual(i["idle_over_busy"], i["idle_core_share"] / i["busy_core_share"], places=9)
        self.assertEqual([f["fault"] for f in doc["faults"]], ["hang", "panic", "qemu-kill"])
        self.assertEqual([f["cause"] for f in doc["faults"]], ["watchdog", "panic", "qemu-exit"])
        for f in doc["faults"]:
            with self.subTest(fault=f["fault"]):
                self.assertGreater(f["detect_ns"], 0)
                self.assertGreater(f["recover_ns"], 0)
                self.assertAlmostEqual(f["recover_over_boot"], f["recover_ns"] / f["boot_ns"], places=9)
                if f["cause"] == "watchdog":
                    self.assertAlmostEqual(f["detect_over_watchdog"], f["detect_ns"] / (f["watchdog_ms"] * 1e6),
                                           places=9)
        c = doc["cancel"]
        self.assertEqual(c["cancels"], 2)
        self.assertGreater(c["ping_median_ns"], 0)
        self.assertAlmostEqual(c["cancel_over_ping"], c["cancel_ns"] / c["ping_median_ns"], places=9)


if __name__ == "__main__":
    h.main()
