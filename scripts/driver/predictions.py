#!/usr/bin/env python3
"""A lab's predictions (labs/NN_topic/predictions.toml) read and compared with a run, for ./lab check, ./lab
grade (scripts/driver/grade.py) and the lesson pages (scripts/driver/lab_pages.py). The lab programs apply the same rules
in C++ (common/predictions.cpp, read with toml++) to show each prediction beside its measurement.

A file holds [[question]] tables: id (the observation), field (a path inside its `measured`: "a.b", "list.0";
none for the value itself), question, unit, why (optional), answer ("" while blank; a number, inf, a word in
quotes, true/false) and at most one tolerance: relative (a share of the measurement), absolute (in the unit),
factor (within that many times) or side_of (the same side of that number; the words above/below, more/less,
higher/lower, greater/fewer answer it too). No tolerance: exactly.

  predictions.py show FILE     the questions and their answers (a malformed file: the error, exit 1)
  predictions.py whys          no question's why (labs/ or solutions/) states its reference answer (exit 1
                               naming each that does): the student reads the why beside the blank answer
Standard library only (tomllib, Python 3.11).
"""
import datetime
import json
import math
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOLERANCES = ("relative", "absolute", "factor", "side_of")
KEYS = {"id", "field", "question", "unit", "why", "answer", *TOLERANCES}
SHOWN_DIGITS = 6  # significant digits of an answer or a measurement shown: 1000.5 must not read as 1000
MACHINE_DEPENDENT = ("factor", "side_of")  # a band around, or a side of, this machine's measurement
# The words a side_of question offers ("above or below 1?", "more or less than 10x?"): above its pivot, or not.
ABOVE_WORDS = ("above", "more", "higher", "greater")
BELOW_WORDS = ("below", "less", "lower", "fewer")


class PredictionError(Exception):
    """A malformed predictions file; the message names the file and the line."""


@dataclass
class Question:
    id: str
    question: str
    unit: str
    answer: object  # None while blank
    field: str = ""
    why: str = ""
    tolerance: tuple = ("exact", 0)
    line: int = 0

    @property
    def name(self):
        return self.id + (f".{self.field}" if self.field else "")

    @property
    def machine_dependent(self):
        return self.tolerance[0] in MACHINE_DEPENDENT


def read(path):
    """The questions of @p path; [] when there is no file; PredictionError (with the line) when malformed."""
    path = Path(path)
    if not path.exists():
        return []
    return read_text(path.read_text(encoding="utf-8", errors="replace"), path)


def read_text(text, path):
    """The questions of a predictions file's @p text (@p path names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        where = re.search(r"\(at line (\d+), column \d+\)", str(error))
        line = where.group(1) if where else "?"
        raise PredictionError(f"{path}:{line}: {re.sub(r' [(]at line.*', '', str(error))}") from None
    lines = text.splitlines()
    starts = [i + 1 for i, l in enumerate(lines) if re.match(r"\s*\[\[\s*question\s*\]\]", l)]

    def line_of(key, start):
        for i in range(start, len(lines) + 1):
            if i > start and re.match(r"\s*\[", lines[i - 1]):
                break
            if re.match(rf"\s*\"?{re.escape(key)}\"?\s*=", lines[i - 1]):
                return i
        return start

    for key in data:
        if key != "question":
            raise PredictionError(f"{path}:{line_of(key, 1)}: unknown key '{key}' (the file holds [[question]] tables)")
    tables = data.get("question", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise PredictionError(f"{path}:{line_of('question', 1)}: 'question' must be [[question]] tables")
    questions = []
    for index, table in enumerate(tables):
        start = starts[index] if index < len(starts) else 1
        where = lambda key: f"{path}:{line_of(key, start)}: "  # noqa: E731
        for key in table:
            if key not in KEYS:
                raise PredictionError(where(key) + f"unknown key '{key}' (a question has id, field, question, unit, "
                                      "answer, why and one tolerance: relative, absolute, factor or side_of)")
        for key in ("id", "question", "unit"):
            if key not in table:
                raise PredictionError(f"{path}:{start}: the question has no '{key}'")
        for key in ("id", "field", "question", "unit", "why"):
            if key in table and not isinstance(table[key], str):
                raise PredictionError(where(key) + f"'{key}' must be a string in quotes")
        if "answer" not in table:
            raise PredictionError(f"{path}:{start}: the question has no 'answer' (answer = \"\" while blank)")
        answer = table["answer"]
        if isinstance(answer, bool) or isinstance(answer, str):
            pass
        elif isinstance(answer, (int, float)):
            answer = float(answer)
        else:
            raise PredictionError(where("answer") + "'answer' must be a number, a string or true/false")
        given = [k for k in TOLERANCES if k in table]
        if len(given) > 1:
            raise PredictionError(f"{path}:{start}: give one tolerance (relative, absolute, factor or side_of), "
                                  f"not {len(given)}")
        tolerance = ("exact", 0)
        if given:
            kind, value = given[0], table[given[0]]
            bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            bad = bad or (kind == "factor" and value < 1) or (kind in ("relative", "absolute") and value < 0)
            if bad:
                minimum = " of at least 1" if kind == "factor" else "" if kind == "side_of" else " of at least 0"
                raise PredictionError(where(kind) + f"'{kind}' must be a finite number{minimum}")
            tolerance = (kind, float(value))
        questions.append(Question(id=table["id"], question=table["question"], unit=table["unit"],
                                  answer=None if answer == "" else answer, field=table.get("field", ""),
                                  why=table.get("why", ""), tolerance=tolerance, line=start))
    return questions


def measured_field(measured, path):
    value = measured
    for key in [k for k in path.split(".") if k]:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity", "-inf", "-infinity", "nan"):
        return float(value.strip().lower().replace("infinity", "inf"))
    return None


def text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.{SHOWN_DIGITS}g}"
    return str(value)


def compare_side(answer, measured, pivot):
    """A word answer to a side_of question: ok when it names the measurement's side of @p pivot."""
    word = answer.strip().lower() if isinstance(answer, str) else None
    if word not in ABOVE_WORDS + BELOW_WORDS:
        return "off", f"answer a number, or above or below (more or less) {text(pivot)}"
    same = (word in ABOVE_WORDS) == (measured > pivot)
    return ("ok" if same else "off"), (f"{'same' if same else 'other'} side of {text(pivot)}: measured "
                                       f"{'above' if measured > pivot else 'at or below'} it")


def compare_values(answer, measured, tolerance):
    """("ok"|"off"|"blank"|"unmeasured", detail): the same rules as common/predictions.cpp."""
    if answer is None:
        return "blank", ""
    if measured is None or isinstance(measured, (dict, list)):
        return "unmeasured", "no single measured value to compare with"
    kind, limit = tolerance
    a, m = number(answer), number(measured)
    if kind == "side_of" and m is not None and a is None:
        return compare_side(answer, m, limit)
    if kind == "exact" or a is None or m is None:
        if isinstance(answer, bool) or isinstance(measured, bool):
            same = answer == measured
            return ("ok", "exact") if same else ("off", f"measured {text(measured)}")
        if a is not None and m is not None:
            same = a == m or (math.isnan(a) and math.isnan(m))
            return ("ok", "exact") if same else ("off", f"off by {text(abs(a - m))}")
        same = text(answer).lower() == text(measured).lower()
        return ("ok", "exact") if same else ("off", f"measured {text(measured)}")
    if a == m:
        return "ok", "exact"
    gap = abs(a - m)
    if kind == "relative":
        off = gap / abs(m) if m else math.inf
        return ("ok" if off <= limit else "off"), f"{'within' if off <= limit else 'off by'} {off:.2%} (tolerance {limit:.2%})"
    if kind == "absolute":
        return ("ok" if gap <= limit else "off"), f"{'within' if gap <= limit else 'off by'} {text(gap)} (tolerance {text(limit)})"
    if kind == "factor":
        ratio = max(a / m, m / a) if a > 0 and m > 0 else math.inf
        return ("ok" if ratio <= limit else "off"), f"{'within' if ratio <= limit else 'off by'} {ratio:.2f}x (tolerance {limit:.2f}x)"
    same = (a > limit) == (m > limit)
    return ("ok" if same else "off"), f"{'same' if same else 'other'} side of {text(limit)}"


def compare(question, report):
    """(status, measured value, detail) of @p question against @p report (a lab's --json)."""
    if question.answer is None:
        return "blank", None, ""
    if report is None:
        return "unmeasured", None, "no run of this lab to compare with"
    observation = next((o for o in report.get("observations", []) if o.get("id") == question.id), None)
    if observation is None:
        return "unmeasured", None, f"the run has no observation {question.id}"
    if observation.get("verdict") == "not_applicable":
        return "unmeasured", None, "not measured on this machine: " + (observation.get("reason") or "")
    if observation.get("verdict") == "inconclusive":  # a busy machine's numbers grade nothing
        return "unmeasured", None, f"this run could not decide {question.id}: " + (observation.get("reason") or "")
    value = measured_field(observation.get("measured"), question.field)
    if value is None:
        return "unmeasured", None, f"{question.id} has no field '{question.field}'"
    status, detail = compare_values(question.answer, value, question.tolerance)
    return status, value, detail


def lab_folder(lab):
    return next(ROOT.glob(f"labs/{lab}_*"))


def measured_run(lab, build=None):
    """(report, where) the predictions of lab @p lab are compared with: this machine's last --quick run of the
    reference (the smoke run ./lab test makes, <build>/labs/NN_*/labNN.smoke.json) when there is one, else the
    run kept for the docs (docs/results/labNN.json, made on the machine it names); (None, why) when neither."""
    folder = lab_folder(lab).name
    build = Path(build) if build else ROOT / "build"
    candidates = [(build / "labs" / folder / f"lab{lab}.smoke.json", "this machine's --quick run"),
                  (ROOT / "docs" / "results" / f"lab{lab}.json", "the kept run (docs/results)")]
    for path, where in candidates:
        try:
            return json.loads(path.read_text(encoding="utf-8")), where
        except (OSError, ValueError):
            continue
    return None, f"no run of lab {lab} to compare with: ./lab test -L lab{lab} -R smoke makes one"


# A number as a why may write it ("65504", "50,257", "1e-8", "0.5"), not the digits inside a name ("fp16").
WHY_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.]*\()", re.I)
WHY_FUNCTION = re.compile(r"\b(ln|log|log2|log10|sqrt)\(\s*([\d,.]+)\s*\)", re.I)
FUNCTIONS = {"ln": math.log, "log": math.log, "log2": math.log2, "log10": math.log10, "sqrt": math.sqrt}


def why_numbers(why):
    """The values a @p why states: its numbers, and ln(N), log2(N), sqrt(N) worked out."""
    values = [float(m.group(0).replace(",", "")) for m in WHY_NUMBER.finditer(why)]
    for m in WHY_FUNCTION.finditer(why):
        try:
            values.append(FUNCTIONS[m.group(1).lower()](float(m.group(2).replace(",", ""))))
        except ValueError:
            continue
    return values


def why_gives_away(question, answer):
    """What in @p question's why states its own (reference) @p answer, or "": the answer as a word, or a number
    (or ln(N), sqrt(N)) that is close to it by the question's own tolerance. A side_of answer is a side, which
    no number in the why states."""
    if not question.why or answer is None:
        return ""
    a = number(answer)
    if a is None or math.isinf(a):
        words = {text(answer).lower()} | ({"inf", "infinity", "infinite"} if a is not None else set())
        found = [w for w in words if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", question.why, re.I)]
        return f"the word '{found[0]}'" if found else ""
    if question.tolerance[0] == "side_of":
        return ""
    tolerance = question.tolerance if question.tolerance[0] != "exact" else ("relative", 1e-9)
    for value in why_numbers(question.why):
        if compare_values(value, a, tolerance)[0] == "ok":
            return f"{text(value)}, close to the answer {text(a)}"
    return ""


def whys_problems(root=ROOT):
    """Sentences for every question whose why, in labs/ or solutions/, states the reference answer."""
    problems = []
    for solution in sorted(Path(root).glob("solutions/[0-9][0-9]_*/predictions.toml")):
        answers = {q.name: q.answer for q in read(solution)}
        for path in (Path(root) / "labs" / solution.parent.name / "predictions.toml", solution):
            for q in read(path):
                found = why_gives_away(q, answers.get(q.name))
                if found:
                    problems.append(f"{path.relative_to(root)}:{q.line}: the why of {q.name} gives its answer away "
                                    f"({found}): a hint says where to look, the run shows the answer")
    return problems


def student_run_path(lab):
    """Where the student's latest run of lab @p lab on this machine is kept: build-student/runs/labNN.json (the
    run ./lab check makes when there is none; ./lab run NN --json PATH writes one there too)."""
    return ROOT / "build-student" / "runs" / f"lab{lab}.json"


def make_student_run(lab, path):
    """Runs lab @p lab here the way the student does (./lab run NN, which builds it first), --quick, its report
    written to @p path; its output goes to .cache/check-run-NN.log. Returns the output's last line (why a run
    that wrote no report stopped: an exercise still a stub, say)."""
    log = ROOT / ".cache" / f"check-run-{lab}.log"
    print(f"lab {lab}: no run of yours to compare your predictions with yet: running ./lab run {lab} --quick "
          f"(output in .cache/{log.name})", file=sys.stderr, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        subprocess.run([str(ROOT / "lab"), "run", lab, "--quick", "--json", str(path)], cwd=ROOT, stdout=out,
                       stderr=subprocess.STDOUT, check=False)
    lines = [l for l in log.read_text(encoding="utf-8", errors="replace").splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


def student_run(lab, make=True):
    """(report, where) of the student's latest run of lab @p lab on this machine (student_run_path), made first
    when there is none and @p make; where says which run it is, with its time. (None, why) when there is none."""
    path = student_run_path(lab)
    stopped = make_student_run(lab, path) if make and not path.exists() else None
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if stopped is not None:
            return None, f"no run of yours of lab {lab} to compare with: ./lab run {lab} --quick stopped: {stopped}"
        return None, f"no run of yours of lab {lab} to compare with: ./lab run {lab} --quick --json {shown} makes one"
    when = datetime.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    return report, f"your run of {when} on this machine ({shown})"


def main(argv):
    if len(argv) == 2 and argv[1] == "whys":
        problems = whys_problems()
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"predictions: {len(problems)} why(s) give their answer away" if problems else
              "predictions: no why gives its answer away")
        return 1 if problems else 0
    if len(argv) == 3 and argv[1] == "show":
        try:
            for q in read(argv[2]):
                print(f"{q.line}: {q.name} [{q.unit}] {q.tolerance[0]} {q.tolerance[1]:g}: "
                      f"{'blank' if q.answer is None else text(q.answer)}  {q.question}")
        except PredictionError as error:
            print(error, file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
