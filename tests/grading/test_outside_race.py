#!/usr/bin/env python3
"""grader/outside_race.py on synthetic races (no lab built): the score from both sides' times, its share,
scattered or busy segments undecided, too few segments decided only when every one earns the same, a failed side,
a process that used more than its CPU; and, on real processes, that stopping a sandbox's tree stops every process
in it (a child and a grandchild that spin; in a sandbox, a daemon and a process that keeps forking) until it is
let go. The processes themselves race in the CTest
lab13.raced_outside.

  test_outside_race.py ROOT
"""
import subprocess
import sys
import time
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1)).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))
import outside_race  # noqa: E402
import outside_timing  # noqa: E402
import processes  # noqa: E402
import sandbox  # noqa: E402
from outside_race import Segment, Spec  # noqa: E402

SPEC = Spec("make_trainer_speed", full=1.6, zero=1.2, target=7.5, segment_steps=10, step_cap=300)


class Side:
    """A Racer's stand-in: its segments' wall times, quiet and one CPU's worth unless told."""

    def __init__(self, walls, others=0.0, cpu=None, setup=0.0):
        self.segments = [Segment(wall, cpu(wall) if cpu else wall, others) for wall in walls]
        self.setup = setup

    seconds = outside_race.Racer.seconds


def verdict(exercise, best, failed=""):
    with mock.patch.object(outside_race, "race", lambda *args: (exercise, best, failed)), mock.patch("sys.stderr"):
        return outside_race.race_exercise("mine", "ours", SPEC, 60, ())


class Verdicts(unittest.TestCase):
    def test_twice_as_fast_as_the_baseline_earns_every_point(self):
        # 9 segments of 1 s against 5 of 0.9 s: the baseline's 9 s over 4.5 s.
        got = verdict(Side([0.9] * 5), Side([1.0] * 9))
        self.assertTrue(got.startswith("score 1.000 (2.00: the baseline's 9.0 s to the target over your 4.5 s, each with "
                                       "its CPU time before it was ready (90 and 50 steps)"), got)

    def test_the_share_is_linear_between_the_thresholds(self):
        # 1.4, half-way between 1.2 and 1.6: half the points.
        got = verdict(Side([1.0] * 5), Side([1.4] * 5))
        self.assertTrue(got.startswith("score 0.500 (1.40"), got)

    def test_the_baselines_own_speed_earns_nothing(self):
        got = verdict(Side([1.0] * 9), Side([1.0] * 9))
        self.assertTrue(got.startswith("score 0.000 (1.00"), got)

    def test_scattered_segments_are_undecided(self):
        got = verdict(Side([0.5, 1.0] * 3), Side([1.4] * 6))
        self.assertTrue(got.startswith("undecided the segments scattered"), got)

    def test_a_busy_machine_is_undecided_near_a_threshold(self):
        got = verdict(Side([1.0] * 5), Side([1.4] * 5, others=0.7))
        self.assertTrue(got.startswith("undecided other programs used 0.70 of a core"), got)

    def test_a_busy_machine_decides_far_from_the_thresholds(self):
        # 6x the baseline's speed: even had 0.7 of the CPU slowed only the baseline (3.3 times), 1.8 earns full points.
        got = verdict(Side([1.0] * 5), Side([6.0] * 5, others=0.7))
        self.assertTrue(got.startswith("score 1.000 (6.00"), got)

    def test_too_few_segments_decide_only_when_each_earns_the_same(self):
        self.assertTrue(verdict(Side([1.0]), Side([1.0] * 9)).startswith("score 1.000 (9.00"))
        got = verdict(Side([1.0, 1.0]), Side([0.6, 2.0]))
        self.assertTrue(got.startswith("undecided only 2 segments of both sides"), got)

    def test_a_failed_race_is_the_verdict(self):
        why = "failed your trainer in the race: the judged loss is 8.100 after the step cap of 300 steps"
        self.assertEqual(verdict(Side([1.0]), Side([1.0]), failed=why), why)

    def test_work_done_before_ready_is_timed(self):
        # Twice the baseline's speed once racing, after 9 s of training ahead of its "ready": 9.5 s over 13.5 s.
        got = verdict(Side([0.9] * 5, setup=9.0), Side([1.0] * 9, setup=0.5))
        self.assertTrue(got.startswith("score 0.000 (0.70: the baseline's 9.5 s to the target over your 13.5 s"), got)

    def test_more_than_one_cpu_earns_nothing(self):
        got = verdict(Side([0.5] * 5, cpu=lambda wall: 2 * wall), Side([1.4] * 5))
        self.assertTrue(got.startswith("failed your racing process used more than the one CPU"), got)


class Stopping(unittest.TestCase):
    def test_a_stopped_tree_uses_no_cpu_until_it_is_let_go(self):
        # A shell whose child spins and whose grandchild spins too.
        process = subprocess.Popen(["bash", "-c", "bash -c 'while :; do :; done' & while :; do :; done"])
        try:
            time.sleep(0.3)
            self.assertGreaterEqual(len(processes.tree(process.pid)), 2)
            outside_race.stop_tree(process.pid, time.monotonic() + 10)
            states = {state for state, _ in processes.tree(process.pid).values()}
            self.assertEqual(states, {"T"})
            before = outside_timing.tree_cpu(process.pid)
            time.sleep(0.5)
            self.assertEqual(outside_timing.tree_cpu(process.pid), before)
            outside_race.signal_tree(process.pid, outside_race.signal.SIGCONT)
            time.sleep(0.5)
            self.assertGreater(outside_timing.tree_cpu(process.pid), before + 0.2)
        finally:
            outside_race.signal_tree(process.pid, outside_race.signal.SIGKILL)
            process.wait()

    def test_a_helper_that_leaves_its_session_in_a_sandbox_is_stopped_too(self):
        # A daemon (setsid, its parent gone) and a process that keeps forking: in the sandbox's PID namespace
        # each stays under the sandbox's first process, so the stop reaches it.
        why = sandbox.probe()
        if why:
            self.skipTest(f"no sandbox can be made here: {why}")
        script = ("setsid sh -c 'sh -c \"while :; do :; done\" & exit' & "
                  "while :; do sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'; done")
        process = subprocess.Popen(sandbox.wrap(["/bin/sh", "-c", script]), cwd="/")
        try:
            time.sleep(1.0)
            self.assertGreaterEqual(len(processes.tree(process.pid)), 4)  # its supervisor, bwrap twice, the shell, the daemon
            outside_race.stop_tree(process.pid, time.monotonic() + 10)
            states = {state for state, _ in processes.tree(process.pid).values()}
            self.assertEqual(states, {"T"})
            before = outside_timing.tree_cpu(process.pid)
            time.sleep(0.5)
            self.assertEqual(outside_timing.tree_cpu(process.pid), before)
        finally:
            outside_race.signal_tree(process.pid, outside_race.signal.SIGKILL)
            process.wait()

    def test_a_process_whose_first_thread_exited_is_stopped_too(self):
        # Its first thread ends (a raw exit of that thread alone) while another spins: /proc/PID/stat then reads
        # Z for the whole process, and a stop that looked only there left the spinning thread running.
        child = ("import threading, ctypes\n"
                 "def spin():\n    while True: pass\n"
                 "threading.Thread(target=spin).start()\n"
                 "print('ready', flush=True)\n"
                 "ctypes.CDLL(None).syscall(60, 0)\n")  # SYS_exit: this thread only
        process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE)
        try:
            process.stdout.readline()
            time.sleep(0.3)
            self.assertIn("Z", {state for state, _ in processes.tree(process.pid).values()})
            outside_race.stop_tree(process.pid, time.monotonic() + 10)
            before = outside_timing.tree_cpu(process.pid)
            time.sleep(0.5)
            self.assertLess(outside_timing.tree_cpu(process.pid) - before, outside_race.STOPPED_CPU_SLACK)
        finally:
            outside_race.signal_tree(process.pid, outside_race.signal.SIGKILL)
            process.wait()


if __name__ == "__main__":
    unittest.main()
