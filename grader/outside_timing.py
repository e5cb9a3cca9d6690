#!/usr/bin/env python3
"""Speed exercises timed outside the student's process (./lab grade; docs/grading.md, "Speed timed outside").

selftest(PROGRAM), a CTest on the reference build (grader/selftest.py timed PROGRAM): its own exercise
timed against its best, a score decided (or undecided, said), and a changed timed output caught.

time_lab() (called by run_tests.py in ./lab grade): for each timed exercise the reference's checked_labNN lists
(tests/support/checked.h, Timed: NAME CALLS FULL ZERO CPUS), rounds of three processes, their order turning from
round to round: the student's checked_labNN making the exercise's timed calls, the reference's making the best's,
and the reference's only drawing the inputs. Each runs in a sandbox of its own (grader/sandbox.py: when it
ends, every process it started has ended) on the same CPUS CPUs (one, or one per worker of a job), says "ready",
and is then handed the round's fresh seed; its time is this grader's clock from that moment to the last byte of
its outputs. A side's time is its process's
time less the inputs-only process's of the same round, and the round's speed fraction is the best's time over
the exercise's. Every output of the student's timed calls is compared with the best's process's on the same inputs
by the reference's `check-timed`: one that differs scores nothing. Other programs' load is read while the reference's
two processes run (these CPUs' busy time in /proc/stat less what every process of their sandboxes used in the same
window); the student's process runs alone in its sandbox and nothing of it is left to slow the others. The measurement decides when the load stayed under half a core and the fractions'
spread (interquartile range over median) under 25%, the rules of the in-process speed tests, or when the whole
interquartile range earns the same share (all of the points, or none) even widened by what the load could have
done to one side alone (undecided_why); it is taken again twice before it is called undecided. An attempt has
9 timed rounds after a warm-up one, or stops after 5 when every one of those, widened by the busiest round's load,
already earns all of the points or none (clear_share). The verdict goes to RUN_DIR/timed/LabNN_<name>: "score S <how>",
"undecided <why>" or "failed <why>", written here, never by graded code. Standard library only.
"""
import math
import os
import secrets
import select
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # noqa: E402
import sandbox  # noqa: E402

MAX_OUTPUT = 64 << 20  # bytes of outputs taken from the student's process
ROUNDS, WARMUP_ROUNDS, ATTEMPTS = 9, 1, 3
CLEAR_ROUNDS = 5  # an attempt may stop after this many timed rounds when every one of them earns the same share
MAX_SPREAD, MAX_LOAD = 0.25, 0.5  # interquartile range over median; other programs' cores
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    wall: float = 0.0  # seconds from the seed to the last byte of the outputs
    cpu: float = 0.0  # CPU seconds of every process of its sandbox from the seed to its end (os.wait4: all of them)
    window_cpu: float = 0.0  # of which in the window, as /proc read at its last byte: its share of `busy`
    busy: float = 0.0  # its CPUs' busy seconds in that window, every program's
    outputs: bytes = b""
    seed: int = 0  # the inputs' seed, handed over when the timing started
    why: str = ""  # why it failed, or ""


def listed(program):
    """(name, calls, full, zero, cpus) of each timed exercise @p program lists."""
    rows = [line.split() for line in processes.listed(program, "list-timed")]
    return [(name, int(calls), float(full), float(zero), int(cpus)) for name, calls, full, zero, cpus in rows]


def cpu_busy(cpus):
    """Seconds the CPUs numbered @p cpus have been busy since boot, summed, every program's (/proc/stat: all but
    idle and iowait)."""
    busy, names = 0.0, {f"cpu{cpu}" for cpu in cpus}
    with open("/proc/stat") as handle:
        for line in handle:
            fields = line.split()
            if fields[0] in names:
                ticks = [int(f) for f in fields[1:9]]
                busy += (sum(ticks) - ticks[3] - ticks[4]) / TICK
                names.remove(fields[0])
    if names:
        raise RuntimeError(f"no {' '.join(sorted(names))} in /proc/stat")
    return busy


def tree_cpu(root):
    """CPU seconds used so far by @p root and every process under it (their reaped children included); each is
    counted down to its clock tick, so this is at most what they used."""
    return sum(ticks for _, ticks in processes.tree(root).values()) / TICK


def read_until(fd, deadline, limit, done):
    """Bytes from @p fd until done(bytes so far), its end, the deadline or @p limit bytes; (data, the time the last
    byte came, why it stopped short or "")."""
    data, last = bytearray(), time.monotonic()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(data), last, "it did not finish within its budget"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        last = time.monotonic()
        if not chunk:
            return bytes(data), last, ""
        data.extend(chunk)
        if len(data) > limit:
            return bytes(data), last, f"it wrote more than {limit >> 20} MiB of outputs"
        if done(data):
            return bytes(data), last, ""


ELEMENT_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Bool": 1}


def outputs_complete(data):
    """Whether @p data is a whole outputs file (tests/support/checked_main.cpp's format: a header line, per output
    "NAME DTYPE NDIM SIZE..." and its bytes, then "end"): the clock stops at its last byte, not when the sandbox
    has ended (its first processes hold the pipe open until then). Malformed data is left to the check."""
    at = data.find(b"\n") + 1
    while 0 < at <= len(data):
        end = data.find(b"\n", at)
        if end < 0:
            return False
        words = bytes(data[at:end]).split()
        if words == [b"end"]:
            return end + 1 == len(data)
        try:
            count = 1
            for size in words[3:]:
                count *= int(size)
            at = end + 1 + count * ELEMENT_BYTES[words[1].decode()]
        except (IndexError, KeyError, ValueError, UnicodeDecodeError):
            return True  # not the format: stop here, and the check says what is wrong
    return False


def time_one(program, name, side, cpus, budget, hidden, seed):
    """One timed process of @p side (exercise, best or inputs), sandboxed on the CPUs numbered @p cpus, handed @p seed
    when its clock starts: a Run."""
    program = Path(program).resolve()
    read_end, write_end = os.pipe()
    command = sandbox.wrap([str(program), "time", name, side, str(write_end)], hidden=hidden)
    environment = processes.graded_env()
    environment["OMP_NUM_THREADS"] = "1"  # one thread a process: libtorch's pool the same size everywhere
    run, deadline = Run(seed=seed), time.monotonic() + budget
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=program.parent, env=environment, stdin=subprocess.PIPE,
                                   stdout=log, stderr=subprocess.STDOUT, pass_fds=[write_end],
                                   preexec_fn=lambda: os.sched_setaffinity(0, set(cpus)))
        os.close(write_end)
        try:
            said, _, why = read_until(read_end, deadline, 64, lambda data: data.endswith(b"\n"))
            if not why and said != b"ready\n":
                why = "it did not say it was ready"
            if not why:
                cpu_before, busy_before = tree_cpu(process.pid), cpu_busy(cpus)
                started = time.monotonic()
                process.stdin.write(f"{run.seed}\n".encode())  # the inputs exist from now on
                process.stdin.close()
                run.outputs, ended, why = read_until(read_end, deadline, MAX_OUTPUT, outputs_complete)
                run.wall, run.busy = ended - started, cpu_busy(cpus) - busy_before
                run.window_cpu = tree_cpu(process.pid) - cpu_before
        except (BrokenPipeError, OSError) as error:
            why = why or f"the process went away ({error})"
        finally:
            os.close(read_end)
        code, usage = wait_until(process, deadline)
        if code is None:
            why = why or "it did not finish within its budget"
        elif code != 0:
            said = processes.last_said(log)
            why = why or f"it ended with exit code {code}" + (f": {said}" if said else "")
        if not why:
            run.cpu = usage.ru_utime + usage.ru_stime - cpu_before
    run.why = why
    return run


def wait_until(process, deadline):
    """(exit code or None when killed at the deadline, its sandbox's resource usage, children included)."""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage
        if time.monotonic() > deadline:
            processes.kill_tree(process.pid)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            return None, usage
        time.sleep(0.005)


def check(reference, name, run, best=None):
    """"" when every timed output of @p run matches the best's on its inputs (@p best's outputs, a Run of the
    reference's best on the same seed; None: the reference computes them again), else the first difference; raises
    RuntimeError when the reference's check cannot run."""
    with tempfile.NamedTemporaryFile() as outputs, tempfile.NamedTemporaryFile() as best_outputs:
        outputs.write(run.outputs)
        outputs.flush()
        command = [str(reference), "check-timed", name, str(run.seed), outputs.name]
        if best is not None:
            best_outputs.write(best.outputs)
            best_outputs.flush()
            command.append(best_outputs.name)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"the reference's check-timed failed: {done.stderr.strip()}")
    return "" if done.returncode == 0 else (done.stdout.strip().splitlines() or ["?"])[-1]


def escaped(mine, inputs, cpus):
    """Whether the exercise's process used clearly more than the @p cpus CPUs it was given (it widened its own CPU
    affinity to run helpers beside the timed calls): its CPU beyond @p cpus times its wall time, against the
    inputs-only process's (the same teardown after the last byte, the same tick rounding), with room for a fifth of
    what it could use."""
    return mine.cpu - cpus * mine.wall > (inputs.cpu - cpus * inputs.wall) + 0.2 * cpus * mine.wall + 0.05


def measure(student, reference, name, budget, hidden, cpus, rounds=ROUNDS, clear=lambda fractions, loads: False):
    """One attempt: (the rounds' speed fractions, the rounds' other load in cores, "" or "failed|error why"). It
    stops before @p rounds once clear(fractions, loads) says the timed rounds so far already decide."""
    sides = [("exercise", student), ("best", reference), ("inputs", reference)]
    fractions, loads, escapes, done = [], [], 0, 0
    for number in range(WARMUP_ROUNDS + rounds):
        order = sides[number % 3:] + sides[:number % 3]
        seed = secrets.randbits(62)  # every side of the round on the same inputs: the best's outputs are the answer
        # The reference's processes see what the student's may not (its own build tree): they are not graded code.
        runs = {side: time_one(program, name, side, cpus, budget, hidden if side == "exercise" else (), seed)
                for side, program in order}
        if runs["exercise"].why:
            return [], [], f"failed your timed process: {runs['exercise'].why}"
        for side in ("best", "inputs"):
            if runs[side].why:
                return [], [], f"error the reference's {side} process: {runs[side].why}"
        wrong = check(reference, name, runs["exercise"], runs["best"])
        if wrong:
            return [], [], f"failed a timed result is wrong, so its speed earns nothing: {wrong}"
        escapes += escaped(runs["exercise"], runs["inputs"], len(cpus))
        done += 1
        if number < WARMUP_ROUNDS:
            continue
        inputs = runs["inputs"].wall
        mine, best = runs["exercise"].wall - inputs, runs["best"].wall - inputs
        fractions.append(best / mine if mine > 0 else float("inf"))
        loads.append(max(max(0.0, r.busy - r.window_cpu) / r.wall for r in (runs["best"], runs["inputs"])))
        if clear(fractions, loads):
            break
    if escapes * 2 > done:
        return [], [], (f"failed your timed process used more than the {cpu_words(len(cpus))} it was given in most "
                        f"rounds (its CPU time well over its wall time): speed is compared on {cpu_words(len(cpus))} "
                        "a side")
    return fractions, loads, ""


def undecided_why(q1, q3, spread, load, full, zero, samples, cpus=1):
    """"" when a measurement decides, else why not. It decides on quiet CPUs (other programs under MAX_LOAD of a core)
    with a spread under MAX_SPREAD, or, however busy or scattered, when its whole interquartile range earns the same
    share (all of the points or none) even had the other programs slowed one side alone: a side on @p cpus CPUs
    left all but @p load cores of them runs up to cpus / (cpus - load) times slower, so the range is widened by that
    much first."""
    if load <= MAX_LOAD and spread <= MAX_SPREAD:
        return ""
    slack = load_slack(load, cpus)
    if same_share(q1, q3, slack, full, zero):
        return ""
    if load > MAX_LOAD:
        return (f"other programs used {load:.2f} of a core (at most {MAX_LOAD} decides, unless even a side slowed "
                f"{slack:.1f} times by them alone would earn the same)")
    return f"the {samples} scattered {spread:.0%} (interquartile range over median; at most {MAX_SPREAD:.0%} decides)"


def clear_share(fractions, loads, full, zero, cpus):
    """Whether the timed rounds so far decide the share beyond doubt: at least CLEAR_ROUNDS of them, and every one,
    not only the middle half, earning all of the points or none even had the busiest round's other programs slowed
    one side alone (undecided_why's widening). A result near a threshold runs every round."""
    if len(fractions) < CLEAR_ROUNDS:
        return False
    return same_share(min(fractions), max(fractions), load_slack(max(loads), cpus), full, zero)


def load_slack(load, cpus):
    """How many times slower a side on @p cpus CPUs can run when other programs take @p load cores of them: it is
    left all but that many (infinite when they take them all)."""
    return cpus / (cpus - load) if load < cpus else math.inf


def same_share(low, high, slack, full, zero):
    """Whether every value from @p low to @p high earns the same share, all of the points or none, even each
    moved @p slack times towards the other threshold."""
    return high * slack <= zero or low / slack >= full


def quartiles(values):
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def cpu_words(count):
    return "one CPU" if count == 1 else f"{count} CPUs"


def time_exercise(student, reference, name, full, zero, budget, hidden, cpus=1, rounds=ROUNDS, attempts=ATTEMPTS):
    """The verdict line for timed exercise @p name, timed on @p cpus CPUs a side in @p rounds rounds, up to
    @p attempts times while they cannot decide: "score S how", "undecided why", "failed why" or "error why"."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < cpus:
        return f"undecided it is timed on {cpu_words(cpus)} a side, and this grader has {len(available)}"
    why = ""
    for attempt in range(1, attempts + 1):
        fractions, loads, failed = measure(student, reference, name, budget, hidden, available[-cpus:], rounds,
                                           lambda f, l: clear_share(f, l, full, zero, cpus))
        if failed:
            return failed
        q1, median, q3 = quartiles(fractions)
        load = statistics.median(loads)
        spread = (q3 - q1) / median if median > 0 and median != float("inf") else 0.0
        why = undecided_why(q1, q3, spread, load, full, zero, "rounds", cpus)
        if not why:
            share = 0.0 if not median > zero else min(1.0, (median - zero) / (full - zero))
            return (f"score {share:.3f} ({median:.2f} of the best's speed, quartiles {q1:.2f}-{q3:.2f}, {len(fractions)} "
                    f"rounds, timed outside your process on {cpu_words(cpus)}; full points from {full:.2f}, none "
                    f"below {zero:.2f})")
        print(f"  {name}: attempt {attempt} of {attempts} could not decide: {why}", file=sys.stderr)
    return f"undecided {why}"


def write_verdicts(student, lab, run_dir, how, measures):
    """For each (name, measure) of @p measures, RUN_DIR/timed/LabNN_<name>: measure()'s verdict line, or why there
    is none, then a line @p how ("timed outside", "raced outside"); progress on stderr."""
    folder = Path(run_dir) / "timed"
    folder.mkdir(parents=True, exist_ok=True)
    for name, measure in measures:
        started = time.monotonic()
        try:
            verdict = measure() if Path(student).exists() else "failed its checked program was not built"
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as error:
            verdict = f"error {error}"
        (folder / f"Lab{lab}_{name}").write_text(f"{verdict}\n{how}\n")
        print(f"  Lab{lab}_{name}, {how}: {verdict.split(' (')[0]} ({time.monotonic() - started:.0f} s)", file=sys.stderr)


def time_lab(student, reference, lab, run_dir, budgets, hidden):
    """Times every timed exercise of lab @p lab outside: writes RUN_DIR/timed/LabNN_<name>; prints progress."""
    write_verdicts(student, lab, run_dir, "timed outside", [
        (name, lambda name=name, full=full, zero=zero, cpus=cpus:
         time_exercise(student, reference, name, full, zero, budgets.get(name, 600), hidden, cpus))
        for name, _, full, zero, cpus in listed(reference)])


def selftest(program):
    """The reference's own exercise timed against its best: its outputs pass, a changed one does not, and the
    rounds give a fraction for every round."""
    problems = []
    for name, _, full, zero, cpus in listed(program):
        run = time_one(program, name, "exercise", sorted(os.sched_getaffinity(0))[-cpus:], 300, (), secrets.randbits(62))
        if run.why:
            problems.append(f"{name}: the timed process failed: {run.why}")
            continue
        wrong = check(program, name, run)  # against the best's outputs computed again
        if wrong:
            problems.append(f"{name}: its own timed outputs do not pass: {wrong}")
        changed = bytearray(run.outputs)
        changed[-5] ^= 0x40  # the last output's highest byte (little-endian), before "end\n"
        if not check(program, name, Run(outputs=bytes(changed), seed=run.seed), run):  # against outputs handed over
            problems.append(f"{name}: a changed timed output passed its check")
        # The plumbing, not a grade: three rounds, one attempt (a grade takes up to 9 rounds, 5 when every one of
        # them earns the same share, up to 3 attempts). The reference against itself may not decide on a busy
        # machine either way.
        verdict = time_exercise(program, program, name, full, zero, 300, (), cpus, rounds=3, attempts=1)
        print(f"{name}: {verdict}")
        if not verdict.startswith(("score", "undecided")):
            problems.append(f"{name}: the reference timed against its best: {verdict}")
    for problem in problems:
        print("FAIL " + problem)
    return 1 if problems else 0

