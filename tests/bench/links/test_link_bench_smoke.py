"""Link bench smoke test: link_chip_bench.py on a booted 2-chip board
produces a complete JSON report (per link: bandwidth through the chips and
the raw shared-memory copy of the same run, round trip through the chips
and the native shared-memory ping-pong, their ratios; a verified
all-reduce with its bus bandwidth). Shape and internal consistency only:
timings on a shared CI machine are not pass/fail criteria.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import vtrn_harness as h  # noqa: E402

BENCH = os.path.join(HERE, "link_chip_bench.py")


class LinkBenchSmoke(h.BoardTestCase):
    session_name = "linkbench"

    @classmethod
    def board_ready(cls):
        h.wait_until("every link of the board up", lambda: cls.s.vtrn_json("topo"),
                     lambda t: t["links"] and t["links_up"] == len(t["links"]), 60, 0.2)

    def test_link_bench_reports_links_round_trips_and_allreduce(self):
        env = dict(self.s.env, VTRN_CLI=h.CLI)
        r = subprocess.run([sys.executable, BENCH, "--mib", "1", "--pings", "20", "--allreduce-bytes", "65536",
                            "--native-rounds", "20000", "--json"], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["board"], "vtrn-dev2")
        self.assertEqual(len(doc["results"]), 2)
        for link in doc["results"]:
            with self.subTest(link=link["link"]):
                for key in ("link_gbps", "raw_shm_gbps", "rtt_us", "rtt_min_us", "native_shm_rtt_us"):
                    self.assertGreater(link[key], 0, key)
                self.assertLessEqual(link["rtt_min_us"], link["rtt_us"])
                self.assertAlmostEqual(link["ratio"], link["link_gbps"] / link["raw_shm_gbps"], places=9)
                self.assertAlmostEqual(link["rtt_ratio"], link["rtt_us"] / link["native_shm_rtt_us"], places=6)
        ar = doc["allreduce"]
        self.assertTrue(ar["verified"])
        self.assertEqual(ar["chips"], 2)
        # NCCL: bus = alg * 2(n-1)/n, which is alg itself on 2 chips.
        self.assertAlmostEqual(ar["bus_bw_gbps"], ar["alg_bw_gbps"], places=12)


if __name__ == "__main__":
    h.main()
