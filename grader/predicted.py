#!/usr/bin/env python3
"""A lab's predictions as ./lab check and ./lab grade show and score them (grader/grade.py).

The rules live once, in C++ (common/predictions.cpp): each lab program prints its predictions beside its
measurements and writes the comparison into its --json output (the "predictions" section). For a run made
earlier, or answers given since (a student's edited file, a submission graded against this machine's
reference run), the `predictions` program of the same build (common/predictions_main.cpp) writes that section:

  predictions QUESTIONS.toml ANSWERS.toml [--run RUN.json]

Here the section is read and shown; what is compared with what is chosen here: the official questions
(rules_file: the reference's solutions/NN_topic/predictions.toml where the checkout has it, else
labs/NN_topic/predictions.toml; their rules), the student's answers (SPEEDLABS_PREDICTIONS_DIR, laid out
like labs/, when set: ./lab grade --submission, CI's reference answers; else labs/), and the run.
Standard library only.
"""
import datetime
import json
import os
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "tests" / "grading" / "weights.toml"


def prediction_points():
    """Points per prediction within its tolerance (tests/grading/weights.toml; 0: predictions not graded)."""
    try:
        return float(tomllib.loads(WEIGHTS.read_text())["predictions"]["points_per_question"])
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise SystemExit(f"[lab] error: {WEIGHTS}: no [predictions] points_per_question ({error})") from None


def tool_of(build):
    """The `predictions` program of the build tree @p build (CMake's bin/ folder)."""
    return Path(build) / "bin" / "predictions"


def lab_folder(lab):
    return next(ROOT.glob(f"labs/{lab}_*"))


def rules_file(folder):
    """Where lab @p folder's official questions and their rules are read: the reference's file
    (solutions/NN_topic/predictions.toml, the same questions and rules as the blank one the course ships) where
    this checkout has it, so that no file a student edits sets a tolerance; else the shipped blank file
    (labs/NN_topic/predictions.toml, a student's own copy). Only the answers of the student's file count."""
    reference = ROOT / "solutions" / folder / "predictions.toml"
    return reference if reference.is_file() else ROOT / "labs" / folder / "predictions.toml"


def readable_run(path):
    """True when @p path holds a lab's --json report."""
    try:
        return isinstance(json.loads(Path(path).read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def measured_run(lab, build=None):
    """(path, where) of the run lab @p lab's predictions are graded against: this machine's last --quick run of
    the reference (the smoke run ./lab test makes, <build>/labs/NN_*/labNN.smoke.json) when there is one, else
    the run kept for the docs (docs/results/labNN.json, made on the machine it names); (None, why) when neither."""
    folder = lab_folder(lab).name
    build = Path(build) if build else ROOT / "build"
    candidates = [(build / "labs" / folder / f"lab{lab}.smoke.json", "this machine's --quick run"),
                  (ROOT / "docs" / "results" / f"lab{lab}.json", "the kept run (docs/results)")]
    for path, where in candidates:
        if readable_run(path):
            return path, where
    return None, f"no run of lab {lab} to compare with: ./lab test -L lab{lab} -R smoke makes one"


def student_run_path(lab):
    """Where the student's latest run of lab @p lab on this machine is kept: build-student/runs/labNN.json (the
    run ./lab check makes when there is none; ./lab run NN keeps each run there)."""
    return ROOT / "build-student" / "runs" / f"lab{lab}.json"


def check_run_flags():
    """The shared flags given to ./lab check (SPEEDLABS_CHECK_RUN_FLAGS, shell words), for the run it makes;
    None when none were given."""
    words = os.environ.get("SPEEDLABS_CHECK_RUN_FLAGS")
    return shlex.split(words) if words else None


def make_student_run(lab, path):
    """Runs lab @p lab here the way the student does (./lab run NN, which builds it first), --quick with the
    flags given to ./lab check, its report kept at @p path (./lab run keeps it there beside a --json of the
    user's); its output goes to .cache/check-run-NN.log. Returns the output's last line (why a run that wrote
    no report stopped: an exercise still a stub, say)."""
    log = ROOT / ".cache" / f"check-run-{lab}.log"
    print(f"lab {lab}: no run of yours to compare your predictions with yet: running ./lab run {lab} --quick "
          f"(output in .cache/{log.name})", file=sys.stderr, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        flags = check_run_flags() or []
        own_json = [] if "--json" in flags else ["--json", str(path)]
        subprocess.run([str(ROOT / "lab"), "run", lab, "--quick", *flags, *own_json], cwd=ROOT, stdout=out,
                       stderr=subprocess.STDOUT, check=False)
    lines = [l for l in log.read_text(encoding="utf-8", errors="replace").splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


def student_run(lab, make=True):
    """(path, where) of the student's latest run of lab @p lab on this machine (student_run_path), made first
    when there is none and @p make; where says which run it is, with its time. (None, why) when there is none."""
    path = student_run_path(lab)
    fresh = make and (not path.exists() or check_run_flags() is not None)  # flags given: a run made with them
    stopped = make_student_run(lab, path) if fresh else None
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not readable_run(path):
        if stopped is not None:
            return None, f"no run of yours of lab {lab} to compare with: ./lab run {lab} --quick stopped: {stopped}"
        return None, f"no run of yours of lab {lab} to compare with: ./lab run {lab} --quick --json {shown} makes one"
    when = datetime.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    return path, f"your run of {when} on this machine ({shown})"


def section(tool, questions, answers, run=None):
    """(section, error): the "predictions" section the program @p tool writes for the official @p questions
    answered from @p answers and compared with the report at @p run (None: no run)."""
    command = [str(tool), str(questions), str(answers)] + (["--run", str(run)] if run else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        return None, f"cannot run {tool} ({error.strerror}): build it (cmake --build BUILD --target predictions)"
    if done.returncode != 0:
        return None, f"{tool} failed: {done.stderr.strip() or done.returncode}"
    data = json.loads(done.stdout)
    return data, data["error"]


@dataclass
class Predicted:
    """A lab's predictions compared with its measured run: rows (the section's questions, each a dict: name,
    question, unit, why, answer, verdict ok|off|blank|unmeasured, detail, yours, measured_text, rule,
    machine_dependent), the official questions' names (what is graded), where the measurements come from,
    and the error of a malformed file."""
    lab: str
    rows: list = field(default_factory=list)
    official: list = field(default_factory=list)
    where: str = ""
    error: str = ""


def predicted(lab, tool, mine=False):
    """Lab @p lab's official questions answered from the student's file and compared, by the program @p tool,
    with: when @p mine (./lab check), the student's own latest run of the lab on this machine, made first if
    there is none and an answer is filled (student_run); else this machine's --quick run of the reference, or
    the kept run where this machine has none (measured_run)."""
    folder = lab_folder(lab).name
    result = Predicted(lab)
    official = rules_file(folder)
    given = os.environ.get("SPEEDLABS_PREDICTIONS_DIR")
    blank = ROOT / "labs" / folder / "predictions.toml"
    answers = Path(given) / folder / "predictions.toml" if given else blank
    if not answers.exists() and not answers.is_symlink():
        answers = blank  # the submission has no file: the blank one
    run, result.where = student_run(lab, make=check_run_flags() is not None) if mine else measured_run(lab)
    if given and answers.is_symlink():  # a submission's link (to the reference's answers, say) is not its file
        answered, result.error = None, f"{answers} is a symbolic link: a predictions file is the file itself"
    else:
        answered, result.error = section(tool, official, answers, run)
    if result.error:  # the official questions still count: a malformed file earns none of their points
        questions, _ = section(tool, official, official)
        result.official = [q["name"] for q in questions["questions"]] if questions else []
        return result
    if mine and run is None and any(q["answer"] is not None for q in answered["questions"]):
        run, result.where = student_run(lab)  # an answer and no run of theirs yet: made now
        if run is not None:
            answered, result.error = section(tool, official, answers, run)
    result.official = [q["name"] for q in answered["questions"]] if answered else []
    result.rows = answered["questions"] if answered else []
    return result


def prediction_line(q):
    """./lab check's line for one question of a section (@p q)."""
    name, verdict = q["name"], q["verdict"]
    if verdict == "blank":
        missing = " (not in your file)" if q["detail"] else ""
        return f"  PREDICT blank  {name:<40} {q['question']}{missing}"
    if verdict == "unmeasured":
        return f"  PREDICT -      {name:<40} not compared: {q['detail']}"
    why = f"\n                 why: {q['why']}" if q["why"] else ""  # the explanation, after the run
    return (f"  PREDICT {verdict:<7}{name:<40} yours {q['yours']}, measured {q['measured_text']}: "
            f"{q['detail']}{why}")
