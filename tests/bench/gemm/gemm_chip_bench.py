#!/usr/bin/env python3
"""GEMM benchmark on the chip (issue 5, item 8): GFLOP/s of a verified GEMM
job on a chip's NeuronCores for every dtype, each divided by the same kernel
compiled natively on the host and measured in the same run
(gemm_native_bench, one thread), so the ratio is the emulation overhead;
and the speed-up from 1 to N NeuronCores on the chip (same shape, same
dtype, `--cores 1` against every core).

Chip GFLOP/s are the job's FLOPs over its run time on the chip (JobEvent
start -> end, the firmware's clock): staging and read-back DMA are not in
it; `end_to_end_gflops` (submit -> end in vtrnd) is reported beside it. Each
figure is the best of --reps runs; every run is verified by `vtrn run`
against the host reference, and a mismatch fails the benchmark.

Not a pass/fail test of speed: the exit status is 0 when every figure was
produced and verified. Standard library only.

    tests/bench/gemm/gemm_chip_bench.py --build /tmp/build [--size 256x256x256] [--reps 3] [--json]

Binaries come from --build, or from VTRN_CLI and VTRN_GEMM_NATIVE_BENCH.
VTRN_RUNTIME_DIR is honoured; without it a fresh temporary directory is used.
The board is always taken down.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

DTYPES = ("fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        b = args.build
        self.cli = os.environ.get("VTRN_CLI") or (b and os.path.join(b, "host-tools", "vtrn"))
        self.native = os.environ.get("VTRN_GEMM_NATIVE_BENCH") or (
            b and os.path.join(b, "tests", "bench", "gemm", "gemm_native_bench"))
        for name, path in (("vtrn", self.cli), ("gemm_native_bench", self.native)):
            if not path or not os.path.exists(path):
                sys.exit(f"gemm_chip_bench: {name} not found (pass --build or set its environment variable)")
        self.env = dict(os.environ)
        self.tmp = None
        if "VTRN_RUNTIME_DIR" not in self.env:
            self.tmp = tempfile.mkdtemp(prefix="vtrn-gemm-bench-")
            self.env["VTRN_RUNTIME_DIR"] = os.path.join(self.tmp, "rt")
        self.m, self.n, self.k = (int(x) for x in args.size.split("x"))
        self.reps = args.reps
        self.chip = 0

    def vtrn(self, *args, timeout=600):
        r = subprocess.run([self.cli, *map(str, args)], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"vtrn {' '.join(map(str, args))} exited {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def chip_gemm(self, dtype, cores):
        best = None
        for rep in range(self.reps):
            doc = json.loads(self.vtrn("run", "gemm", "--m", self.m, "--n", self.n, "--k", self.k, "--dtype", dtype,
                                       "--cores", cores, "--seed", rep + 1, "--chip", self.chip, "--json"))
            if not doc["verified"]:
                raise RuntimeError(f"chip GEMM {dtype} did not verify: {doc['check']}")
            if best is None or doc["gflops"] > best["gflops"]:
                best = doc
        return {"gflops": best["gflops"], "end_to_end_gflops": best["end_to_end_gflops"],
                "chip_run_ns": best["job"]["chip_run_ns"], "latency_ns": best["job"]["latency_ns"],
                "cores_used": best["job"]["cores_used"], "max_bound_ratio": best["check"]["max_bound_ratio"]}

    def native_gemm(self):
        out = subprocess.run([self.native, "--sizes", f"{self.m}x{self.n}x{self.k}", "--dtypes", ",".join(DTYPES),
                              "--threads", "1", "--min-time", "0.2", "--json"],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"gemm_native_bench exited {out.returncode}: {out.stderr.strip()}")
        return {r["dtype"]: r["gflops"] for r in json.loads(out.stdout)["results"]}

    def run(self):
        self.vtrn("up", "--chips", 1, timeout=120)
        try:
            cores = json.loads(self.vtrn("info", self.chip, "--json"))["neuron_cores"]
            log(f"gemm bench: {self.m}x{self.n}x{self.k}, chip {self.chip} with {cores} NeuronCores, best of {self.reps}")
            native = self.native_gemm()
            rows = []
            for d in DTYPES:
                all_cores = self.chip_gemm(d, 0)
                one = self.chip_gemm(d, 1)
                rows.append({
                    "dtype": d,
                    "native_gflops": native[d],
                    "chip_gflops": all_cores["gflops"],
                    "chip_gflops_1core": one["gflops"],
                    "end_to_end_gflops": all_cores["end_to_end_gflops"],
                    "cores": all_cores["cores_used"],
                    # How much slower one NeuronCore is than one host core
                    # running the same kernel: the emulation overhead.
                    "overhead_1core": native[d] / one["gflops"] if one["gflops"] else None,
                    "overhead_all_cores": native[d] / all_cores["gflops"] if all_cores["gflops"] else None,
                    "speedup": all_cores["gflops"] / one["gflops"] if one["gflops"] else None,
                    "max_bound_ratio": all_cores["max_bound_ratio"],
                    "chip_run_ns": all_cores["chip_run_ns"],
                    "latency_ns": all_cores["latency_ns"],
                })
            return {"bench": "gemm_chip", "m": self.m, "n": self.n, "k": self.k, "reps": self.reps,
                    "neuron_cores": cores, "results": rows}
        finally:
            try:
                self.vtrn("down", timeout=60)
            finally:
                if self.tmp:
                    shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="build directory (for vtrn and gemm_native_bench)")
    ap.add_argument("--size", default="256x256x256", help="MxNxK (k a multiple of 32 for mxfp4)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    doc = Bench(args).run()
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"GEMM {doc['m']}x{doc['n']}x{doc['k']}, {doc['neuron_cores']} NeuronCores, best of {doc['reps']}")
    print(f"{'dtype':<9} {'native':>9} {'chip 1c':>9} {'chip Nc':>9} {'overhead 1c':>12} {'speed-up':>9} {'e2e':>9}")
    for r in doc["results"]:
        print(f"{r['dtype']:<9} {r['native_gflops']:>9.3f} {r['chip_gflops_1core']:>9.3f} {r['chip_gflops']:>9.3f} "
              f"{r['overhead_1core']:>11.1f}x {r['speedup']:>8.2f}x {r['end_to_end_gflops']:>9.3f}")
    print("GFLOP/s; overhead = native one host core / one NeuronCore; speed-up = N cores / 1 core on the chip")


if __name__ == "__main__":
    main()
