#!/usr/bin/env python3
"""The lab pages of the HTML docs, kept in step with the labs (Python standard library only).

    lab_pages.py refresh [--build DIR] [NN ...]
                                            run every labs/NN_*/ program (or those given) with --quick --json
                                            and keep each report, with the machine and the date, in
                                            docs/results/labNN.json
    lab_pages.py check-ids README JSON      the README's "What you should observe" table lists exactly the
                                            ids of the lab's --json report (and of docs/results/labNN.json)
    lab_pages.py check                      before the docs are built: every kept run is fresh (made from the
                                            sources as they are now, see fingerprint), every {{run:...}}
                                            placeholder of every page names an id and a field its kept run has,
                                            every lesson lists its questions ({{questions:NN}}, just before
                                            "What you should observe"), and the claims ledger (docs/claims.json)
                                            names only observed ids
    lab_pages.py fingerprint NN             the fingerprint of lab NN's sources now, and what it covers
    lab_pages.py filter FILE                Doxygen's INPUT_FILTER for Markdown: the page as Doxygen should
                                            read it (see filter_page)

A kept run is tied to the code it was made from by a fingerprint: the SHA-256 of the path and bytes of every
file (as git lists them: tracked, or new and not ignored) under the lab's folder labs/NN_*/ (its code and
its lesson), its reference answer solutions/NN_*/, the same two folders of every earlier lab whose
exercise it runs (USES_EXERCISES in its CMakeLists.txt, followed through), and the shared sources common/
and datasets/. Build files, the tests, the docs' own pages and the predictions files (predictions.toml) are
left out: they do not change what a lab measures. A change to any covered file makes the kept run stale, and `./lab docs` fails until it is made
again (./lab docs --refresh-results NN).

Labs are found by folder, so a new labs/NN_topic/ is picked up by every command without a change here.
"""
import datetime
import hashlib
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile

import lab_list  # scripts/driver/lab_list.py, beside this file

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
IMAGES = ROOT / "docs" / "images"
OBSERVE_HEADING = "## What you should observe"


def lab_folders():
    """labs/NN_topic/ folders in lab order."""
    return lab_list.lab_folders(ROOT)


def lab_title(folder):
    """The README's first heading, without '# ' and the {#anchor}: "Lab 05: GPT-2 in fp32, ...". """
    first = (folder / "README.md").read_text(encoding="utf-8").splitlines()[0]
    return re.sub(r"\s*\{#.*\}\s*$", "", first.lstrip("# ")).strip()


def page_id(folder):
    match = re.search(r"\{#([\w-]+)\}", (folder / "README.md").read_text(encoding="utf-8").splitlines()[0])
    return match.group(1) if match else None


# ---------------------------------------------------------------------------------------------- refresh

def cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return platform.processor() or platform.machine()


def refresh(build, only):
    """Runs each lab's program with --quick --json and writes docs/results/labNN.json atomically."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "os": f"{platform.system()} {platform.release()}"}
    failed = []
    for folder in lab_folders():
        number = folder.name[:2]
        if only and number not in only:
            continue
        program = build / "bin" / f"lab{number}"
        if not program.exists():
            sys.exit(f"lab_pages: {program} not found: build first (./lab build)")
        with tempfile.TemporaryDirectory() as tmp:
            json_path = pathlib.Path(tmp) / "report.json"
            argv = [str(program), "--quick", "--json", str(json_path)]
            print(f"lab_pages: lab {number}: {' '.join(argv[:2])} --json ...", flush=True)
            started = datetime.datetime.now(datetime.timezone.utc)
            load_before = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
            run = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800)
            seconds = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
            # 0: every must-hold observation holds, 1: one fails, 5: one could not be decided (the machine was
            # busy, or the samples scattered): real results, kept and shown; 2-4: no report.
            if run.returncode not in (0, 1, 5) or not json_path.exists():
                failed.append(number)
                print(f"lab_pages: lab {number} exited with {run.returncode}:\n{run.stderr[-2000:]}", file=sys.stderr)
                continue
            report = json.loads(json_path.read_text())
        report["run"] = {"command": f"build/bin/lab{number} --quick --json", "exit_code": run.returncode,
                         "date": started.strftime("%Y-%m-%d"), "seconds": round(seconds, 1), **machine,
                         "load_average_before": load_before, **provenance(number)}
        target = RESULTS / f"lab{number}.json"
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(target)
        print(f"lab_pages: wrote {target.relative_to(ROOT)} ({seconds:.0f} s, exit {run.returncode})", flush=True)
    if failed:
        sys.exit(f"lab_pages: no report from lab(s) {', '.join(failed)}")


# ---------------------------------------------------------------------------------------- provenance

def lab_folder(number):
    found = [f for f in lab_folders() if f.name[:2] == number]
    return found[0] if found else None


def used_labs(number, seen=None):
    """The labs whose exercise lab NN runs (USES_EXERCISES in its CMakeLists.txt), followed through."""
    seen = set() if seen is None else seen
    folder = lab_folder(number)
    cmake = folder / "CMakeLists.txt" if folder else None
    if cmake and cmake.exists():
        match = re.search(r"USES_EXERCISES((?:\s+\d\d)+)", cmake.read_text(encoding="utf-8"))
        for used in (match.group(1).split() if match else []):
            if used not in seen:
                seen.add(used)
                used_labs(used, seen)
    return sorted(seen)


def fingerprint_roots(number):
    """The folders a kept run of lab NN depends on, relative to the repository (see the module's comment)."""
    roots = []
    for n in [number, *used_labs(number)]:
        folder = lab_folder(n)
        if folder:
            roots.append(f"labs/{folder.name}")
            if (ROOT / "solutions" / folder.name).is_dir():
                roots.append(f"solutions/{folder.name}")
    return roots + ["common", "datasets"]


def listed_files(root_rel):
    """The files under a folder as git lists them (tracked, or new and not ignored); every file there when
    this is not a git checkout (a scratch copy)."""
    folder = ROOT / root_rel
    git = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                          "--", root_rel], capture_output=True)
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if git.returncode == 0 and inside.returncode == 0 and pathlib.Path(inside.stdout.strip()).resolve() == ROOT:
        names = sorted({n for n in git.stdout.decode().split("\0") if n})
        return [ROOT / n for n in names if (ROOT / n).is_file()]
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def fingerprint(number):
    digest = hashlib.sha256()
    for root_rel in fingerprint_roots(number):
        for path in listed_files(root_rel):
            if path.name == "predictions.toml":
                continue  # a student's predictions (or the reference's) change what the table says, not what the lab measures
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def provenance(number):
    """What a kept run records about the code it was made from: the commit, whether the tree had changes
    beyond it, and the fingerprint of the sources it depends on."""
    def git(*args):
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": bool(git("status", "--porcelain")),
            "fingerprint": fingerprint(number), "fingerprint_of": fingerprint_roots(number)}


def refresh_command(number):
    return f"./lab docs --refresh-results {number}"


def stale_runs():
    """Sentences, one per lab whose kept run was not made from the sources as they are now."""
    problems = []
    for folder in lab_folders():
        number = folder.name[:2]
        path = RESULTS / f"lab{number}.json"
        if not path.exists():
            continue  # a new lab before its first kept run: check-ids reports it as skipped
        run = json.loads(path.read_text(encoding="utf-8")).get("run", {})
        kept = run.get("fingerprint")
        if kept == fingerprint(number):
            continue
        if kept:
            why = (f"made at commit {(run.get('commit') or '?')[:10]}; a file under "
                   f"{', '.join(fingerprint_roots(number))} has changed since")
        else:
            why = "it records no fingerprint of the sources it was made from"
        problems.append(f"lab {number}: the kept run docs/results/lab{number}.json is stale ({why}): "
                        f"rerun it with {refresh_command(number)} and commit it")
    return problems


# -------------------------------------------------------------------------------------------- check-ids

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


def id_pattern(table_id):
    parts = re.split(r"(<[^>]+>|\*)", table_id)
    return re.compile("".join(".+" if p == "*" or p.startswith("<") else re.escape(p) for p in parts))


def compare_ids(table_ids, reported_ids, what):
    """Problems (a list of sentences) when the table and the report do not list the same ids."""
    patterns = {t: id_pattern(t) for t in table_ids}
    problems = []
    unlisted = [r for r in reported_ids if not any(p.fullmatch(r) for p in patterns.values())]
    unreported = [t for t, p in patterns.items() if not any(p.fullmatch(r) for r in reported_ids)]
    if unlisted:
        problems.append(f"{what} reports ids the README's table does not list: {', '.join(unlisted)}")
    if unreported:
        problems.append(f"the README's table lists ids {what} does not report: {', '.join(unreported)}")
    return problems


def check_ids(readme, report_json):
    readme = pathlib.Path(readme).resolve()
    table_ids = observe_table_ids(readme.read_text(encoding="utf-8"))
    if not table_ids:
        sys.exit(f"{readme}: no '{OBSERVE_HEADING}' table with `id`s in its first column")
    reported = [o["id"] for o in json.loads(pathlib.Path(report_json).read_text())["observations"]]
    problems = compare_ids(table_ids, reported, "the lab's --json")
    results = RESULTS / f"lab{readme.parent.name[:2]}.json"
    if not results.exists():
        # A new lab before its first kept run: the README is still checked against the --json above, and the
        # test is reported as skipped (CTest's SKIP_RETURN_CODE), never as passed.
        for problem in problems:
            print(f"{readme.relative_to(ROOT)}: {problem}", file=sys.stderr)
        if problems:
            sys.exit(1)
        print(f"{readme.relative_to(ROOT)}: the table lists exactly the {len(reported)} reported ids, but "
              f"{results.relative_to(ROOT)} is missing: run ./lab docs --refresh-results and commit it")
        sys.exit(77)
    else:
        kept = [o["id"] for o in json.loads(results.read_text())["observations"]]
        stale = compare_ids(table_ids, kept, f"the kept run {results.relative_to(ROOT)}")
        problems += [f"{p} (if that run is out of date: ./lab docs --refresh-results, and commit it)" for p in stale]
    for problem in problems:
        print(f"{readme.relative_to(ROOT)}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{readme.relative_to(ROOT)}: the table lists exactly the {len(reported)} reported ids")


# ----------------------------------------------------------------------------------------------- filter

def cell(text):
    """Text as one cell of a Doxygen Markdown table: nothing in it is read as markup or a command."""
    text = str(text).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for special in "|*@`":
        text = text.replace(special, "\\" + special)
    return text.replace("\n", " ")


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


def run_machine(report):
    """The machine of a kept run in words: "AMD EPYC, 2 logical CPUs, quiet (load 0.12 when it started)"."""
    run = report["run"]
    words = f"{run['cpu']}, {run['logical_cpus']} logical CPUs"
    load = run.get("load_average_before")
    if isinstance(load, (int, float)):
        words += f", {'busy' if load >= 0.5 * max(1, run['logical_cpus']) else 'quiet'} (load {load:.2f} when it started)"
    return words


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
        verdict = VERDICT_WORDS.get(o["verdict"], o["verdict"])
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


# ------------------------------------------------------------------------------------------ placeholders

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


def kept_report(number, cache={}):
    if number not in cache:
        path = RESULTS / f"lab{number}.json"
        cache[number] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    return cache[number]


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


def prose(text):
    """Text from a run, safe in a Doxygen Markdown paragraph: nothing in it starts a command or a tag."""
    return text.replace("\\", "\\\\").replace("@", "\\@").replace("<", "&lt;").replace(">", "&gt;")


# Code is shown as written: a placeholder inside `code` or a fenced block is an example, never filled.
CODE = re.compile(r"(?ms)^(```|~~~).*?^\1[^\n]*$|`[^`\n]+`")


def outside_code(pattern, text):
    """The matches of pattern in text that are not inside a code span or a fenced code block."""
    code = [m.span() for m in CODE.finditer(text)]
    return [m for m in pattern.finditer(text) if not any(a <= m.start() < b for a, b in code)]


def fill_placeholders(text):
    """The page with every {{run:...}} outside code replaced by its value; PlaceholderError names the first
    bad one."""
    for match in reversed(outside_code(PLACEHOLDER, text)):
        text = text[:match.start()] + resolve(match) + text[match.end():]
    return text


def placeholder_problems(path):
    text = path.read_text(encoding="utf-8")
    problems = []
    for match in outside_code(PLACEHOLDER, text):
        try:
            resolve(match)
        except PlaceholderError as error:
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path.relative_to(ROOT)}:{line}: {error}")
    for match in outside_code(re.compile(r"\{\{run:[^}]*\}\}"), text):
        if not PLACEHOLDER.fullmatch(match.group(0)):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)} is not a placeholder: "
                            f"{{{{run:NN:ID.FIELD|FORMAT}}}}")
    return problems


# -------------------------------------------------------------------------------------------- the claims

CLAIMS = ROOT / "docs" / "claims.json"


def kept_runs_by_machine():
    """{machine label: {lab number: report}}: docs/results/labNN.json, and docs/results/<folder>/labNN.json
    for kept runs of another machine (a GPU's)."""
    machines = {}
    for path in sorted(RESULTS.glob("lab[0-9][0-9].json")) + sorted(RESULTS.glob("*/lab[0-9][0-9].json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        device = report.get("device", "?").split(" ")[0]
        label = f"{report['run']['cpu']}, {report['run']['logical_cpus']} logical CPUs ({device})"
        if device != "cpu" and report["run"].get("gpu"):
            label = f"{report['run']['gpu']} ({device})"
        machines.setdefault(label, {})[path.stem[3:]] = report
    return machines


def ledger_problems():
    """Sentences for every ledger entry that names a lab or an id no kept run (or lesson table) has."""
    if not CLAIMS.exists():
        return []
    problems = []
    for number, claim in enumerate(json.loads(CLAIMS.read_text(encoding="utf-8"))["claims"], 1):
        checks, quoted = claim.get("checked_by", []), claim.get("not_checked")
        if bool(checks) == bool(quoted):
            problems.append(f"docs/claims.json, claim {number}: give either checked_by or not_checked (the reason)")
        for check in checks:
            folder = lab_folder(check["lab"])
            report = kept_report(check["lab"])
            if folder is None:
                problems.append(f"docs/claims.json, claim {number}: there is no lab {check['lab']}")
                continue
            known = [o["id"] for o in report["observations"]] if report else \
                observe_table_ids((folder / "README.md").read_text(encoding="utf-8")) or []
            if check["id"] not in known:
                problems.append(f"docs/claims.json, claim {number}: lab {check['lab']} observes no '{check['id']}'")
    return problems


def claims_ledger():
    """The ledger as Markdown tables: per source, each claim, the observations that check it and their
    verdict in each machine's kept run; then the claims no lab checks on this hardware, with the reason."""
    ledger = json.loads(CLAIMS.read_text(encoding="utf-8"))
    machines = kept_runs_by_machine()
    out = []
    for source in ledger["sources"]:
        claims = [c for c in ledger["claims"] if c["source"] == source["key"]]
        checked = [c for c in claims if c.get("checked_by")]
        quoted = [c for c in claims if not c.get("checked_by")]
        out += ["", f"## {source['title']}", "", source["about"], "",
                f"{len(checked)} claims checked by a lab, {len(quoted)} quoted.", ""]
        header = "| where | claim | checked by |" + "".join(f" {cell(m)} |" for m in machines)
        out += [header, "|---|---|---|" + "---|" * len(machines)]
        for c in checked:
            ids = "<br>".join(f"lab {k['lab']}: `{k['id']}`" for k in c["checked_by"])
            verdicts = []
            for runs in machines.values():
                words = []
                for k in c["checked_by"]:
                    report = runs.get(k["lab"])
                    o = next((o for o in report["observations"] if o["id"] == k["id"]), None) if report else None
                    word = "no kept run" if o is None else VERDICT_WORDS.get(o["verdict"], o["verdict"])
                    if o is not None and o["verdict"] in ("not_applicable", "inconclusive") and o.get("reason"):
                        reason = o["reason"] if len(o["reason"]) <= 60 else o["reason"][:57] + "..."
                        word += f" ({cell(reason)})"
                    words.append(word)
                verdicts.append("<br>".join(words))
            out.append(f"| {cell(c['where'])} | {cell(c['claim'])} | {ids} |" + "".join(f" {v} |" for v in verdicts))
        if quoted:
            out += ["", f"Quoted from {source['short']}, not checked here:", "",
                    "| where | claim | why no lab checks it here |", "|---|---|---|"]
            out += [f"| {cell(c['where'])} | {cell(c['claim'])} | {cell(c['not_checked'])} |" for c in quoted]
    return "\n".join(out)


def rewrite_images(text, page):
    """Markdown images that point into docs/images/ (the path GitHub follows) become bare names that Doxygen
    finds through IMAGE_PATH and copies next to the HTML. Any other path stays as it is, so a broken one
    stays broken and the browser check (scripts/ci/check-docs.py) reports it."""
    def replace(match):
        alt, target = match.group(1), match.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("/"):
            return match.group(0)
        resolved = (page.parent / target).resolve()
        if resolved.parent == IMAGES.resolve() and resolved.exists():
            return f"![{alt}]({resolved.name})"
        return match.group(0)
    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", replace, text)


def lab_path_list():
    """The path through the labs for the main page: every labs/NN_*/ folder, in order, as a subpage (so the
    sidebar lists the lessons in order) with what it proves, taken from labs/README.md's table."""
    shows = {}
    index = (ROOT / "labs" / "README.md").read_text(encoding="utf-8")
    for line in index.splitlines():
        match = re.match(r"\|\s*\[[^\]]*\]\((\d\d_[^/]+)/README\.md\)\s*\|([^|]*)\|", line)
        if match:
            shows[match.group(1)] = match.group(2).strip()
    lines = []
    for folder in lab_folders():
        ident = page_id(folder)
        if not ident:
            continue
        what = shows.get(folder.name)
        lines.append(f"{len(lines) + 1}. @subpage {ident} \"{lab_title(folder)}\"" + (f": {what}" if what else ""))
    return "\n".join(lines)


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
    if path.name != "README.md" or folder.parent != ROOT / "labs" or not re.fullmatch(r"\d\d_.+", folder.name):
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
    # Numbered in the file's order, not named by observation: some ids state the answer (fp16_70000_is_inf).
    for index, q in enumerate(questions, 1):
        kind, limit = q.tolerance
        rule = {"exact": "exactly", "relative": f"within {limit:.0%}" if limit >= 0.01 else f"within {limit:g} relative",
                "absolute": f"within {limit:g}", "factor": f"within {limit:g}x",
                "side_of": f"the same side of {limit:g}"}[kind]
        if kind == "side_of":
            rule += " (a number, or above/below, more/less)"
        lines.append(f"| {index} | {cell(prose(q.question))} | {cell(prose(q.unit)) or '-'} | {rule} |")
    return "\n".join(lines + [""])


def filter_page(path):
    """Doxygen reads each Markdown page through this: image paths into docs/images/ made Doxygen's, on a lab
    README the kept run's observation table at the end of "What you should observe", and on the main page
    the generated path through the labs in place of the line `@labs_path`."""
    page = pathlib.Path(path).resolve()
    text = page.read_text(encoding="utf-8")
    text = rewrite_images(text, page)
    if page.name == "README.md" and page.parent.parent == ROOT / "labs" and re.fullmatch(r"\d\d_.+", page.parent.name):
        section = results_section(page.parent.name[:2])
        lines = text.split("\n")
        start = next((i for i, line in enumerate(lines) if line.startswith(OBSERVE_HEADING)), None)
        if section and start is not None:
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
            lines[end:end] = section.split("\n")
        text = "\n".join(lines)
    text = re.sub(r"^@labs_path$", lambda _: lab_path_list(), text, flags=re.M)
    text = re.sub(r"^@claims_ledger$", lambda _: claims_ledger(), text, flags=re.M)
    try:
        text = fill_placeholders(fill_questions(text))
    except PlaceholderError as error:  # `lab_pages.py check` fails the docs build first; never show a guess
        sys.exit(f"{page}: {error}")
    sys.stdout.write(text)


def doc_pages():
    """Every Markdown page the docs read (the pages placeholders may appear on)."""
    pages = [ROOT / "datasets" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages += [folder / "README.md" for folder in lab_folders()]
    return [p for p in pages if p.exists()]


def check():
    """The docs' preconditions: fresh kept runs, placeholders that resolve, a ledger naming real ids."""
    problems = stale_runs()
    for page in doc_pages():
        problems += placeholder_problems(page) + question_problems(page)
    problems += ledger_problems()
    for problem in problems:
        print(f"lab_pages: {problem}", file=sys.stderr)
    if problems:
        sys.exit(f"lab_pages: {len(problems)} problem(s) before the docs can be built")
    print(f"lab_pages: every kept run is fresh, every placeholder of {len(doc_pages())} pages resolves")


def main(argv):
    if len(argv) >= 1 and argv[0] == "refresh":
        build, only = ROOT / "build", argv[1:]
        if only[:1] == ["--build"] and len(only) >= 2:
            build, only = pathlib.Path(only[1]).resolve(), only[2:]
        refresh(build, [f"{int(n):02d}" for n in only])
    elif len(argv) == 3 and argv[0] == "check-ids":
        check_ids(argv[1], argv[2])
    elif argv == ["check"]:
        check()
    elif len(argv) == 2 and argv[0] == "fingerprint":
        number = f"{int(argv[1]):02d}"
        print(fingerprint(number), " ".join(fingerprint_roots(number)))
    elif len(argv) == 2 and argv[0] == "filter":
        filter_page(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
