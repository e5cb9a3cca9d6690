#!/usr/bin/env python3
"""Predictions and speed scores in grading, with no build (label grading):

- scripts/driver/predictions.py reads every lab's predictions.toml; each malformed file is named by its line;
- the rules are the lab programs' own (common/predictions.cpp, tested in tests/common/test_predictions.cpp):
  ./lab check and ./lab grade read the section the `predictions` program writes;
- the reference answers (solutions/NN_topic/predictions.toml) ask the labs' questions, with the same rules;
- ./lab check's lines (PREDICT blank / ok / off / error) come after the exercises', and a malformed file leaves
  the rest of the check running;
- ./lab grade scores predictions as a part of each lab (results.json and JUnit): the blank files 0, the
  reference answers full marks, tests/grading/weights.toml's 0 turns the part off;
- a speed test's share of its points is the harness's record under the run's token, never a printed line;
- every lesson lists its questions ({{questions:NN}} just before "What you should observe"), without the why;
- a side_of question takes the words it offers (above/below, more/less) as well as a number;
- no reference `why` holds its own answer (predictions.py whys); ./lab check compares with the student's own run;
- each question is fair to its reader (predictions.py fair, scripts/driver/prediction_checks.py): no reference
  answer stands in the lesson above the questions, no side_of question is a coin flip on its kept run, and a
  question whose answer depends on the run's size or device says --quick or names the CPU; each check is shown to
  catch a defect planted in a copy;
- every reference answer scores full against every kept run (docs/results/), the runs the lessons quote.

  python3 tests/grading/test_predictions.py REPO_ROOT [PREDICTIONS_PROGRAM]
"""
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

ROOT = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
TOOL = Path(sys.argv.pop(1) if len(sys.argv) > 1 else ROOT / "build/bin/predictions")  # compares predictions
sys.path.insert(0, str(ROOT / "scripts/driver"))
sys.path.insert(0, str(ROOT / "grader"))


def load(name, folder="scripts/driver"):
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


predictions = load("predictions")
checks = load("prediction_checks")
run_checks = load("prediction_runs")
grade = load("grade", "grader")
graded = sys.modules["predicted"]  # the module grade.py compares predictions through
lab_pages = load("lab_pages")
LABS = sorted(p.parent.name[:2] for p in ROOT.glob("labs/[0-9][0-9]_*/predictions.toml"))
TOKEN = "0123456789abcdef0123456789abcdef"

GOOD = '''[[question]]
id = "a"
question = "q"
unit = "x"
answer = 1
'''
BAD = {  # file -> what the error must say
    GOOD + "relative = \n": ":6:",  # TOML syntax
    GOOD + "colour = 2\n": ":6: unknown key 'colour'",
    '[[question]]\nid = "a"\nunit = "x"\nanswer = 1\n': ":1: the question has no 'question'",
    '[[question]]\nid = "a"\nquestion = "q"\nunit = "x"\n': ":1: the question has no 'answer'",
    '[[question]]\nid = 3\nquestion = "q"\nunit = "x"\nanswer = 1\n': ":2: 'id' must be a string",
    GOOD.replace("answer = 1", "answer = [1]"): ":5: 'answer' must be",
    GOOD + "factor = 0.5\n": ":6: 'factor' must be",
    GOOD + "relative = -1\n": ":6: 'relative' must be",
    GOOD + "relative = 0.1\nabsolute = 1\n": ":1: give one tolerance",
    'title = "x"\n': ":1: unknown key 'title'",
    "question = 3\n": ":1: 'question' must be [[question]] tables",
}


class Files(unittest.TestCase):
    def test_every_lab_has_3_to_6_questions_and_the_reference_answers_them_all(self):
        self.assertGreaterEqual(len(LABS), 11)
        for lab in LABS:
            folder = graded.lab_folder(lab).name
            asked = predictions.read(ROOT / "labs" / folder / "predictions.toml")
            answered = predictions.read(ROOT / "solutions" / folder / "predictions.toml")
            self.assertTrue(3 <= len(asked) <= 6, (lab, len(asked)))
            self.assertTrue(all(q.answer is None for q in asked), f"lab {lab}: labs/ holds an answer")
            strip = lambda q: (q.name, q.question, q.unit, q.tolerance)  # noqa: E731
            self.assertEqual([strip(q) for q in asked], [strip(q) for q in answered], f"lab {lab}: other questions")
            self.assertTrue(all(q.answer is not None for q in answered), f"lab {lab}: a reference answer is blank")

    def test_each_malformed_file_is_named_by_its_line(self):
        with tempfile.TemporaryDirectory() as folder:
            for index, (text, expected) in enumerate(BAD.items()):
                path = Path(folder) / f"{index}.toml"
                path.write_text(text)
                with self.assertRaises(predictions.PredictionError, msg=text) as caught:
                    predictions.read(path)
                self.assertIn(str(path) + expected, str(caught.exception))

    def test_a_missing_file_has_no_questions(self):
        self.assertEqual(predictions.read("/nonexistent/predictions.toml"), [])

    def test_a_submission_answers_the_official_questions_only(self):
        # The rules come from labs/, never from the answers' file: a widened tolerance changes nothing.
        with tempfile.TemporaryDirectory() as folder:
            answers = with_answers(folder, "02", "solutions")
            answers.write_text(answers.read_text().replace("answer = 70144", "answer = 70000\nabsolute = 1000"))
            official = ROOT / "labs/02_float16_limits/predictions.toml"
            run, _ = graded.measured_run("02")
            section, error = graded.section(TOOL, official, answers, run)
        self.assertEqual(error, "")
        row = next(q for q in section["questions"] if q["answer"] == 70000)
        self.assertEqual((row["verdict"], row["rule"]["kind"]), ("off", "exact"), row)

    def test_the_rules_come_from_the_reference_not_from_any_file_a_student_edits(self):
        # In the instructor's checkout the official questions are the reference's file; only where it is absent
        # (a student's release) are they the shipped blank file.
        folder = graded.lab_folder("02").name
        self.assertEqual(graded.rules_file(folder), ROOT / "solutions" / folder / "predictions.toml")
        with mock.patch.object(graded, "ROOT", Path("/nonexistent")):
            self.assertEqual(graded.rules_file(folder), Path("/nonexistent/labs") / folder / "predictions.toml")

    def test_a_number_in_quotes_is_compared_as_a_number(self):
        # "1000" against a measured 1000.5 under the exact rule: off, never "exact" by 4 or 6 digits of text.
        with tempfile.TemporaryDirectory() as folder:
            run = Path(folder) / "run.json"
            run.write_text(json.dumps({"observations": [{"id": "a", "verdict": "holds", "measured": 1000.5}]}))
            verdicts = []
            for answer in ('"1000"', '"1000.5000001"', '"1.0005e3"', "1000.5"):
                path = Path(folder) / "answers.toml"
                path.write_text(GOOD.replace("answer = 1", f"answer = {answer}"))
                section, error = graded.section(TOOL, path, path, run)
                self.assertEqual(error, "")
                verdicts.append(section["questions"][0]["verdict"])
        self.assertEqual(verdicts, ["off", "off", "ok", "ok"])
        self.assertEqual(predictions.number(" 1.0005e3 "), 1000.5)
        self.assertIsNone(predictions.number("more"))

    def test_a_file_that_is_no_regular_file_is_refused_without_reading_it(self):
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder)
            (base / "folder.toml").mkdir()
            os.mkfifo(base / "fifo.toml")  # opening it would wait for a writer forever
            (base / "zero.toml").symlink_to("/dev/zero")  # reading it would never end
            (base / "big.toml").write_text("#" * (predictions.MAX_FILE_BYTES + 1))
            for name, said in (("folder.toml", "is a folder"), ("fifo.toml", "a FIFO"), ("zero.toml", "a device"),
                               ("big.toml", "at most")):
                with self.assertRaises(predictions.PredictionError, msg=name) as caught:
                    predictions.read(base / name)
                self.assertIn(said, str(caught.exception))
                # The grader's program says the same, at once (the test's own timeout would catch a hang).
                official = ROOT / "labs/02_float16_limits/predictions.toml"
                section, error = graded.section(TOOL, official, base / name)
                self.assertIn(said, error)


class Whys(unittest.TestCase):
    def question(self, why, tolerance="", answer='""'):
        text = f'[[question]]\nid = "a"\nquestion = "q"\nunit = "x"\nwhy = "{why}"\n{tolerance}\nanswer = {answer}\n'
        return predictions.read_text(text, "p.toml")[0]

    def test_no_why_of_the_labs_gives_its_answer_away(self):
        self.assertEqual(predictions.whys_problems(ROOT), [])

    def test_a_why_stating_its_answer_is_found(self):
        given = predictions.why_gives_away
        self.assertTrue(given(self.question("uniform over 50,257 tokens: ln(50257)", "absolute = 0.15"), 10.8))
        self.assertTrue(given(self.question("the backoff makes it 32,768"), 32768.0))
        self.assertTrue(given(self.question("past the top it is Infinity"), float("inf")))
        self.assertTrue(given(self.question("GELU is Memory bound"), "memory"))
        self.assertTrue(given(self.question("about 2.5 apart", "factor = 1.5"), 2.0))
        self.assertFalse(given(self.question("fp16 has 5 exponent bits"), float("inf")))
        self.assertFalse(given(self.question("x*x is written out: 2 passes", "side_of = 1"), 1.5))
        self.assertFalse(given(self.question("fp16 keeps 11 bits near 1000"), 1000.5))


def junit(folder):
    path = Path(folder) / "junit.xml"
    path.write_text('<testsuite><testcase name="Lab01_sum_squares_eigen.Works" status="run" time="0.01">'
                    "<system-out>ok</system-out></testcase></testsuite>")
    return str(path)


def with_answers(folder, lab, source):
    """A folder laid out like labs/ holding lab LAB's predictions from SOURCE (solutions or labs)."""
    name = graded.lab_folder(lab).name
    (Path(folder) / name).mkdir(parents=True, exist_ok=True)
    text = (ROOT / source / name / "predictions.toml").read_text()
    (Path(folder) / name / "predictions.toml").write_text(text)
    return Path(folder) / name / "predictions.toml"


def machine_dependent(lab):
    """The names of lab @p lab's reference questions answered against this run's measurement (a band around it,
    or a side of it): a busy or another machine may move the measurement out of the reference's band, as
    scripts/ci/check-grading.sh counts them, so only these may read "off" for the reference."""
    path = next(ROOT.glob(f"solutions/{lab}_*/predictions.toml"))
    return {q.name for q in predictions.read(path) if q.tolerance[0] in ("factor", "side_of")}


def off_names(lines):
    """The question names of the "PREDICT off" lines among @p lines."""
    return {l.split()[2] for l in lines if l.strip().startswith("PREDICT off")}


class CheckAndGrade(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.dir = Path(self.folder.name)
        self.env = mock.patch.dict(os.environ, {"SPEEDLABS_PREDICTIONS_DIR": str(self.dir / "mine")})
        self.env.start()
        # ./lab check compares with the student's own run: here the student's runs folder is a scratch one, and
        # a lab run made for it copies this machine's smoke run (or the kept one) instead of running the lab.
        self.runs = mock.patch.object(graded, "student_run_path", lambda lab: self.dir / f"lab{lab}.json")
        self.make = mock.patch.object(graded, "make_student_run", side_effect=self.fake_run)
        self.runs.start()
        self.made = self.make.start()

    def fake_run(self, lab, path):
        path.write_text(graded.measured_run(lab)[0].read_text())
        return "observations written"

    def tearDown(self):
        self.make.stop()
        self.runs.stop()
        self.env.stop()
        self.folder.cleanup()

    def test_check_compares_with_the_students_own_latest_run_and_says_which(self):
        with_answers(self.dir / "mine", "02", "solutions")
        lines = self.check("02")
        self.assertEqual(self.made.call_count, 1, "no run of theirs yet: check makes one")
        self.assertTrue(any("compared with your run of " in l and "lab02.json" in l for l in lines), lines)
        self.check("02")
        self.assertEqual(self.made.call_count, 1, "the latest run is used, not made again")
        run = json.loads((self.dir / "lab02.json").read_text())
        for o in run["observations"]:  # the student's machine measured otherwise: the check follows their run
            if o["id"] == "weights_7b_bytes":
                o["measured"]["libtorch"]["fp16_gb"] = 99.0
        (self.dir / "lab02.json").write_text(json.dumps(run))
        self.assertTrue(any("PREDICT off" in l and "measured 99" in l for l in self.check("02")))

    def test_blank_predictions_make_no_run(self):
        self.check("02")
        self.assertEqual(self.made.call_count, 0)

    def test_the_run_check_makes_is_the_students_own_lab_run(self):
        self.make.stop()
        try:
            def stub_stops(command, stdout, **_):  # a lab whose exercise is still a stub writes no report
                stdout.write("lab02: not implemented yet: TODO(lab02) to_fp16\n")

            with mock.patch.object(graded.subprocess, "run", side_effect=stub_stops) as run, \
                    mock.patch("sys.stderr", io.StringIO()) as said:
                report, where = graded.student_run("02")
            command = run.call_args.args[0]
            self.assertEqual(command[1:], ["run", "02", "--quick", "--json", str(self.dir / "lab02.json")])
            self.assertTrue(command[0].endswith("/lab"))
            self.assertIn("running ./lab run 02 --quick", said.getvalue())
            self.assertIsNone(report)
            self.assertIn("./lab run 02 --quick stopped: lab02: not implemented yet: TODO(lab02) to_fp16", where)
            self.assertIn("--json", graded.student_run("02", make=False)[1])
        finally:
            self.made = self.make.start()

    def test_a_word_answer_to_a_more_or_less_question_is_marked_by_its_side(self):
        path = with_answers(self.dir / "mine", "01", "solutions")
        text = path.read_text()
        path.write_text(text.replace("side_of = 10\nanswer = 5000", 'side_of = 10\nanswer = "more"'))
        self.assertNotEqual(text, path.read_text())
        run = {"observations": [{"id": "vectorised_3x_faster", "verdict": "holds", "measured": 595.7}]}
        (self.dir / "lab01.json").write_text(json.dumps(run))
        line = next(l for l in self.check("01") if "vectorised_3x_faster" in l)
        self.assertIn("PREDICT ok", line)
        self.assertIn("yours more, measured 595.7 x: same side of 10", line)

    def check(self, lab="01"):
        printed = io.StringIO()
        with mock.patch("sys.stdout", printed), mock.patch("sys.stderr", io.StringIO()):
            grade.check(junit(self.dir), [lab], None, TOOL)
        return printed.getvalue().splitlines()

    def grade(self, labs=("01",)):
        out = self.dir / "out"
        with mock.patch("sys.stdout", io.StringIO()), mock.patch("sys.stderr", io.StringIO()):
            self.assertEqual(grade.grade(junit(self.dir), str(out), list(labs), None, TOOL), 0)
        return json.loads((out / "results.json").read_text()), ET.parse(out / "junit.xml").getroot()

    def test_blank_predictions_are_listed_after_the_exercises(self):
        lines = self.check()
        exercise = next(i for i, l in enumerate(lines) if "sum_squares_eigen" in l and "PREDICT" not in l)
        blank = [i for i, l in enumerate(lines) if l.strip().startswith("PREDICT blank")]
        self.assertEqual(len(blank), len(predictions.read(ROOT / "labs/01_vectorize/predictions.toml")), lines)
        self.assertTrue(all(i > exercise for i in blank))

    def test_the_reference_answers_are_ok_unless_this_run_moved_a_band(self):
        for lab in LABS:
            with self.subTest(lab=lab):
                with_answers(self.dir / "mine", lab, "solutions")
                lines = [l for l in self.check(lab) if "PREDICT" in l]
                listed = [l for l in lines if l.strip().startswith(("PREDICT ok", "PREDICT -", "PREDICT off"))]
                self.assertTrue(lines and listed == lines, lines)
                self.assertLessEqual(off_names(lines), machine_dependent(lab), lines)

    def test_a_wrong_answer_says_by_how_much(self):
        path = with_answers(self.dir / "mine", "02", "solutions")
        path.write_text(path.read_text().replace("answer = 70144", "answer = 70000"))
        lines = self.check("02")
        self.assertTrue(any("PREDICT off" in l and "off by 144" in l for l in lines), lines)

    def test_a_malformed_file_is_named_and_the_rest_of_the_check_runs(self):
        path = with_answers(self.dir / "mine", "01", "solutions")
        path.write_text(path.read_text() + "\n[[question]\n")
        lines = self.check()
        self.assertTrue(any("PREDICT error" in l and "predictions.toml:" in l for l in lines), lines)
        self.assertTrue(any("sum_squares_unrolled" in l and "PREDICT" not in l for l in lines), lines)
        results, _ = self.grade()
        part = next(t for t in results["tests"] if t["name"] == "lab 01: predictions")
        self.assertEqual(part["score"], 0)
        self.assertIn("predictions.toml:", part["output"])

    def test_grade_scores_blank_0_and_the_reference_full_as_a_part_of_each_lab(self):
        results, root = self.grade(LABS)
        parts = [t for t in results["tests"] if t["name"].endswith(": predictions")]
        self.assertEqual(len(parts), len(LABS))
        self.assertTrue(all(t["score"] == 0 and t["max_score"] > 0 for t in parts), parts)
        cases = [c for c in root.iter("testcase") if "_predictions." in c.get("name")]
        self.assertTrue(cases and all(c.find("failure") is not None for c in cases))
        for lab in LABS:
            with_answers(self.dir / "mine", lab, "solutions")
        results, root = self.grade(LABS)
        parts = [t for t in results["tests"] if t["name"].endswith(": predictions")]
        # Every question compared is right, but for a band answer this run's measurement moved; a lab whose run
        # could not decide its observations (a busy machine) has fewer, or none, to compare.
        moved = set()
        for t in parts:
            lab, off = t["name"][4:6], off_names(t["output"].splitlines())
            self.assertLessEqual(off, machine_dependent(lab), t)
            self.assertTrue(t["score"] == t["max_score"] or off, t)
            moved |= {f"Lab{lab}_predictions.{name}" for name in off}
        self.assertGreater(sum(t["max_score"] for t in parts), 0, parts)
        cases = [c for c in root.iter("testcase") if "_predictions." in c.get("name")]
        failed = {c.get("name") for c in cases if c.find("failure") is not None}
        self.assertTrue(cases and failed <= moved, failed - moved)

    def test_zero_points_per_question_turns_predictions_off(self):
        with mock.patch.object(grade, "prediction_points", lambda: 0):
            results, _ = self.grade()
        self.assertFalse([t for t in results["tests"] if "predictions" in t["name"]])

    def test_a_submissions_file_linked_to_the_reference_earns_nothing(self):
        # A link in the submission to the reference's answers: refused as a link, never read through.
        folder = graded.lab_folder("02").name
        (self.dir / "mine" / folder).mkdir(parents=True)
        (self.dir / "mine" / folder / "predictions.toml").symlink_to(ROOT / "solutions" / folder / "predictions.toml")
        results, _ = self.grade(("02",))
        part = next(t for t in results["tests"] if t["name"] == "lab 02: predictions")
        self.assertEqual(part["score"], 0)
        self.assertGreater(part["max_score"], 0)
        self.assertIn("symbolic link", part["output"])

    def test_a_submission_cannot_add_questions_or_count_one_twice(self):
        path = with_answers(self.dir / "mine", "02", "solutions")
        text = path.read_text()
        first = text[text.index("[[question]]"):text.index("[[question]]", text.index("[[question]]") + 1)]
        path.write_text(text + "\n" + first + "\n" + first.replace('id = "fp16', 'id = "mine_fp16'))
        results, _ = self.grade(("02",))
        part = next(t for t in results["tests"] if t["name"] == "lab 02: predictions")
        self.assertEqual(part["score"], part["max_score"])
        self.assertEqual(part["max_score"], len(predictions.read(ROOT / "labs/02_float16_limits/predictions.toml")))


class SpeedScores(unittest.TestCase):
    def test_only_the_harness_record_under_the_token_counts(self):
        with tempfile.TemporaryDirectory() as folder, mock.patch.dict(os.environ, {"SPEEDLABS_GRADE_TOKEN": TOKEN}):
            ends = Path(folder) / "ends"
            ends.mkdir()
            (ends / "T.a").write_text(f"start {TOKEN}\nscore {TOKEN} 0.25\nend {TOKEN} passed\n")
            (ends / "T.b").write_text(f"start {TOKEN}\nscore deadbeef 1\nend {TOKEN} passed\n")
            (ends / "T.c").write_text(f"start {TOKEN}\nscore {TOKEN} undecided\nend {TOKEN} passed\n")
            (ends / "T.d").write_text(f"start {TOKEN}\nscore {TOKEN} 7\nend {TOKEN} passed\n")
            self.assertEqual(grade.own_score(folder, "T.a"), 0.25)
            self.assertIsNone(grade.own_score(folder, "T.b"), "a score under another token")
            self.assertEqual(grade.own_score(folder, "T.c"), "undecided")
            self.assertEqual(grade.own_score(folder, "T.d"), 1.0, "clamped to the points")

    def test_a_printed_score_never_counts_in_a_graded_run(self):
        exercise = grade.Exercise("01", "sum_squares_unrolled_speed", 5, "", 120)
        with tempfile.TemporaryDirectory() as folder, mock.patch.dict(os.environ, {"SPEEDLABS_GRADE_TOKEN": TOKEN}):
            (Path(folder) / "ends").mkdir()
            name = "Lab01_sum_squares_unrolled_speed.AtLeastHalfOfEigen"
            (Path(folder) / "ends" / name).write_text(f"start {TOKEN}\nscore {TOKEN} 0.5\nend {TOKEN} passed\n")
            (Path(folder) / "junit.xml").write_text(
                f'<testsuite><testcase name="{name}" status="run" time="1"><system-out>speed score: 1\n'
                "</system-out></testcase></testsuite>")
            grade.read_results(str(Path(folder) / "junit.xml"), [exercise], folder)
        self.assertEqual(exercise.share, 0.5)

    def test_an_undecided_measurement_is_said_and_not_scored(self):
        exercise = grade.Exercise("01", "sum_squares_unrolled_speed", 5, "", 120)
        exercise.passed = 1
        exercise.undecided.append(("T.a", "another program used 1.2 cores"))
        self.assertEqual(exercise.status, "undecided")
        self.assertIn("could not decide", grade.message(exercise))


class KeptRuns(unittest.TestCase):
    def test_the_reference_answers_score_full_against_every_kept_run(self):
        # The lessons quote the kept runs: a reference answer that one of them contradicts teaches a wrong number.
        if not TOOL.exists():
            self.skipTest(f"{TOOL} is not built")
        runs = sorted(ROOT.glob("docs/results/lab[0-9][0-9].json")) + sorted(ROOT.glob("docs/results/*/lab*.json"))
        if not runs:
            self.skipTest("no kept runs here (a release)")
        for run in runs:
            lab = run.stem[3:]
            reference = next(ROOT.glob(f"solutions/{lab}_*/predictions.toml"), None)
            if reference is None or not predictions.read(reference):
                continue
            with self.subTest(run=str(run.relative_to(ROOT))):
                answered, error = graded.section(TOOL, reference, reference, run)
                self.assertFalse(error, error)
                wrong = [f"{q['name']}: {q['verdict']} (answer {q['yours']}, kept {q['measured_text']}: {q['detail']})"
                         for q in answered["questions"] if q["verdict"] not in ("ok", "unmeasured")]
                self.assertEqual(wrong, [])


QUESTION = """[[question]]
id = "{id}"
{field}question = "{question}"
unit = "{unit}"
{tolerance}
answer = {answer}
"""


def question_text(id, question, answer, unit="", field="", tolerance=""):
    return QUESTION.format(id=id, field=f'field = "{field}"\n' if field else "", question=question, unit=unit,
                           tolerance=tolerance, answer=answer)


def planted_lab(root, lesson, questions, run=None, number="99"):
    """A copy laid out like the repository with one lab, NUMBER: its lesson source, its reference answers and,
    when @p run is given, its kept run."""
    root = Path(root)
    for kind in ("labs", "solutions"):
        (root / kind / f"{number}_planted").mkdir(parents=True, exist_ok=True)
    (root / "labs" / f"{number}_planted" / "README.md.in").write_text(lesson)
    (root / "solutions" / f"{number}_planted" / "predictions.toml").write_text("".join(questions))
    if run is not None:
        (root / "docs" / "results").mkdir(parents=True, exist_ok=True)
        (root / "docs" / "results" / f"lab{number}.json").write_text(json.dumps(run))
    return root


class Fairness(unittest.TestCase):
    """Each question is fair to its reader: prediction_checks' three checks pass on the labs, and each fails on a
    defect planted in a copy."""

    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.root = Path(self.folder.name)

    def tearDown(self):
        self.folder.cleanup()

    def test_every_question_of_the_labs_is_fair(self):
        self.assertEqual(checks.lesson_problems(ROOT), [])
        self.assertEqual(run_checks.pivot_problems(ROOT), [])
        self.assertEqual(run_checks.size_problems(ROOT), [])
        with mock.patch("sys.stdout", io.StringIO()), mock.patch("sys.stderr", io.StringIO()):
            self.assertEqual(predictions.main(["predictions.py", "fair"]), 0)

    # -------------------------------------------------------------------------------------- the lesson

    TOKENS = question_text("tokens_loaded", "How many GPT-2 tokens does all of tiny shakespeare make?", 338025,
                           "tokens", tolerance="relative = 0.05")

    def lesson(self, before, after="", questions=(TOKENS,)):
        text = f"# Lab 99\n\n{before}\n\n{{{{questions:99}}}}\n\n## What you should observe, and why\n\n{after}\n"
        return checks.lesson_problems(planted_lab(self.root, text, list(questions)))

    def test_an_answer_stated_above_the_questions_is_found(self):
        found = self.lesson("The data is tiny shakespeare, GPT-2-tokenized: 338,025 tokens, read in order.")
        self.assertEqual(len(found), 1, found)
        self.assertIn("README.md.in:3:", found[0])
        self.assertIn("'338,025'", found[0])
        self.assertIn("tokens_loaded", found[0])

    def test_the_same_sentence_after_the_questions_or_in_code_is_no_problem(self):
        self.assertEqual(self.lesson("The data is tiny shakespeare, GPT-2-tokenized.",
                                     "The data is tiny shakespeare: 338,025 tokens."), [])
        self.assertEqual(self.lesson("Tiny shakespeare's tokens: `338025`.\n\n```\ntokens: 338025\n```"), [])

    def test_the_answer_in_another_form_a_reader_sees_is_found(self):
        half = question_text("fused_bytes_moved", "What share of the unfused chain's bytes does the fused kernel "
                             "move?", 0.5, "share", "ratio", "relative = 0.02")
        self.assertTrue(self.lesson("The fused kernel moves half the bytes of the unfused chain.", questions=[half]))
        self.assertTrue(self.lesson("The fused kernel moves 50% of the unfused chain's bytes.", questions=[half]))
        ratio = question_text("bf16_weights_losses", "The final loss with bf16 weights rounded to nearest, as a "
                              "multiple of the float32 weights' final loss?", 1.012, "ratio", "vs_fp32",
                              "absolute = 0.01")
        self.assertTrue(self.lesson("Rounded to nearest, the bf16 weights end at 1.01 times the float32 loss.",
                                    questions=[ratio]))
        dtype = question_text("master_weights_dtype", "Under autocast, what dtype do the model's weights keep?",
                              '"float32"', "dtype", "0")
        self.assertTrue(self.lesson("The weights themselves stay fp32 the whole time.", questions=[dtype]))
        inf = question_text("fp16_70000", "What is 70000 stored as fp16 (a number, or inf)?", "inf",
                            field="tensor Half")
        self.assertTrue(self.lesson("Rounding sends every float16 value from 65520 on to infinity.", questions=[inf]))

    def test_a_common_number_needs_two_of_the_questions_words_in_its_sentence(self):
        zero = question_text("fp16_gradient_1e-8", "What is a gradient of 1e-8 stored as fp16?", 0,
                             field="tensor Half")
        self.assertTrue(self.lesson("A 1e-8 gradient becomes 0 in float16 unless it is scaled up first.",
                                    questions=[zero]))
        self.assertEqual(self.lesson("float16 has 5 exponent bits. The loop starts at 0 and the gradient is summed.",
                                     questions=[zero]), [])

    def test_a_placeholder_printing_the_answer_above_the_questions_is_found(self):
        run = {"observations": [{"id": "tokens_loaded", "verdict": "holds", "measured": 338025}]}
        planted_lab(self.root, "", [self.TOKENS], run)
        found = self.lesson("It loads {{run:99:tokens_loaded|,.0f}} tokens.")
        self.assertTrue(any("{{run:99:tokens_loaded|,.0f}} prints the answer" in f for f in found), found)
        self.assertEqual(self.lesson("It loads every token.", "It loads {{run:99:tokens_loaded|,.0f}} tokens."), [])
        self.assertEqual(self.lesson("It loads every token ({{run:99:tokens_loaded.verdict}})."), [])

    # -------------------------------------------------------------------------------------- the pivot

    def pivots(self, measured, evidence=None, pivot=1, field="ratio"):
        observation = {"id": "timed", "verdict": "holds", "measured": measured}
        if evidence is not None:
            observation["evidence"] = {"value": evidence}
        side = question_text("timed", "The checkpointed step's time over the plain one's: above or below "
                             f"{pivot}?", 1.5, "x", field, f"side_of = {pivot}")
        return run_checks.pivot_problems(planted_lab(self.root, "", [side], {"observations": [observation]}))

    def test_a_kept_value_at_the_pivot_is_a_coin_flip(self):
        self.assertTrue(self.pivots({"ratio": 0.991}))
        self.assertTrue(self.pivots({"ratio": 1.08}))
        self.assertEqual(self.pivots({"ratio": 1.3}), [])

    def test_a_spread_across_the_pivot_is_a_coin_flip(self):
        found = self.pivots({"speedup": 1.54, "speedup_q1": 1.46, "speedup_q3": 1.88}, pivot=1.6, field="speedup")
        self.assertTrue(found and "straddles the pivot 1.6" in found[0], found)
        self.assertEqual(self.pivots({"speedup": 1.54, "speedup_q1": 1.46, "speedup_q3": 1.88}, pivot=1.2,
                                     field="speedup"), [])
        # The evidence's quartiles count when it measures this field (its median is the value), not otherwise.
        spread = {"median": 1.28, "q1": 1.05, "q3": 1.33, "min": 0.9, "max": 1.4}
        self.assertTrue(self.pivots({"ratio": 1.28}, spread))
        self.assertEqual(self.pivots({"ratio": 0.47}, spread), [])

    # ---------------------------------------------------------------------------- the size, the device

    def sizes(self, question, sized=None, on_device=None, default="200", quick="60"):
        run = {"observations": [], "flags": [["--steps", f"training steps (default {default}; --quick: {quick})"],
                                             ["--seed", "random seed (default 0; --quick: 0)"]]}
        asked = question_text("losses", question, 1.012, "ratio", "vs_fp32", "absolute = 0.01")
        root = planted_lab(self.root, "", [asked], run)
        return run_checks.size_problems(root, {"99": sized} if sized else {}, {"99": on_device} if on_device else {})

    def test_a_question_the_run_size_moves_must_say_quick(self):
        sized = {"losses.vs_fp32": (("--steps",), "60 steps under --quick, 200 by default")}
        found = self.sizes("The final loss with bf16 weights, as a multiple of float32's?", sized)
        self.assertTrue(found and "must say it is the --quick run's" in found[0], found)
        self.assertEqual(self.sizes("In the --quick run (60 steps), the final loss with bf16 weights, as a multiple "
                                    "of float32's?", sized), [])

    def test_a_listed_knob_that_quick_leaves_alone_or_a_listed_question_that_is_gone_is_a_problem(self):
        question = "In the --quick run, the final loss with bf16 weights, as a multiple of float32's?"
        found = self.sizes(question, {"losses.vs_fp32": (("--seed",), "the seed")})
        self.assertTrue(found and "--quick leaves at its default" in found[0], found)
        found = self.sizes(question, {"losses.vs_fp32": (("--steps",), "steps")}, default="60", quick="60")
        self.assertTrue(found and "--quick leaves at its default" in found[0], found)
        found = self.sizes(question, {"gone.field": (("--steps",), "steps")})
        self.assertTrue(found and "is no question" in found[0], found)

    def test_a_question_the_device_moves_must_name_the_cpu(self):
        tf32 = {"losses.vs_fp32": "TF32 changes the matmuls of NVIDIA GPUs only"}
        found = self.sizes("By how much does the tf32 run's loss differ from fp32's?", on_device=tf32)
        self.assertTrue(found and "must name the CPU" in found[0], found)
        self.assertEqual(self.sizes("On the CPU, by how much does the tf32 run's loss differ from fp32's?",
                                    on_device=tf32), [])

    def test_the_questions_the_lab_asked_before_are_caught(self):
        # The questions a reader found unfair, as the labs asked them before: each check names its own.
        before = {
            "05": question_text("tokens_loaded", "How many GPT-2 tokens does all of tiny shakespeare make (the lab "
                                "loads every token)?", 338025, "tokens", tolerance="relative = 0.05"),
            "13": question_text("speedup_over_baseline", "Does the reference trainer reach the quick target sooner "
                                "than the baseline (a score above 1)?", '"above"', "x", "score", "side_of = 1"),
        }
        lesson = ("The data is tiny shakespeare, GPT-2-tokenized: 338,025 tokens, read in order B x T at a time.\n\n"
                  "{{questions:05}}\n\n## What you should observe, and why\n")
        root = planted_lab(self.root, lesson, [before["05"]], number="05")
        self.assertTrue(checks.lesson_problems(root))
        stub = {"observations": [{"id": "speedup_over_baseline", "verdict": "holds", "measured": {"score": 1.03}}]}
        root = planted_lab(self.root / "13", "", [before["13"]], stub, number="13")
        self.assertTrue(run_checks.pivot_problems(root))
        loss = question_text("loss_at_step_0", "What is the loss at step 0, before any training?", 10.8, "nats",
                             tolerance="absolute = 0.15")
        run = {"observations": [], "flags": [["--config", "model size (default gpt2; --quick: tiny)"]]}
        root = planted_lab(self.root / "05", "", [loss], run, number="05")
        found = run_checks.size_problems(root, {"05": run_checks.SIZED["05"]}, {})
        self.assertTrue(any("loss_at_step_0" in f for f in found), found)


class LessonPage(unittest.TestCase):
    def test_the_questions_come_before_what_you_should_observe(self):
        folder = graded.lab_folder("02")
        section = lab_pages.questions_section(folder)
        printed = io.StringIO()
        with mock.patch("sys.stdout", printed):
            lab_pages.filter_page(str(folder / "README.md"))
        page = printed.getvalue()
        for q in predictions.read(folder / "predictions.toml"):
            self.assertIn(lab_pages.prose(q.question), section)
            if q.why:
                self.assertNotIn(lab_pages.prose(q.why), page, "the why comes after the run")
        self.assertIn(section.rstrip("\n"), page)
        self.assertNotIn("{{questions:", page)
        self.assertLess(page.index("## Predict, then measure"), page.index(lab_pages.OBSERVE_HEADING))

    def test_every_lesson_lists_its_questions_through_its_placeholder(self):
        for folder in lab_pages.lab_folders():
            with self.subTest(lab=folder.name):
                self.assertEqual(lab_pages.question_problems(folder / "README.md.in"), [])
                if predictions.read(folder / "predictions.toml"):
                    self.assertIn(f"{{{{questions:{folder.name[:2]}}}}}", (folder / "README.md.in").read_text())

    def test_a_missing_misplaced_or_wrong_placeholder_is_a_problem(self):
        folder = graded.lab_folder("02")
        text = (folder / "README.md.in").read_text()
        heading = "\n" + lab_pages.OBSERVE_HEADING
        cases = {"missing": text.replace("{{questions:02}}\n", ""),
                 "misplaced": text.replace("{{questions:02}}\n", "").replace("\n## ", "\n{{questions:02}}\n\n## ", 1),
                 "doubled": text.replace(heading, "\n{{questions:02}}\n" + heading, 1),
                 "no such lab": text.replace(heading, "\n{{questions:99}}\n" + heading, 1),
                 "malformed": text.replace(heading, "\n{{questions:2}}\n" + heading, 1)}
        for name, changed in cases.items():
            with self.subTest(case=name):
                self.assertTrue(lab_pages.question_problems(folder / "README.md.in", changed), name)

    def test_a_lab_without_questions_has_no_section(self):
        with tempfile.TemporaryDirectory() as folder:
            self.assertEqual(lab_pages.questions_section(Path(folder) / "99_none"), "")


if __name__ == "__main__":
    unittest.main(verbosity=1)
