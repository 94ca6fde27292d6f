"""Integration: what a board looks like to the tools people watch it with:
vtrnd's Prometheus exporter as real clients see it, the Grafana dashboard
shipped for it, and `vtrn topo --dot` / `--svg` rendered by Graphviz.

The exposition of a live 2-chip board (links trained, a job run, a chip
reset) must pass `promtool check metrics` (Debian's prometheus package) and
parse with Python's prometheus_client into families whose names are unique
(a gauge `x_seconds` beside a counter `x_seconds_total` is one family to
OpenMetrics and to prometheus_client). "None" is an absent series, a state
has one label value in every family, and no number of idle connections or
oversized request heads locks a scraper out.

The dashboard (driver/vtrnd/grafana/vtrn-dashboard.json) may only query
families this exporter serves, in PromQL that promtool accepts.

Needs Debian's interpreter (/usr/bin/python3) for python3-prometheus-client.
"""

import json
import os
import re
import shutil
import tempfile
import socket
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402
from test_power import metrics_port, parse_prometheus  # noqa: E402

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "driver", "vtrnd", "grafana",
                         "vtrn-dashboard.json")
PROMQL_WORDS = {"sum", "max", "min", "avg", "by", "without", "rate", "increase", "histogram_quantile",
                "label_values", "count", "topk", "on", "ignoring", "bool", "and", "or", "unless", "le",
                "chip", "port", "kind", "reason", "state", "zone", "core", "component", "offset"}


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            exprs.append((panel["title"], t["expr"]))
    for var in dash["templating"]["list"]:
        if var.get("type") == "query":
            exprs.append((f"variable {var['name']}", var["definition"]))
    return dash, exprs


def metric_names(expr):
    """The series names an expression selects: identifiers that are not
    PromQL words, label names, label values or Grafana variables."""
    expr = re.sub(r'"[^"]*"', '""', expr)             # label values
    expr = re.sub(r"\$\w+", "", expr)                  # $chip, $__range
    expr = re.sub(r"\[[^\]]*\]", "", expr)              # range selectors
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if w not in PROMQL_WORDS}


def families(text):
    """prometheus_client's view: {family name: Metric}, failing on a name
    that two families share (the parser itself yields both)."""
    seen = {}
    for fam in text_string_to_metric_families(text):
        if fam.name in seen:
            raise AssertionError(f"family {fam.name} appears twice: as {seen[fam.name].type} and {fam.type}")
        seen[fam.name] = fam
    return seen


def samples(fam, **match):
    return [s for s in fam.samples if all(s.labels.get(k) == v for k, v in match.items())]


class Board(h.BoardTestCase):
    """The default 2-chip board with the exporter on a free port."""

    up_env = {"VTRN_METRICS_PORT": "0"}
    up_args = ("--boot-timeout-ms", 30000)

    @classmethod
    def board_ready(cls):
        cls.port = metrics_port(cls.s)

    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as resp:
            self.assertEqual(resp.status, 200)
            return resp.read().decode()



class Exporter(Board):
    session_name = "metrics"

    @classmethod
    def board_ready(cls):
        super().board_ready()
        # Something for every family to count: a job on chip 0.
        r = cls.s.vtrn("run", "add", "--m", 8, "--n", 8, "--chip", 0, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"vtrn run add: {r.stderr}")

    def test_promtool_finds_nothing_to_lint(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool missing: scripts/install-deps.sh installs Debian's prometheus")
        r = subprocess.run([promtool, "check", "metrics"], input=self.scrape(), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((r.stdout + r.stderr).strip(), "", "promtool lint findings")

    def test_prometheus_client_parses_unique_families(self):
        text = self.scrape()
        fams = families(text)
        parse_prometheus(text)  # and the strict reader of test_power.py
        # A counter's family drops _total, so the counter owns the name the
        # gauge of the last refresh's duration once had too.
        self.assertEqual(fams["vtrn_chip_power_refresh_seconds"].type, "counter")
        self.assertEqual(fams["vtrn_chip_power_refresh_duration_seconds"].type, "gauge")
        self.assertEqual(fams["vtrn_job_latency_seconds"].type, "histogram")
        self.assertGreater(len(fams), 60)

    def test_unique_families_catches_a_collision(self):
        # The check above would see the collision the exporter once had.
        bad = ("# HELP a_seconds x\n# TYPE a_seconds gauge\na_seconds 1\n"
               "# HELP a_seconds_total y\n# TYPE a_seconds_total counter\na_seconds_total 2\n")
        with self.assertRaises(AssertionError):
            families(bad)

    def test_chip_info_names_firmware_build_and_board(self):
        fams = families(self.scrape())
        info = fams["vtrn_chip_info"]
        ls = {c["id"]: c for c in self.s.vtrn_json("ls")["chips"]}
        inf = self.s.vtrn_json("info", 0)
        self.assertEqual(sorted(s.labels["chip"] for s in info.samples), ["0", "1"])
        for s in info.samples:
            self.assertEqual(s.value, 1)
            self.assertEqual(s.labels["fw_version"], ls[int(s.labels["chip"])]["fw_version"])
            self.assertTrue(s.labels["board"], s)
            self.assertEqual(s.labels["pci_bus_id"], ls[int(s.labels["chip"])]["pci_bus_id"])
        self.assertEqual(samples(info, chip="0")[0].labels["build_id"], inf["build_id"])

    def test_link_error_counters_cover_every_wired_port(self):
        fams = families(self.scrape())
        errs = fams["vtrn_link_errors"]
        wired = {(str(p["chip"]), str(p["port"])) for p in self.s.vtrn_json("link", "ls")["ports"] if p["wired"]}
        self.assertTrue(wired)
        self.assertEqual({(s.labels["chip"], s.labels["port"]) for s in errs.samples}, wired)
        kinds = {s.labels["kind"] for s in errs.samples}
        self.assertTrue({"crc", "sequence", "replay_timeout", "transport", "protocol"} <= kinds, kinds)
        for name in ("vtrn_link_retrains", "vtrn_link_downs", "vtrn_link_replays"):
            self.assertEqual(fams[name].type, "counter", name)
        tx = {(s.labels["chip"], s.labels["port"]): s.value for s in fams["vtrn_link_transmit_bytes"].samples}
        self.assertEqual(set(tx), wired)

    def test_job_latency_histogram_counts_the_job(self):
        fam = families(self.scrape())["vtrn_job_latency_seconds"]
        self.assertEqual(fam.type, "histogram")
        mine = samples(fam, chip="0")
        buckets = [(float(s.labels["le"]), s.value) for s in mine if s.name.endswith("_bucket")]
        count = [s.value for s in mine if s.name.endswith("_count")][0]
        total = [s.value for s in mine if s.name.endswith("_sum")][0]
        self.assertGreaterEqual(count, 1)
        self.assertEqual(buckets[-1], (float("inf"), count))
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets), "buckets not cumulative")
        self.assertEqual([b for b, _ in buckets], sorted(b for b, _ in buckets))
        jobs = [j for j in self.s.vtrn_json("jobs", 0)["jobs"] if j["state"] != "RUNNING"]
        self.assertAlmostEqual(total, sum(j["latency_ns"] for j in jobs) / 1e9, delta=1e-6 * max(1, count))

    def test_reset_counter_counts_a_manual_reset(self):
        def resets():
            fam = families(self.scrape())["vtrn_chip_resets"]
            return {s.labels["chip"]: s.value for s in fam.samples}
        before = resets()
        r = self.s.vtrn("reset", 1, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        after = resets()
        self.assertEqual(after["1"], before["1"] + 1)
        self.assertEqual(after["0"], before["0"])

    def test_none_is_an_absent_series(self):
        fams = families(self.scrape())
        for name in ("vtrn_chip_power_cap_watts", "vtrn_chip_pstate_limit"):
            self.assertNotIn(name, fams, f"{name} exported while there is none")
        try:
            self.assertEqual(self.s.vtrn("power", 0, "--cap", 40).returncode, 0)
            self.assertEqual(self.s.vtrn("power", 0, "--pstate", 2).returncode, 0)
            fams = h.wait_until("the cap and the limit exported", lambda: families(self.scrape()),
                                lambda f: "vtrn_chip_power_cap_watts" in f and "vtrn_chip_pstate_limit" in f, 10)
            self.assertEqual([(s.labels, s.value) for s in fams["vtrn_chip_power_cap_watts"].samples],
                             [({"chip": "0"}, 40.0)])
            self.assertEqual([(s.labels, s.value) for s in fams["vtrn_chip_pstate_limit"].samples],
                             [({"chip": "0"}, 2.0)])
        finally:
            self.s.vtrn("power", 0, "--cap", 0)
            self.s.vtrn("power", 0, "--pstate", 0)
        fams = h.wait_until("the cap and the limit gone", lambda: families(self.scrape()),
                            lambda f: "vtrn_chip_power_cap_watts" not in f and "vtrn_chip_pstate_limit" not in f, 10)

    def test_each_state_has_one_label_vocabulary(self):
        fams = families(self.scrape())
        for gauge, residency in (("vtrn_chip_device_power_state", "vtrn_chip_device_state_seconds"),
                                 ("vtrn_core_power_state", "vtrn_core_state_seconds"),
                                 ("vtrn_link_power_state", "vtrn_link_state_seconds")):
            with self.subTest(family=gauge):
                a = {s.labels["state"] for s in fams[gauge].samples}
                b = {s.labels["state"] for s in fams[residency].samples}
                self.assertEqual(a, b)
                # Exactly one state holds per chip (and core or port).
                per = {}
                for s in fams[gauge].samples:
                    key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "state"))
                    per[key] = per.get(key, 0) + s.value
                self.assertEqual(set(per.values()), {1.0}, per)
        link_states = {s.labels["state"] for s in fams["vtrn_link_power_state"].samples}
        self.assertTrue({s.labels["state"] for s in fams["vtrn_link_low_power_entries"].samples} <= link_states)

    def test_idle_connections_never_lock_a_scraper_out(self):
        idle = []
        try:
            for i in range(40):
                c = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                if i % 2:
                    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
                idle.append(c)
            time.sleep(0.2)
            t0 = time.monotonic()
            text = self.scrape()
            self.assertIn("vtrn_chip_up", text)
            print(f"figure: scrape with 40 idle connections open took {time.monotonic() - t0:.3f} s",
                  file=sys.stderr)
            # The idle ones made room: all but the newest few were closed.
            closed = 0
            for c in idle:
                c.settimeout(2)
                try:
                    closed += c.recv(1) == b""
                except (socket.timeout, ConnectionResetError):
                    closed += 0
            self.assertGreaterEqual(closed, 40 - 15)
        finally:
            for c in idle:
                c.close()

    def test_an_oversized_request_head_gets_431_and_the_next_scrape_works(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 16384 + b"\r\n\r\n")
            answer = b""
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 431 "), answer[:200])
        self.assertIn(b"Connection: close", answer)
        self.assertIn("vtrn_chip_up", self.scrape())


class Pictures(Board):
    """The dashboard and the topology pictures, on a board of their own
    (the exporter tests reset a chip)."""

    session_name = "pictures"

    def test_dashboard_queries_only_families_the_exporter_serves(self):
        served = {s.name for fam in families(self.scrape()).values() for s in fam.samples}
        dash, exprs = dashboard_exprs()
        self.assertEqual(dash["uid"], "vtrn-board")
        self.assertGreaterEqual(len(exprs), 15)
        used = set()
        for title, expr in exprs:
            names = metric_names(expr)
            self.assertTrue(names, f"{title}: no series in {expr!r}")
            for name in names:
                with self.subTest(panel=title, series=name):
                    # Series that exist only while set (power cap) are served
                    # as soon as they are: look them up with one set.
                    self.assertIn(name, served | {"vtrn_chip_power_cap_watts"}, f"{title}: {expr}")
            used |= names
        for must in ("vtrn_job_latency_seconds_bucket", "vtrn_link_errors_total", "vtrn_chip_resets_total"):
            self.assertIn(must, used)

    def test_dashboard_queries_are_promql_that_promtool_accepts(self):
        _, exprs = dashboard_exprs()
        rules = ["groups:", "  - name: vtrn-dashboard", "    rules:"]
        for i, (title, expr) in enumerate(exprs):
            if title.startswith("variable "):
                continue  # label_values() is Grafana's, not PromQL
            # Grafana's range variables, as Grafana would substitute them.
            promql = expr.replace("$__rate_interval", "1m").replace("$__range", "15m").replace("$chip", ".*")
            rules += [f"      - record: vtrn:dashboard_{i}", f"        expr: {json.dumps(promql)}"]
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("\n".join(rules) + "\n")
        try:
            r = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", f.name],
                               capture_output=True, text=True, timeout=60)
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # A broken query is caught (the check can fail).
        self.assertTrue(metric_names("rate(vtrn_chip_dma_bytes_total{chip=~\"$chip\"}[5m])")
                        == {"vtrn_chip_dma_bytes_total"})

    def links_up(self):
        return h.wait_until("both links up", lambda: self.s.vtrn_json("topo"),
                            lambda t: t["links_up"] == 2, 60)

    def test_topo_dot_shows_live_states_speeds_and_error_counts(self):
        self.links_up()
        r = self.s.vtrn("topo", "--dot")
        self.assertEqual(r.returncode, 0, r.stderr)
        dot = r.stdout
        self.assertTrue(dot.startswith("graph vtrn {"), dot[:100])
        edges = re.findall(r"^  (chip\d+) -- (chip\d+) \[(.*)\];$", dot, re.M)
        self.assertEqual(sorted((a, b) for a, b, _ in edges), [("chip0", "chip1"), ("chip1", "chip0")], dot)
        for _, _, attrs in edges:
            self.assertRegex(attrs, r'label="(L0|L0s|L1) \d+(\.\d+)?GT/s x\d+\\n0 errors"', attrs)
            self.assertIn("color=forestgreen", attrs)
        self.assertRegex(dot, r'chip0 \[shape=box.*label="chip 0\\nREADY"')
        # Bit errors on chip 0 port 0 show on that link (and only there).
        try:
            self.s.vtrn_json("link", "inject", 0, 0, "--ber", "2e-5")
            self.s.vtrn_json("link", "send", 0, 0, "--bytes", 1 << 20)

            def errored():
                d = self.s.vtrn("topo", "--dot").stdout
                return re.findall(r"^  chip0 -- chip1 \[(.*)\];$", d, re.M)
            attrs = h.wait_until("errors on the link from chip 0 port 0", errored,
                                 lambda e: e and re.search(r"\\n[1-9]\d* errors?\"", e[0]), 60)[0]
            self.assertIn("fontcolor=red3", attrs)
        finally:
            self.s.vtrn("link", "inject", 0, 0, "--ber", "0")
        other = re.findall(r"^  chip1 -- chip0 \[(.*)\];$", self.s.vtrn("topo", "--dot").stdout, re.M)[0]
        self.assertIn("\\n0 errors", other)
        self.assertEqual(self.s.vtrn("topo", "--dot", "--json").returncode, h.EXIT_USAGE)

    def test_topo_svg_renders_with_graphviz(self):
        self.links_up()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "board.svg")
            r = self.s.vtrn("topo", "--svg", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"wrote {path}", r.stdout)
            with open(path) as f:
                svg = f.read()
            self.assertIn("<svg", svg)
            self.assertEqual(len(re.findall(r'class="node"', svg)), 2)
            self.assertEqual(len(re.findall(r'class="edge"', svg)), 2)
            self.assertIn(">chip 0</text>", svg)
            r = self.s.vtrn("topo", "--svg", os.path.join(d, "no", "such", "dir", "x.svg"), "--json")
            self.assert_one_error_line(r, h.EXIT_FAILED, "could not render")
            self.assertEqual(json.loads(r.stdout)["error"]["name"], "failed")


if __name__ == "__main__":
    h.main()
