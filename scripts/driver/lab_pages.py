#!/usr/bin/env python3
"""The lab pages of the HTML docs, kept in step with the labs (Python standard library only).

    lab_pages.py refresh [--build DIR] [NN ...]
                                            run every labs/NN_*/ program (or those given) with --quick --json
                                            and keep each report, with the machine and the date, in
                                            docs/results/labNN.json; then render
    lab_pages.py check-ids README JSON      the README's "What you should observe" table lists exactly the
                                            ids of the lab's --json report (and of docs/results/labNN.json)
    lab_pages.py render                     writes each page rendered from its source (PAGE.md from PAGE.md.in:
                                            placeholders filled from the kept runs, see page_render)
    lab_pages.py figures [PAGE ...]         the figures typed by hand in the pages (or those given: a source,
                                            where a page has one) and their bad placeholders (see page_figures)
    lab_pages.py check                      before the docs are built: every kept run is fresh (made from the
                                            sources as they are now, see fingerprint), every {{run:...}}
                                            placeholder of every page names an id and a field its kept run has,
                                            every committed page is what its source renders to, no figure is
                                            typed by hand, every lesson lists its questions ({{questions:NN}},
                                            just before "What you should observe"), and the claims ledger
                                            (docs/claims.json) names only observed ids
    lab_pages.py fingerprint NN             the fingerprint of lab NN's sources now, and what it covers
    lab_pages.py filter FILE                Doxygen's INPUT_FILTER for Markdown: the page as Doxygen should
                                            read it (see filter_page)

A kept run is tied to the code it was made from by a fingerprint: the SHA-256 of the path and bytes of every
file (as git lists them: tracked, or new and not ignored) under the lab's folder labs/NN_*/ (its code), its
reference answer solutions/NN_*/, the same two folders of every earlier lab whose
exercise it runs (USES_EXERCISES in its CMakeLists.txt, followed through), and the shared sources common/
and datasets/. Build files, the tests, the pages (the lesson, its source and its fixed-figures.tsv) and the
predictions files (predictions.toml) are left out: they do not change what a lab measures. A change to any covered file makes the kept run stale, and `./lab docs` fails until it is made
again (./lab docs --refresh-results NN). The run's content is tied to what the refresh wrote by run.content_sha256
(kept_runs.content_checksum): a number edited by hand afterwards fails the check too.

Labs are found by folder, so a new labs/NN_topic/ is picked up by every command without a change here.
"""
import json
import pathlib
import re
import sys

# The parts of the pages, in modules beside this file (found also when this file is loaded from elsewhere). A test
# of a lesson page reads prose and questions_section through this module, the pages' one entry point.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from claims_ledger import claims_ledger, ledger_problems  # noqa: E402
from speedrun_records import speedrun_records  # noqa: E402
from kept_runs import (RESULTS, ROOT, chart_problems, edited_runs, fingerprint, fingerprint_roots,  # noqa: E402
                       lab_folders, refresh, stale_runs)
from page_figures import figure_problems  # noqa: E402
from page_render import render, render_problems, sources, target  # noqa: E402
from page_markdown import OBSERVE_HEADING, flags_section, observe_table_ids, prose, results_section  # noqa: E402,F401
from placeholders import (PlaceholderError, fill_placeholders, fill_questions, placeholder_problems,  # noqa: E402,F401
                          question_problems, questions_section)

IMAGES = ROOT / "docs" / "images"


def lab_title(folder):
    """The README's first heading, without '# ' and the {#anchor}: "Lab 05: GPT-2 in fp32, ...". """
    first = (folder / "README.md").read_text(encoding="utf-8").splitlines()[0]
    return re.sub(r"\s*\{#.*\}\s*$", "", first.lstrip("# ")).strip()


def page_id(folder):
    match = re.search(r"\{#([\w-]+)\}", (folder / "README.md").read_text(encoding="utf-8").splitlines()[0])
    return match.group(1) if match else None


# -------------------------------------------------------------------------------------------- check-ids

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


def filter_page(path):
    """Doxygen reads each Markdown page through this: image paths into docs/images/ made Doxygen's, on a lab
    README the kept run's observation table at the end of "What you should observe" and its flags (with
    their defaults and --quick values, from the program's --help) at the end of the page, and on the main page
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
        text = "\n".join(lines).rstrip("\n") + "\n" + flags_section(page.parent.name[:2])
    text = re.sub(r"^@labs_path$", lambda _: lab_path_list(), text, flags=re.M)
    text = re.sub(r"^@claims_ledger$", lambda _: claims_ledger(), text, flags=re.M)
    text = re.sub(r"^@speedrun_records$", lambda _: speedrun_records(), text, flags=re.M)
    try:
        text = fill_placeholders(fill_questions(text))
    except PlaceholderError as error:  # `lab_pages.py check` fails the docs build first; never show a guess
        sys.exit(f"{page}: {error}")
    sys.stdout.write(text)


# The maintainers' page is their dated log of this project's measurements, each under the machine it was made on:
# the log is the figures' source, so they are not filled from a kept run.
FIGURES_LOGGED = ("docs/maintainers.md.in", "docs/maintainers.md")


def doc_pages():
    """Every page a reader sees, as it is written: its source (PAGE.md.in) where it is rendered from one, else
    the page itself (the pages placeholders may appear on)."""
    pages = [ROOT / "README.md", ROOT / "labs" / "README.md", ROOT / "datasets" / "README.md",
             *sorted((ROOT / "docs").glob("*.md"))]
    pages += [folder / "README.md" for folder in lab_folders()]
    rendered = {target(source): source for source in sources()}
    return [rendered.get(p, p) for p in pages if p.exists() or p in rendered]


def figures(pages):
    """The figures typed by hand in @p pages, and their placeholders that do not resolve."""
    problems = []
    for page in pages:
        if page.relative_to(ROOT).as_posix() not in FIGURES_LOGGED:
            problems += figure_problems(page)
        problems += placeholder_problems(page)
    return problems


def link_problems(page):
    """Relative links of @p page that would break in one of the two places it is read: a missing file, or a
    section of another page (Doxygen turns a link to a page into that page's HTML, not one with #section)."""
    problems = []
    for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if link.startswith("#") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", link):
            continue
        path, _, section = link.partition("#")
        if not (page.parent / path).exists():
            problems.append(f"{page.relative_to(ROOT)}: link {link} points to a missing file")
        elif section and path.endswith(".md"):
            problems.append(f"{page.relative_to(ROOT)}: link {link} names a section of another page, which the "
                            f"HTML docs cannot follow: link the page and name the section in words")
    return problems


def check():
    """The docs' preconditions: fresh kept runs and the charts they drew, placeholders that resolve, a ledger
    naming real ids."""
    if not RESULTS.is_dir():  # a release: its kept runs (the reference's measurements) are left out
        sys.exit("lab_pages: this copy has no kept runs (docs/results/: a release leaves them out, they hold the "
                 "reference's measurements), so the HTML docs are not built here: each lesson is its lab's "
                 "README.md (labs/NN_topic/README.md)")
    problems = stale_runs() + edited_runs() + chart_problems() + figures(doc_pages()) + render_problems()
    for page in doc_pages():
        problems += question_problems(page) + link_problems(page)
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
        for page in render():
            print(f"lab_pages: rendered {page.relative_to(ROOT)}")
    elif len(argv) == 3 and argv[0] == "check-ids":
        check_ids(argv[1], argv[2])
    elif argv == ["check"]:
        check()
    elif argv == ["render"]:
        for page in render():
            print(f"lab_pages: rendered {page.relative_to(ROOT)}")
    elif argv[:1] == ["figures"]:
        pages = [pathlib.Path(p).resolve() for p in argv[1:]] or doc_pages()
        problems = figures(pages)
        print("\n".join(problems) or f"lab_pages: no figure typed by hand in {len(pages)} pages")
        sys.exit(1 if problems else 0)
    elif len(argv) == 2 and argv[0] == "fingerprint":
        number = f"{int(argv[1]):02d}"
        print(fingerprint(number), " ".join(fingerprint_roots(number)))
    elif len(argv) == 2 and argv[0] == "filter":
        filter_page(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
