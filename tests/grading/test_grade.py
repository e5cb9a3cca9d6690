#!/usr/bin/env python3
"""grader/grade.py on runs made by hand: what each way of fooling the grader looks like to it (CTest's JUnit,
the tests' own records of their ends), and that it gives no point for any of them.

  python3 tests/grading/test_grade.py REPO_ROOT [PREDICTIONS_PROGRAM]

Needs no build: each case writes the files a run of ./lab grade leaves (RUN_DIR/junit.xml,
RUN_DIR/ends/<Suite.Test>, the token in SPEEDLABS_GRADE_TOKEN) for lab 01's exercises, whose points.tsv gives sum_squares_eigen 3 points,
sum_squares_torch 3, sum_squares_unrolled 10 and sum_squares_unrolled_speed 5 (its test records a full score;
tests/grading/test_predictions.py grades the score records).
"""
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
TOOL = Path(sys.argv.pop(1) if len(sys.argv) > 1 else ROOT / "build/bin/predictions")  # compares predictions
sys.path.insert(0, str(ROOT / "grader"))
spec = importlib.util.spec_from_file_location("grade", ROOT / "grader/grade.py")
grade = importlib.util.module_from_spec(spec)
spec.loader.exec_module(grade)
import exercise_table  # noqa: E402  (grader/, on the path above)

TOKEN = "0123456789abcdef0123456789abcdef"
BUDGET = float(exercise_table.read_table("01")[0]["budget_s"])
MAX = {"sum_squares_eigen": 3, "sum_squares_torch": 3, "sum_squares_unrolled": 10, "sum_squares_unrolled_speed": 5}
EXERCISES = tuple(MAX)


def case(name, status="run", time=0.01, output="[ RUN      ] x\n[       OK ] x\n", skipped=False):
    inner = '<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>' if skipped else ""
    inner += '<failure message=""/>' if status == "fail" else ""
    return (f'<testcase name="{name}" classname="{name}" time="{time}" status="{status}">{inner}'
            f"<system-out>{output}</system-out></testcase>")


class Run:
    """A run folder: every lab 01 test passed cleanly, unless a case replaces one."""

    def __init__(self, folder):
        self.dir = Path(folder)
        (self.dir / "ends").mkdir(parents=True)
        os.environ["SPEEDLABS_GRADE_TOKEN"] = TOKEN
        self.cases = {}
        for exercise in EXERCISES:
            score = f"score {TOKEN} 1\n" if exercise.endswith("_speed") else ""
            self.test(f"Lab01_{exercise}.Works", f"start {TOKEN}\n{score}end {TOKEN} passed\n")

    def test(self, name, record, **junit):
        self.cases[name] = case(name, **junit)
        path = self.dir / "ends" / name
        if record is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(record)

    def grade(self, labs=("01",)):
        (self.dir / "junit.xml").write_text("<testsuite>" + "".join(self.cases.values()) + "</testsuite>")
        out = self.dir / "out"
        # The exercises alone: predictions are graded off here (tests/grading/test_predictions.py has them).
        with open(os.devnull, "w") as quiet, mock.patch("sys.stdout", quiet), \
                mock.patch.object(grade, "prediction_points", lambda: 0):
            code = grade.grade(str(self.dir / "junit.xml"), str(out), list(labs), str(self.dir), TOOL)
        self.code = code
        if code != 0:
            return None
        results = json.loads((out / "results.json").read_text())
        return {t["name"].split(": ")[1]: t for t in results["tests"]}


class CannotBeFooled(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.run = Run(self.folder.name)

    def tearDown(self):
        self.folder.cleanup()

    def assert_scores_zero(self, exercise, record, text="", **junit):
        """The exercise's one test ends as RECORD and JUNIT say: 0 points of its full max_score, TEXT said."""
        self.run.test(f"Lab01_{exercise}.Works", record, **junit)
        tests = self.run.grade()
        self.assertEqual((tests[exercise]["score"], tests[exercise]["max_score"]), (0, MAX[exercise]))
        self.assertIn(text, tests[exercise]["output"])
        return tests

    def test_clean_run_earns_every_point(self):
        tests = self.run.grade()
        self.assertEqual({n: t["score"] for n, t in tests.items()}, MAX)

    def test_exit_zero_inside_a_test_scores_zero(self):
        # std::exit(0) in the exercise: CTest sees exit code 0, a pass; the record never got its end.
        tests = self.assert_scores_zero("sum_squares_eigen", f"start {TOKEN}\n", "ended before the test did",
                                        output="[ RUN      ] Lab01_sum_squares_eigen.Works\n")
        self.assertEqual(tests["sum_squares_unrolled"]["score"], 10)

    def test_printed_skip_line_is_a_failure_not_a_skip(self):
        # The exercise prints "[  SKIPPED ]": CTest's old skip expression matched it; GoogleTest recorded a failure.
        self.assert_scores_zero("sum_squares_torch", f"start {TOKEN}\nend {TOKEN} failed\n", "Expected equality",
                                status="notrun", skipped=True,
                                output="[  SKIPPED ]\nx.cpp:3: Failure\nExpected equality\n[  FAILED  ] x\n")

    def test_skip_without_googletests_record_is_a_failure(self):
        # Exit code 77 (CTest's skip) from the code under test, with no "end ... skipped" record.
        self.assert_scores_zero("sum_squares_torch", f"start {TOKEN}\n", status="notrun", skipped=True)

    def test_harness_skip_is_not_graded_here(self):
        self.run.test("Lab01_sum_squares_torch.Works", f"start {TOKEN}\nend {TOKEN} skipped\n", status="notrun",
                      skipped=True, output="x.cpp:1: Skipped\nneeds a CUDA GPU\n[  SKIPPED ] x\n")
        tests = self.run.grade()
        self.assertEqual((tests["sum_squares_torch"]["score"], tests["sum_squares_torch"]["max_score"]), (0, 0))
        self.assertIn("needs a CUDA GPU", tests["sum_squares_torch"]["output"])

    def test_a_gpu_exercise_passed_by_its_own_record_is_not_graded(self):
        # Lab 04's GPU kernel, its test process saying "end TOKEN passed" on a grader that checked nothing outside
        # (no GPU here): 0 of 0, skipped with the reason, whatever the record says. Checked outside: graded.
        name = "Lab04_launch_sum_squares_reduction.Works"
        self.run.test(name, f"start {TOKEN}\nend {TOKEN} passed\n")
        tests = self.run.grade(labs=("04",))
        part = tests["launch_sum_squares_reduction"]
        self.assertEqual((part["score"], part["max_score"]), (0, 0))
        self.assertIn("could not check it outside your process", part["output"])
        (self.run.dir / "checked").mkdir()
        (self.run.dir / "checked" / "Lab04_launch_sum_squares_reduction").write_text("passed\n")
        part = self.run.grade(labs=("04",))["launch_sum_squares_reduction"]
        self.assertEqual((part["score"], part["max_score"]), (10, 10))

    def test_loop_is_named_a_timeout(self):
        self.assert_scores_zero("sum_squares_torch", f"start {TOKEN}\n", f"timed out after {BUDGET:g} s",
                                status="fail", time=BUDGET + 0.01)

    def test_crash_is_named_with_its_signal(self):
        self.assert_scores_zero("sum_squares_unrolled", f"start {TOKEN}\nsignal {TOKEN} 11\n",
                                "crashed with signal SIGSEGV", status="fail")

    def test_record_under_another_token_counts_for_nothing(self):
        # An "end ... passed" written by anyone but this run's harness (the token is made per run).
        self.assert_scores_zero("sum_squares_unrolled", f"start {'f' * 32}\nend {'f' * 32} passed\n")

    def test_passed_test_whose_process_then_fails_scores_zero(self):
        self.assert_scores_zero("sum_squares_unrolled", f"start {TOKEN}\nend {TOKEN} passed\n",
                                "its process then failed", status="fail")

    def test_forged_pass_fails_its_outside_check(self):
        # A forged "end TOKEN passed" from a wrong answer (the token read before main() removed it): the record
        # says passed; the outside check, written by the grader, says how the outputs differ.
        checked = self.run.dir / "checked"
        checked.mkdir()
        (checked / "Lab01_sum_squares_torch").write_text("failed output 'sum': 1 of 1 elements differ (seed 7)\n")
        (checked / "Lab01_sum_squares_eigen").write_text("passed (seed 8)\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_torch"]["score"], 0)
        self.assertIn("checked outside your process on fresh inputs", tests["sum_squares_torch"]["output"])
        self.assertIn("1 of 1 elements differ", tests["sum_squares_torch"]["output"])
        self.assertEqual(tests["sum_squares_eigen"]["score"], 3)

    def test_forged_end_of_a_speed_test_earns_nothing(self):
        # "end TOKEN passed" with no score: the harness records the score with the end, after its checks.
        self.assert_scores_zero("sum_squares_unrolled_speed", f"start {TOKEN}\nend {TOKEN} passed\n",
                                "without its speed score")

    def test_speed_of_a_wrong_answer_earns_nothing(self):
        (self.run.dir / "checked").mkdir()
        (self.run.dir / "checked" / "Lab01_sum_squares_unrolled").write_text("failed output 'sum' differs (seed 3)\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled"]["score"], 0)
        self.assertEqual(tests["sum_squares_unrolled_speed"]["score"], 0)
        self.assertIn("only on right results", tests["sum_squares_unrolled_speed"]["output"])

    def test_outside_check_that_could_not_run_earns_nothing(self):
        (self.run.dir / "checked").mkdir()
        (self.run.dir / "checked" / "Lab01_sum_squares_eigen").write_text("error the reference threw (seed 9)\n")
        self.assert_scores_zero("sum_squares_eigen", f"start {TOKEN}\nend {TOKEN} passed\n", "could not run")

    def test_speed_timed_outside_replaces_the_processs_own_score(self):
        # The graded test's score (1.0, from a clock the student's code can bend) gives way to the grader's.
        timed = self.run.dir / "timed"
        timed.mkdir()
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("score 0.000 (0.12 of the best's speed)\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["score"], 0)
        self.assertIn("timed outside your process", tests["sum_squares_unrolled_speed"]["output"])
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("undecided other programs used 0.90 of a core\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["max_score"], 0)
        self.assertIn("could not decide", tests["sum_squares_unrolled_speed"]["output"])
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("failed a timed result is wrong\n")
        self.assert_scores_zero("sum_squares_unrolled_speed", f"start {TOKEN}\nscore {TOKEN} 1.0\nend {TOKEN} passed\n",
                                "a timed result is wrong")
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("failed a timed result is wrong\nraced outside\n")
        self.assert_scores_zero("sum_squares_unrolled_speed", f"start {TOKEN}\nscore {TOKEN} 1.0\nend {TOKEN} passed\n",
                                "raced outside your process")

    def test_speed_timed_outside_alone_scores_where_the_test_did_not_run(self):
        # ./lab grade runs no speed test inside the student's process where it times that exercise outside.
        del self.run.cases["Lab01_sum_squares_unrolled_speed.Works"]
        (self.run.dir / "ends" / "Lab01_sum_squares_unrolled_speed.Works").unlink()
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["score"], 0, "nothing timed: nothing earned")
        timed = self.run.dir / "timed"
        timed.mkdir()
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("score 1.000 (0.98 of the best's speed)\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["score"], MAX["sum_squares_unrolled_speed"])
        self.assertIn("timed outside your process", tests["sum_squares_unrolled_speed"]["output"])
        # No test ran inside: the row says what passed, never "1 test passed".
        self.assertIn("measured outside your process", tests["sum_squares_unrolled_speed"]["output"])
        self.assertNotIn("test passed", tests["sum_squares_unrolled_speed"]["output"])
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("undecided other programs used 0.90 of a core\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["max_score"], 0)
        (timed / "Lab01_sum_squares_unrolled_speed").write_text("failed a timed result is wrong\n")
        tests = self.run.grade()
        self.assertEqual(tests["sum_squares_unrolled_speed"]["score"], 0)
        self.assertIn("a timed result is wrong", tests["sum_squares_unrolled_speed"]["output"])

    def test_a_lab_named_twice_is_graded_once(self):
        tests = self.run.grade(labs=("01", "01"))
        with open(self.run.dir / "out/results.json") as handle:
            results = json.load(handle)
        self.assertEqual(len(results["tests"]), len(MAX))
        self.assertEqual(results["score"], sum(MAX.values()))
        self.assertEqual(len(tests), len(MAX))

    def test_check_prints_a_lab_named_twice_once(self):
        self.run.grade()  # writes the JUnit file
        printed = io.StringIO()
        with mock.patch("sys.stdout", printed):
            code = grade.check(str(self.run.dir / "junit.xml"), ["01", "01"], str(self.run.dir), TOOL)
        self.assertEqual(code, 0)
        lines = printed.getvalue().splitlines()
        self.assertEqual(lines.count("lab 01:"), 1, lines)
        self.assertEqual(sum("PASS" in line for line in lines), len(MAX), lines)

    def test_a_lab_that_did_not_build_says_why_and_scores_zero(self):
        # ./lab left the lab's tests out (RUN_DIR/builds/01): none ran, and the line says what stopped them.
        for outcome, text in (("compile_error", "does not compile"), ("crashed_at_start", "crashed before any test"),
                              ("build_timeout", "ran past its time limit"),
                              ("build_wrote_too_much", "wrote more than its limit"),
                              ("program_replaced", "replaced by a link")):
            with self.subTest(outcome=outcome):
                (self.run.dir / "builds").mkdir(exist_ok=True)
                (self.run.dir / "builds" / "01").write_text(outcome + "\n")
                self.run.cases.clear()
                tests = self.run.grade()
                self.assertEqual(sum(t["score"] for t in tests.values()), 0)
                self.assertTrue(all(text in t["output"] for t in tests.values()), tests)

    def test_results_are_all_three_files_or_none(self):
        real_open = open

        def failing_open(path, *args, **kwargs):
            if ".summary.md.tmp" in str(path):
                raise OSError(28, "No space left on device")
            return real_open(path, *args, **kwargs)

        with open(os.devnull, "w") as quiet, mock.patch("builtins.open", failing_open), mock.patch("sys.stderr", quiet):
            self.assertIsNone(self.run.grade())
        self.assertEqual(self.run.code, 2)
        self.assertEqual(sorted(p.name for p in (self.run.dir / "out").iterdir()), [])


class DriverPaths(unittest.TestCase):
    """./lab grade reads --out and --submission from the folder it was called in, and checks both before any build."""

    def lab_grade(self, folder, *args):
        import subprocess
        return subprocess.run([str(ROOT / "lab"), "grade", "--labs", "02", *args], cwd=folder, capture_output=True,
                              text=True, timeout=60)

    def test_relative_out_is_the_callers(self):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "taken").write_text("a file where the grade's folder would go\n")
            done = self.lab_grade(folder, "--out", "taken")
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(f"--out {Path(folder).resolve()}/taken exists and is not a folder", done.stderr)

    def test_relative_submission_is_the_callers(self):
        with tempfile.TemporaryDirectory() as folder:
            # A folder of that name in the checkout does not stand in for the caller's missing one.
            done = self.lab_grade(folder, "--submission", "labs", "--out", "g")
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("--submission needs a folder", done.stderr)
            self.assertFalse(Path(folder, "g").exists(), "the grade went on past a missing submission")


if __name__ == "__main__":
    unittest.main(verbosity=1)
