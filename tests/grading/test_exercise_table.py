#!/usr/bin/env python3
"""grader/exercise_table.py, the one declaration of each graded exercise (tests/labNN/points.tsv): every lab's table
reads, a malformed one is refused with its line, a checked program whose lists differ from its table is caught,
and the pages' {{count:...}} placeholders count the tables.

  python3 tests/grading/test_exercise_table.py REPO_ROOT

Needs no build: the checked programs here are shell scripts that print their lists.
"""
import re
import stat
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "grader"))
sys.path.insert(0, str(ROOT / "scripts" / "driver"))
import exercise_table  # noqa: E402
import outside_check  # noqa: E402
import placeholders  # noqa: E402

HEADER = "\t".join(exercise_table.COLUMNS)


class FakeLab(unittest.TestCase):
    """A repository root of its own holding lab 99's table, and a checked program printing given lists."""

    def setUp(self):
        scratch = tempfile.TemporaryDirectory()
        self.addCleanup(scratch.cleanup)
        self.root = Path(scratch.name)
        (self.root / "tests/lab99").mkdir(parents=True)
        patch = mock.patch.object(exercise_table, "ROOT", self.root)
        patch.start()
        self.addCleanup(patch.stop)

    def table(self, *lines, header=HEADER):
        (self.root / "tests/lab99/points.tsv").write_text("\n".join((header,) + lines) + "\n")

    def program(self, checked=(), timed=(), raced=()):
        path = self.root / "checked_lab99"
        lists = {"list": list(checked), "list-timed": [f"{n} 1 1 0.5 1" for n in timed],
                 "list-raced": [f"{n} 1 0.5 2 10" for n in raced]}
        (self.root / "lists").mkdir()
        for command, lines in lists.items():
            (self.root / "lists" / command).write_text("".join(line + "\n" for line in lines))
        path.write_text(f'#!/bin/sh\nexec cat "{self.root}/lists/$1"\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path


class Tables(FakeLab):
    def test_every_labs_table_reads(self):
        with mock.patch.object(exercise_table, "ROOT", ROOT):
            labs = exercise_table.labs()
            self.assertGreaterEqual(len(labs), 14)
            for lab in labs:
                rows = exercise_table.read_table(lab)
                self.assertTrue(rows, lab)
                for row in rows:
                    self.assertEqual(bool(row["speed_full"]), exercise_table.is_speed(row), row)

    def test_trailing_empty_columns_may_be_left_out(self):
        self.table("a\t10\tthe-exercise\t20", "b_speed\t5\tthe-exercise\t60\t\t0.5\t0.25\ttimed")
        rows = exercise_table.read_table("99")
        self.assertEqual(rows[0]["outside"], "")
        self.assertEqual(rows[0]["budget_s"], "20")
        self.assertEqual((rows[1]["speed_zero"], rows[1]["outside"]), ("0.25", "timed"))

    def test_a_wrong_header_is_refused(self):
        self.table("a\t10", header="exercise\tpoints")
        with self.assertRaisesRegex(exercise_table.TableError, "header"):
            exercise_table.read_table("99")

    def test_an_extra_column_is_refused_with_its_line(self):
        self.table("a\t10\tthe-exercise\t20", "b\t10\tthe-exercise\t20\t\t\t\tchecked\tmore")
        with self.assertRaisesRegex(exercise_table.TableError, r"points.tsv:3: 9 columns"):
            exercise_table.read_table("99")

    def test_an_unknown_outside_kind_is_refused(self):
        self.table("a\t10\tthe-exercise\t20\t\t\t\tchecks")
        with self.assertRaisesRegex(exercise_table.TableError, "outside is 'checks'"):
            exercise_table.read_table("99")


    def test_a_malformed_row_is_refused_with_its_line(self):
        for rows, said in (((), "header"),
                           (("a\t10\tthe-exercise\t20", "a\t5\tthe-exercise\t20"), ":3: a is declared twice"),
                           (("a\tten\tthe-exercise\t20",), "points must be a number"),
                           (("a\t10\tthe-exercise",), "budget_s must be a number"),
                           (("a\t10\tthe-exercise\t20\tGPU",), "needs is 'GPU'"),
                           (("a_speed\t5\tthe-exercise\t60\t\t0.5\t0.25\tchecked",),
                            "is for an exercise's outputs, not its speed"),
                           (("a\t10\tthe-exercise\t20\t\t\t\ttimed",), "is for a speed exercise")):
            with self.subTest(said=said):
                if rows:
                    self.table(*rows)
                else:
                    (self.root / "tests/lab99/points.tsv").write_text("")
                with self.assertRaisesRegex(exercise_table.TableError, re.escape(said)):
                    exercise_table.read_table("99")

    def test_every_declared_outside_check_is_named_in_its_labs_checked_program(self):
        # The selftest compares the lists of a built checked program; this needs no build, and covers the GPU
        # exercises, which a CPU build leaves out of its lists.
        with mock.patch.object(exercise_table, "ROOT", ROOT):
            for lab in exercise_table.labs():
                declared = [row["exercise"] for row in exercise_table.read_table(lab) if row["outside"]]
                source = ROOT / f"tests/lab{lab}/checked.cpp"
                if declared:
                    self.assertTrue(source.exists(), f"lab {lab} declares outside checks but has no {source}")
                    text = source.read_text(encoding="utf-8")
                    for name in declared:
                        self.assertIn(f'"{name}"', text, f"{name} is declared outside but not named in {source}")


class Listings(FakeLab):
    def setUp(self):
        super().setUp()
        self.table("a\t10\tthe-exercise\t20\t\t\t\tchecked", "g\t10\tthe-exercise\t20\tgpu\t\t\tchecked",
                   "a_speed\t5\tthe-exercise\t60\t\t0.5\t0.25\ttimed", "n\t5\tthe-exercise\t60")

    def test_lists_that_match_the_table_pass(self):
        self.assertEqual(outside_check.listing_problems(self.program(["a", "g"], ["a_speed"]), "99"), [])

    def test_a_gpu_exercise_may_be_missing_where_no_gpu_is(self):
        self.assertEqual(outside_check.listing_problems(self.program(["a"], ["a_speed"]), "99"), [])

    def test_an_undeclared_check_is_caught(self):
        problems = outside_check.listing_problems(self.program(["a", "n"], ["a_speed"]), "99")
        self.assertEqual(len(problems), 1)
        self.assertIn("n: `checked_lab99 list` lists it", problems[0])

    def test_a_declared_check_that_does_not_run_is_caught(self):
        problems = outside_check.listing_problems(self.program(["a"], [], ["a_speed"]), "99")
        self.assertEqual(sorted(problems), sorted([
            "a_speed: tests/lab99/points.tsv declares it outside timed, but `checked_lab99 list-timed` does not "
            "list it",
            "a_speed: `checked_lab99 list-raced` lists it, but tests/lab99/points.tsv does not declare it outside "
            "raced"]))


class Counts(FakeLab):
    def test_counts_come_from_the_tables(self):
        self.table("a\t10\tthe-exercise\t20\t\t\t\tchecked", "g\t10\tthe-exercise\t20\tgpu\t\t\tchecked",
                   "a_speed\t5\tthe-exercise\t60\t\t0.5\t0.25\ttimed", "n\t5\tthe-exercise\t60")
        filled = placeholders.fill_placeholders("{{count:checked_outside}} of {{count:exercises}}, "
                                                "{{count:checked_outside_on_gpu}} on a GPU, "
                                                "{{count:speed_outside}} of {{count:speed_exercises}} timed")
        self.assertEqual(filled, "1 of 3, 1 on a GPU, 1 of 1 timed")

    def test_an_unknown_count_is_a_problem(self):
        page = self.root / "page.md"
        page.write_text("{{count:everything}}\n")
        with mock.patch.object(placeholders, "ROOT", self.root):
            problems = placeholders.placeholder_problems(page)
        self.assertEqual(len(problems), 1)
        self.assertIn("no such count", problems[0])


if __name__ == "__main__":
    unittest.main(verbosity=1)
