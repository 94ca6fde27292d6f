#!/usr/bin/env python3
"""Smoke test of gemm_native_bench: it runs every dtype on small odd shapes
(with two threads too), verifies each result against the host reference and
prints well-formed JSON with every field, OpenBLAS one-thread sgemm per
shape beside them; a bad option is a usage error.
No timing assertions: speed on a shared machine is not a test criterion."""
import json
import subprocess
import sys

DTYPES = {"fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"}
FIELDS = {"dtype", "m", "n", "k", "flops", "reps", "seconds", "gflops", "cpu_seconds",
          "gflops_per_cpu", "verified", "bad",
          "max_abs_err", "max_rel_err", "max_bound_ratio"}


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=100)


def main():
    exe = sys.argv[1]
    failures = []
    for threads in ("1", "2"):
        p = run(exe, "--sizes", "33x17x64,64", "--min-time", "0", "--threads", threads, "--json")
        if p.returncode != 0:
            failures.append(f"threads {threads}: exit {p.returncode}: {p.stderr.strip()}")
            continue
        doc = json.loads(p.stdout)
        results = doc["results"]
        if doc["threads"] != int(threads) or len(results) != 10:
            failures.append(f"threads {threads}: header {doc['threads']}, {len(results)} results")
        if {r["dtype"] for r in results} != DTYPES:
            failures.append(f"dtypes {sorted(r['dtype'] for r in results)}")
        for r in results:
            missing = FIELDS - r.keys()
            if missing:
                failures.append(f"{r.get('dtype')}: missing {sorted(missing)}")
                continue
            if not r["verified"] or r["bad"] != 0 or r["max_bound_ratio"] > 1:
                failures.append(f"{r['dtype']} {r['m']}x{r['n']}x{r['k']}: not verified")
            if r["flops"] != 2 * r["m"] * r["n"] * r["k"] or r["reps"] < 1 or r["gflops"] <= 0:
                failures.append(f"{r['dtype']}: inconsistent figures {r}")
        blas = doc["openblas_sgemm"]
        if [(b["m"], b["n"], b["k"]) for b in blas] != [(33, 17, 64), (64, 64, 64)]:
            failures.append(f"openblas_sgemm shapes {blas}")
        if any(b["threads"] != 1 or b["reps"] < 1 or b["gflops"] <= 0 for b in blas):
            failures.append(f"openblas_sgemm figures {blas}")
    p = run(exe, "--sizes", "33x17x33", "--dtypes", "mxfp4")
    if p.returncode != 2 or "not a multiple of 32" not in p.stderr:
        failures.append(f"mxfp4 k=33: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    p = run(exe, "--dtypes", "fp16")
    if p.returncode != 2 or "unknown dtype" not in p.stderr:
        failures.append(f"--dtypes fp16: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
