#!/usr/bin/env python3
"""Every exercise function's answer lives in solutions/ alone.

For each labs/NN_*/exercise.h, the functions it declares may be defined (given a body) only in
solutions/NN_*/ and in the lab's own stub file labs/NN_*/exercise.cpp. A definition anywhere else
(common/, datasets/, an experiment, a later lab) would let the program run the reference instead of the
student's code, so the check fails and names the file and line.
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
SOURCES = ("*.cpp", "*.h", "*.cu", "*.cuh")
# A declaration in a header: "<type> name(" at the start of a statement, not a call or a macro.
DECLARATION = re.compile(r"^\s*(?:template\s*<[^>]*>\s*)?(?:[\w:<>,*&]+\s+)+[*&]?(\w+)\s*\(", re.M)
NOT_NAMES = {"if", "for", "while", "switch", "return", "sizeof", "operator"}


def declared_functions(header):
    text = re.sub(r"//.*", "", header.read_text())
    return {m.group(1) for m in DECLARATION.finditer(text)} - NOT_NAMES


def definitions(text, name):
    # "<type or qualifier> [Class::]name(params) [const] [noexcept] {": a body, not a call.
    pattern = re.compile(
        r"[\w>*&]\s+(?:[\w]+::)*" + re.escape(name) + r"\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)"
        r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?\{")
    for match in pattern.finditer(text):
        before = text[max(0, match.start() - 20):match.start() + 1]
        if re.search(r"\b(return|else|new|throw|co_return)\s*$", before):
            continue
        yield text.count("\n", 0, match.start()) + 1


def source_files():
    """Every source file of the project's own code: not solutions/, tests/, build trees or environments."""
    skipped = {"solutions", "tests", "data", "grade"}
    for top in sorted(ROOT.iterdir()):
        if not top.is_dir() or top.name in skipped or top.name.startswith((".", "build")):
            continue
        for pattern in SOURCES:
            yield from top.rglob(pattern)


def main():
    problems = []
    headers = sorted(ROOT.glob("labs/[0-9][0-9]_*/exercise.h"))
    for header in headers:
        names = declared_functions(header)
        stub = header.with_name("exercise.cpp")
        for path in source_files():
            relative = path.relative_to(ROOT)
            if path in (stub, header):
                continue
            text = re.sub(r"//.*", "", path.read_text(errors="replace"))
            for name in names:
                for line in definitions(text, name):
                    problems.append(f"{relative}:{line}: defines {name}(), an exercise of {header.parent.name}")
    for problem in problems:
        print(problem)
    print(f"{len(headers)} exercise headers checked: "
          + ("the answers live in solutions/ alone" if not problems else f"{len(problems)} answers outside solutions/"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
