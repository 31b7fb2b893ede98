#!/usr/bin/env python3
"""Writes text/nfc_tables.inc: the Unicode tables of NFC normalization (canonical decompositions,
combining classes, primary composites) as Hugging Face `tokenizers` applies them (its
normalizers.NFC / NFD; its Unicode data differs from Python's in places), for byte-level BPE
tokenizer.json files that name an NFC normalizer (Qwen2).

    /path/to/python tools/make_nfc_tables.py [--out text/nfc_tables.inc]

Decompositions: every code point's full canonical decomposition as tokenizers' NFD gives it
(Hangul syllables are left to the formula). Combining classes: Python's unicodedata (tokenizers
exposes none; the byte-level golden test checks the ordering on marks in mixed orders).
Composites: C whose one-level canonical decomposition is two code points A B and that NFC
rebuilds from NFD(C) (so not a composition exclusion). kNfcStable: below it no code point changes
under NFC, combines or has a nonzero class (a quick check that skips the work for most text).
"""
import argparse
import os
import unicodedata

import tokenizers
from tokenizers import normalizers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text", "nfc_tables.inc"))
    args = ap.parse_args()
    nfd, nfc = normalizers.NFD(), normalizers.NFC()
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    hangul = range(0xAC00, 0xD7A4)
    decomp = {}
    for c in cps:
        d = nfd.normalize_str(chr(c))
        if d != chr(c) and c not in hangul:
            decomp[c] = [ord(x) for x in d]
    ccc = {c: unicodedata.combining(chr(c)) for c in cps if unicodedata.combining(chr(c))}
    comps = []
    for c in cps:
        if c in hangul:
            continue
        m = unicodedata.decomposition(chr(c))
        if not m or m.startswith("<"):
            continue
        parts = [int(x, 16) for x in m.split()]
        if len(parts) == 2 and c in decomp and nfc.normalize_str("".join(map(chr, decomp[c]))) == chr(c):
            comps.append((parts[0], parts[1], c))
    comps.sort()
    changed = [c for c in cps if nfc.normalize_str(chr(c)) != chr(c)]
    stable = min(changed + list(ccc) + [b for _, b, _ in comps] + [0x1100])
    pool, rows = [], []
    for c in sorted(decomp):
        rows.append(f"{{0x{c:X}, {len(pool)}, {len(decomp[c])}}},")
        pool.extend(decomp[c])
    out = [f"// Made by tools/make_nfc_tables.py from tokenizers {tokenizers.__version__}: do not edit.",
           f"constexpr char32_t kNfcStable = 0x{stable:X};",
           f"// {len(pool)} code points of the decompositions below",
           "constexpr char32_t kDecompPool[] = {"]
    for i in range(0, len(pool), 12):
        out.append("    " + " ".join(f"0x{x:X}," for x in pool[i:i + 12]))
    out += ["};", f"// {len(rows)} code points with a canonical decomposition (not Hangul): (code point, start, length)",
            "constexpr Decomposition kDecomp[] = {"]
    for i in range(0, len(rows), 6):
        out.append("    " + " ".join(rows[i:i + 6]))
    out += ["};", f"// {len(ccc)} code points with a nonzero canonical combining class", "constexpr CombiningClass kCcc[] = {"]
    items = [f"{{0x{c:X}, {v}}}," for c, v in sorted(ccc.items())]
    for i in range(0, len(items), 8):
        out.append("    " + " ".join(items[i:i + 8]))
    out += ["};", f"// {len(comps)} primary composites (first, second, composite), sorted", "constexpr Composite kCompose[] = {"]
    items = [f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for a, b, c in comps]
    for i in range(0, len(items), 5):
        out.append("    " + " ".join(items[i:i + 5]))
    out.append("};")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {args.out}: {len(rows)} decompositions, {len(ccc)} classes, {len(comps)} composites, stable below U+{stable:04X}")


if __name__ == "__main__":
    main()
