#!/usr/bin/env python3
"""Writes text/byte_bpe_unicode.inc: the Unicode classes the byte-level BPE pre-tokenizers' split
patterns use (\\p{L}, \\p{N} and \\s), probed from Hugging Face `tokenizers` itself (its regex
engine carries its own Unicode data, newer than Python's: 0.23.3 has ~9,000 more letters than
Python 3.11's unicodedata), so that our splits are that package's.

    /path/to/python tools/make_byte_bpe_unicode.py [--out text/byte_bpe_unicode.inc]

Every code point but the surrogates is run through Split(Regex(CLASS), "removed"); the ones
removed are in the class. The result is written as sorted, merged [first, last] ranges.
"""
import argparse
import os

import tokenizers
from tokenizers import Regex, pre_tokenizers

CLASSES = {"kLetter": r"\p{L}", "kNumber": r"\p{N}", "kSpace": r"\s"}


def members(pattern):
    split = pre_tokenizers.Split(Regex(pattern), "removed")
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    found = set()
    for i in range(0, len(cps), 8192):
        block = cps[i:i + 8192]
        kept = set("".join(piece for piece, _ in split.pre_tokenize_str("".join(map(chr, block)))))
        found.update(c for c in block if chr(c) not in kept)
    return found


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text",
                                                  "byte_bpe_unicode.inc"))
    args = ap.parse_args()
    lines = [f"// Made by tools/make_byte_bpe_unicode.py from tokenizers {tokenizers.__version__}: do not edit.",
             "// Code point ranges [first, last] of the split patterns' classes, sorted."]
    for name, pattern in CLASSES.items():
        rs = ranges(members(pattern))
        lines.append(f"// {pattern}: {sum(b - a + 1 for a, b in rs)} code points")
        lines.append(f"constexpr CodeRange {name}[] = {{")
        row = []
        for a, b in rs:
            row.append(f"{{0x{a:X}, 0x{b:X}}},")
            if len(row) == 6:
                lines.append("    " + " ".join(row))
                row = []
        if row:
            lines.append("    " + " ".join(row))
        lines.append("};")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
