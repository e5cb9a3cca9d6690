#!/usr/bin/env python3
"""A lab's predictions (labs/NN_topic/predictions.toml) read, for the lesson pages (scripts/driver/lab_pages.py),
./lab release and the lint below. Nothing here compares an answer with a run: the rules live once, in C++
(common/predictions.cpp), which the lab programs and ./lab check and ./lab grade use
(grader/predicted.py).

A file holds [[question]] tables: id (the observation), field (a path inside its `measured`: "a.b", "list.0";
none for the value itself), question, unit, why (optional), answer ("" while blank; a number, inf, a word in
quotes, true/false) and at most one tolerance: relative (a share of the measurement), absolute (in the unit),
factor (within that many times) or side_of (the same side of that number; the words above/below, more/less,
higher/lower, greater/fewer answer it too). No tolerance: exactly. common/predictions.cpp reads the same
files with the same errors (tests/grading/test_predictions.py and tests/common/test_predictions.cpp).

  predictions.py show FILE     the questions and their answers (a malformed file: the error, exit 1)
  predictions.py whys          no question's why (labs/ or solutions/) states its reference answer (exit 1
                               naming each that does): the student reads the why beside the blank answer
  predictions.py fair [CHECK]  each question is fair to its reader (prediction_checks.py, beside this file; exit 1
                               naming each that is not): CHECK is one of lessons (no reference answer stands in
                               the lesson above the questions), pivots (no side_of question is a coin flip on its
                               kept run), sizes (a question whose answer depends on the run's size says --quick,
                               one that depends on the device names the CPU); none: all three
Standard library only (tomllib, Python 3.11).
"""
import math
import re
import stat
import sys
import tomllib
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOLERANCES = ("relative", "absolute", "factor", "side_of")
KEYS = {"id", "field", "question", "unit", "why", "answer", *TOLERANCES}
SHOWN_DIGITS = 6  # significant digits of an answer or a measurement shown: 1000.5 must not read as 1000


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


MAX_FILE_BYTES = 1 << 20  # a predictions file is a few questions; the same limit as common/predictions.cpp


def read(path):
    """The questions of @p path; [] when there is no file; PredictionError (with the line) when malformed, and
    when @p path is no regular file (a folder, a FIFO, a device: never opened) or is over MAX_FILE_BYTES."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return []
    try:
        mode = path.stat().st_mode  # through a symlink: what reading would open
    except OSError as error:
        raise PredictionError(f"{path}: cannot be read ({error.strerror})") from None
    if stat.S_ISDIR(mode):
        raise PredictionError(f"{path} is a folder, not a predictions file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise PredictionError(f"{path} is not a regular file ({kind}): a predictions file is a TOML file")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise PredictionError(f"{path}: cannot be read ({error.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise PredictionError(f"{path} holds more than {MAX_FILE_BYTES} bytes: a predictions file is at most that")
    return read_text(data.decode("utf-8", errors="replace"), path)


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


NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?|[-+]?inf(inity)?|nan", re.I)


def number(value):
    """@p value as a number: a number, or one in quotes ("1000", "inf"), as common/predictions.cpp reads it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and NUMBER_TEXT.fullmatch(value.strip()):
        return float(value.strip().lower().replace("infinity", "inf"))
    return None


def text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.{SHOWN_DIGITS}g}"
    return str(value)


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


def near(value, answer, tolerance):
    """The lint's sense of a number close to an answer: within the question's relative, absolute or factor
    band (a relative 1e-9 when it has none). It grades nothing: the rules are common/predictions.cpp's."""
    kind, limit = tolerance if tolerance[0] != "exact" else ("relative", 1e-9)
    gap = abs(value - answer)
    if kind == "relative":
        return gap <= limit * abs(answer)
    if kind == "absolute":
        return gap <= limit
    return value > 0 and answer > 0 and max(value / answer, answer / value) <= limit  # factor


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
    for value in why_numbers(question.why):
        if near(value, a, question.tolerance):
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


def fair_problems(check=None, root=ROOT):
    """The sentences of prediction_checks' @p check ("lessons", "pivots" or "sizes"; None: all three)."""
    import prediction_checks  # beside this file; they read the questions through this module
    import prediction_runs
    checks = {"lessons": prediction_checks.lesson_problems, "pivots": prediction_runs.pivot_problems,
              "sizes": prediction_runs.size_problems}
    return [problem for name, run in checks.items() if check in (None, name) for problem in run(root)]


def main(argv):
    if len(argv) in (2, 3) and argv[1] == "fair" and argv[2:] in ([], ["lessons"], ["pivots"], ["sizes"]):
        problems = fair_problems(argv[2] if len(argv) == 3 else None)
        for problem in problems:
            print(problem, file=sys.stderr)
        which = argv[2] if len(argv) == 3 else "lessons, pivots, sizes"
        print(f"predictions: {len(problems)} question(s) unfair to their reader ({which})" if problems else
              f"predictions: every question is fair to its reader ({which})")
        return 1 if problems else 0
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
