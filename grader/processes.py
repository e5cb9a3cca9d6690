#!/usr/bin/env python3
"""What the grader's outside checks share about the programs they run (grader/outside_check.py,
grader/outside_timing.py, grader/outside_race.py, grader/run_tests.py): how a reference program lists its
exercises, the environment graded code is given, the processes under a sandbox and how they all end, and the last
words of a process that failed.
Standard library only.
"""
import os
import signal
import subprocess
import time
from pathlib import Path


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


def tree(root):
    """{pid: (state, CPU ticks)} of @p root and every process under it, parents first, from /proc/PID/stat: the
    state letter (R, S, T for stopped, Z, ...) and the user and system ticks it and its reaped children have used."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            stats[int(entry)] = (int(fields[1]), fields[0], sum(int(f) for f in fields[11:15]))  # ppid; state; ticks
    under = [root]  # parents before their children
    for pid in under:
        under += [child for child, (parent, _, _) in stats.items() if parent == pid and child not in under]
    return {pid: stats[pid][1:] for pid in under if pid in stats}


def kill_tree(root, spare_root=False, within_s=2.0):
    """SIGKILLs every process under @p root, again and again until none is left (a process may fork, or a parent
    die and hand its child to the subreaper, between one look and the next), then @p root itself unless
    @p spare_root (the caller, which ends on its own). @p root is killed last: while it lives, as the
    subreaper of its tree (grader/sandbox.py's supervisor), a process that lost its parent or left its session
    (bwrap's --new-session) is still under it, and found."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [pid for pid, (state, _) in tree(root).items() if pid != root and state not in "ZX"]
        if not alive:
            break
        for pid in reversed(alive):  # the deepest first
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.001)
    if not spare_root:
        try:
            os.kill(root, signal.SIGKILL)
        except ProcessLookupError:
            pass


def end(process):
    """Ends @p process (a Popen of a sandbox) and everything it started, stopped or not, and reaps it."""
    if process.poll() is None:
        kill_tree(process.pid)
    process.wait()
