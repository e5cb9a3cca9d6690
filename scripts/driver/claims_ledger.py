"""The claims ledger page (docs/claims.json; standard library only): each claim beside the observations that check
it and their verdict in every machine's kept run (claims_ledger), and the entries that name no observed id
(ledger_problems)."""
import json

from kept_runs import ROOT, kept_report, kept_runs_by_machine, lab_folder
from page_markdown import VERDICT_WORDS, cell, observe_table_ids

CLAIMS = ROOT / "docs" / "claims.json"


def ledger_problems():
    """Sentences for every ledger entry that names a lab or an id no kept run (or lesson table) has."""
    if not CLAIMS.exists():
        return []
    problems = []
    for number, claim in enumerate(json.loads(CLAIMS.read_text(encoding="utf-8"))["claims"], 1):
        checks, quoted = claim.get("checked_by", []), claim.get("not_checked")
        if bool(checks) == bool(quoted):
            problems.append(f"docs/claims.json, claim {number}: give either checked_by or not_checked (the reason)")
        for check in checks:
            folder = lab_folder(check["lab"])
            report = kept_report(check["lab"])
            if folder is None:
                problems.append(f"docs/claims.json, claim {number}: there is no lab {check['lab']}")
                continue
            known = [o["id"] for o in report["observations"]] if report else \
                observe_table_ids((folder / "README.md").read_text(encoding="utf-8")) or []
            if check["id"] not in known:
                problems.append(f"docs/claims.json, claim {number}: lab {check['lab']} observes no '{check['id']}'")
    return problems


def claims_ledger():
    """The ledger as Markdown tables: per source, each claim, the observations that check it and their
    verdict in each machine's kept run; then the claims no lab checks on this hardware, with the reason."""
    ledger = json.loads(CLAIMS.read_text(encoding="utf-8"))
    machines = kept_runs_by_machine()
    out = []
    for source in ledger["sources"]:
        claims = [c for c in ledger["claims"] if c["source"] == source["key"]]
        checked = [c for c in claims if c.get("checked_by")]
        quoted = [c for c in claims if not c.get("checked_by")]
        out += ["", f"## {source['title']}", "", source["about"], "",
                f"{len(checked)} claims checked by a lab, {len(quoted)} quoted.", ""]
        header = "| where | claim | checked by |" + "".join(f" {cell(m)} |" for m in machines)
        out += [header, "|---|---|---|" + "---|" * len(machines)]
        for c in checked:
            ids = "<br>".join(f"lab {k['lab']}: `{k['id']}`" for k in c["checked_by"])
            verdicts = []
            for runs in machines.values():
                words = []
                for k in c["checked_by"]:
                    report = runs.get(k["lab"])
                    o = next((o for o in report["observations"] if o["id"] == k["id"]), None) if report else None
                    word = "no kept run" if o is None else VERDICT_WORDS.get(o["verdict"], o["verdict"])
                    if o is not None and o["verdict"] in ("not_applicable", "inconclusive") and o.get("reason"):
                        reason = o["reason"] if len(o["reason"]) <= 60 else o["reason"][:57] + "..."
                        word += f" ({cell(reason)})"
                    words.append(word)
                verdicts.append("<br>".join(words))
            out.append(f"| {cell(c['where'])} | {cell(c['claim'])} | {ids} |" + "".join(f" {v} |" for v in verdicts))
        if quoted:
            out += ["", f"Quoted from {source['short']}, not checked here:", "",
                    "| where | claim | why no lab checks it here |", "|---|---|---|"]
            out += [f"| {cell(c['where'])} | {cell(c['claim'])} | {cell(c['not_checked'])} |" for c in quoted]
    return "\n".join(out)
