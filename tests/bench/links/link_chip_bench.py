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

Usage: link_chip_bench.py [--mib N] [--json]   (VTRN_CLI names the CLI)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    total = args.mib << 20
    topo = vtrn_json("topo")
    results = []
    for link in topo["links"]:
        a, b = link["a"], link["b"]
        if a["kind"] != "chip" or b["kind"] != "chip" or a["state"] != "L0" or b["state"] != "L0":
            continue
        ref = raw_shm_copy_gbps(total)
        got, secs = link_gbps((a["id"], a["port"]), (b["id"], b["port"]), total)
        results.append({"link": link["index"], "from": f"{a['id']}.{a['port']}",
                        "to": f"{b['id']}.{b['port']}", "speed": a["speed"], "width": a["width"],
                        "bytes": total, "seconds": secs, "link_gbps": got, "raw_shm_gbps": ref,
                        "ratio": got / ref if ref else 0})
    if args.json:
        print(json.dumps({"board": topo["model"], "results": results}, indent=2))
        return
    print(f"board {topo['model']}: {len(results)} chip-to-chip links in L0, {args.mib} MiB each")
    for r in results:
        print(f"  link {r['link']} {r['from']} -> {r['to']} ({r['speed']} x{r['width']}): "
              f"{r['link_gbps']:.3f} GB/s through the chips, raw shm copy {r['raw_shm_gbps']:.2f} GB/s, "
              f"ratio {r['ratio']:.4f}")


if __name__ == "__main__":
    main()
