#!/usr/bin/env python3
"""Idle benchmark: what a booted board that nobody uses costs the host, and
how often each chip's firmware wakes.

For each board: `vtrn up`, a settle pause (the chips go idle after one
quiet telemetry period), then one window in which nothing is asked of the
board. Reported per window, each as a same-run ratio:
  host CPU    seconds of CPU per wall second (a share of one host core,
              from /proc/<pid>/stat) of vtrnd, vtrn-hw and each chip's QEMU,
              and their total;
  wakeups     the firmware's own count of WFI exits per second of chip time
              (telemetry `wakeups`), and that against the rate a chip
              ticking at its telemetry period would need at least
              (wakeups / period ticks), with the heartbeats per second.
Boards with link ports (dev2, ring4) against the one without (dev1): the
difference of a chip's wakeups is the links' share.

The load average at the start of each window is in the report: the
machine is shared, the figures are what this run saw. Boots its boards in
a fresh runtime directory (tests/integration/vtrn_harness.py) and takes
them down. Text report on stderr, one JSON document on stdout with --json.
Paths as tests/CMakeLists.txt sets them:
  VTRN_CLI=... VTRN_VTRND=... VTRN_TEST_FIRMWARE=... tests/bench/idle/idle_bench.py --json
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402

BOARD_DIR = os.path.dirname(h.BOARD_DTB)
BOARDS = ("dev1", "dev2", "ring4")


def telemetry(s):
    return {c["chip"]: c for c in s.vtrn_json("telemetry")["chips"]}


def measure_board(s, board, seconds, settle):
    r = s.vtrn("up", "--board", os.path.join(BOARD_DIR, f"vtrn-{board}.dtb"), "--boot-timeout-ms", 60000,
               timeout=180)
    if r.returncode != 0:
        raise SystemExit(f"idle_bench: vtrn up --board {board} exited {r.returncode}: {r.stderr.strip()}")
    s.remember_pids()
    try:
        chips = s.vtrn_json("ls")["chips"]
        time.sleep(settle)
        procs = {"vtrnd": s.vtrnd_pid()}
        for i, pid in enumerate(h.vtrn_hw_pids(s)):
            procs[f"vtrn-hw{'' if i == 0 else i}"] = pid
        for c in chips:
            procs[f"qemu chip {c['id']}"] = c["qemu_pid"]
        load = os.getloadavg()[0]
        t0_tel = telemetry(s)
        cpu0 = {name: h.cpu_seconds(pid) for name, pid in procs.items()}
        w0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - w0
        cpu1 = {name: h.cpu_seconds(pid) for name, pid in procs.items()}
        t1_tel = telemetry(s)
    finally:
        problems = h.down_and_check(s)
    if problems:
        raise SystemExit(f"idle_bench: {board}: after vtrn down: " + "; ".join(problems))
    shares = {name: (cpu1[name] - cpu0[name]) / wall for name in procs}
    per_chip = []
    for cid in sorted(t1_tel):
        a, b = t0_tel[cid], t1_tel[cid]
        chip_s = (b["uptime_ns"] - a["uptime_ns"]) / 1e9
        wake_rate = (b["wakeups"] - a["wakeups"]) / chip_s
        period_rate = 1000.0 / b["period_ms"]
        per_chip.append({"chip": cid, "chip_seconds": chip_s, "wakeups_per_s": wake_rate,
                         "heartbeats_per_s": (b["heartbeat"] - a["heartbeat"]) / chip_s,
                         "timer_irqs_per_s": (b["timer_irq_count"] - a["timer_irq_count"]) / chip_s,
                         "period_ticks_per_s": period_rate, "wakeups_over_period_ticks": wake_rate / period_rate,
                         "qemu_core_share": shares[f"qemu chip {cid}"]})
    return {"board": board, "chips": len(per_chip), "window_s": wall, "load_average": load,
            "core_share": shares, "total_core_share": sum(shares.values()), "per_chip": per_chip}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", default="dev1,dev2", help=f"comma-separated, of {', '.join(BOARDS)}")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each idle window")
    ap.add_argument("--settle", type=float, default=2.0, help="pause between READY and the window")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    boards = h.fault_list(ap, args.boards, BOARDS)

    s = h.standalone_session("idlebench")
    try:
        doc = {"window_s": args.seconds, "boards": [measure_board(s, b, args.seconds, args.settle) for b in boards]}
    finally:
        s.cleanup()
    base = next((b for b in doc["boards"] if b["board"] == "dev1"), None)
    if base is not None:
        base_rate = base["per_chip"][0]["wakeups_per_s"]
        for b in doc["boards"]:
            for c in b["per_chip"]:
                c["links_wakeups_per_s"] = c["wakeups_per_s"] - base_rate

    lines = [f"idle bench: {args.seconds:.1f} s windows after {args.settle:.1f} s"]
    for b in doc["boards"]:
        lines.append(f"  {b['board']} ({b['chips']} chips, load {b['load_average']:.2f}): total "
                     f"{100 * b['total_core_share']:.2f} % of a core: " +
                     ", ".join(f"{n} {100 * v:.2f} %" for n, v in b["core_share"].items()))
        for c in b["per_chip"]:
            links = f", links' share {c['links_wakeups_per_s']:.1f}/s" if "links_wakeups_per_s" in c else ""
            lines.append(f"    chip {c['chip']}: {c['wakeups_per_s']:.1f} wakeups/s "
                         f"({c['wakeups_over_period_ticks']:.2f}x a {1000 / c['period_ticks_per_s']:.0f} ms tick), "
                         f"{c['heartbeats_per_s']:.1f} heartbeats/s, {c['timer_irqs_per_s']:.1f} timer IRQs/s{links}")
    print("\n".join(lines), file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
