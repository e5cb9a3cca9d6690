#!/usr/bin/env python3
"""Tests of `./lab new NN topic` (scripts/driver/new_lab.py) on a scratch copy, with nothing built (standard library
only): the lab's files appear, filled in, its lesson rendered and free of figures typed by hand, its stub the only
definition of its exercise outside solutions/; bad input exits 2 and writes nothing; an existing folder is refused
and left as it was. (Building, running and testing a made lab is docs/adding-a-lab.md's check, by hand.)

    test_new_lab.py [REPO]      (default: the repository this file is in)
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]).resolve()
MADE = ["labs/15_demo/CMakeLists.txt", "labs/15_demo/src/main.cpp", "labs/15_demo/src/experiment.h",
        "labs/15_demo/src/experiment.cpp", "labs/15_demo/exercise.h", "labs/15_demo/exercise.cpp",
        "labs/15_demo/README.md.in", "labs/15_demo/README.md", "solutions/15_demo/exercise.cpp",
        "tests/lab15/points.tsv", "tests/lab15/graded.cpp", "tests/lab15/test_demo.cpp"]
sys.path.insert(0, str(REPO / "grader"))
import exercise_table  # noqa: E402

HEADER = "\t".join(exercise_table.COLUMNS)  # points.tsv's header line
LONG_AGO = 1_000_000_000  # labs/CMakeLists.txt's time before a run: ./lab new makes it newer


class NewLab(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.tmp.name)
        (self.root / "scripts" / "driver").mkdir(parents=True)
        (self.root / "grader").mkdir()
        shutil.copy(REPO / "lab", self.root)
        shutil.copy(REPO / "grader" / "build.sh", self.root / "grader")  # the driver sources it
        shutil.copy(REPO / "grader" / "exercise_table.py", self.root / "grader")  # the pages' {{points}}, {{count}}
        # every driver script, so that new_lab.py and lab_pages.py find whatever module they import
        for script in [*(REPO / "scripts" / "driver").glob("*.py"), REPO / "scripts" / "driver" / "common.sh"]:
            shutil.copy(script, self.root / "scripts" / "driver")
        files = {
            "labs/CMakeLists.txt": (REPO / "labs" / "CMakeLists.txt").read_text(encoding="utf-8"),
            "labs/01_first/CMakeLists.txt": "speedlabs_add_lab(ID 01 SOURCES experiment.cpp)\n",
            "labs/01_first/README.md": "# Lab 01: first {#lab01}\n",
            "labs/01_first/exercise.cpp": "// the stub\n",
            "solutions/01_first/exercise.cpp": "// the answer\n",
            "tests/lab01/points.tsv": HEADER + "\nfirst\t10\tthe-exercise\t10\n",
            "README.md.in": "{{count:exercises}} exercises\n",
            "README.md": "1 exercises\n",  # as rendered before the new lab
            "docs/mainpage.md": "# demo {#mainpage}\n",
        }
        for name, text in files.items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(text, encoding="utf-8")
        os.utime(self.root / "labs" / "CMakeLists.txt", (LONG_AGO, LONG_AGO))

    def tearDown(self):
        self.tmp.cleanup()

    def lab(self, *args):
        return subprocess.run(["bash", str(self.root / "lab"), *args], capture_output=True, text=True, cwd=self.root,
                              timeout=60)

    def tree(self):
        """Every file and folder of the scratch copy, with its bytes and time: what a refused run must not change."""
        return {p.relative_to(self.root).as_posix(): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
                for p in self.root.rglob("*") if "__pycache__" not in p.parts}

    def text(self, name):
        return (self.root / name).read_text(encoding="utf-8")

    def test_makes_every_file_filled_in(self):
        made = self.lab("new", "15", "demo")
        self.assertEqual(made.returncode, 0, made.stderr)
        for name in MADE:
            self.assertTrue((self.root / name).is_file(), name)
        self.assertEqual(sorted(p.relative_to(self.root).as_posix() for p in self.root.glob("*/*15*/**/*")
                                if p.is_file()), sorted(MADE))
        for name in MADE:
            self.assertNotRegex(self.text(name), r"\$\{?[A-Z]", f"{name} holds a template field not filled in")
        self.assertGreater((self.root / "labs" / "CMakeLists.txt").stat().st_mtime, LONG_AGO)  # CMake configures again
        self.assertIn("speedlabs_add_lab(ID 15", self.text("labs/15_demo/CMakeLists.txt"))
        self.assertIn("TESTS tests/lab15/test_demo.cpp", self.text("labs/15_demo/CMakeLists.txt"))
        self.assertIn("speedlabs::Knobs<Config>", self.text("labs/15_demo/src/experiment.h"))
        self.assertIn("speedlabs::run_lab(", self.text("labs/15_demo/src/main.cpp"))
        self.assertIn('speedlabs::not_implemented("15", "15_demo", "sum_of_squares")',
                      self.text("labs/15_demo/exercise.cpp"))
        self.assertIn("TEST(Lab15_sum_of_squares,", self.text("tests/lab15/graded.cpp"))
        self.assertIn("FromTheSmokeRun", self.text("tests/lab15/test_demo.cpp"))
        self.assertEqual(self.text("tests/lab15/points.tsv").splitlines(),
                         [HEADER,
                          "sum_of_squares\t10\tthe-exercise\t10"])
        # The lesson: its table lists exactly the one observation the experiment records.
        sys.path.insert(0, str(self.root / "scripts" / "driver"))
        try:
            from page_markdown import observe_table_ids
        finally:
            sys.path.pop(0)
        recorded = re.findall(r'report\.check\("(\w+)"', self.text("labs/15_demo/src/experiment.cpp"))
        self.assertEqual(observe_table_ids(self.text("labs/15_demo/README.md.in")), recorded)
        self.assertEqual(recorded, ["yours_matches_libtorch"])
        for heading in ("**What it teaches.**", "## Key concepts / APIs", "## Run it",
                        "## What you should observe, and why", "## The exercise"):
            self.assertIn(heading, self.text("labs/15_demo/README.md.in"))

    def test_the_projects_readme_waits_for_the_render_then_counts_the_new_exercise(self):
        before = self.text("README.md")
        self.assertEqual(self.lab("new", "15", "demo").returncode, 0)
        self.assertEqual(self.text("README.md"), before, "deleting the lab's folders would not leave the tree as it was")
        pages = [sys.executable, str(self.root / "scripts" / "driver" / "lab_pages.py")]
        self.assertEqual(subprocess.run(pages + ["render"], capture_output=True, cwd=self.root).returncode, 0)
        self.assertTrue(self.text("README.md").startswith("2 exercises\n"), self.text("README.md"))

    def test_the_pages_and_the_answers_checks_pass(self):
        self.assertEqual(self.lab("new", "15", "demo").returncode, 0)
        pages = [sys.executable, str(self.root / "scripts" / "driver" / "lab_pages.py")]
        rendered = subprocess.run(pages + ["render"], capture_output=True, text=True, cwd=self.root)
        # Only the project's README waits for a render (above); the lesson ./lab new wrote is what its source gives.
        self.assertEqual((rendered.returncode, rendered.stdout), (0, "lab_pages: rendered README.md\n"))
        figures = subprocess.run(pages + ["figures", str(self.root / "labs/15_demo/README.md.in")], capture_output=True,
                                 text=True, cwd=self.root)
        self.assertEqual(figures.returncode, 0, figures.stdout)
        answers = subprocess.run([sys.executable, str(REPO / "tests" / "grading" / "answers_in_one_place.py"),
                                  str(self.root)], capture_output=True, text=True)
        self.assertEqual(answers.returncode, 0, answers.stdout)
        self.assertTrue(self.text("labs/15_demo/README.md").startswith("# Lab 15: demo {#lab15}"))

    @unittest.skipUnless(shutil.which("clang-format") and (REPO / ".clang-format").exists(), "no clang-format")
    def test_the_sources_are_formatted(self):
        self.assertEqual(self.lab("new", "15", "demo").returncode, 0)
        shutil.copy(REPO / ".clang-format", self.root)
        sources = [str(self.root / n) for n in MADE if n.endswith((".cpp", ".h"))]
        formatted = subprocess.run(["clang-format", "--dry-run", "-Werror", *sources], capture_output=True, text=True)
        self.assertEqual(formatted.returncode, 0, formatted.stderr)

    def test_bad_input_exits_2_and_writes_nothing(self):
        before = self.tree()
        for args in ([], ["15"], ["15", "demo", "more"], ["5", "demo"], ["015", "demo"], ["00", "demo"],
                     ["1a", "demo"], ["15", "Demo"], ["15", "de-mo"], ["15", "../demo"], ["15", ""], ["15", "demo\n"],
                     ["-1", "demo"], ["15", "démo"]):
            refused = self.lab("new", *args)
            self.assertEqual(refused.returncode, 2, f"./lab new {args}: {refused.stderr}")
            self.assertIn("[lab] error:", refused.stderr, args)
            self.assertEqual(self.tree(), before, f"./lab new {args} wrote something")

    def test_an_existing_folder_is_refused_and_kept(self):
        (self.root / "tests" / "lab16").mkdir()
        (self.root / "tests" / "lab16" / "graded.cpp").write_text("// kept\n")  # a leftover of an earlier lab 16
        (self.root / "solutions" / "17_other").mkdir()
        before = self.tree()
        for args, named in ((["01", "other"], "labs/01_first"), (["01", "first"], "labs/01_first"),
                            (["16", "demo"], "tests/lab16"), (["17", "demo"], "solutions/17_other")):
            refused = self.lab("new", *args)
            self.assertEqual(refused.returncode, 2, f"./lab new {args}: {refused.stderr}")
            self.assertIn(named, refused.stderr)
            self.assertEqual(self.tree(), before, f"./lab new {args} wrote something")
        self.assertEqual(self.lab("new", "15", "demo").returncode, 0)
        made = self.tree()
        again = self.lab("new", "15", "demo")
        self.assertEqual(again.returncode, 2)
        self.assertEqual(self.tree(), made, "a second ./lab new 15 demo changed the lab it refused")

    def test_a_release_without_solutions_is_refused(self):
        shutil.rmtree(self.root / "solutions")
        before = self.tree()
        refused = self.lab("new", "15", "demo")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("solutions/", refused.stderr)
        self.assertEqual(self.tree(), before)

    def test_help_lists_the_command(self):
        self.assertRegex(self.lab("help").stdout, r"\n  new NN topic +")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
