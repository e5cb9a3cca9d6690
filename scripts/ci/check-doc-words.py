#!/usr/bin/env python3
"""Fails when a reader's page says something only the people who made it could follow (standard library only).

    check-doc-words.py [FILE ...]     default: README.md, labs/*/README.md, labs/README.md, datasets/README.md
                                      and every docs/**/*.md

A figure has to name its machine (CPU or GPU model, cores, busy or quiet), so "the CI machine", "our runs"
and "our machine" are refused: they meant different machines in different places. A page also never
sends the reader to this project's issue tracker ("issue 15") or says a code path "has never run" (say what
has been checked, and where, instead). Each hit is printed as FILE:LINE: the words, and the exit code is 1.
"""
import pathlib
import re
import sys

# scripts/driver/lab_list.py: the lab folders, from the one list the driver keeps
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "driver"))
import lab_list  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]

FORBIDDEN = [
    (re.compile(r"\bCI(?:'s)? machines?\b", re.I), "names no machine: say its CPU or GPU model, cores and load"),
    (re.compile(r"\bour (?:own )?(?:runs?|machines?|CI)\b", re.I), "whose? name the machine and how busy it was"),
    (re.compile(r"\b(?:has|have|was|were|is|are)? ?never (?:been )?run\b", re.I),
     "say what is checked, and on what, instead"),
    # This project's issues; a link to another project's tracker (github.com/.../issues/123) is fine.
    (re.compile(r"(?<![/\w])issues? #?\d+\b", re.I), "a reader has no issue tracker: say what is meant"),
]


def default_files():
    files = [ROOT / "README.md", ROOT / "labs" / "README.md", ROOT / "datasets" / "README.md"]
    files += [folder / "README.md" for folder in lab_list.lab_folders(ROOT)]
    files += sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.exists()]


def hits(path):
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for pattern, why in FORBIDDEN:
            for match in pattern.finditer(line):
                found.append((number, match.group(0).strip(), why))
    return found


def main(argv):
    files = [pathlib.Path(a).resolve() for a in argv] or default_files()
    bad = 0
    for path in files:
        for number, words, why in hits(path):
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            print(f"{shown}:{number}: '{words}': {why}", file=sys.stderr)
            bad += 1
    if bad:
        sys.exit(f"check-doc-words: {bad} place(s) to rewrite in {len(files)} page(s)")
    print(f"check-doc-words: {len(files)} pages, none names a machine-less figure, an issue or 'never run'")


if __name__ == "__main__":
    main(sys.argv[1:])
