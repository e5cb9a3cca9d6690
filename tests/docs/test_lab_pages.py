#!/usr/bin/env python3
"""Tests of scripts/driver/lab_pages.py on a scratch copy (standard library only): a kept run goes stale when a source
it depends on changes, a placeholder fills a lesson's numbers from the kept run and fails the check when it
names a missing id or field, the table shows a verdict that could not be decided and a timing's spread, and the
claims ledger holds each row to the kept run: a number no rule states, a row without a rule shown as holding, a
condition that did not occur, a contradiction written into a claim's words; a link the HTML docs cannot follow.

    test_lab_pages.py [REPO]      (default: the repository this file is in)
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]).resolve()

README = """# Lab 01: a demo {#lab01}

Loading costs {{run:01:loader_cost_ms.ms_per_batch|.0f}} ms, {{run:01:loader_cost_ms.share|.1%}} of the step,
on {{run:01:machine}}. An example stays as written: `{{run:01:no_such_id}}`.

## What you should observe

| id | what |
|---|---|
| `loader_cost_ms` | the cost |
| `step_speedup` | the speed-up |

## Next
"""

# A lab program's --help, as CLI11 lays it out: a flag's help from column 30, or on the next line.
USAGE = """speedlabs lab 01_demo: a demo
Usage: build/bin/lab01 [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --quick                     small sizes: finishes in seconds
  --steps INT:INT in [1 - 100000]
                              training steps per run (default 200; --quick: 60)
  --seed UINT:0..2^63-1       random seed (default 0; --quick: 0)
"""


class ScratchCopy(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.tmp.name)
        (self.root / "scripts" / "driver").mkdir(parents=True)
        # lab_pages and its modules read the questions through predictions.py, the lab folders through lab_list.py
        # and common.sh
        for script in ("lab_pages.py", "kept_runs.py", "page_markdown.py", "placeholders.py", "claims_ledger.py",
                       "page_figures.py", "page_render.py", "predictions.py", "lab_list.py", "speedrun_records.py",
                       "common.sh"):
            shutil.copy(REPO / "scripts" / "driver" / script, self.root / "scripts" / "driver")
        (self.root / "grader").mkdir()
        shutil.copy(REPO / "grader" / "exercise_table.py", self.root / "grader")  # the {{points}} and {{count}}
        files = {
            "labs/01_demo/README.md.in": README,
            "labs/01_demo/CMakeLists.txt": "speedlabs_add_lab(ID 01 SOURCES experiment.cpp)\n",
            "labs/01_demo/experiment.cpp": "int answer() { return 42; }\n",
            "labs/README.md": "| [01](01_demo/README.md) | a demo |\n",
            "solutions/01_demo/exercise.cpp": "int solve() { return 1; }\n",
            "common/timer.h": "#pragma once\n",
            "datasets/data_loader.cpp": "// the loader\n",
            "docs/mainpage.md": "# demo {#mainpage}\n",
        }
        for name, text in files.items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(text, encoding="utf-8")
        self.write_kept_run()
        self.assertEqual(self.lab_pages("render").returncode, 0)

    def tearDown(self):
        self.tmp.cleanup()

    def lab_pages(self, *args):
        return subprocess.run([sys.executable, str(self.root / "scripts" / "driver" / "lab_pages.py"), *args],
                              capture_output=True, text=True, cwd=self.root)

    def write_kept_run(self, fingerprint=None, extra=()):
        """The kept run of lab 01 (its two observations, then @p extra), fresh unless @p fingerprint says otherwise."""
        if fingerprint is None:
            fingerprint = self.lab_pages("fingerprint", "01").stdout.split()[0]
        report = {"lab": "01_demo", "device": "cpu (2 threads)", "libtorch": "2.13.0", "observations": [
            {"id": "loader_cost_ms", "claim": "loading costs time", "expected": "> 0", "must_hold": False,
             "verdict": "holds", "measured": {"ms_per_batch": 25.34, "share": 0.0465},
             "evidence": {"value": {"median": 25.3, "q1": 24.0, "q3": 30.0, "min": 23.0, "max": 41.0,
                                       "count": 9, "spread": 0.24},
                             "contention": {"wall_s": 2.0, "process_cores": 1.0, "others_cores": 0.1,
                                            "preemptions_per_s": 3.0, "cores": 2, "busy": False},
                             "bounds": [], "max_spread": 0.5, "min_samples": 5}},
            {"id": "step_speedup", "claim": "faster", "expected": ">= 1.5x", "must_hold": True,
             "verdict": "inconclusive", "reason": "the machine was busy: another process used 1.2 cores",
             "measured": 1.21}, *extra],
            "run": {"command": "build/bin/lab01 --quick --json", "exit_code": 5, "date": "2026-12-01",
                    "seconds": 1.0, "cpu": "AMD EPYC", "logical_cpus": 2, "os": "Linux", "load_average_before": 0.1,
                    "commit": "0123456789abcdef", "fingerprint": fingerprint}}
        # What the refresh writes, by the copy's own kept_runs.py (in a process of its own: this one imports the
        # repository's modules).
        checksum = subprocess.run([sys.executable, "-c", "import json, sys; sys.path.insert(0, 'scripts/driver'); "
                                   "import kept_runs; print(kept_runs.content_checksum(json.load(sys.stdin)))"],
                                  input=json.dumps(report), capture_output=True, text=True, cwd=self.root, check=True)
        report["run"]["content_sha256"] = checksum.stdout.strip()
        results = self.root / "docs" / "results"
        results.mkdir(parents=True, exist_ok=True)
        (results / "lab01.json").write_text(json.dumps(report), encoding="utf-8")

    def test_fresh_run_passes_and_a_changed_source_makes_it_stale(self):
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        for changed in ("common/timer.h", "datasets/data_loader.cpp", "solutions/01_demo/exercise.cpp",
                        "labs/01_demo/experiment.cpp"):
            with self.subTest(changed=changed):
                path = self.root / changed
                before = path.read_text(encoding="utf-8")
                path.write_text(before + "\n// changed\n", encoding="utf-8")
                result = self.lab_pages("check")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn("lab 01", result.stderr)
                self.assertIn("stale", result.stderr)
                self.assertIn("./lab docs --refresh-results 01", result.stderr)
                path.write_text(before, encoding="utf-8")
                self.assertEqual(self.lab_pages("check").returncode, 0)

    def test_a_link_to_a_missing_page_or_to_a_section_of_another_page_fails(self):
        source = self.root / "labs" / "01_demo" / "README.md.in"
        for link, problem in (("../../docs/mainpage.md#setup", "names a section of another page"),
                              ("../../docs/nothere.md", "points to a missing file")):
            with self.subTest(link=link):
                source.write_text(README.replace("## Next", f"See [the page]({link}).\n\n## Next"), encoding="utf-8")
                self.lab_pages("render")
                result = self.lab_pages("check")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(f"link {link} {problem}", result.stderr)
        source.write_text(README.replace("## Next", "See [the page](../../docs/mainpage.md).\n\n## Next"),
                          encoding="utf-8")
        self.lab_pages("render")
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)

    def test_a_number_edited_by_hand_fails_the_check_though_the_fingerprint_is_fresh(self):
        path = self.root / "docs" / "results" / "lab01.json"
        kept = path.read_text(encoding="utf-8")
        path.write_text(kept.replace("25.34", "12.34"), encoding="utf-8")
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("docs/results/lab01.json: its content checksum does not match", result.stderr)
        self.assertNotIn("stale", result.stderr)  # the sources did not change: the run did
        report = json.loads(kept)
        del report["run"]["content_sha256"]
        path.write_text(json.dumps(report), encoding="utf-8")
        self.assertIn("records no content checksum", self.lab_pages("check").stderr)
        path.write_text(json.dumps(json.loads(kept), indent=3), encoding="utf-8")  # the layout is not the content
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)

    def test_a_copy_without_kept_runs_says_why_the_docs_are_not_built(self):
        shutil.rmtree(self.root / "docs" / "results")  # as a release leaves it
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("no kept runs", result.stderr)
        self.assertEqual(result.stderr.count("\n"), 1, result.stderr)  # one sentence, not a line per placeholder

    def test_a_new_file_counts_and_a_run_without_fingerprint_is_stale(self):
        (self.root / "common" / "contention.h").write_text("#pragma once\n", encoding="utf-8")
        self.assertNotEqual(self.lab_pages("check").returncode, 0)
        self.write_kept_run(fingerprint="")
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("records no fingerprint", result.stderr)

    def test_refresh_records_what_the_check_needs(self):
        """refresh runs build/bin/labNN --quick --json (a stand-in program here) and keeps the report with its
        commit and fingerprint: right after it the check passes; after a source changes it fails."""
        program = self.root / "build" / "bin" / "lab01"
        program.parent.mkdir(parents=True)
        report = json.loads((self.root / "docs" / "results" / "lab01.json").read_text(encoding="utf-8"))
        del report["run"]
        program.write_text("#!" + sys.executable + "\nimport json, sys\n"
                           f"if '--help' in sys.argv: print({USAGE!r}); sys.exit(0)\n"
                           f"open(sys.argv[sys.argv.index('--json') + 1], 'w').write(json.dumps({report!r}))\n"
                           "sys.exit(5)  # a must-hold observation could not be decided: still a report\n")
        program.chmod(0o755)
        (self.root / "docs" / "results" / "lab01.json").unlink()
        refreshed = self.lab_pages("refresh", "--build", str(self.root / "build"), "01")
        self.assertEqual(refreshed.returncode, 0, refreshed.stderr)
        run = json.loads((self.root / "docs" / "results" / "lab01.json").read_text(encoding="utf-8"))["run"]
        self.assertEqual(run["fingerprint_of"], ["labs/01_demo", "solutions/01_demo", "common", "datasets"])
        self.assertIn("commit", run)
        self.assertIn("load_average_before", run)
        self.assertEqual(run["exit_code"], 5)
        flags = json.loads((self.root / "docs" / "results" / "lab01.json").read_text(encoding="utf-8"))["flags"]
        self.assertEqual(flags, [["--quick", "small sizes: finishes in seconds"],
                                 ["--steps", "training steps per run (default 200; --quick: 60)"],
                                 ["--seed", "random seed (default 0; --quick: 0)"]])
        page = self.lab_pages("filter", str(self.root / "labs" / "01_demo" / "README.md")).stdout
        self.assertIn("| `--steps` | training steps per run (default 200; --quick: 60) |", page)
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        (self.root / "labs" / "01_demo" / "experiment.cpp").write_text("int answer() { return 43; }\n")
        self.assertIn("./lab docs --refresh-results 01", self.lab_pages("check").stderr)

    def test_a_chart_is_the_kept_runs_own_or_the_check_fails(self):
        """A program whose help names an .svg draws its charts during the refresh, into docs/images, and the kept
        run records each one's hash: a chart drawn by no kept run, or changed after it, fails the check."""
        program = self.root / "build" / "bin" / "lab01"
        program.parent.mkdir(parents=True)
        report = json.loads((self.root / "docs" / "results" / "lab01.json").read_text(encoding="utf-8"))
        del report["run"]
        usage = USAGE + "  --plots TEXT                write lab01_steps.svg here (gnuplot)\n"
        program.write_text("#!" + sys.executable + "\nimport json, pathlib, sys\n"
                           f"if '--help' in sys.argv: print({usage!r}); sys.exit(0)\n"
                           "folder = pathlib.Path(sys.argv[sys.argv.index('--plots') + 1])\n"
                           "(folder / 'lab01_steps.svg').write_text('<svg>1.0 ms</svg>')\n"
                           f"open(sys.argv[sys.argv.index('--json') + 1], 'w').write(json.dumps({report!r}))\n")
        program.chmod(0o755)
        images = self.root / "docs" / "images"
        images.mkdir(parents=True)
        (images / "lab01_by_hand.svg").write_text("<svg>9.9 ms</svg>")
        result = self.lab_pages("check")
        self.assertIn("docs/images/lab01_by_hand.svg: no kept run drew it", result.stderr)
        (images / "lab01_by_hand.svg").unlink()
        refreshed = self.lab_pages("refresh", "--build", str(self.root / "build"), "01")
        self.assertEqual(refreshed.returncode, 0, refreshed.stderr)
        self.assertEqual((images / "lab01_steps.svg").read_text(), "<svg>1.0 ms</svg>")
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        (images / "lab01_steps.svg").write_text("<svg>0.5 ms</svg>")
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("docs/images/lab01_steps.svg is not the chart the kept run docs/results/lab01.json drew",
                      result.stderr)

    def test_a_lab_depends_on_the_labs_whose_exercise_it_runs(self):
        folder = self.root / "labs" / "02_next"
        folder.mkdir()
        (folder / "README.md").write_text("# Lab 02: next {#lab02}\n", encoding="utf-8")
        (folder / "CMakeLists.txt").write_text("speedlabs_add_lab(ID 02\n  USES_EXERCISES 01)\n", encoding="utf-8")
        roots = self.lab_pages("fingerprint", "02").stdout.split()[1:]
        self.assertEqual(roots, ["labs/02_next", "labs/01_demo", "solutions/01_demo", "common", "datasets"])

    def test_in_a_git_checkout_ignored_files_do_not_count(self):
        if shutil.which("git") is None:
            self.skipTest("no git")
        git = ["git", "-C", str(self.root), "-c", "user.name=t", "-c", "user.email=t@t"]
        (self.root / ".gitignore").write_text("*.o\n", encoding="utf-8")
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "scratch"], check=True)
        self.write_kept_run()
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        (self.root / "common" / "timer.o").write_bytes(b"\0object")
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        (self.root / "common" / "new.h").write_text("#pragma once\n", encoding="utf-8")  # new, not ignored
        self.assertNotEqual(self.lab_pages("check").returncode, 0)

    def test_a_page_not_rendered_from_its_source_fails_until_it_is(self):
        source, page = self.root / "labs" / "01_demo" / "README.md.in", self.root / "labs" / "01_demo" / "README.md"
        self.assertIn("Loading costs 25 ms", page.read_text(encoding="utf-8"))
        self.assertNotIn("{{run:", page.read_text(encoding="utf-8").split("`")[0])
        source.write_text(README.replace("Loading costs", "Loading takes"), encoding="utf-8")
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("labs/01_demo/README.md is not what README.md.in and the kept runs give", result.stderr)
        self.assertNotIn("stale", result.stderr)  # the lesson is not what the lab measures
        self.assertEqual(self.lab_pages("render").returncode, 0)
        self.assertIn("Loading takes 25 ms", page.read_text(encoding="utf-8"))
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        page.write_text(page.read_text(encoding="utf-8").replace("25 ms", "15 ms"), encoding="utf-8")  # by hand
        self.assertIn("is not what README.md.in", self.lab_pages("check").stderr)

    def test_a_figure_typed_by_hand_fails_unless_sourced_or_fixed(self):
        source = self.root / "labs" / "01_demo" / "README.md.in"
        fixed = self.root / "labs" / "01_demo" / "fixed-figures.tsv"
        for sentence, passes in (("The loop is 3.2x slower.", False), ("A step takes 16-19 ms here.", False),
                                 ("It used 1,152 MiB at its peak.", False), ("A shape of 2 x 768 floats.", True),
                                 ("On an A100, chapter 9's log gives 43 ms a step.", True),
                                 ("A float32 takes 4 bytes.", False), ("`a 3x in code`", True)):
            with self.subTest(sentence=sentence):
                source.write_text(README + sentence + "\n", encoding="utf-8")
                self.lab_pages("render")
                result = self.lab_pages("check")
                self.assertEqual(result.returncode == 0, passes, result.stderr)
                if not passes:
                    self.assertIn("is typed by hand", result.stderr)
        fixed.write_text("labs/01_demo/README.md.in\t4 bytes\tthe size of a float32\n", encoding="utf-8")
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        fixed.write_text("labs/01_demo/README.md.in\t4 bytes\n", encoding="utf-8")  # no why: not a row
        self.assertNotEqual(self.lab_pages("check").returncode, 0)

    def test_placeholders_are_filled_from_the_kept_run(self):
        page = self.lab_pages("filter", str(self.root / "labs" / "01_demo" / "README.md"))
        self.assertEqual(page.returncode, 0, page.stderr)
        self.assertIn("Loading costs 25 ms, 4.7% of the step", page.stdout)
        self.assertIn("on AMD EPYC, 2 logical CPUs, quiet (other programs used at most 0.10 of a core while it measured).", page.stdout)
        self.assertIn("An example stays as written: `{{run:01:no_such_id}}`.", page.stdout)
        self.assertEqual(page.stdout.count("{{run:"), 1)

    def test_a_placeholder_naming_a_missing_id_or_field_fails_the_check(self):
        readme = self.root / "labs" / "01_demo" / "README.md.in"
        for bad, said in (("{{run:01:no_such_id}}", "no observation 'no_such_id'"),
                          ("{{run:01:loader_cost_ms.no_such_field}}", "no field 'no_such_field'"),
                          ("{{run:01:loader_cost_ms}}", "not a value"),
                          ("{{run:02:loader_cost_ms}}", "lab 02 has no kept run"),
                          ("{{run:01 loader_cost_ms}}", "is not a placeholder")):
            with self.subTest(bad=bad):
                readme.write_text(README + bad + "\n", encoding="utf-8")
                self.write_kept_run()  # the README is a source: keep the run fresh, test the placeholder alone
                result = self.lab_pages("check")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(said, result.stderr)
                self.assertNotIn("stale", result.stderr)

    def test_a_points_placeholder_reads_the_exercises_one_declaration(self):
        points = self.root / "tests" / "lab01" / "points.tsv"
        points.parent.mkdir(parents=True)
        points.write_text("exercise\tpoints\treadme_anchor\tbudget_s\tneeds\tspeed_full\tspeed_zero\toutside\n"
                          "solve\t10\tthe-exercise\t10\nsolve_speed\t5\tthe-exercise\t120\t\t1/3\t0.1\n", encoding="utf-8")
        readme = self.root / "labs" / "01_demo" / "README.md.in"
        readme.write_text(README + "Full points from {{points:01:solve_speed.speed_full}}, "
                          "{{points:01:solve_speed.points}} points.\n", encoding="utf-8")
        self.write_kept_run()
        self.assertEqual(self.lab_pages("render").returncode, 0)
        page = self.lab_pages("filter", str(self.root / "labs" / "01_demo" / "README.md"))
        self.assertEqual(page.returncode, 0, page.stderr)
        self.assertIn("Full points from 1/3, 5 points.", page.stdout)
        for bad, said in (("{{points:01:solve.speed_full}}", "declares no speed_full"),
                          ("{{points:01:no_such.points}}", "no exercise 'no_such'"),
                          ("{{points:01:solve.needs}}", "not a number of points.tsv"),
                          ("{{points:02:solve.points}}", "lab 02 has no graded exercises")):
            with self.subTest(bad=bad):
                readme.write_text(README + bad + "\n", encoding="utf-8")
                self.write_kept_run()
                result = self.lab_pages("check")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(said, result.stderr)

    def test_the_labs_table_is_made_from_the_one_list(self):
        listing = self.root / "labs" / "README.md"
        listing.write_text("| lab | what it shows | needs |\n|---|---|---|\n"
                           "| [01 a demo](01_demo/README.md) | a sum, measured | CPU |\n", encoding="utf-8")
        readme = self.root / "labs" / "01_demo" / "README.md.in"
        readme.write_text(README + "{{labs:table}}\n", encoding="utf-8")
        self.write_kept_run()
        self.assertEqual(self.lab_pages("render").returncode, 0)
        page = (self.root / "labs" / "01_demo" / "README.md").read_text(encoding="utf-8")
        self.assertIn("| [01 a demo](labs/01_demo/README.md) | a sum, measured | CPU | `./lab run 01` |", page)
        (self.root / "labs" / "02_new").mkdir()  # a lab ./lab new just made: no row yet
        (self.root / "labs" / "02_new" / "CMakeLists.txt").write_text("speedlabs_add_lab(ID 02)\n", encoding="utf-8")
        (self.root / "labs" / "02_new" / "README.md.in").write_text("# Lab 02: a new one {#lab02}\n", encoding="utf-8")
        self.write_kept_run()
        self.assertEqual(self.lab_pages("render").returncode, 0)
        page = (self.root / "labs" / "01_demo" / "README.md").read_text(encoding="utf-8")
        self.assertIn("| [02 a new one](labs/02_new/README.md) | (its row in labs/README.md is still to write) |", page)
        listing.write_text(listing.read_text(encoding="utf-8") + "| [03 gone](03_gone/README.md) | x | CPU |\n",
                           encoding="utf-8")
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("has a row for 03_gone, which is no lab folder", result.stderr)

    def test_the_table_shows_could_not_decide_and_the_spread(self):
        page = self.lab_pages("filter", str(self.root / "labs" / "01_demo" / "README.md")).stdout
        row = [line for line in page.splitlines() if line.startswith("| `step_speedup`")][-1]
        self.assertIn("could not decide", row)
        self.assertIn("the machine was busy", row)
        row = [line for line in page.splitlines() if line.startswith("| `loader_cost_ms`")][-1]
        self.assertIn("±12% n=9 quiet", row)
        self.assertIn("| id | verdict | must hold | measured | spread | expected |", page)


# Observations a kept run may add for the ledger's tests: one only reported, one with a field that says whether
# an overflow happened, one whose number broke a physical bound.
REPORTED = {"id": "loader_share", "claim": "the loader's share of the step", "expected": "reported",
            "must_hold": False, "verdict": "holds", "measured": {"share": 0.3}}
OVERFLOW = {"id": "overflow_skipped", "claim": "a step whose gradients overflow is skipped",
            "expected": "skipped == overflowed (reported)", "must_hold": False, "verdict": "holds",
            "measured": {"overflowed_steps": 0, "skipped": 0}}
FAILED = {"id": "hidden_share", "claim": "part of the loading hides", "expected": "> 0 (reported)", "must_hold": False,
          "verdict": "inconclusive", "measured": {"raw": -1.69},
          "reason": "share hidden = -1.69 lies outside [0, 1], which no real run can give: the measurement failed"}


class TheLedger(ScratchCopy):
    """The claims ledger (docs/claims.json) against the scratch lab's kept run: each defect planted fails the check
    or shows on the page, and the row set right passes. (ScratchCopy's own tests run once, in ScratchCopy.)"""

    def setUp(self):
        super().setUp()
        self.write_kept_run(extra=[REPORTED, OVERFLOW, FAILED])
        (self.root / "docs" / "claims.md").write_text("# Claims {#claims}\n\n@claims_ledger\n", encoding="utf-8")

    def write_ledger(self, *rows):
        ledger = {"sources": [{"key": "lesson", "title": "The lesson", "short": "the lesson", "about": "A demo."}],
                  "claims": [{"source": "lesson", "where": "1", **row} for row in rows]}
        (self.root / "docs" / "claims.json").write_text(json.dumps(ledger), encoding="utf-8")

    def ledger_rows(self):
        page = self.lab_pages("filter", str(self.root / "docs" / "claims.md"))
        self.assertEqual(page.returncode, 0, page.stderr)
        return [line for line in page.stdout.splitlines() if line.startswith("| 1 |")]

    def test_a_number_no_rule_states_fails_the_check(self):
        loader, speedup = {"lab": "01", "id": "loader_cost_ms"}, {"lab": "01", "id": "step_speedup"}
        for claim, check, passes in (("loading costs at least half of the step", loader, False),
                                     ("the step is 3x faster", speedup, False),
                                     ("the step is ten times faster", speedup, False),
                                     ("the step is 1.5 times faster", speedup, True),
                                     ("the step is at least 1.5x faster", speedup, True),
                                     ("the step is at least 1.5x faster with 2 threads", speedup, False),
                                     ("the loader takes under 30% of the step", {"lab": "01", "id": "loader_share"},
                                      False),  # only reported: no rule states anything
                                     ("loading costs time", loader, True)):
            with self.subTest(claim=claim):
                self.write_ledger({"claim": claim, "checked_by": [check]})
                result = self.lab_pages("check")
                self.assertEqual(result.returncode == 0, passes, result.stderr)
                if not passes:
                    self.assertIn("docs/claims.json, claim 1", result.stderr)
                    self.assertIn(claim, result.stderr)  # names the claim ...
                    self.assertIn(f"{check['id']}: '", result.stderr)  # ... and the rule
                    self.assertIn("which no rule that checks it states", result.stderr)
        self.write_ledger({"claim": "the loader takes under 30% of the step", "checked_by": [
            {"lab": "01", "id": "loader_share"}]})
        self.assertIn("(only reported: no rule)", self.lab_pages("check").stderr)

    def test_a_row_without_a_rule_reads_reported_never_holds(self):
        self.write_ledger({"claim": "the loader takes a share of the step", "checked_by": [
            {"lab": "01", "id": "loader_share"}, {"lab": "01", "id": "loader_cost_ms"}]})
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        row = self.ledger_rows()[0]
        self.assertTrue(row.endswith("| reported<br>holds |"), row)  # "> 0" is a rule: it holds
        page = self.lab_pages("filter", str(self.root / "labs" / "01_demo" / "README.md")).stdout
        table = [line for line in page.splitlines() if line.startswith("| `loader_share`")][-1]
        self.assertIn("| `loader_share` | reported |", table)
        table = [line for line in page.splitlines() if line.startswith("| `hidden_share`")][-1]
        self.assertIn("| `hidden_share` | measurement failed |", table)  # a broken bound, not "could not decide"

    def test_a_verdict_placeholder_says_measurement_failed_as_the_table_does(self):
        readme = self.root / "labs" / "01_demo" / "README.md.in"
        readme.write_text(readme.read_text(encoding="utf-8") + "\nIts row: {{run:01:hidden_share.verdict}}.\n",
                          encoding="utf-8")
        page = self.lab_pages("filter", str(readme)).stdout
        self.assertIn("Its row: measurement failed.", page)

    def test_a_condition_that_did_not_occur_reads_not_exercised(self):
        row = {"claim": "a step whose gradients overflow is skipped",
               "checked_by": [{"lab": "01", "id": "overflow_skipped", "condition": "overflowed_steps"}]}
        self.write_ledger(row)
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        self.assertIn("| not exercised (overflowed_steps = 0) |", self.ledger_rows()[0])
        self.assertIn("(if overflowed_steps)", self.ledger_rows()[0])
        self.write_kept_run(extra=[REPORTED, dict(OVERFLOW, measured={"overflowed_steps": 2, "skipped": 2}), FAILED])
        self.assertTrue(self.ledger_rows()[0].endswith("| holds |"), self.ledger_rows()[0])
        self.write_ledger(dict(row, checked_by=[{"lab": "01", "id": "overflow_skipped", "condition": "overflows > 0"}]))
        result = self.lab_pages("check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("its condition names 'overflows', which lab 01's 'overflow_skipped' does not measure",
                      result.stderr)

    def test_a_contradiction_is_said_in_contradicted_by_alone(self):
        for row, said in (({"claim": "loading is free: lab 01 measures the opposite",
                            "checked_by": [{"lab": "01", "id": "loader_cost_ms"}]}, "says in its words"),
                          ({"claim": "loading is free", "contradicted_by": {
                              "reason": "it costs time", "by": [{"lab": "01", "id": "no_such_id"}]}},
                           "lab 01 observes no 'no_such_id'"),
                          ({"claim": "loading is free", "contradicted_by": {
                              "by": [{"lab": "01", "id": "loader_cost_ms"}]}}, "needs a reason")):
            with self.subTest(said=said):
                self.write_ledger(row)
                result = self.lab_pages("check")
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(said, result.stderr)
        self.write_ledger({"claim": "loading is free", "contradicted_by": {
            "reason": "loading a batch costs time", "by": [{"lab": "01", "id": "loader_cost_ms"}]}})
        self.assertEqual(self.lab_pages("check").returncode, 0, self.lab_pages("check").stderr)
        row = self.ledger_rows()[0]
        self.assertIn("loading is free<br>**contradicted**: loading a batch costs time", row)
        self.assertIn("lab 01: `loader_cost_ms` (contradicts)", row)
        self.assertTrue(row.endswith("| **contradicts** |"), row)
        self.write_ledger({"claim": "loading is free", "contradicted_by": {
            "reason": "loading a batch costs time",
            "by": [{"lab": "01", "id": "loader_cost_ms", "condition": "ms_per_batch > 100"}]}})
        self.assertTrue(self.ledger_rows()[0].endswith("| no contradiction here (ms_per_batch = 25.34) |"))


# TheLedger inherits ScratchCopy's scratch copy, not its tests.
for _name in [n for n in vars(ScratchCopy) if n.startswith("test_")]:
    setattr(TheLedger, _name, None)


class TheRepository(unittest.TestCase):
    def test_the_claims_ledger_names_only_observed_ids(self):
        sys.path.insert(0, str(REPO / "scripts" / "driver"))
        import lab_pages
        self.assertEqual(lab_pages.ledger_problems(), [])
        self.assertIn("| where | claim | checked by |", lab_pages.claims_ledger())

    def test_the_speedrun_chart_draws_the_best_full_race(self):
        sys.path.insert(0, str(REPO / "scripts" / "driver"))
        import speedrun_records
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "records.jsonl"
            def line(score, target=1.88):
                return json.dumps({"score": score, "date": "2026-12-07T00:00:00Z", "cpu": "CPU", "config": {"target": target},
                                   "curves": {"baseline": [[1.0, 2.5], [10.0, 1.87]], "trainer": [[1.0, 2.0], [2.0, 1.85]],
                                              "python_eager": [[1.5, 2.5], [12.0, 1.87]]}})
            path.write_text(line(3.0) + "\n" + line(9.0, target=2.2) + "\n" + line(5.0) + "\n", encoding="utf-8")
            svg = speedrun_records.records_plot(path)
        self.assertIn("score 5.00x", svg, "the best full race, not the quick one")
        self.assertEqual(svg.count("<polyline"), 3)
        self.assertIn("Python peer (eager)", svg)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
