"""Integration: power, thermal and telemetry on real QEMU.

One chip of the vtrn-power-hot test board (tests/integration/boards/: a die
zone that heats and cools within seconds), driven through the vtrn CLI:
the telemetry fields carry their units and sane ranges; sustained DMA
work (a long GEMM job on a NeuronCore) raises the modeled power and temperature until
thermal throttling engages, and it releases after the load stops; a power
cap holds the average power under it; D3hot with DMA queued, then D0 (and
autosuspend with a transparent resume), completes every transfer with the
bytes intact; `vtrn top` fits 80 columns; the Prometheus exporter's output
parses under a strict reading of the text exposition format.

Then the default two-chip board (vtrn-dev2, two links): idle links enter
L0s and then L1 on their own, the link layer and the power block count the
entries and the modeled link power drops to the L1 figure; traffic wakes a
link through an L1 exit that is not a retrain, with every byte verified by
the peer. And the same verified GEMM takes longer at the lowest operating
point than at the highest, by about the ratio of their clocks (DVFS pacing
really slows kernels). Ratios only, never absolute times.
"""

import json
import math
import os
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

BOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boards", "vtrn-power-hot.dts")
THROTTLE_C, HYSTERESIS_C = 60.0, 4.0
LONG_JOB = dict(h.LONG_GEMM_JOB, name="power-load")
# The power model's HBM access energy (common/power power_config.h default;
# the board sets no vtrn,hbm-pj-per-byte).
HBM_PJ_PER_BYTE = 30

# JSON keys of the power block that are counts, indexes or names (no unit).
UNITLESS = {"version", "device_state", "device_usage", "autosuspend_count", "d3hot_entries",
            "failed_suspends", "pstate", "pstate_count", "clock_event_reasons",
            "clock_event_reason_names", "pstate_limit", "thermal_limit_pstate", "cap_limit_pstate",
            "pstate_changes", "critical_events", "refreshes", "zones", "cores", "links", "zone",
            "core", "port", "state", "heat_sources", "idle_entries", "gated_entries",
            "l0s_entries", "l1_entries"}
UNIT_SUFFIXES = ("_ns", "_ms", "_mhz", "_mv", "_mw", "_w", "_uj", "_j", "_mc", "_c", "_permille",
                 "_ppm", "_ratio")


def metrics_port(session):
    """The port vtrnd's exporter bound: started with VTRN_METRICS_PORT=0 it
    takes any free port and logs which (never a port guessed here that
    something else may take first)."""
    with open(os.path.join(session.runtime_dir, "vtrnd.log")) as f:
        found = re.findall(r"metrics: serving http://127\.0\.0\.1:(\d+)/metrics", f.read())
    if len(found) != 1:
        raise AssertionError(f"vtrnd.log names {len(found)} metrics ports: {found}")
    return int(found[0])


def parse_prometheus(text):
    """Strict reader of the text exposition format 0.0.4: HELP and TYPE once
    per family and before its samples, samples of a family contiguous, valid
    metric and label names, quoted label values, float values, no duplicate
    series, counters named *_total. Returns {name: {"type", "samples": {labels: value}}};
    a histogram's samples are keyed with ("__name__", "<name>_bucket|_sum|_count") first."""
    name_re = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
    families, current, closed = {}, None, set()
    assert text.endswith("\n"), "exposition must end with a newline"
    for n, line in enumerate(text.split("\n")[:-1], 1):
        assert line, f"line {n}: empty line"
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, _, arg = rest.partition(" ")
            assert name_re.match(name), f"line {n}: bad metric name {name!r}"
            assert name not in closed, f"line {n}: family {name} split"
            f = families.setdefault(name, {"type": None, "help": None, "samples": {}})
            if current is not None and current != name:
                closed.add(current)
            current = name
            if kind == "HELP":
                assert f["help"] is None and arg, f"line {n}: HELP repeated or empty"
                f["help"] = arg
            else:
                assert f["type"] is None, f"line {n}: TYPE repeated"
                assert not f["samples"], f"line {n}: TYPE after samples"
                assert arg in ("counter", "gauge", "histogram", "summary", "untyped"), f"line {n}: type {arg}"
                f["type"] = arg
            continue
        assert not line.startswith("#"), f"line {n}: stray comment {line!r}"
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        assert m, f"line {n}: not a sample: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        series = name
        if current is not None and families[current]["type"] == "histogram" and name in (
                current + "_bucket", current + "_sum", current + "_count"):
            name = current
        assert name == current, f"line {n}: sample of {name} outside its family block ({current})"
        pairs = ()
        if labels:
            body = labels[1:-1]
            pairs = tuple(label_re.findall(body))
            rebuilt = ",".join(f'{k}="{v}"' for k, v in pairs)
            assert rebuilt == body, f"line {n}: bad labels {labels!r}"
            assert len({k for k, _ in pairs}) == len(pairs), f"line {n}: duplicate label"
        v = float(value)  # raises on garbage; NaN/Inf spelled as Prometheus does are accepted
        f = families[name]
        assert f["type"] is not None, f"line {n}: sample before TYPE"
        if f["type"] == "histogram":  # _bucket, _sum and _count share labels: key by series name too
            pairs = (("__name__", series),) + pairs
        assert pairs not in f["samples"], f"line {n}: duplicate series"
        f["samples"][pairs] = v
    for name, f in families.items():
        assert f["samples"], f"family {name} has no samples"
        if f["type"] == "counter":
            assert name.endswith("_total"), f"counter {name} must end in _total"
            assert all(v >= 0 and not math.isnan(v) for v in f["samples"].values()), name
    return families


class PowerTests(h.BoardTestCase):
    session_name = "power"
    up_args = ("--board", BOARD)
    up_env = {"VTRN_METRICS_PORT": "0"}

    @classmethod
    def board_ready(cls):
        cls.metrics_port = metrics_port(cls.s)

    def power(self):
        doc = self.s.vtrn_json("telemetry", 0)
        self.assertEqual(len(doc["chips"]), 1)
        self.assertIn("power", doc["chips"][0], "chip 0 publishes no power block")
        return doc["chips"][0]["power"]

    def wait_for(self, what, pred, timeout, interval=0.2):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.power()
            if pred(last):
                return last
            time.sleep(interval)
        self.fail(f"timed out after {timeout} s waiting for {what}; last power block: "
                  f"{json.dumps({k: v for k, v in last.items() if k not in ('cores', 'links', 'zones')})}")

    def stop_jobs(self):
        """Cancels every active job (a terminated `submit --wait` client's
        job ends on its own, but not necessarily before the next test)."""
        for j in self.s.vtrn_json("jobs", "--active")["jobs"]:
            self.s.vtrn("job", "cancel", j["id"])
        h.wait_until("no active jobs", lambda: self.s.vtrn_json("jobs", "--active")["jobs"], lambda jobs: not jobs, 30)
        # vtrnd ends a cancelled job at once; the NeuronCore stops at its next
        # chunk boundary, which the power block shows.
        self.wait_for("the NeuronCores to stop running",
                      lambda q: all(c["state"] != "running" and c["utilization_ratio"] < 0.05
                                    for c in q["cores"][1:]), 30, interval=0.3)

    def settle_idle(self):
        self.stop_jobs()
        self.s.vtrn("power", 0, "--cap", 0)
        self.wait_for("the chip to cool back to pstate 0",
                      lambda p: p["pstate"] == 0 and "sw_thermal_slowdown" not in p["clock_event_reason_names"]
                      and p["zones"][0]["temperature_c"] < THROTTLE_C - HYSTERESIS_C, 20)

    def next_window(self, q):
        """The power block of the first refresh window after q's."""
        return self.wait_for("the next refresh window", lambda n: n["refreshes"] > q["refreshes"], 10, interval=0.05)

    def stop_workload(self, p):
        """Ends a workload(): its jobs cancelled first, while still listed,
        then the client, which ends on its own."""
        self.stop_jobs()
        p.terminate()
        p.wait(timeout=30)
        p.stdout.close()
        p.stderr.close()

    def workload(self):
        """A long GEMM job on a NeuronCore (`vtrn submit --wait`); terminating
        the client cancels it (jobs service: a departed client's jobs end)."""
        path = os.path.join(self.s.tmp, "long-gemm.json")
        with open(path, "w") as f:
            json.dump(LONG_JOB, f)
        return self.s.popen("submit", path, "--wait")

    # Units and ranges.

    def test_power_fields_carry_units_and_sane_ranges(self):
        a = self.power()

        def check_keys(doc, where):
            for k, v in doc.items():
                if isinstance(v, list) and v and isinstance(v[0], dict):
                    for i, item in enumerate(v):
                        check_keys(item, f"{where}.{k}[{i}]")
                elif isinstance(v, (int, float)) and not isinstance(v, bool) and k not in UNITLESS:
                    self.assertTrue(k.endswith(UNIT_SUFFIXES), f"{where}.{k} has no unit in its name")
        check_keys(a, "power")
        self.assertEqual(a["device_state"], "D0")
        self.assertEqual(a["pstate_count"], 6)
        self.assertEqual(a["max_frequency_mhz"], 1400)
        self.assertIn(a["frequency_mhz"], (1400, 1200, 1000, 800, 600, 400))
        self.assertEqual(len(a["cores"]), 2)
        self.assertEqual(len(a["zones"]), 2)
        for z in a["zones"]:
            self.assertGreaterEqual(z["temperature_c"], z["ambient_c"] - 0.001)
            self.assertLess(z["temperature_c"], z["critical_c"])
            self.assertAlmostEqual(z["temperature_c"] * 1000, z["temperature_mc"], delta=0.5)
        self.assertEqual(a["zones"][0]["throttle_c"], THROTTLE_C)
        # An idle chip of this model draws a few watts to a few tens of watts.
        self.assertTrue(2.0 < a["power_w"] < 100.0, a["power_w"])
        self.assertAlmostEqual(a["power_w"], a["core_power_w"] + a["uncore_power_w"] + a["hbm_power_w"]
                               + a["link_power_w"], delta=0.01)
        for c in a["cores"]:
            self.assertTrue(0.0 <= c["utilization_ratio"] <= 1.0)
            self.assertIn(c["state"], ("running", "idle", "gated"))
        self.assertGreater(a["refreshes"], 0)
        self.assertGreater(a["refresh_ns"], 0)
        # Half a second of the chip's own clock later.
        b = self.wait_for("0.5 s of chip time", lambda q: q["timestamp_ns"] - a["timestamp_ns"] >= 5e8, 30)
        # Energy grows by about power x time (window power, so loosely).
        dt = (b["timestamp_ns"] - a["timestamp_ns"]) / 1e9
        de = b["energy_j"] - a["energy_j"]
        self.assertTrue(0.3 * a["power_w"] * dt < de < 3.0 * max(a["power_w"], b["power_w"]) * dt,
                        f"energy grew {de} J in {dt} s at {a['power_w']} W")
        self.assertGreater(b["refreshes"], a["refreshes"])

    def test_telemetry_watch_prints_one_json_object_per_line(self):
        r = self.s.vtrn("telemetry", 0, "--json", "--watch", "0.2", "--count", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().split("\n")
        self.assertEqual(len(lines), 3, r.stdout)
        docs = [json.loads(line) for line in lines]
        stamps = [d["time_unix_ms"] for d in docs]
        self.assertEqual(stamps, sorted(stamps))
        energies = [d["chips"][0]["power"]["energy_uj"] for d in docs]
        self.assertEqual(energies, sorted(energies))
        self.assertGreater(energies[-1], energies[0])
        r = self.s.vtrn("telemetry", 0, "--count", "2")
        self.assert_one_error_line(r, h.EXIT_USAGE)

    def test_top_once_fits_an_80_column_terminal(self):
        r = self.s.vtrn("top", "--once")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.rstrip("\n").split("\n")
        self.assertGreaterEqual(len(lines), 3, r.stdout)
        for line in lines:
            self.assertLessEqual(len(line), 80, f"line too wide: {line!r}")
        self.assertNotIn("\033", r.stdout, "ANSI codes when stdout is not a tty")
        self.assertRegex(lines[2], r"^0\s+READY\s+D0\s+\d+\.\dC\s+\d+\.\dW")

    # Thermal throttling.

    def test_load_1_sustained_job_throttles_then_releases(self):
        self.settle_idle()
        idle = self.power()
        p = self.workload()
        try:
            hot = self.wait_for(
                "thermal throttling under load",
                lambda q: "sw_thermal_slowdown" in q["clock_event_reason_names"] and q["pstate"] > 0, 10)
            self.assertGreater(hot["power_average_w"], idle["power_average_w"])
            self.assertGreaterEqual(hot["zones"][0]["max_temperature_c"], THROTTLE_C)
            self.assertTrue(any(c["state"] == "running" or c["utilization_ratio"] > 0.5 for c in hot["cores"]),
                            "no NeuronCore ran the job")
            self.assertLess(hot["frequency_mhz"], 1400)
        finally:
            # Cancel first, while the job is still listed; the client then
            # ends on its own.
            self.stop_workload(p)
        cool = self.wait_for(
            "throttling to release after the load stopped",
            lambda q: q["pstate"] == 0 and "sw_thermal_slowdown" not in q["clock_event_reason_names"], 15)
        self.assertLess(cool["zones"][0]["temperature_c"], THROTTLE_C)
        self.assertGreater(cool["thermal_throttle_ns"], 0)
        self.assertGreater(cool["pstate_changes"], 0)

    def test_load_3_gemm_on_the_tensor_engines_draws_core_power_and_shows_in_telemetry(self):
        # The NeuronCores sleep while their tensor engines work: the power
        # model counts each engine's busy time as its core's (EngineStats).
        self.settle_idle()
        idle = self.power()
        before = self.s.vtrn_json("telemetry", 0)["chips"][0]
        path = os.path.join(self.s.tmp, "long-tensor.json")
        with open(path, "w") as f:
            json.dump(dict(h.LONG_TENSOR_JOB, name="power-tensor"), f)
        p = self.s.popen("submit", path, "--wait")
        try:
            hot = self.wait_for(
                "power above idle with NeuronCores running their engines' GEMM",
                lambda q: q["power_average_w"] > idle["power_average_w"]
                and sum(c["state"] == "running" for c in q["cores"]) >= 2, 15)
            # (The die temperature follows with the zone's time constant: a
            # few seconds of load may not lift it past a die still cooling
            # from the test before, so it is not asserted here.)
            self.assertGreater(hot["core_power_w"], idle["core_power_w"])
            t = h.wait_until("the engines' time in telemetry", lambda: self.s.vtrn_json("telemetry", 0)["chips"][0],
                             lambda t: t["tensor_busy_ns"] > before["tensor_busy_ns"], 10)
            self.assertGreater(t["tensor_modeled_ns"], before["tensor_modeled_ns"])
            # The modeled silicon is faster than this host.
            self.assertLess(t["tensor_modeled_ns"] - before["tensor_modeled_ns"],
                            t["tensor_busy_ns"] - before["tensor_busy_ns"])
        finally:
            self.stop_workload(p)

    def test_load_2_power_cap_is_respected(self):
        self.settle_idle()
        p = self.workload()
        try:
            # The floor: what the load draws at the slowest point (host limit).
            self.s.vtrn("power", 0, "--pstate", 5)
            at5 = self.wait_for("the job running at pstate 5",
                                lambda q: q["pstate"] == 5 and any(c["state"] == "running" for c in q["cores"]), 30)
            # A few refresh windows at pstate 5, each a whole window of load.
            floor_w = max(self.next_window(at5)["power_w"] for _ in range(3))
            self.s.vtrn("power", 0, "--pstate", 0)
            cap_w = round(floor_w + 1.5, 1)
            r = self.s.vtrn_json("power", 0, "--cap", cap_w)
            self.assertAlmostEqual(r["power_cap_w"], cap_w, delta=0.001)
            # The cap loop takes hold (the average has a 1 s time constant);
            # from then on every window stays under it.
            q = self.wait_for("the average under the cap", lambda q: "sw_power_cap" in q["clock_event_reason_names"]
                              and q["power_average_w"] <= cap_w + 0.05, 30)
            samples = []
            for _ in range(8):
                q = self.next_window(q)
                samples.append(q)
            trace = [(q["power_average_w"], q["power_w"], q["pstate"], q["clock_event_reason_names"])
                     for q in samples]
            for q in samples:
                self.assertLessEqual(q["power_average_w"], cap_w + 0.05,
                                     f"average {q['power_average_w']} W over the {cap_w} W cap: {trace}")
            self.assertTrue(any("sw_power_cap" in q["clock_event_reason_names"] for q in samples), trace)
            self.assertTrue(any(max(c["utilization_ratio"] for c in q["cores"]) > 0.2 for q in samples),
                            f"the load did not run: {trace}")
        finally:
            self.stop_workload(p)
            self.s.vtrn("power", 0, "--cap", 0)
            self.s.vtrn("power", 0, "--pstate", 0)

    # Device power states.

    def write_while_suspended(self, client, addr, data, box):
        try:
            box["result"] = client.dma_write(0, addr, data)
        except Exception as e:  # reported by the test thread
            box["error"] = e

    def test_d3hot_then_d0_with_dma_queued_loses_nothing(self):
        rng = random.Random(7)
        data = bytes(rng.getrandbits(8) for _ in range(300 * 1024))
        with h.ApiClient(self.s) as c, h.ApiClient(self.s) as w:
            addr, _ = h.hbm_alloc(c, 0, len(data))
            r = self.s.vtrn_json("power", 0, "--state", "d3")
            self.assertIn(r["device_state"], ("D3hot", "quiescing"))
            down = self.wait_for("D3hot", lambda q: q["device_state"] == "D3hot", 5)
            self.assertEqual(down["frequency_mhz"], 0)
            box = {}
            submitted = lambda: sum(q["host_chains_submitted"] for q in c.dma_stats(0)["queues"])  # noqa: E731
            before = submitted()
            t = threading.Thread(target=self.write_while_suspended, args=(w, addr, data, box))
            t.start()
            h.wait_until("the write on the ring", submitted, lambda n: n > before, 10, 0.01)
            # Several refresh windows of the suspended chip with the write on
            # its ring: a DMA pass in D3hot would have run it by then.
            held = self.wait_for("three refresh windows in D3hot", lambda q: q["refreshes"] >= down["refreshes"] + 3
                                 and q["device_state"] == "D3hot", 30)
            self.assertTrue(t.is_alive(), f"DMA completed while the chip was in D3hot: {box}")
            self.assertEqual(self.power()["device_state"], "D3hot", "queued DMA woke a host-held D3hot")
            r = self.s.vtrn_json("power", 0, "--state", "d0")
            self.assertEqual(r["device_state"], "D0")
            t.join(timeout=30)
            self.assertFalse(t.is_alive(), "DMA still pending after D0")
            self.assertNotIn("error", box)
            self.assertEqual(box["result"]["bytes"], len(data))
            back, _ = c.dma_read(0, addr, len(data))
            self.assertEqual(back, data, "data changed across D3hot")
            after = self.power()
            self.assertGreaterEqual(after["d3hot_entries"], 1)
            self.assertGreater(held["d3hot_ns"], 0)
            self.assertGreaterEqual(after["d3hot_ns"], held["d3hot_ns"])
            h.hbm_free(c, 0, addr)

    def test_dma_engine_traffic_is_charged_as_hbm_energy(self):
        """Bytes the DMA engines move (the default copy path) are HBM reads
        and writes: the power model charges them at the board's pJ/B, as it
        does the cores' copies. The HBM energy over a DMA bench, less the
        D0 background measured just before, is bytes x pJ/B."""
        def sample():
            doc = self.s.vtrn_json("telemetry", 0)["chips"][0]
            self.assertEqual(doc["power"]["device_state"], "D0")
            return doc

        first = sample()
        start = self.next_window(first["power"])
        quiet = self.next_window(self.next_window(start))
        background_w = ((quiet["hbm_energy_j"] - start["hbm_energy_j"]) * 1e9
                        / (quiet["timestamp_ns"] - start["timestamp_ns"]))
        before = sample()
        bench = self.s.vtrn_json("dma", "bench", 0, "--dir", "h2d", "--size", 4 << 20, "--seconds", 0.5)
        self.assertEqual(bench["errors"], 0)
        # Two refreshes later the last bytes are in the power block (the
        # power service takes the DMA counters at its tick).
        last = self.next_window(self.next_window(sample()["power"]))
        after = sample()
        self.assertGreaterEqual(after["power"]["refreshes"], last["refreshes"])
        moved = after["dma_bytes"] - before["dma_bytes"]
        self.assertGreaterEqual(moved, bench["bytes"], "telemetry counts fewer DMA bytes than the bench moved")
        self.assertEqual(after["power"]["d3hot_entries"], before["power"]["d3hot_entries"])
        interval_s = (after["power"]["timestamp_ns"] - before["power"]["timestamp_ns"]) / 1e9
        access_j = (after["power"]["hbm_energy_j"] - before["power"]["hbm_energy_j"]) - background_w * interval_s
        expected_j = moved * HBM_PJ_PER_BYTE * 1e-12
        self.assertTrue(0.8 * expected_j <= access_j <= 1.25 * expected_j,
                        f"{moved} B moved by the DMA engines drew {access_j:.6f} J of HBM access energy, "
                        f"expected {expected_j:.6f} J ({HBM_PJ_PER_BYTE} pJ/B; D0 background {background_w:.4f} W "
                        f"over {interval_s:.3f} s)")

    def test_autosuspend_after_idle_and_resume_on_the_next_request(self):
        data = os.urandom(64 * 1024)
        with h.ApiClient(self.s) as c:
            addr, _ = h.hbm_alloc(c, 0, len(data))
            before = self.power()["autosuspend_count"]
            r = self.s.vtrn_json("power", 0, "--autosuspend-ms", 300)
            self.assertEqual(r["autosuspend_delay_ms"], 300)
            try:
                self.wait_for("autosuspend", lambda q: q["device_state"] == "D3hot", 5, interval=0.1)
                # A DMA doorbell is a resume trigger: the write completes.
                c.dma_write(0, addr, data)
                back, _ = c.dma_read(0, addr, len(data))
                self.assertEqual(back, data)
                q = self.power()
                self.assertGreater(q["autosuspend_count"], before)
            finally:
                self.s.vtrn("power", 0, "--autosuspend-ms", 0)
                self.s.vtrn("power", 0, "--state", "d0")
            self.wait_for("D0", lambda q: q["device_state"] == "D0", 5)
            h.hbm_free(c, 0, addr)

    def test_pstate_limit_lowers_the_clock_and_reports_host_request(self):
        r = self.s.vtrn_json("power", 0, "--pstate", 3)
        try:
            self.assertEqual(r["pstate_limit"], 3)
            self.assertEqual(r["frequency_mhz"], 800)
            q = self.wait_for("the host limit", lambda q: q["pstate"] == 3, 3)
            self.assertIn("host_request", q["clock_event_reason_names"])
        finally:
            self.s.vtrn("power", 0, "--pstate", 0)

    def test_power_cli_errors_are_one_line_with_documented_codes(self):
        self.assert_one_error_line(self.s.vtrn("power", 0, "--state", "d5"), h.EXIT_USAGE)
        self.assert_one_error_line(self.s.vtrn("power", 0, "--cap", 5, "--pstate", 1), h.EXIT_USAGE)
        self.assert_one_error_line(self.s.vtrn("power", 9, "--state", "d0"), h.EXIT_UNKNOWN_CHIP)
        self.assert_one_error_line(self.s.vtrn("power", 0, "--pstate", 9), h.EXIT_FAILED, "pstate")

    # Prometheus exporter.

    def test_metrics_exporter_output_parses_as_prometheus_text(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            self.assertEqual(resp.status, 200)
            self.assertIn("version=0.0.4", resp.headers["Content-Type"])
            text = resp.read().decode()
        fams = parse_prometheus(text)
        for name, typ in (("vtrn_chip_temperature_celsius", "gauge"), ("vtrn_chip_power_watts", "gauge"),
                          ("vtrn_chip_energy_joules_total", "counter"), ("vtrn_chip_frequency_hertz", "gauge"),
                          ("vtrn_chip_uptime_seconds", "gauge"), ("vtrn_chip_heartbeat_total", "counter"),
                          ("vtrn_chip_dma_bytes_total", "counter"), ("vtrn_chip_ecc_errors_total", "counter"),
                          ("vtrn_chip_hbm_used_bytes", "gauge"), ("vtrn_chip_jobs_completed_total", "counter"),
                          ("vtrn_chip_tensor_modeled_seconds_total", "counter"),
                          ("vtrn_core_utilization_ratio", "gauge"), ("vtrn_chip_clock_event_reason", "gauge")):
            self.assertIn(name, fams)
            self.assertEqual(fams[name]["type"], typ, name)
        temp = fams["vtrn_chip_temperature_celsius"]["samples"]
        self.assertIn((("chip", "0"), ("zone", "0")), temp)
        self.assertTrue(20 < temp[(("chip", "0"), ("zone", "0"))] < 95)
        self.assertIn((("chip", "0"),), fams["vtrn_chip_power_watts"]["samples"])
        for s in fams["vtrn_core_utilization_ratio"]["samples"].values():
            self.assertTrue(0 <= s <= 1)
        # Counters only grow between scrapes.
        e1 = fams["vtrn_chip_energy_joules_total"]["samples"][(("chip", "0"),)]

        def energy():
            with urllib.request.urlopen(url, timeout=10) as resp:
                return parse_prometheus(resp.read().decode())["vtrn_chip_energy_joules_total"]["samples"][
                    (("chip", "0"),)]

        h.wait_until("the energy counter to grow", energy, lambda e2: e2 > e1, 30, 0.1)
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/other", timeout=10)
        self.assertEqual(cm.exception.code, 404)

    def test_strict_parser_rejects_malformed_exposition(self):
        good = "# HELP a_total x\n# TYPE a_total counter\na_total{chip=\"0\"} 1\n"
        parse_prometheus(good)
        for bad in (good.replace("a_total{", "a{"),                     # sample outside its family
                    good + "a_total{chip=\"0\"} 2\n",                      # duplicate series
                    good.replace("# TYPE a_total counter", "# TYPE a_total countr"),
                    good.replace("a_total", "a").replace("a{", "a{"),     # counter without _total
                    good.replace('chip="0"', "chip=0"),                   # unquoted label
                    good.rstrip("\n")):                                   # no final newline
            with self.assertRaises((AssertionError, ValueError), msg=bad):
                parse_prometheus(bad)


# The default board: link power states and DVFS on kernels.

WIRED = ((0, 0), (0, 1), (1, 0), (1, 1))  # chip c port p <-> chip 1-c port 1-p
UNWIRED = (2, 3)
LINK_L0_W, LINK_L0S_W, LINK_L1_W = 1.2, 0.6, 0.1  # vtrn,chip binding defaults


def figure(text):
    """Measured figures go to stderr: ctest -V shows them, nothing asserts them."""
    sys.stderr.write(f"figure: {text}\n")


class DefaultBoardPowerTests(h.BoardTestCase):
    session_name = "power-dev2"
    up_args = ("--boot-timeout-ms", 30000)
    up_env = {"VTRN_METRICS_PORT": "0"}

    @classmethod
    def board_ready(cls):
        cls.metrics_port = metrics_port(cls.s)

    def link_ports(self):
        return {(p["chip"], p["port"]): p for p in self.s.vtrn_json("link", "ls")["ports"]}

    def power(self, chip):
        return self.s.vtrn_json("telemetry", chip)["chips"][0]["power"]

    def wait_links(self, what, pred, timeout=30, interval=0.05):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.link_ports()
            if pred(last):
                return last
            time.sleep(interval)
        self.fail(f"timed out after {timeout} s waiting for {what}: " +
                  "; ".join(f"{k}: {last[k]['state']}" for k in WIRED))

    def wait_power(self, chip, what, pred, timeout=10, interval=0.1):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.power(chip)
            if pred(last):
                return last
            time.sleep(interval)
        self.fail(f"timed out after {timeout} s waiting for {what}; links: {last['links']}")

    def all_in(self, state):
        return lambda ps: all(ps[k]["state"] == state for k in WIRED)

    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            return parse_prometheus(r.read().decode())

    # Link power states.

    def test_idle_links_rest_in_l1_and_traffic_wakes_them_without_a_retrain(self):
        ps = self.wait_links("every wired port in L1", self.all_in("L1"))
        for k in WIRED:
            c = ps[k]["counters"]
            self.assertGreaterEqual(c["l0s_entries"], 1, k)
            self.assertGreaterEqual(c["l1_entries"], 1, k)
        # The power block follows: wired ports in L1 at the L1 figure, the
        # unwired ones down and drawing nothing.
        for chip in (0, 1):
            p = self.wait_power(chip, "a whole window of L1",
                                lambda q: all(q["links"][i]["state"] == "L1" and
                                              abs(q["links"][i]["power_w"] - LINK_L1_W) < 0.002
                                              for i in (0, 1)))
            for i in (0, 1):
                link = p["links"][i]
                self.assertGreaterEqual(link["l0s_entries"], 1)
                self.assertGreaterEqual(link["l1_entries"], 1)
                self.assertGreater(link["l0_ns"], 0)
                self.assertGreater(link["l1_ns"], 0)
                if link["l0s_entries"] == 1 and link["l1_entries"] == 1:
                    # One pass since boot: the residencies are the delays,
                    # at the link poll's granularity (L0 includes training).
                    figure(f"chip {chip} port {i}: L0 {link['l0_ns'] / 1e6:.1f} ms before L0s, "
                           f"L0s {link['l0s_ns'] / 1e6:.1f} ms before L1 (board: 1 ms / 100 ms idle)")
            for i in UNWIRED:
                self.assertEqual(p["links"][i]["state"], "down")
                self.assertEqual(p["links"][i]["power_w"], 0)
                self.assertEqual(p["links"][i]["energy_uj"], 0)
            self.assertAlmostEqual(p["link_power_w"], 2 * LINK_L1_W, delta=0.004)
        table = self.s.vtrn("telemetry", 0)
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertRegex(table.stdout, r"link power state\s+L1 L1 down down")
        fams = self.scrape()
        for chip, port in WIRED:
            lbl = (("chip", str(chip)), ("port", str(port)))
            self.assertEqual(fams["vtrn_link_power_state"]["samples"][lbl + (("state", "L1"),)], 1)
            self.assertGreaterEqual(fams["vtrn_link_low_power_entries_total"]["samples"][lbl + (("state", "L1"),)], 1)
            self.assertAlmostEqual(fams["vtrn_link_power_watts"]["samples"][lbl], LINK_L1_W, delta=0.002)

        # Traffic from chip 0 port 0 to chip 1 port 1 while the link sleeps.
        before = ps
        sent = 512 << 10  # the emulated link moves about 1 MB/s: a few refresh windows
        p0 = self.power(0)
        self.s.vtrn_json("link", "send", 0, 0, "--bytes", sent)
        peak_w, t0 = 0.0, time.monotonic()
        while time.monotonic() - t0 < 60:
            q = self.power(0)
            peak_w = max(peak_w, q["links"][0]["power_w"])
            after = self.link_ports()
            if after[(1, 1)]["counters"]["check_good_bytes"] >= before[(1, 1)]["counters"]["check_good_bytes"] + sent:
                break
            time.sleep(0.03)
        transfer_s = time.monotonic() - t0
        # A transfer shorter than a refresh window shows in the next one.
        last = self.power(0)
        for _ in range(2):
            last = self.wait_power(0, "the next refresh window", lambda q: q["refreshes"] > last["refreshes"],
                                   interval=0.02)
            peak_w = max(peak_w, last["links"][0]["power_w"])
        rx = after[(1, 1)]["counters"]
        self.assertEqual(rx["check_good_bytes"] - before[(1, 1)]["counters"]["check_good_bytes"], sent)
        self.assertEqual(rx["check_bad_frames"], before[(1, 1)]["counters"]["check_bad_frames"])
        for k in ((0, 0), (1, 1)):
            c, b = after[k]["counters"], before[k]["counters"]
            self.assertEqual(after[k]["last_recovery"], "L1 exit", k)
            self.assertEqual(c["retrains"], b["retrains"], f"{k}: the L1 exit counted as a retrain")
            self.assertEqual(c["link_downs"], b["link_downs"], k)
        # The link ran in L0 for the transfer, drawing more than in L1.
        p1 = self.power(0)
        self.assertGreater(p1["links"][0]["l0_ns"], p0["links"][0]["l0_ns"])
        # Its energy over the whole interval, not a sampled window (a poll
        # delayed on a loaded host misses the windows of a short transfer).
        start, end = p0["links"][0], p1["links"][0]
        interval_ns = sum(end[k] - start[k] for k in ("down_ns", "l0_ns", "l0s_ns", "l1_ns"))
        average_w = (end["energy_uj"] - start["energy_uj"]) * 1e3 / interval_ns  # uJ / ns = 1e-3 W
        # Its time in L0 alone adds (L0 - L1) x that time over L1; ask for
        # half of it (the rest of the interval is in L0s or L1, above or at L1).
        l0_share = (end["l0_ns"] - start["l0_ns"]) / interval_ns
        self.assertGreater(average_w - LINK_L1_W, 0.5 * (LINK_L0_W - LINK_L1_W) * l0_share,
                           f"the link drew {average_w:.4f} W on average with {l0_share:.1%} of the time in L0")
        figure(f"link 0.0->1.1: {sent >> 10} KiB in {transfer_s:.2f} s, peak port power "
               f"{peak_w:.3f} W, average {average_w:.3f} W over {interval_ns / 1e9:.2f} s "
               f"(L0 {LINK_L0_W} W, L0s {LINK_L0S_W} W, L1 {LINK_L1_W} W)")
        # Idle again: back through L0s into L1, counted once more.
        ps = self.wait_links("the woken link back in L1",
                             lambda q: all(q[k]["state"] == "L1" for k in ((0, 0), (1, 1))))
        for k in ((0, 0), (1, 1)):
            self.assertGreater(ps[k]["counters"]["l0s_entries"], before[k]["counters"]["l0s_entries"], k)
            self.assertGreater(ps[k]["counters"]["l1_entries"], before[k]["counters"]["l1_entries"], k)
        p2 = self.wait_power(0, "the woken port in L1 in the power block",
                             lambda q: q["links"][0]["state"] == "L1")
        figure(f"port 0.0 woken: L0 {(p2['links'][0]['l0_ns'] - p0['links'][0]['l0_ns']) / 1e6:.0f} ms "
               f"(transfer and L1 exit), then L0s "
               f"{(p2['links'][0]['l0s_ns'] - p0['links'][0]['l0s_ns']) / 1e6:.0f} ms before L1")

    def test_link_ls_table_shows_low_power_entries(self):
        self.wait_links("every wired port in L1", self.all_in("L1"))
        r = self.s.vtrn("link", "ls", 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        head, *rows = r.stdout.rstrip("\n").split("\n")
        # Peer and reason cells may hold spaces: count from the right, where
        # the l0s/l1 column comes just before the bit-error rate.
        self.assertEqual(head.split()[-2:], ["l0s/l1", "ber"])
        counters = {}
        for row in rows:
            cells = row.split()
            self.assertEqual(cells[0], "0", row)
            counters[int(cells[1])] = tuple(map(int, cells[-2].split("/")))
        # One row per port of chip 0: the wired ones entered both low-power
        # states, the unwired ones never did.
        self.assertEqual(sorted(counters), [p for c, p in WIRED if c == 0] + list(UNWIRED), r.stdout)
        for port, (l0s, l1) in counters.items():
            if port in UNWIRED:
                self.assertEqual((l0s, l1), (0, 0), f"port {port}")
            else:
                self.assertGreaterEqual(l0s, 1, f"port {port}")
                self.assertGreaterEqual(l1, 1, f"port {port}")

    # DVFS on kernels.

    def run_gemm(self):
        # One NeuronCore (the cores path: DVFS paces cores, not engines), long enough (about 0.2 s at full speed) that the
        # unpaced part of the chip time (dispatch, waking the executor and
        # core 0 again) is small next to the paced kernel chunks.
        doc = self.s.vtrn_json("run", "gemm", "--chip", 0, "--cores", 1, "--m", 384, "--n", 256,
                               "--k", 256, "--dtype", "fp32", "--seed", 5, "--engine", "cores", timeout=180)
        self.assertTrue(doc["verified"], doc)
        self.assertGreater(doc["job"]["chip_run_ns"], 0)
        return doc["job"]["chip_run_ns"]

    def at_pstate(self, pstate):
        r = self.s.vtrn_json("power", 0, "--pstate", pstate)
        self.wait_power(0, f"pstate {pstate}", lambda q: q["pstate"] == pstate, timeout=5)
        return r["frequency_mhz"]

    def test_kernel_time_scales_with_the_operating_point(self):
        status = self.s.vtrn_json("power", 0)
        lowest = status["pstate_count"] - 1
        f_max = self.power(0)["max_frequency_mhz"]
        fast, slow = [], []
        try:
            # Interleaved, so a slow spell of the host hits both sides.
            for _ in range(3):
                self.assertEqual(self.at_pstate(0), f_max)
                fast.append(self.run_gemm())
                q = self.power(0)
                self.assertNotIn("sw_thermal_slowdown", q["clock_event_reason_names"])
                f_min = self.at_pstate(lowest)
                slow.append(self.run_gemm())
        finally:
            self.s.vtrn("power", 0, "--pstate", 0)
        expected = f_max / f_min
        # Best of each side: a run is only ever made slower by the host, so
        # the fastest run of each operating point is the closest to its
        # chip time. How close the ratio comes to the clock ratio is a
        # figure, not a bound: the unpaced part of each run runs at whatever
        # speed the shared host gives the vCPU at that moment (the pacing
        # arithmetic itself is unit-tested: test_power_service delay_for).
        ratio = min(slow) / min(fast)
        figure(f"GEMM chip time at {f_min} MHz / at {f_max} MHz: {ratio:.2f} (clock ratio "
               f"{expected:.2f}; runs {[round(t / 1e6) for t in fast]} / {[round(t / 1e6) for t in slow]} ms)")
        self.assertGreater(expected, 2.0, "the board's lowest operating point is too close to the top to test")
        # Half the clock ratio: a slow spell of the host during every fast
        # run would be needed to reach it without the pacing.
        self.assertGreater(ratio, expected / 2, f"the lowest operating point did not slow the kernel "
                           f"by its clock ratio {expected:.2f} (measured {ratio:.2f})")


if __name__ == "__main__":
    h.main()
