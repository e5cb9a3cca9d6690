"""Lab 13's records (labs/13_speedrun/records.jsonl, one JSON object a line, appended by ./lab speedrun --record)
as the Markdown tables of docs/speedrun.md: grouped by CPU, each machine's best score first, with the baseline's
time on that machine beside each score (a time is comparable only on its own machine; the score is a ratio to
the baseline measured in the same run), and the chart of the best recorded full race."""
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


def techniques(record):
    """The trainer's techniques, each with its ablation's slowdown where the record has one ("muon 3.82x")."""
    ablation = record.get("ablation") or {}
    names = [f"{name} {float(ablation[name]['slowdown']):.2f}x" if isinstance(ablation.get(name), dict) and
             "slowdown" in ablation[name] else name for name in record.get("techniques", [])]
    return ", ".join(names) or "-"


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
                "| score | trainer s | baseline s | Python s | steps (trainer / baseline) | target | model | "
                "techniques (slowdown without) | busy | date | commit |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: -float(r.get("score") or 0)):
            c = r.get("config", {})
            score = f"{float(r.get('score') or 0):.2f}x" if r.get("score") else f"0 ({r.get('score_reason', '')})"
            python = (r.get("peers") or {}).get("python_eager", {}).get("seconds")
            python = f"{float(python):.1f}" if python else "-"
            out.append(f"| {score} | {float(r.get('trainer_s', 0)):.1f} | {float(r.get('baseline_s', 0)):.1f} | "
                       f"{python} | "
                       f"{r.get('trainer_steps', '?')} / {r.get('baseline_steps', '?')} | {c.get('target', '?')} | "
                       f"{c.get('layers', '?')} x {c.get('width', '?')} | {techniques(r)} | "
                       f"{'yes' if r.get('busy') else 'no'} | {str(r.get('date', '?'))[:10]} | "
                       f"`{str(r.get('commit', '?'))[:10]}` |")
        out.append("")
    return "\n".join(out)


# The chart's frame: the plot area inside a margin, in SVG user units.
WIDTH, HEIGHT, MARGIN = 720, 420, 60
SIDES = (("baseline", "baseline (C++)", "#1f77b4"), ("python_eager", "Python peer (eager)", "#ff7f0e"),
         ("python_compiled", "Python peer (torch.compile)", "#9467bd"), ("trainer", "trainer", "#2ca02c"))


def best_full_record(records):
    """The record with the highest score among those with curves and the full target (1.88), or None."""
    full = [r for r in records if r.get("curves") and r.get("config", {}).get("target") == 1.88 and r.get("score")]
    return max(full, key=lambda r: float(r["score"]), default=None)


def records_plot(path=RECORDS):
    """An SVG of the best full race's validation loss against timed seconds, every side it raced, the target
    dashed; None when no recorded full race has curves."""
    record = best_full_record(read_records(path))
    if record is None:
        return None
    curves = {name: points for name, points in record["curves"].items() if points}
    seconds = max(s for points in curves.values() for s, _ in points)
    losses = [loss for points in curves.values() for _, loss in points]
    low, high = min(min(losses), 1.88) - 0.05, min(max(losses), 3.0)
    x = lambda s: MARGIN + (WIDTH - 2 * MARGIN) * s / seconds  # noqa: E731
    y = lambda loss: MARGIN + (HEIGHT - 2 * MARGIN) * (high - min(loss, high)) / (high - low)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
           'font-size="12"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="20" text-anchor="middle">Validation loss against timed seconds: the record of '
           f'{str(record.get("date", "?"))[:10]} on {record.get("cpu", "?")}, score {float(record["score"]):.2f}x</text>',
           f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
           f'<text x="{WIDTH / 2}" y="{HEIGHT - 20}" text-anchor="middle">seconds (init, steps, weights(); '
           'validation not timed)</text>',
           f'<text x="15" y="{HEIGHT / 2}" transform="rotate(-90 15 {HEIGHT / 2})" text-anchor="middle">'
           'validation loss (nat)</text>',
           f'<line x1="{MARGIN}" y1="{y(1.88):.1f}" x2="{WIDTH - MARGIN}" y2="{y(1.88):.1f}" stroke="gray" '
           'stroke-dasharray="6 4"/>',
           f'<text x="{WIDTH - MARGIN + 4}" y="{y(1.88) + 4:.1f}">1.88</text>']
    for tick in range(5):
        s, loss = seconds * tick / 4, low + (high - low) * tick / 4
        out += [f'<text x="{x(s):.1f}" y="{HEIGHT - MARGIN + 16}" text-anchor="middle">{s:.0f}</text>',
                f'<text x="{MARGIN - 6}" y="{y(loss) + 4:.1f}" text-anchor="end">{loss:.2f}</text>']
    for row, (name, label, colour) in enumerate(side for side in SIDES if side[0] in curves):
        points = " ".join(f"{x(s):.1f},{y(loss):.1f}" for s, loss in curves[name])
        out += [f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>',
                f'<text x="{WIDTH - MARGIN - 200}" y="{MARGIN + 16 * row}" fill="{colour}">{label}</text>']
    return "\n".join(out + ["</svg>"]) + "\n"


PLOT = ROOT / "docs" / "images" / "speedrun_records.svg"

if __name__ == "__main__":
    # Writes the chart docs/speedrun.md shows (the docs check holds the committed one to this output).
    svg = records_plot()
    if svg is None:
        raise SystemExit("no recorded full race (target 1.88) with curves: nothing to plot")
    PLOT.write_text(svg, encoding="utf-8")
    print(f"wrote {PLOT.relative_to(ROOT)}")
