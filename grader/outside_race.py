#!/usr/bin/env python3
"""Speed exercises raced to a target outside the student's process (./lab grade; docs/grading.md, "Raced outside").

race_lab() (called by run_tests.py in ./lab grade): for each raced exercise the reference's checked_labNN lists
(tests/support/checked.h, Raced: NAME FULL ZERO TARGET SEGMENT_STEPS STEP_CAP), a race of two processes handed the
same fresh seed: the student's checked_labNN training with the exercise and the reference's training with the
best (the lab's baseline), each in a sandbox of its own (grader/sandbox.py) on the same one CPU. One runs
at a time: the other's whole sandbox is stopped (SIGSTOP to every process in it, so no helper works on while it
waits). A side runs one segment (SEGMENT_STEPS steps; the first also sets the trainer up), writes its weights
and is stopped again; its time is this grader's clock over its segments, each to the moment it is stopped, plus the
CPU time its sandbox used before it said "ready" (the data are there before the seed: a trainer that trained
ahead of its "ready" on the tokens as they are, then only learnt the relabelling, would otherwise race untimed). While both are stopped, the reference's
judge (checked_labNN judge-raced, outside any sandbox) gives the weights' loss on the task's held-out tokens, which
no racer is handed: at or under TARGET the side has reached the target; weights that cannot be judged, or a loss
still above the target after STEP_CAP steps, fail it. The order turns every round.

The score is the best's time to the target over the exercise's. Its scatter comes from the segments: per segment
of both, the score as if every segment of each side had taken that one's time. It decides under the rules of the
timed exercises (outside_timing.undecided_why, the load read while the best's segments ran), else one more race,
then it is undecided.
A student's process whose CPU time runs well past its wall time in most segments (it widened its own CPU
affinity) scores nothing. The verdict goes to RUN_DIR/timed/LabNN_<name>, written here, never by graded code.
Standard library only.
"""
import math
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # noqa: E402
import outside_timing  # noqa: E402
import sandbox  # noqa: E402

ATTEMPTS = 2  # races before the verdict is undecided: a race takes about a minute on one CPU
MIN_SEGMENTS = 3  # segments both sides ran that give the scatter's quartiles
STOPPED_CPU_SLACK = 0.05  # CPU seconds a stopped sandbox may show between two looks: a few clock ticks of rounding


@dataclass
class Spec:
    name: str
    full: float
    zero: float
    target: float
    segment_steps: int
    step_cap: int


def listed(program):
    """A Spec of each raced exercise @p program lists."""
    rows = [line.split() for line in processes.listed(program, "list-raced")]
    return [Spec(name, float(full), float(zero), float(target), int(steps), int(cap))
            for name, full, zero, target, steps, cap in rows]


def signal_tree(root, number):
    for pid in processes.tree(root):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass


def thread_states(pid):
    """The state letter of every thread of process @p pid (/proc/PID/task/*/stat); none once it is gone."""
    states = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        states.append(text[text.rindex(")") + 2])
    return states


def stop_tree(root, deadline):
    """Stops @p root and every process under it, a process forked on the way included: done when one look finds
    every thread of every one of them stopped (or ended). A process's own state is its first thread's: a process
    whose first thread has exited reads Z while its other threads run on, so each thread is looked at."""
    while time.monotonic() < deadline:
        running = [pid for pid in processes.tree(root) if any(t not in "TtZX" for t in thread_states(pid))]
        if not running:
            return
        for pid in running:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        time.sleep(0.001)


@dataclass
class Segment:
    wall: float  # seconds on this grader's clock, from the go until the side is stopped again
    cpu: float  # CPU seconds of every process of the side's sandbox in it
    others: float  # other programs' cores on the race's CPU in it


class Racer:
    """One side's process, sandboxed on CPU @p cpu, stopped whenever it is not its turn."""

    def __init__(self, program, name, side, cpu, hidden, deadline):
        program = Path(program).resolve()
        self.side, self.cpu, self.deadline = side, cpu, deadline
        self.segments, self.losses = [], []
        self.setup = 0.0  # CPU seconds of its sandbox before it said "ready": part of its time
        self.cpu_at_stop = 0.0  # its sandbox's CPU seconds when it was last stopped: stopped, it uses none
        self.done, self.reached, self.why, self.failed_at = False, False, "", math.inf
        self.read_end, write_end = os.pipe()
        environment = processes.graded_env()
        environment["OMP_NUM_THREADS"] = "1"  # one CPU for each side: libtorch's pool the same size for both
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            sandbox.wrap([str(program), "race", name, side, str(write_end)], hidden=hidden), cwd=program.parent,
            env=environment, stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT, pass_fds=[write_end],
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        os.close(write_end)

    def ready(self, seed):
        """Waits for "ready", stops the process and hands it the seed (read when it next runs); "" or why not."""
        said, _, why = outside_timing.read_until(self.read_end, self.deadline, 64, lambda data: data.endswith(b"\n"))
        stop_tree(self.process.pid, self.deadline)
        self.setup = self.cpu_at_stop = outside_timing.tree_cpu(self.process.pid)
        if not why and said != b"ready\n":
            why = "it did not say it was ready"
        return self.failed(why) or self.tell(f"{seed}\n")

    def tell(self, line):
        try:
            self.process.stdin.write(line.encode())
            self.process.stdin.flush()
        except OSError as error:
            return self.failed(f"the process went away ({error})")
        return ""

    def segment(self):
        """Lets the process run one segment and stops it again: its weights (bytes), or None when it failed."""
        cpu_before = outside_timing.tree_cpu(self.process.pid)
        if cpu_before - self.cpu_at_stop > STOPPED_CPU_SLACK:
            self.failed(f"its sandbox used {cpu_before - self.cpu_at_stop:.2f} s of CPU while it was stopped "
                        f"(a process or thread of it escaped the stop)")
            return None
        busy_before = outside_timing.cpu_busy({self.cpu})
        started = time.monotonic()
        signal_tree(self.process.pid, signal.SIGCONT)
        weights, _, why = outside_timing.read_until(self.read_end, self.deadline, outside_timing.MAX_OUTPUT,
                                                    outside_timing.outputs_complete)
        stop_tree(self.process.pid, self.deadline)
        wall = time.monotonic() - started  # to the stop, not the last byte: what runs on until then counts too
        self.cpu_at_stop = outside_timing.tree_cpu(self.process.pid)
        cpu = self.cpu_at_stop - cpu_before
        others = max(0.0, outside_timing.cpu_busy({self.cpu}) - busy_before - cpu) / max(wall, 1e-9)
        if not why and not outside_timing.outputs_complete(weights):
            why = "it ended before it wrote its weights"
        if why:
            self.failed(why)
            return None
        self.segments.append(Segment(wall, cpu, others))
        return weights

    def failed(self, why):
        if why and not self.why:
            self.why, self.done, self.failed_at = why + self.said(), True, time.monotonic()
        return why

    def said(self):
        if self.process.poll() is None:
            return ""
        code, said = self.process.returncode, processes.last_said(self.log)
        return f" (exit code {code}" + (f": {said})" if said else ")")

    def seconds(self):
        return self.setup + sum(s.wall for s in self.segments)

    def end(self):
        """Kills the side's sandbox (its first process: every process in it ends), stopped or not."""
        processes.end(self.process)
        os.close(self.read_end)
        self.log.close()


class Judge:
    """The reference's judge-raced process: the loss of a side's weights on the task's held-out tokens."""

    def __init__(self, reference, name, seed):
        self.folder = tempfile.TemporaryDirectory()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([str(reference), "judge-raced", name, str(seed)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True)

    def loss(self, weights):
        """(the loss, "" or why it is not a number)."""
        path = Path(self.folder.name) / "weights"
        path.write_bytes(weights)
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"the reference's judge-raced ended: {processes.last_said(self.log)}")
        number, _, why = line.partition(" ")
        return float(number), why

    def end(self):
        self.process.kill()
        self.process.wait()
        self.folder.cleanup()
        self.log.close()


def race(student, reference, spec, budget, hidden, cpu):
    """One race: (the exercise's Racer, the best's Racer, "" or "failed|error why")."""
    deadline = time.monotonic() + budget
    seed = secrets.randbits(62)
    # The reference's processes see what the student's may not (its own build tree): they are not graded code.
    sides = {"exercise": Racer(student, spec.name, "exercise", cpu, hidden, deadline),
             "best": Racer(reference, spec.name, "best", cpu, (), deadline)}
    judge = Judge(reference, spec.name, seed)
    try:
        for racer in sides.values():
            racer.ready(seed)
        for number in range(spec.step_cap // spec.segment_steps + 1):
            order = ("exercise", "best") if number % 2 == 0 else ("best", "exercise")
            for racer in (sides[side] for side in order if not sides[side].done):
                weights = racer.segment()
                if weights is not None:
                    judged(racer, judge, weights, spec)
            if all(racer.done for racer in sides.values()) or any(racer.why for racer in sides.values()):
                break  # a side that failed ends the race: there is no score to finish it for
    finally:
        for racer in sides.values():
            racer.end()
        judge.end()
    exercise, best = sides["exercise"], sides["best"]
    # The side that failed first is the cause: a trainer that hangs to the race's deadline leaves the baseline
    # none of its time, and the baseline's failure then is the trainer's doing.
    if best.why and best.failed_at < exercise.failed_at:
        return exercise, best, f"error the reference's baseline: {best.why}"
    if exercise.why:
        return exercise, best, f"failed your trainer in the race: {exercise.why}"
    return exercise, best, ""


def judged(racer, judge, weights, spec):
    """Judges a segment's weights: the side reached the target, failed, or goes on."""
    loss, why = judge.loss(weights)
    racer.losses.append(loss)
    steps = len(racer.segments) * spec.segment_steps
    if not math.isfinite(loss):
        racer.failed(f"its weights after {steps} steps cannot be judged: {why or 'a weight is not finite'}")
    elif loss <= spec.target:
        racer.done = racer.reached = True
    elif steps >= spec.step_cap:
        racer.failed(f"the judged loss is {loss:.3f} after the step cap of {spec.step_cap} steps, above the target "
                     f"{spec.target:.2f}")
    else:
        racer.tell("go\n")


def fractions_of(exercise, best):
    """Per segment both ran, the score as if every segment of each side had taken that one's time."""
    count = min(len(exercise.segments), len(best.segments))
    return [best.segments[j].wall * len(best.segments) / (exercise.segments[j].wall * len(exercise.segments))
            for j in range(count)]


def race_exercise(student, reference, spec, budget, hidden, attempts=ATTEMPTS):
    """The verdict line for raced exercise @p spec, raced up to @p attempts times while the races cannot decide:
    "score S how", "undecided why", "failed why" or "error why"."""
    cpu = max(os.sched_getaffinity(0))
    why = ""
    for attempt in range(1, attempts + 1):
        exercise, best, failed = race(student, reference, spec, budget, hidden, cpu)
        if failed:
            return failed
        escapes = sum(s.cpu - s.wall > 0.2 * s.wall + 0.05 for s in exercise.segments)
        if escapes * 2 > len(exercise.segments):
            return ("failed your racing process used more than the one CPU it was given in most segments (its CPU "
                    "time well over its wall time): the race is run on one CPU a side")
        score = best.seconds() / exercise.seconds()
        fractions = fractions_of(exercise, best)
        load = statistics.median(s.others for s in best.segments)
        how = (f"{score:.2f}: the baseline's {best.seconds():.1f} s to the target over your "
               f"{exercise.seconds():.1f} s, each with its CPU time before it was ready "
               f"({len(best.segments) * spec.segment_steps} and "
               f"{len(exercise.segments) * spec.segment_steps} steps), the two raced by turns on one CPU; full "
               f"points from {spec.full:.2f}, none below {spec.zero:.2f}")
        if len(fractions) >= MIN_SEGMENTS:
            q1, median, q3 = outside_timing.quartiles(fractions)
            why = outside_timing.undecided_why(q1, q3, (q3 - q1) / median, load, spec.full, spec.zero, "segments")
        else:  # too few segments for quartiles: decided only when every one, and the score, earns the same share
            q1, q3 = min(fractions + [score]), max(fractions + [score])
            why = outside_timing.undecided_why(q1, q3, math.inf, load, spec.full, spec.zero, "segments")
            if why and load <= outside_timing.MAX_LOAD:
                why = (f"only {len(fractions)} segments of both sides, too few to judge the scatter, and they do not "
                       "all earn the same share")
        if not why:
            share = 0.0 if not score > spec.zero else min(1.0, (score - spec.zero) / (spec.full - spec.zero))
            return f"score {share:.3f} ({how}; segment quartiles {q1:.2f}-{q3:.2f})"
        print(f"  {spec.name}: race {attempt} of {attempts} could not decide: {why}", file=sys.stderr)
    return f"undecided {why}"


def race_lab(student, reference, lab, run_dir, budgets, hidden):
    """Races every raced exercise of lab @p lab outside: writes RUN_DIR/timed/LabNN_<name>; prints progress."""
    outside_timing.write_verdicts(student, lab, run_dir, "raced outside", [
        (spec.name, lambda spec=spec: race_exercise(student, reference, spec, budgets.get(spec.name, 600), hidden))
        for spec in listed(reference)])


def selftest(program):
    """The reference's trainer raced against the baseline (a score, or undecided, said), and the judge's answer on
    weights that are not a trainer's."""
    problems = []
    for spec in listed(program):
        try:
            verdict = race_exercise(program, program, spec, 600, (), attempts=1)  # the plumbing: one race
        except RuntimeError as error:  # the judge ended: its message says why (the data missing)
            verdict = f"error {error}"
        print(f"{spec.name}: {verdict}")
        if not verdict.startswith(("score", "undecided")):
            problems.append(f"{spec.name}: the reference raced against the baseline: {verdict}")
        judge = Judge(program, spec.name, secrets.randbits(62))
        try:
            for content, what in ((b"", "an empty file"), (b"speedlabs-checked 1\nend\n", "no weights"),
                                  (b"speedlabs-checked 1\nx Float 1 4\n\0\0\0\0", "a file cut short")):
                loss, why = judge.loss(content)
                print(f"{spec.name}, the judge on {what}: {loss} {why}")
                if math.isfinite(loss) or not why:
                    problems.append(f"{spec.name}: the judge gave {loss} ({why}) for {what}")
        except RuntimeError as error:
            problems.append(f"{spec.name}: {error}")
        finally:
            judge.end()
    for problem in problems:
        print("FAIL " + problem)
    return 1 if problems else 0
