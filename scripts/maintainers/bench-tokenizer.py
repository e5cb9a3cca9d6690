#!/usr/bin/env python3
"""The C++ GPT2Tokenizer (build/bin/bench_tokenizer) against Python's tiktoken `gpt2`, in one run:

1. Speed, one thread each, side by side: tiny shakespeare, a mixed corpus (code, numbers, Unicode text,
   English with contractions, long runs of spaces and of one character; generated from --seed) and each of
   its parts alone. Rounds alternate C++ (a process: warm-up, repeats, median) and tiktoken (the same in this
   process); the table gives the median over rounds, and the ratio is taken within each round, so a busy
   moment of the machine weighs on both sides alike. The load average and the CPU others used are printed.
2. Where encode()'s time goes (bench_tokenizer --steps): the pre-tokenizer alone, the word cache's hits, the
   misses (a whole-token lookup, else BPE) and the merges alone, with the pieces counted.
3. The worst case: one piece of one repeated unit ("a", "ab", spaces, ...) from 64 KiB to 1 MiB, ms per MB
   at each length and its ratio to the shortest (flat = linear); tiktoken at a few short lengths for contrast.
   A table, and an SVG (--svg).
4. Exactness: --strings generated strings (default 10^6: Unicode classes, contractions, digits, white-space
   runs, long runs, code, one in eight with invalid UTF-8) token for token against tiktoken (invalid UTF-8:
   each valid stretch as tiktoken encodes it, each invalid byte its byte's token), every code point in
   context, and both corpora whole (tests/datasets/tiktoken_parity.py, which CTest runs on fewer strings).

tiktoken cannot download here: its encoding is built from the data directory's encoder.json and vocab.bpe.
Exit status: 0 all identical, 1 a mismatch, 2 bad usage.
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "datasets"))
import tiktoken_parity as parity  # noqa: E402


# ---- the mixed corpus ------------------------------------------------------------------------------

IDENTIFIERS = ["x", "y", "i", "n", "data", "size", "count", "result", "buffer", "index", "value", "tokens", "batch",
               "model", "loss", "grad", "weights", "config", "path", "offset", "begin", "end", "it", "self", "args"]
TYPES = ["int", "size_t", "double", "float", "auto", "std::string", "std::vector<int32_t>", "const char*", "bool"]
ENGLISH = ["the", "of", "and", "to", "a", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as", "I",
           "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what",
           "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how",
           "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
           "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
           "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
           "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side",
           "tokenizer", "benchmark", "throughput", "megabyte", "Unicode", "whitespace", "apostrophe"]
CONTRACTIONS = ["don't", "won't", "it's", "I'm", "you're", "we've", "they'll", "she'd", "can't", "isn't",
                "that's", "there's", "I'd", "we'll", "you've", "doesn't", "O'Brien", "rock'n'roll"]
UNICODE_WORDS = {
    "ru": ["привет", "мир", "токенизатор", "быстро", "текст", "слово", "и", "в", "не", "что", "это", "как"],
    "el": ["γειά", "σου", "κόσμε", "λέξη", "και", "το", "είναι", "γρήγορα"],
    "de": ["Straße", "Grüße", "Mädchen", "schön", "über", "größer", "und", "der", "die", "das"],
    "fr": ["café", "déjà", "naïve", "élève", "où", "garçon", "très", "à", "le", "la", "être"],
    "zh": ["你好世界", "分词器", "速度", "文本", "我们", "中文", "数据", "模型", "的", "是"],
    "ja": ["こんにちは", "東京", "トークナイザー", "日本語", "カタカナ", "ひらがな", "です"],
    "ko": ["안녕하세요", "세계", "토크나이저", "한국어", "빠르다"],
    "ar": ["مرحبا", "عالم", "نص", "سريع", "٣٤٥", "في", "من"],
    "hi": ["नमस्ते", "दुनिया", "तेज़", "पाठ", "१२३", "और", "है"],
    "emoji": ["😀", "👍🏽", "🚀", "🇫🇷", "👨‍👩‍👧", "❤️", "✨", "🎉"],
}
RUN_UNITS = [" ", "=", "-", "#", "*", ".", "~", "_", "a", "0", "\n", "\t", "ab", "=-", "01", "😀", "é", "日"]


def _code(rng, size):
    out = []
    while sum(map(len, out)) < size:
        indent = " " * (4 * rng.randint(0, 4))
        a, b, c = rng.choice(IDENTIFIERS), rng.choice(IDENTIFIERS), rng.choice(IDENTIFIERS)
        line = rng.choice([
            f"{rng.choice(TYPES)} {a} = {b}[{c}] * {rng.randint(0, 999)};",
            f"for (size_t {a} = 0; {a} < {b}.size(); ++{a}) {{",
            f"if ({a} != nullptr && {b}->{c} >= 0x{rng.randint(0, 65535):04X}) return {rng.randint(-9, 99)};",
            f"def {a}_{b}(self, {c}={rng.random():.3f}):",
            f"{a} = [{', '.join(str(rng.randint(0, 100)) for _ in range(rng.randint(1, 6)))}]",
            f"// {' '.join(rng.choices(ENGLISH + CONTRACTIONS, k=rng.randint(3, 12)))}",
            f"# {' '.join(rng.choices(ENGLISH, k=rng.randint(3, 10)))}",
            f'std::cout << "{rng.choice(ENGLISH)}: " << {a}.{b}() << "\\n";',
            "}", "", f"return {a} + {b};", f"{a}.{b}({c}, \"{rng.choice(ENGLISH)}_{rng.randint(0, 9)}\");",
        ])
        out.append(indent + line + "\n")
    return "".join(out)


def _numbers(rng, size):
    out = []
    while sum(map(len, out)) < size:
        out.append(",".join([f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                             f"{rng.uniform(-1000, 1000):.{rng.randint(0, 6)}f}", str(rng.randint(-10**9, 10**9)),
                             f"0x{rng.getrandbits(32):08x}", f"{rng.random():.3e}", f"{rng.randint(0, 100)}%",
                             f"{rng.randint(1, 999):,}", f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}"])
                   + "\n")
    return "".join(out)


def _unicode(rng, size):
    out = []
    while sum(len(s.encode()) for s in out) < size:
        language = rng.choice(list(UNICODE_WORDS))
        words = rng.choices(UNICODE_WORDS[language], k=rng.randint(4, 14))
        joiner = "" if language in ("zh", "ja") and rng.random() < 0.7 else " "
        out.append(joiner.join(words) + rng.choice(["。", ".", "!", "?", "،", "।", ""]) + rng.choice([" ", "\n"]))
    return "".join(out)


def _english(rng, size):
    out = []
    while sum(map(len, out)) < size:
        words = rng.choices(ENGLISH * 3 + CONTRACTIONS, k=rng.randint(5, 18))
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + rng.choice([".", ",", "!", "?", ";", " --"]) + rng.choice([" ", " ", "\n", "\n\n"]))
    return "".join(out)


def _runs(rng, size):
    out = []
    while sum(len(s.encode()) for s in out) < size:
        unit = rng.choice(RUN_UNITS)
        length = int(2 ** rng.uniform(3, 9))  # 8 .. 512 bytes, as many short as long
        out.append(rng.choice(["", "x", "\n", " "]) + unit * max(1, length // len(unit.encode())) + rng.choice(["\n", " end\n", ""]))
    return "".join(out)


def mixed_corpus(seed, megabytes):
    """The parts (name -> text) and their interleaving, the mixed corpus: paragraphs of each part in a
    shuffled order, so the word cache and the merges see the parts as a real file would mix them."""
    rng = random.Random(seed)
    total = int(megabytes * 1e6)
    shares = {"code": 0.35, "numbers": 0.15, "unicode": 0.2, "english": 0.15, "runs": 0.15}
    makers = {"code": _code, "numbers": _numbers, "unicode": _unicode, "english": _english, "runs": _runs}
    parts = {name: makers[name](rng, int(total * share)) for name, share in shares.items()}
    chunks = []
    for name, text in parts.items():
        lines = text.splitlines(keepends=True)
        for at in range(0, len(lines), 8):
            chunks.append("".join(lines[at:at + 8]))
    rng.shuffle(chunks)
    return parts, "".join(chunks)


# ---- timing ----------------------------------------------------------------------------------------

def time_tiktoken(encoding, text, warmup, repeats):
    """Median ms per call by the wall clock and by this thread's CPU time."""
    for _ in range(warmup):
        encoding.encode_ordinary(text)
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        encoding.encode_ordinary(text)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.thread_time() - start_cpu) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def run_cpp(binary, data_dir, *args):
    done = subprocess.run([binary, "--data-dir", data_dir, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def side_by_side(binary, data_dir, encoding, name, path, text, args):
    """Rounds of C++ then tiktoken (the order alternating); medians over rounds and the per-round ratio, by the
    wall clock and by CPU time (which time another program had the core does not count in)."""
    megabytes = len(text.encode("utf-8")) / 1e6
    tiktoken_repeats = max(1, min(args.repeats, int(args.tiktoken_budget_s / max(megabytes / 15, 1e-3))))
    rounds, others = [], []
    for r in range(args.rounds):
        got = {}
        for side in (["cpp", "tiktoken"] if r % 2 == 0 else ["tiktoken", "cpp"]):
            if side == "cpp":
                result = run_cpp(binary, data_dir, "--file", path, "--warmup", str(args.warmup), "--repeats",
                                 str(args.repeats))
                got["cpp"], got["cpp_cpu"] = result["median_ms"], result["cpu_median_ms"]
                got["load_ms"] = result["load_ms"]
                others.append(result["contention"].get("others_cores", -1))
                tokens = result["tokens"]
            else:
                got["tiktoken"], got["tiktoken_cpu"] = time_tiktoken(encoding, text, min(args.warmup, 1),
                                                                     tiktoken_repeats)
        rounds.append(got)

    def median(key):
        return statistics.median(r[key] for r in rounds)

    ratios = [r["tiktoken"] / r["cpp"] for r in rounds]
    cpu_ratios = [r["tiktoken_cpu"] / r["cpp_cpu"] for r in rounds]
    return {"name": name, "bytes": len(text.encode("utf-8")), "tokens": tokens, "rounds": rounds,
            "cpp_ms": median("cpp"), "tiktoken_ms": median("tiktoken"),
            "cpp_mb_s": megabytes / (median("cpp") / 1e3), "tiktoken_mb_s": megabytes / (median("tiktoken") / 1e3),
            "cpp_cpu_mb_s": megabytes / (median("cpp_cpu") / 1e3),
            "tiktoken_cpu_mb_s": megabytes / (median("tiktoken_cpu") / 1e3),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "cpu_ratio": statistics.median(cpu_ratios), "others_cores": max(others),
            "tiktoken_repeats": tiktoken_repeats, "load_ms": median("load_ms")}


def worst_case_svg(rows, path):
    """A line per unit: ms per MB against the length (log scale)."""
    width, height, left, bottom, top, right = 640, 360, 60, 40, 20, 150
    lengths = [p["bytes"] for p in rows[0]["points"]]
    top_value = max(p["cpu_ms_per_mb"] for row in rows for p in row["points"]) * 1.15
    import math

    def x(n):
        return left + (math.log2(n) - math.log2(lengths[0])) / max(math.log2(lengths[-1] / lengths[0]), 1) * \
            (width - left - right)

    def y(v):
        return height - bottom - v / top_value * (height - bottom - top)

    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
             f'<text x="{left}" y="{top - 6}">ms per MB (CPU time) of one piece of a repeated unit</text>']
    for n in lengths:
        parts.append(f'<text x="{x(n):.0f}" y="{height - bottom + 15}" text-anchor="middle">{n // 1024} KiB</text>')
    for k in range(5):
        v = top_value * k / 4
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.0f}" text-anchor="end">{v:.0f}</text>')
    for i, row in enumerate(rows):
        color = colors[i % len(colors)]
        points = " ".join(f"{x(p['bytes']):.1f},{y(p['cpu_ms_per_mb']):.1f}" for p in row["points"])
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{width - right + 10}" y="{top + 14 * (i + 1)}" fill="{color}">'
                     f'{json.dumps(row["unit"], ensure_ascii=False)[1:-1] or "?"}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")


def machine():
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--bin", required=True, help="the bench_tokenizer program")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of C++ and tiktoken per corpus")
    parser.add_argument("--tiktoken-budget-s", type=float, default=3.0, help="fewer tiktoken repeats past this")
    parser.add_argument("--strings", type=int, default=1_000_000, help="generated strings compared with tiktoken")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--mixed-mb", type=float, default=2.0, help="size of the mixed corpus")
    parser.add_argument("--svg", default="", help="write the worst-case curve here")
    parser.add_argument("--json", default="", help="write every number measured here")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: speed,steps,worst,parity")
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.strings < 0 or args.rounds < 1:
        parser.error("--repeats and --rounds must be >= 1, --warmup and --strings >= 0")
    skip = set(filter(None, args.skip.split(",")))
    import tiktoken

    encoding = parity.load_tiktoken(args.data_dir)
    report = {"machine": machine(), "tiktoken": tiktoken.__version__, "python": platform.python_version(),
              "load_before": os.getloadavg(), "args": vars(args)}
    print(f"machine: {report['machine']}; tiktoken {tiktoken.__version__}, Python {report['python']}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in report['load_before'])}")

    shakespeare_path = os.path.join(args.data_dir, "tinyshakespeare", "input.txt")
    with open(shakespeare_path, encoding="utf-8") as f:
        shakespeare = f.read()
    parts, mixed = mixed_corpus(args.seed, args.mixed_mb)
    work = tempfile.mkdtemp(prefix="bench-tokenizer-")
    corpora = [("tiny shakespeare", shakespeare_path, shakespeare)]
    for name, text in [("mixed", mixed)] + [(f"  {k}", v) for k, v in parts.items()]:
        path = os.path.join(work, name.strip() + ".txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        corpora.append((name, path, text))
    failures = 0
    try:
        if "speed" not in skip:
            print(f"\n1. speed, one thread each: median of {args.repeats} after {args.warmup} warm-up, "
                  f"{args.rounds} rounds alternating; ratio = tiktoken time / C++ time within a round")
            print(f"{'corpus':<18}{'MB':>7}{'C++ ms':>9}{'C++ MB/s':>10}{'tiktoken ms':>13}{'tiktoken MB/s':>15}"
                  f"{'ratio':>8}{'(min-max)':>14}{'| by CPU time: C++':>19}{'tiktoken':>10}{'ratio':>8}"
                  f"{'others':>8}")
            report["speed"] = []
            for name, path, text in corpora:
                row = side_by_side(args.bin, args.data_dir, encoding, name, path, text, args)
                report["speed"].append(row)
                print(f"{name:<18}{row['bytes'] / 1e6:>7.3f}{row['cpp_ms']:>9.2f}{row['cpp_mb_s']:>10.1f}"
                      f"{row['tiktoken_ms']:>13.1f}{row['tiktoken_mb_s']:>15.1f}{row['ratio']:>7.2f}x"
                      f"{row['ratio_min']:>8.2f}-{row['ratio_max']:<5.2f}{row['cpp_cpu_mb_s']:>19.1f}"
                      f"{row['tiktoken_cpu_mb_s']:>10.1f}{row['cpu_ratio']:>7.2f}x{row['others_cores']:>8.2f}")
            print("MB/s by the wall clock (median of the rounds' medians), then by each side's own CPU time; others: "
                  "the most CPU (in cores) other programs used during a C++ measurement")

        if "steps" not in skip:
            print(f"\n2. where encode() spends its time (bench_tokenizer --steps: each step timed round by round, "
                  f"median of {args.repeats})")
            report["steps"] = {}
            for name, path, _ in corpora[:2]:
                steps = run_cpp(args.bin, args.data_dir, "--steps", "--file", path, "--warmup", str(args.warmup),
                                "--repeats", str(args.repeats))
                report["steps"][name] = steps
                ms = steps["ms"]
                total = ms["encode"]
                print(f"{name}: {steps['pieces']} pieces; {steps['single_bytes']} of one byte, "
                      f"{steps['cache_hits']} word-cache hits, {steps['whole_tokens']} misses that are one token, "
                      f"{steps['merged']} merged ({steps['merged_bytes']} bytes); others "
                      f"{steps['contention'].get('others_cores', -1):.2f} cores")
                rows = [("encode(), all of it", total),
                        ("pre-tokenizer alone (count_pieces)", ms["pretokenize"]),
                        ("pieces -> ids, word cache on (encode_pieces)", ms["pieces_cached"]),
                        ("pieces -> ids, no word cache", ms["pieces_uncached"]),
                        ("the misses: each distinct piece once, uncached", ms["distinct_pieces"]),
                        ("  of which BPE merges (pieces that are not a token)", ms["merged_pieces"]),
                        ("word cache hits: cached pieces -> ids less the misses", ms["pieces_cached"] - ms["distinct_pieces"])]
                for label, value in rows:
                    print(f"  {label:<56}{value:>8.2f} ms {100 * value / total:>6.1f}%")

        if "worst" not in skip:
            print("\n3. worst case: one piece of a repeated unit; ms per MB (fastest of 3, this thread's CPU time), "
                  "and its ratio to 64 KiB's")
            worst = run_cpp(args.bin, args.data_dir, "--worst-case", "--repeats", "3")["worst_case"]
            report["worst_case"] = worst
            lengths = [p["bytes"] for p in worst[0]["points"]]
            print(f"{'unit':<8}" + "".join(f"{f'{n // 1024} KiB':>10}" for n in lengths) + f"{'1 MiB / 64 KiB':>16}"
                  f"{'wall ms, 1 MiB':>16}")
            for row in worst:
                values = [p["cpu_ms_per_mb"] for p in row["points"]]
                print(f"{json.dumps(row['unit'], ensure_ascii=False):<8}" + "".join(f"{v:>10.2f}" for v in values) +
                      f"{values[-1] / values[0]:>15.2f}x{row['points'][-1]['min_ms']:>16.1f}")
            if args.svg:
                worst_case_svg(worst, args.svg)
                print(f"curve written to {args.svg}")
            print("tiktoken on the same one piece, ms per MB (one call each, wall clock):")
            report["tiktoken_worst_case"] = []
            for unit in ["a", "ab"]:
                cells = []
                for n in [4096, 8192, 16384, 32768]:
                    text = unit * (n // len(unit))
                    start = time.perf_counter()
                    encoding.encode_ordinary(text)
                    seconds = time.perf_counter() - start
                    cells.append((n, seconds * 1e3 / (n / 1e6)))
                report["tiktoken_worst_case"].append({"unit": unit, "points": cells})
                print(f"  {json.dumps(unit):<6}" + "".join(f"{n // 1024:>4} KiB {v:>9.0f} ms/MB" for n, v in cells))

        if "parity" not in skip:
            print("\n4. exactness, token for token against tiktoken")
            for name, path, text in corpora[:2]:
                failures += parity.compare(f"{name}, whole ({len(text.encode())} bytes)",
                                           parity.cpp_encode(args.bin, args.data_dir, [text.encode("utf-8")]),
                                           [encoding.encode_ordinary(text)], [path])
            start = time.perf_counter()
            failures += parity.run_parity(args.bin, args.data_dir, encoding, args.strings, args.seed, 1,
                                          shakespeare=False)
            report["parity"] = {"strings": args.strings, "seed": args.seed, "mismatches": failures,
                                "seconds": time.perf_counter() - start}
    finally:
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    report["load_after"] = os.getloadavg()
    print(f"\nload average after: {' '.join(f'{v:.2f}' for v in report['load_after'])}")
    print("ALL IDENTICAL" if failures == 0 else f"{failures} MISMATCHES")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, ensure_ascii=False)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
