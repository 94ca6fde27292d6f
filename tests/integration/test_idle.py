"""Integration: an idle chip sleeps, and a reader still sees it as it is now.

A READY chip nobody uses must not tick at its telemetry period: after one
quiet period its firmware ticks every kIdleTickMs (250 ms, the heartbeat the
host watchdog needs), so over an idle window the firmware's own count of
WFI exits (telemetry `wakeups`) stays at a few per second. The bound is a
count of what the firmware did, not a timing: a chip ticking at its 100 ms
period would wake at least 10 times a second whatever the host's load.

Telemetry on demand: `vtrn telemetry` rings the chip's kVectorAux and gets
the block refreshed for its request, so control requests served just
before the read are already counted (with the 250 ms idle tick alone they
would usually not be).

Boots the one-chip board (vtrn-dev1: no link ports, so nothing but the
chip's own services can wake it).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

DEV1 = os.path.join(os.path.dirname(h.BOARD_DTB), "vtrn-dev1.dtb")
WINDOW_S = 4.0
# 10 per second is what a 100 ms tick alone gives; an idle chip ticks at
# 4 per second and wakes for little else. Generous against the host
# watchdog's polls and this test's own reads, tight enough that a chip that
# stopped going idle fails.
MAX_WAKEUPS_PER_S = 7.0


class IdleChip(h.BoardTestCase):
    session_name = "idle"
    up_args = ("--board", DEV1)

    def telemetry(self):
        doc = self.s.vtrn_json("telemetry", 0)
        self.assertEqual(len(doc["chips"]), 1)
        return doc["chips"][0]

    def test_idle_chip_wakes_only_a_few_times_a_second(self):
        # The board has just booted: let the chip see a quiet period first.
        time.sleep(1.0)
        before = self.telemetry()
        time.sleep(WINDOW_S)
        after = self.telemetry()
        elapsed_s = (after["uptime_ns"] - before["uptime_ns"]) / 1e9
        self.assertGreater(elapsed_s, WINDOW_S * 0.9, (before, after))
        wakeups = after["wakeups"] - before["wakeups"]
        beats = after["heartbeat"] - before["heartbeat"]
        # The chip is alive: it kept its heartbeat for the host's watchdog
        # (at least one beat per second of the window).
        self.assertGreaterEqual(beats, int(elapsed_s), (before, after))
        self.assertLessEqual(wakeups / elapsed_s, MAX_WAKEUPS_PER_S,
                             f"{wakeups} wakeups and {beats} heartbeats in {elapsed_s:.2f} s of chip time")

    def test_telemetry_read_on_demand_counts_the_requests_just_served(self):
        time.sleep(1.0)  # idle: the chip ticks slowly now
        for _ in range(3):
            before = self.telemetry()
            r = self.s.vtrn("ping", 0, "--count", "5")
            self.assertEqual(r.returncode, 0, r.stderr)
            after = self.telemetry()
            self.assertGreaterEqual(after["ctrl_requests"] - before["ctrl_requests"], 5, (before, after))
            time.sleep(0.5)


if __name__ == "__main__":
    h.main()
