#!/usr/bin/env python3
"""What the grader's outside checks share about the programs they run (grader/outside_check.py,
grader/outside_timing.py, grader/outside_race.py, grader/run_tests.py): how a reference program lists its
exercises, the environment graded code is given, and the last words of a process that failed.
Standard library only.
"""
import os
import subprocess


def listed(program, command="list"):
    """The lines @p program prints for @p command (list: the checked exercises; list-timed: the timed ones)."""
    done = subprocess.run([str(program), command], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{program} {command} failed: {done.stderr.strip()}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def graded_env():
    """This environment without the grade's own variables (its token): what graded code is given."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SPEEDLABS_GRADE")}


def last_said(log):
    """The last three lines a process wrote into @p log (a file), joined: what a failure message quotes."""
    log.seek(0)
    return " | ".join(line.strip() for line in log.read(4096).decode(errors="replace").splitlines()[-3:] if line.strip())
