"""Bench smoke test for tests/bench/dma/dma_bench.py: one short run on a
real 1-chip board produces every case, reference and ratio field, and takes
the board down (the runtime directory is gone afterwards). Shape and internal
consistency only: timing on a shared machine is not a pass/fail criterion,
so no threshold here.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402
CASES = ["h2d 1 MiB", "h2d 4 MiB", "d2h 1 MiB", "d2h 4 MiB", "d2d 1 MiB", "d2d 4 MiB",
         "64 B batch 32", "64 B batch 32 x2 queues", "64 B batch 1", "latency 64 B", "latency 4 KiB"]
CASE_KEYS = {"gbytes_per_s", "descriptors_per_s", "latency_ns", "chip_busy_ns", "chip_busy_fraction",
             "chip_busy_ns_per_descriptor", "errors", "transfer_bytes", "batch", "depth"}


class DmaBenchSmoke(unittest.TestCase):
    def test_dma_bench_reports_every_case_with_references_and_ratios(self):
        with tempfile.TemporaryDirectory(prefix="vtrn-dma-smoke-") as tmp:
            rt = os.path.join(tmp, "rt")
            env = dict(os.environ, VTRN_RUNTIME_DIR=rt)
            r = subprocess.run([sys.executable, os.path.join(HERE, "dma_bench.py"), "--seconds", "0.3",
                                "--quick", "--json"], env=env, capture_output=True, text=True, timeout=280)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(os.path.exists(rt), "runtime directory left behind: board not taken down")
        doc = json.loads(r.stdout)
        self.assertEqual([c["case"] for c in doc["cases"]], CASES)
        for c in doc["cases"]:
            with self.subTest(case=c["case"]):
                self.assertTrue(CASE_KEYS <= set(c), sorted(CASE_KEYS - set(c)))
                self.assertEqual(c["errors"], 0)
                self.assertGreater(c["descriptors_per_s"], 0)
                self.assertGreater(c["chip_busy_ns"], 0)
                self.assertLessEqual(c["latency_ns"]["p50"], c["latency_ns"]["p99"])
        self.assertEqual([c["batch"] for c in doc["cases"][6:9]], [32, 32, 1])
        self.assertEqual([c["queues"] for c in doc["cases"][6:9]], [1, 2, 1])
        # The 64 B cases keep the whole ring in flight: the chip's queue depth.
        depth = doc["cases"][6]["depth"]
        self.assertGreaterEqual(depth, 128)
        self.assertEqual([c["depth"] for c in doc["cases"][6:9]], [depth] * 3)
        self.assertGreater(doc["guest_memcpy"]["best_large_gbps"], 0)
        self.assertGreater(doc["native"]["memcpy_gbps"]["1048576"], 0)
        self.assertGreater(doc["native"]["spsc_descriptors_per_s"]["batch32"], 0)
        g = doc["guest_memcpy"]["best_large_gbps"]
        for c in doc["cases"][:6]:
            ratio = doc["ratios"][c["case"]]
            self.assertAlmostEqual(ratio["over_guest_memcpy"], c["gbytes_per_s"] / g, places=9)
            same = doc["native"]["memcpy_same_pattern_gbps"][c["case"].split()[0]][str(c["transfer_bytes"])]
            self.assertAlmostEqual(ratio["over_native_memcpy_same_pattern"], c["gbytes_per_s"] / same, places=9)
            self.assertEqual(ratio["goal"], 0.5)
            self.assertEqual(ratio["goal_met"], ratio["over_native_memcpy_same_pattern"] >= 0.5)
        for i in (6, 7):
            c = doc["cases"][i]
            b32 = doc["ratios"][c["case"]]
            self.assertAlmostEqual(b32["over_goal"], c["descriptors_per_s"] / 5e6, places=9)
            self.assertEqual(b32["goal_met"], c["descriptors_per_s"] >= 5e6)


if __name__ == "__main__":
    h.main()
