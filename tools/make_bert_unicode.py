#!/usr/bin/env python3
"""Writes text/bert_unicode.inc, the Unicode tables of the WordPiece (BERT) tokenizer, by probing
Hugging Face `tokenizers` itself, then checks that the C++ algorithm, simulated here from the
tables as written, gives what `tokenizers` gives.

    /path/to/python tools/make_bert_unicode.py [--out text/bert_unicode.inc] [--random 20000]

Probing the package, not Python's unicodedata, is deliberate: its Rust crates carry their own Unicode
data, of several ages (0.23.3: the control, nonspacing-mark and punctuation tests predate Unicode 9,
NFD lacks Unicode 13's U+11938, lowercase has Unicode 16's), and we want its ids, not the standard's.
Every code point but the surrogates goes through BertNormalizer with one option on at a time, NFD,
and BertPreTokenizer. Unassigned code points are kept, not removed as controls.

The algorithm (text/wordpiece_tokenizer.cc), for each code point c of the input in order:
  a. clean_text: drop c if in kBertControl; else if in kBertWhitespace, c becomes ' '.
  b. handle_chinese_chars: c in kBertChinese becomes ' ' c ' '.
  c. strip_accents: each code point -> its decomposition (kBertDecompose, Hangul by formula, else
     itself); then drop those in kBertMarks.
  d. lowercase: each code point -> its kBertLower mapping, else itself.
Pre-tokenizer: code points in kBertSplitSpace separate words and are dropped; each one in
kBertPunct is a word of its own; runs of the others are words.

Checks: (i) every code point, alone and as "a" c "b", with all options on and with only clean_text
and handle_chinese_chars on: normalized text and words; (ii) random strings over many scripts with
random options, and the real tokenizer's ids (WordPiece simulated too); (iii) strings built to hit
the one known divergence, below. Writes the file only if no mismatch is left unexplained.

Known divergence: Hugging Face runs NFD over the whole string, and NFD puts each run of code points
with a nonzero canonical combining class in class order; step c decomposes code point by code point
and never reorders. Once the marks are dropped that shows only where one run keeps two code points
(not in kBertMarks) of different classes out of class order. The summary lists those code points
("reorderable": 83 in 0.23.3, Mc viramas, U+302E/F, musical stems and flags, and marks newer than
the package's Mn table, e.g. U+08D4.., U+1E000.., U+1E944..); ordinary text seldom puts two of
them in one run. Matching it would take a combining-class table, which these tables leave out;
check (iii) confirms that every mismatch it finds is this reordering and nothing else.
"""
import argparse
import json
import os
import random
import re
import sys
import time

import tokenizers
from tokenizers import Tokenizer, normalizers, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
OPTIONS = ("clean_text", "handle_chinese_chars", "strip_accents", "lowercase")


def code_points():
    return (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def bert_normalizer(**on):
    return normalizers.BertNormalizer(**{o: on.get(o, False) for o in OPTIONS})


def words(pre_tokenized):
    return [w for w, _ in pre_tokenized]


def hangul(c):
    """Unicode's canonical decomposition of a Hangul syllable, or None."""
    if not HANGUL_FIRST <= c <= HANGUL_LAST:
        return None
    i = c - HANGUL_FIRST
    out = chr(0x1100 + i // 588) + chr(0x1161 + i % 588 // 28)
    return out + chr(0x11A7 + i % 28) if i % 28 else out


# ---- probing ----

def probe():
    clean = bert_normalizer(clean_text=True)
    chinese = bert_normalizer(handle_chinese_chars=True)
    strip = bert_normalizer(strip_accents=True)
    lower = bert_normalizer(lowercase=True)
    nfd = normalizers.NFD()  # what strip_accents runs before dropping marks
    pre = pre_tokenizers.BertPreTokenizer()
    t = {k: [] for k in ("control", "whitespace", "chinese", "marks", "split", "punct", "reorderable")}
    t["decompose"], t["lower"] = {}, {}
    for c in code_points():
        s = chr(c)
        r = clean.normalize_str(s)
        if r == "":
            t["control"].append(c)
        elif r == " " and c != 0x20:
            t["whitespace"].append(c)
        else:
            assert r == s, hex(c)
        r = chinese.normalize_str(s)
        if r != s:
            assert r == f" {s} ", hex(c)
            t["chinese"].append(c)
        d = nfd.normalize_str(s)
        if d != s:
            if hangul(c):
                assert d == hangul(c), hex(c)
            else:
                t["decompose"][c] = d
        elif strip.normalize_str(s) == "":
            # Only code points that NFD leaves alone can reach the mark filter.
            t["marks"].append(c)
        else:
            # A survivor that NFD would reorder: U+0334 has class 1, U+0345 class 240, the extremes.
            if nfd.normalize_str(s + "\u0334") != s + "\u0334" or nfd.normalize_str("\u0345" + s) != "\u0345" + s:
                t["reorderable"].append(c)
        r = lower.normalize_str(s)
        if r != s:
            t["lower"][c] = r
        w = words(pre.pre_tokenize_str(f"a{s}b"))
        if w == ["a", "b"]:
            assert words(pre.pre_tokenize_str(s)) == [], hex(c)
            t["split"].append(c)
        elif w == ["a", s, "b"]:
            t["punct"].append(c)
        else:
            assert w == [f"a{s}b"], hex(c)
    # Decomposition then the mark filter must be what strip_accents does to each code point.
    marks = set(t["marks"])
    for c, d in t["decompose"].items():
        assert strip.normalize_str(chr(c)) == "".join(x for x in d if ord(x) not in marks), hex(c)
    return t


# ---- the include ----

def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and c <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], c)
        else:
            out.append([c, c])
    return out


def c_string(s):
    """A plain-ASCII C++ literal for the UTF-8 of s; a hex escape followed by a hex digit would
    swallow it, so the literal is split there."""
    out, after_escape = '"', False
    for b in s.encode("utf-8"):
        ch = chr(b)
        if 0x20 <= b < 0x7F and ch not in '"\\':
            if after_escape and ch in "0123456789abcdefABCDEF":
                out += '" "'
            out += ch
            after_escape = False
        else:
            out += f"\\x{b:02X}"
            after_escape = True
    return out + '"'


def emit_array(lines, ctype, name, items):
    lines.append(f"inline constexpr {ctype} {name}[] = {{")
    row = "   "
    for item in items:
        if len(row) + 1 + len(item) + 1 > 120:
            lines.append(row)
            row = "   "
        row += " " + item + ","
    lines.append(row)
    lines.append("};")


TABLES = [  # name, key, kind, what it is (the header line)
    ("kBertControl", "control", "range",
     "clean_text removes these (Cc, Cf, Co as the package sees them, U+0000, U+FFFD; not \\t \\n \\r)."),
    ("kBertWhitespace", "whitespace", "range",
     "clean_text turns these into ' ' (\\t \\n \\r and Unicode spaces; U+0020 itself is not listed)."),
    ("kBertChinese", "chinese", "range", "handle_chinese_chars puts ' ' before and after these (CJK ideographs)."),
    ("kBertDecompose", "decompose", "map",
     "strip_accents: canonical decomposition (NFD), UTF-8, where it differs; not Hangul syllables."),
    ("kBertMarks", "marks", "range", "strip_accents then drops these (nonspacing marks) from the decomposed text."),
    ("kBertLower", "lower", "map", "lowercase: a code point's lowercase, UTF-8 (maybe several), where it differs."),
    ("kBertSplitSpace", "split", "range", "BertPreTokenizer splits on these and drops them (White_Space)."),
    ("kBertPunct", "punct", "range", "BertPreTokenizer makes each of these a word of its own (punctuation)."),
]


def render(t):
    lines = [f"// Generated by tools/make_bert_unicode.py from tokenizers {tokenizers.__version__}; do not edit."]
    lines += [f"// {name}: {what}" for name, _, _, what in TABLES]
    for name, key, kind, _ in TABLES:
        lines.append("")
        if kind == "range":
            emit_array(lines, "CodeRange", name, [f"{{0x{a:04X}, 0x{b:04X}}}" for a, b in ranges(t[key])])
        else:
            emit_array(lines, "CodeMap", name, [f"{{0x{c:04X}, {c_string(t[key][c])}}}" for c in sorted(t[key])])
    return "\n".join(lines) + "\n"


def parse(text):
    """The tables back from the generated text, so the checks run on what the C++ will see."""
    def literal(m):  # concatenated "..." pieces -> str
        raw = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m))
        data = re.sub(rb"\\x([0-9A-F]{2})", lambda x: bytes([int(x.group(1), 16)]), raw.encode("ascii"))
        return data.decode("utf-8")

    t = {}
    for name, key, kind, _ in TABLES:
        body = re.search(rf"{name}\[\] = \{{(.*?)\n\}};", text, re.S).group(1)
        if kind == "range":
            t[key] = {c for a, b in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+)\}", body)
                      for c in range(int(a, 16), int(b, 16) + 1)}
        else:
            entries = re.findall(r'\{0x([0-9A-F]+), ((?:"(?:[^"\\]|\\.)*" ?)+)\}', body)
            t[key] = {int(c, 16): literal(s) for c, s in entries}
    return t


# ---- the simulation ----

def sim_normalize(t, s, clean_text, handle_chinese_chars, strip_accents, lowercase):
    out = []
    for ch in s:
        c = ord(ch)
        if clean_text:
            if c in t["control"]:
                continue
            if c in t["whitespace"]:
                ch, c = " ", 0x20
        seq = f" {ch} " if handle_chinese_chars and c in t["chinese"] else ch
        if strip_accents:
            seq = "".join(t["decompose"].get(ord(x)) or hangul(ord(x)) or x for x in seq)
            seq = "".join(x for x in seq if ord(x) not in t["marks"])
        if lowercase:
            seq = "".join(t["lower"].get(ord(x), x) for x in seq)
        out.append(seq)
    return "".join(out)


def sim_pre_tokenize(t, s):
    out, word = [], ""
    for ch in s:
        c = ord(ch)
        if c in t["split"] or c in t["punct"]:
            if word:
                out.append(word)
            word = ""
            if c in t["punct"]:
                out.append(ch)
        else:
            word += ch
    return out + [word] if word else out


def sim_wordpiece(model, vocab, word):
    if len(word) > model["max_input_chars_per_word"]:
        return [vocab[model["unk_token"]]]
    ids, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else model["continuing_subword_prefix"] + word[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                start = end
                break
        else:
            return [vocab[model["unk_token"]]]
    return ids


class Checker:
    def __init__(self, t):
        self.t = t
        self.pre = pre_tokenizers.BertPreTokenizer()
        self.nfd = normalizers.NFD()
        self.hf = {}
        self.mismatches = self.reordered = 0
        self.examples = []

    def normalizer(self, opts):
        if opts not in self.hf:
            self.hf[opts] = bert_normalizer(**dict(zip(OPTIONS, opts)))
        return self.hf[opts]

    def reordering_explains(self, s, opts, want):
        """True if Hugging Face's result is ours with a whole-string NFD instead of step c."""
        clean_text, chinese, strip, lower = opts
        if not strip:
            return False
        before = sim_normalize(self.t, s, clean_text, chinese, False, False)
        ours = "".join(self.t["decompose"].get(ord(x)) or hangul(ord(x)) or x for x in before)
        whole = self.nfd.normalize_str(before)
        if sorted(ours) != sorted(whole):
            return False
        got = "".join(x for x in whole if ord(x) not in self.t["marks"])
        if lower:
            got = "".join(self.t["lower"].get(ord(x), x) for x in got)
        return got == want

    def check(self, s, opts):
        """opts: the four options, strip_accents None meaning 'as lowercase' as in the package."""
        want = self.normalizer(opts).normalize_str(s)
        eff = (opts[0], opts[1], opts[3] if opts[2] is None else opts[2], opts[3])
        got = sim_normalize(self.t, s, *eff)
        if got == want and sim_pre_tokenize(self.t, got) == words(self.pre.pre_tokenize_str(want)):
            return True
        self.mismatches += 1
        if self.reordering_explains(s, eff, want):
            self.reordered += 1
        elif len(self.examples) < 10:
            self.examples.append((s, opts, want, got))
        return False


# ---- random strings ----

POOLS = [  # weight, ranges
    (30, [(0x20, 0x7E)]),  # ASCII
    (8, [(0xC0, 0x24F), (0x1E00, 0x1EFF)]),  # Latin with accents, Vietnamese
    (5, [(0x370, 0x3FF), (0x1F00, 0x1FFF)]),  # Greek, polytonic (sigma, iota subscripts)
    (5, [(0x400, 0x52F)]),  # Cyrillic
    (6, [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
         (0x3040, 0x30FF)]),  # CJK, compatibility ideographs, kana
    (4, [(HANGUL_FIRST, HANGUL_LAST), (0x1100, 0x11FF), (0x3130, 0x318F)]),  # Hangul syllables, jamo
    (6, [(0x300, 0x36F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F)]),  # marks
    (4, [(0x1F300, 0x1FAFF), (0x2600, 0x27BF), (0xFE00, 0xFE0F), (0x1F1E6, 0x1F1FF), (0x1F3FB, 0x1F3FF)]),  # emoji
    (4, [(0x0, 0x1F), (0x7F, 0x9F), (0xFFFD, 0xFFFD), (0xE000, 0xE00F), (0xF0000, 0xF0003)]),  # controls, private
    (3, [(0x200B, 0x200F), (0x2060, 0x2064), (0xFEFF, 0xFEFF), (0xAD, 0xAD), (0x202A, 0x202E)]),  # zero-width, format
    (4, [(0x9, 0xD), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
         (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]),  # spaces
    (3, [(0xA1, 0xBF), (0x2010, 0x205E), (0x3001, 0x3011), (0xFF01, 0xFF65)]),  # punctuation, fullwidth
    (3, [(0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F)]),  # Hebrew, Arabic, Devanagari, Thai with marks
    (2, [(0x130, 0x130), (0xDF, 0xDF), (0x1E9E, 0x1E9E), (0x3A3, 0x3A3), (0x2126, 0x2126), (0x212A, 0x212B),
         (0x344, 0x344), (0x1D15E, 0x1D164)]),  # odd cases: dotted I, sharp s, sigma, Ohm/Kelvin/Angstrom
    (1, [(0x0, 0x10FFFF)]),  # anything
]


def random_char(rng, pools):
    weights = [w for w, _ in pools]
    while True:
        rs = rng.choices(pools, weights)[0][1]
        a, b = rng.choice(rs)
        c = rng.randint(a, b)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def random_string(rng, pools):
    n = rng.choice([rng.randint(1, 8), rng.randint(1, 40), rng.randint(40, 160)])
    return "".join(random_char(rng, pools) for _ in range(n))


def random_options(rng):
    return (rng.random() < 0.5, rng.random() < 0.5, rng.choice([None, False, True]), rng.random() < 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "text", "bert_unicode.inc"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "data", "models", "all-MiniLM-L6-v2", "tokenizer.json"))
    ap.add_argument("--random", type=int, default=20000, help="random strings for check (ii)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    start = time.time()

    probed = probe()
    text = render(probed)
    t = parse(text)
    for name, key, kind, _ in TABLES:  # the round trip through C++ text must lose nothing
        assert t[key] == (set(probed[key]) if kind == "range" else probed[key]), name
    assert not t["split"] & t["punct"] and not t["control"] & t["whitespace"]
    print(f"probed in {time.time() - start:.1f}s")

    chk = Checker(t)
    # (i) every code point.
    for opts in [(True, True, True, True), (True, True, False, False)]:
        for c in code_points():
            chk.check(chr(c), opts)
            chk.check(f"a{chr(c)}b", opts)
    single = chk.mismatches
    print(f"(i) every code point, 2 configs x 2 strings: {single} mismatches")

    # (ii) random strings, and the real tokenizer's ids.
    rng = random.Random(args.seed)
    real, model, vocab, id_mismatches = None, None, None, 0
    if os.path.exists(args.tokenizer):
        real = Tokenizer.from_file(args.tokenizer)
        real.no_padding()  # the file pads and truncates to 128; compare the bare ids
        real.no_truncation()
        spec = json.load(open(args.tokenizer, encoding="utf-8"))
        nz, model = spec["normalizer"], spec["model"]
        assert nz["type"] == "BertNormalizer" and spec["pre_tokenizer"]["type"] == "BertPreTokenizer"
        real_opts = (nz["clean_text"], nz["handle_chinese_chars"],
                     nz["lowercase"] if nz["strip_accents"] is None else nz["strip_accents"], nz["lowercase"])
        vocab = model["vocab"]
    before = chk.mismatches
    for _ in range(args.random):
        s = random_string(rng, POOLS)
        chk.check(s, random_options(rng))
        if real:
            want = real.encode(s, add_special_tokens=False).ids
            got = [i for w in sim_pre_tokenize(t, sim_normalize(t, s, *real_opts))
                   for i in sim_wordpiece(model, vocab, w)]
            id_mismatches += want != got
    rand = chk.mismatches - before
    print(f"(ii) {args.random} random strings: {rand} mismatches; ids vs {os.path.basename(args.tokenizer)}: "
          + (f"{id_mismatches} mismatches" if real else "skipped (no tokenizer file)"))

    # (iii) the known divergence: reorderable code points among marks, letters, and each other.
    pools = [(3, [(0x61, 0x7A)]), (3, [(0x300, 0x36F), (0x591, 0x5C7)]), (4, [(c, c) for c in probed["reorderable"]])]
    before, reordered = chk.mismatches, chk.reordered
    for _ in range(2000):
        chk.check("".join(random_char(rng, pools) for _ in range(rng.randint(2, 8))), (True, True, True, True))
    print(f"(iii) 2000 strings of reorderable code points: {chk.mismatches - before} mismatches, "
          f"{chk.reordered - reordered} of them canonical reordering")

    unexplained = chk.mismatches - chk.reordered
    for s, opts, want, got in chk.examples:
        print(f"  MISMATCH {s!r} {opts}: tokenizers {want!r}, tables {got!r}")
    print("tables: " + ", ".join(f"{name} {len(ranges(probed[key])) if kind == 'range' else len(probed[key])}"
                                 for name, key, kind, _ in TABLES))
    rs = ranges(probed["reorderable"])
    print(f"reorderable (survive strip_accents, nonzero combining class): {len(probed['reorderable'])} code points: "
          + " ".join(f"{a:04X}" if a == b else f"{a:04X}-{b:04X}" for a, b in rs))
    if unexplained:
        print(f"{unexplained} unexplained mismatches; {args.out} not written", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    print(f"wrote {args.out} ({len(text)} bytes) in {time.time() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
