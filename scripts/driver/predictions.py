#!/usr/bin/env python3
"""A lab's predictions (labs/NN_topic/predictions.toml) read and compared with a run, for ./lab check, ./lab
grade (scripts/driver/grade.py) and the lesson pages (scripts/driver/lab_pages.py). The lab programs apply the same rules
in C++ (common/predictions.cpp, read with toml++) to show each prediction beside its measurement.

A file holds [[question]] tables: id (the observation), field (a path inside its `measured`: "a.b", "list.0";
none for the value itself), question, unit, why (optional), answer ("" while blank; a number, inf, a word in
quotes, true/false) and at most one tolerance: relative (a share of the measurement), absolute (in the unit),
factor (within that many times) or side_of (the same side of that number). No tolerance: exactly.

  predictions.py show FILE     the questions and their answers (a malformed file: the error, exit 1)
Standard library only (tomllib, Python 3.11).
"""
import json
import math
import re
import sys
import tomllib
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOLERANCES = ("relative", "absolute", "factor", "side_of")
KEYS = {"id", "field", "question", "unit", "why", "answer", *TOLERANCES}
MACHINE_DEPENDENT = ("factor", "side_of")  # a band around, or a side of, this machine's measurement


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
        return f"{value:.4g}"
    return str(value)


def compare_values(answer, measured, tolerance):
    """("ok"|"off"|"blank"|"unmeasured", detail): the same rules as common/predictions.cpp."""
    if answer is None:
        return "blank", ""
    if measured is None or isinstance(measured, (dict, list)):
        return "unmeasured", "no single measured value to compare with"
    kind, limit = tolerance
    a, m = number(answer), number(measured)
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


def main(argv):
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
