#!/usr/bin/env python3
"""The sandbox graded code runs in (grader/sandbox.py), tried from inside as a hostile submission would:

  test_sandbox.py ROOT

It runs unprivileged (a root grader's command as nobody); the data folder is there, also when its path is a
symlink; .git, solutions/, the kept runs and the rest of the
machine are out of reach; /proc/sys and /sys cannot be written; a write meant for the host (a canary beside this
test's folder) never lands; nothing one sandbox writes is there for the next; no network; and its limits stop a
fork bomb, a memory hog, a full /tmp and a build writing past its cap. Nothing in it outlives a stop, at any moment
of its start: neither the driver's (SIGTERM to the group, SIGKILL 0.2 s later) nor the death of its grader; and
processes.kill_tree finds a process forked, and orphaned to the subreaper, after its first look.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
sys.path.insert(0, str(ROOT / "grader"))
import processes  # noqa: E402
import sandbox  # noqa: E402


def inside(script, writable=(), **limits):
    """(exit code, output) of the shell @p script run in a sandbox with @p writable folders, with
    SPEEDLABS_SANDBOX_<limit> variables."""
    env = dict(os.environ) | {f"SPEEDLABS_SANDBOX_{k.upper()}": str(v) for k, v in limits.items()}
    env.pop("SPEEDLABS_SANDBOX", None)
    done = subprocess.run(sandbox.wrap(["/bin/sh", "-c", script], writable), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


class NeedsASandbox(unittest.TestCase):
    """Skipped, saying why, where no sandbox can be made."""

    @classmethod
    def setUpClass(cls):
        why = sandbox.probe()
        if why:
            raise unittest.SkipTest(f"no sandbox can be made here: {why}")


class Sandbox(NeedsASandbox):
    def test_runs_unprivileged(self):
        code, output = inside("id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
        self.assertEqual(code, 0, output)
        uid, caps, nnp = output.split("\n")[:3]
        self.assertEqual(int(uid), sandbox.SANDBOX_UID if os.geteuid() == 0 else os.geteuid())
        self.assertEqual(caps.split()[1], "0000000000000000", output)
        self.assertEqual(nnp.split()[1], "1", output)

    def test_answers_and_history_are_out_of_reach(self):
        for path in (".git", "solutions", "docs/results", "reference", ".cache"):
            with self.subTest(path=path):
                code, output = inside(f"ls '{ROOT / path}'")
                self.assertNotEqual(code, 0, f"{path} is visible in the sandbox: {output}")
        code, output = inside(f"cat '{ROOT / 'labs' / next((ROOT / 'labs').glob('01_*')).name / 'exercise.h'}'")
        self.assertEqual(code, 0, f"the sources a build needs must be there: {output}")

    def test_the_data_folder_is_there_through_a_symlink(self):
        with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as links:
            Path(data, "input.txt").write_text("First Citizen:")
            os.chmod(data, 0o755)  # readable by the sandbox's user, as a data folder is
            link = Path(links, "datasets")
            link.symlink_to(data)
            os.environ["SPEEDLABS_DATA_DIR"], before = str(link), os.environ.get("SPEEDLABS_DATA_DIR")
            try:
                code, output = inside('cat "$SPEEDLABS_DATA_DIR/input.txt"')
            finally:
                os.environ.pop("SPEEDLABS_DATA_DIR")
                if before is not None:
                    os.environ["SPEEDLABS_DATA_DIR"] = before
            self.assertEqual((code, output), (0, "First Citizen:"))

    def test_proc_sys_and_sys_cannot_be_written(self):
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/printk_ratelimit",
                     "/sys/kernel/mm/transparent_hugepage/enabled"):
            with self.subTest(path=path):
                before = Path(path).read_text() if Path(path).exists() else None
                code, output = inside(f"echo '|/bin/sh /tmp/p' > {path}")
                self.assertNotEqual(code, 0, output)
                if before is not None:
                    self.assertEqual(Path(path).read_text(), before)

    def test_a_write_meant_for_the_host_never_lands(self):
        # A canary: a file the sandbox would make only where it could write outside its own folders.
        with tempfile.TemporaryDirectory() as folder:
            os.chmod(folder, 0o777)
            canary = Path(folder) / "canary"
            for target in (canary, ROOT / "canary-from-the-sandbox", Path("/root/canary-from-the-sandbox")):
                inside(f"echo escaped > '{target}'")
                self.assertFalse(target.exists(), f"the sandbox wrote {target}")

    def test_nothing_a_sandbox_writes_is_there_for_the_next(self):
        # A cache written during ./lab check and read during ./lab grade: /tmp, /var/tmp, /dev/shm and $HOME are
        # private to each sandbox, and nothing else is writable.
        places = ("/tmp/cache", "/var/tmp/cache", "/dev/shm/cache", f"{ROOT}/.venv/cache", f"{ROOT}/labs/cache")
        inside("; ".join(f"echo planted > {p} 2>/dev/null" for p in places))
        code, output = inside("cat " + " ".join(places) + " 2>&1; true")
        self.assertNotIn("planted", output)

    def test_no_network_but_loopback(self):
        code, output = inside("cat /proc/net/dev")
        self.assertEqual(code, 0, output)
        interfaces = [line.split(":")[0].strip() for line in output.splitlines()[2:]]
        self.assertEqual(interfaces, ["lo"], output)

    def test_a_fork_bomb_is_stopped(self):
        code, output = inside("i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i + 1)); done; echo all started",
                              processes=40)
        self.assertNotIn("all started", output)
        self.assertNotEqual(code, 0, output)

    def test_a_memory_hog_is_stopped(self):
        code, output = inside("python3 -c 'b = bytearray(1 << 30); print(\"got it\")'", memory_mb=256)
        self.assertNotEqual(code, 0, output)
        self.assertNotIn("got it", output)

    def test_tmp_is_capped(self):
        code, output = inside("dd if=/dev/zero of=/var/tmp/fill bs=1M count=400 2>&1; echo code=$?")
        self.assertIn("No space left on device", output)

    def test_a_build_writing_past_its_cap_is_stopped(self):
        with tempfile.TemporaryDirectory() as folder:
            if os.geteuid() == 0:
                os.chown(folder, sandbox.SANDBOX_UID, sandbox.SANDBOX_UID)
            code, output = inside(f"dd if=/dev/zero of={folder}/small bs=1M count=4 2>/dev/null && echo wrote",
                                  writable=[folder], write_mb=16)
            self.assertEqual((code, output.strip()), (0, "wrote"), "a write under the cap must pass")
            code, output = inside(f"dd if=/dev/zero of={folder}/fill bs=1M count=64 2>/dev/null; sleep 20; "
                                  "echo survived", writable=[folder], write_mb=16)
            self.assertEqual(code, sandbox.WROTE_TOO_MUCH, output)
            self.assertNotIn("survived", output)
            self.assertIn("SPEEDLABS_SANDBOX_WRITE_MB", output)


# A grader that starts one sandbox running MARK (a sleep of a length no other process has) and waits.
GRADER = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import sandbox
subprocess.Popen(sandbox.wrap(["/bin/sh", "-c", "sleep " + sys.argv[2] + "; :"]))
time.sleep(600)
"""
STOP_AFTER_S = (0.0, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)  # from the grader's start: every step of the start


class NothingOutlivesAStop(NeedsASandbox):
    """Stops a grader at each moment of its sandbox's start, then looks for anything of the sandbox left."""

    def stopped(self, stop):
        """The processes left 1 s after @p stop(grader) ended a grader at each of STOP_AFTER_S."""
        left = []
        for number, delay in enumerate(STOP_AFTER_S):
            mark = f"{900 + number}.{os.getpid()}"
            grader = subprocess.Popen([sys.executable, "-c", GRADER, str(ROOT / "grader"), mark], cwd=ROOT,
                                      start_new_session=True)
            time.sleep(delay)
            stop(grader)
            grader.wait()
            time.sleep(1)
            found = subprocess.run(["pgrep", "-f", f"sleep {mark}"], capture_output=True, text=True).stdout.split()
            left += [f"after {delay} s: " + subprocess.run(["ps", "-o", "pid=,ppid=,pgid=,sid=,args=", "-p", pid],
                                                           capture_output=True, text=True).stdout.strip()
                     for pid in found]
            for pid in found:
                os.kill(int(pid), signal.SIGKILL)
        return left

    def test_the_drivers_stop_ends_every_process(self):
        def like_the_driver(grader):
            os.killpg(grader.pid, signal.SIGTERM)
            time.sleep(0.2)
            try:
                os.killpg(grader.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.assertEqual(self.stopped(like_the_driver), [])

    def test_the_graders_death_ends_its_sandbox(self):
        self.assertEqual(self.stopped(lambda grader: grader.kill()), [])


# A subreaper (as the sandbox's supervisor is) with one child; the child, on SIGUSR1, forks a grandchild that leaves
# its session (as bwrap's does) and says "forked".
SUBREAPER = """
import ctypes, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
time.sleep(600)
"""
FORKS_ON_USR1 = """
import os, signal, sys, time
def fork_away(*_):
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
    os.write(1, b"forked\\n")
signal.signal(signal.SIGUSR1, fork_away)
os.write(1, b"ready\\n")
time.sleep(600)
"""


class KillTree(unittest.TestCase):
    def test_a_process_forked_between_two_looks_is_killed_too(self):
        mark = f"forks-on-usr1-{os.getpid()}"
        root = subprocess.Popen([sys.executable, "-c", SUBREAPER, FORKS_ON_USR1, mark], stdout=subprocess.PIPE)
        self.assertEqual(root.stdout.readline(), b"ready\n")
        real_tree, looks = processes.tree, []

        def fork_after_the_first_look(pid):  # the child forks once the first look has listed the tree
            found = real_tree(pid)
            if not looks:
                os.kill(next(p for p in found if p != pid), signal.SIGUSR1)
                self.assertEqual(root.stdout.readline(), b"forked\n")
            looks.append(found)
            return found

        with mock.patch.object(processes, "tree", fork_after_the_first_look):
            processes.kill_tree(root.pid)
        root.wait()
        time.sleep(0.5)
        left = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split()
        for pid in left:
            os.kill(int(pid), signal.SIGKILL)
        self.assertEqual(left, [], "a process forked after the first look outlived kill_tree")


if __name__ == "__main__":
    unittest.main()
