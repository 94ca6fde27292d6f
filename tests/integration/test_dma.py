"""Integration: DMA integrity on a 2-chip board under real QEMU. Random data
of many sizes (1 B .. 4 MiB, odd ones), at odd HBM offsets, through chains of
1 .. 64 descriptors, on both chips and every queue, from several clients at
once, is written, copied and read back through vtrnd and compared byte for
byte here, not only by the CLI that moved it; the chip's per-queue counters
must account for exactly what was sent.

Not the hostile-input tests (test_dma_hostile.py): everything here is valid
and must succeed. The CLI has no way to pick a queue or hand over chosen
bytes for an independent read-back, so part of this goes through the small
socket client in vtrn_harness (ApiClient). DMA is checked against live
allocations, as in production: every address used here lies in an
allocation a connection of this test holds while the data moves.
"""

import json
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

MiB = 1 << 20
READ_PIECE = 2 * MiB  # DmaRead answers must fit in one 4 MiB frame


def read_back(client, chip, addr, n):
    out = bytearray()
    for off in range(0, n, READ_PIECE):
        data, _ = client.dma_read(chip, addr + off, min(READ_PIECE, n - off))
        out += data
    return bytes(out)


def first_difference(a, b):
    if len(a) != len(b):
        return f"length {len(b)} != {len(a)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at byte {i}: wrote {x:#04x}, read {y:#04x}"
    return None


def totals(stats):
    keys = ("descriptors", "chains", "bytes", "errors", "host_chains_submitted", "host_chains_completed")
    out = {k: sum(q[k] for q in stats["queues"]) for k in keys}
    out["ok"] = sum(q["errors_by_status"][0] if q["errors_by_status"] else 0 for q in stats["queues"])
    return out


class DmaIntegrity(h.BoardTestCase):
    session_name = "dma"
    up_args = ("--chips", 2)

    def test_host_queues_are_served_by_the_copy_engine_asked_for(self):
        self.assertEqual(h.copy_engine_problems(self.s, (0, 1)), [])
    up_env = {"VTRN_ALLOW_RAW_DMA": "0"}

    @classmethod
    def board_ready(cls):
        with h.ApiClient(cls.s) as c:
            cls.stats = {chip: c.dma_stats(chip) for chip in (0, 1)}
        cls.rng = random.Random(0x5EED)

    @classmethod
    def end_of_class_problems(cls):
        # After every test: both chips still READY with healthy, idle queues.
        return h.board_health_problems(cls.s, (0, 1))

    def test_board_offers_several_queues_and_room_for_the_allocations_used_here(self):
        for chip, st in self.stats.items():
            with self.subTest(chip=chip):
                self.assertGreaterEqual(len(st["queues"]), 2, "one queue: the multi-queue tests would prove nothing")
                self.assertGreaterEqual(st["hbm_size"], 128 * MiB)
                self.assertGreaterEqual(st["max_chain_descs"], 64)

    def test_cli_copies_of_odd_sizes_offsets_and_chains_read_back_identical(self):
        # (chip, bytes, offset into the slot, chain): sizes straddle the CLI's
        # 2 MiB frames and vtrnd's 256 KiB chunks; offsets are odd or just
        # short of a page.
        cases = [(0, 1, 1, 1), (1, 2, 3, 2), (0, 3, 4093, 3), (1, 7, 0, 7), (0, 63, 7, 1),
                 (1, 4095, 1, 64), (0, 4097, 0x1001, 5), (1, 65535, 13, 1), (0, 262143, 255, 17),
                 (1, 262145, 4095, 2), (0, MiB + 13, 3, 1), (1, 2 * MiB + 1, 1, 9),
                 (0, 3 * MiB + 4095, 0, 64), (1, 4 * MiB, 0x801, 1)]
        tmp = self.s.tmp
        jobs = []
        with h.ApiClient(self.s) as holder:
            for i, (chip, n, off, chain) in enumerate(cases):
                path = os.path.join(tmp, f"case{i}.bin")
                data = self.rng.randbytes(n)
                with open(path, "wb") as f:
                    f.write(data)
                # A chained copy lands right after its source: room for both.
                block, _ = h.hbm_alloc(holder, chip, off + 2 * n + 4096)
                addr = block + off
                jobs.append((chip, n, addr, chain, data,
                             ["dma", "copy", chip, "--file", path, "--hbm-addr", hex(addr), "--chain", chain,
                              "--json"]))
            # Four CLI clients at a time, both chips busy at once.
            done = []
            for k in range(0, len(jobs), 4):
                procs = [(j, self.s.popen(*j[5])) for j in jobs[k:k + 4]]
                for j, p in procs:
                    out, err = p.communicate(timeout=60)
                    done.append((j, p.returncode, out, err))
            for (chip, n, addr, chain, data, _), rc, out, err in done:
                with self.subTest(chip=chip, bytes=n, addr=hex(addr), chain=chain):
                    self.assertEqual(rc, 0, err)
                    doc = json.loads(out)
                    self.assertEqual((doc["chip"], doc["bytes"], doc["hbm_addr"], doc["chain"], doc["verified"]),
                                     (chip, n, addr, chain, True))
                    dst = doc["dst_addr"] if chain > 1 else addr
                    if chain > 1:
                        self.assertGreaterEqual(dst, addr + n, "chained copy target overlaps its source")
                    self.assertIsNone(first_difference(data, read_back(holder, chip, dst, n)))

    def test_cli_generated_data_round_trips_with_chains(self):
        for chip, size, chain in ((0, "1M", 64), (1, "12345", 3)):
            with self.subTest(chip=chip, size=size, chain=chain):
                doc = self.s.vtrn_json("dma", "copy", chip, "--size", size, "--chain", chain)
                self.assertTrue(doc["verified"])
                self.assertEqual(doc["source"], "random")
                self.assertEqual(doc["bytes"], MiB if size == "1M" else 12345)

    def test_every_queue_runs_chains_whose_result_reads_back_and_counters_match(self):
        for chip in (0, 1):
            with self.subTest(chip=chip), h.ApiClient(self.s) as c:
                before = c.dma_stats(chip)
                nq = len(before["queues"])
                sent = {"descriptors": 0, "chains": 0, "bytes": 0}
                per_queue_copies = {}
                self.assertLessEqual(nq, 8, "the allocation below has room for 8 queues")
                base, _ = h.hbm_alloc(c, chip, 16 * MiB)
                for q in range(nq):
                    n = self.rng.choice([1, 31, 4099, 100003, 300001])
                    seg = min(n, self.rng.choice([1, 2, 8, 64]))
                    src = base + q * MiB + self.rng.randrange(1, 4096)
                    dst = base + 8 * MiB + q * MiB + self.rng.randrange(1, 4096)
                    data = self.rng.randbytes(n)
                    w = c.dma_write(chip, src, data)
                    self.assertEqual(w["bytes"], n)
                    st, err, cr = c.dma_copy_raw(chip, src_addr=src, dst_addr=dst, length=n, segments=seg, queue=q)
                    self.assertEqual(st, h.API_STATUS_OK, err)
                    self.assertEqual((cr["dma_status"], cr["dma_status_name"], cr["bytes"], cr["queue"]),
                                     (0, "ok", n, q))
                    back, rchunks = c.dma_read(chip, dst, n)
                    self.assertIsNone(first_difference(data, back), f"queue {q}, {n} bytes in {seg} descriptors")
                    sent["descriptors"] += w["chunks"] + seg + rchunks
                    sent["chains"] += w["chunks"] + 1 + rchunks
                    sent["bytes"] += 3 * n
                    per_queue_copies[q] = seg
                after = c.dma_stats(chip)
                b, a = totals(before), totals(after)
                self.assertEqual({k: a[k] - b[k] for k in sent}, sent)
                self.assertEqual(a["errors"] - b["errors"], 0)
                self.assertEqual(a["ok"] - b["ok"], sent["chains"], "every completion counted as ok")
                self.assertEqual(a["host_chains_submitted"] - b["host_chains_submitted"], sent["chains"])
                self.assertEqual(a["host_chains_completed"] - b["host_chains_completed"], sent["chains"])
                for qb, qa in zip(before["queues"], after["queues"]):
                    self.assertGreaterEqual(qa["descriptors"] - qb["descriptors"], per_queue_copies[qa["queue"]])
                    self.assertEqual((qa["in_flight"], qa["device_error"], qa["host_fault"]), (0, 0, ""))
                    self.assertEqual(qa["free_slots"], after["depth"])

    def test_parallel_cli_and_socket_clients_on_both_chips_all_verify(self):
        errors = []

        def socket_client(chip, k):
            try:
                rng = random.Random(k)
                with h.ApiClient(self.s) as c:
                    block, _ = h.hbm_alloc(c, chip, MiB)
                    addr = block + rng.randrange(1, 64)
                    for _ in range(6):
                        data = rng.randbytes(rng.randrange(1, 700000))
                        c.dma_write(chip, addr, data)
                        diff = first_difference(data, read_back(c, chip, addr, len(data)))
                        if diff:
                            errors.append(f"socket client {k} chip {chip}: {len(data)} bytes: {diff}")
            except Exception as e:  # reported below; a thread cannot fail the test itself
                errors.append(f"socket client {k} chip {chip}: {e!r}")

        holder = h.ApiClient(self.s)
        try:
            before = {chip: holder.dma_stats(chip) for chip in (0, 1)}
            specs = [(chip, size, chain, h.hbm_alloc(holder, chip, 8 * MiB)[0] + 2 * i + 1)
                     for i, (chip, size, chain) in enumerate(
                         [(0, "1M", 1), (1, "1M", 4), (0, "333333", 64), (1, "777", 2), (0, "2M", 1), (1, "3M", 33)])]
            threads = [threading.Thread(target=socket_client, args=(k % 2, k)) for k in range(4)]
            for t in threads:
                t.start()
            procs = [self.s.popen("dma", "copy", chip, "--size", size, "--chain", chain, "--hbm-addr", hex(addr),
                                  "--json")
                     for chip, size, chain, addr in specs]
            outs = [p.communicate(timeout=60) + (p.returncode,) for p in procs]
            for t in threads:
                t.join(timeout=60)
            self.assertEqual([t for t in threads if t.is_alive()], [], "a socket client never finished")
        finally:
            holder.close()
        self.assertEqual(errors, [])
        for (chip, size, chain, _), (out, err, rc) in zip(specs, outs):
            with self.subTest(chip=chip, size=size, chain=chain):
                self.assertEqual(rc, 0, err)
                self.assertTrue(json.loads(out)["verified"])
        with h.ApiClient(self.s) as c:
            for chip in (0, 1):
                after = c.dma_stats(chip)
                busy = [qa["queue"] for qb, qa in zip(before[chip]["queues"], after["queues"])
                        if qa["chains"] > qb["chains"]]
                self.assertGreaterEqual(len(busy), 2, f"chip {chip}: all the traffic went to queues {busy}")
                self.assertEqual(totals(after)["errors"], totals(before[chip])["errors"])

    def test_raw_copy_is_refused_when_vtrnd_was_not_started_with_raw_dma(self):
        with h.ApiClient(self.s) as c:
            base, _ = h.hbm_alloc(c, 0, 2 * MiB)
            st, err, _ = c.dma_copy_raw(0, src_addr=base, dst_addr=base + MiB, length=64, raw=True)
        self.assertEqual(st, h.API_STATUS_BAD_REQUEST)
        self.assertIn("raw mode is off", err)


if __name__ == "__main__":
    h.main()
