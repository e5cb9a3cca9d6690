#!/usr/bin/env python3
"""Prints the project's sources whose compiled code differs under a CUDA libtorch, one path per line.

  cuda-sources.py BUILD_DIR     (only sources that BUILD_DIR/compile_commands.json compiles)

A source differs when it, or a project header it includes (directly or through other project headers),
tests SPEEDLABS_TORCH_HAS_CUDA (or SPEEDLABS_NCCL, defined only with it, or SPEEDLABS_LAB12_CUDA_KERNEL) or includes a CUDA header
of libtorch (<c10/cuda/...>, <ATen/cuda/...>); every .cu file is listed too. Every other source compiles to the same code against either libtorch, and
the CPU build has already compiled it, so CI's CUDA compile check builds just these.
Standard library only.
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("common", "datasets", "labs", "solutions", "tests")
# SPEEDLABS_LAB12_CUDA_KERNEL: defined where nvcc builds lab 12's kernel, as in this check; a CPU build without nvcc
# never compiles the code that calls it.
MARKER = re.compile(r"SPEEDLABS_TORCH_HAS_CUDA|SPEEDLABS_NCCL|SPEEDLABS_LAB12_CUDA_KERNEL|#\s*include\s*<(c10|ATen)/cuda/")
INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')


def project_files():
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".cpp", ".h", ".cu", ".cuh"):
                yield path


def resolve(include, including_file):
    for base in (including_file.parent, ROOT):   # quoted includes: beside the file, then from the root
        candidate = (base / include).resolve()
        if candidate.is_file():
            return candidate
    return None


def cuda_dependent(files):
    texts = {path: path.read_text(errors="replace") for path in files}
    includes = {path: [r for r in (resolve(i, path) for i in INCLUDE.findall(text)) if r] for path, text in texts.items()}
    marked = {path for path, text in texts.items() if MARKER.search(text) or path.suffix in (".cu", ".cuh")}
    changed = True
    while changed:   # a file that includes a marked header is marked
        changed = False
        for path, deps in includes.items():
            if path not in marked and any(d in marked for d in deps):
                marked.add(path)
                changed = True
    return marked


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    commands = Path(sys.argv[1]) / "compile_commands.json"
    if not commands.is_file():
        sys.exit(f"cuda-sources: {commands} not found: configure the build first")
    compiled = {Path(entry["file"]).resolve() for entry in json.loads(commands.read_text())}
    files = [path.resolve() for path in project_files()]
    for path in sorted(cuda_dependent(files) & compiled):
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
