#!/usr/bin/env python3
"""The checks of a lab's questions against its kept runs, pivot_problems and size_problems (see
prediction_checks.py for what each checks), with the tables size_problems reads (SIZED, ON_DEVICE).
Standard library only.
"""
import math
import re

import predictions
from prediction_checks import ROOT, field_value, kept_run, solutions

# ------------------------------------------------------------------------------------------- the tables

# The questions whose answer depends on the run's size, by lab: name -> (the knobs that move it, why), a knob
# being a flag ("--steps", checked against the kept run's --help) or a setting of knobs() that --quick changes and
# --help does not show ("seq_lengths"). The kept runs and the student's check run are --quick runs and the default
# run is larger; the labs cannot be run here, so the list was read from each lab's knobs()
# (labs/NN_topic/experiment.h) and --help (the kept runs' "flags": "default X; --quick: Y"). A question not listed
# reads a quantity no knob changes (a format's value, the data's tokens, the tiny model's parameters, which every
# run of labs 08, 10 and 11 trains, lab 12's fixed 8192 x 3072 input, lab 01's 4,096 floats, lab 14's schedules of
# 2 stages), or a timed ratio whose side or band the knobs do not move (lab 01's and 04's ratios, lab 07's ridge and
# MFU within 5x and 3x, lab 10's scaling above or below 1.2x with a larger batch, lab 14's bubble within 1.5x).
SIZED = {
    "03": {"bf16_weights_losses.bf16_nearest.vs_fp32": (
        ("--steps",), "the bf16 weights train --steps Adam steps (60 under --quick, 200 by default), and the "
                      "ratio of the final losses moves with the steps by more than the tolerance")},
    "05": {"loss_at_step_0": (
        ("--config",), "--quick trains the tiny model, the default GPT-2 small: their step-0 losses differ by more "
                       "than the tolerance"),
           "modes_vs_fp32.tf32": (
        ("--precision",), "only --quick (--precision all) trains a tf32 mode beside fp32; the default trains fp32 "
                          "alone")},
    "06": {"initial_losses_2x32.tf32": (
        ("--shapes", "--config"), "the 2x32 rung is --quick's shape (the default: 4x128 on a CPU) of the tiny "
                                  "model (the default: GPT-2 small)"),
           "python_eager_vs_cpp_fp32_2x32": (
        ("--shapes", "--config"), "the 2x32 rung is --quick's shape of the tiny model"),
           "rung_fp32_2x32.losses.0": (
        ("--shapes", "--config"), "the 2x32 rung is --quick's; its model, tiny, starts at another loss than GPT-2 "
                                  "small")},
    "08": {"checkpointing_step_time_ratio.T16.ratio": (
        ("--seq",), "T=16 is half of --quick's T=32; the default measures T=128 and T=64")},
    "09": {"written_out_vs_tiled_memory_at_4096.ratio": (
        ("seq_lengths", "--q-tile", "--kv-tile"), "the largest T is 1024 under --quick (its seq_lengths setting) "
                                                  "with tiles of 64, 4096 by default with tiles of 256"),
           "written_out_vs_tiled_memory_at_4096.written_out_MiB": (
        ("seq_lengths",), "the largest T is 1024 under --quick (its seq_lengths setting), 4096 by default: the "
                          "T x T tensors grow 16x"),
           "tiled_vs_sdpa_time_at_1024.ratio": (
        ("--q-tile", "--kv-tile"), "tiles of 64 x 64 under --quick, 256 x 256 by default: the tile moves the "
                                   "tiled forward's time")},
    "12": {"peak_memory_vs_plain.sizes.0.logits_MiB": (
        ("--seq",), "the smallest size is B/4 x T rows: 2 x 64 = 128 under --quick, 2 x 256 = 512 by default")},
    "13": {"baseline_reaches_target.steps": (
        ("--target",), "the quick target is 2.4 nats; the default asks 1.88"),
           "python_peer_vs_baseline.ratio": (
        ("--target",), "the quick race stops at 2.4, the default at 1.88, after several times the steps")},
    "14": {"tp_bytes_sent_per_step.bytes": (
        ("--embd",), "each all-reduce sends B x T x C floats: C = 64 under --quick, 128 by default")},
}

# The questions whose answer depends on the device the run picks (--device auto picks a GPU where there is one):
# name -> why. Each must name the CPU, the kept runs' device. (This file ships to students: no why here may say an
# answer.)
ON_DEVICE = {
    "05": {"modes_vs_fp32.tf32": "TF32 is a mode of NVIDIA GPUs' tensor cores: the gap is the device's"},
    "06": {"initial_losses_2x32.tf32": "TF32 is a mode of NVIDIA GPUs' tensor cores: the gap is the device's"},
    "12": {"fused_vs_unfused_time.speedup": "how each side writes its output, and so the bytes it moves, differs "
                                            "between the CPU's code and a GPU's kernels"},
}

PIVOT_MARGIN = 0.10  # a side_of value (or quartile) within this share of its pivot is a coin flip


# ------------------------------------------------------------------------------ 2. coin flips at a pivot

def spread(observation, field, value):
    """(low, high) of the kept value at @p field: the field's own FIELD_q1 / FIELD_q3 where the observation
    measures them, else the evidence's quartiles (or min and max) when the evidence's median is this value; the
    value alone where neither is."""
    parent, _, leaf = field.rpartition(".")
    siblings = field_value(observation, parent) if parent else observation.get("measured")
    if isinstance(siblings, dict):
        low, high = siblings.get(f"{leaf}_q1"), siblings.get(f"{leaf}_q3")
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (low, high)):
            return min(low, high, value), max(low, high, value)
    evidence = observation.get("evidence")
    sample = evidence.get("value") if isinstance(evidence, dict) else None
    if isinstance(sample, dict) and isinstance(sample.get("median"), (int, float)) and \
            math.isclose(sample["median"], value, rel_tol=1e-6):
        for a, b in (("q1", "q3"), ("min", "max")):
            if all(isinstance(sample.get(k), (int, float)) for k in (a, b)):
                return min(sample[a], value), max(sample[b], value)
    return value, value


def pivot_problem(question, observation, margin=PIVOT_MARGIN):
    """A sentence when @p question (side_of) is a coin flip on @p observation's kept value, else ""."""
    value = field_value(observation, question.field)
    value = predictions.number(value) if not isinstance(value, (int, float)) else value
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return ""
    pivot = question.tolerance[1]
    low, high = spread(observation, question.field, value)
    span = f"{predictions.text(float(value))}" + ("" if low == high else
                                                  f" (spread {predictions.text(float(low))} to "
                                                  f"{predictions.text(float(high))})")
    if low <= pivot <= high:
        return f"the kept {span} straddles the pivot {predictions.text(pivot)}"
    near = min(abs(low - pivot), abs(high - pivot))
    if near <= margin * abs(pivot):
        return f"the kept {span} lies within {margin:.0%} of the pivot {predictions.text(pivot)}"
    return ""


def pivot_problems(root=ROOT):
    """Sentences for each side_of question whose kept value is not clearly on one side of its pivot."""
    problems = []
    for lab, solution in solutions(root):
        run = kept_run(root, lab)
        if run is None:
            continue
        observations = {o.get("id"): o for o in run.get("observations", [])}
        for q in predictions.read(solution):
            if q.tolerance[0] != "side_of" or q.id not in observations:
                continue
            found = pivot_problem(q, observations[q.id])
            if found:
                problems.append(f"{solution.relative_to(root)}:{q.line}: {q.name} is a coin flip: {found}: ask "
                                f"it another way (a pivot the value is clearly on one side of, or a band)")
    return problems


# ------------------------------------------------------------------- 3. the size and the device, named

QUICK_FLAG = re.compile(r"\(default (?P<default>.*?); (?:on an? [^;]*; )?--quick: (?P<quick>[^;)]*)")


def quick_knobs(run):
    """{flag: (default, --quick value)} of the flags whose default and --quick value differ, from the kept
    run's --help ("flags"); None when the run keeps no flags."""
    flags = run.get("flags") if run else None
    if not isinstance(flags, list):
        return None
    found = {}
    for flag, said in (f for f in flags if isinstance(f, list) and len(f) == 2):
        m = QUICK_FLAG.search(said)
        if m and m.group("default").strip() != m.group("quick").strip():
            found[flag] = (m.group("default").strip(), m.group("quick").strip())
    return found


def size_problems(root=ROOT, sized=None, on_device=None):
    """Sentences for each question of @p sized (SIZED) that does not mention --quick, each of @p on_device
    (ON_DEVICE) that does not name the CPU, and each entry naming no question or a knob --quick leaves alone."""
    sized = SIZED if sized is None else sized
    on_device = ON_DEVICE if on_device is None else on_device
    problems = []
    labs = dict(solutions(root))
    for lab in sorted(set(sized) | set(on_device)):
        if lab not in labs:
            problems.append(f"lab {lab} is listed among the sized questions but has no predictions")
            continue
        solution = labs[lab]
        questions = {q.name: q for q in predictions.read(solution)}
        knobs = quick_knobs(kept_run(root, lab))
        for name, (flags, why) in sized.get(lab, {}).items():
            q = questions.get(name)
            if q is None:
                problems.append(f"lab {lab}: the sized question {name} is no question of {solution.relative_to(root)}")
                continue
            if "--quick" not in q.question:
                problems.append(f"{solution.relative_to(root)}:{q.line}: {name} depends on the run's size "
                                f"({why}): its question must say it is the --quick run's")
            for flag in flags if knobs is not None else ():
                if flag.startswith("--") and flag not in knobs:
                    problems.append(f"lab {lab}: {name} is listed as moved by {flag}, which --quick leaves at "
                                    f"its default (docs/results/lab{lab}.json's flags)")
        for name, why in on_device.get(lab, {}).items():
            q = questions.get(name)
            if q is None:
                problems.append(f"lab {lab}: the device's question {name} is no question of "
                                f"{solution.relative_to(root)}")
            elif not re.search(r"\bCPU\b", q.question):
                problems.append(f"{solution.relative_to(root)}:{q.line}: {name} depends on the device ({why}): "
                                f"its question must name the CPU")
    return problems
