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
