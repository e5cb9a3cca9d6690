"""Pages rendered from their sources (standard library only). A page with figures from the kept runs, a lab's
questions, an exercise's points or counts of the exercises is written as a source, PAGE.md.in (the project's
README.md.in, a lesson's, a docs page's), holding {{run:...}}, {{questions:NN}}, {{points:...}} and {{count:...}}
placeholders (placeholders.py); the page a
reader opens, in an editor, on a code host or in the HTML docs, is PAGE.md, rendered from it with the kept runs'
values and committed beside it. `./lab docs --render` writes the pages; `./lab docs` (and so CI) fails while a
committed page is not what its source and the kept runs give.
"""
import os

from kept_runs import ROOT
from placeholders import PlaceholderError, fill_placeholders, fill_questions

SUFFIX = ".in"


def sources():
    """Every page source: the project's README.md.in, the lessons' labs/NN_topic/README.md.in and the docs'
    docs/NAME.md.in."""
    return (sorted(ROOT.glob("README.md.in")) + sorted(ROOT.glob("labs/[0-9][0-9]_*/README.md.in")) +
            sorted(ROOT.glob("docs/*.md.in")))


def target(source):
    return source.with_name(source.name[:-len(SUFFIX)])


def rendered(source):
    """The page @p source renders to; PlaceholderError names its first bad placeholder."""
    text = fill_placeholders(fill_questions(source.read_text(encoding="utf-8")))
    return (text.rstrip("\n") + f"\n\n<!-- Rendered from {source.name} and the kept runs (docs/results/) by "
            f"`./lab docs --render`: edit {source.name}, not this page. -->\n")


def render():
    """Writes every page its source renders to (each atomically); returns the pages that changed."""
    changed = []
    for source in sources():
        page, text = target(source), rendered(source)
        if page.exists() and page.read_text(encoding="utf-8") == text:
            continue
        temporary = page.with_name(f".{page.name}.{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, page)
        changed.append(page)
    return changed


def render_problems():
    """A sentence for each committed page that is not what its source and the kept runs give."""
    problems = []
    for source in sources():
        page = target(source)
        try:
            text = rendered(source)
        except PlaceholderError:
            continue  # placeholder_problems names it
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            problems.append(f"{page.relative_to(ROOT)} is not what {source.name} and the kept runs give: "
                            "./lab docs --render writes it (then commit both)")
    return problems
