"""Bench smoke test: `vtrn bench ping` on a booted 2-chip board produces a
complete JSON report (chip block and spin-block, native eventfd reference,
ratios, boot times). It checks shape and internal consistency only: timing
on a shared CI machine is not a pass/fail criterion, so no threshold here.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import vtrn_harness as h  # noqa: E402

STAT_KEYS = {"count", "min_ns", "median_ns", "mean_ns", "p99_ns", "p999_ns", "max_ns"}


class BenchPingSmoke(h.SessionTestCase):
    session_name = "bench"

    def test_bench_ping_reports_chip_native_and_ratios(self):
        up = self.s.vtrn("up", "--chips", 2)
        self.assertEqual(up.returncode, 0, up.stderr)
        self.s.remember_pids()
        r = self.s.vtrn("bench", "ping", "--count", 200, "--json", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["chip"], doc["count"]), (0, 200))
        for key in ("chip_block", "chip_spin", "native_block"):
            with self.subTest(series=key):
                self.assertTrue(STAT_KEYS <= set(doc[key]), doc[key])
                self.assertEqual(doc[key]["count"], 200)
                self.assertGreater(doc[key]["min_ns"], 0)
                self.assertLessEqual(doc[key]["median_ns"], doc[key]["p99_ns"])
                self.assertLessEqual(doc[key]["p99_ns"], doc[key]["p999_ns"])
        self.assertEqual((doc["chip_block"]["lost"], doc["chip_spin"]["lost"]), (0, 0))
        for key, series in (("ratio_block_vs_native", "chip_block"), ("ratio_spin_vs_native", "chip_spin")):
            for stat, field in (("median", "median_ns"), ("p99", "p99_ns"), ("p999", "p999_ns")):
                expected = doc[series][field] / doc["native_block"][field]
                self.assertAlmostEqual(doc[key][stat], expected, places=6)
        self.assertEqual(doc["goal_median_ratio"], 1.5)
        self.assertEqual(doc["goal_met"], doc["ratio_block_vs_native"]["median"] <= 1.5)
        self.assertEqual([b["chip"] for b in doc["boot"]], [0, 1])
        self.assertTrue(all(b["boot_ns"] > 0 for b in doc["boot"]))
        print("\nbench ping: median block %.1f us, spin %.1f us, native %.1f us; block/native %.2fx; boot %s" % (
            doc["chip_block"]["median_ns"] / 1e3, doc["chip_spin"]["median_ns"] / 1e3,
            doc["native_block"]["median_ns"] / 1e3, doc["ratio_block_vs_native"]["median"],
            ", ".join(f"chip {b['chip']} {b['boot_ns'] / 1e6:.0f} ms" for b in doc["boot"])), file=sys.stderr)
        down = self.s.vtrn("down")
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assert_nothing_left()


if __name__ == "__main__":
    h.main()
