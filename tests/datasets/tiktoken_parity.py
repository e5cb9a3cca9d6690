#!/usr/bin/env python3
"""The C++ GPT2Tokenizer against tiktoken's `gpt2`, token for token: generated strings (Unicode classes,
contractions, digits, white-space runs, long runs, invalid UTF-8), every code point in several contexts, and
the whole of tiny shakespeare.

As a test (CTest datasets.tiktoken_parity): exit 0 when every string agrees, 1 at a mismatch (the first few
are printed), 77 (CTest: skipped) when tiktoken cannot be imported; missing data files are a failure, as in
the other dataset tests. scripts/maintainers/bench-tokenizer.py imports it for the long run (10^6 strings).

  tests/datasets/tiktoken_parity.py --bin build/bin/bench_tokenizer [--data-dir DIR] [--strings N] [--seed S]

tiktoken cannot download here: its encoding is built from the data directory's encoder.json and vocab.bpe
with tiktoken's own loader (data_gym_to_mergeable_bpe_ranks), which also checks that they agree.

Invalid UTF-8 (gpt2_tokenizer.h): a Python str cannot hold it, so tiktoken never sees it. The C++ rule is
checked against the model it states: the bytes are cut into maximal valid UTF-8 stretches and single invalid
bytes (Python's decoder with errors="surrogateescape" makes the same cut), each stretch is what tiktoken
gives it, each invalid byte is the token of that byte.
"""
import argparse
import array
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

# The pattern tiktoken_ext/openai_public.py gives `gpt2`.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def have_tiktoken():
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


def reexec_with_venv():
    """Without tiktoken here, runs this script again with the checkout's .venv Python when that one differs."""
    venv_python = os.path.join(ROOT, ".venv", "bin", "python")
    if have_tiktoken() or not os.access(venv_python, os.X_OK) or os.environ.get("SPEEDLABS_PARITY_REEXEC"):
        return
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        return
    os.environ["SPEEDLABS_PARITY_REEXEC"] = "1"
    os.execv(venv_python, [venv_python] + sys.argv)


def resolve_data_dir(flag):
    return flag or os.environ.get("SPEEDLABS_DATA_DIR") or os.path.join(ROOT, "data")


def load_tiktoken(data_dir):
    """tiktoken's gpt2 Encoding from the local files (no network, no cache directory)."""
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    for name in ("vocab.bpe", "encoder.json"):
        if not os.path.isfile(os.path.join(data_dir, "gpt2", name)):
            raise SystemExit(f"missing {os.path.join(data_dir, 'gpt2', name)} (set SPEEDLABS_DATA_DIR or ./lab setup)")
    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(data_dir, "gpt2", "vocab.bpe"),
                                            os.path.join(data_dir, "gpt2", "encoder.json"))
    return tiktoken.Encoding(name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


# ---- the C++ side ----------------------------------------------------------------------------------

def cpp_encode(binary, data_dir, byte_strings, chunk=100_000):
    """The C++ ids of each byte string (bench_tokenizer --encode-frames), a chunk of strings per process."""
    results = []
    for start in range(0, len(byte_strings), chunk):
        part = byte_strings[start:start + chunk]
        with tempfile.NamedTemporaryFile("wb", suffix=".frames", delete=False) as f:
            for b in part:
                f.write(struct.pack("<I", len(b)))
                f.write(b)
            path = f.name
        try:
            done = subprocess.run([binary, "--data-dir", data_dir, "--encode-frames", path], capture_output=True)
        finally:
            os.unlink(path)
        if done.returncode != 0:
            raise SystemExit(f"{binary} --encode-frames exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        out = done.stdout
        words = array.array("i")
        words.frombytes(out)
        if sys.byteorder != "little":
            words.byteswap()
        at = 0
        for _ in part:
            count = words[at]
            results.append(words[at + 1:at + 1 + count].tolist())
            at += 1 + count
        if at != len(words):
            raise RuntimeError("bench_tokenizer --encode-frames gave more output than frames")
    return results


# ---- what tiktoken says ----------------------------------------------------------------------------

_ESCAPED = re.compile("([\udc80-\udcff])")


def expected_ids(encoding, byte_strings):
    """tiktoken's ids of each byte string: valid UTF-8 as tiktoken encodes it; otherwise each maximal valid
    stretch as tiktoken encodes it and each invalid byte as its own byte's token."""
    byte_token = [encoding._mergeable_ranks[bytes([b])] for b in range(256)]
    texts, plans = [], []
    for b in byte_strings:
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            plans.append([("text", len(texts))])
            texts.append(text)
            continue
        plan = []
        for part in _ESCAPED.split(b.decode("utf-8", "surrogateescape")):
            if not part:
                continue
            if len(part) == 1 and 0xDC80 <= ord(part) <= 0xDCFF:
                plan.append(("byte", byte_token[ord(part) - 0xDC00]))
            else:
                plan.append(("text", len(texts)))
                texts.append(part)
        plans.append(plan)
    encoded = encoding.encode_ordinary_batch(texts)
    out = []
    for plan in plans:
        ids = []
        for kind, value in plan:
            if kind == "text":
                ids.extend(encoded[value])
            else:
                ids.append(value)
        out.append(ids)
    return out


# ---- generated strings -----------------------------------------------------------------------------

WHITE_SPACE = ["\t", "\n", "\u000b", "\u000c", "\r", " ", "\u0085", "\u00a0", "\u1680"] + \
              [chr(c) for c in range(0x2000, 0x200B)] + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NOT_WHITE_SPACE = ["\u180e", "\u200b", "\u2060", "\ufeff", "\u001c", "\u001d", "\u001e", "\u001f", "\u0000"]
LETTERS = list("abcxyzXYZQ") + list("éßøłŁİıǅǈªº") + list("ПриветΓειάשלוםمرحبا") + list("日本語中文한국어ｶﾀｶﾅ") + \
          ["\U0001d518", "\U0001d52b", "\U00010400", "\u1c89", "\ua7cb", "\U000105c0", "\u02b0"]
NUMBERS = list("0123456789") + list("٣٤٥۶१२০") + list("ⅷⅫ½¾²³⁴₅①⑳") + ["\U0001d7d8", "\U0001d7d9", "１", "\U00010107"]
MARKS_AND_OTHERS = list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + \
                   ["\u0301", "\u0308", "\u093f", "\u094d", "\u200d", "\ufe0f", "\u2019", "\u00ad", "\u0007", "\u007f",
                    "€", "£", "©", "™", "→", "—", "…", "«", "»", "😀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "🧑🏿‍💻", "\U000e0041"]
APOSTROPHES = ["'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "''", "'''s",
               "'x", "' ", "'\n", "'1", "'é", "’s", "'ss", "'dd", "'lll", "'rev"]
WORDS = ["the", "The", " the", "don", "won", "I", "you", "they", "hello", "world", "naïve", "café", "Straße",
         "привет", "東京", "x", "ab", "abc", "aaaa", "   ", "\n\n", "\t\t", "1234567", "3.14", "0x1F", "<|endoftext|>",
         "<|", "|>", "endoftext", "http://a.b/c?d=1", "foo_bar", "camelCase", "__init__", "-->", "===", "...",
         "!!", "??", " '", " ''", "  x", " \u3000x", "\u00a0 x"]
EVERYTHING = WHITE_SPACE + NOT_WHITE_SPACE + LETTERS + NUMBERS + MARKS_AND_OTHERS + APOSTROPHES + WORDS
RUN_UNITS = ["a", "ab", " ", "  x", "\n", "\t", "1", "12", "!", "é", "日", "😀", "z9", "\u3000", " \n", "'s", "-", "=",
             "\u00a0", "ｶ", "aé", "ΓΓ", "\r\n"]
LONG_WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "ing", "tion", "Hello", "WORLD", "naïve",
              "ation", "ness", "un", "re", "pre", "ly", "ed", "Straße", "привет", "日本"]
CODE_LINES = ["def f(x, y=1):", "    return x ** 2 + y", "for (size_t i = 0; i < n; ++i) {", "        sum += a[i] * b[i];",
              "}", "#include <vector>", "if (x != nullptr && *x >= 0x7F) throw Error(\"bad\");", "\t\tcase 'a': break;",
              "// TODO: don't forget the user's data", "let v: Vec<u32> = (0..10).map(|i| i * i).collect();",
              "SELECT id, name FROM users WHERE age >= 18;", "    x = [1, 2, 3]  # a list", "", "        "]


def _invalid_utf8(rng, base):
    """@p base with 1-3 invalid UTF-8 sequences put in."""
    bad = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe2\x82",
           b"\xf0\x9f\x98", b"\xe2", b"\xf0", b"\xc3\xc3", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc"]
    out = bytearray(base)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(out))
        piece = rng.choice(bad) if rng.random() < 0.8 else bytes([rng.randint(0x80, 0xff)])
        out[at:at] = piece
    if rng.random() < 0.2 and len(out) > 2:  # cut a character short, wherever it is
        del out[rng.randint(0, len(out) - 1)]
    return bytes(out)


def generate(count, seed):
    """@p count byte strings from a fixed seed: Unicode classes, contractions, digits, white space, long runs,
    code, and about one in eight with invalid UTF-8 in it."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = i % 8
        if kind == 0:  # everything mixed
            text = "".join(rng.choices(EVERYTHING, k=rng.randint(0, 40)))
        elif kind == 1:  # any code point but surrogates, mostly low ones
            top = rng.choice([0x7F, 0xFF, 0x7FF, 0xFFFF, 0x10FFFF])
            text = "".join(chr(c) for c in (rng.randint(0, top) for _ in range(rng.randint(0, 30)))
                           if not 0xD800 <= c <= 0xDFFF)
        elif kind == 2:  # white-space runs between words, numbers and marks
            parts = []
            for _ in range(rng.randint(1, 10)):
                parts.append("".join(rng.choices(WHITE_SPACE + [" "] * 10, k=rng.randint(1, 12))))
                parts.append(rng.choice(LETTERS + NUMBERS + MARKS_AND_OTHERS + APOSTROPHES + NOT_WHITE_SPACE))
            text = "".join(parts[rng.randint(0, 1):] if rng.random() < 0.5 else parts[:-1])
        elif kind == 3:  # contractions
            text = "".join(rng.choice([rng.choice(WORDS), rng.choice(APOSTROPHES), rng.choice(LETTERS), " "])
                           for _ in range(rng.randint(1, 14)))
        elif kind == 4:  # numbers
            text = "".join(rng.choice([str(rng.randint(0, 10 ** rng.randint(1, 12))), rng.choice(NUMBERS),
                                       rng.choice(".,:-/ eE+x%"), rng.choice(LETTERS), " "])
                           for _ in range(rng.randint(1, 16)))
        elif kind == 5:  # long pieces: runs of one unit, and words, digits or symbols without a space between
            if rng.random() < 0.5:
                unit = rng.choice(RUN_UNITS)
                text = rng.choice(["", " ", "x", "1"]) + unit * rng.randint(20, 300) + \
                    rng.choice(["", " end", "\n", "!", "9"])
            else:
                source = rng.choice([LONG_WORDS, list("0123456789"), list("!#$%&*+-./:<=>?@^_|~"), LETTERS + NUMBERS])
                text = rng.choice(["", " "]) + "".join(rng.choices(source, k=rng.randint(10, 120)))
        elif kind == 6:  # code
            text = "\n".join(rng.choices(CODE_LINES, k=rng.randint(1, 5)))
        else:  # invalid UTF-8 in any of the above
            source = rng.choice(["".join(rng.choices(EVERYTHING, k=rng.randint(0, 20))),
                                 rng.choice(RUN_UNITS) * rng.randint(1, 80), rng.choice(CODE_LINES)])
            out.append(_invalid_utf8(rng, source.encode("utf-8")))
            continue
        out.append(text.encode("utf-8"))
    return out


def code_point_sweep(step=1):
    """Every @p step-th code point (no surrogates) in contexts that make each class split differently:
    after a letter and a digit, after a space, doubled, before a contraction, in a space run and before one."""
    strings, batch = [], []
    for c in range(0, 0x110000, step):
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        batch.append(f"x{ch}7{ch} {ch}{ch}'s{ch}  {ch}\u3000 ")
        if len(batch) == 256:
            strings.append("".join(batch).encode("utf-8"))
            batch = []
    if batch:
        strings.append("".join(batch).encode("utf-8"))
    return strings


def _short(value, limit=160):
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(value)} in all)"


def compare(label, ours, theirs, strings, show=3):
    """Prints one line for the comparison (and the first mismatches); returns the number of mismatches."""
    bad = [i for i in range(len(strings)) if ours[i] != theirs[i]]
    print(f"{label}: {len(strings) - len(bad)} of {len(strings)} identical")
    for i in bad[:show]:
        a, b = ours[i], theirs[i]
        at = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
        print(f"  MISMATCH in {_short(strings[i])}\n    from token {at}: C++ {a[at:at + 8]} tiktoken {b[at:at + 8]}")
    return len(bad)


def run_parity(binary, data_dir, encoding, count, seed, sweep_step, shakespeare=True):
    """The whole comparison; returns the number of mismatches."""
    failures = 0
    start = time.perf_counter()
    strings = generate(count, seed)
    failures += compare(f"{count} generated strings (seed {seed}, {sum(not _valid(s) for s in strings)} with "
                        f"invalid UTF-8)", cpp_encode(binary, data_dir, strings), expected_ids(encoding, strings),
                        strings)
    sweep = code_point_sweep(sweep_step)
    failures += compare(f"code point sweep (every {sweep_step}. code point, {len(sweep)} strings)",
                        cpp_encode(binary, data_dir, sweep), expected_ids(encoding, sweep), sweep)
    if shakespeare:
        path = os.path.join(data_dir, "tinyshakespeare", "input.txt")
        with open(path, "rb") as f:
            text = f.read()
        failures += compare("tiny shakespeare, whole", cpp_encode(binary, data_dir, [text]),
                            [encoding.encode_ordinary(text.decode("utf-8"))], [path])
    print(f"({time.perf_counter() - start:.1f} s)")
    return failures


def _valid(b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the bench_tokenizer program")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--strings", type=int, default=40_000)
    parser.add_argument("--seed", type=int, default=20240501)
    parser.add_argument("--sweep-step", type=int, default=3, help="every how many code points the sweep takes")
    args = parser.parse_args()
    reexec_with_venv()
    if not have_tiktoken():
        print("SKIPPED: tiktoken is not importable here (pip install tiktoken into .venv to run this test)")
        return 77
    data_dir = resolve_data_dir(args.data_dir)
    encoding = load_tiktoken(data_dir)
    failures = run_parity(args.bin, data_dir, encoding, args.strings, args.seed, args.sweep_step)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
