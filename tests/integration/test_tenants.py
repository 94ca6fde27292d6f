"""Integration: a board shared by two users through `vtrn up --group`, as
/dev/nvidia* is shared through a group. The user who started vtrnd (root
here) is the admin; `nobody`, whose group the board is shared with, is a
tenant: it connects, but it cannot free another tenant's memory, and the
requests that change the board for everyone (reset, fault injection,
power, stopping vtrnd) are refused to it with one line and exit 8.

The second user is real: each tenant command runs under
`setpriv --reuid=nobody --regid=nogroup --clear-groups`.
"""

import json
import os
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

TENANT_UID = h.NOBODY_UID
SHARE_GROUP = "nogroup"  # nobody's own group (gid 65534)


class SharedSession(h.SessionTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The tenant must reach the runtime directory inside the session's.
        os.chmod(cls.s.tmp, 0o711)


class SharedBoard(h.BoardTestCase, SharedSession):
    session_name = "tenants"
    up_args = ("--chips", 1, "--group", SHARE_GROUP)

    def tenant(self, *args, timeout=60):
        """`vtrn ARGS` as the second user."""
        env = dict(self.s.env)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        argv = ["setpriv", f"--reuid={TENANT_UID}", f"--regid={TENANT_UID}", "--clear-groups",
                h.CLI, *map(str, args)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)

    def hold(self, size):
        """An allocation the admin holds (`mem alloc --hold`): (process, addr)."""
        p = self.s.popen("mem", "alloc", 0, size, "--hold", "--json")
        self.addCleanup(lambda: (p.terminate(), p.communicate(timeout=30)))
        return p, h.read_held_allocation(self, p)["addr"]

    def test_the_group_reaches_the_board_and_nobody_else_can(self):
        d = os.stat(self.s.runtime_dir)
        sock = os.stat(os.path.join(self.s.runtime_dir, "vtrnd.sock"))
        self.assertEqual((stat.S_IMODE(d.st_mode), d.st_gid), (0o750, TENANT_UID))
        self.assertEqual((stat.S_IMODE(sock.st_mode), sock.st_gid), (0o660, TENANT_UID))
        r = self.tenant("ls", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["chips"][0]["state"], "READY")

    def test_a_tenant_cannot_free_another_tenants_memory(self):
        _, addr = self.hold("1M")
        r = self.tenant("mem", "free", 0, hex(addr))
        self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED, f"allocation at {hex(addr)}",
                                   "belongs to another tenant")
        live = [a["addr"] for a in self.s.vtrn_json("mem", "ls", 0)["allocations"]]
        self.assertIn(addr, live)

    def test_requests_that_change_the_board_are_the_admins(self):
        for args, body in ((("reset", 0), "chip_reset"), (("inject", "hang", 0), "fault_inject"),
                           (("power", 0, "--state", "d3"), "power_set"), (("down",), "shutdown"),
                           (("dma", "reset", 0), "dma_reset")):
            with self.subTest(args=args):
                r = self.tenant(*args)
                self.assert_one_error_line(r, h.EXIT_PERMISSION_DENIED, body, "only its admin (uid 0 or root)")
        # Nothing of it happened: the chip is READY, vtrnd still up.
        doc = self.s.vtrn_json("ls")
        self.assertEqual(doc["chips"][0]["state"], "READY")


if __name__ == "__main__":
    h.main()
