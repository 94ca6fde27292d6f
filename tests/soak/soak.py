#!/usr/bin/env python3
"""Soak: several clients keep a board busy while faults are injected at random,
and every request must end with an answer.

It boots its own board (a fresh runtime directory, like the integration
tests), then runs for a bounded time:
  - N client threads, each on its own connection to vtrnd, pick a chip at
    random and either ping it (control queue) or allocate a block of HBM,
    write random bytes to it by DMA, read them back, compare and free it;
  - one fault thread that, every --fault-interval seconds (jittered), picks a
    READY chip and injects hang, panic, qemu-kill or dma-corrupt (the last is
    followed by a DMA queue reset, the documented recovery).
Every request is counted as submitted, then completed (OK), failed (non-OK
status, counted by its reason with the digits taken out) or lost (no answer
within --request-timeout: must be 0). A read-back that differs from what was
written is corrupt (must be 0). The run must have done something: requests
and jobs completed, faults injected, and each chip reset exactly once per
fault that resets it; and every failure must be explained by a fault on its
chip (between the injection and the chip's return to READY). Before and after, it records vtrnd's file
descriptors and RSS and each chip's free DMA-window bytes (the host-side
buffers every transfer borrows); after the run every chip must be READY
again and nothing may have grown beyond a small tolerance.

Detection and recovery times come from vtrnd's reset history (Info), once
per fault. Output: a text report on stderr and, with --json, one JSON
document on stdout. Exit status 0 when every check holds, 1 otherwise.

The schedule (which chip, which request, which fault) comes from --seed,
fixed by default so that every run of the suite draws the same one; the
report names the seed, and --seed replays another. DMA is checked against
live allocations (the harness default), as the clients' premise below is
that DMA reaches only HBM they allocated.

Run from the build tree (paths as tests/CMakeLists.txt sets them):
  VTRN_CLI=... VTRN_VTRND=... VTRN_TEST_FIRMWARE=... tests/soak/soak.py --seconds 600
"""

import argparse
import json
import os
import random
import subprocess
import re
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import hostile_tenant as ht  # noqa: E402
import vtrn_harness as h  # noqa: E402

MiB = 1 << 20
FAULTS = ("hang", "panic", "qemu-kill", "dma-corrupt")
RESETTING_FAULTS = ("hang", "panic", "qemu-kill")  # dma-corrupt latches a queue, the chip stays up
# A failure counts as caused by a fault on its chip from this long before
# the injection (a request in flight when the fault was committed) until
# this long after the chip was READY again (an answer on its way).
FAULT_MARGIN_S = 2.0
FAULT_KIND = {"hang": 1, "panic": 2, "dma-corrupt": 3, "qemu-kill": 4}
# vtrn.api Request oneof numbers.
REQ_PING, REQ_DMA_WRITE, REQ_DMA_READ, REQ_DMA_STATS, REQ_DMA_RESET = 12, 30, 31, 34, 35
REQ_FAULT_INJECT = 121
REQ_HBM_ALLOC, REQ_HBM_FREE, REQ_HBM_LIST = 40, 41, 43
REQ_JOB_LIST = 62
SHARE_GROUP = "nogroup"  # the hostile tenant's (nobody's) group


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.submitted = self.completed = self.lost = 0
        self.jobs = self.jobs_done = 0
        self.job_mismatches = []
        self.failed = {}
        self.failures = []  # (time, chip, reason) of every failed request
        self.mismatches = []  # (chip, write start, read end, addr, hostile tag offset or -1) of read-backs that differed

    def fail(self, chip, status, error):
        reason = f"status {status}: " + re.sub(r"0x[0-9a-f]+|\d+", "N", error)[:160]
        with self.lock:
            self.failed[reason] = self.failed.get(reason, 0) + 1
            self.failures.append((time.monotonic(), chip, reason))


def vtrnd_resources(pid):
    fds = len(h.open_fds(pid))
    rss = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"fds": fds, "rss_bytes": rss}


def chip_states(s):
    return {c["id"]: c for c in s.vtrn_json("ls")["chips"]}


def window_free(s, chips):
    out = {}
    with h.ApiClient(s, timeout=30) as c:
        for chip in chips:
            st = c.call(REQ_DMA_STATS, [(1, chip)])
            out[chip] = h.pb_uint(st, 6)
    return out


def free_block(conn, counters, chip, addr):
    with counters.lock:
        counters.submitted += 1
    status, error, _ = conn.call_raw(REQ_HBM_FREE, [(1, chip), (2, addr)])
    if status != 0:
        counters.fail(chip, status, error)
    else:
        with counters.lock:
            counters.completed += 1


def client_loop(s, idx, chips, stop, counters, timeout, seed):
    rng = random.Random(seed)
    conn = None
    while not stop.is_set():
        if conn is None:
            try:
                conn = h.ApiClient(s, timeout=timeout)
                conn.call(REQ_DMA_STATS, [(1, chips[0])])
            except h.ApiError:
                # A chip is being reset: its stats are refused; try again.
                conn.close()
                conn = None
                time.sleep(0.1)
                continue
        chip = rng.choice(chips)
        try:
            if rng.random() < 0.5:
                with counters.lock:
                    counters.submitted += 1
                status, error, _ = conn.call_raw(REQ_PING, [(1, chip), (2, 3)])
                if status == 0:
                    with counters.lock:
                        counters.completed += 1
                else:
                    counters.fail(chip, status, error)
            else:
                size = rng.choice((4096, 65536, 300 * 1024))
                # DMA reaches only HBM the connection has allocated, and a
                # reset frees a chip's allocations: one allocation per round,
                # so no client writes through an address that another client
                # was given after a reset.
                with counters.lock:
                    counters.submitted += 1
                status, error, body = conn.call_raw(REQ_HBM_ALLOC, [(1, chip), (2, size), (3, 0), (4, 0)])
                if status != 0:
                    counters.fail(chip, status, error)
                    continue
                with counters.lock:
                    counters.completed += 1
                addr = h.pb_uint(body, 1)
                data = ht.honest_pattern(rng, size, idx)
                t_write = time.monotonic()
                with counters.lock:
                    counters.submitted += 1
                status, error, _ = conn.call_raw(REQ_DMA_WRITE, [(1, chip), (2, addr), (3, data)])
                if status != 0:
                    counters.fail(chip, status, error)
                    free_block(conn, counters, chip, addr)
                    continue
                with counters.lock:
                    counters.completed += 1
                    counters.submitted += 1
                status, error, body = conn.call_raw(REQ_DMA_READ, [(1, chip), (2, addr), (3, size)])
                if status != 0:
                    counters.fail(chip, status, error)
                else:
                    with counters.lock:
                        counters.completed += 1
                        got = body.get(1, [b""])[-1]
                        if got != data:
                            counters.mismatches.append((chip, t_write, time.monotonic(), addr,
                                                        got.find(ht.HOSTILE_TAG)))
                free_block(conn, counters, chip, addr)
        except (TimeoutError, OSError, ConnectionError):
            with counters.lock:
                counters.lost += 1
            try:
                conn.close()
            except OSError:
                pass
            conn = None
    if conn is not None:
        conn.close()


JOB_DTYPES = ("fp32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4")


def job_loop(s, chips, stop, counters, timeout, seed):
    """Submits small verified GEMMs through the CLI, as a user would: each
    ends verified (exit 0), or with a reason on stderr (a reset, a refused
    submission), or is lost (no end within the timeout)."""
    rng = random.Random(seed)
    while not stop.is_set():
        chip, dtype = rng.choice(chips), rng.choice(JOB_DTYPES)
        with counters.lock:
            counters.submitted += 1
            counters.jobs += 1
        try:
            r = s.vtrn("run", "gemm", "--m", 32, "--n", 32, "--k", 64, "--dtype", dtype, "--chip", chip,
                       "--seed", rng.randrange(1 << 30), timeout=timeout)
        except subprocess.TimeoutExpired:
            with counters.lock:
                counters.lost += 1
            continue
        if r.returncode == 0:
            with counters.lock:
                counters.completed += 1
                counters.jobs_done += 1
        elif "does not match the host reference" in r.stderr:
            # A job that ended DONE with wrong data: never acceptable.
            with counters.lock:
                counters.job_mismatches.append(r.stderr.strip())
                counters.completed += 1
        elif r.stderr.strip():
            counters.fail(chip, f"job exit {r.returncode}", r.stderr.strip().splitlines()[-1])
        else:
            with counters.lock:
                counters.lost += 1


def queue_latched(client, chip):
    st = client.call(REQ_DMA_STATS, [(1, chip)])
    return any(h.pb_uint(h.pb_decode(q), 9) or h.pb_decode(q).get(10, [b""])[-1] for q in st.get(1, []))


def hbm_used(s, chips):
    return {chip: s.vtrn_json("mem", "stats", chip)["used_bytes"] for chip in chips}


def fault_loop(s, chips, stop, interval, rng, faults, log):
    with h.ApiClient(s, timeout=60) as c:
        while not stop.wait(interval * rng.uniform(0.6, 1.4)):
            states = chip_states(s)
            ready = [chip for chip in chips if states[chip]["state"] == "READY" and not states[chip]["recovering"]]
            if not ready:
                continue
            chip, kind = rng.choice(ready), rng.choice(faults)
            before = states[chip]["resets"]
            t0 = time.monotonic()
            status, error, _ = c.call_raw(REQ_FAULT_INJECT, [(1, chip), (2, FAULT_KIND[kind]), (3, 0)])
            entry = {"chip": chip, "kind": kind, "status": status, "error": error, "t": t0, "t_ready": t0}
            log.append(entry)
            if status == 0 and kind == "dma-corrupt":
                # The corruption is latched once the queue's stats say so.
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not queue_latched(c, chip):
                    time.sleep(0.02)
                st, err, _ = c.call_raw(REQ_DMA_RESET, [(1, chip), (2, -1)])
                entry["dma_reset"] = "ok" if st == 0 else err
            elif status == 0:
                # The next fault waits for this one's recovery, so that each
                # failure has one fault to answer for it.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    st = chip_states(s)[chip]
                    if st["resets"] > before and st["state"] == "READY" and not st["recovering"]:
                        break
                    time.sleep(0.05)
            entry["t_ready"] = time.monotonic()
            entry["resets_before"] = before


def oracle_loop(s, chips, stop, path):
    """Keeps `path` naming what the admin sees: every allocation and job
    with its tenant, for the hostile tenant to aim at (what it could learn
    by guessing, given time)."""
    with h.ApiClient(s, timeout=30) as c:
        while not stop.is_set():
            doc = {"allocs": [], "jobs": []}
            try:
                for chip in chips:
                    status, _, r = c.call_raw(REQ_HBM_LIST, [(1, chip)])
                    for raw in (r or {}).get(1, []) if status == 0 else []:
                        a = h.pb_decode(raw)
                        doc["allocs"].append({"chip": chip, "addr": h.pb_uint(a, 1), "bytes": h.pb_uint(a, 2),
                                              "owner_kind": h.pb_uint(a, 4), "uid": ht.signed64(h.pb_uint(a, 10))})
                status, _, r = c.call_raw(REQ_JOB_LIST, [])
                for raw in (r or {}).get(1, []) if status == 0 else []:
                    j = h.pb_decode(raw)
                    doc["jobs"].append({"id": h.pb_uint(j, 1), "chip": h.pb_uint(j, 2),
                                        "uid": ht.signed64(h.pb_uint(j, 28))})
            except (OSError, ConnectionError):
                return
            doc["jobs"].sort(key=lambda j: j["id"])
            with open(path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.chmod(path + ".tmp", 0o644)
            os.replace(path + ".tmp", path)
            stop.wait(0.25)


class RacePartner:
    """The honest side of the hostile tenant's free race: an honest
    connection that, each time the hostile tenant says it was answered a
    free of memory its DMA was queued to, allocates the same size on that
    chip at once (TLSF hands the freed block out again when nothing took it
    first: the race is "armed" when the new allocation overlaps it), checks
    the allocation is zero (the firmware zeroes HBM before handing it out),
    fills it with an honest page pattern, waits until the hostile tenant has
    its DMA's answer, reads it back and frees it, then acks. A free that did
    not wait for the DMA queued before it lets that DMA run in the partner's
    pages: a fresh allocation that is not zero or a read-back that differs
    is a breach (unless a reset of the chip explains it), as is the partner's
    page tag in what the hostile tenant reads (its own check)."""

    CLIENT = 90  # the page tag's client number

    def __init__(self, s, counters, timeout, seed):
        self.s, self.counters, self.timeout = s, counters, timeout
        self.rng = random.Random(seed)
        self.notify_r, self.notify_w = os.pipe()
        self.ack_r, self.ack_w = os.pipe()
        self.races = self.armed = 0
        self.mismatches = []  # (chip, t_start, t_end, addr, what)
        self.thread = threading.Thread(target=self.run, name="race partner")

    def fds_for_hostile(self):
        return self.notify_w, self.ack_r

    def started(self):
        """The hostile process has its ends: ours are closed here, so its
        exit ends the partner's reads."""
        os.close(self.notify_w)
        os.close(self.ack_r)
        self.thread.start()

    def lines(self):
        buf = b""
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line.decode().split()
            chunk = os.read(self.notify_r, 4096)
            if not chunk:
                return
            buf += chunk

    def request(self, conn, chip, field, body):
        """(status, body) of one counted honest request; None when lost."""
        c = self.counters
        with c.lock:
            c.submitted += 1
        try:
            status, error, r = conn.call_raw(field, body)
        except (TimeoutError, OSError, ConnectionError):
            with c.lock:
                c.lost += 1
            return None
        if status != 0:
            c.fail(chip, status, error)
            return status, None
        with c.lock:
            c.completed += 1
        return status, r

    def run(self):
        conn = None
        lines = self.lines()
        try:
            for words in lines:
                if not words or words[0] != "race":
                    continue
                seq, chip, addr, size = words[1], int(words[2]), int(words[3]), int(words[4])
                self.races += 1
                if conn is None:
                    conn = h.ApiClient(self.s, timeout=self.timeout)
                if not self.check(conn, chip, addr, size, lines, seq):
                    try:
                        conn.close()
                    except OSError:
                        pass
                    conn = None
                os.write(self.ack_w, f"{seq}\n".encode())
        except OSError:
            pass
        finally:
            if conn is not None:
                conn.close()
            os.close(self.ack_w)
            os.close(self.notify_r)

    def wait_end(self, lines, seq):
        for words in lines:
            if words[:2] == ["end", seq]:
                return

    def check(self, conn, chip, freed, size, lines, seq):
        """One race; False when the connection is lost."""
        t0 = time.monotonic()
        r = self.request(conn, chip, REQ_HBM_ALLOC, [(1, chip), (2, size), (3, 0), (4, 0)])
        if r is None:
            self.wait_end(lines, seq)
            return False
        if r[0] != 0:
            self.wait_end(lines, seq)
            return True
        addr, got = h.pb_uint(r[1], 1), h.pb_uint(r[1], 2)
        if addr < freed + size and freed < addr + got:
            self.armed += 1
        n = min(got, ht.MAX_READ)
        ok = True
        r = self.request(conn, chip, REQ_DMA_READ, [(1, chip), (2, addr), (3, n)])
        if r is None:
            ok = False
        elif r[0] == 0:
            fresh = r[1].get(1, [b""])[-1]
            if fresh.count(0) != len(fresh):
                self.mismatches.append((chip, t0, time.monotonic(), addr, self.what(fresh, None)))
        data = ht.honest_pattern(self.rng, n, self.CLIENT)
        wrote = False
        if ok:
            r = self.request(conn, chip, REQ_DMA_WRITE, [(1, chip), (2, addr), (3, data)])
            ok, wrote = r is not None, r is not None and r[0] == 0
        self.wait_end(lines, seq)
        if ok and wrote:
            r = self.request(conn, chip, REQ_DMA_READ, [(1, chip), (2, addr), (3, n)])
            if r is None:
                ok = False
            elif r[0] == 0 and r[1].get(1, [b""])[-1] != data:
                self.mismatches.append((chip, t0, time.monotonic(), addr,
                                        self.what(r[1].get(1, [b""])[-1], data)))
        if ok:
            ok = self.request(conn, chip, REQ_HBM_FREE, [(1, chip), (2, addr)]) is not None
        return ok

    @staticmethod
    def what(got, want):
        """The breach in words: whose bytes are where."""
        i = got.find(ht.HOSTILE_TAG)
        if want is None:
            where = f"a fresh allocation was not zero (first byte set at +{next(k for k, b in enumerate(got) if b)})"
        else:
            k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            where = f"its read-back differs from what it wrote (first at +{k})"
        return where + (f", the hostile tenant's page tag at +{i}" if i >= 0 else "")

    def finish(self, timeout, problems):
        self.thread.join(timeout)
        if self.thread.is_alive():
            problems.append(f"the race partner did not finish within {timeout:.0f} s")


def hostile_python():
    """The interpreter the hostile tenant runs under: nobody may not read
    the caller's (a pyenv under /root), so Debian's, or $VTRN_PYTHON."""
    return os.environ.get("VTRN_PYTHON", "/usr/bin/python3")


def start_hostile(s, chips, seed, oracle, timeout, partner, *extra):
    """The hostile tenant's process, as nobody (hostile_tenant.py), with the
    race partner's pipes; it stops when its stdin closes."""
    env = dict(s.env)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    notify, ack = partner.fds_for_hostile()
    argv = ["setpriv", f"--reuid={ht.UID}", f"--regid={ht.UID}", "--clear-groups", hostile_python(),
            os.path.join(HERE, "hostile_tenant.py"), "--runtime-dir", s.runtime_dir, "--chips", str(len(chips)),
            "--seed", str(seed), "--oracle", oracle, "--request-timeout", str(timeout),
            "--partner-notify", str(notify), "--partner-ack", str(ack), *extra]
    p = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, pass_fds=(notify, ack))
    partner.started()
    return p


def finish_hostile(p, timeout, problems):
    """Stops the hostile tenant and returns its report ({} when it gave none)."""
    try:
        out, err = p.communicate(b"", timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        problems.append(f"the hostile tenant did not stop within {timeout:.0f} s")
    try:
        return json.loads(out)
    except ValueError:
        problems.append(f"the hostile tenant exited {p.returncode} without a report: "
                        f"{err.decode(errors='replace').strip()[-400:]}")
        return {}


def merge_hostile(docs):
    """One report of several runs of the hostile tenant (warm-up, soak)."""
    out = {"kinds": {}, "breaches": [], "lost": 0, "dropped": 0, "free_before_dma": 0, "quota": {},
           "rounds": 0, "own_jobs": 0, "notes": []}
    for d in docs:
        for kind, counts in d.get("kinds", {}).items():
            k = out["kinds"].setdefault(kind, {})
            for outcome, n in counts.items():
                k[outcome] = k.get(outcome, 0) + n
        for chip, q in d.get("quota", {}).items():
            o = out["quota"].setdefault(chip, {"rounds": 0, "reached": 0, "refused_early": 0})
            for key in ("rounds", "reached", "refused_early"):
                o[key] += q.get(key, 0)
            o.update({k: v for k, v in q.items() if k not in ("rounds", "reached", "refused_early")})
        for key in ("lost", "dropped", "free_before_dma", "rounds", "own_jobs"):
            out[key] += d.get(key, 0)
        out["breaches"] += d.get("breaches", [])
        out["notes"] += d.get("notes", [])
    return out


def hostile_problems(hostile, quota_mib):
    problems = []
    if hostile["breaches"]:
        b = hostile["breaches"][0]
        problems.append(f"hostile tenant: {len(hostile['breaches'])} BREACH(es), first: {b['kind']}: "
                        f"{b['what']} at {b['where']}")
    if hostile["lost"]:
        problems.append(f"hostile tenant: {hostile['lost']} request(s) never answered")
    if hostile["free_before_dma"]:
        problems.append(f"hostile tenant: {hostile['free_before_dma']} free(s) answered before the DMA queued "
                        f"ahead of them on the same connection (a free that did not wait for its DMA)")
    rp = hostile.get("race_partner", {})
    if not rp.get("armed"):
        problems.append(f"hostile tenant: no free race was armed ({rp.get('races', 0)} raced): the race partner "
                        f"was never handed the freed memory, so a free that does not wait could not show")
    refused = sum(k.get("refused", 0) for k in hostile["kinds"].values())
    if not refused:
        problems.append("hostile tenant: nothing was refused to it (did it run?)")
    if quota_mib and hostile["quota"] and not any(q["reached"] for q in hostile["quota"].values()):
        problems.append(f"hostile tenant: never refused at its {quota_mib} MiB HBM quota: {hostile['quota']}")
    return problems


def hostile_lines(hostile):
    lines = [f"  hostile tenant (uid {ht.UID}): {hostile['rounds']} rounds, {hostile['own_jobs']} jobs of its own, "
             f"{hostile['lost']} requests unanswered, {hostile['dropped']} connections dropped by vtrnd, "
             f"{hostile['free_before_dma']} frees answered before their DMA",
             f"    {'kind':<44} {'sent':>6} {'ok':>6} {'refused':>7} {'bad_req':>7} {'busy':>6}  other"]
    for kind, k in sorted(hostile["kinds"].items()):
        other = ", ".join(f"{o} {n}" for o, n in sorted(k.items())
                          if o not in ("sent", "ok", "refused", "bad_request", "busy"))
        lines.append(f"    {kind:<44} {k['sent']:>6} {k.get('ok', 0):>6} {k.get('refused', 0):>7} "
                     f"{k.get('bad_request', 0):>7} {k.get('busy', 0):>6}  {other}")
    for chip, q in sorted(hostile["quota"].items()):
        lines.append(f"    quota on chip {chip}: reached in {q['reached']} of {q['rounds']} round(s) "
                     f"({q.get('quota_bytes', 0) >> 20} MiB)" + (f", refused early {q['refused_early']}: "
                                                                  f"{q.get('last_refusal')}" if q["refused_early"] else ""))
    lines.append(f"    honest read-backs holding its tag after a reset (not judged): "
                 f"{hostile.get('honest_read_backs_with_its_tag_after_a_reset', 0)}")
    rp = hostile.get("race_partner", {})
    lines.append(f"    race partner: {rp.get('races', 0)} frees raced, {rp.get('armed', 0)} armed (it was handed "
                 f"the freed memory), {rp.get('differed_after_a_reset', 0)} differed after a reset (not judged)")
    lines.append(f"    breaches: {len(hostile['breaches'])}")
    for b in hostile["breaches"][:20]:
        lines.append(f"      BREACH {b['kind']}: {b['what']} at {b['where']}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--job-clients", type=int, default=1, help="clients running verified GEMM jobs")
    ap.add_argument("--chips", type=int, default=2)
    ap.add_argument("--fault-interval", type=float, default=4.0)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--request-timeout", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1, help="the schedule's random seed (default 1: every run the same)")
    ap.add_argument("--hostile", type=int, choices=(0, 1), default=1,
                    help="1 (default): a hostile second tenant (uid nobody, hostile_tenant.py) shares the board")
    ap.add_argument("--hbm-quota-mib", type=int, default=64,
                    help="vtrnd's HBM quota per tenant per chip (VTRN_HBM_QUOTA_MIB; 0 = none; default 64)")
    ap.add_argument("--max-rss-growth-mib", type=int,
                    default=int(os.environ.get("VTRN_SOAK_MAX_RSS_GROWTH_MIB", "64")),
                    help="vtrnd RSS growth that counts as a leak (default 64, or $VTRN_SOAK_MAX_RSS_GROWTH_MIB)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    faults = h.fault_list(ap, args.faults, FAULTS)

    s = h.standalone_session("soak")
    problems = []
    report = {"seed": args.seed, "seconds": args.seconds, "clients": args.clients, "chips": args.chips,
              "hostile_tenant": bool(args.hostile), "hbm_quota_mib": args.hbm_quota_mib}
    hostile_docs = []
    partners = []
    print(f"soak: seed {args.seed} (replay with --seed {args.seed})", file=sys.stderr)
    try:
        up = ["up", "--chips", args.chips]
        if args.hostile:
            # The hostile tenant reaches the runtime directory inside the session's.
            os.chmod(s.tmp, 0o711)
            up += ["--group", SHARE_GROUP]
        r = s.vtrn(*up, env={"VTRN_RESET_LIMIT": "1000", "VTRN_HBM_QUOTA_MIB": str(args.hbm_quota_mib)})
        if r.returncode != 0:
            raise SystemExit(f"soak: vtrn up exited {r.returncode}: {r.stderr}")
        s.remember_pids()
        chips = list(range(args.chips))
        vtrnd = s.vtrnd_pid()
        oracle = os.path.join(s.tmp, "oracle.json")
        oracle_stop = threading.Event()
        oracle_thread = threading.Thread(target=oracle_loop, args=(s, chips, oracle_stop, oracle))
        if args.hostile:
            oracle_thread.start()
        # Warm-up: every code path once (the hostile tenant's rounds too: its
        # floods fill vtrnd's per-tenant queues once), so lazily grown
        # buffers are not counted as growth.
        warm = Counters()
        stop = threading.Event()
        t = threading.Thread(target=client_loop, args=(s, 99, chips, stop, warm, args.request_timeout, 1))
        t.start()
        if args.hostile:
            partner = RacePartner(s, warm, args.request_timeout, args.seed + 2500)
            partners.append(partner)
            hp = start_hostile(s, chips, args.seed + 2000, oracle, args.request_timeout, partner, "--once")
            try:
                hp.wait(args.request_timeout + 60)
            except subprocess.TimeoutExpired:
                pass
            hostile_docs.append(finish_hostile(hp, 30, problems))
            partner.finish(args.request_timeout + 10, problems)
        else:
            time.sleep(1.0)
        stop.set()
        t.join()
        before = {"vtrnd": vtrnd_resources(vtrnd), "window_free": window_free(s, chips),
                  "hbm_used": hbm_used(s, chips)}

        counters = Counters()
        stop = threading.Event()
        rng = random.Random(args.seed)
        threads = [threading.Thread(target=client_loop,
                                    args=(s, i, chips, stop, counters, args.request_timeout, args.seed + i))
                   for i in range(args.clients)]
        threads += [threading.Thread(target=job_loop,
                                     args=(s, chips, stop, counters, args.request_timeout, args.seed + 1000 + i))
                    for i in range(args.job_clients)]
        fault_log = []
        ft = threading.Thread(target=fault_loop, args=(s, chips, stop, args.fault_interval, rng, faults, fault_log))
        for th in threads + [ft]:
            th.start()
        hp = None
        if args.hostile:
            partner = RacePartner(s, counters, args.request_timeout, args.seed + 3500)
            partners.append(partner)
            hp = start_hostile(s, chips, args.seed + 3000, oracle, args.request_timeout, partner)
        time.sleep(args.seconds)
        stop.set()
        if hp is not None:
            hostile_docs.append(finish_hostile(hp, args.request_timeout + 60, problems))
            partner.finish(args.request_timeout + 10, problems)
        for th in threads + [ft]:
            th.join(args.request_timeout + 60)
            if th.is_alive():
                problems.append(f"{th.name} did not finish: a request is hanging")
        oracle_stop.set()
        if oracle_thread.is_alive():
            oracle_thread.join()

        # Every chip must come back.
        deadline = time.monotonic() + 60
        while True:
            states = chip_states(s)
            if all(c["state"] == "READY" and not c["recovering"] for c in states.values()):
                break
            if time.monotonic() > deadline:
                problems.append("chips not READY 60 s after the run: " +
                                "; ".join(f"{c['id']} {c['state']} {c['error']}" for c in states.values()))
                break
            time.sleep(0.2)
        with h.ApiClient(s) as c:
            for chip in chips:
                c.call(REQ_DMA_RESET, [(1, chip), (2, -1)])  # a dma-corrupt near the end
        time.sleep(0.5)
        after = {"vtrnd": vtrnd_resources(vtrnd), "window_free": window_free(s, chips),
                 "hbm_used": hbm_used(s, chips)}
        resets = {cid: c["resets"] for cid, c in chip_states(s).items()}
        infos = {chip: s.vtrn_json("info", chip)["reset_history"] for chip in chips}

        report.update({
            "submitted": counters.submitted, "completed": counters.completed, "lost": counters.lost,
            "failed": sum(counters.failed.values()), "failed_by_reason": counters.failed,
            "read_back_mismatches": len(counters.mismatches),
            "jobs": counters.jobs, "jobs_verified": counters.jobs_done,
            "faults": [{k: v for k, v in e.items() if k != "t"} for e in fault_log],
            "resets": resets, "last_reset": infos, "before": before, "after": after,
        })
        if counters.job_mismatches:
            problems.append(f"{len(counters.job_mismatches)} job(s) DONE with results outside the bound: "
                            f"{counters.job_mismatches[0]}")
        if counters.lost:
            problems.append(f"{counters.lost} request(s) lost (no answer within {args.request_timeout} s)")
        if counters.submitted != counters.completed + sum(counters.failed.values()) + counters.lost:
            problems.append("submitted != completed + failed + lost")
        if counters.completed == 0:
            problems.append("no request completed")
        if args.job_clients and counters.jobs_done == 0:
            problems.append("no job completed verified")
        if faults and not fault_log:
            problems.append("no fault was injected")
        # Each resetting fault reset its chip once, and nothing else did.
        for chip in chips:
            want = sum(1 for e in fault_log if e["chip"] == chip and e["status"] == 0 and e["kind"] in RESETTING_FAULTS)
            if resets[chip] != want:
                problems.append(f"chip {chip}: {resets[chip]} resets for {want} resetting fault(s)")
        # Every failure on a chip falls inside one of that chip's faults.
        unexplained = [(chip, reason) for t, chip, reason in counters.failures
                       if not any(e["chip"] == chip and e["t"] - FAULT_MARGIN_S <= t <= e["t_ready"] + FAULT_MARGIN_S
                                  for e in fault_log)]
        report["unexplained_failures"] = len(unexplained)
        if unexplained:
            problems.append(f"{len(unexplained)} failure(s) with no fault on their chip, first: "
                            f"chip {unexplained[0][0]}: {unexplained[0][1]}")
        # A read-back that differs is legitimate only when its chip was
        # faulted between the write and the read (a new QEMU starts with
        # zeroed HBM); the 2 s margin covers a fault injected just before the
        # write whose detection came after it.
        corrupt = [m for m in counters.mismatches
                   if not any(e["chip"] == m[0] and e["kind"] != "dma-corrupt" and
                              m[1] - 2 <= e["t"] <= m[2] for e in fault_log)]
        report["corrupt"] = len(corrupt)
        if corrupt:
            problems.append(f"{len(corrupt)} DMA read-back(s) differ with no reset of their chip in between")
        if args.hostile:
            hostile = merge_hostile(hostile_docs)
            # A page the hostile tenant wrote, read back from an honest
            # allocation that no reset explains (after a reset the admin's
            # stale address may be anyone's: such a read-back is counted,
            # not judged).
            hostile["breaches"] += [
                {"kind": "honest read-back", "what": "the hostile tenant's page tag in an honest allocation",
                 "where": f"chip {m[0]} {hex(m[3])} + {m[4]}"} for m in corrupt if m[4] >= 0]
            hostile["honest_read_backs_with_its_tag_after_a_reset"] = sum(
                1 for m in counters.mismatches if m[4] >= 0 and m not in corrupt)
            # The race partner's findings, judged as the read-backs are.
            race = [m for p in partners for m in p.mismatches]
            judged = [m for m in race
                      if not any(e["chip"] == m[0] and e["kind"] != "dma-corrupt" and
                                 m[1] - 2 <= e["t"] <= m[2] for e in fault_log)]
            hostile["breaches"] += [{"kind": "race partner", "what": m[4], "where": f"chip {m[0]} {hex(m[3])}"}
                                    for m in judged]
            hostile["race_partner"] = {"races": sum(p.races for p in partners),
                                       "armed": sum(p.armed for p in partners),
                                       "differed_after_a_reset": len(race) - len(judged)}
            report["hostile"] = hostile
            problems += hostile_problems(hostile, args.hbm_quota_mib)
        bad_faults = [e for e in fault_log if e["status"] != 0]
        if bad_faults:
            problems.append(f"{len(bad_faults)} injection(s) refused: {bad_faults[0]['error']}")
        fd_growth = after["vtrnd"]["fds"] - before["vtrnd"]["fds"]
        if fd_growth > 2:
            problems.append(f"vtrnd file descriptors grew by {fd_growth}")
        rss_growth = after["vtrnd"]["rss_bytes"] - before["vtrnd"]["rss_bytes"]
        if rss_growth > args.max_rss_growth_mib * MiB:
            problems.append(f"vtrnd RSS grew by {rss_growth >> 20} MiB")
        for chip in chips:
            # With every client gone, no HBM may stay allocated.
            if after["hbm_used"][chip] != before["hbm_used"][chip]:
                problems.append(f"chip {chip}: HBM used {before['hbm_used'][chip]} -> {after['hbm_used'][chip]} bytes")
            if after["window_free"][chip] != before["window_free"][chip]:
                problems.append(f"chip {chip}: DMA window free bytes {before['window_free'][chip]} -> "
                                f"{after['window_free'][chip]}")
        problems += h.down_and_check(s)
    finally:
        s.cleanup()

    report["problems"] = problems
    lines = [f"soak: {report['seconds']:.0f} s, {report['clients']} clients, {report['chips']} chips, "
             f"seed {report['seed']}",
             f"  requests: {report.get('submitted', 0)} submitted, {report.get('completed', 0)} completed, "
             f"{report.get('failed', 0)} failed with a reason, {report.get('lost', 0)} lost",
             f"  jobs: {report.get('jobs', 0)} submitted, {report.get('jobs_verified', 0)} verified",
             f"  DMA read-backs that differed: {report.get('read_back_mismatches', 0)} "
             f"({report.get('corrupt', 0)} without a reset of their chip in between)",
             f"  failures with no fault on their chip: {report.get('unexplained_failures', 0)}"]
    for reason, n in sorted(report.get("failed_by_reason", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:6d}  {reason}")
    kinds = {}
    for e in report.get("faults", []):
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    lines.append("  faults injected: " + (", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "none"))
    lines.append(f"  resets per chip: {report.get('resets', {})}")
    if "hostile" in report:
        lines += hostile_lines(report["hostile"])
    for chip, hist in report.get("last_reset", {}).items():
        if hist["count"]:
            lines.append(f"  chip {chip} last reset: {hist['last_cause']}, detected in "
                         f"{hist['last_detect_ns'] / 1e6:.0f} ms, READY {hist['last_recover_ns'] / 1e6:.0f} ms later")
    if "before" in report:
        b, a = report["before"], report["after"]
        lines.append(f"  vtrnd fds {b['vtrnd']['fds']} -> {a['vtrnd']['fds']}, RSS "
                     f"{b['vtrnd']['rss_bytes'] >> 20} -> {a['vtrnd']['rss_bytes'] >> 20} MiB, "
                     f"DMA window free {b['window_free']} -> {a['window_free']}, "
                     f"HBM used {b['hbm_used']} -> {a['hbm_used']}")
    lines += [f"  PROBLEM: {p}" for p in problems] or ["  ok"]
    print("\n".join(lines), file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
