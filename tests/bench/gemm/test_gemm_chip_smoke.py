"""Bench smoke test: gemm_chip_bench.py on a small shape produces every
figure for every dtype, each verified on the chip, with the ratios computed
from the figures beside them. No thresholds: timing on a shared machine is
not a pass/fail criterion.
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402
DTYPES = ["fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"]


class GemmChipBenchSmoke(unittest.TestCase):
    def test_every_dtype_gets_chip_native_overhead_and_speedup(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "gemm_chip_bench.py"), "--size", "64x64x64",
                            "--reps", "1", "--json"], capture_output=True, text=True, timeout=280)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["m"], doc["n"], doc["k"]), (64, 64, 64))
        self.assertEqual([x["dtype"] for x in doc["results"]], DTYPES)
        for x in doc["results"]:
            with self.subTest(dtype=x["dtype"]):
                for key in ("native_gflops", "chip_gflops", "chip_gflops_1core", "end_to_end_gflops"):
                    self.assertGreater(x[key], 0, key)
                self.assertAlmostEqual(x["overhead_1core"], x["native_gflops"] / x["chip_gflops_1core"], places=6)
                self.assertAlmostEqual(x["speedup"], x["chip_gflops"] / x["chip_gflops_1core"], places=6)
                # A small GEMM has few row chunks: the scheduler may give it fewer cores.
                self.assertGreaterEqual(x["cores"], 1)
                self.assertLessEqual(x["cores"], doc["neuron_cores"])
                self.assertLessEqual(x["max_bound_ratio"], 1.0)
        print("\ngemm chip bench 64^3: " + ", ".join(
            f"{x['dtype']} {x['chip_gflops']:.3f} GFLOP/s ({x['overhead_1core']:.0f}x, {x['speedup']:.2f}x)"
            for x in doc["results"]), file=sys.stderr)


if __name__ == "__main__":
    h.main()
