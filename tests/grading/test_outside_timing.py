#!/usr/bin/env python3
"""scripts/driver/outside_timing.py's verdicts on synthetic timings (no lab built): a fraction scored by the
thresholds, a busy machine or scattered rounds undecided unless even the most the load could do leaves the share
the same, a wrong timed output, a process that used more than its
CPU and a failed process scoring nothing. The processes themselves are timed by the CTests labNN.timed_outside.

  test_outside_timing.py ROOT
"""
import sys
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1)).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "driver"))
import outside_timing  # noqa: E402
from outside_timing import Run  # noqa: E402


class Timings:
    """time_one's stand-in: each side's wall time (s) from a function of the round, quiet, one CPU's worth."""

    def __init__(self, exercise, best, inputs=0.2, load=0.0, exercise_cpu=None, why=""):
        self.walls = {"exercise": exercise, "best": best, "inputs": inputs}
        self.load, self.exercise_cpu, self.why, self.calls = load, exercise_cpu, why, 0

    def __call__(self, program, name, side, cpu, budget, hidden):
        self.calls += 1
        wall = self.walls[side](self.calls) if callable(self.walls[side]) else self.walls[side]
        used = self.exercise_cpu(wall) if side == "exercise" and self.exercise_cpu else wall
        return Run(wall=wall, cpu=used, busy=used + self.load * wall, outputs=b"x", seed=1,
                   why=self.why if side == "exercise" else "")


def verdict(timings, wrong=""):
    with mock.patch.object(outside_timing, "time_one", timings), \
            mock.patch.object(outside_timing, "check", lambda reference, name, run: wrong), \
            mock.patch("sys.stderr"):
        return outside_timing.time_exercise("mine", "ours", "x_speed", 0.5, 0.25, 60, ())


class Verdicts(unittest.TestCase):
    def test_as_fast_as_the_best_earns_every_point(self):
        self.assertTrue(verdict(Timings(exercise=0.3, best=0.3)).startswith("score 1.000 (1.00 of the best's"))

    def test_the_share_is_linear_between_the_thresholds(self):
        # The exercise takes 0.3 s beyond the inputs' 0.2 s, the best 0.1125: a fraction of 0.375, half the points.
        self.assertTrue(verdict(Timings(exercise=0.5, best=0.3125)).startswith("score 0.500 (0.38"))

    def test_the_inputs_time_is_taken_off_both_sides(self):
        # 1.2 s against 0.7 s in all, but 1.0 against 0.5 beyond the inputs: half the best's speed, full points.
        self.assertTrue(verdict(Timings(exercise=1.2, best=0.7)).startswith("score 1.000 (0.50"))

    def test_a_busy_machine_is_undecided_and_said(self):
        got = verdict(Timings(exercise=0.3, best=0.3, load=0.9))
        self.assertTrue(got.startswith("undecided other programs used 0.90 of a core"), got)

    def test_scattered_rounds_are_undecided(self):
        got = verdict(Timings(exercise=lambda n: 0.3 if n % 2 else 0.6, best=0.3))
        self.assertTrue(got.startswith("undecided the rounds scattered"), got)

    def test_scatter_wholly_inside_the_no_points_band_still_decides(self):
        # 0.05-0.10 of the best's speed, scattered far past 25%, all of it below the 0.25 that earns anything.
        got = verdict(Timings(exercise=lambda n: 2.2 if n % 2 else 1.2, best=0.3))
        self.assertTrue(got.startswith("score 0.000"), got)

    def test_far_inside_the_no_points_band_decides_on_a_busy_machine(self):
        # 0.08 of the best's speed with other programs on 0.6 of the CPU: had they slowed only the exercise (by at
        # most 1 / 0.4 = 2.5 times), it would still be at 0.20, below the 0.25 that earns anything.
        got = verdict(Timings(exercise=1.45, best=0.3, load=0.6))
        self.assertTrue(got.startswith("score 0.000 (0.08"), got)

    def test_far_inside_the_full_points_band_decides_on_a_busy_machine(self):
        # Twice the best's speed under the same load: at least 0.8 however the load fell, above the 0.5 for full points.
        got = verdict(Timings(exercise=0.25, best=0.3, load=0.6))
        self.assertTrue(got.startswith("score 1.000 (2.00"), got)

    def test_near_a_threshold_a_busy_machine_stays_undecided(self):
        # 0.125 of the best's speed under that load: 2.5 times that (0.31) would have earned points.
        got = verdict(Timings(exercise=1.0, best=0.3, load=0.6))
        self.assertTrue(got.startswith("undecided other programs used 0.60 of a core"), got)

    def test_a_wrong_timed_output_earns_nothing(self):
        got = verdict(Timings(exercise=0.21, best=0.3), wrong="output '0.sum' differs")
        self.assertEqual(got, "failed a timed result is wrong, so its speed earns nothing: output '0.sum' differs")

    def test_more_than_one_cpu_earns_nothing(self):
        # Helpers beside the timed calls: twice the CPU time of the wall time, in every round.
        got = verdict(Timings(exercise=0.25, best=0.3, exercise_cpu=lambda wall: 2 * wall))
        self.assertTrue(got.startswith("failed your timed process used more than the one CPU"), got)

    def test_a_failed_process_earns_nothing(self):
        got = verdict(Timings(exercise=0.3, best=0.3, why="it did not finish within its budget"))
        self.assertEqual(got, "failed your timed process: it did not finish within its budget")


if __name__ == "__main__":
    unittest.main()
