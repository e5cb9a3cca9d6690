#!/usr/bin/env python3
"""Says, before a build, what it will compile and about how long that takes on this machine.

usage: build_estimate.py BUILD_DIR [TARGET...]

Asks ninja which commands the build would run (a dry run: `ninja -n -v`), and looks each output up in the
build folder's own record of earlier builds (.ninja_log: when each step started and ended). A step never
built here is counted at a stated estimate, the typical step of this project on a 2-core machine. Prints one
line, or nothing when the build is up to date. Never fails the build: any error prints nothing.
"""
import os
import re
import subprocess
import sys

# A compile of one of this project's (unity) sources takes about this long on one core of the 2-core AMD EPYC
# development VM with a cold compiler cache (lab 01's build: 12 compiles and the two precompiled headers in 75 s
# on both cores; the other labs' programs: 48 compiles and 13 links in 292 s); a link a few seconds. Used only
# for steps never built here.
FIRST_COMPILE_S = 12.0
FIRST_LINK_S = 2.0


def ninja_jobs(cores):
    """How many steps ninja runs at once when not told (its own guess: 2 on one core, 3 on two, else cores + 2)."""
    return 2 if cores <= 1 else 3 if cores == 2 else cores + 2


def recorded_durations(build_dir):
    """{output path: seconds} of the last time each output was built, from .ninja_log."""
    durations = {}
    try:
        with open(os.path.join(build_dir, ".ninja_log"), encoding="utf-8") as log:
            for line in log:
                fields = line.rstrip("\n").split("\t")
                if len(fields) >= 4 and fields[0].isdigit():
                    durations[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    except OSError:
        pass
    return durations


def planned_steps(build_dir, targets):
    """The output of each command the build would run, in order (None for a step without -o); None when CMake
    must re-run first."""
    run = subprocess.run(["ninja", "-C", build_dir, "-n", "-v", *targets], capture_output=True, text=True,
                         check=True)
    outputs = []
    for line in run.stdout.splitlines():
        if not re.match(r"^\[\d+/\d+\] ", line):
            continue
        if "Re-running CMake" in line:
            return None  # the build files change first: what follows is not known yet
        match = re.search(r"\s-o\s+(\S+)", line)
        outputs.append(match.group(1) if match else None)
    return outputs


def estimate(build_dir, targets):
    """(steps, seconds, how many came from the record) for the planned build; None when CMake re-runs first."""
    recorded = recorded_durations(build_dir)
    steps = planned_steps(build_dir, targets)
    if steps is None:
        return None
    return len(steps), seconds(steps, recorded, os.cpu_count() or 1), sum(output in recorded for output in steps)


def seconds(steps, recorded, cores):
    """The build's wall time on @p cores: a recorded step took its time with ninja's other jobs beside it, so
    those times add up to about ninja_jobs times the wall time; a step never built here counts one core's time."""
    known = [recorded[output] for output in steps if output in recorded]
    fresh = [FIRST_COMPILE_S if output and output.endswith(".o") else FIRST_LINK_S
             for output in steps if output not in recorded]
    return (sum(known) / max(1, min(ninja_jobs(cores), len(known))) +
            sum(fresh) / max(1, min(cores, len(fresh))))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build_dir, targets = argv[1], argv[2:]
    what = " ".join(targets) if targets else "everything"
    try:
        planned = estimate(build_dir, targets)
    except (OSError, subprocess.CalledProcessError):
        return 0
    if planned is None:
        print(f"building {what}: CMake runs again first (a CMakeLists.txt changed), then the steps it finds")
        return 0
    steps, seconds, known = planned
    if steps == 0:
        return 0
    source = ("from this build folder's last build" if known == steps else
              f"{known} of them from this folder's last build, the rest at about {FIRST_COMPILE_S:.0f} s a compile"
              if known else f"none built here before: about {FIRST_COMPILE_S:.0f} s a compile per core, less with a warm ccache")
    minutes = seconds / 60
    took = f"about {minutes:.0f} min" if minutes >= 1.5 else f"about {max(seconds, 1):.0f} s"
    print(f"building {what}: {steps} step(s), {took} on this machine ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
