"""Integration: jobs on the NeuronCores of a real 2-chip board under QEMU,
driven through the vtrn CLI.

Numerics: GEMM in every dtype (fp32, bf16, fp8-e4m3, fp8-e5m2, mxfp4), on the
tensor engines (the default) and on the cores (`--engine cores`), and the
elementwise and reduction kernels, each verified by `vtrn run` against the
host reference (the GEMM error bound of kernels_reference.h; the host build
of the same kernels otherwise), with and without NaN and infinities in the
inputs, and once more per dtype (NaN and infinities included) by this
test's own reference, which shares no code with vtrn (gemm_ref.py): a job
file of operands made here, its C read back from the output file and
compared element by element. Then a human-written job file whose output
this test checks itself, multi-core execution, cancellation, timeout, a
client that disconnects, an injected tensor-engine fault (the job fails
naming it), several clients at once, and bad input that must
be rejected before anything runs with a message naming the field. The HBM
the jobs held must be free again afterwards.

Shapes are small: TCG runs a GEMM at a few hundred MFLOP/s, and the whole
suite must stay fast. The long jobs that cancellation and timeouts need take
zero-filled inputs (nothing to upload) and are cut short by the test.
"""

import json
import math
import os
import random
import signal
import struct
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_ref  # noqa: E402
import vtrn_harness as h  # noqa: E402

DTYPES = gemm_ref.DTYPES

LONG_JOB = h.LONG_GEMM_JOB
ENGINES = ("tensor", "cores")


class Jobs(h.BoardTestCase):
    session_name = "jobs"
    up_args = ("--chips", 2)

    @classmethod
    def board_ready(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vtrn-jobfiles-", dir=cls.s.tmp)
        cls.cores = cls.s.vtrn_json("info", 0)["neuron_cores"]

    def job_file(self, doc, name="job.json"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def run_json(self, *args, timeout=120):
        r = self.s.vtrn("run", *args, "--json", timeout=timeout)
        self.assertEqual(r.returncode, 0, f"vtrn run {' '.join(map(str, args))}: {r.stderr}")
        return json.loads(r.stdout)

    def job(self, job_id):
        return self.s.vtrn_json("job", "show", job_id)

    def wait_state(self, job_id, states, timeout=60):
        return h.wait_until(f"job {job_id} in {states}", lambda: self.job(job_id),
                            lambda j: j["state"] in states, timeout)

    def submit_detached(self, doc, name):
        doc = self.s.vtrn_json("submit", self.job_file(doc, name))
        return doc["job"]["id"]

    def hbm_used(self, chip):
        # Asked from the chip's allocator now, not from the last telemetry period.
        return self.s.vtrn_json("mem", "stats", chip)["used_bytes"]

    def assert_no_active_jobs(self):
        h.wait_until("no active jobs", lambda: self.s.vtrn_json("jobs", "--active")["jobs"],
                     lambda jobs: not jobs, timeout=30)

    def gemm_job_checked_here(self, dtype, m, n, k, seed, specials=False, engine="default"):
        """A GEMM job file whose operands this test made, submitted with
        `vtrn submit --wait`; its C read back from the output file and
        compared with gemm_ref, which shares no code with vtrn."""
        rng = random.Random(seed)
        a = gemm_ref.random_operand(rng, dtype, m, k, specials)
        b = gemm_ref.random_operand(rng, dtype, n, k, specials)
        tag = f"{dtype}-{seed}-{engine}"
        buffers = []
        for name, blob in (("a", a.data), ("b", b.data), ("a_scales", a.scales), ("b_scales", b.scales)):
            if blob:
                with open(os.path.join(self.tmp, f"{tag}-{name}.bin"), "wb") as f:
                    f.write(blob)
                buffers.append({"name": name, "file": f"{tag}-{name}.bin"})
        buffers.append({"name": "c", "bytes": m * n * 4, "output": f"{tag}-c.bin"})
        step = {"kernel": "gemm", "dtype": dtype, "m": m, "n": n, "k": k, "a": "a", "b": "b", "out": "c"}
        if a.scales:
            step.update(a_scales="a_scales", b_scales="b_scales")
        doc = self.s.vtrn_json("submit", self.job_file({"name": f"gemm-{tag}", "buffers": buffers, "engine": engine,
                                                        "steps": [step]}, f"{tag}.json"), "--wait")
        self.assertEqual(doc["job"]["state"], "DONE", doc)
        self.assertEqual(doc["job"]["engine"], "tensor" if engine == "default" else engine, doc)
        with open(os.path.join(self.tmp, f"{tag}-c.bin"), "rb") as f:
            c = gemm_ref.f32_values(f.read())
        self.assertEqual(len(c), m * n)
        checked, bad = gemm_ref.check_gemm(a, b, c, m, n, k)
        self.assertEqual(checked, m * n)
        self.assertEqual(bad[:5], [], f"{len(bad)} of {checked} elements wrong (i, j, got, want, bound)")
        return a, b, c

    # Numerics.

    def test_gemm_matches_the_reference_in_every_dtype(self):
        for engine in ENGINES:
            for dtype in DTYPES:
                with self.subTest(engine=engine, dtype=dtype):
                    doc = self.run_json("gemm", "--m", 40, "--n", 24, "--k", 96, "--dtype", dtype, "--seed", 11,
                                        "--engine", engine)
                    self.assertTrue(doc["verified"], doc)
                    self.assertEqual(doc["job"]["state"], "DONE")
                    self.assertEqual(doc["job"]["engine"], engine)
                    self.assertEqual(doc["check"]["elements"], 40 * 24, "the CLI compared every element")
                    self.assertEqual(doc["check"]["bad"], 0)
                    self.assertLessEqual(doc["check"]["max_bound_ratio"], 1.0)
                    self.assertEqual(doc["job"]["flops"], 2 * 40 * 24 * 96)
                    self.assertGreater(doc["job"]["chip_run_ns"], 0)
                    self.assertGreater(doc["job"]["chip_modeled_ns"], 0)

    def test_gemm_job_output_matches_the_tests_own_reference_in_every_dtype(self):
        for engine in ("default", "cores"):
            for dtype in DTYPES:
                with self.subTest(engine=engine, dtype=dtype):
                    self.gemm_job_checked_here(dtype, 12, 20, 64, seed=21, engine=engine)

    def test_gemm_special_values_follow_the_formats(self):
        # NaN and +-inf in A and B: where the format has them they reach C
        # as IEEE says (the reference decodes the same bits); E4M3 saturates
        # inf, E2M1 has none and the MX block gets the NaN scale.
        for engine in ENGINES:
            for dtype in DTYPES:
                with self.subTest(engine=engine, dtype=dtype):
                    doc = self.run_json("gemm", "--m", 8, "--n", 8, "--k", 64, "--dtype", dtype, "--seed", 3,
                                        "--specials", "--engine", engine)
                    self.assertTrue(doc["verified"], doc)
                    self.assertEqual(doc["check"]["elements"], 8 * 8, "the CLI compared every element")
                    self.assertEqual(doc["check"]["bad"], 0)

    def test_gemm_special_values_checked_here_in_every_dtype(self):
        for engine in ("default", "cores"):
            for dtype in DTYPES:
                with self.subTest(engine=engine, dtype=dtype):
                    a, b, c = self.gemm_job_checked_here(dtype, 8, 8, 64, seed=31, specials=True, engine=engine)
                    # The specials reached C: the check above covered NaN (and,
                    # where the format has them, infinities), not only finite sums.
                    self.assertTrue(any(math.isnan(x) for x in c), f"{dtype}: no NaN reached C")

    def test_elementwise_and_reductions_match_the_host_kernels(self):
        for kernel in ("add", "mul", "gelu", "softmax", "sum"):
            for specials in (False, True):
                with self.subTest(kernel=kernel, specials=specials):
                    args = [kernel, "--m", 16, "--n", 100, "--seed", 5] + (["--specials"] if specials else [])
                    doc = self.run_json(*args)
                    self.assertTrue(doc["verified"], doc)
                    self.assertEqual(doc["check"]["elements"], 16 if kernel == "sum" else 16 * 100)
                    self.assertEqual(doc["check"]["bad"], 0)

    def test_gemm_runs_on_the_cores_it_is_given(self):
        self.assertGreaterEqual(self.cores, 2, "the default board has several NeuronCores per chip")
        one = self.run_json("gemm", "--m", 256, "--n", 64, "--k", 64, "--cores", 1, "--seed", 1, "--engine", "cores")
        self.assertEqual(one["job"]["cores_used"], 1)
        every = self.run_json("gemm", "--m", 256, "--n", 64, "--k", 64, "--seed", 1, "--engine", "cores")
        # Every free core takes a share of the rows (the firmware may keep
        # the serving core out of it).
        self.assertGreater(every["job"]["cores_used"], 1)
        self.assertLessEqual(every["job"]["cores_used"], self.cores)
        self.assertTrue(one["verified"] and every["verified"])
        self.assertEqual((one["job"]["engine"], one["job"]["engines_used"]), ("cores", 0))

    def test_gemm_runs_on_the_tensor_engines_by_default_and_as_many_as_given(self):
        # One tensor engine per NeuronCore; --cores limits the engines too.
        every = self.run_json("gemm", "--m", 256, "--n", 64, "--k", 64, "--seed", 1)
        self.assertEqual(every["job"]["engine"], "tensor")
        self.assertEqual(every["job"]["engines_used"], self.cores)
        self.assertEqual(every["job"]["cores_used"], 0, "a job of GEMM steps takes no NeuronCore")
        one = self.run_json("gemm", "--m", 256, "--n", 64, "--k", 64, "--seed", 1, "--cores", 1)
        self.assertEqual(one["job"]["engines_used"], 1)
        self.assertTrue(one["verified"] and every["verified"])
        # Modeled silicon time: far below what this host took, and beside it.
        for d in (one, every):
            self.assertGreater(d["job"]["chip_modeled_ns"], 0)
            self.assertLess(d["job"]["chip_modeled_ns"], d["job"]["chip_run_ns"])
            self.assertGreater(d["job"]["engine_wall_ns"], 0)
        # One engine does all the rows; several split them, and the step takes the busiest one's time.
        self.assertGreater(one["job"]["chip_modeled_ns"], every["job"]["chip_modeled_ns"])
        r = self.s.vtrn("jobs")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MODELED", r.stdout)
        self.assertIn(f"tensor x{self.cores}", r.stdout)

    def test_tensor_gemm_then_core_steps_in_one_job(self):
        # GEMM on the engines, then add and sum on the cores, over the same HBM.
        m, n, k = 4, 3, 2
        a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # 4 x 2
        b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]            # 3 x 2
        path = self.job_file({
            "name": "mixed", "engine": "tensor",
            "buffers": [{"name": "a", "values": a}, {"name": "b", "values": b},
                        {"name": "c", "bytes": m * n * 4}, {"name": "d", "bytes": m * n * 4},
                        {"name": "r", "bytes": m * 4, "output": "mixed-rows.bin"}],
            "steps": [{"kernel": "gemm", "dtype": "fp32", "m": m, "n": n, "k": k, "a": "a", "b": "b", "out": "c"},
                      {"kernel": "add", "m": m, "n": n, "a": "c", "b": "c", "out": "d"},
                      {"kernel": "sum", "m": m, "n": n, "a": "d", "out": "r"}],
        }, "mixed.json")
        doc = self.s.vtrn_json("submit", path, "--wait")
        self.assertEqual((doc["job"]["state"], doc["job"]["engine"]), ("DONE", "tensor"), doc)
        self.assertGreaterEqual(doc["job"]["cores_used"], 1)
        with open(os.path.join(self.tmp, "mixed-rows.bin"), "rb") as f:
            rows = list(struct.unpack("<4f", f.read()))
        # C row i = (a0, a1, a0 + a1); d = 2c; its row sum = 4 (a0 + a1).
        self.assertEqual(rows, [4 * (a[2 * i] + a[2 * i + 1]) for i in range(m)])

    # Job files.

    def test_job_file_with_host_files_runs_and_writes_its_output(self):
        x = [1.5, -2.0, 3.25, 0.0, 7.0, -0.5]
        with open(os.path.join(self.tmp, "y.bin"), "wb") as f:
            f.write(struct.pack("<6f", *[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]))
        out = os.path.join(self.tmp, "sum.bin")
        path = self.job_file({
            "name": "file-demo",
            "buffers": [{"name": "x", "values": x}, {"name": "y", "file": "y.bin"},
                        {"name": "s", "bytes": 24, "output": "sum.bin"}, {"name": "r", "bytes": 8,
                                                                           "output": "rows.bin"}],
            "steps": [{"kernel": "add", "m": 2, "n": 3, "a": "x", "b": "y", "out": "s"},
                      {"kernel": "sum", "m": 2, "n": 3, "a": "s", "out": "r"}],
        }, "file-demo.json")
        # An output that is a symlink is replaced, never written through.
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "wb") as f:
            f.write(b"precious")
        rows = os.path.join(self.tmp, "rows.bin")
        if os.path.lexists(rows):
            os.unlink(rows)
        os.symlink(victim, rows)
        doc = self.s.vtrn_json("submit", path, "--wait")
        self.assertEqual(doc["job"]["state"], "DONE")
        self.assertEqual(doc["job"]["kernels"], ["add", "sum"])
        with open(out, "rb") as f:
            self.assertEqual(list(struct.unpack("<6f", f.read())), [11.5, 18.0, 33.25, 40.0, 57.0, 59.5])
        self.assertFalse(os.path.islink(rows))
        with open(rows, "rb") as f:
            self.assertEqual(list(struct.unpack("<2f", f.read())), [62.75, 156.5])
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        self.assertEqual([n for n in os.listdir(self.tmp) if ".vtrn-" in n], [])

    def test_bad_job_files_are_rejected_naming_the_field_before_anything_runs(self):
        before = len(self.s.vtrn_json("jobs")["jobs"])
        good_step = {"kernel": "add", "m": 2, "n": 2, "a": "x", "b": "y", "out": "z"}
        bufs = [{"name": "x", "bytes": 16}, {"name": "y", "bytes": 16}, {"name": "z", "bytes": 16}]
        cases = [
            ("{not json", "not valid JSON"),
            ({"buffers": bufs, "steps": [dict(good_step, kernel="gemm", dtype="fp16", k=2)]},
             "/steps/0/dtype: unknown dtype 'fp16'"),
            ({"buffers": bufs, "steps": [dict(good_step, kernel="conv")]}, "/steps/0/kernel: unknown kernel 'conv'"),
            ({"buffers": bufs, "steps": [dict(good_step, n=3)]}, "/steps/0/a: buffer 'x' holds 16 bytes"),
            ({"buffers": bufs, "steps": [dict(good_step, b="w")]}, "/steps/0/b: no buffer named 'w'"),
            ({"buffers": bufs, "steps": [dict(good_step, colour="red")]}, "/steps/0/colour: unknown field"),
            ({"buffers": bufs + [{"name": "x", "bytes": 4}], "steps": [good_step]}, "/buffers/3/name: 'x' is used twice"),
            ({"buffers": [{"name": "q", "bytes": 1 << 20, "output": "q.bin"}, {"name": "x", "bytes": 4}],
              "steps": [{"kernel": "gemm", "dtype": "mxfp4", "m": 1, "n": 1, "k": 33, "a": "x", "b": "x", "out": "q"}]},
             "/steps/0/k: 33 is not a multiple of 32"),
        ]
        for i, (doc, needle) in enumerate(cases):
            with self.subTest(case=i):
                r = self.s.vtrn("submit", self.job_file(doc, f"bad{i}.json"), "--wait")
                self.assert_one_error_line(r, h.EXIT_FAILED, needle)
        # Too large for HBM: valid shapes, rejected by vtrnd before any allocation.
        big = {"buffers": [{"name": "x", "bytes": 2 ** 34}, {"name": "z", "bytes": 2 ** 34}],
               "steps": [{"kernel": "gelu", "m": 65536, "n": 65536, "a": "x", "out": "z"}]}
        r = self.s.vtrn("submit", self.job_file(big, "big.json"), "--wait")
        self.assert_one_error_line(r, h.EXIT_FAILED, "buffers[0].bytes", "HBM")
        self.assertEqual(len(self.s.vtrn_json("jobs")["jobs"]), before, "a rejected job must not exist")

    # Lifecycle.

    def test_cancel_ends_a_running_job_and_frees_its_hbm(self):
        for long_job in (LONG_JOB, h.LONG_TENSOR_JOB):
            with self.subTest(engine=long_job["engine"]):
                base = self.hbm_used(0)
                job_id = self.submit_detached(dict(long_job, timeout_ms=120000), "long-cancel.json")
                self.wait_state(job_id, ("RUNNING",))
                # The answer comes when the job has ended (the CLI's own bound is the
                # subprocess timeout here); how long that takes is a figure of
                # tests/bench/board/board_bench.py.
                doc = self.s.vtrn_json("job", "cancel", job_id, timeout=60)
                self.assertEqual(doc["state"], "CANCELLED", doc)
                self.assertIn("cancelled", doc["reason"])
                self.assert_no_active_jobs()
                # The job's buffers are freed once nothing of it is in flight, which
                # may be just after the cancel answer.
                h.wait_until("the cancelled job's HBM freed", lambda: self.hbm_used(0), lambda used: used == base, 30)
                # Cancelling an ended job is not an error; it shows how it ended.
                self.assertEqual(self.s.vtrn_json("job", "cancel", job_id)["state"], "CANCELLED")

    def test_a_running_jobs_buffers_are_freed_by_no_request_only_by_its_end(self):
        # Issue 15: an executor may be writing a running job's buffers, so no
        # client frees them, not even a connection of the tenant that
        # submitted the job (all test clients are one uid) naming them.
        base = self.hbm_used(0)
        job_id = self.submit_detached(dict(LONG_JOB, timeout_ms=120000), "long-pinned.json")
        try:
            self.wait_state(job_id, ("RUNNING",))
            mine = [a for a in self.s.vtrn_json("mem", "ls", 0)["allocations"]
                    if a["owner_kind"] == "job" and a["owner_id"] == job_id]
            self.assertTrue(mine, f"job {job_id} holds no HBM while it runs")
            for a in mine:
                r = self.s.vtrn("mem", "free", 0, hex(a["addr"]))
                self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED, f"buffer of job {job_id}",
                                           "it is freed when the job ends")
            self.assertEqual(self.job(job_id)["state"], "RUNNING")
            self.assertEqual(self.hbm_used(0) - base, sum(a["bytes"] for a in mine))
        finally:
            self.s.vtrn_json("job", "cancel", job_id, timeout=60)
        h.wait_until("the cancelled job's HBM freed", lambda: self.hbm_used(0), lambda used: used == base, 30)

    def test_job_past_its_timeout_ends_timed_out(self):
        for long_job in (LONG_JOB, h.LONG_TENSOR_JOB):
            with self.subTest(engine=long_job["engine"]):
                path = self.job_file(dict(long_job, timeout_ms=400), "long-timeout.json")
                r = self.s.vtrn("submit", path, "--wait", "--json", timeout=60)
                self.assertEqual(r.returncode, h.EXIT_TIMEOUT, r.stderr)
                self.assertEqual(json.loads(r.stdout)["job"]["state"], "TIMED_OUT")
                self.assert_no_active_jobs()

    def test_client_that_disconnects_has_its_job_cancelled(self):
        path = self.job_file(dict(LONG_JOB, timeout_ms=120000), "long-gone.json")
        p = self.s.popen("submit", path, "--wait")
        try:
            running = h.wait_until(
                "the job to run",
                lambda: [j for j in self.s.vtrn_json("jobs", "--active")["jobs"]
                         if j["name"] == "long" and j["state"] == "RUNNING"],
                bool, 60)
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()
        j = self.wait_state(running[0]["id"], ("CANCELLED", "DONE", "FAILED", "TIMED_OUT"))
        self.assertEqual((j["state"], j["reason"]), ("CANCELLED", "client_gone"))

    def test_chip_reset_fails_the_jobs_it_held_with_the_reason(self):
        for long_job in (LONG_JOB, h.LONG_TENSOR_JOB):
            with self.subTest(engine=long_job["engine"]):
                job_id = self.submit_detached(dict(long_job, chip=1, timeout_ms=120000), "long-reset.json")
                self.wait_state(job_id, ("RUNNING",))
                r = self.s.vtrn("reset", 1, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                j = self.wait_state(job_id, ("FAILED", "CANCELLED", "DONE", "TIMED_OUT"))
                self.assertEqual(j["state"], "FAILED")
                self.assertIn("chip reset", j["reason"])
                # The chip takes new work after it is READY again, on the
                # engines too (the boot reset them).
                doc = self.run_json("gemm", "--m", 16, "--n", 16, "--k", 32, "--chip", 1)
                self.assertTrue(doc["verified"], doc)
                self.assertEqual(doc["job"]["engine"], "tensor")

    def test_injected_tensor_engine_fault_fails_the_job_naming_it(self):
        r = self.s.vtrn("inject", "tensor-engine", 0, "--engine", 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tensor engine 0 fails its next command", r.stdout)
        # One engine: the first tile goes to engine 0 and fails; nothing of the job is lost.
        r = self.s.vtrn("run", "gemm", "--m", 64, "--n", 32, "--k", 32, "--cores", 1, "--seed", 2)
        self.assert_one_error_line(r, h.EXIT_FAILED, "FAILED", "steps[0]: tensor engine 0: injected fault (status 9)")
        failed = [j for j in self.s.vtrn_json("jobs", 0)["jobs"] if j["state"] == "FAILED"][-1]
        self.assertEqual((failed["engine"], failed["failed_step"]), ("tensor", 0))
        self.assertIn("injected fault", failed["reason"])
        # The fault fired once: the engine runs the next job.
        self.assertTrue(self.run_json("gemm", "--m", 64, "--n", 32, "--k", 32, "--cores", 1)["verified"])
        # An engine the chip does not have is refused by the firmware, naming the field.
        r = self.s.vtrn("inject", "tensor-engine", 0, "--engine", 7)
        self.assert_one_error_line(r, h.EXIT_FAILED, "engine: 7, but this chip has", "tensor engines")

    def test_several_clients_submit_at_once_and_all_verify(self):
        results, errors = [], []

        def one(i):
            r = self.s.vtrn("run", "gemm", "--m", 32, "--n", 32, "--k", 64, "--dtype", DTYPES[i % len(DTYPES)],
                            "--chip", i % 2, "--seed", 100 + i, "--json", timeout=180)
            if r.returncode != 0:
                errors.append(r.stderr)
            else:
                results.append(json.loads(r.stdout))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 6)
        self.assertTrue(all(d["verified"] for d in results))
        self.assertEqual(len({d["job"]["id"] for d in results}), 6, "job ids are unique per vtrnd")

    def test_telemetry_reports_jobs_and_latency(self):
        self.run_json("gemm", "--m", 16, "--n", 16, "--k", 32)
        t = self.s.vtrn_json("telemetry", 0)["chips"][0]
        self.assertGreater(t["jobs_completed"], 0)
        self.assertGreater(t["jobs_submitted"], 0)
        self.assertGreater(t["job_latency_p50_ns"], 0)
        self.assertLessEqual(t["job_latency_p50_ns"], t["job_latency_p99_ns"])
        listed = self.s.vtrn_json("jobs", 0)["jobs"]
        self.assertTrue(listed and all(j["chip"] == 0 for j in listed))


if __name__ == "__main__":
    h.main()
