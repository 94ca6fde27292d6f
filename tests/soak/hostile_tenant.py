#!/usr/bin/env python3
"""The soak's hostile tenant: a second user on a shared board who tries, for
as long as the soak runs, to reach what is not its own, and to wear vtrnd
down with floods.

soak.py starts it as its own process under `setpriv` as the Unix user
nobody (a thread cannot be another user: seteuid is process-wide, so the
honest clients' connections and CLI runs would change tenant with it). It
talks to vtrnd only through raw API connections and the `vtrn` CLI, as
nobody, and runs rounds of three kinds until its stdin closes (the soak's
stop) or --seconds pass:

  probe  reads, writes, copies from and to, benches over and frees memory
         that is not its own: the honest tenant's allocations and job
         buffers as the soak's oracle file names them (what an attacker
         could learn by patience), the neighbourhood of its own allocations,
         and random pages of the HBM range and remap window that
         `vtrn mem stats` reports; shows, waits on and cancels the honest
         jobs and the ids next to them (ids are sequential); lists memory
         and jobs. Each must be refused (STATUS_PERMISSION_DENIED, or
         STATUS_BAD_REQUEST for what does not exist); any success is a
         breach, as is a listing that shows another tenant's object.
  race   allocates, queues a DMA write, read or bench to the allocation and
         frees it (on the same connection without waiting, from another of
         its connections, or by closing the connection); mostly behind a
         plug, a slow bench over another allocation of its own queued first
         on the same connection, so that the DMA has not started when the
         free arrives. A free answered is told to the soak's race partner
         (--partner-notify), an honest connection that allocates the same
         size at once, checks it is zero, fills it and reads it back once
         this tenant has its DMA's answer (--partner-ack says it is done):
         a free that did not wait for its DMA lets the DMA run in the
         partner's pages. What a read returns must never hold an honest
         page tag (honest_pattern), and a free must not be answered before
         the DMA queued ahead of it on the same connection.
  flood  pipelines thousands of small DMA requests and pings and a burst of
         near-frame-sized reads (the per-tenant caps answer STATUS_BUSY),
         and allocates until the tenant HBM quota refuses.

It is not a fuzzer of the wire format (test_bad_input.py is), and it never
sends the admin-only requests (test_tenants.py covers their refusal).

The report, one JSON document on stdout: requests per kind by outcome, the
breaches (each with what and where), requests never answered, connections
vtrnd dropped, frees answered before the DMA queued ahead of them, and the
quota reached per chip. Exit status 0 whatever it found (the soak judges); 2 on a usage error.
"""

import argparse
import json
import os
import random
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import vtrn_harness as h  # noqa: E402

MiB = 1 << 20
PAGE = 4096
UID = h.NOBODY_UID
# Every 4 KiB page the honest DMA clients write starts with HONEST_TAG and
# every page the hostile tenant writes with HOSTILE_TAG, so a page of one
# seen by the other names its origin whatever else the page holds.
HONEST_TAG = b"vtrn-soak:honest"
HOSTILE_TAG = b"vtrn-soak:hostil"
assert len(HONEST_TAG) == len(HOSTILE_TAG) == 16

# vtrn.api Request oneof numbers (proto/vtrn_api.proto).
REQ_PING = 12
REQ_DMA_WRITE, REQ_DMA_READ, REQ_DMA_COPY, REQ_DMA_BENCH, REQ_DMA_STATS = 30, 31, 32, 33, 34
REQ_HBM_ALLOC, REQ_HBM_FREE, REQ_HBM_STATS, REQ_HBM_LIST = 40, 41, 42, 43
REQ_JOB_SUBMIT, REQ_JOB_WAIT, REQ_JOB_LIST, REQ_JOB_SHOW, REQ_JOB_CANCEL = 60, 61, 62, 63, 64
# vtrn.api Status.
OK, BAD_REQUEST, BUSY, PERMISSION_DENIED = 0, 1, 8, 9
STATUS_NAMES = {2: "unknown_chip", 3: "chip_not_ready", 4: "timeout", 5: "chip_error", 6: "internal",
                7: "shutting_down"}
DMA_DIR_H2D, DMA_DIR_D2H = 0, 1
JOB_KERNEL_ADD = 2
MAX_READ = 4 * MiB - 64 * 1024  # DmaReadRequest.length bound
MAX_WRITE = 4 * MiB - 64 * 1024  # the data and the request header fit a 4 MiB frame


def tagged(tag, data):
    """data with tag over the first bytes of every page."""
    out = bytearray(data)
    for off in range(0, len(out), PAGE):
        out[off:off + len(tag)] = tag[:len(out) - off]
    return bytes(out)


def honest_pattern(rng, size, client):
    """What an honest DMA client writes: random bytes, every page opening
    with HONEST_TAG and the client's number."""
    return tagged(HONEST_TAG + client.to_bytes(4, "little"), rng.randbytes(size))


def hostile_pattern(size):
    return tagged(HOSTILE_TAG, b"\xee" * size)


def signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Tally:
    """Requests by kind and outcome, and the breaches with what and where."""

    def __init__(self):
        self.lock = threading.Lock()
        self.kinds = {}
        self.breaches = []
        self.lost = self.dropped = self.free_before_dma = 0
        self.quota = {}
        self.notes = []

    def count(self, kind, status):
        outcome = {OK: "ok", PERMISSION_DENIED: "refused", BAD_REQUEST: "bad_request", BUSY: "busy"}.get(
            status, STATUS_NAMES.get(status, f"status_{status}"))
        with self.lock:
            k = self.kinds.setdefault(kind, {"sent": 0})
            k["sent"] += 1
            k[outcome] = k.get(outcome, 0) + 1
        return outcome

    def breach(self, kind, what, where):
        with self.lock:
            self.breaches.append({"kind": kind, "what": what, "where": where})

    def doc(self):
        with self.lock:
            return {"kinds": self.kinds, "breaches": self.breaches, "lost": self.lost, "dropped": self.dropped,
                    "free_before_dma": self.free_before_dma, "quota": self.quota, "notes": self.notes[:20]}


class Where:
    """What ApiClient needs of a session: the runtime directory."""

    def __init__(self, runtime_dir):
        self.runtime_dir = runtime_dir


class Own:
    """The tenant's live allocations, per chip: {addr: bytes}. An address
    enters once its allocation was answered and leaves once its free was,
    so a range in here when a request is sent is the tenant's own."""

    def __init__(self):
        self.allocs = {}

    def add(self, chip, addr, size):
        self.allocs.setdefault(chip, {})[addr] = size

    def drop(self, chip, addr):
        self.allocs.get(chip, {}).pop(addr, None)

    def covers(self, chip, addr, length):
        """Whether [addr, addr + length) lies wholly in the tenant's allocations."""
        blocks = sorted(self.allocs.get(chip, {}).items())
        pos, end = addr, addr + max(length, 1)
        for a, n in blocks:
            if a <= pos < a + n:
                pos = a + n
                if pos >= end:
                    return True
        return False

    def touches(self, chip, addr, length):
        return any(a < addr + max(length, 1) and addr < a + n for a, n in self.allocs.get(chip, {}).items())


class Hostile:
    def __init__(self, args, stop):
        self.args = args
        self.stop = stop
        self.where = Where(args.runtime_dir)
        self.rng = random.Random(args.seed)
        self.tally = Tally()
        self.own = Own()
        self.chips = list(range(args.chips))
        self.own_jobs = set()
        self.stats = {}
        self.conn = None
        self.race_seq = 0
        self.ack_buf = b""

    # Connections and requests.

    def connect(self):
        return h.ApiClient(self.where, timeout=self.args.request_timeout)

    def main_conn(self):
        if self.conn is None:
            self.conn = self.connect()
        return self.conn

    def lose(self, conn, n, kind):
        """n requests on conn that got no answer, or whose connection vtrnd
        dropped; the connection is closed (and with it its allocations)."""
        with self.tally.lock:
            if isinstance(n, tuple):
                self.tally.dropped += 1
                self.tally.notes.append(f"{kind}: connection dropped: {n[1]}")
            else:
                self.tally.lost += n
                self.tally.notes.append(f"{kind}: {n} request(s) unanswered in {self.args.request_timeout} s")
        try:
            conn.close()
        except OSError:
            pass
        if conn is self.conn:
            self.conn = None
            self.own = Own()  # its allocations went with it

    def call(self, kind, field, body, conn=None):
        """(status, error, body) of one request, counted under kind; None when
        the connection broke (counted, and closed)."""
        conn = conn or self.main_conn()
        try:
            status, error, r = conn.call_raw(field, body)
        except (TimeoutError, socket.timeout):
            self.lose(conn, 1, kind)
            return None
        except (ConnectionError, OSError) as e:
            self.lose(conn, (1, str(e)), kind)
            return None
        self.tally.count(kind, status)
        return status, error, r

    def pipeline(self, conn, requests, on_answer):
        """Sends requests [(kind, field, body)] from a thread while this one
        reads the answers (unread answers past vtrnd's backlog limit drop
        the connection); on_answer(kind, request body, status, answer body)
        per answer, in whatever order vtrnd answers.
        False when the connection broke."""
        kinds, sent, failed = {}, [0], []

        def sender():
            try:
                for kind, field, body in requests:
                    if self.stop.is_set() and sent[0] > 0:
                        break
                    kinds[conn.next_id] = (kind, field, body)
                    conn.send(field, body)
                    sent[0] += 1
            except OSError as e:
                failed.append(e)

        t = threading.Thread(target=sender)
        t.start()
        got = 0
        try:
            while True:
                if got >= sent[0] and not t.is_alive():
                    break
                if got >= sent[0]:
                    time.sleep(0.001)
                    continue
                rid, status, error, bodies = conn.receive()
                kind, field, body = kinds[rid]
                got += 1
                self.tally.count(kind, status)
                on_answer(kind, body, status, bodies.get(field))
        except (TimeoutError, socket.timeout):
            t.join()
            self.lose(conn, sent[0] - got, "pipeline")
            return False
        except (ConnectionError, OSError) as e:
            t.join()
            self.lose(conn, (sent[0] - got, str(e)), "pipeline")
            return False
        t.join()
        return not failed

    def alloc(self, conn, kind, chip, size):
        r = self.call(kind, REQ_HBM_ALLOC, [(1, chip), (2, size), (3, 0), (4, 0)], conn)
        if r is None or r[0] != OK:
            return None
        addr, got = h.pb_uint(r[2], 1), h.pb_uint(r[2], 2)
        self.own.add(chip, addr, got)
        return addr, got

    def free(self, conn, kind, chip, addr):
        r = self.call(kind, REQ_HBM_FREE, [(1, chip), (2, addr)], conn)
        if r is not None and r[0] == OK:
            self.own.drop(chip, addr)
        return r

    def check_read(self, kind, chip, addr, data):
        """A read's bytes must hold no page of the honest tenant's."""
        i = data.find(HONEST_TAG) if data else -1
        if i >= 0:
            who = int.from_bytes(data[i + 16:i + 20], "little")
            self.tally.breach(kind, f"read the honest tenant's data (client {who}'s page tag)",
                              f"chip {chip} {hex(addr)} + {i}")

    # The oracle: what the soak (the admin) sees of the honest tenant.

    def oracle(self):
        try:
            with open(self.args.oracle) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return [], []
        allocs = [a for a in doc.get("allocs", []) if a["uid"] != UID]
        jobs = [j for j in doc.get("jobs", []) if j["uid"] != UID]
        return allocs, jobs

    def mem_stats(self, chip):
        """hbm_base, total_bytes, remap window of a chip, as `vtrn mem stats` tells the tenant."""
        if chip not in self.stats:
            try:
                r = subprocess.run([h.CLI, "mem", "stats", str(chip), "--json"], capture_output=True, text=True,
                                   timeout=self.args.request_timeout)
            except subprocess.TimeoutExpired:
                return None
            if r.returncode != 0:
                return None
            self.stats[chip] = json.loads(r.stdout)
        return self.stats[chip]

    # Round 1: what is not its own.

    def attack_range(self, conn, target, chip, addr, length, mine):
        """Every DMA request at [addr, addr + length) of chip; refused unless
        the range is the tenant's own."""
        length = max(64, min(length, 64 * 1024))
        ops = [("dma_write", REQ_DMA_WRITE, [(1, chip), (2, addr), (3, hostile_pattern(length))]),
               ("dma_read", REQ_DMA_READ, [(1, chip), (2, addr), (3, length)]),
               ("dma_bench", REQ_DMA_BENCH, [(1, chip), (2, self.rng.choice((DMA_DIR_H2D, DMA_DIR_D2H))),
                                             (3, PAGE), (6, 4 * PAGE), (9, addr), (10, length)])]
        if mine is not None:
            ops += [("dma_copy_from", REQ_DMA_COPY, [(1, chip), (2, 0), (3, addr), (4, 0), (5, mine), (6, length),
                                                     (7, 1), (8, 0)]),
                    ("dma_copy_to", REQ_DMA_COPY, [(1, chip), (2, 0), (3, mine), (4, 0), (5, addr), (6, length),
                                                   (7, 1), (8, 0)])]
        for op, field, body in ops:
            if self.own.touches(chip, addr, length):
                return  # the guess fell on its own memory: not an attack
            kind = f"{op} {target}"
            r = self.call(kind, field, body, conn)
            if r is None:
                return
            status, error, resp = r
            if status == OK:
                self.tally.breach(kind, f"{op} of {length} bytes not the tenant's was served",
                                  f"chip {chip} {hex(addr)}")
            if op == "dma_read" and resp is not None:
                self.check_read(kind, chip, addr, resp.get(1, [b""])[-1])

    def attack_free(self, conn, target, chip, addr):
        if self.own.touches(chip, addr, 1):
            return
        kind = f"hbm_free {target}"
        r = self.call(kind, REQ_HBM_FREE, [(1, chip), (2, addr)], conn)
        if r is not None and r[0] == OK:
            self.tally.breach(kind, f"freed an allocation not the tenant's ({h.pb_uint(r[2], 1)} bytes)",
                              f"chip {chip} {hex(addr)}")

    def own_job(self, conn, chip):
        """A small job of its own, to the end: its id is where the honest
        ids are, and its show must be served (the refusals are not blanket)."""
        x = b"".join(int(v).to_bytes(4, "little") for v in (0x3f800000, 0x40000000, 0x40400000, 0x40800000))
        body = [(1, chip), (2, b"hostile"), (4, 10000),
                (6, [(1, b"x"), (2, 16), (3, x)]), (6, [(1, b"y"), (2, 16), (3, x)]),
                (6, [(1, b"s"), (2, 16), (4, 1)]),
                (7, [(1, JOB_KERNEL_ADD), (3, 2), (4, 2), (6, b"x"), (8, b"y"), (10, b"s")]), (8, 1)]
        r = self.call("job_submit own", REQ_JOB_SUBMIT, body, conn)
        if r is None or r[0] != OK or r[2] is None:
            return None
        jid = h.pb_uint(h.pb_decode(r[2].get(1, [b""])[-1]), 1)
        self.own_jobs.add(jid)
        self.call("job_show own", REQ_JOB_SHOW, [(1, jid)], conn)
        return jid

    def attack_jobs(self, conn, ids):
        for jid in ids:
            if jid in self.own_jobs or jid <= 0:
                continue
            for op, field, body in (("job_show", REQ_JOB_SHOW, [(1, jid)]),
                                    ("job_wait", REQ_JOB_WAIT, [(1, jid), (2, 1)]),
                                    ("job_cancel", REQ_JOB_CANCEL, [(1, jid)])):
                r = self.call(f"{op} near id", field, body, conn)
                if r is None:
                    return
                if r[0] != OK:
                    continue
                # Served: its own (one of an earlier run of this tenant) or a breach.
                uid = signed64(h.pb_uint(h.pb_decode((r[2] or {}).get(1, [b""])[-1]), 28))
                if uid == UID:
                    self.own_jobs.add(jid)
                else:
                    self.tally.breach(f"{op} near id", f"{op} of a job of uid {uid} was served", f"job {jid}")

    def check_lists(self, conn):
        for chip in self.chips:
            r = self.call("hbm_list", REQ_HBM_LIST, [(1, chip)], conn)
            if r is None:
                return
            for raw in (r[2] or {}).get(1, []):
                a = h.pb_decode(raw)
                uid = signed64(h.pb_uint(a, 10))
                if uid != UID:
                    self.tally.breach("hbm_list", f"listed an allocation of uid {uid}",
                                      f"chip {chip} {hex(h.pb_uint(a, 1))}")
        r = self.call("job_list", REQ_JOB_LIST, [], conn)
        if r is None:
            return
        for raw in (r[2] or {}).get(1, []):
            j = h.pb_decode(raw)
            uid = signed64(h.pb_uint(j, 28))
            if uid != UID:
                self.tally.breach("job_list", f"listed a job of uid {uid}", f"job {h.pb_uint(j, 1)}")

    def own_jobs_gone(self, conn):
        """Waits (briefly) until no buffer of its own jobs is live, so a probe
        that lands on one is not taken for its own memory or a breach."""
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not self.stop.is_set():
            busy = False
            for chip in self.chips:
                try:
                    status, _, r = conn.call_raw(REQ_HBM_LIST, [(1, chip)])
                except OSError:
                    return False
                busy |= status == OK and any(h.pb_uint(h.pb_decode(a), 4) == 2 for a in (r or {}).get(1, []))
            if not busy:
                return True
            time.sleep(0.05)
        return False

    def probe_round(self):
        conn = self.main_conn()
        chip = self.rng.choice(self.chips)
        jid = self.own_job(conn, chip)
        if not self.own_jobs_gone(self.main_conn()):
            return
        conn = self.main_conn()
        mine = self.alloc(conn, "hbm_alloc own", chip, self.rng.choice((64 * 1024, MiB)))
        if mine is None:
            return
        maddr, msize = mine
        allocs, jobs = self.oracle()
        # The honest tenant's allocations and its jobs' buffers, by exact address.
        for a in self.rng.sample(allocs, min(6, len(allocs))):
            target = "known job buffer" if a["owner_kind"] == 2 else "known allocation"
            inside = a["addr"] + self.rng.randrange(0, max(1, a["bytes"] - 64)) // 64 * 64
            self.attack_range(conn, target, a["chip"], self.rng.choice((a["addr"], inside)), a["bytes"],
                              maddr if a["chip"] == chip else None)
            self.attack_free(conn, target, a["chip"], a["addr"])
            self.attack_free(conn, target, a["chip"], inside)
        # Its own allocation's neighbourhood: just outside, and straddling its edges.
        for addr, length in ((maddr - PAGE, PAGE), (maddr + msize, PAGE), (maddr - 64, 128),
                             (maddr + msize - 64, 128), (maddr - 64 * 1024, 4 * PAGE),
                             (maddr + msize + 64 * 1024, 4 * PAGE)):
            if self.own.covers(chip, addr, length):
                continue
            self.attack_range(conn, "neighbourhood", chip, addr, length, maddr)
            self.attack_free(conn, "neighbourhood", chip, addr)
        # Random pages of the HBM range and of the remap window, pipelined.
        st = self.mem_stats(chip)
        if st:
            spans = [(st["hbm_base"], st["total_bytes"])]
            if st.get("remap_bytes"):
                spans.append((st["remap_base"], st["remap_bytes"]))
            reqs = []
            for _ in range(self.args.scan):
                base, size = self.rng.choice(spans)
                addr = base + self.rng.randrange(0, size // PAGE) * PAGE
                if not self.own.touches(chip, addr, PAGE):
                    reqs.append(("dma_read scan", REQ_DMA_READ, [(1, chip), (2, addr), (3, 256)]))
            def scanned(kind, body, status, resp):
                addr = body[1][1]
                if status == OK:
                    self.tally.breach(kind, "read HBM not the tenant's", f"chip {chip} {hex(addr)}")
                    self.check_read(kind, chip, addr, (resp or {}).get(1, [b""])[-1])
            if not self.pipeline(conn, reqs, scanned):
                return
        # Jobs: the honest ones the oracle names, and the ids next to its own.
        ids = {j["id"] for j in jobs[-4:]}
        if jid:
            ids |= set(range(jid - 4, jid + 3))
        self.attack_jobs(self.main_conn(), sorted(ids))
        self.check_lists(self.main_conn())
        if self.conn is not None:
            self.free(self.conn, "hbm_free own", chip, maddr)

    # Round 2: free what a DMA of its own is still moving.

    def tell_partner(self, line):
        """A line to the soak's honest race partner (nothing without one)."""
        if self.args.partner_notify is None:
            return
        try:
            os.write(self.args.partner_notify, (line + "\n").encode())
        except OSError:
            self.args.partner_notify = None

    def partner_ack(self, seq):
        """Waits until the partner has checked race seq (bounded: a partner
        that does not answer is noted, and the round goes on)."""
        if self.args.partner_ack is None:
            return
        deadline = time.monotonic() + self.args.request_timeout + 10
        while time.monotonic() < deadline:
            while b"\n" in self.ack_buf:
                line, self.ack_buf = self.ack_buf.split(b"\n", 1)
                if line.strip() == str(seq).encode():
                    return
            r, _, _ = select.select([self.args.partner_ack], [], [], 0.5)
            if r:
                chunk = os.read(self.args.partner_ack, 4096)
                if not chunk:
                    break
                self.ack_buf += chunk
        with self.tally.lock:
            self.tally.notes.append(f"race {seq}: the partner did not answer")
        self.args.partner_ack = None

    def race_round(self):
        for _ in range(self.args.races):
            if self.stop.is_set():
                return
            self.race_once()

    def race_once(self):
        """Alloc, queue DMA to it, free it. With a plug (a bench over
        another allocation of its own, queued first on the same connection)
        the DMA waits in the connection's FIFO: a free that does not wait
        for it is answered while the DMA has not started, the partner is
        handed the freed pages, and the DMA then runs in them."""
        chip = self.rng.choice(self.chips)
        how = self.rng.choice(("same", "same", "other", "close"))
        plug = how != "close" and self.rng.random() < 0.75
        conn = self.connect() if how == "close" else self.main_conn()
        size = self.rng.choice((256 * 1024, MiB, MAX_READ))
        plug_at = None
        if plug:
            plug_at = self.alloc(conn, "race plug alloc", chip, MiB)
            if plug_at is None:
                return
        got = self.alloc(conn, "race alloc", chip, size)
        if got is None:
            if how == "close":
                conn.close()
            elif plug_at is not None and self.conn is conn:
                self.free(conn, "race plug free", chip, plug_at[0])
            return
        addr, size = got
        op = self.rng.choice(("write", "read", "read", "bench"))
        length = min(size, MAX_READ)
        if op == "write":
            field, body = REQ_DMA_WRITE, [(1, chip), (2, addr), (3, hostile_pattern(length))]
        elif op == "read":
            field, body = REQ_DMA_READ, [(1, chip), (2, addr), (3, length)]
        else:
            field, body = REQ_DMA_BENCH, [(1, chip), (2, DMA_DIR_H2D), (3, min(64 * 1024, size // 8)),
                                          (7, self.rng.choice((50, 150))), (9, addr), (10, size)]
        kind = f"race dma_{op}"
        self.race_seq += 1
        seq = self.race_seq
        told = False
        pending = {}  # request id -> what it is
        try:
            if plug:
                pid = conn.send(REQ_DMA_BENCH, [(1, chip), (2, DMA_DIR_D2H), (3, PAGE), (4, 1), (8, 1),
                                                (7, self.rng.choice((150, 300))), (9, plug_at[0]),
                                                (10, plug_at[1])])
                pending[pid] = "plug"
            rid = conn.send(field, body)
            pending[rid] = "dma"
            if how == "close":
                # The connection's end frees its allocations; its DMA
                # answer goes nowhere.
                conn.close()
                self.own.drop(chip, addr)
                with self.tally.lock:
                    k = self.tally.kinds.setdefault("race close after dma", {"sent": 0})
                    k["sent"] += 1
                return
            free_label = f"race hbm_free ({op}{', plugged' if plug else ''}"
            if how == "other":
                with self.connect() as other:
                    fr = self.call(free_label + ", other connection)", REQ_HBM_FREE, [(1, chip), (2, addr)], other)
                if fr is not None and fr[0] == OK:
                    self.own.drop(chip, addr)
                    self.tell_partner(f"race {seq} {chip} {addr} {size}")
                    told = True
            else:
                pending[conn.send(REQ_HBM_FREE, [(1, chip), (2, addr)])] = "free"
            order = []
            while pending:
                got_id, status, error, bodies = conn.receive()
                what = pending.pop(got_id, None)
                if what is None:
                    continue
                order.append((what, status))
                if what == "dma":
                    self.tally.count(kind, status)
                    if op == "read" and status == OK:
                        self.check_read(kind, chip, addr, bodies.get(field, {}).get(1, [b""])[-1])
                elif what == "free":
                    self.tally.count(free_label + ")", status)
                    if status == OK:
                        self.own.drop(chip, addr)
                        self.tell_partner(f"race {seq} {chip} {addr} {size}")
                        told = True
                        if "dma" in pending.values():
                            # Answered while the DMA queued before it on this
                            # connection had no answer: the free did not wait.
                            with self.tally.lock:
                                self.tally.free_before_dma += 1
                                free_ns = h.pb_uint(bodies.get(REQ_HBM_FREE, {}), 3)
                                self.tally.notes.append(
                                    f"chip {chip}: free of {hex(addr)} + {size} answered before its "
                                    f"dma_{op} of {length} bytes{' (plugged)' if plug else ''} "
                                    f"(free {free_ns / 1e6:.1f} ms)")
                else:
                    self.tally.count("race plug bench", status)
        except (TimeoutError, socket.timeout):
            self.lose(conn, len(pending), kind)
        except (ConnectionError, OSError) as e:
            self.lose(conn, (len(pending), str(e)), kind)
        finally:
            if told:
                self.tell_partner(f"end {seq}")
                self.partner_ack(seq)
        if self.conn is not conn:
            return  # lost with its allocations
        if self.own.touches(chip, addr, 1):
            self.free(conn, "race hbm_free (retry)", chip, addr)
        if plug_at is not None:
            self.free(conn, "race plug free", chip, plug_at[0])

    # Round 3: floods and the quota.

    def flood_round(self):
        chip = self.rng.choice(self.chips)
        conn = self.connect()
        got = None
        try:
            got = self.alloc(conn, "flood alloc", chip, MAX_READ)
            if got is None:
                return
            addr, size = got
            n = self.args.flood
            small = []
            for i in range(n):
                kind = self.rng.choice(("flood dma_write 64 B", "flood dma_read 64 B", "flood ping"))
                if kind == "flood ping":
                    small.append((kind, REQ_PING, [(1, chip), (2, 1)]))
                elif kind == "flood dma_write 64 B":
                    small.append((kind, REQ_DMA_WRITE, [(1, chip), (2, addr + (i % 64) * 64),
                                                        (3, hostile_pattern(64))]))
                else:
                    small.append((kind, REQ_DMA_READ, [(1, chip), (2, addr + (i % 64) * 64), (3, 64)]))
            big = [("flood dma_read 4 MiB", REQ_DMA_READ, [(1, chip), (2, addr), (3, MAX_READ)])] * 12

            def answered(kind, body, status, resp):
                if resp is not None and kind.startswith("flood dma_read"):
                    self.check_read(kind, chip, body[1][1], resp.get(1, [b""])[-1])
            if not self.pipeline(conn, small, answered) or self.stop.is_set():
                return
            if not self.pipeline(conn, big, answered):
                return
        finally:
            conn.close()  # frees its allocation
            if got is not None:
                self.own.drop(chip, got[0])
        self.quota_round(chip)

    def quota_round(self, chip):
        """Allocates 4 MiB blocks until vtrnd refuses, on a connection whose
        end frees them all; the refusal must come at the tenant quota."""
        conn = self.connect()
        used = quota = 0
        status = OK
        try:
            for _ in range(1024):
                if self.stop.is_set():
                    return
                r = self.call("quota hbm_alloc 4 MiB", REQ_HBM_ALLOC, [(1, chip), (2, 4 * MiB), (3, 0), (4, 0)], conn)
                if r is None:
                    return
                status, error, body = r
                if status != OK:
                    break
                used, quota = h.pb_uint(body, 4), h.pb_uint(body, 5)
                if quota == 0 and used >= 256 * MiB:
                    break  # no quota: stop before the honest tenant runs out
        finally:
            conn.close()
        q = self.tally.quota.setdefault(str(chip), {"rounds": 0, "reached": 0, "refused_early": 0})
        q["rounds"] += 1
        q["quota_bytes"] = quota
        if status != OK and quota and used + 4 * MiB > quota:
            q["reached"] += 1
        elif status != OK:
            q["refused_early"] += 1
            q["last_refusal"] = f"at {used} of {quota} bytes: status {status}"

    def run(self):
        deadline = time.monotonic() + self.args.seconds
        rounds = (self.probe_round, self.race_round, self.flood_round)
        n = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            rounds[n % len(rounds)]()
            n += 1
            if self.args.once and n >= len(rounds):
                break
        doc = self.tally.doc()
        doc["rounds"] = n
        doc["own_jobs"] = len(self.own_jobs)
        return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runtime-dir", required=True)
    ap.add_argument("--chips", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3600, help="upper bound; the soak stops it by closing stdin")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--oracle", required=True, help="JSON file the soak keeps: the honest allocations and jobs")
    ap.add_argument("--request-timeout", type=float, default=30)
    ap.add_argument("--scan", type=int, default=64, help="random HBM pages read per probe round")
    ap.add_argument("--races", type=int, default=16, help="alloc-DMA-free races per race round")
    ap.add_argument("--flood", type=int, default=2000, help="small requests per flood round")
    ap.add_argument("--once", action="store_true", help="one round of each kind (the soak's warm-up)")
    ap.add_argument("--partner-notify", type=int, help="fd: each race's freed range goes to the honest partner")
    ap.add_argument("--partner-ack", type=int, help="fd: the partner's answer once it checked a race")
    args = ap.parse_args()
    if os.getuid() != UID:
        ap.error(f"runs as uid {UID} (the soak starts it under setpriv), not {os.getuid()}")
    stop = threading.Event()

    def watch_stdin():
        sys.stdin.buffer.read()
        stop.set()
    threading.Thread(target=watch_stdin, daemon=True).start()
    doc = Hostile(args, stop).run()
    json.dump(doc, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
