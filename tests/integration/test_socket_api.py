"""Integration: the socket API's streams end explicitly. `vtrn logs` gathers a
history longer than one frame (512 lines) up to the frame marked end, and a
`logs -f` follower gets an end frame naming why when vtrnd stops, and exits
0; the Hello exchange, oneof presence and pipelining are the Python
package's tests (python/tests/test_client.py)."""

import json
import os
import select
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


class LogStreams(h.SessionTestCase):
    session_name = "api-logs"

    def test_a_long_history_comes_whole_and_a_follower_hears_the_end(self):
        r = self.s.vtrn("up", "--chips", 2, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Each host retrain logs "retrain requested by host" on chip 0 (and
        # mostly "recovered" too): 520 of them fill more than one frame.
        for _ in range(520):
            self.assertEqual(self.s.vtrn("link", "retrain", 0, 0).returncode, 0)
        lines = len(self.s.vtrn_json("logs", 0)["lines"])
        self.assertGreater(lines, 533)
        text = self.s.vtrn("logs", 0).stdout.splitlines()
        self.assertEqual(len(text), lines)  # every line, oldest first, the newest last
        self.assertIn("ready: boot generation 1", "\n".join(text[:40]))
        self.assertIn("links: port 0", text[-1])
        self.assertEqual(len(self.s.vtrn_json("logs", 0, "--tail", 550)["lines"]), 550)
        follower = self.s.popen("logs", 1, "-f", "--json")
        try:
            first = select.select([follower.stdout], [], [], 30)[0]
            self.assertTrue(first, "logs -f printed nothing")
            self.assertGreater(len(json.loads(follower.stdout.readline())["lines"]), 0)
            down = self.s.vtrn("down", timeout=60)
            self.assertEqual(down.returncode, 0, down.stderr)
            out, err = follower.communicate(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        self.assertEqual(follower.returncode, 0, err)
        last = json.loads(out.strip().splitlines()[-1])
        self.assertEqual((last["end"], last["end_reason"]), (True, "vtrnd is stopping"))
        self.assert_nothing_left()


if __name__ == "__main__":
    h.main()
