#!/usr/bin/env python3
"""Every exercise function's answer lives in solutions/ alone.

The exercise functions of a lab are the ones its stub file labs/NN_*/exercise.cpp leaves to the student
(each stub calls speedlabs::not_implemented with the function's name). They may be defined (given a
body) only in solutions/NN_*/ and in that stub file. A definition anywhere else
(common/, datasets/, an experiment, a later lab) would let the program run the reference instead of the
student's code, so the check fails and names the file and line.
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
SOURCES = ("*.cpp", "*.h", "*.cu", "*.cuh")
# Every stub names its function: speedlabs::not_implemented("NN", "NN_folder", "GradScaler::update").
STUB_CALL = re.compile(r'not_implemented\(\s*"\d+"\s*,\s*"[^"]*"\s*,\s*"([\w:~]+)')


def exercise_functions(stub):
    """The functions the student writes: those whose stub body calls not_implemented, by their name."""
    return set(STUB_CALL.findall(stub.read_text()))


def definitions(text, name):
    """Lines where @p name ("f" or "Class::f") gets a body: "<type> [Class::]f(params) [const] {", not a call."""
    qualified = "::" in name
    prefix = r"" if qualified else r"[\w>*&]\s+(?:\w+::)*"
    pattern = re.compile(
        prefix + re.escape(name) + r"\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)"
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
    stubs = sorted(ROOT.glob("labs/[0-9][0-9]_*/exercise.cpp"))
    for stub in stubs:
        names = exercise_functions(stub)
        header = stub.with_name("exercise.h")
        for path in source_files():
            relative = path.relative_to(ROOT)
            if path in (stub, header):
                continue
            text = re.sub(r"//.*", "", path.read_text(errors="replace"))
            for name in names:
                for line in definitions(text, name):
                    problems.append(f"{relative}:{line}: defines {name}(), an exercise of {stub.parent.name}")
    for problem in problems:
        print(problem)
    print(f"{len(stubs)} labs' exercises checked: "
          + ("the answers live in solutions/ alone" if not problems else f"{len(problems)} answers outside solutions/"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
