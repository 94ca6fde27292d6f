"""Integration: chip-to-chip links on real QEMU chips. The default 2-chip
board (a ring of two) and the 4-chip ring are booted through the CLI; every
wired port must train to L0 with the speed and width both ends and all good
lanes allow (the ring has a faulty lane and a 16 GT/s chip); injected bit
errors must be recovered (CRC errors, NAK/replay, retraining) with every
pattern frame arriving intact and the counters agreeing with each other; a
disabled port and a peer that is not on the board leave the other end in
Detect with a reason that says so.

Not the link protocol's own tests (common/link/test): here the firmware,
the ivshmem-plain wiring vtrnd sets up, the BAR2 status block and the CLI
are what is under test. Timings are bounds, never measurements.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

BOARD_DIR = os.path.dirname(h.BOARD_DTB)
RING4 = os.path.join(BOARD_DIR, "vtrn-ring4.dtb")
TRAIN_TIMEOUT_S = 60


def ports(s, chip=None):
    args = ["link", "ls"] + ([chip] if chip is not None else [])
    return {(p["chip"], p["port"]): p for p in s.vtrn_json(*args)["ports"]}


def wait_for(s, what, pred, timeout=TRAIN_TIMEOUT_S):
    """Polls `vtrn link ls` until pred(ports) holds; returns the ports."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = ports(s)
        if pred(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: " +
                         "; ".join(f"{k}: {v['state']} {v['reason']}" for k, v in sorted(last.items())))


# Trained and usable: idle links drop into L0s and L1 on their own (the
# board's default ASPM idle timers) and traffic brings them back.
UP_STATES = ("L0", "L0s", "L1")


def wired_up(ps):
    return all(p["state"] in UP_STATES for p in ps.values() if p["wired"] and p["peer_on_board"])


def both_ends_full(*ends):
    """A predicate on `ports`: every listed end (chip, port) up at the
    board's full speed and width. A test that changed a link waits for both
    of its ends: each chip publishes its own status block, and the end not
    looked at may still show the link as it was."""
    return lambda ps: all(ps[k]["state"] in UP_STATES and (ps[k]["speed"], ps[k]["width"]) == ("32GT/s", 16)
                          for k in ends)


class TwoChipLinks(h.BoardTestCase):
    session_name = "links2"
    up_args = ("--boot-timeout-ms", 30000)

    @classmethod
    def board_ready(cls):
        wait_for(cls.s, "every wired link in L0", wired_up)

    def test_links_train_to_l0_at_full_speed_and_width(self):
        # A link may be retraining at the moment we look (a starved QEMU on
        # a loaded host misses a replay timer); it must come back to L0.
        ps = wait_for(self.s, "every wired link in L0", wired_up)
        for chip in (0, 1):
            for port in (0, 1):
                p = ps[(chip, port)]
                self.assertIn(p["state"], UP_STATES, p)
                self.assertEqual(p["speed"], "32GT/s")
                self.assertEqual(p["width"], 16)
                self.assertEqual(p["peer_kind"], "chip")
                self.assertEqual(p["peer_id"], 1 - chip)
                self.assertEqual(p["peer_port"], 1 - port)
                self.assertGreaterEqual(p["counters"]["link_ups"], 1)
            for port in (2, 3):  # not wired on this board
                p = ps[(chip, port)]
                self.assertEqual(p["state"], "Detect")
                self.assertFalse(p["wired"])

    def test_topo_shows_the_ring_with_live_states(self):
        t = self.s.vtrn_json("topo")
        self.assertEqual(t["model"], "vtrn-dev2")
        self.assertEqual(len(t["links"]), 2)
        self.assertEqual(t["links_up"], 2)
        ends = {(l["a"]["id"], l["a"]["port"], l["b"]["id"], l["b"]["port"]) for l in t["links"]}
        self.assertEqual(ends, {(0, 0, 1, 1), (1, 0, 0, 1)})
        r = self.s.vtrn("topo")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 links (2 up)", r.stdout)

    def test_injected_bit_errors_are_recovered_with_consistent_counters(self):
        before = ports(self.s)
        rx_before = before[(1, 1)]["counters"]
        self.s.vtrn_json("link", "inject", 0, 0, "--ber", "2e-5")
        sent = 4 << 20
        self.s.vtrn_json("link", "send", 0, 0, "--bytes", sent)
        want = rx_before["check_good_bytes"] + sent
        ps = wait_for(self.s, "the pattern to arrive",
                      lambda ps: ps[(1, 1)]["counters"]["check_good_bytes"] >= want
                      and ps[(0, 0)]["counters"]["gen_pending_bytes"] == 0, timeout=90)
        self.s.vtrn_json("link", "inject", 0, 0, "--ber", "0")
        tx, rx = ps[(0, 0)]["counters"], ps[(1, 1)]["counters"]
        self.assertEqual(rx["check_bad_frames"], rx_before["check_bad_frames"], "a frame arrived damaged")
        self.assertEqual(rx["check_good_bytes"], want)
        self.assertGreater(tx["injected_bit_errors"], 0)
        crc = rx["crc_errors"] - rx_before["crc_errors"]
        self.assertGreater(crc, 0)
        # Each injected error damages one frame at most; several can hit one frame.
        self.assertLessEqual(crc, tx["injected_bit_errors"] - before[(0, 0)]["counters"]["injected_bit_errors"])
        self.assertGreater(tx["replays"] + tx["retrains"], 0, "damaged frames were never replayed")
        # Bursts right after a retrain count as failed retrains and step the
        # speed or width down; whatever it settled at is reported as such.
        ps = wait_for(self.s, "the link back in L0", wired_up)
        if (ps[(0, 0)]["speed"], ps[(0, 0)]["width"]) != ("32GT/s", 16):
            self.assertGreater(ps[(0, 0)]["counters"]["downgrades"] + ps[(1, 1)]["counters"]["downgrades"], 0)
        for chip, port in ((0, 0), (1, 1)):
            self.s.vtrn_json("link", "inject", chip, port, "--restore")
        wait_for(self.s, "full speed and width again at both ends", both_ends_full((0, 0), (1, 1)))

    def test_ping_round_trips_are_echoed_by_the_peer_and_timed(self):
        before = ports(self.s)[(0, 1)]["counters"]
        # `link ping` waits for its echoes and reports the batch.
        doc = self.s.vtrn_json("link", "ping", 0, 1, "--count", 20)
        self.assertEqual(doc["round_trips"], 20)
        self.assertGreater(doc["rtt_min_ns"], 0)
        self.assertLessEqual(doc["rtt_min_ns"], doc["rtt_avg_ns"])
        self.assertLessEqual(doc["rtt_avg_ns"], doc["rtt_max_ns"])
        c = ports(self.s)[(0, 1)]["counters"]
        self.assertEqual(c["ping_done"], before["ping_done"] + 20)
        self.assertEqual(c["ping_pending"], 0)
        self.assertEqual((c["ping_rtt_min_ns"], c["ping_rtt_max_ns"]), (doc["rtt_min_ns"], doc["rtt_max_ns"]))
        self.assertGreater(c["ping_rtt_min_ns"], 0)
        self.assertLessEqual(c["ping_rtt_min_ns"], c["ping_rtt_max_ns"])
        total = c["ping_rtt_total_ns"] - before["ping_rtt_total_ns"]
        self.assertGreaterEqual(total, 20 * c["ping_rtt_min_ns"])
        r = self.s.vtrn("link", "ping", 0, 1, "--count", 0)
        self.assert_one_error_line(r, 2, "--count")

    def test_retrain_enters_recovery_and_returns_to_l0(self):
        before = ports(self.s)[(1, 0)]["counters"]["retrains"]
        r = self.s.vtrn_json("link", "retrain", 1, 0)
        self.assertEqual(r["chip"], 1)
        ps = wait_for(self.s, "the retrain to finish",
                      lambda ps: ps[(1, 0)]["counters"]["retrains"] > before and wired_up(ps))
        self.assertEqual(ps[(1, 0)]["last_recovery"], "requested")
        self.assertEqual(ps[(0, 1)]["width"], 16)

    def test_faulty_lane_narrows_the_link_and_repair_restores_it(self):
        self.s.vtrn_json("link", "inject", 0, 1, "--lane", 3)
        ps = wait_for(self.s, "the narrower link at both ends",
                      lambda ps: all(ps[k]["state"] in UP_STATES and ps[k]["width"] == 8 for k in ((0, 1), (1, 0))))
        self.assertEqual(ps[(0, 1)]["good_lanes"] & (1 << 3), 0)
        self.s.vtrn_json("link", "inject", 0, 1, "--lane", 3, "--good")
        wait_for(self.s, "the full width back at both ends",
                 lambda ps: all(ps[k]["state"] in UP_STATES and ps[k]["width"] == 16 for k in ((0, 1), (1, 0))))
        # Then undo whatever a retrain that failed on the way stepped down.
        for chip, port in ((0, 1), (1, 0)):
            self.s.vtrn_json("link", "inject", chip, port, "--restore")
        wait_for(self.s, "full speed and width at both ends", both_ends_full((0, 1), (1, 0)))

    def test_disabled_port_leaves_the_peer_in_detect(self):
        self.s.vtrn_json("link", "inject", 1, 1, "--down")
        ps = wait_for(self.s, "the peer in Detect",
                      lambda ps: ps[(0, 0)]["state"] == "Detect" and ps[(1, 1)]["state"] == "Disabled")
        self.assertEqual(ps[(0, 0)]["reason"], "peer disabled")
        self.assertTrue(ps[(1, 1)]["disabled"])
        self.assertEqual(ps[(0, 0)]["speed"], "-")
        self.assertEqual(ps[(0, 0)]["width"], 0)
        self.s.vtrn_json("link", "inject", 1, 1, "--up")
        wait_for(self.s, "the link up again", wired_up)

    def test_cli_mistakes_give_one_line_and_the_documented_code(self):
        self.assert_one_error_line(self.s.vtrn("link", "inject", 0, 0), h.EXIT_USAGE, "exactly one")
        self.assert_one_error_line(self.s.vtrn("link", "retrain", 7, 0), h.EXIT_UNKNOWN_CHIP)
        self.assert_one_error_line(self.s.vtrn("link", "retrain", 0, 3), h.EXIT_FAILED, "not wired")
        self.assert_one_error_line(self.s.vtrn("link", "inject", 0, 0, "--ber", "0.5"), h.EXIT_USAGE)


class RingLinks(h.SessionTestCase):
    session_name = "links4"

    def tearDown(self):
        self.assertEqual(h.down_and_check(self.s), [])

    def test_ring_negotiates_around_a_faulty_lane_and_a_slow_chip(self):
        r = self.s.vtrn("up", "--board", RING4, "--boot-timeout-ms", 60000, timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        ps = wait_for(self.s, "every ring link in L0", wired_up)
        # Link 1 (chip 1 port 0 - chip 2 port 1): lane 15 of chip 2 is broken.
        self.assertEqual((ps[(1, 0)]["width"], ps[(2, 1)]["width"]), (8, 8))
        self.assertEqual(ps[(1, 0)]["speed"], "32GT/s")
        # Links 2 and 3 touch chip 3, a 16 GT/s part.
        for key in ((2, 0), (3, 1), (3, 0), (0, 1)):
            self.assertEqual(ps[key]["speed"], "16GT/s", key)
            self.assertEqual(ps[key]["width"], 16, key)
        self.assertEqual((ps[(0, 0)]["speed"], ps[(0, 0)]["width"]), ("32GT/s", 16))
        t = self.s.vtrn_json("topo")
        self.assertEqual(t["links_up"], 4)

    def test_peer_not_on_the_board_leaves_ports_in_detect(self):
        r = self.s.vtrn("up", "--board", RING4, "--chips", 3, "--boot-timeout-ms", 60000, timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        wait_for(self.s, "the links between present chips in L0", wired_up)
        # Both ports wired to chip 3, which is not started, find no link
        # header: a definite state, not a slow peer.
        ps = wait_for(self.s, "the ports towards chip 3 to report the peer absent",
                      lambda ps: all(ps[k]["reason"] == "peer absent (no link header)" for k in ((2, 0), (0, 1))))
        for key in ((2, 0), (0, 1)):
            p = ps[key]
            self.assertEqual(p["state"], "Detect", key)
            self.assertFalse(p["peer_on_board"])
            self.assertEqual(p["reason"], "peer absent (no link header)")
            self.assertEqual(p["counters"]["link_ups"], 0)
        t = self.s.vtrn_json("topo")
        self.assertEqual(t["links_up"], 2)
        absent = [l for l in t["links"] if not (l["a"]["on_board"] and l["b"]["on_board"])]
        self.assertEqual(len(absent), 2)


if __name__ == "__main__":
    h.main()
