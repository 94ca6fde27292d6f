"""Integration: a board shared by two users through `vtrn up --group`, as
/dev/nvidia* is shared through a group. The user who started vtrnd (root
here) is the admin; `nobody`, whose group the board is shared with, is a
tenant. A tenant's memory and jobs are its own: another tenant cannot free,
list, read, write, DMA into (DmaWrite, DmaRead, DmaCopy, a DmaBench span),
wait on, show or cancel them (STATUS_PERMISSION_DENIED, exit 8, one line
naming the allocation or job), while the owner and the admin still can. The
requests that change the board for everyone (reset, fault injection, power,
stopping vtrnd) are refused to a tenant with one line and exit 8.

Within one tenant each connection is a context (OneTenantTwoContexts): what
it allocated goes with it, and so do its jobs, unless detached; another
context of the tenant acts on them only by naming them (an address, a job
id), never on a job's buffers, and its free of memory that DMA holds waits
for that DMA.

The second user is real: each tenant command runs under
`setpriv --reuid=nobody --regid=nogroup --clear-groups`, and a tenant's raw
API connection is made with the effective uid and gid of nobody (vtrnd reads
the peer's uid with SO_PEERCRED at connect).
"""

import json
import os
import re
import select
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

TENANT_UID = h.NOBODY_UID
SHARE_GROUP = "nogroup"  # nobody's own group (gid 65534)
SHARE_GID = 65534
OTHER_UID = 65533        # a third user in the share group: a tenant, not the admin
SHORT_JOB = {"name": "short", "buffers": [{"name": "x", "values": [1, 2, 3, 4]},
                                          {"name": "y", "values": [10, 20, 30, 40]},
                                          {"name": "s", "bytes": 16}],
             "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y", "out": "s"}]}
PERMISSION_DENIED = 9    # vtrn.api STATUS_PERMISSION_DENIED
MiB = 1 << 20
DMA_H2D = 0              # vtrn.api DMA_DIR_H2D
DMA_D2H = 1              # vtrn.api DMA_DIR_D2H


class SharedSession(h.SessionTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The tenant must reach the runtime directory inside the session's.
        os.chmod(cls.s.tmp, 0o711)


class TenantTools:
    """Acting as the tenant (nobody) and as the admin (root)."""

    def tenant_argv(self, args, uid):
        env = dict(self.s.env)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        argv = ["setpriv", f"--reuid={uid}", f"--regid={SHARE_GID}", "--clear-groups", h.CLI, *map(str, args)]
        return argv, env

    def tenant(self, *args, timeout=60, uid=TENANT_UID):
        """`vtrn ARGS` as the second user (or as `uid`, in the share group)."""
        argv, env = self.tenant_argv(args, uid)
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)

    def tenant_popen(self, *args):
        """`vtrn ARGS` as the second user, left running: (process). Killed
        at the end of the test if it still runs."""
        argv, env = self.tenant_argv(args, TENANT_UID)
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def reap():
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
        self.addCleanup(reap)
        return p

    def tenant_json(self, *args, uid=TENANT_UID, timeout=60):
        r = self.tenant(*args, "--json", uid=uid, timeout=timeout)
        self.assertEqual(r.returncode, 0, f"vtrn {' '.join(map(str, args))} as the tenant: {r.stderr}")
        return json.loads(r.stdout)

    def tenant_api(self, uid=TENANT_UID):
        """A raw API connection whose peer is the tenant (or `uid`, in the
        share group): made with those effective ids, then this process is
        root again."""
        os.setegid(SHARE_GID)
        os.seteuid(uid)
        try:
            c = h.ApiClient(self.s)
        finally:
            os.seteuid(0)
            os.setegid(0)
        self.addCleanup(c.close)
        return c

    def admin_api(self):
        c = h.ApiClient(self.s)
        self.addCleanup(c.close)
        return c

    def hold(self, size):
        """An allocation the admin holds (`mem alloc --hold`): (process, addr)."""
        p = self.s.popen("mem", "alloc", 0, size, "--hold", "--json")
        self.addCleanup(lambda: (p.terminate(), p.communicate(timeout=30)))
        return p, h.read_held_allocation(self, p)["addr"]

    def assert_denied(self, result, *needles):
        status, error, _ = result
        self.assertEqual(status, PERMISSION_DENIED,
                         f"the tenant's request was not refused PERMISSION_DENIED: status {status}, error {error!r}")
        for needle in needles:
            self.assertIn(needle, error)

    def job_file(self, doc):
        d = tempfile.mkdtemp(prefix="jobs-", dir=self.s.tmp)
        os.chmod(d, 0o755)  # the tenant's CLI reads it too
        path = os.path.join(d, "job.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        os.chmod(path, 0o644)
        return path


class SharedBoard(TenantTools, h.BoardTestCase, SharedSession):
    session_name = "tenants"
    up_args = ("--chips", 1, "--group", SHARE_GROUP)

    def test_the_group_reaches_the_board_and_nobody_else_can(self):
        d = os.stat(self.s.runtime_dir)
        sock = os.stat(os.path.join(self.s.runtime_dir, "vtrnd.sock"))
        self.assertEqual((stat.S_IMODE(d.st_mode), d.st_gid), (0o750, TENANT_UID))
        self.assertEqual((stat.S_IMODE(sock.st_mode), sock.st_gid), (0o660, TENANT_UID))
        r = self.tenant("ls", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["chips"][0]["state"], "READY")

    def test_a_tenant_cannot_free_another_tenants_memory(self):
        _, addr = self.hold("1M")
        r = self.tenant("mem", "free", 0, hex(addr))
        self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED, f"allocation at {hex(addr)}",
                                   "belongs to another tenant")
        live = [a["addr"] for a in self.s.vtrn_json("mem", "ls", 0)["allocations"]]
        self.assertIn(addr, live)
        # The tenant frees its own, named from another of its connections;
        # the admin frees any tenant's.
        c = self.tenant_api()
        mine, _ = h.hbm_alloc(c, 0, MiB)
        other, _ = h.hbm_alloc(c, 0, MiB)
        self.assertEqual(self.tenant_json("mem", "free", 0, hex(mine))["bytes"], MiB)
        self.assertEqual(self.s.vtrn_json("mem", "free", 0, hex(other))["bytes"], MiB)
        live = [a["addr"] for a in self.s.vtrn_json("mem", "ls", 0)["allocations"]]
        self.assertEqual([a for a in (mine, other) if a in live], [], "freed allocations still listed")

    def test_mem_ls_shows_a_tenant_its_own_and_the_admin_every_tenants(self):
        _, theirs = self.hold("1M")
        mine, _ = h.hbm_alloc(self.tenant_api(), 0, 2 * MiB)
        doc = self.tenant_json("mem", "ls", 0)
        self.assertFalse(doc["all_tenants"], doc)
        self.assertEqual([(a["addr"], a["uid"]) for a in doc["allocations"]], [(mine, TENANT_UID)],
                         "the tenant's mem ls must show its own allocation and nothing of another tenant's")
        r = self.tenant("mem", "ls", 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(hex(mine), r.stdout)
        self.assertNotIn(hex(theirs), r.stdout)
        self.assertNotIn("uid", r.stdout.splitlines()[0], "a tenant's table has no uid column")
        # The admin sees both, each with its tenant.
        doc = self.s.vtrn_json("mem", "ls", 0)
        self.assertTrue(doc["all_tenants"], doc)
        uids = {a["addr"]: a["uid"] for a in doc["allocations"]}
        self.assertEqual((uids.get(theirs), uids.get(mine)), (0, TENANT_UID), doc)
        r = self.s.vtrn("mem", "ls", 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        header, *rows = r.stdout.splitlines()
        self.assertIn("uid", header.split())
        row = next(x for x in rows if x.startswith(hex(mine) + " "))
        self.assertIn(str(TENANT_UID), row.split())

    def test_a_tenant_cannot_dma_into_the_pages_behind_another_tenants_stitched_allocation(self):
        # Fragment HBM into 2 MiB holes (the admin's pieces, every other one
        # freed), then have the admin take 8 MiB: stitched from the holes.
        piece, holders, held = 2 * MiB, [], {}
        full = False
        while not full and len(holders) < 16:
            c = self.admin_api()
            holders.append(c)
            while True:
                try:
                    held[h.hbm_alloc(c, 0, piece)[0]] = c
                except h.ApiError as e:
                    full = "out of memory" in e.error or "stitch" in e.error
                    break
        st = self.s.vtrn_json("mem", "stats", 0)
        remap = (st["remap_base"], st["remap_base"] + st["remap_bytes"])
        contiguous = sorted(a for a in held if not remap[0] <= a < remap[1])
        self.assertGreater(len(contiguous), 16)
        holes = contiguous[::2]
        for a in holes:
            h.hbm_free(held.pop(a), 0, a)
        admin = self.admin_api()
        stitched, _ = h.hbm_alloc(admin, 0, 8 * MiB)
        self.assertTrue(remap[0] <= stitched < remap[1], f"8 MiB at {hex(stitched)} was not stitched")
        admin.dma_write(0, stitched, b"\x5a" * 4096)
        # The tenant names the physical pages instead of the remap address.
        c = self.tenant_api()
        statuses, behind = {}, 0
        for a in holes:
            status, error, _ = c.call_raw(30, [(1, 0), (2, a), (3, b"\0" * 64)])
            statuses[a] = status
            if status == PERMISSION_DENIED:
                # Behind the stitched allocation, or a hole nobody holds
                # (a tenant's DMA stays inside its own allocations).
                stolen = f"behind the stitched allocation at {hex(stitched)}, which belongs to another tenant"
                behind += stolen in error
                self.assertTrue(stolen in error or f"reaches HBM at {hex(a)} that no allocation of this tenant covers"
                                in error, error)
        self.assertNotIn(0, statuses.values(),
                         "the tenant wrote into HBM behind the admin's stitched allocation: " +
                         ", ".join(hex(a) for a, st in statuses.items() if st == 0))
        self.assertGreaterEqual(behind, 4, statuses)
        self.assertEqual(admin.dma_read(0, stitched, 4096)[0], b"\x5a" * 4096)

    def test_a_tenant_cannot_dma_into_another_tenants_memory(self):
        admin = self.admin_api()
        theirs, _ = h.hbm_alloc(admin, 0, MiB)
        admin.dma_write(0, theirs, b"\xa5" * 4096)
        c = self.tenant_api()
        mine, _ = h.hbm_alloc(c, 0, MiB)
        # HBM no allocation covers: refused too (by the time a queued chunk
        # ran it could be another tenant's).
        hole, _ = h.hbm_alloc(c, 0, 64 * 1024)
        h.hbm_free(c, 0, hole)
        who = f"allocation at {hex(theirs)}, which belongs to another tenant"
        self.assert_denied(c.call_raw(30, [(1, 0), (2, theirs), (3, b"\0" * 64)]), "DMA write to", who)
        self.assert_denied(c.call_raw(31, [(1, 0), (2, theirs + 4096), (3, 64)]), "DMA read of", who)
        # A range that starts below the allocation and reaches into it
        # (what lies below may be another of the admin's).
        if theirs - 64 >= admin.dma_stats(0)["hbm_base"]:
            self.assert_denied(c.call_raw(31, [(1, 0), (2, theirs - 64), (3, 128)]), "DMA read of",
                               "which belongs to another tenant")
        self.assert_denied(c.dma_copy_raw(0, src_addr=theirs, dst_addr=mine, length=4096), "DMA copy from", who)
        self.assert_denied(c.dma_copy_raw(0, src_addr=mine, dst_addr=theirs, length=4096), "DMA copy to", who)
        self.assert_denied(c.call_raw(33, [(1, 0), (2, DMA_H2D), (3, 4096), (6, MiB), (9, theirs), (10, MiB)]),
                           "DMA bench span", who)
        # What a user sees.
        for args in (("mem", "write", 0, hex(theirs), "--pattern", 1, "--length", "4K"),
                     ("mem", "read", 0, hex(theirs), "--length", 64)):
            with self.subTest(args=args):
                self.assert_one_error_line(self.tenant(*args), h.EXIT_PERMISSION_DENIED, who)
        self.assert_denied(c.call_raw(30, [(1, 0), (2, hole), (3, b"\0" * 64)]), "DMA write to",
                           f"reaches HBM at {hex(hole)} that no allocation of this tenant covers")
        # The owner's bytes are untouched, and each tenant still reaches its own.
        self.assertEqual(admin.dma_read(0, theirs, 4096)[0], b"\xa5" * 4096)
        c.dma_write(0, mine, b"\x5a" * 4096)
        status, error, r = c.dma_copy_raw(0, src_addr=mine, dst_addr=mine + 65536, length=4096)
        self.assertEqual((status, r and r["dma_status"]), (0, 0), error)
        self.assertEqual(c.dma_read(0, mine + 65536, 4096)[0], b"\x5a" * 4096)
        # The admin reaches every tenant's memory.
        self.assertEqual(admin.dma_read(0, mine, 16)[0], b"\x5a" * 16)

    def test_a_free_waits_for_the_dma_queued_to_it_so_no_chunk_lands_in_memory_handed_on(self):
        # The race a hostile tenant can run: DMA to its own allocation, free
        # it at once, and hope the chip hands the pages to someone else
        # while chunks of the DMA are still queued. Here a one-second bench
        # writes the tenant's allocation and its free follows on the same
        # connection without waiting; the admin then asks for the same size.
        c = self.tenant_api()
        mine, size = h.hbm_alloc(c, 0, 4 * MiB)
        bench = c.send(33, [(1, 0), (2, DMA_H2D), (3, 64 * 1024), (7, 1000), (9, mine), (10, size)])
        free = c.send(41, [(1, 0), (2, mine)])
        admin = self.admin_api()
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # the free has had its chance to go through
            time.sleep(0.05)
        theirs, _ = h.hbm_alloc(admin, 0, size)
        admin.dma_write(0, theirs, b"\xa5" * 65536)
        answers = [c.receive()[:3] for _ in range(2)]
        self.assertEqual([a[0] for a in answers], [bench, free],
                         f"the free was answered before the DMA queued to the memory ended: {answers}")
        self.assertEqual([a[1] for a in answers], [0, 0], answers)
        self.assertNotEqual(theirs, mine, "the admin was handed memory the tenant's bench was still writing")
        self.assertEqual(admin.dma_read(0, theirs, 65536)[0], b"\xa5" * 65536,
                         "a chunk of the tenant's DMA landed in the admin's allocation")
        h.hbm_free(admin, 0, theirs)

    def test_a_tenants_jobs_are_its_own(self):
        # The tenant's own job: it waits on, shows and lists it.
        mine_doc = {"name": "mine", "buffers": [{"name": "x", "values": [1, 2, 3, 4]},
                                                {"name": "y", "values": [10, 20, 30, 40]},
                                                {"name": "s", "bytes": 16}],
                    "steps": [{"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y", "out": "s"}]}
        mine = self.tenant_json("submit", self.job_file(mine_doc), "--wait")["job"]
        self.assertEqual((mine["state"], mine["uid"]), ("DONE", TENANT_UID), mine)
        self.assertEqual(self.tenant_json("job", "show", mine["id"])["state"], "DONE")
        self.assertEqual(self.tenant_json("job", "wait", mine["id"])["state"], "DONE")
        # Another tenant's (the admin's) job: not to be seen, waited on or cancelled.
        job_id = self.s.vtrn_json("submit", self.job_file(dict(h.LONG_GEMM_JOB, name="admins")))["job"]["id"]
        self.addCleanup(lambda: self.s.vtrn("job", "cancel", job_id, timeout=60))
        for args, verb in ((("job", "show", job_id), "show"), (("job", "wait", job_id, "--timeout-ms", 100), "wait on"),
                           (("job", "cancel", job_id), "cancel")):
            with self.subTest(args=args):
                self.assert_one_error_line(self.tenant(*args), h.EXIT_PERMISSION_DENIED,
                                           f"job {job_id} belongs to another tenant",
                                           f"only that tenant or the admin may {verb} it")
        doc = self.tenant_json("jobs")
        self.assertFalse(doc["all_tenants"], doc)
        self.assertEqual([j["id"] for j in doc["jobs"]], [mine["id"]],
                         "a tenant's job list must hold its own job and no other tenant's")
        # The admin sees both, each with its tenant.
        doc = self.s.vtrn_json("jobs")
        self.assertTrue(doc["all_tenants"], doc)
        uids = {j["id"]: j["uid"] for j in doc["jobs"]}
        self.assertEqual((uids.get(job_id), uids.get(mine["id"])), (0, TENANT_UID), doc)
        # Its buffers are its tenant's too: no DMA into them.
        bufs = h.wait_until("the admin job's buffers", lambda: [
            a["addr"] for a in self.s.vtrn_json("mem", "ls", 0)["allocations"]
            if a["owner_kind"] == "job" and a["owner_id"] == job_id], lambda v: len(v) == 3, 60)
        self.assert_denied(self.tenant_api().call_raw(30, [(1, 0), (2, bufs[0]), (3, b"\xff" * 64)]),
                           f"allocation at {hex(bufs[0])}, which belongs to another tenant")
        self.assert_one_error_line(self.tenant("mem", "free", 0, hex(bufs[1])), h.EXIT_PERMISSION_DENIED,
                                   f"allocation at {hex(bufs[1])} belongs to another tenant")
        # The owner (here the admin) still cancels its own job.
        self.assertEqual(self.s.vtrn_json("job", "cancel", job_id, timeout=60)["state"], "CANCELLED")

    def test_requests_that_change_the_board_are_the_admins(self):
        for args, body in ((("reset", 0), "chip_reset"), (("inject", "hang", 0), "fault_inject"),
                           (("power", 0, "--state", "d3"), "power_set"), (("down",), "shutdown"),
                           (("dma", "reset", 0), "dma_reset")):
            with self.subTest(args=args):
                r = self.tenant(*args)
                self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED, body, "only its admin (uid 0 or root)")
        # The ones the CLI reaches only as the admin, sent raw: DmaInject
        # (queue 0, a fault), HbmInjectEcc (an uncorrectable error would retire
        # a page for good), LinkControl (retrain port 0).
        c = self.tenant_api()
        for field, body, name in ((36, [(1, 0), (2, 0), (3, 1)], "dma_inject"),
                                  (44, [(1, 0), (2, 0x44000000), (3, 1)], "hbm_inject_ecc"),
                                  (81, [(1, 0), (2, 0), (3, 1)], "link_control")):
            with self.subTest(body=name):
                self.assert_denied(c.call_raw(field, body), name, "only its admin")
        # Nothing of it happened: the chip is READY, vtrnd still up.
        doc = self.s.vtrn_json("ls")
        self.assertEqual(doc["chips"][0]["state"], "READY")



class TenantQuota(TenantTools, h.BoardTestCase, SharedSession):
    """The HBM quota is per tenant (issue 15 item 9): each uid has its own,
    shared by all its connections and its jobs' buffers."""
    session_name = "tenant-quota"
    up_args = ("--chips", 1, "--group", SHARE_GROUP)
    up_env = {"VTRN_HBM_QUOTA_MIB": "64"}

    def test_each_tenant_has_its_own_quota_over_all_its_connections_and_jobs(self):
        admin = self.admin_api()
        a, _ = h.hbm_alloc(admin, 0, 40 * MiB)
        # The tenant's quota is its own: the admin's 40 MiB do not count.
        t1 = self.tenant_api()
        b, _ = h.hbm_alloc(t1, 0, 62 * MiB)
        t2 = self.tenant_api()
        with self.assertRaises(h.ApiError) as e:
            h.hbm_alloc(t2, 0, 30 * MiB)
        self.assertIn(f"HBM quota exceeded: tenant uid {TENANT_UID} holds 62.00 MiB of its 64.00 MiB quota",
                      e.exception.error)
        # A job of the tenant is charged to it as well: 3 x 1.25 MiB buffers
        # in the 2 MiB left.
        r = self.tenant("run", "add", "--m", 1024, "--n", 320, "--seed", 4, timeout=120)
        self.assert_one_error_line(r, h.EXIT_FAILED, "HBM quota exceeded", f"tenant uid {TENANT_UID}")
        # The admin's own quota is untouched by the tenant's.
        with self.assertRaises(h.ApiError) as e:
            h.hbm_alloc(admin, 0, 30 * MiB)
        self.assertIn("tenant uid 0 holds 40.00 MiB", e.exception.error)
        c, _ = h.hbm_alloc(admin, 0, 20 * MiB)
        # Freed by the tenant, its room is back for its jobs.
        h.hbm_free(t1, 0, b)
        r = self.tenant("run", "add", "--m", 1024, "--n", 320, "--seed", 4, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        h.hbm_free(admin, 0, a)
        h.hbm_free(admin, 0, c)

    def test_detached_memory_counts_against_its_tenants_quota(self):
        doc = self.tenant_json("mem", "alloc", 0, "40M", "--detach")
        self.assertIs(doc["detached"], True, doc)
        addr = doc["addr"]
        self.addCleanup(lambda: self.s.vtrn("mem", "free", 0, hex(addr)))
        # The command has exited; its 40 MiB are still the tenant's.
        t = self.tenant_api()
        with self.assertRaises(h.ApiError) as e:
            h.hbm_alloc(t, 0, 30 * MiB)
        self.assertIn(f"HBM quota exceeded: tenant uid {TENANT_UID} holds 40.00 MiB of its 64.00 MiB quota",
                      e.exception.error)
        r = self.tenant("mem", "alloc", 0, "30M", "--detach")
        self.assert_one_error_line(r, h.EXIT_FAILED, f"tenant uid {TENANT_UID} holds 40.00 MiB")
        self.assertEqual(self.tenant_json("mem", "free", 0, hex(addr))["bytes"], 40 * MiB)
        b, _ = h.hbm_alloc(t, 0, 30 * MiB)
        h.hbm_free(t, 0, b)


class OneTenantTwoContexts(TenantTools, h.BoardTestCase, SharedSession):
    """Each connection of a tenant is a context, as a CUDA context is: its
    allocations and its jobs go away with it unless detached (then they are
    the tenant's until one of its contexts names them), and another context
    of the same tenant acts on them only by naming them (an address, a job
    id), never on a job's buffers, which are the job's until it ends, and a
    free of memory that DMA holds waits for that DMA. Both contexts are
    nobody's (raw connections and CLI processes); OTHER_UID, in the same
    group, is a second tenant that still may not name them."""
    session_name = "tenant-contexts"
    up_args = ("--chips", 1, "--group", SHARE_GROUP)

    # A GEMM on the NeuronCores long enough (seconds under TCG) to be caught
    # holding its buffers, short enough to wait for; `vtrn run` checks its
    # result against the host reference.
    RUN_GEMM = ("run", "gemm", "--m", 512, "--n", 512, "--k", 1024, "--dtype", "bf16", "--engine", "cores",
                "--seed", 15, "--json")

    def hbm_used(self):
        return self.s.vtrn_json("mem", "stats", 0)["used_bytes"]

    def listed(self):
        """{addr: allocation} of what the tenant's `vtrn mem ls` shows (a
        context of its own: one CLI process)."""
        return {a["addr"]: a for a in self.tenant_json("mem", "ls", 0)["allocations"]}

    def test_a_contexts_allocation_goes_with_it_when_it_disconnects(self):
        base = self.hbm_used()
        a = self.tenant_api()
        addr, size = h.hbm_alloc(a, 0, 2 * MiB)
        # Context B of the same tenant lists it, as A's (a client, the tenant's uid).
        mine = self.listed().get(addr)
        self.assertIsNotNone(mine, "another context of the tenant does not list its allocation")
        self.assertEqual((mine["bytes"], mine["owner_kind"], mine["uid"]), (size, "client", TENANT_UID), mine)
        self.assertEqual(self.hbm_used() - base, size)
        a.close()
        h.wait_until("the departed context's allocation freed", lambda: (addr in self.listed(), self.hbm_used()),
                     lambda v: v == (False, base), 30)
        # Named afterwards, it is nobody's.
        r = self.tenant("mem", "free", 0, hex(addr))
        self.assert_one_error_line(r, h.EXIT_FAILED, f"chip 0: no allocation starts at {hex(addr)}")
        # What a user sees: `vtrn mem alloc` says the memory goes with the
        # command, and it does.
        r = self.tenant("mem", "alloc", 0, "1M")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("of HBM at 0x", r.stdout)
        self.assertIn("released as this command exits", r.stdout)
        h.wait_until("the CLI's allocation freed", self.hbm_used, lambda used: used == base, 30)

    def test_a_detached_allocation_outlives_its_context_and_only_its_tenant_frees_it(self):
        base = self.hbm_used()
        # Context A: `vtrn mem alloc --detach` exits and says the memory stays;
        # an attached allocation made the same way goes.
        r = self.tenant("mem", "alloc", 0, "2M", "--detach")
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.fullmatch(r"chip 0: 2 MiB of HBM at (0x[0-9a-f]+) \(tensors, .* in vtrnd\), detached: kept after "
                         r"this command exits until `vtrn mem free 0 (0x[0-9a-f]+)` from this uid\n", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(m.group(1), m.group(2), r.stdout)
        addr = int(m.group(1), 16)
        self.addCleanup(lambda: self.s.vtrn("mem", "free", 0, hex(addr)))
        doc = self.tenant_json("mem", "alloc", 0, "1M")
        self.assertIs(doc["detached"], False, doc)
        h.wait_until("the attached allocation freed", lambda: doc["addr"] in self.listed(), lambda v: not v, 30)
        self.assertEqual(self.hbm_used() - base, 2 * MiB, "the detached allocation went with its context")
        # Context B of the tenant lists it as the tenant's, detached.
        mine = self.listed().get(addr)
        self.assertIsNotNone(mine, "another context of the tenant does not list the detached allocation")
        self.assertEqual((mine["bytes"], mine["owner_kind"], mine["owner_id"], mine["uid"]),
                         (2 * MiB, "tenant", TENANT_UID, TENANT_UID), mine)
        self.assertIs(mine["detached"], True, mine)
        r = self.tenant("mem", "ls", 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        row = [line for line in r.stdout.splitlines() if line.startswith(hex(addr))]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertIn(f"uid {TENANT_UID} (detached)", row[0])
        # ... and reaches it by DMA.
        b = self.tenant_api()
        b.dma_write(0, addr, b"\x5a" * 4096)
        # Another tenant neither lists, frees nor reaches it.
        self.assertNotIn(addr, {a["addr"] for a in self.tenant_json("mem", "ls", 0, uid=OTHER_UID)["allocations"]})
        self.assert_one_error_line(self.tenant("mem", "free", 0, hex(addr), uid=OTHER_UID), h.EXIT_PERMISSION_DENIED,
                                   f"chip 0: the allocation at {hex(addr)} belongs to another tenant")
        self.assert_one_error_line(self.tenant("mem", "write", 0, hex(addr), "--pattern", 1, "--length", "4K",
                                               uid=OTHER_UID), h.EXIT_PERMISSION_DENIED,
                                   f"reaches the allocation at {hex(addr)}, which belongs to another tenant")
        # B's connection closing does not free it either; C frees it by its address.
        b.close()
        r = self.tenant("mem", "free", 0, hex(addr))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"chip 0: freed 2 MiB at {hex(addr)} (held by uid {TENANT_UID} (detached))\n")
        self.assertNotIn(addr, self.listed())
        self.assertEqual(self.hbm_used(), base)
        # Over the API: the flag, the owner, and a second free names nothing.
        c = self.tenant_api()
        r = c.call(40, [(1, 0), (2, MiB), (5, 1)])
        addr2 = h.pb_uint(r, 1)
        self.assertEqual(h.pb_uint(r, 3), (3 << 32) | TENANT_UID)
        c.close()
        self.assertEqual(h.hbm_free(self.tenant_api(), 0, addr2), MiB)
        status, error, _ = self.tenant_api().call_raw(41, [(1, 0), (2, addr2)])
        self.assertEqual((status, error), (h.API_STATUS_BAD_REQUEST,
                                           f"chip 0: no allocation starts at {hex(addr2)} (no such allocation)"))

    def test_a_detached_job_outlives_its_context_and_only_its_tenant_names_it(self):
        base = self.hbm_used()
        # Context A: `vtrn submit` without --wait detaches the job and exits.
        job_id = self.tenant_json("submit", self.job_file(dict(h.LONG_GEMM_JOB, name="detached")))["job"]["id"]
        self.addCleanup(lambda: self.s.vtrn("job", "cancel", job_id, timeout=60))
        j = self.tenant_json("job", "show", job_id)
        self.assertIn(j["state"], ("QUEUED", "RUNNING"), j)
        self.assertEqual((j["detached"], j["uid"]), (True, TENANT_UID), j)
        self.assertIs(j["detached"], True, "--json gives detached as a JSON boolean")
        # Another tenant cannot name it.
        for args, verb in ((("job", "show", job_id), "show"), (("job", "wait", job_id, "--timeout-ms", 100), "wait on"),
                           (("job", "cancel", job_id), "cancel")):
            with self.subTest(uid=OTHER_UID, args=args):
                self.assert_one_error_line(self.tenant(*args, uid=OTHER_UID), h.EXIT_PERMISSION_DENIED,
                                           f"job {job_id} belongs to another tenant",
                                           f"only that tenant or the admin may {verb} it")
        self.assertEqual(self.tenant_json("jobs", uid=OTHER_UID)["jobs"], [],
                         "another tenant's job list shows this tenant's job")
        # Context B of the same tenant names it: waits (up to a bound), cancels.
        r = self.tenant("job", "wait", job_id, "--timeout-ms", 200)
        self.assert_one_error_line(r, h.EXIT_TIMEOUT, f"job {job_id}")
        j = self.tenant_json("job", "cancel", job_id, timeout=60)
        self.assertEqual(j["state"], "CANCELLED", j)
        h.wait_until("the cancelled job's HBM freed", self.hbm_used, lambda used: used == base, 30)
        # A detached job that ends is waited for by another context too.
        short_id = self.tenant_json("submit", self.job_file(SHORT_JOB))["job"]["id"]
        j = self.tenant_json("job", "wait", short_id)
        self.assertEqual((j["id"], j["state"], j["detached"]), (short_id, "DONE", True), j)

    def test_an_attached_job_goes_with_its_context_and_the_others_list_it(self):
        base = self.hbm_used()
        # Another tenant's job (the admin's, ended), which the tenant's list leaves out.
        admins = self.s.vtrn_json("submit", self.job_file(dict(SHORT_JOB, name="admins")), "--wait")["job"]
        self.assertEqual(admins["state"], "DONE", admins)
        # Context A: `vtrn submit --wait` holds its job on its connection.
        p = self.tenant_popen("submit", self.job_file(dict(h.LONG_GEMM_JOB, name="attached")), "--wait")
        running = h.wait_until("context A's job to run", lambda: [
            j for j in self.tenant_json("jobs", "--active")["jobs"] if j["state"] == "RUNNING"], bool, 60)
        job_id = running[0]["id"]
        # Context B lists the tenant's jobs: A's, not the admin's.
        doc = self.tenant_json("jobs")
        self.assertFalse(doc["all_tenants"], doc)
        listed = {j["id"]: j for j in doc["jobs"]}
        self.assertNotIn(admins["id"], listed, "a tenant's job list shows another tenant's job")
        self.assertIn(job_id, listed, "another context of the tenant does not list its job")
        self.assertEqual((listed[job_id]["name"], listed[job_id]["detached"], listed[job_id]["uid"]),
                         ("attached", False, TENANT_UID), listed[job_id])
        self.assertIs(listed[job_id]["detached"], False, "--json gives detached as a JSON boolean")
        self.assertEqual({j["uid"] for j in doc["jobs"]}, {TENANT_UID}, doc)
        p.kill()
        j = h.wait_until("context A's job to end", lambda: self.tenant_json("job", "show", job_id),
                         lambda j: j["state"] not in ("QUEUED", "RUNNING"), 60)
        self.assertEqual((j["state"], j["reason"]), ("CANCELLED", "client_gone"), j)
        h.wait_until("the job's HBM freed", self.hbm_used, lambda used: used == base, 30)

    def test_another_context_frees_a_live_allocation_by_naming_it_and_another_tenant_cannot(self):
        a = self.tenant_api()
        addr, size = h.hbm_alloc(a, 0, MiB)
        a.dma_write(0, addr, b"\x5a" * 4096)
        r = self.tenant("mem", "free", 0, hex(addr), uid=OTHER_UID)
        self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED,
                                   f"chip 0: the allocation at {hex(addr)} belongs to another tenant")
        self.assertIn(addr, self.listed())
        # Context B of the same tenant frees it by its address, while A is
        # still connected.
        self.assertEqual(self.tenant_json("mem", "free", 0, hex(addr))["bytes"], size)
        self.assertNotIn(addr, self.listed())
        # A's handle is gone with it: no DMA to it, no second free.
        self.assert_denied(a.call_raw(30, [(1, 0), (2, addr), (3, b"\0" * 64)]),
                           f"chip 0: DMA write to {hex(addr)} + 64 reaches HBM at {hex(addr)} "
                           "that no allocation of this tenant covers")
        status, error, _ = a.call_raw(41, [(1, 0), (2, addr)])
        self.assertEqual((status, error), (h.API_STATUS_BAD_REQUEST,
                                           f"chip 0: no allocation starts at {hex(addr)} (no such allocation)"))

    def test_a_free_from_another_context_waits_for_the_dma_that_holds_the_memory(self):
        a = self.tenant_api()
        addr, size = h.hbm_alloc(a, 0, 4 * MiB)
        pattern = bytes(range(256)) * 256
        a.dma_write(0, addr, pattern)
        # Context A: a one-second bench reading its allocation, then a read
        # of it; HbmStats after them answers once vtrnd has taken both (a
        # connection's frames are handled in order), so both hold it.
        pending = {a.send(33, [(1, 0), (2, DMA_D2H), (3, 64 * 1024), (7, 1000), (9, addr), (10, size)]): "bench",
                   a.send(31, [(1, 0), (2, addr), (3, len(pattern))]): "read"}
        sync = a.send(42, [(1, 0)])
        answers = {}
        while True:
            rid, status, error, bodies = a.receive()
            if rid == sync:
                break
            answers[pending[rid]] = (status, error, bodies)
        self.assertEqual(answers, {}, "A's DMA ended before the free was sent; the test proves nothing")
        # Context B frees it by its address: answered once A's DMA ended,
        # so A's answers are already on A's socket.
        b = self.tenant_api()
        status, error, body = b.call_raw(41, [(1, 0), (2, addr)])
        self.assertEqual((status, error, h.pb_uint(body or {}, 1)), (0, "", size))
        readable, _, _ = select.select([a.sock], [], [], 0)
        self.assertTrue(readable, "B's free was answered while A's DMA still held the memory")
        while len(answers) < 2:
            rid, status, error, bodies = a.receive()
            answers[pending[rid]] = (status, error, bodies)
        self.assertEqual([(k, v[0], v[1]) for k, v in sorted(answers.items())], [("bench", 0, ""), ("read", 0, "")])
        self.assertEqual(answers["read"][2][31][1][-1], pattern, "A's read returned other bytes than it wrote")
        self.assertNotIn(addr, self.listed())

    def test_no_context_frees_or_reaches_a_running_jobs_buffers_and_its_result_is_intact(self):
        base = self.hbm_used()
        p = self.tenant_popen(*self.RUN_GEMM)  # context A
        bufs = h.wait_until("context A's job holding its buffers", lambda: [
            a for a in self.listed().values() if a["owner_kind"] == "job"], lambda v: len(v) == 3, 60)
        job_id = bufs[0]["owner_id"]
        c = self.tenant_api()  # context B
        for buf in bufs:
            addr = buf["addr"]
            with self.subTest(buffer=hex(addr)):
                self.assert_denied(c.call_raw(41, [(1, 0), (2, addr)]),
                                   f"chip 0: the allocation at {hex(addr)} is a buffer of job {job_id}; "
                                   "it is freed when the job ends")
                job_buffer = f"reaches the allocation at {hex(addr)}, a buffer of job {job_id}; " \
                             "only the job reaches it until it ends"
                self.assert_denied(c.call_raw(30, [(1, 0), (2, addr), (3, b"\xff" * 4096)]),
                                   f"chip 0: DMA write to {hex(addr)} + 4096 {job_buffer}")
                self.assert_denied(c.call_raw(31, [(1, 0), (2, addr), (3, 64)]),
                                   f"chip 0: DMA read of {hex(addr)} + 64 {job_buffer}")
        self.assert_denied(c.dma_copy_raw(0, src_addr=bufs[0]["addr"], dst_addr=bufs[1]["addr"], length=64),
                           f"chip 0: DMA copy from {hex(bufs[0]['addr'])} + 64 reaches the allocation at "
                           f"{hex(bufs[0]['addr'])}, a buffer of job {job_id}")
        out = bufs[-1]["addr"]
        # What a user sees.
        self.assert_one_error_line(self.tenant("mem", "free", 0, hex(out)), h.EXIT_PERMISSION_DENIED,
                                   f"chip 0: the allocation at {hex(out)} is a buffer of job {job_id}; "
                                   "it is freed when the job ends")
        self.assert_one_error_line(self.tenant("mem", "write", 0, hex(out), "--pattern", 1, "--length", "4K"),
                                   h.EXIT_PERMISSION_DENIED, f"a buffer of job {job_id}",
                                   "only the job reaches it until it ends")
        self.assertIn(job_id, [j["id"] for j in self.tenant_json("jobs", "--active")["jobs"]],
                      "the job ended before the other context tried its buffers; the test proves nothing")
        stdout, stderr = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, stderr)
        doc = json.loads(stdout)
        self.assertTrue(doc["verified"], doc)
        h.wait_until("the job's HBM freed", self.hbm_used, lambda used: used == base, 30)


if __name__ == "__main__":
    h.main()
