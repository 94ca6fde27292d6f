"""Bench smoke test for tests/bench/idle/idle_bench.py: one short run on
the one-chip board produces every figure with its reference and ratio (the
bench exits 1 when `vtrn down` leaves anything behind). Shape and internal
consistency only: timing on a shared machine is not a pass/fail criterion
here (tests/integration/test_idle.py asserts the firmware's wakeup count).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402


class IdleBenchSmoke(h.SessionTestCase):
    session_name = "idlebench-smoke"

    def test_idle_bench_reports_host_cpu_and_wakeups_per_chip(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "idle_bench.py"), "--boards", "dev1",
                            "--seconds", "1", "--settle", "1", "--json"],
                           env=self.s.env, capture_output=True, text=True, timeout=110)
        self.assertEqual(r.returncode, 0, r.stderr)
        sys.stderr.write(r.stderr)  # the bench's report: ctest -V shows the figures
        doc = json.loads(r.stdout)
        self.assertEqual([b["board"] for b in doc["boards"]], ["dev1"])
        b = doc["boards"][0]
        self.assertIn("vtrnd", b["core_share"])
        self.assertIn("qemu chip 0", b["core_share"])
        self.assertAlmostEqual(b["total_core_share"], sum(b["core_share"].values()))
        self.assertEqual([c["chip"] for c in b["per_chip"]], [0])
        c = b["per_chip"][0]
        self.assertGreater(c["chip_seconds"], 0.5)
        self.assertGreater(c["heartbeats_per_s"], 0)
        self.assertGreaterEqual(c["wakeups_per_s"], c["heartbeats_per_s"] * 0.5)
        self.assertAlmostEqual(c["wakeups_over_period_ticks"], c["wakeups_per_s"] / c["period_ticks_per_s"])
        self.assertEqual(c["links_wakeups_per_s"], 0)


if __name__ == "__main__":
    h.main()
