#!/usr/bin/env python3
"""grader/outside_timing.py's verdicts on synthetic timings (no lab built): a fraction scored by the
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
sys.path.insert(0, str(ROOT / "grader"))
import outside_timing  # noqa: E402
from outside_timing import Run  # noqa: E402


class Timings:
    """time_one's stand-in: each side's wall time (s) from a function of the round, quiet, every CPU it is given
    busy all the time (its CPUs are recorded)."""

    def __init__(self, exercise, best, inputs=0.2, load=0.0, exercise_cpu=None, why=""):
        self.walls = {"exercise": exercise, "best": best, "inputs": inputs}
        self.load, self.exercise_cpu, self.why, self.calls, self.cpus = load, exercise_cpu, why, 0, set()
        self.seeds = []

    def __call__(self, program, name, side, cpus, budget, hidden, seed):
        self.calls += 1
        self.cpus.add(tuple(cpus))
        self.seeds.append(seed)
        wall = self.walls[side](self.calls) if callable(self.walls[side]) else self.walls[side]
        used = self.exercise_cpu(wall) if side == "exercise" and self.exercise_cpu else len(cpus) * wall
        return Run(wall=wall, cpu=used, window_cpu=used, busy=used + self.load * wall, outputs=b"x", seed=seed,
                   why=self.why if side == "exercise" else "")


def verdict(timings, wrong="", cpus=1, available=(0, 1)):
    with mock.patch.object(outside_timing, "time_one", timings), \
            mock.patch.object(outside_timing, "check", lambda reference, name, run, best: wrong), \
            mock.patch.object(outside_timing.os, "sched_getaffinity", lambda pid: set(available)), \
            mock.patch("sys.stderr"):
        return outside_timing.time_exercise("mine", "ours", "x_speed", 0.5, 0.25, 60, (), cpus)


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

    def test_the_sides_of_a_round_share_its_fresh_seed(self):
        # The best's outputs in a round are the answer to the exercise's only when both had the same inputs.
        timings = Timings(exercise=0.3, best=0.3)
        verdict(timings)
        rounds = [timings.seeds[i:i + 3] for i in range(0, len(timings.seeds), 3)]
        self.assertEqual(len(rounds), outside_timing.WARMUP_ROUNDS + outside_timing.CLEAR_ROUNDS)
        self.assertTrue(all(len(set(seeds)) == 1 for seeds in rounds), rounds)
        self.assertEqual(len({seeds[0] for seeds in rounds}), len(rounds))

    def test_a_clear_result_stops_early_and_one_near_a_threshold_runs_every_round(self):
        # Every round at the best's speed (full points from 0.5): decided after CLEAR_ROUNDS timed rounds.
        timings = Timings(exercise=0.3, best=0.3)
        got = verdict(timings)
        self.assertIn(f"{outside_timing.CLEAR_ROUNDS} rounds", got)
        self.assertEqual(timings.calls, 3 * (outside_timing.WARMUP_ROUNDS + outside_timing.CLEAR_ROUNDS))
        # 0.38 of its speed, between the thresholds: the share needs the median of every round.
        timings = Timings(exercise=0.5, best=0.3125)
        got = verdict(timings)
        self.assertTrue(got.startswith("score 0.500 (0.38"), got)
        self.assertIn(f"{outside_timing.ROUNDS} rounds", got)
        # One timed round (calls 7-9) slower than the zero threshold's speed: full speed in the others does not
        # stop the attempt early.
        timings = Timings(exercise=lambda n: 1.5 if n in (7, 8, 9) else 0.3, best=0.3)
        verdict(timings)
        self.assertEqual(timings.calls, 3 * (outside_timing.WARMUP_ROUNDS + outside_timing.ROUNDS))

    def test_a_job_timed_on_two_cpus_may_use_both(self):
        # A job of two workers, each on a CPU of its own: twice the wall time in CPU is no escape, and every side
        # is given the same two CPUs.
        timings = Timings(exercise=0.3, best=0.3)
        got = verdict(timings, cpus=2, available=(0, 1, 2, 3))
        self.assertTrue(got.startswith("score 1.000"), got)
        self.assertIn("on 2 CPUs", got)
        self.assertEqual(timings.cpus, {(2, 3)})

    def test_more_than_its_two_cpus_earns_nothing(self):
        got = verdict(Timings(exercise=0.25, best=0.3, exercise_cpu=lambda wall: 3 * wall), cpus=2)
        self.assertTrue(got.startswith("failed your timed process used more than the 2 CPUs"), got)

    def test_a_load_on_two_cpus_is_weighed_against_both(self):
        # 0.75 of the best's speed with other programs on 0.6 of a core: on one CPU a side could have been slowed
        # 2.5 times (down to 0.30: undecided), on two at most 2 / 1.4 = 1.43 times (at least 0.52: full points).
        timings = dict(exercise=0.2 + 0.2, best=0.2 + 0.15, load=0.6)
        self.assertTrue(verdict(Timings(**timings), cpus=1).startswith("undecided other programs used 0.60"))
        got = verdict(Timings(**timings), cpus=2)
        self.assertTrue(got.startswith("score 1.000 (0.75"), got)

    def test_a_grader_with_fewer_cpus_than_the_exercise_is_timed_on_is_undecided(self):
        got = verdict(Timings(exercise=0.3, best=0.3), cpus=2, available=(0,))
        self.assertEqual(got, "undecided it is timed on 2 CPUs a side, and this grader has 1")

    def test_a_failed_process_earns_nothing(self):
        got = verdict(Timings(exercise=0.3, best=0.3, why="it did not finish within its budget"))
        self.assertEqual(got, "failed your timed process: it did not finish within its budget")


if __name__ == "__main__":
    unittest.main()
