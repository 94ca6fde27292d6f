#!/usr/bin/env python3
"""Power telemetry benchmark (issue 7), two figures, each against a
reference measured in the same run:

1. Snapshot rate a client can read: vtrn_power_snapshot_bench reads the
   power block through libvtrn (seqlock copy + validation) in a loop and
   compares with a plain memcpy of the same bytes; quiet and with a writer
   rewriting the block back to back.
2. CPU cost of the firmware's telemetry + governor refresh: on a live chip
   (one chip of the default board, idle, then running a GEMM job) the firmware times every refresh with its
   generic timer and publishes last/max/total/count in the power block. The
   mean is compared with the refresh period (the share of the boot core the
   refresh takes) and with the same PowerManager step + snapshot natively
   (power_bench), which is the cost of the model itself without TCG.

Prints one JSON document. --smoke: short runs, checks every figure exists.
Paths: VTRN_CLI, VTRN_VTRND, VTRN_TEST_FIRMWARE (as for the integration
tests), VTRN_POWER_SNAPSHOT_BENCH, VTRN_POWER_NATIVE_BENCH.
"""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402


def snapshot_figures(seconds):
    out = subprocess.run([os.environ["VTRN_POWER_SNAPSHOT_BENCH"], str(seconds)], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return json.loads(out)


def native_step_ns():
    out = subprocess.run([os.environ["VTRN_POWER_NATIVE_BENCH"]], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    step = float(re.search(r"model step \+ state change\s*:\s*([\d.]+) ns", out).group(1))
    snap = float(re.search(r"snapshot \+ seqlock write\s*:\s*([\d.]+) ns", out).group(1))
    return step, snap


def refresh_stats(s):
    p = s.vtrn_json("telemetry", 0)["chips"][0]["power"]
    return p["refresh_total_ns"], p["refreshes"], p["refresh_max_ns"]


def firmware_figures(smoke):
    h.require_built()
    h.become_subreaper()
    s = h.Session("power-bench")
    try:
        board = os.environ.get("VTRN_TEST_BOARD_DTS") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "board", "vtrn-dev2.dts")
        r = s.vtrn("up", "--board", board, "--chips", 1)
        if r.returncode != 0:
            raise RuntimeError(f"vtrn up: {r.stderr}")
        s.remember_pids()
        period_ms = s.vtrn_json("telemetry", 0)["chips"][0]["period_ms"]
        idle_s = 1.0 if smoke else 3.0
        t0 = refresh_stats(s)
        time.sleep(idle_s)
        t1 = refresh_stats(s)
        # Load: a long GEMM job on a NeuronCore (the refresh then also paces
        # and accounts a running core); the client's exit cancels it.
        job = os.path.join(s.tmp, "gemm.json")
        with open(job, "w") as f:
            json.dump({"name": "bench", "timeout_ms": 120000,
                       "buffers": [{"name": "a", "bytes": 1 << 21}, {"name": "b", "bytes": 1 << 21},
                                   {"name": "c", "bytes": 1 << 22}],
                       "steps": [{"kernel": "gemm", "dtype": "fp8-e4m3", "m": 1024, "n": 1024, "k": 2048,
                                  "a": "a", "b": "b", "out": "c"}]}, f)
        load = s.popen("submit", job, "--wait")
        time.sleep(idle_s)
        t2 = refresh_stats(s)
        load.terminate()
        load.communicate(timeout=60)
        idle_mean = (t1[0] - t0[0]) / max(1, t1[1] - t0[1])
        load_mean = (t2[0] - t1[0]) / max(1, t2[1] - t1[1])
        return {"period_ns": period_ms * 1e6, "refresh_mean_idle_ns": idle_mean,
                "refresh_mean_load_ns": load_mean, "refresh_max_ns": t2[2],
                "refreshes": t2[1] - t0[1],
                "refresh_share_of_period_idle": idle_mean / (period_ms * 1e6),
                "refresh_share_of_period_load": load_mean / (period_ms * 1e6)}
    finally:
        problems = h.down_and_check(s)
        s.cleanup()
        if problems:
            raise RuntimeError("; ".join(problems))


def main():
    smoke = "--smoke" in sys.argv
    snap = snapshot_figures(0.2 if smoke else 1.0)
    step_ns, snap_ns = native_step_ns()
    fw = firmware_figures(smoke)
    native = step_ns + snap_ns
    doc = {"client_snapshot": snap,
           "firmware_refresh": fw,
           "native_step_plus_snapshot_ns": native,
           "firmware_vs_native_refresh": fw["refresh_mean_idle_ns"] / native}
    print(json.dumps(doc, indent=2))
    if smoke:
        needed = [snap["read_power_per_s"], snap["memcpy_per_s"], snap["read_power_contended_per_s"],
                  fw["refresh_mean_idle_ns"], fw["refresh_mean_load_ns"], native]
        if not all(v > 0 for v in needed) or snap["failed_reads"] != 0:
            print("bench_power: a figure is missing or reads failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
