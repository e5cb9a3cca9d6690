"""The graded exercises, declared once per lab: tests/labNN/points.tsv, read here by the grader and the docs (the
build reads it in cmake/SpeedLab.cmake). Standard library only.

The file is tab-separated: a header line naming COLUMNS, then one line per exercise, its trailing empty columns
left out:
    exercise       the GoogleTest suite LabNN_<exercise> (a speed exercise ends in _speed)
    points         what it is worth
    readme_anchor  its section in the lab's README.md
    budget_s       the time budget of each of its tests (their CTest TIMEOUT)
    needs          "gpu" when it runs only on a CUDA GPU, else empty
    speed_full     a speed exercise's fraction (the best's time over yours; a number or N/D) that earns all points
    speed_zero     ... and the one that earns none
    outside        how ./lab grade checks it outside the student's process: "checked" (its outputs, by the lab's
                   checked program), "timed" or "raced" (its speed); empty where it is not checked outside
The lab's checked program must list exactly the exercises declared checked, timed and raced (its selftest, a
CTest of the reference build, compares them).
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("exercise", "points", "readme_anchor", "budget_s", "needs", "speed_full", "speed_zero", "outside")
OUTSIDE_KINDS = ("checked", "timed", "raced")


class TableError(ValueError):
    pass


def table_path(lab):
    return ROOT / f"tests/lab{lab}/points.tsv"


def read_table(lab):
    """Lab @p lab's exercises, each a dict of every column (a string, "" where empty), in the file's order; [] for
    a lab with no graded exercises. TableError names the line of a malformed one."""
    path = table_path(lab)
    if not path.exists():
        return []
    header, *lines = path.read_text(encoding="utf-8").splitlines() or [""]
    path = path.relative_to(ROOT)  # as the messages name it
    if tuple(header.split("\t")) != COLUMNS:
        raise TableError(f"{path}: the header must be the columns {', '.join(COLUMNS)}, tab-separated")
    rows = []
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        values = line.split("\t")
        if len(values) > len(COLUMNS):
            raise TableError(f"{path}:{number}: {len(values)} columns, the header has {len(COLUMNS)}")
        row = dict(zip(COLUMNS, [v.strip() for v in values] + [""] * (len(COLUMNS) - len(values))))
        problem = row_problem(row, [r["exercise"] for r in rows])
        if problem:
            raise TableError(f"{path}:{number}: {problem}")
        rows.append(row)
    return rows


def row_problem(row, earlier):
    """What is wrong with one row of a table whose rows above it name @p earlier, or ""."""
    name, speed = row["exercise"], is_speed(row)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"'{name}' is not an exercise function's name"
    if name in earlier:
        return f"{name} is declared twice"
    for column in ("points", "budget_s"):
        try:
            if not float(row[column]) > 0:
                raise ValueError
        except ValueError:
            return f"{name}: {column} must be a number above 0, not '{row[column]}'"
    if row["needs"] not in ("", "gpu"):
        return f"{name}: needs is '{row['needs']}', not gpu or empty"
    if row["outside"] not in ("",) + OUTSIDE_KINDS:
        return f"{name}: outside is '{row['outside']}', not one of {', '.join(OUTSIDE_KINDS)} or empty"
    if row["outside"] and (row["outside"] != "checked") != speed:
        return (f"{name}: outside {row['outside']} is for " +
                ("an exercise's outputs, not its speed (timed or raced)" if speed else "a speed exercise (<function>"
                 "_speed); an exercise's outputs are checked"))
    return ""


def labs():
    """Every lab with a table, as "NN", in order."""
    return sorted(p.parent.name.removeprefix("lab") for p in ROOT.glob("tests/lab[0-9][0-9]/points.tsv"))


def is_speed(row):
    return row["exercise"].endswith("_speed")


# Named counts of every lab's exercises, for the pages ({{count:NAME}}): what the README and the docs say in numbers.
COUNTS = {
    "exercises": lambda row: not is_speed(row),
    "speed_exercises": is_speed,
    "checked_outside": lambda row: row["outside"] == "checked" and row["needs"] != "gpu",
    "checked_outside_on_gpu": lambda row: row["outside"] == "checked" and row["needs"] == "gpu",
    "speed_outside": lambda row: row["outside"] in ("timed", "raced"),
}


def count(name):
    """How many exercises of every lab are of kind @p name (a key of COUNTS)."""
    return sum(COUNTS[name](row) for lab in labs() for row in read_table(lab))
