#!/usr/bin/env python3
"""DMA benchmark (issue 3 item 7, goals of issue 13): the chip's DMA
figures, each set against a reference measured in the same run.

Brings up a 1-chip board, writes all of HBM once (warm-up), runs `vtrn dma bench` for host->HBM, HBM->host and
HBM->HBM at 1 MiB and 4 MiB, 64 B descriptors in batches of 32 (on one queue
and spread over two) and of 1, and submit-to-completion latency of single
small transfers; then `vtrn down`. The 64 B cases keep the whole ring in
flight (the chip's queue depth, from `vtrn dma stats`) unless
--depth-small says otherwise: a shallower window measures the host's
round trips, not the engine.
References: the guest's best memcpy (tests/baremetal copy_bench.elf under
QEMU, the larger sizes), native host memcpy and a native SPSC descriptor
ring (vtrn_dma_native_ref). Native memcpy comes twice: hot (one buffer pair
copied again and again, cache resident) and in the bench's own pattern (the
HBM side walks through all of the chip's HBM, as `vtrn dma bench` does, so
it streams from memory like the DMA case it is set against). Prints ratios:
DMA / guest memcpy, DMA / native memcpy (both), descriptors/s against the
5 M/s goal, and the chip's busy fraction
(from the device's per-queue busy_ns) so a low figure says whether the chip
or the host was the limit.

Goals (issue 13, the DMA engines): each large copy at least 0.5x native
memcpy in the bench's own pattern measured in the same run; 64 B
descriptors in batches of 32 at least 5 M desc/s. Not a pass/fail test:
`goal_met` fields report, the exit status is 0 when
every figure was produced. Standard library only.

    tests/bench/dma/dma_bench.py --build /tmp/build [--seconds 2] [--json]

Binaries come from --build, or from VTRN_CLI, VTRN_DMA_NATIVE_REF,
VTRN_COPY_BENCH_ELF (ctest sets these). VTRN_RUNTIME_DIR is honoured; without
it a fresh temporary directory is used. The board is always taken down.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

GOAL_NATIVE_SAME_PATTERN = 0.5
GOAL_DESC_PER_S = 5_000_000
MIB = 1 << 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        b = args.build
        self.cli = os.environ.get("VTRN_CLI") or (b and os.path.join(b, "host-tools", "vtrn"))
        self.native = os.environ.get("VTRN_DMA_NATIVE_REF") or (
            b and os.path.join(b, "tests", "bench", "dma", "vtrn_dma_native_ref"))
        self.copy_elf = os.environ.get("VTRN_COPY_BENCH_ELF") or (b and os.path.join(b, "baremetal", "copy_bench.elf"))
        self.qemu = os.environ.get("VTRN_QEMU") or shutil.which("qemu-system-aarch64")
        for name, path in (("vtrn CLI", self.cli), ("vtrn_dma_native_ref", self.native),
                           ("copy_bench.elf", self.copy_elf), ("qemu-system-aarch64", self.qemu)):
            if not path or not os.path.exists(path):
                sys.exit(f"dma_bench: {name} not found (give --build DIR or set its variable)")
        self.args = args
        self.hbm_size = None
        self.env = dict(os.environ)
        self.tmp = None
        if not self.env.get("VTRN_RUNTIME_DIR"):
            self.tmp = tempfile.mkdtemp(prefix="vtrn-dma-bench-")
            self.env["VTRN_RUNTIME_DIR"] = os.path.join(self.tmp, "rt")

    def vtrn(self, *argv, timeout=120):
        r = subprocess.run([self.cli, *map(str, argv)], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"vtrn {' '.join(map(str, argv))}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    # The chip.

    def chip_case(self, name, direction, size, depth, batch, seconds, queues=1):
        doc = json.loads(self.vtrn("dma", "bench", 0, "--dir", direction, "--size", size, "--depth", depth,
                                   "--batch", batch, "--queues", queues, "--seconds", seconds, "--json",
                                   timeout=int(seconds) + 60))
        doc["case"] = name
        log(f"  {name:<24} {doc['gbytes_per_s']:7.3f} GB/s {doc['descriptors_per_s'] / 1e6:7.3f} M desc/s "
            f"p50 {doc['latency_ns']['p50'] / 1e3:8.1f} us  chip busy {doc['chip_busy_fraction'] * 100:5.1f}%")
        return doc

    def run_chip(self):
        s = self.args.seconds
        up = ["up", "--chips", 1]
        if self.args.board:
            up += ["--board", self.args.board]
        self.vtrn(*up, timeout=120)
        try:
            # Warm-up, not reported: the first write to each HBM page is a host
            # page fault in QEMU's lazily allocated RAM, which would be charged
            # to whichever case touches HBM first. One pass over all of HBM.
            stats = json.loads(self.vtrn("dma", "stats", 0, "--json"))
            hbm = stats["hbm_size"]
            self.hbm_size = hbm
            small = self.args.depth_small or stats["depth"]
            self.vtrn("dma", "bench", 0, "--dir", "h2d", "--size", 4 * MIB, "--depth", 8, "--total", hbm,
                      "--json", timeout=300)
            cases = []
            for direction in ("h2d", "d2h", "d2d"):
                for size in (1 * MIB, 4 * MIB):
                    cases.append(self.chip_case(f"{direction} {size // MIB} MiB", direction, size,
                                                self.args.depth_large, 0, s))
            cases.append(self.chip_case("64 B batch 32", "h2d", 64, small, 32, s))
            cases.append(self.chip_case("64 B batch 32 x2 queues", "h2d", 64, small, 32, s, queues=2))
            cases.append(self.chip_case("64 B batch 1", "h2d", 64, small, 1, s))
            cases.append(self.chip_case("latency 64 B", "h2d", 64, 1, 1, s))
            cases.append(self.chip_case("latency 4 KiB", "h2d", 4096, 1, 1, s))
            return cases
        finally:
            try:
                self.vtrn("down", timeout=60)
            finally:
                if self.tmp:
                    shutil.rmtree(self.tmp, ignore_errors=True)

    # References.

    def run_guest_memcpy(self):
        cmd = [self.qemu, "-M", "virt", "-cpu", "cortex-a53", "-m", "256M", "-nographic", "-nodefaults",
               "-serial", "stdio", "-kernel", self.copy_elf]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        per = {}
        for m in re.finditer(r"copy-bench routine=(\S+) size=(\d+) .*?gbps=([0-9.]+)", r.stdout):
            per.setdefault(m.group(1), {})[int(m.group(2))] = float(m.group(3))
        if "copy-bench: done" not in r.stdout or not per:
            raise RuntimeError("copy_bench.elf produced no figures: " + (r.stdout + r.stderr)[-400:])
        large = [(g, routine, size) for routine, d in per.items() for size, g in d.items() if size >= MIB]
        best, routine, size = max(large)
        log(f"  guest memcpy best {best:.3f} GB/s ({routine}, {size} B)")
        return {"per_routine": {k: {str(s): g for s, g in v.items()} for k, v in per.items()},
                "best_large_gbps": best, "best_routine": routine, "best_size": size}

    def run_native(self):
        argv = [self.native] + (["--quick"] if self.args.quick else [])
        if self.hbm_size:
            argv += ["--span-bytes", str(self.hbm_size)]
        doc = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout)
        log(f"  native memcpy 1 MiB {doc['memcpy_gbps']['1048576']:.2f} GB/s, "
            f"SPSC ring batch 32 {doc['spsc_descriptors_per_s']['batch32'] / 1e6:.1f} M desc/s")
        return doc


def ratios(cases, guest, native):
    out = {}
    g = guest["best_large_gbps"]
    for c in cases:
        key = c["case"]
        if c["transfer_bytes"] >= MIB:
            n = native["memcpy_gbps"].get(str(c["transfer_bytes"])) or native["memcpy_gbps"]["1048576"]
            same = native["memcpy_same_pattern_gbps"][key.split()[0]][str(c["transfer_bytes"])]
            out[key] = {"over_guest_memcpy": c["gbytes_per_s"] / g, "over_native_memcpy": c["gbytes_per_s"] / n,
                        "over_native_memcpy_same_pattern": c["gbytes_per_s"] / same,
                        "goal": GOAL_NATIVE_SAME_PATTERN,
                        "goal_met": c["gbytes_per_s"] / same >= GOAL_NATIVE_SAME_PATTERN}
        elif c["case"].startswith("64 B batch"):
            ring = native["spsc_descriptors_per_s"]["batch32" if c["batch"] == 32 else "batch1"]
            out[key] = {"over_goal": c["descriptors_per_s"] / GOAL_DESC_PER_S,
                        "over_native_spsc": c["descriptors_per_s"] / ring}
            if c["batch"] == 32:
                out[key].update({"goal": GOAL_DESC_PER_S, "goal_met": c["descriptors_per_s"] >= GOAL_DESC_PER_S})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="build directory (binaries), unless VTRN_* variables say otherwise")
    ap.add_argument("--board", help="board .dtb/.dts (default: vtrnd's)")
    ap.add_argument("--seconds", type=float, default=2.0, help="per chip case")
    ap.add_argument("--depth-large", type=int, default=8, help="descriptors in flight for 1/4 MiB cases")
    ap.add_argument("--depth-small", type=int, default=0,
                    help="descriptors in flight per queue for 64 B cases (default: the chip's queue depth)")
    ap.add_argument("--quick", action="store_true", help="short native runs (smoke test)")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = ap.parse_args()
    b = Bench(args)
    log("chip DMA (vtrn dma bench):")
    cases = b.run_chip()
    log("references:")
    guest = b.run_guest_memcpy()
    native = b.run_native()
    doc = {"cases": cases, "guest_memcpy": guest, "native": native, "ratios": ratios(cases, guest, native)}
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{'case':<24} {'GB/s':>8} {'Mdesc/s':>8} {'p50 us':>8} {'busy':>6}  ratio")
    for c in cases:
        r = doc["ratios"].get(c["case"], {})
        if "over_guest_memcpy" in r:
            extra = (f"{r['over_guest_memcpy']:.2f}x guest memcpy, {r['over_native_memcpy']:.3f}x native hot, "
                     f"{r['over_native_memcpy_same_pattern']:.3f}x native same pattern"
                     f"{'' if r['goal_met'] else f'  (goal {GOAL_NATIVE_SAME_PATTERN}x same pattern missed)'}")
        elif "over_goal" in r:
            extra = (f"{r['over_goal']:.2f}x the 5 M/s goal, {r['over_native_spsc']:.3f}x native SPSC ring"
                     if "goal" in r else f"{r['over_native_spsc']:.3f}x native SPSC ring")
        else:
            extra = "submit -> completion latency"
        print(f"{c['case']:<24} {c['gbytes_per_s']:8.3f} {c['descriptors_per_s'] / 1e6:8.3f} "
              f"{c['latency_ns']['p50'] / 1e3:8.1f} {c['chip_busy_fraction'] * 100:5.1f}%  {extra}")
    same = native["memcpy_same_pattern_gbps"]
    print(f"guest best memcpy {guest['best_large_gbps']:.3f} GB/s ({guest['best_routine']}), native memcpy "
          f"{native['memcpy_gbps']['1048576']:.2f} GB/s hot, " +
          ", ".join(f"{d} {same[d]['1048576']:.2f}" for d in ("h2d", "d2h", "d2d")) +
          f" GB/s in the bench's pattern over {native['span_bytes'] >> 20} MiB (1 MiB)")


if __name__ == "__main__":
    main()
