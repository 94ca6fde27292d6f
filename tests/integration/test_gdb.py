"""Integration: debugging a running chip with gdb-multiarch, as
firmware/README.md tells a user to. `vtrn up --gdb --gdb-port 0` gives the
chip a gdbstub; gdb attaches in batch mode with the image's symbols, takes a
backtrace of every core, reads registers and a firmware global, detaches, and
the chip still answers.

What it guards: a backtrace must end at the outermost frame (fw_main on
core 0, fw_secondary_main on the others). Without the CFI that marks those
frames (boot/start.S, fw_main, fw_secondary_main, and the image's
.debug_frame), gdb unwinds fw_main into itself forever: thousands of frames
of `fw_main () at main.cpp`.
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vtrn_harness as h  # noqa: E402

# More than any real call chain of the firmware; a bt that reaches it did not end.
MAX_FRAMES = 40


def thread_backtraces(out):
    """{gdb thread number: [frame lines]} from `thread apply all bt N`."""
    threads, current = {}, None
    for line in out.splitlines():
        m = re.match(r"^Thread (\d+) ", line)
        if m:
            current = threads.setdefault(int(m.group(1)), [])
        elif current is not None and re.match(r"^#\d+ ", line):
            current.append(line)
        elif current is not None and "More stack frames follow" in line:
            current.append(line)
    return threads


class GdbAttach(h.SessionTestCase):
    session_name = "gdbattach"

    def test_bt_ends_on_every_core_and_the_chip_survives_a_detach(self):
        gdb = shutil.which("gdb-multiarch")
        self.assertIsNotNone(gdb, "gdb-multiarch is not installed (scripts/install-deps.sh installs it)")
        r = self.s.vtrn("up", "--chips", 1, "--gdb", "--gdb-port", 0, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.s.remember_pids()
        chip = self.s.vtrn_json("ls")["chips"][0]
        port = chip["gdb_port"]
        info = self.s.vtrn_json("info", 0)
        cores = info["neuron_cores"]
        # Under a debugger vtrnd's automatic recovery is off (a chip held at a
        # breakpoint is not hung), and info says the watchdog is off.
        self.assertEqual(info["watchdog_timeout_ms"], 0, info["watchdog_timeout_ms"])
        # The executors report online after READY; attach once every core runs its loop.
        h.wait_until("every core online", lambda: self.s.vtrn_json("logs", 0),
                     lambda d: any("NeuronCores online" in l for l in d["lines"]), 30.0, 0.1)

        elf = os.environ["VTRN_TEST_FIRMWARE"]
        cmd = [gdb, "-nx", "-batch", elf,
               "-ex", "set pagination off",
               "-ex", "set confirm off",
               "-ex", f"target remote 127.0.0.1:{port}",
               "-ex", "info threads",
               "-ex", f"thread apply all bt {MAX_FRAMES}",
               "-ex", "info registers pc sp x30",
               "-ex", "print sizeof(fw::g_panic_record)",
               "-ex", "print/x fw::g_panic_record.magic",
               # Held at a stop for three times the shortest watchdog
               # timeout (1 s): the heartbeat stands still, and no reset may
               # take the chip away from the debugger.
               "-ex", "shell sleep 3",
               "-ex", "detach"]
        g = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        out = g.stdout + g.stderr
        self.assertEqual(g.returncode, 0, out[-3000:])

        bts = thread_backtraces(out)
        self.assertEqual(len(bts), cores, f"one backtrace per vCPU expected:\n{out[-3000:]}")
        for thread, frames in bts.items():
            self.assertTrue(frames, f"thread {thread}: no frames\n{out[-3000:]}")
            self.assertLess(len(frames), MAX_FRAMES, f"thread {thread}: bt did not end\n" + "\n".join(frames[:6]))
            self.assertFalse(any("More stack frames follow" in f for f in frames), frames[-3:])
            outer = frames[-1]
            self.assertRegex(outer, r"\b(fw_main|fw_secondary_main)\b",
                             f"thread {thread}: outermost frame is not the firmware's entry:\n" + "\n".join(frames))
        self.assertNotIn("Backtrace stopped", out)
        self.assertRegex(out, r"(?m)^pc\s+0x[0-9a-f]+")
        self.assertRegex(out, r"(?m)^sp\s+0x[0-9a-f]+")
        self.assertRegex(out, r"\$\d+ = \d+")  # sizeof a firmware global: symbols resolved
        self.assertNotIn("No symbol", out)
        self.assertRegex(out, r"\(process \d+\) detached|Detaching from program")

        # Detached, the chip runs on, in the same boot: it answers, and its heartbeat moves.
        ping = self.s.vtrn("ping", 0, "--count", 3)
        self.assertEqual(ping.returncode, 0, ping.stderr)
        after = self.s.vtrn_json("ls")["chips"][0]
        self.assertEqual((after["resets"], after["boot_generation"], after["state"]),
                         (chip["resets"], chip["boot_generation"], "READY"),
                         f"the chip was reset while gdb held it: {after['last_reset_reason']}")
        h.wait_until("the heartbeat to move after detach", lambda: self.s.vtrn_json("ls")["chips"][0],
                     lambda d: d["heartbeat"] > after["heartbeat"], 10.0, 0.1)
        down = self.s.vtrn("down")
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assert_nothing_left()


if __name__ == "__main__":
    h.main()
