"""Shared harness for the vtrn integration tests: runs the real `vtrn` CLI
against a real vtrnd and QEMU, each test class in its own fresh runtime
directory, and makes sure nothing it started outlives the test.

It is not a client library: tests go through the CLI exactly as a user
does, and read /proc only to check what the CLI claims (processes gone,
CPU time, file descriptors). Paths come from the environment that
tests/CMakeLists.txt sets: VTRN_CLI, VTRN_VTRND, VTRN_TEST_FIRMWARE,
VTRN_TEST_BOARD_DTB, VTRN_TEST_BOARD_DTS.

The runtime directory is made here with mkdtemp (under $TMPDIR or /tmp)
rather than inside the build tree: a Unix socket path must fit in 108
bytes, and chip<N>/ivshmem.sock under a deep build directory would not.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

CLI = os.environ.get("VTRN_CLI", "")
VTRND = os.environ.get("VTRN_VTRND", "")
FIRMWARE = os.environ.get("VTRN_TEST_FIRMWARE", "")
BOARD_DTB = os.environ.get("VTRN_TEST_BOARD_DTB", "")
BOARD_DTS = os.environ.get("VTRN_TEST_BOARD_DTS", "")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
EXIT_UNKNOWN_CHIP, EXIT_CHIP_NOT_READY, EXIT_TIMEOUT = 4, 5, 6


def become_subreaper():
    """vtrn starts vtrnd detached and exits, so vtrnd is re-parented. Adopting
    it here (PR_SET_CHILD_SUBREAPER) instead of leaving it to the machine's
    init, which in a container may never reap, keeps zombies from piling up
    across test runs; reap_children() collects them."""
    PR_SET_CHILD_SUBREAPER = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap_children():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def require_built():
    """Skips nothing: a missing binary is a build problem and must fail."""
    for name, path in (("VTRN_CLI", CLI), ("VTRN_VTRND", VTRND), ("VTRN_TEST_FIRMWARE", FIRMWARE)):
        if not path or not os.path.exists(path):
            raise RuntimeError(f"{name}={path!r} does not exist; build vtrn, vtrnd and the firmware first")


def process_alive(pid):
    """True while pid runs; a zombie counts as gone (it holds no fds or memory,
    and the init of a container may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = text[text.rfind(")") + 2]
    return state not in "ZX"


def open_fds(pid):
    """Targets of /proc/<pid>/fd/*, or [] when the process (or its fd table) is gone."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    out = []
    for n in names:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{n}"))
        except OSError:
            pass
    return out


def cpu_seconds(pid):
    """utime + stime of pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes_mentioning(text):
    """Pids of live processes whose command line or environment contains text
    (QEMU names its chip directory on the command line; vtrnd inherits
    VTRN_RUNTIME_DIR)."""
    found = []
    needle = text.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        blob = b""
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{part}", "rb") as f:
                    blob += f.read()
            except OSError:
                pass
        if needle in blob and process_alive(int(entry)):
            found.append(int(entry))
    return found


class Session:
    """One fresh runtime directory and the vtrn invocations that use it."""

    def __init__(self, name):
        self.tmp = tempfile.mkdtemp(prefix=f"vtrn-{name}-")
        self.runtime_dir = os.path.join(self.tmp, "rt")
        self.env = dict(os.environ)
        self.env["VTRN_RUNTIME_DIR"] = self.runtime_dir
        self.env["VTRN_VTRND"] = VTRND
        self.env["VTRN_FIRMWARE"] = FIRMWARE
        self.env.pop("VTRN_QEMU", None)
        self.known_pids = set()

    def vtrn(self, *args, env=None, timeout=90):
        run_env = dict(self.env)
        run_env.update(env or {})
        return subprocess.run([CLI, *map(str, args)], env=run_env, capture_output=True, text=True,
                              timeout=timeout)

    def vtrn_json(self, *args, timeout=90):
        r = self.vtrn(*args, "--json", timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"vtrn {' '.join(map(str, args))} --json exited {r.returncode}: {r.stderr}")
        return json.loads(r.stdout)

    def popen(self, *args):
        return subprocess.Popen([CLI, *map(str, args)], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def vtrnd_pid(self):
        try:
            with open(os.path.join(self.runtime_dir, "vtrnd.pid")) as f:
                return int(f.read().strip())
        except (FileNotFoundError, ValueError):
            return None

    def remember_pids(self):
        """Records vtrnd's and every QEMU's pid so cleanup can find them."""
        pid = self.vtrnd_pid()
        if pid:
            self.known_pids.add(pid)
        r = self.vtrn("ls", "--json")
        if r.returncode == 0:
            for chip in json.loads(r.stdout)["chips"]:
                if chip["qemu_pid"] > 0:
                    self.known_pids.add(chip["qemu_pid"])

    def leftovers(self):
        """Live processes that belong to this session, found two ways."""
        return sorted(set(p for p in self.known_pids if process_alive(p))
                      | set(processes_mentioning(self.tmp)))

    def cleanup(self):
        """Best effort after a failed test: ask vtrnd, then signal our own pids."""
        if os.path.exists(os.path.join(self.runtime_dir, "vtrnd.sock")):
            try:
                self.vtrn("down", timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.leftovers()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while pids and time.monotonic() < deadline and any(process_alive(p) for p in pids):
                time.sleep(0.05)
        reap_children()
        shutil.rmtree(self.tmp, ignore_errors=True)


class SessionTestCase(unittest.TestCase):
    """A test class with one Session, cleaned up whatever happens."""

    session_name = "it"

    @classmethod
    def setUpClass(cls):
        require_built()
        become_subreaper()
        cls.s = Session(cls.session_name)

    @classmethod
    def tearDownClass(cls):
        cls.s.cleanup()

    def assert_nothing_left(self, s=None):
        s = s or self.s
        self.assertEqual(s.leftovers(), [], "processes left running")
        self.assertFalse(os.path.exists(s.runtime_dir),
                         f"runtime directory left behind: {os.listdir(s.runtime_dir) if os.path.isdir(s.runtime_dir) else ''}")

    def assert_one_error_line(self, r, code, *needles):
        self.assertEqual(r.returncode, code, f"stdout={r.stdout!r} stderr={r.stderr!r}")
        first = r.stderr.splitlines()[0] if r.stderr else ""
        self.assertTrue(first.startswith("vtrn: "), f"stderr={r.stderr!r}")
        for needle in needles:
            self.assertIn(needle, r.stderr)
