"""The claims ledger page (docs/claims.json; standard library only): each claim beside the observations that check
it and their verdict in every machine's kept run (claims_ledger), and the entries that are wrong (ledger_problems).

A row of the ledger ("claims": a list, numbered from 1 in its order) quotes one claim of a source in our words:

    {"source": "chapter", "where": "§1 bfloat16", "claim": "...",
     "checked_by": [{"lab": "02", "id": "bytes_per_value"},
                    {"lab": "03", "id": "fp8_delayed_scaling_shares", "condition": "delayed_saturated_steps"}],
     "contradicted_by": {"reason": "...", "by": [{"lab": "08", "id": "...", "condition": "ratio > 1"}]},
     "not_checked": "why no lab checks it here"}

It gives checked_by (with contradicted_by or not) or contradicted_by alone where a lab measures it, else
not_checked. The ledger holds each row to the kept runs (docs/results/labNN.json):

- As strong as its words. Every number the claim states ("4 bytes", "at least half of the roof", "twice", "3x",
  "10 times", "under 5%") is a number of the rule of an observation that checks it: its expected text or its id
  (which names the inputs: fp16_1000_plus_0.3), as a number ("half" 0.5 or 50%, "twice" 2, "5%" 0.05; "about 11"
  within 5%). An observation that is only reported (page_markdown.only_reported) has no rule and counts for none.
  Names (float32, bf16, e4m3fn, GPT-2, 16-bit, lab 08, 1/4/3) and the numbers of a formula ((N-1)/(M+N-1), 1/N,
  448 / amax) are not quantities.
- Reported, never holds. An observation that holds without a rule reads "reported" (page_markdown.verdict_word,
  the lab pages' word too).
- Not exercised. A check whose "condition" names a field of the observation's measured value ("field" or
  "field > 0", a dotted path into it) reads "not exercised" in a run where the field is false, zero or empty, or
  fails the comparison: the claim is about something that did not happen there (an overflow, a saturation).
- Contradicted. A claim a measurement contradicts says so in contradicted_by, the one place for it (never in
  its words): the reason, shown under the claim, and the observations that show it, each read "contradicts"
  where it holds (or its condition is met) in a run, "no contradiction here" where it is not.
"""
import json
import math
import re

from kept_runs import ROOT, kept_report, kept_runs_by_machine, lab_folder
from page_markdown import cell, observe_table_ids, only_reported, verdict_word

CLAIMS = ROOT / "docs" / "claims.json"

# ------------------------------------------------------------------------------------------------- quantities

NUMBER_WORDS = {"half": 0.5, "quarter": 0.25, "twice": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "tens": 10, "hundred": 100, "hundreds": 100,
                "thousand": 1000, "thousands": 1000}
# Text that names a thing with digits in it, not a quantity.
NAMES = [
    r"\b(?:labs?|chapter|lesson|section|rows?|claims?)\s+\d+(?:\s*(?:,|and|or|-)\s*\d+)*",  # lab 08, labs 05 and 06
    r"§\s*\d+(?:-\d+)?",
    r"\b(?:16|32|64)[- ]bits?\b",                 # 16-bit, 32 bits: a format's name
    r"\b\d+/\d+/\d+\b",                           # 1/4/3: a bit layout
    r"\b[A-Za-z]\w*-?\d[\w.-]*",                  # float32, bf16, e4m3fn, A100, GPT-2, AVX-512
    r"\b\d+(?![eE][-+]?\d)[A-Za-wyz]\w*",         # 1F1B, 124M (a digit, then a letter other than x; not 1e-8)
    r"\b\d+x\d\w*",                               # 2x32: a shape
]
# The numbers of a formula, which its words state as they are.
FORMULA = [
    r"\b[A-Z]\s*(?:[-+*/^]|//)\s*\d+(?:\.\d+)?",          # N-1, C^2
    r"\d+(?:\.\d+)?\s*(?:[-+*/]|//)\s*\(?\s*[A-Z]\b",     # 1/N
    r"\d+(?:\.\d+)?\s*\(\s*[A-Z]",                        # 2 (N-1)
    r"\d+(?:\.\d+)?\s+[A-Z](?:\s+[A-Z])*\b(?!\s*=)",      # 4 B T C, 12 C
    r"\d+(?:\.\d+)?\s*x\s+[A-Z]\b",                       # 4 x L
    r"\(\s*[a-z_]+\s*[-+]\s*\d+\s*\)",                    # (tokens - 1)
    r"\d+(?:\.\d+)?\s*/\s*[a-z_]{2,}",                    # 448 / amax
]
NUMBER = re.compile(
    r"\bln\s*\(\s*(?P<ln>\d+)\s*\)"                                                  # ln(50257)
    r"|(?P<base>\d+(?:\.\d+)?)\s*\^\s*(?P<exp>[-+]?\d+)"                             # 2^-6
    r"|(?P<num>\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"              # 50,257 1.3 1e-8
    r"(?P<unit>\s*%|x\b|\s+times\b|\s+billion\b|\s+million\b)?"
    r"|\b(?P<word>" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
APPROXIMATE = re.compile(r"(?:\babout|\baround|\broughly|\bnearly|\bclose to|~)\s*$", re.IGNORECASE)


def quantities(text):
    """The numbers @p text states, as [(value, as written, approximate)]: "half" 0.5, "5%" 0.05, "3x" 3,
    "2^-6" 0.015625, "7 billion" 7e9; "about 11" approximate. Names and formulas (NAMES, FORMULA) state none."""
    for pattern in NAMES + FORMULA:
        text = re.sub(pattern, lambda m: " " * len(m.group(0)), text)
    out = []
    for m in NUMBER.finditer(text):
        if m.group("ln"):
            value = math.log(float(m.group("ln")))
        elif m.group("base"):
            value = float(m.group("base")) ** float(m.group("exp"))
        elif m.group("word"):
            value = float(NUMBER_WORDS[m.group("word").lower()])
        else:
            value = float(m.group("num").replace(",", ""))
            value *= {"%": 0.01, "billion": 1e9, "million": 1e6}.get((m.group("unit") or "").strip().lower(), 1)
        out.append((value, m.group(0).strip(), bool(APPROXIMATE.search(text[:m.start()]))))
    return out


def rule_text(observation):
    """What an observation holds its measurement to: its id (which names the inputs: fp16_1000_plus_0.3; 7b is
    7 billion) and its expected text."""
    ident = re.sub(r"(?<![\w.])(\d+)b\b", r"\1 billion", observation["id"].replace("_", " "))
    return ident + "; " + str(observation.get("expected", ""))


def stated_in(value, approximate, values):
    tolerance = 0.05 if approximate else 1e-6
    return any(math.isclose(value, v, rel_tol=tolerance) for v in values)


def weaker_rules(claim, observations):
    """The numbers of @p claim that no rule of @p observations states, as written ([] when every one is)."""
    rules = [rule_text(o) for o in observations if not only_reported(o.get("expected"))]
    values = [v for rule in rules for v, _, _ in quantities(rule)]
    return [written for value, written, approximate in quantities(claim)
            if not stated_in(value, approximate, values)]

# ------------------------------------------------------------------------------------------------ conditions

CONDITION = re.compile(r"^\s*(?P<path>[A-Za-z0-9_.\-]+)\s*"
                       r"(?:(?P<op><=|>=|==|!=|<|>)\s*(?P<number>[-+]?[\d.]+(?:[eE][-+]?\d+)?))?\s*$")
OPERATORS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def measured_field(measured, path):
    """(True, value) for the dotted @p path into @p measured (a number indexes a list), else (False, None)."""
    value = measured
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return False, None
    return True, value


def condition_problem(condition, lab, observation):
    """Why @p condition cannot be read from lab @p lab's @p observation's measured value (None when it can, or
    when the run measured nothing to read it from)."""
    match = CONDITION.match(str(condition))
    if not match:
        return f"its condition '{condition}' is neither a field nor 'field > number'"
    if observation is None or observation.get("measured") is None:
        return None
    found, value = measured_field(observation["measured"], match.group("path"))
    if not found:
        return f"its condition names '{match.group('path')}', which lab {lab}'s '{observation['id']}' does not measure"
    if match.group("op") and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        return f"its condition compares '{match.group('path')}', which is {value!r}, not a number"
    return None


def condition_met(condition, observation):
    """(met, "field = value") for @p condition on @p observation's measured value; met is None when it cannot
    be read (nothing measured, no such field)."""
    match = CONDITION.match(str(condition))
    if not match or observation is None or observation.get("measured") is None:
        return None, ""
    found, value = measured_field(observation["measured"], match.group("path"))
    if not found:
        return None, ""
    path = match.group("path")
    if isinstance(value, (list, dict)):
        shown = f"{path}: {len(value)} {'entries' if isinstance(value, list) else 'fields'}"
    else:
        shown = f"{path} = {value:.4g}" if isinstance(value, float) else f"{path} = {str(value)[:40]}"
    if match.group("op"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None, shown
        return OPERATORS[match.group("op")](value, float(match.group("number"))), shown
    return bool(value), shown

# ------------------------------------------------------------------------------------------------- problems

# A claim's words that say a measurement contradicts it: that belongs in contradicted_by.
SAYS_CONTRADICTED = re.compile(r"\bcontradict|\b(?:finds?|measures?|shows?) the opposite\b", re.IGNORECASE)


def contradiction_entries(claim):
    contradicted = claim.get("contradicted_by")
    return contradicted.get("by", []) if isinstance(contradicted, dict) else []


def observation_of(check, report):
    if report is None:
        return None
    return next((o for o in report["observations"] if o["id"] == check["id"]), None)


def ledger_problems():
    """Sentences for every ledger entry that is wrong: it names a lab or an id no kept run (or lesson table) has,
    states a number no rule of its observations states, names a condition its observation does not measure, or
    is contradicted anywhere but in contradicted_by."""
    if not CLAIMS.exists():
        return []
    problems = []
    for number, claim in enumerate(json.loads(CLAIMS.read_text(encoding="utf-8"))["claims"], 1):
        where = f"docs/claims.json, claim {number}"
        checks, quoted = claim.get("checked_by", []), claim.get("not_checked")
        contradicted = claim.get("contradicted_by")
        if bool(checks or contradicted) == bool(quoted):
            problems.append(f"{where}: give either checked_by (or contradicted_by) or not_checked (the reason)")
        if SAYS_CONTRADICTED.search(claim.get("claim", "") + " " + str(quoted or "")):
            problems.append(f"{where} says in its words that a measurement contradicts it: give contradicted_by "
                            "(the reason and the observations that show it) and quote the claim alone")
        complete = isinstance(contradicted, dict) and str(contradicted.get("reason", "")).strip() and \
            contradicted.get("by")
        if contradicted is not None and not complete:
            problems.append(f"{where}: contradicted_by needs a reason and the observations that show it (by)")
        observed = []
        for check, checks_it in [(k, True) for k in checks] + [(k, False) for k in contradiction_entries(claim)]:
            folder = lab_folder(check["lab"])
            report = kept_report(check["lab"])
            if folder is None:
                problems.append(f"{where}: there is no lab {check['lab']}")
                continue
            known = [o["id"] for o in report["observations"]] if report else \
                observe_table_ids((folder / "README.md").read_text(encoding="utf-8")) or []
            if check["id"] not in known:
                problems.append(f"{where}: lab {check['lab']} observes no '{check['id']}'")
                continue
            observation = observation_of(check, report)
            if "condition" in check:
                why = condition_problem(check["condition"], check["lab"], observation)
                if why:
                    problems.append(f"{where}: {why}")
            if observation is not None and checks_it:
                observed.append(observation)
        if observed and len(observed) == len(checks):
            missing = weaker_rules(claim["claim"], observed)
            if missing:
                rules = "; ".join(f"lab {c['lab']} {o['id']}: '{o['expected']}'" +
                                  (" (only reported: no rule)" if only_reported(o["expected"]) else "")
                                  for c, o in zip(checks, observed))
                problems.append(f"{where} (\"{claim['claim']}\") states {', '.join(repr(m) for m in missing)}, "
                                f"which no rule that checks it states ({rules}): make the rule as strong as the "
                                "words, or the words as weak as the rule")
    return problems

# ------------------------------------------------------------------------------------------------- the page


def check_word(check, observation):
    """The verdict of one check in one run: verdict_word, or "not exercised" where its condition is not met, with
    a not-applicable or undecided observation's reason."""
    if observation is None:
        return "no kept run"
    word = verdict_word(observation)
    if "condition" in check and observation["verdict"] not in ("not_applicable", "inconclusive"):
        met, shown = condition_met(check["condition"], observation)
        if met is False:
            return f"not exercised ({cell(shown)})"
    if observation["verdict"] in ("not_applicable", "inconclusive") and observation.get("reason"):
        reason = observation["reason"] if len(observation["reason"]) <= 60 else observation["reason"][:57] + "..."
        word += f" ({cell(reason)})"
    return word


def contradiction_word(check, observation):
    """Whether one run shows the contradiction: "contradicts" where the observation holds (or, with a condition,
    where the condition is met, whatever the observation's own rule said), "no contradiction here" where not."""
    if observation is None:
        return "no kept run"
    if "condition" in check:
        met, shown = condition_met(check["condition"], observation)
        if met is not None:
            return f"**contradicts** ({cell(shown)})" if met else f"no contradiction here ({cell(shown)})"
    if observation["verdict"] == "holds":
        return "**contradicts**"
    if observation["verdict"] == "fails":
        return "no contradiction here"
    return check_word(check, observation)


def claims_ledger():
    """The ledger as Markdown tables: per source, each claim, the observations that check it (and those that
    contradict it) and their verdict in each machine's kept run; then the claims no lab checks on this hardware,
    with the reason."""
    ledger = json.loads(CLAIMS.read_text(encoding="utf-8"))
    machines = kept_runs_by_machine()
    out = []
    for source in ledger["sources"]:
        claims = [c for c in ledger["claims"] if c["source"] == source["key"]]
        checked = [c for c in claims if c.get("checked_by") or c.get("contradicted_by")]
        quoted = [c for c in claims if not (c.get("checked_by") or c.get("contradicted_by"))]
        contradicted = [c for c in checked if c.get("contradicted_by")]
        out += ["", f"## {source['title']}", "", source["about"], "",
                f"{len(checked)} claims checked by a lab" +
                (f" ({len(contradicted)} of them contradicted)" if contradicted else "") + f", {len(quoted)} quoted.",
                ""]
        header = "| where | claim | checked by |" + "".join(f" {cell(m)} |" for m in machines)
        out += [header, "|---|---|---|" + "---|" * len(machines)]
        for c in checked:
            checks, against = c.get("checked_by", []), contradiction_entries(c)
            ids = [f"lab {k['lab']}: `{k['id']}`" + (f" (if {cell(k['condition'])})" if "condition" in k else "")
                   for k in checks]
            ids += [f"lab {k['lab']}: `{k['id']}` (contradicts)" for k in against]
            verdicts = []
            for runs in machines.values():
                words = [check_word(k, observation_of(k, runs.get(k["lab"]))) for k in checks]
                words += [contradiction_word(k, observation_of(k, runs.get(k["lab"]))) for k in against]
                verdicts.append("<br>".join(words))
            claim = cell(c["claim"])
            if c.get("contradicted_by"):
                claim += f"<br>**contradicted**: {cell(c['contradicted_by']['reason'])}"
            out.append(f"| {cell(c['where'])} | {claim} | {'<br>'.join(ids)} |" + "".join(f" {v} |" for v in verdicts))
        if quoted:
            out += ["", f"Quoted from {source['short']}, not checked here:", "",
                    "| where | claim | why no lab checks it here |", "|---|---|---|"]
            out += [f"| {cell(c['where'])} | {cell(c['claim'])} | {cell(c['not_checked'])} |" for c in quoted]
    return "\n".join(out)
