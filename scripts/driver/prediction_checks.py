#!/usr/bin/env python3
"""Is each lab's question fair to the reader? Three checks of the reference answers
(solutions/NN_topic/predictions.toml) against the lesson and the kept runs, for scripts/driver/predictions.py
(`predictions.py fair`) and tests/grading/test_predictions.py. Each returns sentences, one a problem, [] when
there is none; each is simple and errs towards naming a question, never grades one.

lesson_problems  No answer stands in the lesson above its question: in the lesson's source
                 (labs/NN_topic/README.md.in) before its {{questions:NN}} line, outside code and placeholders, a
                 sentence (of a paragraph, a list item, a table cell) that shows the reference answer in a form a
                 reader would see ("448", "338,025", "1.01" for 1.012, "50%" or "half" for 0.5, "infinity" for
                 inf, "fp32" for float32) beside the question's own words is a problem: beside one of them for a
                 distinctive answer (a word, a number of 3 significant digits or more), two for a common one (0,
                 1, 16, 0.5); so is a {{run:NN:ID.FIELD}} placeholder there that names the question's observation
                 and field (it prints the kept answer). An answer the question itself shows is not looked for.
pivot_problems   A side_of question is no coin flip: the kept run's value (docs/results/labNN.json), and its
                 quartiles where the run has them (the field's own FIELD_q1 and FIELD_q3, or the observation's
                 evidence when it measures that field), lie on one side of the pivot and more than 10% from it.
size_problems    A question whose answer depends on the run's configuration or device says so: every question
                 of SIZED below mentions --quick (the kept runs are --quick runs, and the student's ./lab check
                 runs --quick too), every question of ON_DEVICE names the CPU; each knob SIZED names is one whose
                 default differs from its --quick value (the kept run's own --help, its "flags").
Standard library only.
"""
import json
import math
import re
from pathlib import Path

import predictions

ROOT = Path(__file__).resolve().parents[2]

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
           "tiled_vs_sdpa_time_at_1024.ratio": (
        ("--q-tile", "--kv-tile"), "tiles of 64 x 64 under --quick, 256 x 256 by default: the tile moves the "
                                   "tiled forward's time")},
    "12": {"peak_memory_vs_plain.sizes.0.logits_MiB": (
        ("--seq",), "the smallest size is B/4 x T rows: 2 x 64 = 128 under --quick, 2 x 256 = 512 by default")},
    "13": {"baseline_reaches_target.steps": (
        ("--target", "--eval-every", "--layers", "--width"), "the quick target (7.5 nats, a validation every 10 "
                                                             "steps) on --quick's model; the default asks 5.9"),
           "mfu_per_step.baseline.mfu": (
        ("--layers", "--width", "--batch"), "the model and batch set the step's FLOPs and how well its matmuls "
                                            "fill the CPU"),
           "mfu_per_step.baseline.model_flops_per_step": (
        ("--layers", "--width", "--batch"), "the count grows with the model and the batch: --quick's are smaller")},
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


def solutions(root):
    """(lab number, the reference's predictions file) of every lab, in order."""
    return [(p.parent.name[:2], p) for p in sorted(Path(root).glob("solutions/[0-9][0-9]_*/predictions.toml"))]


def kept_run(root, lab):
    path = Path(root) / "docs" / "results" / f"lab{lab}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def field_value(observation, field):
    """The value at @p field (a.b, list.0) of @p observation's measured, or None."""
    value = observation.get("measured")
    for key in [k for k in field.split(".") if k]:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


# ------------------------------------------------------------------------ 1. the answer in the lesson

NUMBER_WORDS = {"zero": 0.0, "three": 3.0, "four": 4.0, "five": 5.0, "six": 6.0, "seven": 7.0, "eight": 8.0,
                "nine": 9.0, "ten": 10.0, "twelve": 12.0, "sixteen": 16.0, "half": 0.5, "quarter": 0.25,
                "third": 1 / 3, "fifth": 0.2, "tenth": 0.1}  # "one" and "two" count things in most sentences
ALIASES = [{"float32", "fp32"}, {"bfloat16", "bf16"}, {"float16", "fp16"}, {"e4m3fn", "e4m3"}, {"e5m2"},
           {"inf", "infinity", "infinite"}]
STOPWORDS = set("""a an the and or of to in on at by for with from as is are be been was were it its it's this that
these those than then there their what which who how many much does do did doing has have had into onto per
each every any all some one two no not nor but if so same other another your you yours own lab lab's run runs
run's step's about above below more less higher lower greater fewer times time over under within x number
numbers value values way ways answer give gives given take takes does what's when where while before after
way only also just like kind sort""".split())
# Words that name what kind of answer a question wants, not what it is about ("what dtype", "what share").
STOPWORDS |= {"dtype", "type", "share", "ratio", "count", "size", "multiple", "unit"}
CODE_BLOCK = re.compile(r"(?ms)^(```|~~~).*?^\1[^\n]*$")
CODE_SPAN = re.compile(r"`[^`\n]+`")
POWER = re.compile(r"(?<![\w.])(\d+)\^\(?(-?\d+)\)?")
NUMBER = re.compile(r"(?<![\w.\-^])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\d,]*\d)(%?)", re.I)
WORD = re.compile(r"[A-Za-z][\w'-]*")
RUN_PLACEHOLDER = re.compile(r"\{\{run:(?P<lab>\d\d):(?P<id>[A-Za-z0-9_]+)(?P<path>(?:\.[A-Za-z0-9_]+)*)"
                             r"(?:\|[^}]*)?\}\}")
OBSERVATION_FIELDS = {"id", "claim", "measured", "expected", "verdict", "reason", "must_hold", "evidence"}


def blank(match):
    return re.sub(r"[^\n]", " ", match.group(0))


def without_code(text):
    """@p text with fenced blocks, indented blocks (after a blank line) and code spans blanked, lines kept."""
    text = CODE_BLOCK.sub(blank, text)
    lines, previous_blank, in_block = text.split("\n"), True, False
    for i, line in enumerate(lines):
        if re.match(r"( {4}|\t)", line) and (previous_blank or in_block) and line.strip():
            in_block = True
            lines[i] = " " * len(line)
        elif line.strip():
            in_block = False
        previous_blank = not line.strip()
    return CODE_SPAN.sub(blank, "\n".join(lines))


def paragraphs(text):
    """(text, lines) of each paragraph of @p text: blocks between blank lines, each list item, table row and
    heading its own; lines holds (offset in text, line number) where each of its lines starts."""
    found, current = [], []
    for number, line in enumerate(text.split("\n"), 1):
        new_item = re.match(r"\s*([-*+]|\d+\.)\s|\s*\||\s*#", line)
        if (not line.strip() or new_item) and current:
            found.append(current)
            current = []
        if line.strip():
            current.append((number, re.sub(r"^\s*(?:[-*+]|\d+\.)\s+|^\s*#+\s*", "", line).strip()))
    found += [current] if current else []
    result = []
    for lines in found:
        offsets, at = [], 0
        for number, line in lines:
            offsets.append((at, number))
            at += len(line) + 1
        result.append((" ".join(line for _, line in lines), offsets))
    return result


def text_numbers(text):
    """[(value, digits as written, has a decimal point)] of the numbers @p text writes: 338,025, 1e-8, 0.5, 2^16,
    50% (also 0.5), and the number words of NUMBER_WORDS."""
    found = []
    for m in POWER.finditer(text):
        try:
            found.append((float(m.group(1)) ** float(m.group(2)), m.group(0), False))
        except OverflowError:
            continue
    text = POWER.sub(lambda m: " " * len(m.group(0)), text)
    for m in NUMBER.finditer(text):
        digits = m.group(0).rstrip("%")
        value = float(digits.replace(",", ""))
        point = "." in digits and "e" not in digits.lower()
        found.append((value, digits, point))
        if m.group(1):
            found.append((value / 100, m.group(0), point))
    for m in WORD.finditer(text):
        if m.group(0).lower() in NUMBER_WORDS:
            found.append((NUMBER_WORDS[m.group(0).lower()], m.group(0), True))
    return found


def shows_number(value, written, point, answer):
    """Whether @p written (@p value, with a decimal point or not) shows @p answer: the same number, or the answer
    rounded to the digits written ("1.01" for 1.012, "24.5" for 24.54; never an integer for a fraction)."""
    if math.isclose(value, answer, rel_tol=1e-6, abs_tol=1e-12):
        return True
    if not point or not written[:1].isdigit():
        return abs(value - answer) <= 1e-3 * abs(answer) if written[:1].isalpha() else False
    decimals = len(written.split(".")[1]) if "." in written else 0
    significant = len(written.replace(",", "").replace(".", "").lstrip("0"))
    return significant >= 2 and round(answer, decimals) == value


def words(text):
    return [w.lower().removesuffix("'s") for w in WORD.findall(text)]


def stem(word):
    """@p word without a plural's or a possessive's ending: "gradients" and "gradient's" are "gradient"."""
    word = word.lower().removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and re.search(r"(ss|x|ch|sh)es$", word):
        return word[:-2]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def aliases(word):
    return next((group for group in ALIASES if word.lower() in group), {word.lower()})


def group(word):
    """@p word's keyword: its stem, one for a word and its aliases (fp16 and float16)."""
    return stem(sorted(aliases(word))[0])


def keywords(question):
    """The words of @p question (its text, unit, id and field) that say what it is about, as group() writes
    them: neither stop words, nor digits, nor the answer's own forms, nor a list of offered answers ("float32,
    bfloat16 or float16")."""
    left_out = offered_words(question) | {w for w in aliases(predictions.text(question.answer))}
    source = f"{question.question} {question.unit} {question.id} {question.field}".replace("_", " ")
    return {group(w) for w in words(source)
            if len(w) >= 3 and w not in STOPWORDS and w not in left_out and not re.fullmatch(r"[\d.e-]+", w)}


OFFERED = re.compile(r"[\w.-]+(?:\s*,\s*[\w.-]+)*,?\s+or\s+[\w.-]+")


def offered_words(question):
    """The answers @p question offers in a list ("float32, bfloat16 or float16", "memory or compute")."""
    offered = set()
    for m in OFFERED.finditer(f"{question.question} ({question.unit})"):
        offered |= {w.lower() for w in re.split(r"\s*,\s*(?:or\s+)?|\s+or\s+", m.group(0)) if w}
    return offered


def answer_forms(question, answer):
    """What a reader would see for @p answer: ("number", value) or ("words", {word, ...}); None for a side
    (a side_of answer names no value) and for an answer the question itself shows outside a list of offered
    answers ("under bf16 autocast"; "With 2 pipeline stages" for 2): the reader sees it anyway."""
    if answer is None or question.tolerance[0] == "side_of":
        return None
    value = predictions.number(answer)
    if value is not None and not isinstance(answer, bool) and not math.isinf(value):
        shown = any(shows_number(v, w, p, value) for v, w, p in text_numbers(question.question))
        return None if shown else ("number", value)
    forms = {"inf", "infinity", "infinite"} if value is not None and math.isinf(value) else \
        aliases(predictions.text(answer))
    return None if forms & (set(words(question.question)) - offered_words(question)) else ("words", forms)


def distinctive(forms):
    """Whether an answer's forms are unlikely in a sentence by chance: a word, or a number of 3 significant
    digits or more (338,025, 448, 1.25, 10.8); 0, 1, 2, 16 or 0.5 stand in many sentences."""
    kind, value = forms
    if kind == "words":
        return True
    digits = f"{abs(value):.6g}".replace(".", "").lstrip("0").split("e")[0]
    return len(digits) >= 3


def shows_answer(paragraph, forms, offered):
    """The form of the answer @p paragraph shows, or ""; a paragraph naming another offered answer beside it
    compares them, and states neither."""
    kind, value = forms
    if kind == "number":
        return next((w for v, w, p in text_numbers(paragraph) if shows_number(v, w, p, value)), "")
    said = set(words(paragraph))
    if offered and (said & (offered - value)):
        return ""
    return next((w for w in sorted(value) if w in said), "")


def placeholder_names(match, question, lab):
    """Whether a {{run:...}} @p match prints @p question's kept value: its lab, observation and field."""
    if match.group("lab") != lab or match.group("id") != question.id:
        return False
    path = match.group("path").lstrip(".")
    if path.split(".")[0] == "measured":
        path = path[len("measured"):].lstrip(".")
    elif path.split(".")[0] in OBSERVATION_FIELDS:
        return False
    return path == question.field


def lesson_source(root, lab):
    folder = next(Path(root).glob(f"labs/{lab}_*/"), None)
    path = folder / "README.md.in" if folder else None
    if path is None or not path.exists():
        path = folder / "README.md" if folder else None
    return path if path is not None and path.exists() else None


def sentences(paragraph):
    """The sentences of @p paragraph, a table row's cells each one."""
    return [s for s in re.split(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bal\.)(?<!\bvs\.)(?<=[.?!])\s+|\|", paragraph)
            if s.strip()]


def lesson_problems(root=ROOT):
    """Sentences for each question whose reference answer stands in its lesson above the questions, and each
    placeholder there that prints one: a sentence showing a distinctive answer (distinctive()) beside one of the
    question's keywords, or another answer beside two of them."""
    problems = []
    for lab, solution in solutions(root):
        path = lesson_source(root, lab)
        if path is None:
            continue
        text = path.read_text(encoding="utf-8")
        where = re.search(rf"^\{{\{{questions:{lab}\}}\}}$", text, re.M)
        before = text[:where.start()] if where else text
        masked = RUN_PLACEHOLDER.sub(blank, without_code(before))
        name = path.relative_to(root)
        for q in predictions.read(solution):
            for m in RUN_PLACEHOLDER.finditer(CODE_SPAN.sub(blank, CODE_BLOCK.sub(blank, before))):
                if placeholder_names(m, q, lab):
                    line = before.count("\n", 0, m.start()) + 1
                    problems.append(f"{name}:{line}: {m.group(0)} prints the answer of question {q.name} above "
                                    f"the questions: move it after them")
            forms = answer_forms(q, q.answer)
            if forms is None:
                continue
            wanted, offered = keywords(q), offered_words(q)
            needed = 1 if distinctive(forms) else 2
            for paragraph, offsets in paragraphs(masked):
                at = 0
                for piece in sentences(paragraph):
                    at = paragraph.find(piece, at)
                    shown = shows_answer(piece, forms, offered)
                    about = sorted(wanted & {group(w) for w in words(piece)})
                    if shown and len(about) >= min(needed, len(wanted)):
                        line = max(n for o, n in offsets if o <= max(at, 0))
                        quoted = re.sub(r"\s+", " ", piece.strip())
                        quoted = quoted if len(quoted) <= 90 else quoted[:87] + "..."
                        problems.append(f"{name}:{line}: \"{quoted}\" shows '{shown}', the answer of question "
                                        f"{q.name}, beside its words {', '.join(about)}, above the questions: reword "
                                        f"the sentence or move it after them")
    return problems


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
