"""Bench smoke test: gemm_chip_bench.py on a small shape produces every
figure for every dtype (one tensor engine, all of them, the cores path, the
OpenBLAS and native-kernel references), each verified on the chip, with the
ratios computed from the figures beside them. No thresholds: timing on a shared machine is
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
    def test_every_dtype_gets_tensor_cores_and_host_figures_with_their_ratios(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "gemm_chip_bench.py"), "--size", "64x64x64",
                            "--reps", "1", "--json"], capture_output=True, text=True, timeout=280)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["m"], doc["n"], doc["k"]), (64, 64, 64))
        self.assertEqual([x["dtype"] for x in doc["results"]], DTYPES)
        self.assertGreater(doc["load_before"], 0)
        for x in doc["results"]:
            with self.subTest(dtype=x["dtype"]):
                for key in ("openblas_gflops", "native_gflops", "tensor_1engine_gflops", "tensor_gflops",
                            "cores_gflops", "end_to_end_gflops", "modeled_gflops"):
                    self.assertGreater(x[key], 0, key)
                self.assertAlmostEqual(x["tensor_1engine_x_openblas"],
                                       x["tensor_1engine_gflops"] / x["openblas_gflops"], places=6)
                self.assertEqual(x["goal_met"], x["tensor_1engine_x_openblas"] >= x["goal"])
                self.assertAlmostEqual(x["scaling"], x["tensor_gflops"] / x["tensor_1engine_gflops"], places=6)
                self.assertAlmostEqual(x["cores_overhead"], x["native_gflops"] / x["cores_gflops"], places=6)
                self.assertAlmostEqual(x["modeled_over_wall"], x["chip_modeled_ns"] / x["chip_run_ns"], places=6)
                # The modeled silicon is faster than this host (the board DT's TFLOP/s).
                self.assertLess(x["modeled_over_wall"], 1.0)
                self.assertEqual(x["engines"], doc["neuron_cores"], "one tensor engine per NeuronCore, all used")
                # A small GEMM has few row chunks: the scheduler may give it fewer cores.
                self.assertGreaterEqual(x["cores"], 1)
                self.assertLessEqual(x["cores"], doc["neuron_cores"])
                self.assertLessEqual(x["max_bound_ratio"], 1.0)
        print("\ngemm chip bench 64^3: " + ", ".join(
            f"{x['dtype']} tensor {x['tensor_1engine_gflops']:.2f} ({x['tensor_1engine_x_openblas']:.2f}x blas), "
            f"cores {x['cores_gflops']:.3f} GFLOP/s" for x in doc["results"]), file=sys.stderr)


if __name__ == "__main__":
    h.main()
