"""Lab 13's records (labs/13_speedrun/records.jsonl, one JSON object a line, appended by ./lab speedrun --record)
as the Markdown tables of docs/speedrun.md: grouped by CPU, each machine's best score first, with the baseline's
time on that machine beside each score (a time is comparable only on its own machine; the score is a ratio to
the baseline measured in the same run)."""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDS = ROOT / "labs" / "13_speedrun" / "records.jsonl"


def read_records(path=RECORDS):
    """The records, in file order; a line that is not a JSON object is skipped (a hand edit gone wrong)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def speedrun_records(path=RECORDS):
    """The Markdown: one table per CPU (model, cores), its records best score first."""
    records = read_records(path)
    if not records:
        return "No run is recorded yet: `./lab speedrun --record` adds one.\n"
    machines = {}
    for r in records:
        machines.setdefault(f"{r.get('cpu', '?')}, {r.get('cores', '?')} cores", []).append(r)
    out = []
    for machine, rows in sorted(machines.items()):
        isas = " ".join(rows[0].get("isas", []))
        out += [f"### {machine}", "", f"Vector instruction sets: {isas or 'none recorded'}.", "",
                "| score | trainer s | baseline s | Python s | steps (trainer / baseline) | target | model | techniques | "
                "busy | date | commit |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: -float(r.get("score") or 0)):
            c = r.get("config", {})
            score = f"{float(r.get('score') or 0):.2f}x" if r.get("score") else f"0 ({r.get('score_reason', '')})"
            python = (r.get("peers") or {}).get("python_eager", {}).get("seconds")
            python = f"{float(python):.1f}" if python else "-"
            out.append(f"| {score} | {float(r.get('trainer_s', 0)):.1f} | {float(r.get('baseline_s', 0)):.1f} | "
                       f"{python} | "
                       f"{r.get('trainer_steps', '?')} / {r.get('baseline_steps', '?')} | {c.get('target', '?')} | "
                       f"{c.get('layers', '?')} x {c.get('width', '?')} | {', '.join(r.get('techniques', [])) or '-'} | "
                       f"{'yes' if r.get('busy') else 'no'} | {str(r.get('date', '?'))[:10]} | "
                       f"`{str(r.get('commit', '?'))[:10]}` |")
        out.append("")
    return "\n".join(out)
