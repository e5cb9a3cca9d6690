"""Figures in the pages (standard library only): every number with a unit of measurement (a time, a rate, a
speed-up, a share, a size, a count of steps) in a lesson or a docs page is either a {{run:...}} placeholder,
filled from the lab's kept run, or says in its own sentence where it comes from (a source: "the chapter's log",
"NVIDIA's datasheet", "nanoGPT's README"), or is one of the reviewed fixed facts (a format or formula constant, a rule's threshold, a
configuration) listed in a fixed-figures.tsv beside the page (a lab's folder, datasets/; docs/ for the docs' pages
and the two index pages, README.md and labs/README.md): rows of
PAGE<tab>FIGURE<tab>WHY, PAGE a path from the repository's root (a glob) to the page's source. Anything else is a figure typed by hand that
no run keeps true: figure_problems names it.
"""
import fnmatch
import re

from kept_runs import ROOT
from page_markdown import CODE

FIXED = "fixed-figures.tsv"
UNITS = (r"ns|µs|us|ms|s|sec|seconds?|minutes?|hours?|milliseconds?|microseconds?|nanoseconds?|"
         r"[KMGTP]i?B/s|[KMGTP]?FLOP/s|[GT]FLOPS|[KMGT]?i?B|bytes?|tokens/s|tokens per second|steps/s|steps|"
         r"iterations|%|percent|times|cycles|GHz|MHz|W")
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# A figure: a number or a range with a unit after a space or none ("3.1x", "16-19 ms", "1,644 ms", "1.5 times");
# "x" only right after the number, so a shape ("2 x 768") is not a speed-up.
FIGURE = re.compile(rf"(?<![\w.{{:|/\\-])(?:~)?{NUMBER}(?:\s?(?:-|–|to)\s?{NUMBER})?(?:(?:x|×)(?![\w])|\s?(?:{UNITS})"
                    r"(?![\w/]))")
# A sentence that names where its figure comes from: a document, a log, a datasheet, a paper, a published result.
SOURCE = re.compile(r"(?i)\b(?:chapter|lesson 7|datasheet|data sheet|spec sheet|paper|published|nanoGPT|"
                    r"whitepaper|according to)\b")
PLACEHOLDER = re.compile(r"\{\{[^}]*\}\}")


def fixed_figures(folder):
    """[(page glob, figure, why)] of the reviewed fixed facts listed in @p folder; a row without a why is an
    error."""
    rows, listing = [], folder / FIXED
    if listing.exists():
        for number, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            cells = line.split("\t")
            if len(cells) != 3 or not all(c.strip() for c in cells):
                raise ValueError(f"{listing.relative_to(ROOT)}:{number}: a row is PAGE<tab>FIGURE<tab>WHY")
            rows.append((cells[0].strip(), normal(cells[1]), cells[2].strip()))
    return rows


def normal(figure):
    return re.sub(r"\s+", " ", figure).replace("–", "-").strip()


def sentence_around(text, start, end):
    """The sentence (or table cell, or list item) a figure stands in."""
    left = max(text.rfind(stop, 0, start) for stop in (". ", "\n\n", "|", "\n- ", "\n#"))
    rights = [i for i in (text.find(stop, end) for stop in (". ", "\n\n", "|", "\n- ")) if i >= 0]
    return text[left + 1:min(rights) if rights else len(text)]


def figures(text):
    """(line, figure, sentence) of every figure of @p text outside code, placeholders and HTML comments."""
    masked = PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), text)
    masked = re.sub(r"(?s)<!--.*?-->", lambda m: " " * len(m.group(0)), masked)
    masked = CODE.sub(lambda m: " " * len(m.group(0)), masked)
    masked = re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), masked)  # link targets
    return [(text.count("\n", 0, m.start()) + 1, normal(m.group(0)), sentence_around(masked, m.start(), m.end()))
            for m in FIGURE.finditer(masked)]


def figure_problems(path, text=None):
    """A sentence for each figure of page @p path (a source where it has one) that is neither filled from a run,
    nor sourced in its sentence, nor a fixed fact."""
    name = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8") if text is None else text
    folder = ROOT / "docs" if path.parent in (ROOT, ROOT / "labs") else path.parent  # the index pages' in docs/
    allowed = {figure for page, figure, _ in fixed_figures(folder) if fnmatch.fnmatch(name, page)}
    listing = (folder / FIXED).relative_to(ROOT)
    return [f"{name}:{line}: '{figure}' is typed by hand: fill it from the kept run ({{{{run:NN:ID.FIELD}}}}), "
            f"name its source in the sentence, or add it to {listing} with why it is fixed"
            for line, figure, sentence in figures(text)
            if figure not in allowed and not SOURCE.search(sentence)]
