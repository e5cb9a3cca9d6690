#!/usr/bin/env python3
"""scripts/driver/build_estimate.py's arithmetic: recorded steps over ninja's parallel jobs, fresh ones over the
cores, and the figures of a real cold build it was fitted to (the 2-core AMD EPYC development VM).

usage: test_build_estimate.py REPO_ROOT
"""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv.pop(1)).resolve() / "scripts" / "driver"))
import build_estimate  # noqa: E402


class Seconds(unittest.TestCase):
    def test_ninja_runs_three_jobs_on_two_cores(self):
        self.assertEqual([build_estimate.ninja_jobs(c) for c in (1, 2, 4, 16)], [2, 3, 6, 18])

    def test_recorded_steps_shared_ninjas_jobs(self):
        # Six steps of 30 s each, recorded while three ran at once on two cores: about a minute of wall time.
        steps = [f"unit{i}.o" for i in range(6)]
        self.assertAlmostEqual(build_estimate.seconds(steps, dict.fromkeys(steps, 30.0), 2), 60.0)

    def test_fresh_compiles_count_one_core_each(self):
        steps = ["a.o", "b.o", "c.o", "d.o", "program"]
        expected = (4 * build_estimate.FIRST_COMPILE_S + build_estimate.FIRST_LINK_S) / 2
        self.assertAlmostEqual(build_estimate.seconds(steps, {}, 2), expected)

    def test_one_step_is_not_divided(self):
        self.assertAlmostEqual(build_estimate.seconds(["a.o"], {"a.o": 12.0}, 2), 12.0)
        self.assertAlmostEqual(build_estimate.seconds(["a.o"], {}, 2), build_estimate.FIRST_COMPILE_S)

    def test_mixed_steps_add_both_parts(self):
        steps = ["a.o", "b.o", "c.o", "new.o", "new2.o"]
        recorded = {"a.o": 9.0, "b.o": 9.0, "c.o": 9.0}
        self.assertAlmostEqual(build_estimate.seconds(steps, recorded, 2), 9.0 + build_estimate.FIRST_COMPILE_S)

    def test_a_cold_build_of_48_compiles_is_minutes_not_half_an_hour(self):
        # The other labs' programs, cold: 48 compiles and 13 links took 292 s on the 2-core VM.
        steps = [f"unit{i}.o" for i in range(48)] + [f"bin/lab{i:02d}" for i in range(2, 15)]
        self.assertTrue(200 < build_estimate.seconds(steps, {}, 2) < 600)


if __name__ == "__main__":
    unittest.main()
