#!/usr/bin/env python3
"""The lab pages of the HTML docs, kept in step with the labs (Python standard library only).

    lab_pages.py refresh [--build DIR] [NN ...]
                                            run every labs/NN_*/ program (or those given) with --quick --json
                                            and keep each report, with the machine and the date, in
                                            docs/results/labNN.json
    lab_pages.py check-ids README JSON      the README's "What you should observe" table lists exactly the
                                            ids of the lab's --json report (and of docs/results/labNN.json)
    lab_pages.py filter FILE                Doxygen's INPUT_FILTER for Markdown: the page as Doxygen should
                                            read it (see filter_page)

Labs are found by folder, so a new labs/NN_topic/ is picked up by every command without a change here.
"""
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
IMAGES = ROOT / "docs" / "images"
OBSERVE_HEADING = "## What you should observe"


def lab_folders():
    """labs/NN_topic/ folders in lab order."""
    return sorted(p for p in (ROOT / "labs").iterdir() if p.is_dir() and re.fullmatch(r"\d\d_.+", p.name))


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
            run = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800)
            seconds = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
            # 0: every must-hold observation holds, 1: one fails (a real result, kept and shown); 2-4: no report.
            if run.returncode not in (0, 1) or not json_path.exists():
                failed.append(number)
                print(f"lab_pages: lab {number} exited with {run.returncode}:\n{run.stderr[-2000:]}", file=sys.stderr)
                continue
            report = json.loads(json_path.read_text())
        report["run"] = {"command": f"build/bin/lab{number} --quick --json", "exit_code": run.returncode,
                         "date": started.strftime("%Y-%m-%d"), "seconds": round(seconds, 1), **machine}
        target = RESULTS / f"lab{number}.json"
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(target)
        print(f"lab_pages: wrote {target.relative_to(ROOT)} ({seconds:.0f} s, exit {run.returncode})", flush=True)
    if failed:
        sys.exit(f"lab_pages: no report from lab(s) {', '.join(failed)}")


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


def results_section(number):
    """The observation table of the kept run of lab NN, as Markdown (empty when there is none)."""
    path = RESULTS / f"lab{number}.json"
    if not path.exists():
        return ""
    report = json.loads(path.read_text(encoding="utf-8"))
    run = report["run"]
    verdict_mark = {"holds": "holds", "fails": "**fails**", "not_applicable": "n/a"}
    rows = []
    for o in report["observations"]:
        verdict = verdict_mark.get(o["verdict"], o["verdict"])
        note = f" ({o['reason']})" if o.get("reason") else ""
        rows.append(f"| `{o['id']}` | {verdict} | {'yes' if o['must_hold'] else 'no'} | "
                    f"{cell(measured_text(o.get('measured')))} | {cell(o['expected'])}{cell(note)} |")
    return "\n".join([
        "",
        "### One real run (`--quick`)",
        "",
        f"`{run['command']}` on {run['date']}: {run['cpu']}, {report['device']}, libtorch {report['libtorch']} "
        f"({run['os']}); exit code {run['exit_code']}. Written by `./lab docs --refresh-results` into "
        f"`docs/results/lab{number}.json`; rerun it on your machine to compare.",
        "",
        "| id | verdict | must hold | measured | expected |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ])


def rewrite_images(text, page):
    """Markdown images that point into docs/images/ (the path GitHub follows) become bare names that Doxygen
    finds through IMAGE_PATH and copies next to the HTML. Any other path stays as it is, so a broken one
    stays broken and the browser check (scripts/check-docs.py) reports it."""
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
    sys.stdout.write(text)


def main(argv):
    if len(argv) >= 1 and argv[0] == "refresh":
        build, only = ROOT / "build", argv[1:]
        if only[:1] == ["--build"] and len(only) >= 2:
            build, only = pathlib.Path(only[1]).resolve(), only[2:]
        refresh(build, [f"{int(n):02d}" for n in only])
    elif len(argv) == 3 and argv[0] == "check-ids":
        check_ids(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "filter":
        filter_page(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
