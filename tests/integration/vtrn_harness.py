"""Shared harness for the vtrn integration tests: runs the real `vtrn` CLI
against a real vtrnd and QEMU, each test class in its own fresh runtime
directory, and makes sure nothing it started outlives the test.

Tests go through the CLI exactly as a user does, and read /proc only to
check what the CLI claims (processes gone, CPU time, file descriptors). The
one exception is ApiClient at the end: a minimal speaker of vtrnd's socket
protocol for requests the CLI has no command for (raw DMA descriptors, an
explicit DMA queue, reading back chosen bytes). Paths come from the environment that
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
import socket
import subprocess
import sys
import tempfile
import time
import unittest

CLI = os.environ.get("VTRN_CLI", "")
VTRND = os.environ.get("VTRN_VTRND", "")
FIRMWARE = os.environ.get("VTRN_TEST_FIRMWARE", "")
BOARD_DTB = os.environ.get("VTRN_TEST_BOARD_DTB", "")
BOARD_DTS = os.environ.get("VTRN_TEST_BOARD_DTS", "")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
EXIT_UNKNOWN_CHIP, EXIT_CHIP_NOT_READY, EXIT_TIMEOUT, EXIT_UNTRUSTED = 4, 5, 6, 7
EXIT_PERMISSION_DENIED, EXIT_BUSY = 8, 9


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


def thread_states(pid):
    """{tid: one-letter state} of every thread of pid ({} once it is gone)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = text[text.rfind(")") + 2]
    return out


def wait_process_at_rest(pid, timeout=30, interval=0.02):
    """Waits until one look at pid finds every one of its threads asleep
    (no thread running or runnable) and returns that look. A QEMU whose
    vCPUs idle in WFI gets there within a few looks (its threads wake only
    for timers); one whose vCPU spins never does. Raises AssertionError with
    the states of the last look otherwise."""
    return wait_until(f"every thread of pid {pid} asleep", lambda: thread_states(pid),
                      lambda st: st and all(v in "SDI" for v in st.values()), timeout, interval)


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


def vtrn_hw_pids(session):
    """Pids of the session's vtrn-hw (the board's engines process): a live
    process running the vtrn-hw binary whose command line or environment
    names the session's runtime directory."""
    found = []
    for pid in processes_mentioning(session.runtime_dir):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if os.path.basename(exe) == "vtrn-hw":
            found.append(pid)
    return found


def mapped_memfds(pid):
    """Distinct memfd names mapped by pid (/proc/<pid>/maps; a process may
    close a memfd once it mapped it), one entry per distinct inode."""
    found = {}
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/memfd:"):
                    found[parts[4]] = parts[5].strip()
    except (FileNotFoundError, ProcessLookupError):
        pass
    return sorted(found.values())


def copy_engine_problems(session, chips):
    """Which engine serves each chip's host DMA queues must be the one
    VTRN_COPY_ENGINE asked for (default engines), as the firmware's boot log
    says; returns the mismatches (a test run that meant to exercise the DMA
    engines must not pass on the CPU copier)."""
    want = os.environ.get("VTRN_COPY_ENGINE", "engines") or "engines"
    problems = []
    for chip in chips:
        lines = session.vtrn_json("logs", chip)["lines"]
        said = [l for l in lines if "copy engine: " in l]
        if not said:
            problems.append(f"chip {chip}: no 'copy engine:' line in its log")
            continue
        got = "engines" if "DMA engines" in said[-1] else "cpu"
        if got != want:
            problems.append(f"chip {chip}: copy engine {got}, VTRN_COPY_ENGINE={want}: {said[-1]}")
    return problems


def shm_files_of(pid):
    """/dev/shm entries named for pid (the link service's region directory
    vtrn-links-<uid>-<vtrnd pid>); chip RAM and BAR2 are memfds and never
    appear there."""
    return sorted(n for n in os.listdir("/dev/shm") if n.endswith(f"-{pid}"))


# A GEMM long enough to be caught running, cancelled or reset on the
# NeuronCores (tens of GFLOP take minutes under TCG): fp8 1024 x 1024 x 2048
# on the cores path with zero-filled inputs (nothing to upload), 4 GFLOP.
# Tests copy it with their own name and timeout.
LONG_GEMM_JOB = {
    "name": "long",
    "timeout_ms": 120000,
    "engine": "cores",
    "buffers": [
        {"name": "a", "bytes": 1024 * 2048},
        {"name": "b", "bytes": 1024 * 2048},
        {"name": "c", "bytes": 1024 * 1024 * 4},
    ],
    "steps": [{"kernel": "gemm", "dtype": "fp8-e4m3", "m": 1024, "n": 1024, "k": 2048,
               "a": "a", "b": "b", "out": "c"}],
}

# The same on the tensor engines: 16 steps of fp32 2048^3 (275 GFLOP, a few
# seconds of four engines on this host), 48 MiB of zero-filled HBM.
LONG_TENSOR_JOB = {
    "name": "long-tensor",
    "timeout_ms": 120000,
    "engine": "tensor",
    "buffers": [{"name": n, "bytes": 2048 * 2048 * 4} for n in ("a", "b", "c")],
    "steps": [{"kernel": "gemm", "dtype": "fp32", "m": 2048, "n": 2048, "k": 2048,
               "a": "a", "b": "b", "out": "c"}] * 16,
}


NOBODY_UID = 65534


class ListeningSocket:
    """A Unix socket listening at `path`, bound as `uid` (a child process
    under `setpriv` when uid is not ours; the socket file is then moved to
    `path`, so the directory can stay ours and only the server's uid is
    foreign). `received()` is how many bytes clients sent it, so a test can
    show that a refused server was told nothing."""

    SERVER = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "s.bind(sys.argv[1]); s.listen(8)\n"
        "print('ready', flush=True)\n"
        "s.settimeout(float(sys.argv[2]))\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        c, _ = s.accept(); c.settimeout(0.5)\n"
        "        try:\n"
        "            while True:\n"
        "                b = c.recv(65536)\n"
        "                if not b: break\n"
        "                n += len(b)\n"
        "        except OSError: pass\n"
        "        c.close()\n"
        "except BaseException: pass\n"
        "print(n, flush=True)\n")

    def __init__(self, path, uid=None, lifetime=20.0):
        self.path = path
        self.bind_dir = None
        argv = [sys.executable, "-c", self.SERVER]
        bind_path = path
        if uid is not None and uid != os.getuid():
            self.bind_dir = tempfile.mkdtemp(prefix="vtrn-foreign-")
            os.chown(self.bind_dir, uid, uid)
            bind_path = os.path.join(self.bind_dir, "s.sock")
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        self.proc = subprocess.Popen([*argv, bind_path, str(lifetime)], stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the listening socket did not start")
        if bind_path != path:
            os.rename(bind_path, path)

    def received(self):
        """Stops the server; the bytes it was sent, summed over clients."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=10)
        lines = out.split()
        return int(lines[-1]) if lines else 0

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.bind_dir:
            shutil.rmtree(self.bind_dir, ignore_errors=True)


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
        # The retired-page store lives with the session, never in the
        # user's ~/.local/state.
        self.env["VTRN_STATE_DIR"] = os.path.join(self.tmp, "state")
        # DMA is checked against live allocations, as in production: a test
        # allocates the HBM it moves data through. "0", not unset, so a
        # VTRN_HBM_DMA_UNCHECKED=1 in the caller's environment cannot turn
        # the check off behind the tests' back.
        self.env["VTRN_HBM_DMA_UNCHECKED"] = "0"
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
        self.known_pids.update(vtrn_hw_pids(self))

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
        """The documented exit code and exactly one line on stderr,
        "vtrn: <what went wrong>", holding every needle."""
        self.assertEqual(r.returncode, code, f"stdout={r.stdout!r} stderr={r.stderr!r}")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"not one error line: stderr={r.stderr!r}")
        self.assertTrue(lines[0].startswith("vtrn: "), f"stderr={r.stderr!r}")
        for needle in needles:
            self.assertIn(needle, lines[0])

    def assert_error_then_chip_logs(self, r, code, *needles):
        """A failed boot: one "vtrn: " error line holding every needle, then
        only indented lines about the chips: each further chip that failed
        ("  chip <id> failed to boot ...") and the chips' last log lines
        ("  chip <id> | <line>"). Returns those lines."""
        self.assertEqual(r.returncode, code, f"stdout={r.stdout!r} stderr={r.stderr!r}")
        first, *details = r.stderr.splitlines() or [""]
        self.assertTrue(first.startswith("vtrn: "), f"stderr={r.stderr!r}")
        for needle in needles:
            self.assertIn(needle, first)
        self.assertTrue(details, f"no chip log lines after the error: {r.stderr!r}")
        for line in details:
            self.assertRegex(line, r"^  chip \d+ (\| |failed to boot )", f"stderr={r.stderr!r}")
        return details


class BoardTestCase(SessionTestCase):
    """A test class that boots one board for all its tests (`vtrn up` with
    up_args and up_env) and brings it down after the last one. A board that
    does not come up fails the class with nothing left behind; after the
    last test, anything `vtrn down` leaves (processes, memfds, socket,
    runtime directory) and whatever end_of_class_problems() returns fail
    the class too."""

    up_args = ()
    up_env = {}
    up_timeout = 120

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            r = cls.s.vtrn("up", *cls.up_args, env=cls.up_env, timeout=cls.up_timeout)
            if r.returncode != 0:
                raise AssertionError(f"vtrn up {' '.join(map(str, cls.up_args))} exited {r.returncode}: {r.stderr}")
            cls.up_stdout = r.stdout
            cls.s.remember_pids()
            cls.board_ready()
        except BaseException:
            # unittest skips tearDownClass when setUpClass raises.
            cls.s.cleanup()
            raise

    @classmethod
    def board_ready(cls):
        """Runs once the board is up, before the first test (waits for
        links, reads what every test needs); raising fails the class and
        brings the board down."""

    @classmethod
    def end_of_class_problems(cls):
        return []

    @classmethod
    def tearDownClass(cls):
        problems = []
        try:
            problems += cls.end_of_class_problems()
        except Exception as e:  # noqa: BLE001 - a dead daemon is itself the finding
            problems.append(f"end-of-class check failed: {e!r}")
        problems += down_and_check(cls.s)
        super().tearDownClass()
        if problems:
            raise AssertionError(f"{cls.__name__} after its tests: " + "; ".join(problems))


def read_held_allocation(test, p):
    """The JSON document a `vtrn mem alloc --hold --json` process p prints
    before it waits; fails `test` when p exits first."""
    text = ""
    while not text.rstrip().endswith("}"):
        line = p.stdout.readline()
        if not line:
            test.fail(f"vtrn mem alloc --hold exited early: {p.stderr.read()}")
        text += line
    return json.loads(text)


def wait_until(what, probe, pred, timeout, interval=0.05):
    """Calls probe() until pred(value) holds and returns that value; raises
    AssertionError naming `what` and the last value after `timeout` seconds.
    The deadline is a generous bound on a condition, never a measurement."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if pred(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {value!r}")
        time.sleep(interval)


def standalone_session(name):
    """The Session of a script that is not a unittest (soak, benchmarks)."""
    require_built()
    become_subreaper()
    return Session(name)


def fault_list(parser, text, known):
    """The comma-separated fault kinds of a --faults option, each checked
    against `known` (argparse error otherwise)."""
    faults = [f for f in text.split(",") if f]
    for f in faults:
        if f not in known:
            parser.error(f"unknown fault {f!r} (choose from {', '.join(known)})")
    return faults


def main():
    """unittest.main for the test scripts, except that a file which runs no
    test fails (a renamed base class or a typo in a test name must not pass
    as "OK, 0 tests")."""
    prog = unittest.main(verbosity=2, exit=False)
    result = prog.result
    if result.testsRun == 0:
        print(f"{sys.argv[0]}: no tests ran", file=sys.stderr)
        sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


# A minimal client of vtrnd's socket, for what the CLI does not expose.
#
# The DMA tests need requests the CLI has no command for (raw DmaCopy with
# hostile descriptors, an explicit queue, DmaWrite/DmaRead of chosen bytes to
# compare end to end). Python here has no protobuf runtime, so this speaks the
# wire format directly: varints, length-delimited fields and a generic decoder
# into {field number: [values]}. Field numbers come from proto/vtrn_api.proto.

API_STATUS_OK, API_STATUS_BAD_REQUEST, API_STATUS_CHIP_NOT_READY, API_STATUS_CHIP_ERROR = 0, 1, 3, 5
DMA_SPACE_HBM, DMA_SPACE_HOST = 0, 1


def _varint(v):
    v &= (1 << 64) - 1  # negative int32/int64 go out as 10-byte two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_encode(fields):
    """fields: list of (number, value); int -> varint, bytes -> length-delimited,
    list of (number, value) -> nested message. Zero ints are still sent (proto3
    readers treat an explicit zero like an absent field)."""
    out = bytearray()
    for num, val in fields:
        if isinstance(val, bool):
            val = int(val)
        if isinstance(val, int):
            out += _varint(num << 3) + _varint(val)
        else:
            payload = pb_encode(val) if isinstance(val, list) else bytes(val)
            out += _varint((num << 3) | 2) + _varint(len(payload)) + payload
    return bytes(out)


def pb_decode(data):
    """{field number: [raw values]}: varints as int, length-delimited as bytes,
    fixed64/fixed32 as bytes."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, i = _read_varint(data, i)
        elif wt == 2:
            n, i = _read_varint(data, i)
            val, i = data[i:i + n], i + n
        elif wt == 1:
            val, i = data[i:i + 8], i + 8
        elif wt == 5:
            val, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt} in field {num}")
        fields.setdefault(num, []).append(val)
    return fields


def _read_varint(data, i):
    shift = v = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def pb_uint(fields, num, default=0):
    return fields.get(num, [default])[-1]


def pb_repeated_uint(fields, num):
    """A repeated varint field, packed (proto3 default) or not."""
    out = []
    for v in fields.get(num, []):
        if isinstance(v, int):
            out.append(v)
        else:
            i = 0
            while i < len(v):
                x, i = _read_varint(v, i)
                out.append(x)
    return out


class ApiError(Exception):
    def __init__(self, status, error):
        super().__init__(f"vtrnd status {status}: {error}")
        self.status, self.error = status, error


class ApiClient:
    """One connection to vtrnd.sock; call() sends a Request body (oneof field
    number + message fields) and returns the Response body's decoded fields,
    raising ApiError for a non-OK status."""

    def __init__(self, session, timeout=60):
        # socket is imported with the module: a connection made with another
        # user's ids (test_tenants) may not be able to read the interpreter's
        # library directory.
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(os.path.join(session.runtime_dir, "vtrnd.sock"))
        self.next_id = 1

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("vtrnd closed the connection")
            buf += chunk
        return bytes(buf)

    def send(self, body_field, body):
        """Sends one request without waiting for its answer; returns its id."""
        rid = self.next_id
        self.next_id += 1
        frame = pb_encode([(1, rid), (body_field, body)])
        self.sock.sendall(len(frame).to_bytes(4, "little") + frame)
        return rid

    def receive(self):
        """The next response on the connection, whichever request it answers:
        (id, status, error text, {body field number: decoded body})."""
        n = int.from_bytes(self._recv_exact(4), "little")
        resp = pb_decode(self._recv_exact(n))
        error = resp.get(3, [b""])[-1].decode(errors="replace")
        bodies = {k: pb_decode(v[-1]) for k, v in resp.items() if k > 3 and isinstance(v[-1], bytes)}
        return pb_uint(resp, 1), pb_uint(resp, 2), error, bodies

    def call_raw(self, body_field, body):
        rid = self.send(body_field, body)
        while True:
            got, status, error, bodies = self.receive()
            if got == rid:
                return status, error, bodies.get(body_field)

    def call(self, body_field, body):
        status, error, decoded = self.call_raw(body_field, body)
        if status != API_STATUS_OK:
            raise ApiError(status, error)
        return decoded if decoded is not None else {}

    # Request oneof numbers 30..35 (DmaWrite .. DmaReset).
    def dma_write(self, chip, hbm_addr, data):
        r = self.call(30, [(1, chip), (2, hbm_addr), (3, data)])
        return {"bytes": pb_uint(r, 1), "chunks": pb_uint(r, 3)}

    def dma_read(self, chip, hbm_addr, length):
        r = self.call(31, [(1, chip), (2, hbm_addr), (3, length)])
        return r.get(1, [b""])[-1], pb_uint(r, 3)

    def dma_copy_raw(self, chip, *, src_addr, dst_addr, length, segments=1, raw=False, queue=-1,
                     src_space=DMA_SPACE_HBM, dst_space=DMA_SPACE_HBM, extra_flags=0):
        """(api status, error text, DmaCopyResponse as a dict or None)."""
        body = [(1, chip), (2, src_space), (3, src_addr), (4, dst_space), (5, dst_addr), (6, length),
                (7, segments), (8, raw), (9, queue), (10, extra_flags)]
        status, error, r = self.call_raw(32, body)
        if r is None:
            return status, error, None
        return status, error, {"dma_status": pb_uint(r, 1), "dma_status_name": r.get(2, [b""])[-1].decode(),
                               "bytes": pb_uint(r, 3), "latency_ns": pb_uint(r, 4), "queue": pb_uint(r, 5),
                               "completions": pb_uint(r, 6)}

    def dma_stats(self, chip):
        r = self.call(34, [(1, chip)])
        names = {2: "descriptors", 3: "chains", 4: "bytes", 5: "errors", 6: "busy_ns", 7: "irqs",
                 9: "device_error", 12: "in_flight", 13: "free_slots", 14: "host_chains_submitted",
                 15: "host_chains_completed", 16: "resets"}
        queues = []
        for raw in r.get(1, []):
            q = pb_decode(raw)
            d = {"queue": pb_uint(q, 1), "errors_by_status": pb_repeated_uint(q, 8),
                 "host_fault": q.get(10, [b""])[-1].decode(), "resetting": bool(pb_uint(q, 11))}
            d.update({name: pb_uint(q, num) for num, name in names.items()})
            queues.append(d)
        return {"queues": queues, "depth": pb_uint(r, 2), "hbm_base": pb_uint(r, 3), "hbm_size": pb_uint(r, 4),
                "window_bytes": pb_uint(r, 5), "window_free_bytes": pb_uint(r, 6),
                "max_desc_bytes": pb_uint(r, 7), "max_chain_descs": pb_uint(r, 8)}

    def dma_reset(self, chip, queue=-1):
        return pb_uint(self.call(35, [(1, chip), (2, queue)]), 1)

    # DmaInject (36): fault 1 = submission index jump, 2 = index backwards,
    # 3 = completion consumer index ahead of the device.
    def dma_inject(self, chip, queue, fault):
        return self.call_raw(36, [(1, chip), (2, queue), (3, fault)])


# HBM (Request oneof 40..44).
def hbm_alloc(client, chip, nbytes, align=0, category=0):
    """(addr, bytes) of a new allocation owned by this connection."""
    r = client.call(40, [(1, chip), (2, nbytes), (3, align), (4, category)])
    return pb_uint(r, 1), pb_uint(r, 2)


def hbm_free(client, chip, addr):
    return pb_uint(client.call(41, [(1, chip), (2, addr)]), 1)


def down_and_check(session):
    """`vtrn down`, then what must be gone: every process the session started
    (vtrnd and the QEMUs, found by pid and by the runtime path), their memfds,
    the socket and the runtime directory. Returns a list of problems."""
    session.remember_pids()
    holders = sorted(p for p in session.known_pids if process_alive(p))
    problems = []
    r = session.vtrn("down", timeout=60)
    if r.returncode != 0:
        problems.append(f"vtrn down exited {r.returncode}: {r.stderr.strip()}")
    for p in holders:
        if process_alive(p):
            problems.append(f"pid {p} still running after down")
        held = [t for t in open_fds(p) if "memfd:" in t]
        if held:
            problems.append(f"pid {p} still holds {held}")
    left = session.leftovers()
    if left:
        problems.append(f"processes left: {left}")
    if os.path.exists(os.path.join(session.runtime_dir, "vtrnd.sock")):
        problems.append("vtrnd.sock left behind")
    if os.path.exists(session.runtime_dir):
        problems.append(f"runtime directory left: {os.listdir(session.runtime_dir)}")
    return problems


def board_health_problems(session, chips):
    """Every listed chip READY without error, and each of its DMA queues idle
    (nothing in flight, no latched device error, no host fault, not resetting)."""
    problems = []
    r = session.vtrn("ls", "--json")
    if r.returncode != 0:
        return [f"vtrn ls exited {r.returncode}: {r.stderr.strip()}"]
    for chip in json.loads(r.stdout)["chips"]:
        if chip["state"] != "READY" or chip["error"]:
            problems.append(f"chip {chip['id']} {chip['state']}: {chip['error']}")
    with ApiClient(session) as c:
        for chip in chips:
            for q in c.dma_stats(chip)["queues"]:
                state = (q["in_flight"], q["device_error"], q["host_fault"], q["resetting"])
                if state != (0, 0, "", False):
                    problems.append(f"chip {chip} queue {q['queue']}: in_flight={state[0]} device_error={state[1]} "
                                    f"host_fault={state[2]!r} resetting={state[3]}")
    return problems
