"""Markdown for the lab pages (standard library only): text made safe for Doxygen (cell, prose), a kept run's
observation table (results_section), an observation's verdict as every page words it (verdict_word, the claims
ledger's too), the ids a lesson's "What you should observe" table lists (observe_table_ids), and what lies outside
code (outside_code)."""
import json
import re

from kept_runs import RESULTS, run_machine

OBSERVE_HEADING = "## What you should observe"


def observe_table_ids(readme_text):
    """The ids in the first column of the first table under "## What you should observe" (backticked;
    `<name>` and `*` stand for any text, e.g. `tokens_per_s_<mode>`)."""
    lines = readme_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(OBSERVE_HEADING)), None)
    if start is None:
        return None
    ids, in_table = [], False
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            in_table = True
            first_cell = line.split("|")[1]
            if re.fullmatch(r"\s*:?-+:?\s*", first_cell) or first_cell.strip() == "id":
                continue
            ids += re.findall(r"`([^`]+)`", first_cell)
        elif in_table:
            break
    return ids


def cell(text):
    """Text as one cell of a Doxygen Markdown table: nothing in it is read as markup or a command."""
    text = str(text).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for special in "|*@`":
        text = text.replace(special, "\\" + special)
    return text.replace("\n", " ")


def prose(text):
    """Text from a run, safe in a Doxygen Markdown paragraph: nothing in it starts a command or a tag."""
    return text.replace("\\", "\\\\").replace("@", "\\@").replace("<", "&lt;").replace(">", "&gt;")


# Code is shown as written: a placeholder inside `code` or a fenced block is an example, never filled.
CODE = re.compile(r"(?ms)^(```|~~~).*?^\1[^\n]*$|`[^`\n]+`")


def outside_code(pattern, text):
    """The matches of pattern in text that are not inside a code span or a fenced code block."""
    code = [m.span() for m in CODE.finditer(text)]
    return [m for m in pattern.finditer(text) if not any(a <= m.start() < b for a, b in code)]


def measured_text(value):
    """Like the lab's own table (common/observations.cpp): numbers to 6 significant digits, objects as JSON."""
    def short(v):
        if isinstance(v, float):
            return float(f"{v:.4g}")
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        if isinstance(v, list):
            return [short(x) for x in v]
        return v
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.6g}"
    text = json.dumps(short(value), ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= 240 else text[:237] + "..."


VERDICT_WORDS = {"holds": "holds", "fails": "**fails**", "not_applicable": "n/a", "inconclusive": "could not decide"}

# What turns an expectation into a rule: a comparison, in signs or in words. An expectation that says it is
# reported and makes none (its stated goal aside: "reported; the goal is at most 1.3x") holds whatever was measured.
COMPARISON = re.compile(r"[<>=≤≥]|\b(?:at most|at least|within|above|below|under|more than|less than|fewer|"
                        r"exactly|equals?|between|never|same|agrees?|match(?:es)?|faster|slower)\b", re.IGNORECASE)
GOAL = re.compile(r"\bthe goal is[^;()]*", re.IGNORECASE)


def only_reported(expected):
    """True when an observation's expectation says it is only reported: "reported", "reported: the shares",
    "a few microseconds (reported)", "reported; the goal is at most 1.3x" (a goal beside a report is not held).
    "> 0, reported" and "at most the roof (reported)" are rules: they compare."""
    text = str(expected or "")
    return bool(re.search(r"\breported\b", text, re.IGNORECASE)) and not COMPARISON.search(GOAL.sub("", text))


def measurement_failed(observation):
    """True when the run could not decide because a number broke a physical bound (common/observations.cpp's
    decide_verdict says "...: the measurement failed"): the run measured nothing the claim can rest on."""
    return observation.get("verdict") == "inconclusive" and "the measurement failed" in str(observation.get("reason"))


def verdict_word(observation):
    """An observation's verdict as the pages show it (the lab pages' table and the claims ledger): `reported`
    where it holds without a rule (only_reported: it cannot fail, so it never reads "holds"), `measurement
    failed` where a number broke a physical bound, else VERDICT_WORDS."""
    verdict = observation.get("verdict")
    if verdict == "holds" and only_reported(observation.get("expected")):
        return "reported"
    if measurement_failed(observation):
        return "measurement failed"
    return VERDICT_WORDS.get(verdict, verdict)


def evidence_text(evidence):
    """An observation's optional "evidence" (how far to trust a timed measurement) in a few words, as the lab's
    own table writes it (common/observations.cpp): half the interquartile range over the median and the
    sample count, "±4% n=12", then "busy" or "quiet" from the reading of the machine while it measured.
    Fields it does not know are left out; nothing readable gives "-"."""
    if not isinstance(evidence, dict):
        return "-" if evidence is None else measured_text(evidence)
    def number(within, *keys):
        return next((within[k] for k in keys if isinstance(within.get(k), (int, float)) and
                     not isinstance(within.get(k), bool)), None)
    value = evidence.get("value") if isinstance(evidence.get("value"), dict) else evidence
    parts = []
    spread, count = number(value, "spread"), number(value, "count", "n")
    if spread is not None:
        parts.append(f"±{spread / 2 * 100:.0f}%")
    elif "spread" in value:
        parts.append("±unbounded")  # a spread that is not a finite number (a median of 0)
    if count is not None:
        parts.append(f"n={count:.0f}")
    contention = evidence.get("contention") if isinstance(evidence.get("contention"), dict) else {}
    if contention.get("busy") is True:
        parts.append("busy")
    elif contention.get("busy") is False:
        parts.append("quiet")
    return " ".join(parts) or "-"


def results_section(number):
    """The observation table of the kept run of lab NN, as Markdown (empty when there is none)."""
    path = RESULTS / f"lab{number}.json"
    if not path.exists():
        return ""
    report = json.loads(path.read_text(encoding="utf-8"))
    run = report["run"]
    with_evidence = any("evidence" in o for o in report["observations"])
    rows = []
    for o in report["observations"]:
        verdict = verdict_word(o)
        note = f" ({o['reason']})" if o.get("reason") else ""
        spread = f" {cell(evidence_text(o.get('evidence')))} |" if with_evidence else ""
        rows.append(f"| `{o['id']}` | {verdict} | {'yes' if o['must_hold'] else 'no'} | "
                    f"{cell(measured_text(o.get('measured')))} |{spread} {cell(o['expected'])}{cell(note)} |")
    made = f" at commit `{run['commit'][:10]}`" if run.get("commit") else ""
    return "\n".join([
        "",
        "### One real run (`--quick`)",
        "",
        f"`{run['command']}` on {run['date']}{made}: {run_machine(report)}; {report['device']}, libtorch "
        f"{report['libtorch']} ({run['os']}); exit code {run['exit_code']}. Written by `./lab docs "
        f"--refresh-results` into `docs/results/lab{number}.json`; rerun it on your machine to compare.",
        "",
        "| id | verdict | must hold | measured |" + (" spread |" if with_evidence else "") + " expected |",
        "|---|---|---|---|" + ("---|" if with_evidence else "") + "---|",
        *rows,
        "",
    ])


def flags_section(number):
    """Every flag of lab NN with its help, default and --quick value, as its program's --help said when the kept
    run was made (empty when the kept run has none)."""
    path = RESULTS / f"lab{number}.json"
    flags = json.loads(path.read_text(encoding="utf-8")).get("flags") if path.exists() else None
    if not flags:
        return ""
    rows = [f"| `{name}` | {cell(text)} |" for name, text in flags]
    return "\n".join(["", "## Every flag", "",
                      f"As `build/bin/lab{number} --help` printed them when the kept run above was made:", "",
                      "| flag | what it sets |", "|---|---|", *rows, ""])
