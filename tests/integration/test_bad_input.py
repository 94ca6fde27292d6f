"""Integration: what the CLI does with bad input and broken set-ups. Every
case must end in one "vtrn: ..." line on stderr, the documented exit code,
and nothing left running or on disk.
"""

import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402


class WithoutDaemon(h.SessionTestCase):
    session_name = "nodaemon"

    def test_every_daemon_command_exits_3_when_vtrnd_is_not_running(self):
        for args in (("ls",), ("info", 0), ("ping", 0), ("logs", 0), ("logs", 0, "-f"),
                     ("telemetry",), ("down",), ("bench", "ping")):
            with self.subTest(args=args):
                r = self.s.vtrn(*args, timeout=30)
                self.assert_one_error_line(r, h.EXIT_NOT_RUNNING, "vtrnd is not running")
                self.assertEqual(r.stdout, "")
        self.assertFalse(os.path.exists(self.s.runtime_dir))

    def test_bad_chip_argument_is_a_usage_error(self):
        for args in (("info", "-1"), ("info", "abc"), ("info",), ("ping", 0, "--count", 0),
                     ("ping", 0, "--wait", "sometimes"), ("up", "--chips", 0)):
            with self.subTest(args=args):
                self.assert_one_error_line(self.s.vtrn(*args), h.EXIT_USAGE)

    def test_sizes_are_bounded_and_the_range_is_named(self):
        # Parsed before anything is sent (no daemon here): a wrapped,
        # negative or huge size is one usage line naming the range, never a
        # C++ allocation error.
        for args, needle in ((("dma", "copy", 0, "--size", "1T"), "--size: '1T' outside 1 B..1 GiB"),
                             (("dma", "copy", 0, "--size", "-1"), "--size: '-1' is not a size"),
                             (("mem", "alloc", 0, "-1"), "'-1' is not a size"),
                             (("mem", "alloc", 0, "2T"), "'2T' outside 1 B..1 TiB"),
                             (("mem", "alloc", 0, "17179869184G"), "outside 1 B..1 TiB"),
                             (("dma", "bench", 0, "--total", "1E"), "--total: '1E' outside 1 B..64 GiB"),
                             (("mem", "read", 0, "0x1000", "--length", "2G"), "outside 1 B..1 GiB"),
                             (("run", "allreduce", "--bytes", "1M2"), "is not a size")):
            with self.subTest(args=args):
                r = self.s.vtrn(*args)
                self.assert_one_error_line(r, h.EXIT_USAGE, needle)
                self.assertNotIn("bad_alloc", r.stderr)

    def test_job_file_paths_stay_beside_the_job_file(self):
        for buf, needle in (({"name": "a", "file": "/etc/passwd"}, "/buffers/0/file: '/etc/passwd' is absolute"),
                            ({"name": "a", "file": "../a.bin"}, "/buffers/0/file: '../a.bin' leaves"),
                            ({"name": "a", "bytes": 4, "output": "/tmp/out.bin"},
                             "/buffers/0/output: '/tmp/out.bin' is absolute"),
                            ({"name": "a", "bytes": 4, "output": "sub/../../out.bin"},
                             "/buffers/0/output: 'sub/../../out.bin' leaves")):
            with self.subTest(buf=buf):
                path = os.path.join(self.s.tmp, "job.json")
                with open(path, "w") as f:
                    json.dump({"buffers": [buf], "steps": [{"kernel": "sum", "m": 1, "n": 1, "a": "a",
                                                            "out": "a"}]}, f)
                r = self.s.vtrn("submit", path)
                self.assert_one_error_line(r, h.EXIT_FAILED, needle)

    def test_missing_qemu_is_reported_and_leaves_nothing(self):
        r = self.s.vtrn("up", env={"VTRN_QEMU": "/nonexistent/qemu-system-aarch64"})
        self.assert_one_error_line(r, h.EXIT_FAILED, "QEMU not found", "/nonexistent/qemu-system-aarch64")
        self.assert_nothing_left()

    def test_missing_board_file_is_a_usage_error(self):
        r = self.s.vtrn("up", "--board", os.path.join(self.s.tmp, "no-such-board.dtb"))
        self.assert_one_error_line(r, h.EXIT_USAGE, "no-such-board.dtb")
        self.assert_nothing_left()


class BrokenBoards(h.SessionTestCase):
    session_name = "badboard"

    def test_garbage_board_file_is_rejected_with_a_message(self):
        path = os.path.join(self.s.tmp, "garbage.dtb")
        with open(path, "wb") as f:
            f.write(bytes(range(256)) * 8)
        r = self.s.vtrn("up", "--board", path)
        # An invalid board is a failed operation (exit 1); a missing one is
        # a usage error (exit 2, above).
        self.assert_one_error_line(r, h.EXIT_FAILED, "garbage.dtb")
        self.assert_nothing_left()

    def test_board_missing_a_required_property_names_it(self):
        with open(h.BOARD_DTS) as f:
            source = f.read()
        broken, n = re.subn(r"\n\s*vtrn,neuron-cores\s*=\s*<[^>]*>;", "\n", source, count=1)
        self.assertEqual(n, 1, "the default board no longer has vtrn,neuron-cores to remove")
        path = os.path.join(self.s.tmp, "no-cores.dts")
        with open(path, "w") as f:
            f.write(broken)
        r = self.s.vtrn("up", "--board", path)
        self.assert_one_error_line(r, h.EXIT_FAILED, "no-cores.dts", "vtrn,neuron-cores: missing")
        self.assert_nothing_left()


class FirmwareThatCannotBoot(h.SessionTestCase):
    session_name = "badfw"

    def test_non_elf_firmware_exits_5_with_log_lines_and_leaves_nothing(self):
        path = os.path.join(self.s.tmp, "not-firmware.elf")
        with open(path, "wb") as f:
            f.write(b"this is not an AArch64 image\n" * 64)
        r = self.s.vtrn("up", "--chips", 2, "--boot-timeout-ms", 2000, env={"VTRN_FIRMWARE": path})
        # One error line, then each failed chip's last log lines (or a note
        # that it printed none), indented.
        self.assert_error_then_chip_logs(r, h.EXIT_CHIP_NOT_READY, "failed to boot")
        self.assertRegex(r.stderr.splitlines()[0], r"^vtrn: chip \d+ failed to boot")
        self.assert_nothing_left()


class UntrustedRuntimeDir(h.SessionTestCase):
    """The CLI tells nothing to a socket it cannot trust: a runtime
    directory another user owns or others can write, or a server running as
    another user; and `vtrn up` refuses such a directory and never follows a
    symlink where it writes vtrnd.log."""

    session_name = "trust"

    def setUp(self):
        shutil.rmtree(self.s.runtime_dir, ignore_errors=True)
        os.mkdir(self.s.runtime_dir, 0o700)
        self.sock = os.path.join(self.s.runtime_dir, "vtrnd.sock")

    def tearDown(self):
        shutil.rmtree(self.s.runtime_dir, ignore_errors=True)

    def serve(self, uid=None):
        server = h.ListeningSocket(self.sock, uid=uid)
        self.addCleanup(server.close)
        return server

    def test_cli_refuses_a_runtime_dir_others_can_write(self):
        server = self.serve()
        os.chmod(self.s.runtime_dir, 0o777)
        r = self.s.vtrn("info", 0)
        self.assert_one_error_line(r, h.EXIT_UNTRUSTED, self.s.runtime_dir, "writable by other users", "777")
        self.assertEqual(server.received(), 0)

    def test_cli_refuses_a_runtime_dir_of_another_user(self):
        server = self.serve()
        os.chown(self.s.runtime_dir, h.NOBODY_UID, h.NOBODY_UID)
        r = self.s.vtrn("ls", "--json")
        self.assert_one_error_line(r, h.EXIT_UNTRUSTED, f"belongs to uid {h.NOBODY_UID}")
        self.assertEqual(json.loads(r.stdout)["error"]["name"], "untrusted")
        self.assertEqual(server.received(), 0)

    def test_cli_refuses_a_symlinked_runtime_dir(self):
        real = os.path.join(self.s.tmp, "real-rt")
        os.rename(self.s.runtime_dir, real)
        os.symlink(real, self.s.runtime_dir)
        self.addCleanup(shutil.rmtree, real, True)
        self.addCleanup(os.unlink, self.s.runtime_dir)
        self.sock = os.path.join(real, "vtrnd.sock")
        server = self.serve()
        r = self.s.vtrn("ping", 0)
        self.assert_one_error_line(r, h.EXIT_UNTRUSTED, "is not a directory")
        self.assertEqual(server.received(), 0)

    def test_cli_refuses_a_server_running_as_another_user(self):
        server = self.serve(uid=h.NOBODY_UID)
        r = self.s.vtrn("info", 0)
        self.assert_one_error_line(r, h.EXIT_UNTRUSTED, f"runs as uid {h.NOBODY_UID}")
        self.assertEqual(server.received(), 0)

    def test_a_trusted_server_is_talked_to(self):
        # The positive case of the three above: our own directory and uid.
        server = self.serve()
        r = self.s.vtrn("info", 0, timeout=60)
        self.assertNotEqual(r.returncode, h.EXIT_UNTRUSTED, r.stderr)
        self.assertGreater(server.received(), 0)

    def test_up_refuses_a_runtime_dir_it_cannot_trust(self):
        for how, change in (("writable by other users", lambda d: os.chmod(d, 0o770)),
                            (f"belongs to uid {h.NOBODY_UID}", lambda d: os.chown(d, h.NOBODY_UID, 0))):
            with self.subTest(how=how):
                os.chmod(self.s.runtime_dir, 0o700)
                os.chown(self.s.runtime_dir, os.getuid(), os.getgid())
                change(self.s.runtime_dir)
                r = self.s.vtrn("up")
                self.assert_one_error_line(r, h.EXIT_UNTRUSTED, self.s.runtime_dir, how)
                self.assertEqual(os.listdir(self.s.runtime_dir), [])
                self.assertEqual(self.s.leftovers(), [])

    def test_up_does_not_follow_a_symlinked_log(self):
        target = os.path.join(self.s.tmp, "victim")
        with open(target, "w") as f:
            f.write("precious\n")
        os.symlink(target, os.path.join(self.s.runtime_dir, "vtrnd.log"))
        r = self.s.vtrn("up")
        self.assert_one_error_line(r, h.EXIT_FAILED, "vtrnd.log")
        with open(target) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertEqual(self.s.leftovers(), [])


if __name__ == "__main__":
    h.main()
