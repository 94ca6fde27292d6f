#!/usr/bin/env python3
"""GEMM benchmark on the chip (issue 5 item 8, issue 13): GFLOP/s of a
verified GEMM job per dtype on one chip's tensor engines (one engine, then
every engine) and on its NeuronCores (the cores path), against two host
references measured in the same run by gemm_native_bench on one host core:
OpenBLAS cblas_sgemm on f32 operands (what the tensor engines are held to:
fp32 on one engine >= 0.5x, every other dtype >= 0.3x) and the project's own
kernel compiled natively (what the cores path is divided by: the emulation
overhead). Also the scaling from one tensor engine to all of them, and the
ratio of the chip's modeled time (the silicon the board DT describes) to
its wall time.

Chip GFLOP/s are the job's FLOPs over its run time on the chip (JobEvent
start -> end, the firmware's clock: tile dispatch and completion interrupts
are in it, staging and read-back DMA are not); `end_to_end_gflops` (submit
-> end in vtrnd) is reported beside it. Each figure is the best of --reps
runs; every run is verified by `vtrn run` against the host reference, and a
mismatch fails the benchmark. The load average is printed with the figures
(2 cores shared with other work: read ratios, not absolutes).

Not a pass/fail test of speed: the exit status is 0 when every figure was
produced and verified; `goal_met` says whether the ratio reached the goal.
Standard library only.

    tests/bench/gemm/gemm_chip_bench.py --build /tmp/build [--size 512x512x512] [--reps 3] [--json]

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
# One tensor engine against OpenBLAS on one host core (issue 13).
GOALS = {"fp32": 0.5, "bf16": 0.3, "fp8-e4m3": 0.3, "fp8-e5m2": 0.3, "mxfp4": 0.3}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ratio(a, b):
    return a / b if b else None


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

    def chip_gemm(self, dtype, engine, cores):
        best = None
        for rep in range(self.reps):
            doc = json.loads(self.vtrn("run", "gemm", "--m", self.m, "--n", self.n, "--k", self.k, "--dtype", dtype,
                                       "--engine", engine, "--cores", cores, "--seed", rep + 1,
                                       "--chip", self.chip, "--json"))
            if not doc["verified"]:
                raise RuntimeError(f"chip GEMM {dtype} on {engine} did not verify: {doc['check']}")
            if doc["job"]["engine"] != engine:
                raise RuntimeError(f"chip GEMM {dtype}: asked for {engine}, ran on {doc['job']['engine']}")
            if best is None or doc["gflops"] > best["gflops"]:
                best = doc
        j = best["job"]
        return {"gflops": best["gflops"], "end_to_end_gflops": best["end_to_end_gflops"],
                "chip_run_ns": j["chip_run_ns"], "chip_modeled_ns": j["chip_modeled_ns"],
                "latency_ns": j["latency_ns"], "cores_used": j["cores_used"], "engines_used": j["engines_used"],
                "max_bound_ratio": best["check"]["max_bound_ratio"]}

    def host_refs(self):
        out = subprocess.run([self.native, "--sizes", f"{self.m}x{self.n}x{self.k}", "--dtypes", ",".join(DTYPES),
                              "--threads", "1", "--min-time", "0.2", "--json"],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"gemm_native_bench exited {out.returncode}: {out.stderr.strip()}")
        doc = json.loads(out.stdout)
        return {r["dtype"]: r["gflops"] for r in doc["results"]}, doc["openblas_sgemm"][0]["gflops"]

    def run(self):
        self.vtrn("up", "--chips", 1, timeout=120)
        try:
            cores = json.loads(self.vtrn("info", self.chip, "--json"))["neuron_cores"]
            load_before = os.getloadavg()
            log(f"gemm bench: {self.m}x{self.n}x{self.k}, chip {self.chip} with {cores} NeuronCores and tensor "
                f"engines, best of {self.reps}, load {load_before[0]:.2f}")
            rows = []
            for d in DTYPES:
                # The references right before the chip figures they divide, per dtype.
                native, blas = self.host_refs()
                one = self.chip_gemm(d, "tensor", 1)
                every = self.chip_gemm(d, "tensor", 0)
                on_cores = self.chip_gemm(d, "cores", 0)
                x_blas = ratio(one["gflops"], blas)
                rows.append({
                    "dtype": d,
                    "openblas_gflops": blas,
                    "native_gflops": native[d],
                    "tensor_1engine_gflops": one["gflops"],
                    "tensor_gflops": every["gflops"],
                    "engines": every["engines_used"],
                    "tensor_1engine_x_openblas": x_blas,
                    "goal": GOALS[d],
                    "goal_met": x_blas is not None and x_blas >= GOALS[d],
                    "scaling": ratio(every["gflops"], one["gflops"]),
                    "modeled_over_wall": ratio(every["chip_modeled_ns"], every["chip_run_ns"]),
                    "modeled_gflops": ratio(2 * self.m * self.n * self.k, every["chip_modeled_ns"]),
                    "end_to_end_gflops": every["end_to_end_gflops"],
                    "cores_gflops": on_cores["gflops"],
                    "cores": on_cores["cores_used"],
                    # How much slower the cores path is than one host core
                    # running the same kernel: the emulation overhead.
                    "cores_overhead": ratio(native[d], on_cores["gflops"]),
                    "tensor_over_cores": ratio(every["gflops"], on_cores["gflops"]),
                    "max_bound_ratio": max(one["max_bound_ratio"], every["max_bound_ratio"],
                                           on_cores["max_bound_ratio"]),
                    "chip_run_ns": every["chip_run_ns"],
                    "chip_modeled_ns": every["chip_modeled_ns"],
                    "latency_ns": every["latency_ns"],
                })
            return {"bench": "gemm_chip", "m": self.m, "n": self.n, "k": self.k, "reps": self.reps,
                    "neuron_cores": cores, "load_before": load_before[0], "load_after": os.getloadavg()[0],
                    "results": rows}
        finally:
            try:
                self.vtrn("down", timeout=60)
            finally:
                if self.tmp:
                    shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="build directory (for vtrn and gemm_native_bench)")
    ap.add_argument("--size", default="512x512x512", help="MxNxK (k a multiple of 32 for mxfp4)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    doc = Bench(args).run()
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"GEMM {doc['m']}x{doc['n']}x{doc['k']}, {doc['neuron_cores']} NeuronCores / tensor engines, best of "
          f"{doc['reps']}, load average {doc['load_before']:.2f} -> {doc['load_after']:.2f}")
    print(f"{'dtype':<9} {'openblas':>9} {'tensor 1':>9} {'x blas':>7} {'goal':>5} {'tensor N':>9} {'scaling':>8} "
          f"{'mod/wall':>9} {'cores':>7} {'native':>8} {'overhead':>9} {'e2e':>8}")
    for r in doc["results"]:
        print(f"{r['dtype']:<9} {r['openblas_gflops']:>9.2f} {r['tensor_1engine_gflops']:>9.2f} "
              f"{r['tensor_1engine_x_openblas']:>7.2f} {'ok' if r['goal_met'] else 'MISS':>5} "
              f"{r['tensor_gflops']:>9.2f} {r['scaling']:>7.2f}x {r['modeled_over_wall']:>9.2g} "
              f"{r['cores_gflops']:>7.3f} {r['native_gflops']:>8.2f} {r['cores_overhead']:>8.0f}x "
              f"{r['end_to_end_gflops']:>8.2f}")
    print("GFLOP/s on the chip's clock; x blas = one tensor engine / OpenBLAS sgemm on one host core (goal "
          "fp32 0.5, others 0.3); scaling = all engines / one; mod/wall = modeled silicon time / wall time; "
          "overhead = native kernel on one host core / the cores path")


if __name__ == "__main__":
    main()
