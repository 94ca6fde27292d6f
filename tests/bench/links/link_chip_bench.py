"""link_chip_bench: bandwidth of every chip-to-chip link of a running board,
measured through the chips (firmware -> ivshmem-plain region -> peer
firmware, framed, CRC-checked and acknowledged), against a raw copy through
a shared-memory mapping of the same size measured in the same run.

It drives a board that is already up (`vtrn up [--board ...]`): for each
link, one end is told to send pattern frames (`vtrn link send`) and the
peer's count of intact pattern bytes is polled (`vtrn link ls`) until all
of it arrived. The host-side polling adds up to one poll interval per run,
so use transfers of several MiB. The reference is a memmove loop through a
MAP_SHARED mapping of kLinkRegionBytes, moving the same number of bytes in
half-region pieces (each written in, then copied out): what the bytes would
cost with no chip, framing or protocol, and large enough pieces that the
Python call overhead does not dominate. Ratios are the result; absolute figures wander with host load.

Round trips: each link's first end sends ping frames one at a time (`vtrn
link ping`), the peer firmware echoes each, and the chip clock times them;
the reference is a ping-pong between two native host threads spinning on
one cache line each way, measured once per run (a small C program the bench
compiles with the host compiler, $CC or cc).

Collectives: `vtrn run allreduce` over every chip of the board, reporting
NCCL's bus bandwidth, next to the same raw copy reference.

Usage: link_chip_bench.py [--mib N] [--pings N] [--native-rounds N] [--allreduce-bytes N] [--json]
(VTRN_CLI names the CLI)
"""

import argparse
import ctypes
import json
import mmap
import os
import subprocess
import sys
import time

CLI = os.environ.get("VTRN_CLI", "vtrn")
REGION = 256 * 1024
SLOT = REGION // 2


def vtrn_json(*args):
    r = subprocess.run([CLI, *map(str, args), "--json"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"link_chip_bench: vtrn {' '.join(map(str, args))}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def raw_shm_copy_gbps(total):
    """memmove through a shared mapping, in slot-sized pieces around a ring."""
    m = mmap.mmap(-1, REGION, flags=mmap.MAP_SHARED)
    src = ctypes.create_string_buffer(SLOT)
    dst = ctypes.create_string_buffer(SLOT)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    slots = REGION // SLOT
    moved = 0
    i = 0
    t0 = time.perf_counter()
    while moved < total:
        at = base + (i % slots) * SLOT
        ctypes.memmove(at, src, SLOT)   # producer writes the slot
        ctypes.memmove(dst, at, SLOT)   # consumer copies it out
        moved += SLOT
        i += 1
    dt = time.perf_counter() - t0
    del src, dst
    m.close()
    return moved / dt / 1e9


def ports():
    return {(p["chip"], p["port"]): p for p in vtrn_json("link", "ls")["ports"]}


def link_gbps(a, b, total, poll_s=0.02, timeout_s=300):
    before = ports()[b]["counters"]["check_good_bytes"]
    t0 = time.perf_counter()
    vtrn_json("link", "send", a[0], a[1], "--bytes", total)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        c = ports()[b]["counters"]
        if c["check_good_bytes"] - before >= total:
            dt = time.perf_counter() - t0
            return total / dt / 1e9, dt
        time.sleep(poll_s)
    sys.exit(f"link_chip_bench: {a} -> {b}: not all bytes arrived in {timeout_s} s")


# Two threads spinning on one cache line each way, in C (built with the host
# compiler at each run): the native shared-memory round trip.
NATIVE_PINGPONG_C = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile uint64_t ping __attribute__((aligned(64)));
static volatile uint64_t pong __attribute__((aligned(64)));
static long rounds;
static void* echo(void* arg) {
  (void)arg;
  for (long n = 1; n <= rounds; ++n) {
    while (__atomic_load_n(&ping, __ATOMIC_ACQUIRE) != (uint64_t)n) {}
    __atomic_store_n(&pong, (uint64_t)n, __ATOMIC_RELEASE);
  }
  return 0;
}
int main(int argc, char** argv) {
  rounds = argc > 1 ? atol(argv[1]) : 100000;
  pthread_t t;
  pthread_create(&t, 0, echo, 0);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long n = 1; n <= rounds; ++n) {
    __atomic_store_n(&ping, (uint64_t)n, __ATOMIC_RELEASE);
    while (__atomic_load_n(&pong, __ATOMIC_ACQUIRE) != (uint64_t)n) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  pthread_join(t, 0);
  printf("%.4f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / rounds / 1e3);
  return 0;
}
"""


def native_shm_rtt_us(rounds=200000):
    """Round trip of two native threads spinning on shared memory (us)."""
    import tempfile
    d = tempfile.mkdtemp(prefix="vtrn-link-bench-")
    src, exe = os.path.join(d, "pp.c"), os.path.join(d, "pp")
    with open(src, "w") as f:
        f.write(NATIVE_PINGPONG_C)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-pthread", src, "-o", exe], check=True)
    try:
        out = subprocess.run([exe, str(rounds)], capture_output=True, text=True, timeout=120, check=True)
        return float(out.stdout.strip())
    finally:
        os.unlink(src)
        os.unlink(exe)
        os.rmdir(d)


def link_rtt_us(a, count, timeout_s=120):
    before = ports()[a]["counters"]
    vtrn_json("link", "ping", a[0], a[1], "--count", count)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        c = ports()[a]["counters"]
        if c["ping_done"] - before["ping_done"] >= count:
            total = c["ping_rtt_total_ns"] - before["ping_rtt_total_ns"]
            return total / count / 1e3, c["ping_rtt_min_ns"] / 1e3
        time.sleep(0.05)
    sys.exit(f"link_chip_bench: {a}: the round trips did not finish in {timeout_s} s")


def allreduce(nbytes):
    r = subprocess.run([CLI, "run", "allreduce", "--bytes", str(nbytes), "--json"], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"link_chip_bench: vtrn run allreduce: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    return {"chips": d["chips"], "bytes": nbytes, "time_ns": d["time_ns"],
            "alg_bw_gbps": d["alg_bw_bytes_per_s"] / 1e9, "bus_bw_gbps": d["bus_bw_bytes_per_s"] / 1e9,
            "verified": d["verified"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--pings", type=int, default=200)
    ap.add_argument("--native-rounds", type=int, default=200000,
                    help="round trips of the native shared-memory ping-pong")
    ap.add_argument("--allreduce-bytes", type=int, default=0,
                    help="also run an all-reduce of this many bytes per chip (0: skip)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    total = args.mib << 20
    topo = vtrn_json("topo")
    results = []
    native = native_shm_rtt_us(args.native_rounds)
    for link in topo["links"]:
        a, b = link["a"], link["b"]
        up = ("L0", "L0s", "L1")  # idle links rest in L0s/L1 (ASPM); traffic wakes them
        if a["kind"] != "chip" or b["kind"] != "chip" or a["state"] not in up or b["state"] not in up:
            continue
        ref = raw_shm_copy_gbps(total)
        got, secs = link_gbps((a["id"], a["port"]), (b["id"], b["port"]), total)
        rtt, rtt_min = link_rtt_us((a["id"], a["port"]), args.pings)
        results.append({"link": link["index"], "from": f"{a['id']}.{a['port']}",
                        "to": f"{b['id']}.{b['port']}", "speed": a["speed"], "width": a["width"],
                        "bytes": total, "seconds": secs, "link_gbps": got, "raw_shm_gbps": ref,
                        "ratio": got / ref if ref else 0, "rtt_us": rtt, "rtt_min_us": rtt_min,
                        "native_shm_rtt_us": native, "rtt_ratio": rtt / native if native else 0})
    coll = None
    if args.allreduce_bytes > 0:
        coll = allreduce(args.allreduce_bytes)
        coll["raw_shm_gbps"] = raw_shm_copy_gbps(args.allreduce_bytes * 8)
        coll["bus_ratio"] = coll["bus_bw_gbps"] / coll["raw_shm_gbps"] if coll["raw_shm_gbps"] else 0
    if args.json:
        print(json.dumps({"board": topo["model"], "results": results, "allreduce": coll}, indent=2))
        return
    print(f"board {topo['model']}: {len(results)} chip-to-chip links in L0, {args.mib} MiB each")
    for r in results:
        print(f"  link {r['link']} {r['from']} -> {r['to']} ({r['speed']} x{r['width']}): "
              f"{r['link_gbps']:.3f} GB/s through the chips, raw shm copy {r['raw_shm_gbps']:.2f} GB/s, "
              f"ratio {r['ratio']:.4f}; round trip {r['rtt_us']:.1f} us (min {r['rtt_min_us']:.1f}), "
              f"host shm ping-pong {r['native_shm_rtt_us']:.2f} us, ratio {r['rtt_ratio']:.1f}x")
    if coll:
        print(f"  all-reduce of {coll['bytes']} bytes over {coll['chips']} chips: bus bandwidth "
              f"{coll['bus_bw_gbps'] * 1e3:.2f} MB/s (algorithm {coll['alg_bw_gbps'] * 1e3:.2f} MB/s), "
              f"raw shm copy {coll['raw_shm_gbps']:.2f} GB/s, ratio {coll['bus_ratio']:.5f}"
              f"{'' if coll['verified'] else ', NOT VERIFIED'}")


if __name__ == "__main__":
    main()
