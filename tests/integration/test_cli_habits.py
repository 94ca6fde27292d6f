"""Integration: the habits every `vtrn` command shares, checked across
commands rather than one command at a time: the same exit code for the same
condition (the table in host-tools/README.md), the --json error document on
stdout besides the one stderr line, one interval option for `top` and
`telemetry`, and `vtrn top` as a terminal program, driven in a pseudo
terminal: keys in raw mode, q quits, Ctrl-C and signals and a vtrnd that
stops all leave the terminal as it was.
"""

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "host-tools", "README.md")
ENTER_ALT, LEAVE_ALT = b"\x1b[?1049h", b"\x1b[?1049l"


def readme_exit_codes():
    """{code: name} from the exit-code table of host-tools/README.md."""
    with open(README) as f:
        text = f.read()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.M)
    return {int(code): name for code, name in rows}


# Commands that name a chip, with the chip as {chip}: every one must answer
# an unknown chip with exit 4 and a vtrnd that is not running with exit 3.
CHIP_COMMANDS = (
    ("info", "{chip}"), ("ping", "{chip}"), ("logs", "{chip}"), ("logs", "{chip}", "-f"),
    ("telemetry", "{chip}"), ("telemetry", "{chip}", "--interval", "0.1", "--count", "2"),
    ("power", "{chip}"), ("reset", "{chip}"), ("inject", "hang", "{chip}"),
    ("inject", "ecc", "{chip}", "0x0", "--correctable"), ("dma", "stats", "{chip}"), ("dma", "reset", "{chip}"),
    ("dma", "copy", "{chip}", "--size", "4K"), ("mem", "stats", "{chip}"), ("mem", "ls", "{chip}"),
    ("mem", "alloc", "{chip}", "4K"), ("mem", "read", "{chip}", "0", "--length", "16"),
    ("link", "ls", "{chip}"), ("link", "retrain", "{chip}", "0"), ("jobs", "{chip}"),
    ("run", "add", "--m", "4", "--n", "4", "--chip", "{chip}"), ("bench", "ping", "--chip", "{chip}"),
    ("qmp", "{chip}", "query-status"),  # with --json: raw QMP
)
OTHER_DAEMON_COMMANDS = (("ls",), ("down",), ("top", "--once"), ("top", "--count", "2", "--interval", "0.1"),
                         ("topo",), ("job", "show", "1"), ("telemetry",))


def with_chip(args, chip):
    return tuple(a.format(chip=chip) for a in args)


class JsonErrors:
    """Mixin: the checks of one failed --json command."""

    def assert_json_error(self, r, code, *needles):
        self.assert_one_error_line(r, code, *needles)
        lines = r.stdout.strip().split("\n")
        doc = json.loads(lines[-1])
        self.assertEqual(set(doc), {"error"}, r.stdout)
        err = doc["error"]
        self.assertEqual(err["code"], code, r.stdout)
        self.assertEqual(err["name"], readme_exit_codes()[code], r.stdout)
        # The same words on both channels.
        self.assertEqual("vtrn: " + err["message"], r.stderr.strip(), r.stdout)
        return err


class WithoutDaemon(JsonErrors, h.SessionTestCase):
    session_name = "habits-nodaemon"

    def test_readme_table_matches_the_help_footer(self):
        codes = readme_exit_codes()
        self.assertEqual(sorted(codes), [0, 1, 2, 3, 4, 5, 6, 7, 130])
        self.assertEqual(len(set(codes.values())), len(codes))
        r = self.s.vtrn("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        footer = r.stdout.split("Exit codes:", 1)[1]
        for code in codes:
            self.assertRegex(footer, rf"\b{code} ", f"--help footer does not mention exit code {code}")

    def test_every_command_exits_3_with_a_json_error_when_vtrnd_is_not_running(self):
        for args in [with_chip(a, 0) for a in CHIP_COMMANDS] + list(OTHER_DAEMON_COMMANDS):
            with self.subTest(args=args):
                r = self.s.vtrn(*args, "--json", timeout=30)
                self.assert_json_error(r, h.EXIT_NOT_RUNNING, "vtrnd is not running")

    def test_usage_errors_are_json_too(self):
        for args in (("info", "abc"), ("info",), ("top", "--interval", "0"), ("telemetry", "--count", "2"),
                     ("frobnicate",), ("ping", 0, "--wait", "sometimes")):
            with self.subTest(args=args):
                err = self.assert_json_error(self.s.vtrn(*args, "--json"), h.EXIT_USAGE)
                self.assertIn("see vtrn --help", err["message"])

    def test_without_json_stdout_stays_empty(self):
        r = self.s.vtrn("info", 0)
        self.assert_one_error_line(r, h.EXIT_NOT_RUNNING)
        self.assertEqual(r.stdout, "")


class PtyTop:
    """`vtrn top` on the slave side of a pseudo terminal (stdin and stdout),
    stderr on a pipe; the test is the terminal on the master side."""

    def __init__(self, session, *args):
        self.master, self.slave = pty.openpty()
        # A terminal as a shell leaves it: canonical, echoing, signals on.
        self.before = termios.tcgetattr(self.slave)
        self.out = b""
        self.p = subprocess.Popen([h.CLI, "top", *args], env=session.env, stdin=self.slave,
                                  stdout=self.slave, stderr=subprocess.PIPE, start_new_session=True)

    def pump(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if r:
            try:
                self.out += os.read(self.master, 65536)
            except OSError:
                pass

    def wait_output(self, needle, timeout=30):
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise AssertionError(f"no {needle!r} from top (rc {self.p.poll()}): {self.out[-2000:]!r}")
            self.pump(0.1)

    def frames(self):
        return self.out.count(b"vtrn top ")

    def wait_frames(self, more_than, timeout=30):
        """Reads until top has drawn more than `more_than` frames: a frame
        takes a daemon round trip, which on a loaded machine can outlast any
        fixed pause."""
        deadline = time.monotonic() + timeout
        while self.frames() <= more_than:
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise AssertionError(f"top stopped redrawing after {self.frames()} frames "
                                     f"(rc {self.p.poll()}): {self.out[-2000:]!r}")
            self.pump(0.1)

    def press(self, key):
        os.write(self.master, key)

    def finish(self, timeout=15):
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            self.pump(0.05)
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"top still running after {timeout} s: {self.out[-2000:]!r}")
        self.pump(0)
        err = self.p.stderr.read().decode()
        self.p.stderr.close()
        self.after = termios.tcgetattr(self.slave)
        os.close(self.master)
        os.close(self.slave)
        return self.p.returncode, err


class TopInATerminal(JsonErrors, h.BoardTestCase):
    session_name = "habits-top"
    up_args = ("--chips", 1)

    def start_top(self, *args):
        t = PtyTop(self.s, "--interval", "0.2", *args)
        self.addCleanup(lambda: t.p.poll() is None and t.p.kill())
        t.wait_output(b"CHIP")
        return t

    def assert_restored(self, t):
        self.assertEqual(t.after, t.before, "terminal attributes not restored")
        self.assertIn(ENTER_ALT, t.out)
        self.assertTrue(t.out.rstrip(b"\r\n").endswith(LEAVE_ALT), f"screen not restored: {t.out[-200:]!r}")

    def test_q_quits_with_0_and_restores_the_terminal(self):
        t = self.start_top()
        # Raw mode while it runs: no echo, no line buffering.
        now = termios.tcgetattr(t.slave)
        self.assertFalse(now[3] & termios.ICANON, "top left the terminal in canonical mode")
        self.assertFalse(now[3] & termios.ECHO, "top left echo on")
        t.wait_output(b"(q quits)")
        shown = t.frames()
        t.press(b"x")  # ignored: top goes on drawing
        t.wait_frames(shown)
        self.assertIsNone(t.p.poll(), "a key other than q ended top")
        t.press(b"q")
        rc, err = t.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        self.assert_restored(t)

    def test_ctrl_c_exits_130_and_restores_the_terminal(self):
        t = self.start_top()
        t.press(b"\x03")
        rc, err = t.finish()
        self.assertEqual(rc, 130, err)
        self.assertEqual(err, "vtrn: interrupted\n")
        self.assert_restored(t)

    def test_sigterm_restores_the_terminal(self):
        t = self.start_top()
        t.p.send_signal(signal.SIGTERM)
        rc, err = t.finish()
        self.assertEqual(rc, 128 + signal.SIGTERM, err)
        self.assert_restored(t)

    def test_columns_stay_in_place_and_every_number_has_a_unit(self):
        r = self.s.vtrn("top", "--interval", "0.2", "--count", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        frames = [f.split("\n") for f in r.stdout.strip("\n").split("\n\n")]
        self.assertEqual(len(frames), 3, r.stdout)
        header = frames[0][1]
        self.assertEqual([f[1] for f in frames], [header] * 3)
        names = header.split()
        self.assertEqual(names, ["CHIP", "STATE", "DEV", "TEMP", "POWER", "ENERGY", "P", "FREQ", "CORE%",
                                 "DMA/s", "LIMIT"])
        spans = [m.span() for m in re.finditer(r"\S+", header)]
        units = {"TEMP": r"\d+\.\dC", "POWER": r"\d+(\.\d)?W", "ENERGY": r"\d+(\.\d)?k?J",
                 "FREQ": r"(\d+MHz|off)", "CORE%": r"\d+%", "DMA/s": r"(-|\d+(\.\d+)?[MG]B/s)"}
        for n, f in enumerate(frames):
            for row in f[2:]:
                cells = list(re.finditer(r"\S+", row))
                self.assertEqual(len(cells), len(names), row)
                for name, (start, end), cell in zip(names, spans, cells):
                    # A cell sits under its header: it overlaps the header's span.
                    self.assertTrue(cell.start() < end and cell.end() > start,
                                    f"{name} cell {cell.group()!r} at {cell.span()} not under {start}-{end}: {row!r}")
                    if name in units and not (name == "DMA/s" and n > 0 and cell.group() == "-"):
                        self.assertRegex(cell.group(), "^" + units[name] + "$", f"{name} in {row!r}")
                self.assertLessEqual(len(row), 80, row)
            # From the second frame on, the DMA rate has two samples.
            if n > 0:
                self.assertRegex(f[2], r"[MG]B/s", f"no DMA rate in frame {n}")

    def test_top_and_telemetry_take_the_same_interval_options(self):
        for cmd in (("top",), ("telemetry", 0)):
            for flag in ("--interval", "-i", "--watch"):
                with self.subTest(cmd=cmd, flag=flag):
                    r = self.s.vtrn(*cmd, flag, "0.1", "--count", "2", "--json")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    docs = [json.loads(line) for line in r.stdout.strip().split("\n")]
                    self.assertEqual(len(docs), 2, r.stdout)
                    self.assertEqual(docs[0]["chips"][0]["chip"], 0)

    def test_every_chip_command_exits_4_with_a_json_error_for_an_unknown_chip(self):
        for args in CHIP_COMMANDS:
            args = with_chip(args, 7)
            with self.subTest(args=args):
                r = self.s.vtrn(*args, "--json", timeout=60)
                self.assert_json_error(r, h.EXIT_UNKNOWN_CHIP, "unknown chip 7", "board has chip 0")
        # Without --json: the same line, nothing on stdout.
        r = self.s.vtrn("info", 7)
        self.assert_one_error_line(r, h.EXIT_UNKNOWN_CHIP, "unknown chip 7")
        self.assertEqual(r.stdout, "")


class WhenVtrndStops(JsonErrors, h.SessionTestCase):
    """top and telemetry --interval running when the board goes down (the
    test brings its own board up and down)."""

    session_name = "habits-stop"

    def test_top_and_telemetry_watch_both_exit_3_and_top_restores_the_terminal(self):
        r = self.s.vtrn("up", "--chips", 1, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        # As scripts/quickstart.sh does right after up: the chips' logs are
        # there at once (issue 16 saw `logs 0 --tail 8` print nothing once).
        for chip in (0,):
            r = self.s.vtrn("logs", chip, "--tail", 8)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stdout.splitlines()), 8, r.stdout)
        t = PtyTop(self.s, "--interval", "0.2")
        self.addCleanup(lambda: t.p.poll() is None and t.p.kill())
        t.wait_output(b"CHIP")
        watch = self.s.popen("telemetry", "0", "--watch", "0.2", "--json")
        self.addCleanup(lambda: watch.poll() is None and watch.kill())
        self.assertTrue(watch.stdout.readline(), "telemetry --watch printed nothing")
        r = self.s.vtrn("down", timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rc, err = t.finish(timeout=30)
        self.assertEqual(rc, h.EXIT_NOT_RUNNING, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"^vtrn: vtrnd (is not running|stopped)")
        self.assertEqual(t.after, t.before, "terminal attributes not restored")
        self.assertTrue(t.out.rstrip(b"\r\n").endswith(LEAVE_ALT), t.out[-200:])
        out, werr = watch.communicate(timeout=30)
        self.assertEqual(watch.returncode, h.EXIT_NOT_RUNNING, werr)
        # JSON Lines to the end: the last line is the error document.
        last = json.loads(out.strip().split("\n")[-1])
        self.assertEqual(last["error"]["code"], h.EXIT_NOT_RUNNING)
        self.assertEqual(last["error"]["name"], "not_running")
        self.assert_nothing_left()


if __name__ == "__main__":
    h.main()
