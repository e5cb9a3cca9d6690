"""The placeholders a docs page may hold (standard library only): {{run:...}}, a value of a lab's kept run,
{{points:...}}, a graded exercise's declared points or speed rule, {{count:...}}, a count of the declared
exercises, and {{questions:NN}}, lab NN's questions; each filled for the page (fill_placeholders, fill_questions)
and checked before the docs are built (placeholder_problems, question_problems)."""
import re
import sys

from kept_runs import ROOT, kept_report, lab_folder, run_machine
sys.path.append(str(ROOT / "grader"))
import exercise_table  # noqa: E402  (the graded exercises' tables, tests/labNN/points.tsv)
from page_markdown import OBSERVE_HEADING, cell, measurement_failed, outside_code, prose


# {{run:NN:ID.FIELD...|FORMAT}}: a value of lab NN's kept run. ID is an observation id; FIELD is a path
# into the observation (measured, expected, verdict, reason, evidence, ...), or into its "measured" when it
# names none of those (so {{run:07:loader_cost_ms.ms_per_batch}} is measured.ms_per_batch); a number in
# the path indexes a list. FORMAT is a Python format spec (".0f", ".1%", ",.0f"), optionally after a scale
# that divides first: k, M, G (powers of 1000), KiB, MiB, GiB (powers of 1024); "|MiB.0f" is the value in
# MiB with no decimals. {{run:NN:machine}} is the machine the kept run was made on, in words.
PLACEHOLDER = re.compile(r"\{\{run:(?P<lab>\d\d):(?P<id>[A-Za-z0-9_]+)(?P<path>(?:\.[A-Za-z0-9_]+)*)"
                         r"(?:\|(?P<format>[^}]*))?\}\}")
OBSERVATION_FIELDS = {"id", "claim", "measured", "expected", "verdict", "reason", "must_hold", "evidence"}
SCALES = {"k": 1e3, "M": 1e6, "G": 1e9, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


class PlaceholderError(ValueError):
    pass


# {{points:NN:EXERCISE.FIELD}}: a column of EXERCISE's line in tests/labNN/points.tsv, where each graded exercise's
# points, time budget and speed rule are declared (FIELD: points, budget_s, speed_full or speed_zero), as written.
POINTS = re.compile(r"\{\{points:(?P<lab>\d\d):(?P<exercise>[a-z0-9_]+)\.(?P<field>[a-z_]+)\}\}")


def resolve_points(match):
    text, lab = match.group(0), match.group("lab")
    try:
        rows = exercise_table.read_table(lab)
    except exercise_table.TableError as error:
        raise PlaceholderError(f"{text}: {error}") from None
    if not rows:
        raise PlaceholderError(f"{text}: lab {lab} has no graded exercises (tests/lab{lab}/points.tsv)")
    row = next((r for r in rows if r["exercise"] == match.group("exercise")), None)
    if row is None:
        raise PlaceholderError(f"{text}: tests/lab{lab}/points.tsv has no exercise '{match.group('exercise')}'")
    field = match.group("field")
    if field not in ("points", "budget_s", "speed_full", "speed_zero"):
        raise PlaceholderError(f"{text}: '{field}' is not a number of points.tsv (points, budget_s, speed_full, "
                               "speed_zero)")
    if not row[field]:
        raise PlaceholderError(f"{text}: {match.group('exercise')} declares no {field}")
    return row[field]


# {{count:NAME}}: how many of every lab's declared exercises are of kind NAME (exercise_table.COUNTS: exercises,
# speed_exercises, checked_outside, checked_outside_on_gpu, speed_outside), so no page types a count by hand.
COUNT = re.compile(r"\{\{count:(?P<name>[a-z_]+)\}\}")


def resolve_count(match):
    if match.group("name") not in exercise_table.COUNTS:
        raise PlaceholderError(f"{match.group(0)}: no such count (one of {', '.join(exercise_table.COUNTS)})")
    try:
        return str(exercise_table.count(match.group("name")))
    except exercise_table.TableError as error:
        raise PlaceholderError(f"{match.group(0)}: {error}") from None


# {{labs:table}}, on a line alone: the labs' table of labs/README.md (the one list a lab's row is written in: its
# number and title, what it shows, what it needs), each link made relative to the project's root, with the command
# that runs it. A row with no lab folder is an error; a folder with no row yet (one ./lab new just made) gets its
# lesson's title and says that its row is still to write.
LABS_TABLE = re.compile(r"^\{\{labs:table\}\}$", re.M)
LABS_ROW = re.compile(r"^\| \[(?P<number>\d\d) (?P<title>[^\]]+)\]\((?P<folder>\d\d_[a-z0-9_]+)/README\.md\) \| "
                      r"(?P<shows>.+) \| (?P<needs>[^|]+) \|$")
LESSON_TITLE = re.compile(r"^# Lab \d\d: (?P<title>.+?)(?: \{#[a-z0-9_]+\})?$", re.M)


def labs_rows():
    """{folder: (number, title, shows, needs)} of labs/README.md's table, in its order."""
    rows = {}
    for line in (ROOT / "labs" / "README.md").read_text(encoding="utf-8").splitlines():
        row = LABS_ROW.match(line)
        if row:
            rows[row.group("folder")] = (row.group("number"), row.group("title"), row.group("shows"), row.group("needs"))
    return rows


def resolve_labs_table(match):
    rows = labs_rows()
    folders = sorted(p.name for p in (ROOT / "labs").glob("[0-9][0-9]_*") if (p / "CMakeLists.txt").is_file())
    extra = sorted(set(rows) - set(folders))
    if extra:
        raise PlaceholderError(f"{match.group(0)}: labs/README.md's table has a row for {', '.join(extra)}, "
                               f"which is no lab folder")
    lines = ["| lab | what it shows | needs | run |", "|---|---|---|---|"]
    for folder in folders:
        number = folder[:2]
        if folder in rows:
            _, title, shows, needs = rows[folder]
        else:
            lesson = ROOT / "labs" / folder / "README.md.in"
            found = LESSON_TITLE.search(lesson.read_text(encoding="utf-8")) if lesson.is_file() else None
            title, shows, needs = (found.group("title") if found else folder[3:].replace("_", " ")), \
                "(its row in labs/README.md is still to write)", "-"
        lines.append(f"| [{number} {title}](labs/{folder}/README.md) | {shows} | {needs} | `./lab run {number}` |")
    return "\n".join(lines)


def resolve(match):
    text, number, ident = match.group(0), match.group("lab"), match.group("id")
    report = kept_report(number)
    if report is None:
        raise PlaceholderError(f"{text}: lab {number} has no kept run (docs/results/lab{number}.json)")
    if ident == "machine" and not match.group("path"):
        return prose(run_machine(report))
    observation = next((o for o in report["observations"] if o["id"] == ident), None)
    if observation is None:
        raise PlaceholderError(f"{text}: lab {number}'s kept run has no observation '{ident}'")
    keys = [k for k in match.group("path").split(".") if k]
    value = observation if keys and keys[0] in OBSERVATION_FIELDS else observation.get("measured")
    for key in keys or []:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise PlaceholderError(f"{text}: observation '{ident}' of lab {number} has no field "
                                   f"'{match.group('path')[1:]}'")
    if isinstance(value, (dict, list)) or value is None:
        raise PlaceholderError(f"{text}: '{ident}{match.group('path')}' is {type(value).__name__}, not a value: "
                               f"name one of its fields")
    spec = match.group("format") or ""
    scale = next((s for s in sorted(SCALES, key=len, reverse=True) if spec.startswith(s)), None)
    if scale:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise PlaceholderError(f"{text}: a scale needs a number, the field holds {value!r}")
        value, spec = value / SCALES[scale], spec[len(scale):]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if keys == ["verdict"] and measurement_failed(observation):  # as the lab's table says it: no verdict
        return "measurement failed"
    if keys and keys[-1] == "verdict" and isinstance(value, str):
        return {"holds": "holds", "fails": "fails", "not_applicable": "not applicable",
                "inconclusive": "could not decide"}.get(value, value)
    if not spec:
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        return prose(str(value))
    try:
        return format(value, spec)
    except (ValueError, TypeError) as error:
        raise PlaceholderError(f"{text}: format '{spec}' does not apply to {value!r}: {error}") from None


def fill_placeholders(text):
    """The page with every {{run:...}} outside code replaced by its value; PlaceholderError names the first
    bad one."""
    for match in reversed(outside_code(PLACEHOLDER, text)):
        text = text[:match.start()] + resolve(match) + text[match.end():]
    for pattern, resolver in ((POINTS, resolve_points), (COUNT, resolve_count), (LABS_TABLE, resolve_labs_table)):
        for match in reversed(outside_code(pattern, text)):
            text = text[:match.start()] + resolver(match) + text[match.end():]
    return text


def placeholder_problems(path):
    text = path.read_text(encoding="utf-8")
    problems = []
    for pattern, resolver in ((PLACEHOLDER, resolve), (POINTS, resolve_points), (COUNT, resolve_count),
                              (LABS_TABLE, resolve_labs_table)):
        for match in outside_code(pattern, text):
            try:
                resolver(match)
            except PlaceholderError as error:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {error}")
    for match in outside_code(re.compile(r"\{\{run:[^}]*\}\}"), text):
        if not PLACEHOLDER.fullmatch(match.group(0)):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)} is not a placeholder: "
                            f"{{{{run:NN:ID.FIELD|FORMAT}}}}")
    return problems


# ---------------------------------------------------------------------------------------------- questions

# {{questions:NN}}, on a line of its own just before a lesson's "What you should observe": lab NN's questions,
# written once in labs/NN_topic/predictions.toml (questions_section). Each lab with questions has exactly one.
QUESTIONS = re.compile(r"^\{\{questions:(?P<lab>\d\d)\}\}$", re.M)


def fill_questions(text):
    """The page with every {{questions:NN}} line outside code replaced by lab NN's questions."""
    for match in reversed(outside_code(QUESTIONS, text)):
        folder = lab_folder(match.group("lab"))
        if folder is None:
            raise PlaceholderError(f"{match.group(0)}: there is no lab {match.group('lab')}")
        text = text[:match.start()] + questions_section(folder).rstrip("\n") + text[match.end():]
    return text


def question_problems(path, text=None):
    """Sentences for each {{questions:...}} of @p path (or of @p text, read as that page) that is malformed or
    names no lab, and, on a lesson whose lab has questions, for a missing, doubled or misplaced one."""
    text, name = path.read_text(encoding="utf-8") if text is None else text, path.relative_to(ROOT)
    problems = []
    for match in outside_code(re.compile(r"\{\{questions[^}]*\}\}"), text):
        line = text.count("\n", 0, match.start()) + 1
        good = next((m for m in outside_code(QUESTIONS, text) if m.start() == match.start()), None)
        if good is None:
            problems.append(f"{name}:{line}: {match.group(0)} is not a placeholder: "
                            "{{questions:NN}} on a line alone")
        elif lab_folder(good.group("lab")) is None:
            problems.append(f"{name}:{line}: {match.group(0)}: there is no lab {good.group('lab')}")
    folder = path.parent
    if path.name not in ("README.md", "README.md.in") or folder.parent != ROOT / "labs" or not re.fullmatch(r"\d\d_.+", folder.name):
        return problems
    sys.path.insert(0, str(ROOT / "scripts" / "driver"))
    import predictions
    if not predictions.read(folder / "predictions.toml"):
        return problems
    own = f"{{{{questions:{folder.name[:2]}}}}}"
    lines = text.split("\n")
    found = [i for i, l in enumerate(lines) if l == own]
    after = next((l for l in lines[found[0] + 1:] if l.strip()), "") if len(found) == 1 else ""
    if len(found) != 1 or not after.startswith(OBSERVE_HEADING):
        problems.append(f"{name}: the lesson lists its questions with one line {own} just before "
                        f'"{OBSERVE_HEADING}" (found {len(found)}' + (", elsewhere" if len(found) == 1 else "") + ")")
    return problems


def questions_section(folder):
    """The lab's questions (folder/predictions.toml) as a section to read before "What you should observe":
    what the student predicts before running the lab, each with its unit and how close counts. The `why` of
    each is left out: it explains the measurement, and the run shows it beside the answer."""
    sys.path.insert(0, str(ROOT / "scripts" / "driver"))
    import predictions
    try:
        questions = predictions.read(folder / "predictions.toml")
    except predictions.PredictionError as error:
        sys.exit(f"{folder / 'predictions.toml'}: {error}")
    if not questions:
        return ""
    number = folder.name[:2]
    lines = ["## Predict, then measure", "",
             f"Before you run the lab, write your answer to each question in `labs/{folder.name}/predictions.toml`. "
             f"`./lab run {number}` then shows each prediction beside what it measured, with why, and "
             f"`./lab check {number}` says which ones were close, compared with your own latest run.", "",
             "| | question | unit | close enough |", "|---|---|---|---|"]
    # Numbered in the file's order, not named by observation: an id names a measurement, not a question.
    for index, q in enumerate(questions, 1):
        kind, limit = q.tolerance
        rule = {"exact": "exactly", "relative": f"within {limit:.0%}" if limit >= 0.01 else f"within {limit:g} relative",
                "absolute": f"within {limit:g}", "factor": f"within {limit:g}x",
                "side_of": f"the same side of {limit:g}"}[kind]
        if kind == "side_of":
            rule += " (a number, or above/below, more/less)"
        lines.append(f"| {index} | {cell(prose(q.question))} | {cell(prose(q.unit)) or '-'} | {rule} |")
    return "\n".join(lines + [""])
