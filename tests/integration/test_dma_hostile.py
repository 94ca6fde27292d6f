"""Integration: hostile DMA descriptors under real QEMU. vtrnd runs with
VTRN_ALLOW_RAW_DMA=1, so a raw DmaCopy reaches the device exactly as written:
addresses outside the host window or HBM, HBM outside every live
allocation, a page retired by an uncorrectable ECC error, zero and
oversized lengths, address + length wrapping, unknown flag bits, chains too
long, never terminated or never started, overlapping source and
destination. Each must complete with its documented status
(include/vtrn/dma_abi.h), be counted under that status on the queue it ran
on, and leave the chip READY with that queue and the others still moving
data correctly. A chain in flight when its queue latches a ring-protocol
error ends QUEUE_BROKEN, one in flight when its queue is reset ends RESET
(the chip is held in D3hot so the chain is surely still in flight); ring
index faults (submission index jump or backwards, completion consumer
ahead) latch only their queue until it is reset. The checks the host makes
before anything reaches the device (CLI and vtrnd validation) are covered
too.

DMA is checked against live allocations, as in production: the in-HBM
addresses of the cases lie in an allocation the class holds, and
NOT_ALLOCATED is one of the cases.

Not a fuzzer (tests/fuzz has those): one precise case per status.
"""

import json
import os
import random
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

MiB = 1 << 20

# vtrn::dma::Status and the names vtrnd gives them (driver dma_status_name).
OK, ZERO_LENGTH, TOO_LONG, ADDR_OVERFLOW, SRC_RANGE, DST_RANGE, BAD_FLAGS = 0, 1, 2, 3, 4, 5, 6
CHAIN_TOO_LONG, CHAIN_UNTERMINATED, CHAIN_NO_FIRST, NOT_ALLOCATED, ECC, OVERLAP = 7, 8, 9, 10, 11, 12
QUEUE_BROKEN, RESET, ENGINE_FAULT = 13, 14, 15
NAMES = {OK: "ok", ZERO_LENGTH: "zero length", TOO_LONG: "descriptor too long",
         ADDR_OVERFLOW: "address + length overflows", SRC_RANGE: "src out of range", DST_RANGE: "dst out of range",
         BAD_FLAGS: "unknown flags", CHAIN_TOO_LONG: "chain too long", CHAIN_UNTERMINATED: "chain unterminated",
         CHAIN_NO_FIRST: "descriptor outside a chain", NOT_ALLOCATED: "HBM range not allocated",
         ECC: "HBM range has a retired page", OVERLAP: "src and dst overlap", QUEUE_BROKEN: "queue broken",
         RESET: "queue reset", ENGINE_FAULT: "DMA engine fault"}
# dma_abi.h QueueError and the DmaInject faults that provoke them.
SQ_INDEX_JUMP, SQ_INDEX_BACKWARD, CQ_CONSUMER_AHEAD = 1, 2, 3
DESC_FIRST, DESC_LAST = 1 << 0, 1 << 1
MAX_DESC_BYTES = 16 * MiB
REGION = 16 * MiB  # the allocation the in-HBM cases use, per chip


class DmaHostileInput(h.BoardTestCase):
    session_name = "dmahostile"
    up_args = ("--chips", 2)

    def test_host_queues_are_served_by_the_copy_engine_asked_for(self):
        self.assertEqual(h.copy_engine_problems(self.s, (0, 1)), [])
    up_env = {"VTRN_ALLOW_RAW_DMA": "1"}

    @classmethod
    def board_ready(cls):
        cls.holder = h.ApiClient(cls.s)
        cls.st = cls.holder.dma_stats(0)
        cls.hbm_base, cls.size = cls.st["hbm_base"], cls.st["hbm_size"]
        cls.window = cls.st["window_bytes"]
        cls.nq = len(cls.st["queues"])
        cls.rng = random.Random(0xBAD)
        # HBM the cases may touch, held by this connection for the class.
        cls.base = {chip: h.hbm_alloc(cls.holder, chip, REGION)[0] for chip in (0, 1)}
        # An allocation with a retired page: DMA to any of it ends ECC.
        hole, _ = h.hbm_alloc(cls.holder, 0, MiB)
        cls.poisoned, _ = h.hbm_alloc(cls.holder, 0, MiB)
        cls.holder.call(44, [(1, 0), (2, cls.poisoned + 3), (3, 1)])
        # HBM no allocation covers: allocated, then freed again (nothing in
        # this class allocates after this).
        h.hbm_free(cls.holder, 0, hole)
        cls.unallocated = hole

    @classmethod
    def end_of_class_problems(cls):
        # Raw chains may leave descriptors outstanding by design of the
        # test (test_raw_chain_is_not_left_in_flight checks that on its
        # own); a reset of every queue is the documented way to clear them.
        with h.ApiClient(cls.s) as c:
            for chip in (0, 1):
                c.dma_reset(chip, -1)
        cls.holder.close()
        return h.board_health_problems(cls.s, (0, 1))

    def cases(self):
        """(what, DmaCopy fields, status of the chain vtrnd waits for, status
        counted on the queue, completions the device writes)."""
        b, lo, end, w = self.base[0], self.hbm_base, self.hbm_base + self.size, self.window
        hbm, host = h.DMA_SPACE_HBM, h.DMA_SPACE_HOST
        return [
            ("zero length", dict(src_addr=b, dst_addr=b + MiB, length=0), ZERO_LENGTH, ZERO_LENGTH, 1),
            ("descriptor over 16 MiB", dict(src_addr=b, dst_addr=b + 32 * MiB, length=MAX_DESC_BYTES + 1),
             TOO_LONG, TOO_LONG, 1),
            ("src address + length wraps", dict(src_addr=(1 << 64) - 64, dst_addr=b, length=128),
             ADDR_OVERFLOW, ADDR_OVERFLOW, 1),
            ("dst address + length wraps", dict(src_addr=b, dst_addr=(1 << 64) - 1, length=2),
             ADDR_OVERFLOW, ADDR_OVERFLOW, 1),
            ("src below HBM", dict(src_addr=lo - 4096 if lo >= 4096 else 0, dst_addr=b, length=64),
             SRC_RANGE, SRC_RANGE, 1),
            ("src runs past the end of HBM", dict(src_addr=end - 32, dst_addr=b, length=64), SRC_RANGE, SRC_RANGE, 1),
            ("src past the host window", dict(src_space=host, src_addr=w, dst_addr=b, length=64),
             SRC_RANGE, SRC_RANGE, 1),
            ("dst at the end of HBM", dict(src_addr=b, dst_addr=end, length=1), DST_RANGE, DST_RANGE, 1),
            ("dst runs past the host window", dict(src_addr=b, dst_space=host, dst_addr=w - 16, length=64),
             DST_RANGE, DST_RANGE, 1),
            ("src in HBM outside every allocation", dict(src_addr=self.unallocated, dst_addr=b, length=64),
             NOT_ALLOCATED, NOT_ALLOCATED, 1),
            ("dst in HBM outside every allocation", dict(src_addr=b, dst_addr=self.unallocated + 4096, length=64),
             NOT_ALLOCATED, NOT_ALLOCATED, 1),
            ("src in an allocation with a retired page", dict(src_addr=self.poisoned + 4096, dst_addr=b, length=64),
             ECC, ECC, 1),
            ("unknown flag bit", dict(src_addr=b, dst_addr=b + MiB, length=64, extra_flags=1 << 20),
             BAD_FLAGS, BAD_FLAGS, 1),
            ("unknown flag bit on one descriptor of three",
             dict(src_addr=b, dst_addr=b + MiB, length=96, segments=3, extra_flags=1 << 31), BAD_FLAGS, BAD_FLAGS, 1),
            ("chain of 65 descriptors", dict(src_addr=b, dst_addr=b + MiB, length=65 * 64, segments=65),
             CHAIN_TOO_LONG, CHAIN_TOO_LONG, 1),
            ("overlapping HBM ranges", dict(src_addr=b, dst_addr=b + 32, length=64), OVERLAP, OVERLAP, 1),
            ("identical HBM ranges", dict(src_addr=b + 4096, dst_addr=b + 4096, length=1), OVERLAP, OVERLAP, 1),
            ("overlapping host-window ranges", dict(src_space=host, src_addr=0, dst_space=host, dst_addr=63,
                                                    length=64), OVERLAP, OVERLAP, 1),
            # Every descriptor carries FIRST: the first chain is cut off by the
            # second, which is itself complete and succeeds.
            ("FIRST without LAST, then FIRST", dict(src_addr=b, dst_addr=b + MiB, length=128, segments=2,
                                                   extra_flags=DESC_FIRST), OK, CHAIN_UNTERMINATED, 2),
            # Every descriptor carries LAST: the first is a whole chain and
            # succeeds, the second belongs to no chain.
            ("LAST, then a descriptor without FIRST", dict(src_addr=b, dst_addr=b + MiB, length=128, segments=2,
                                                          extra_flags=DESC_LAST),
             CHAIN_NO_FIRST, CHAIN_NO_FIRST, 2),
        ]

    def healthy_copy(self, c, chip, queue):
        """Write random bytes, chain-copy them on `queue`, read back: the
        queue still moves data correctly."""
        n = self.rng.randrange(1000, 300000)
        src = self.base[chip] + 2 * MiB + self.rng.randrange(1, 4096)
        dst = self.base[chip] + 3 * MiB + self.rng.randrange(1, 4096)
        data = self.rng.randbytes(n)
        c.dma_write(chip, src, data)
        st, err, cr = c.dma_copy_raw(chip, src_addr=src, dst_addr=dst, length=n, segments=4, queue=queue)
        self.assertEqual(st, h.API_STATUS_OK, err)
        self.assertEqual((cr["dma_status"], cr["bytes"], cr["queue"]), (OK, n, queue))
        back, _ = c.dma_read(chip, dst, n)
        self.assertEqual(back, data, f"chip {chip} queue {queue}: {n} bytes differ after the copy")

    def assert_ready(self):
        for chip in self.s.vtrn_json("ls")["chips"]:
            self.assertEqual((chip["state"], chip["error"]), ("READY", ""), f"chip {chip['id']}")

    def test_each_hostile_descriptor_completes_with_its_status_and_the_queue_keeps_working(self):
        with h.ApiClient(self.s) as c:
            for i, (what, fields, answer, counted, completions) in enumerate(self.cases()):
                q = i % self.nq
                with self.subTest(case=what, queue=q):
                    before = c.dma_stats(0)["queues"][q]
                    st, err, cr = c.dma_copy_raw(0, raw=True, queue=q, **fields)
                    self.assertEqual(st, h.API_STATUS_OK, err)
                    self.assertEqual((cr["dma_status"], cr["dma_status_name"], cr["queue"]), (answer, NAMES[answer], q))
                    after = c.dma_stats(0)["queues"][q]
                    self.assertEqual(after["errors_by_status"][counted] - before["errors_by_status"][counted], 1,
                                     f"{NAMES[counted]} not counted once on queue {q}")
                    self.assertEqual(after["errors"] - before["errors"], 1)
                    self.assertEqual(after["chains"] - before["chains"], completions)
                    self.assertEqual((after["device_error"], after["host_fault"]), (0, ""))
                    # Last: the device's count above is checked even if vtrnd
                    # miscounts what it reaped for the request.
                    self.assertEqual(cr["completions"], completions, "completions vtrnd reports for the request")
                    # The same queue and the next one still move data.
                    self.healthy_copy(c, 0, q)
                    self.healthy_copy(c, 0, (q + 1) % self.nq)
            self.healthy_copy(c, 1, 0)
        self.assert_ready()

    def test_chain_too_long_moves_only_the_first_64_descriptors(self):
        with h.ApiClient(self.s) as c:
            src, dst = self.base[0] + 8 * MiB, self.base[0] + 9 * MiB
            data = self.rng.randbytes(65 * 64)
            c.dma_write(0, src, data)
            c.dma_write(0, dst, bytes(65 * 64))
            st, err, cr = c.dma_copy_raw(0, raw=True, src_addr=src, dst_addr=dst, length=65 * 64, segments=65)
            self.assertEqual(st, h.API_STATUS_OK, err)
            self.assertEqual((cr["dma_status"], cr["bytes"]), (CHAIN_TOO_LONG, 64 * 64))
            back, _ = c.dma_read(0, dst, 65 * 64)
            self.assertEqual(back[:64 * 64], data[:64 * 64])
            self.assertEqual(back[64 * 64:], bytes(64), "the 65th descriptor was executed")

    def test_rejected_descriptor_writes_nothing_to_its_destination(self):
        with h.ApiClient(self.s) as c:
            src, dst = self.base[0] + 10 * MiB, self.base[0] + 11 * MiB
            c.dma_write(0, src, b"\xAA" * 256)
            c.dma_write(0, dst, b"\x55" * 256)
            st, err, cr = c.dma_copy_raw(0, raw=True, src_addr=src, dst_addr=dst, length=256, extra_flags=1 << 12)
            self.assertEqual((st, cr["dma_status"], cr["bytes"]), (h.API_STATUS_OK, BAD_FLAGS, 0), err)
            self.assertEqual(c.dma_read(0, dst, 256)[0], b"\x55" * 256)

    def test_queue_reset_clears_what_raw_chains_left_and_counts_in_stats(self):
        q = self.nq - 1
        with h.ApiClient(self.s) as c:
            # A chain of three raw descriptors completes once, at LAST.
            st, err, cr = c.dma_copy_raw(0, raw=True, queue=q, src_addr=self.base[0], dst_addr=self.base[0] + MiB,
                                         length=300, segments=3)
            self.assertEqual((st, cr["dma_status"]), (h.API_STATUS_OK, OK), err)
            before = c.dma_stats(0)["queues"][q]
        r = self.s.vtrn("dma", "reset", 0, "--queue", q, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"chip": 0, "queue": q, "queues_reset": 1})
        with h.ApiClient(self.s) as c:
            after = c.dma_stats(0)["queues"][q]
            self.assertEqual(after["resets"] - before["resets"], 1)
            self.assertEqual((after["in_flight"], after["device_error"], after["host_fault"], after["resetting"]),
                             (0, 0, "", False))
            self.assertEqual(after["free_slots"], self.st["depth"])
            self.healthy_copy(c, 0, q)
        r = self.s.vtrn("dma", "reset", 1, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["queues_reset"], self.nq)
        with h.ApiClient(self.s) as c:
            self.assertTrue(all(s["resets"] >= 1 for s in c.dma_stats(1)["queues"]))
            self.healthy_copy(c, 1, 0)
        self.assert_ready()

    def test_ring_index_violation_latches_only_that_queue_until_reset(self):
        for fault in (SQ_INDEX_JUMP, SQ_INDEX_BACKWARD, CQ_CONSUMER_AHEAD):
            q = fault % self.nq
            with self.subTest(fault=fault), h.ApiClient(self.s) as c:
                self.healthy_copy(c, 0, q)  # the device has consumed something
                st, err, _ = c.dma_inject(0, q, fault)
                self.assertEqual(st, h.API_STATUS_OK, err)
                if fault == CQ_CONSUMER_AHEAD:
                    # The device checks the consumer index when it next needs
                    # completion space: the next chain on the queue finds it
                    # broken and is flushed.
                    st, err, cr = c.dma_copy_raw(0, raw=True, queue=q, src_addr=self.base[0],
                                                 dst_addr=self.base[0] + MiB, length=64)
                    self.assertEqual((st, cr["dma_status"], cr["dma_status_name"]),
                                     (h.API_STATUS_OK, QUEUE_BROKEN, NAMES[QUEUE_BROKEN]), err)
                h.wait_until(f"queue {q} to latch", lambda: c.dma_stats(0)["queues"][q]["device_error"],
                             lambda e: e != 0, timeout=10, interval=0.01)
                stats = c.dma_stats(0)["queues"]
                self.assertEqual(stats[q]["device_error"], fault, f"queue {q} latched the wrong error")
                # Only that queue: the others and the other chip keep moving data.
                for other in range(self.nq):
                    if other != q:
                        self.assertEqual(stats[other]["device_error"], 0)
                        self.healthy_copy(c, 0, other)
                self.healthy_copy(c, 1, q)
                self.assertEqual(c.dma_reset(0, q), 1)
                after = c.dma_stats(0)["queues"][q]
                self.assertEqual((after["device_error"], after["host_fault"]), (0, ""))
                self.healthy_copy(c, 0, q)
        self.assert_ready()

    def copy_in_flight_on_a_suspended_chip(self, q, act):
        """A raw copy on queue q submitted while chip 0 sits in D3hot (the
        device serves no queue there, so the chain surely stays in
        flight), then act(client) and D0; returns the copy's answer."""
        answer = {}
        waiter = h.ApiClient(self.s)

        def copy():
            try:
                answer["r"] = waiter.dma_copy_raw(0, raw=True, queue=q, src_addr=self.base[0],
                                                  dst_addr=self.base[0] + MiB, length=4096)
            except Exception as e:  # noqa: BLE001 - reported by the test thread
                answer["error"] = e

        t = threading.Thread(target=copy)
        try:
            self.s.vtrn_json("power", 0, "--state", "d3")
            h.wait_until("D3hot", lambda: self.s.vtrn_json("telemetry", 0)["chips"][0]["power"]["device_state"],
                         lambda st: st == "D3hot", timeout=10)
            with h.ApiClient(self.s) as c:
                before = c.dma_stats(0)["queues"][q]["host_chains_submitted"]
                t.start()
                h.wait_until("the copy submitted to the ring",
                             lambda: c.dma_stats(0)["queues"][q]["host_chains_submitted"],
                             lambda n: n > before, timeout=10, interval=0.01)
                self.assertTrue(t.is_alive(), f"the copy was answered while the chip was in D3hot: {answer}")
                act(c)
        finally:
            self.s.vtrn("power", 0, "--state", "d0")
            t.join(timeout=60)
            waiter.close()
        self.assertFalse(t.is_alive(), "the copy was never answered")
        self.assertNotIn("error", answer)
        return answer["r"]

    def test_chain_in_flight_when_its_queue_breaks_ends_queue_broken(self):
        q = 1 % self.nq
        st, err, cr = self.copy_in_flight_on_a_suspended_chip(
            q, lambda c: self.assertEqual(c.dma_inject(0, q, SQ_INDEX_JUMP)[0], h.API_STATUS_OK))
        self.assertEqual((st, cr["dma_status"], cr["dma_status_name"]),
                         (h.API_STATUS_OK, QUEUE_BROKEN, NAMES[QUEUE_BROKEN]), err)
        with h.ApiClient(self.s) as c:
            queue = c.dma_stats(0)["queues"][q]
            self.assertEqual(queue["device_error"], SQ_INDEX_JUMP)
            self.assertEqual(c.dma_reset(0, q), 1)
            self.healthy_copy(c, 0, q)
        self.assert_ready()

    def test_chain_in_flight_when_its_queue_is_reset_ends_reset(self):
        q = 2 % self.nq
        resets = {}

        def reset(c):
            # The reset answers once the device acknowledges it, in D0: ask
            # from another thread so the chip can be woken meanwhile.
            def run():
                with h.ApiClient(self.s) as rc:
                    resets["n"] = rc.dma_reset(0, q)
            resets["t"] = threading.Thread(target=run)
            resets["t"].start()
            h.wait_until("the queue to start resetting", lambda: c.dma_stats(0)["queues"][q]["resetting"],
                         bool, timeout=10, interval=0.01)

        st, err, cr = self.copy_in_flight_on_a_suspended_chip(q, reset)
        resets["t"].join(timeout=60)
        self.assertEqual(resets.get("n"), 1, "the queue reset never answered")
        self.assertEqual((st, cr["dma_status"], cr["dma_status_name"]), (h.API_STATUS_OK, RESET, NAMES[RESET]), err)
        with h.ApiClient(self.s) as c:
            self.healthy_copy(c, 0, q)
        self.assert_ready()

    def dma_engines(self):
        """DMA engines serving chip 0's host queues (0: the CPU copier), from its log."""
        said = [l for l in self.s.vtrn_json("logs", 0)["lines"] if "copy engine: " in l][-1]
        m = re.search(r"copy engine: (\d+) DMA engines", said)
        return int(m.group(1)) if m else 0

    def test_injected_dma_engine_fault_fails_one_chain_with_its_status_and_a_logged_record(self):
        q = 1 % self.nq
        engines = self.dma_engines()
        engine = q % engines if engines else 0
        src, dst = self.base[0] + 5 * MiB, self.base[0] + 6 * MiB
        with h.ApiClient(self.s) as c:
            c.dma_write(0, src, os.urandom(8192))
            c.dma_write(0, dst, bytes(8192))
        r = self.s.vtrn("inject", "dma-engine", 0, "--engine", engine)
        if engines == 0:
            # The CPU copier serves the host queues: no DMA engine to break.
            self.assert_one_error_line(r, h.EXIT_FAILED, "not served by DMA engines")
            return
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"DMA engine {engine} fails the next descriptor it takes", r.stdout)
        with h.ApiClient(self.s) as c:
            before = c.dma_stats(0)["queues"][q]["errors_by_status"]
            st, err, cr = c.dma_copy_raw(0, queue=q, src_addr=src, dst_addr=dst, length=8192, segments=2)
            # A failed chain is a failed request (the chip's error), naming the status.
            self.assertEqual((st, cr["dma_status"], cr["dma_status_name"], cr["bytes"]),
                             (h.API_STATUS_CHIP_ERROR, ENGINE_FAULT, NAMES[ENGINE_FAULT], 0), err)
            self.assertIn(NAMES[ENGINE_FAULT], err)
            self.assertEqual(c.dma_read(0, dst, 8192)[0], bytes(8192), "the failed chain wrote its destination")
            after = c.dma_stats(0)["queues"][q]["errors_by_status"]
            self.assertEqual(after[ENGINE_FAULT], (before[ENGINE_FAULT] if len(before) > ENGINE_FAULT else 0) + 1)
            # Once: the queue and its engine work again.
            self.healthy_copy(c, 0, q)
        # Not lost silently: the firmware logged the engine's error record.
        h.wait_until("the error record in the chip's log",
                     lambda: [l for l in self.s.vtrn_json("logs", 0)["lines"]
                              if f"DMA engine {engine} queue {q}: injected fault (status {ENGINE_FAULT})" in l],
                     bool, timeout=10)
        # An engine that does not serve the host queues is refused, naming it.
        r = self.s.vtrn("inject", "dma-engine", 0, "--engine", 7)
        self.assert_one_error_line(r, h.EXIT_FAILED, "engine: 7, but", "DMA engines serve")
        self.assert_ready()

    def test_fault_injection_needs_raw_mode_and_a_real_queue(self):
        with h.ApiClient(self.s) as c:
            st, err, _ = c.dma_inject(0, self.nq, 1)
            self.assertEqual(st, h.API_STATUS_BAD_REQUEST)
            self.assertIn("no queue", err)
            st, err, _ = c.dma_inject(0, 0, 7)
            self.assertEqual(st, h.API_STATUS_BAD_REQUEST)
            self.assertIn("unknown fault", err)

    def test_raw_chain_is_not_left_in_flight_once_answered(self):
        # The device completes a chain once, at LAST; once vtrnd has answered
        # the request nothing of it may stay in flight on the queue.
        q = 1
        with h.ApiClient(self.s) as c:
            c.dma_reset(0, q)
            st, err, cr = c.dma_copy_raw(0, raw=True, queue=q, src_addr=self.base[0], dst_addr=self.base[0] + MiB,
                                         length=300, segments=3)
            self.assertEqual((st, cr["dma_status"], cr["completions"]), (h.API_STATUS_OK, OK, 1), err)
            after = c.dma_stats(0)["queues"][q]
        self.assertEqual((after["in_flight"], after["free_slots"]), (0, self.st["depth"]))

    def test_cli_refuses_a_zero_byte_copy(self):
        r = self.s.vtrn("dma", "copy", 0, "--size", 0)
        self.assert_one_error_line(r, h.EXIT_USAGE, "--size")

    def test_cli_refuses_hbm_addresses_outside_hbm_before_sending(self):
        lo = self.hbm_base
        end = lo + self.size
        for addr in (end, end - 100, lo - 1 if lo else (1 << 64) - 1):
            with self.subTest(addr=hex(addr)):
                r = self.s.vtrn("dma", "copy", 0, "--size", 4096, "--hbm-addr", hex(addr))
                self.assert_one_error_line(r, h.EXIT_FAILED, "do not fit in HBM")
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        r = self.s.vtrn("dma", "copy", 0, "--size", 4096, "--chain", 2, "--hbm-addr", hex(end - 6000))
        self.assert_one_error_line(r, h.EXIT_FAILED, "twice, for the chain")

    def test_cli_usage_errors_are_one_line_and_exit_2(self):
        for args in (("dma", "copy", 0, "--hbm-addr", "0x10zz"), ("dma", "copy", 0, "--chain", 65),
                     ("dma", "copy", 0, "--chain", 0), ("dma", "copy", "x"), ("dma", "reset", 0, "--queue", 16)):
            with self.subTest(args=args):
                r = self.s.vtrn(*args)
                self.assert_one_error_line(r, h.EXIT_USAGE)
        self.assert_one_error_line(self.s.vtrn("dma", "copy", 7, "--size", 64), h.EXIT_UNKNOWN_CHIP, "unknown chip 7")

    def test_vtrnd_refuses_invalid_validated_requests_before_the_device(self):
        b, lo = self.base[0], self.hbm_base
        with h.ApiClient(self.s) as c:
            before = c.dma_stats(0)
            for what, fields, needle in (
                    ("zero length", dict(src_addr=b, dst_addr=b + MiB, length=0), "zero length"),
                    ("dst outside HBM", dict(src_addr=b, dst_addr=lo + self.size, length=64), "dst out of range"),
                    ("overlap", dict(src_addr=b, dst_addr=b + 1, length=64), "src and dst overlap"),
                    ("65 segments", dict(src_addr=b, dst_addr=b + MiB, length=6500, segments=65), "chain limit"),
                    ("host space without raw", dict(src_space=h.DMA_SPACE_HOST, src_addr=0, dst_addr=b, length=64),
                     "only HBM -> HBM"),
                    ("extra flags without raw", dict(src_addr=b, dst_addr=b + MiB, length=64, extra_flags=1),
                     "extra_flags needs raw"),
                    ("no such queue", dict(src_addr=b, dst_addr=b + MiB, length=64, queue=self.nq), "no queue")):
                with self.subTest(case=what):
                    st, err, _ = c.dma_copy_raw(0, **fields)
                    self.assertEqual(st, h.API_STATUS_BAD_REQUEST, err)
                    self.assertIn(needle, err)
            for what, call in (("read over a frame", lambda: c.dma_read(0, b, 4 * MiB)),
                               ("write past HBM", lambda: c.dma_write(0, lo + self.size - 10, bytes(64))),
                               ("read below HBM", lambda: c.dma_read(0, lo - 64 if lo >= 64 else (1 << 64) - 64, 64))):
                with self.subTest(case=what), self.assertRaises(h.ApiError) as e:
                    call()
                self.assertEqual(e.exception.status, h.API_STATUS_BAD_REQUEST, e.exception.error)
            after = c.dma_stats(0)
        self.assertEqual([q["chains"] for q in after["queues"]], [q["chains"] for q in before["queues"]],
                         "a refused request reached the device")


if __name__ == "__main__":
    h.main()
