#!/usr/bin/env python3
"""Side-by-side: the C++ GPT2Tokenizer (build/bin/bench_tokenizer) against Python's tiktoken `gpt2`.

Speed: both encode the whole file single-threaded, warm-up then repeats, median reported.
Parity: token for token on the whole file and on random and adversarial strings.
tiktoken cannot download here, so its `gpt2` encoding is built from the data directory's
encoder.json and vocab.bpe (tiktoken's own data_gym loader, which also checks they agree).
Exit status: 0 all equal, 1 a mismatch (the first one is printed), 2 bad usage.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

# The same pattern tiktoken_ext/openai_public.py gives `gpt2`.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def tiktoken_gpt2(data_dir):
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files, copy them nowhere
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(data_dir, "gpt2", "vocab.bpe"),
                                            os.path.join(data_dir, "gpt2", "encoder.json"))
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


# Characters chosen to stress the pattern: every kind of Unicode whitespace, letters and numbers of
# many scripts, marks, joiners, emoji with modifiers, apostrophes, digits.
INTERESTING = (list("abcXYZ019'\"-.,!? \t\n\r") + ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL"] +
               ["\u000b", "\u000c", "\u001c", "\u001d", "\u001e", "\u001f", "\u0085", "\u00a0", "\u1680",
                "\u2000", "\u2007", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
                "\ufeff", "\u180e"] +
               list("éßøłŁİıǅ") + list("Привет") + list("Γειά") + list("שלום") + list("مرحبا٣٤٥") +
               list("नमस्ते१२") + list("日本語中文한국어ｶﾀｶﾅ") + list("ⅷ½²³⁴₅①") + ["\u0301", "\u200d", "\ufe0f"] +
               ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "🧑🏿‍💻"] + ["𝔘𝔫𝔦", "𝟘𝟙", "\U00010400", "\U0001f600"])


def random_strings(count, seed):
    rng = random.Random(seed)
    strings = []
    for i in range(count):
        kind = i % 4
        if kind == 0:  # a mix of interesting pieces
            strings.append("".join(rng.choice(INTERESTING) for _ in range(rng.randint(0, 40))))
        elif kind == 1:  # any code point (no surrogates), mostly low ones
            top = rng.choice([0x7F, 0x7FF, 0xFFFF, 0x10FFFF])
            chars = [rng.randint(0, top) for _ in range(rng.randint(0, 30))]
            strings.append("".join(chr(c) for c in chars if not 0xD800 <= c <= 0xDFFF))
        elif kind == 2:  # whitespace runs around words
            strings.append("".join(rng.choice([" " * rng.randint(1, 9), "\n" * rng.randint(1, 4), "\t", " \n ",
                                               "\u3000\u00a0", "word", "Word", "42", "'ll", "!"])
                                   for _ in range(rng.randint(1, 12))))
        else:  # long runs that make BPE merge long pieces
            unit = rng.choice(["a", "ab", " ", "1", "!", "é", "日", "😀", "z9"])
            strings.append(unit * rng.randint(50, 400) + rng.choice(["", " end", "\n"]))
    return strings


def cpp_encode(binary, data_dir, strings):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(strings, f)
        path = f.name
    try:
        out = subprocess.run([binary, "--data-dir", data_dir, "--encode-json", path], check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


def first_mismatch(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--bin", required=True, help="the bench_tokenizer program")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--strings", type=int, default=4000, help="random and adversarial strings to compare")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.strings < 0:
        parser.error("--repeats must be >= 1, --warmup and --strings >= 0")

    path = os.path.join(args.data_dir, "tinyshakespeare", "input.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    megabytes = len(text.encode("utf-8")) / 1e6
    encoding = tiktoken_gpt2(args.data_dir)

    for _ in range(args.warmup):
        encoding.encode_ordinary(text)
    samples = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        expected = encoding.encode_ordinary(text)
        samples.append((time.perf_counter() - start) * 1e3)
    tiktoken_ms = statistics.median(samples)

    cpp = json.loads(subprocess.run([args.bin, "--data-dir", args.data_dir, "--warmup", str(args.warmup),
                                     "--repeats", str(args.repeats)], check=True, capture_output=True,
                                    text=True).stdout)
    print(f"encoding {path} ({megabytes:.3f} MB), one thread, median of {args.repeats} after {args.warmup} warm-up")
    print(f"{'':<22}{'median ms':>10}{'min ms':>10}{'max ms':>10}{'MB/s':>9}{'tokens':>9}")
    print(f"{'C++ GPT2Tokenizer':<22}{cpp['median_ms']:>10.1f}{cpp['min_ms']:>10.1f}{cpp['max_ms']:>10.1f}"
          f"{cpp['mb_per_s']:>9.1f}{cpp['tokens']:>9}")
    print(f"{'tiktoken (Python)':<22}{tiktoken_ms:>10.1f}{min(samples):>10.1f}{max(samples):>10.1f}"
          f"{megabytes / (tiktoken_ms / 1e3):>9.1f}{len(expected):>9}")
    print(f"C++ / tiktoken speed: {tiktoken_ms / cpp['median_ms']:.2f}x (C++ tokenizer load: {cpp['load_ms']:.0f} ms)")

    failures = 0
    whole = cpp_encode(args.bin, args.data_dir, [text])[0]
    at = first_mismatch(whole, expected)
    if at is None:
        print(f"whole file: {len(whole)} tokens, identical")
    else:
        failures += 1
        print(f"whole file: MISMATCH at token {at}: C++ {whole[at:at + 8]} tiktoken {expected[at:at + 8]}")

    strings = random_strings(args.strings, args.seed)
    ours = cpp_encode(args.bin, args.data_dir, strings)
    bad = [i for i, s in enumerate(strings) if ours[i] != encoding.encode_ordinary(s)]
    print(f"{len(strings)} random and adversarial strings (seed {args.seed}): {len(strings) - len(bad)} identical")
    for i in bad[:5]:
        print(f"  MISMATCH {strings[i]!r}: C++ {ours[i]} tiktoken {encoding.encode_ordinary(strings[i])}")
    failures += len(bad)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
