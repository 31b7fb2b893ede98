#!/usr/bin/env python3
"""Regenerate tests/golden/bleu_cases.json with sacreBLEU golden BLEU values.

Environment (sacreBLEU from PyPI, not a project dependency):

    python3 -m venv /tmp/sb && /tmp/sb/bin/pip install -q sacrebleu
    /tmp/sb/bin/python tests/golden/make_bleu_golden.py

Each case is scored with sacrebleu.corpus_bleu(hyps, [refs]) using default
settings: tokenize='13a', smooth_method='exp', lowercase=False, one reference
per hypothesis. Floats are written with full precision (repr round-trip).
"""
import json
import os

import sacrebleu

CASES = [
    ("perfect",
     ["The cat sat on the mat.", "It is raining today!"],
     ["The cat sat on the mat.", "It is raining today!"]),
    ("partial",
     ["the cat is on the mat", "there is a dog in the garden"],
     ["The cat sat on the mat.", "A dog is in the garden."]),
    ("short_hyp",
     ["The cat", "A dog is in"],
     ["The cat sat on the mat.", "A dog is in the garden."]),
    ("punct_numbers",
     ["He paid $3,000.50 (roughly) for it, didn't he?",
      "Well-known e-mail: a@b.com; x-ray 1-2."],
     ["He paid $3,000.50 for it, did he not?",
      "Well-known email: a@b.com; X-ray 1-2."]),
    ("zero_match",
     ["xyz uvw"],
     ["The cat sat on the mat."]),
    ("unicode",
     ["Über den Fluss gehen wir – schnell.", "Don’t worry."],
     ["Über den Fluss gehen wir schnell.", "Don’t worry about it."]),
    ("empty_hyp",
     ["", "A dog is in the garden."],
     ["The cat sat on the mat.", "A dog is in the garden."]),
]


def main():
    out = []
    for name, hyps, refs in CASES:
        b = sacrebleu.corpus_bleu(hyps, [refs])
        out.append({
            "name": name,
            "hyps": hyps,
            "refs": refs,
            "score": float(b.score),
            "bp": float(b.bp),
            "sys_len": int(b.sys_len),
            "ref_len": int(b.ref_len),
            "precisions": [float(p) for p in b.precisions],
            "counts": [int(c) for c in b.counts],
            "totals": [int(t) for t in b.totals],
        })
    doc = {
        "sacrebleu": sacrebleu.__version__,
        "settings": "corpus_bleu(hyps, [refs]) defaults: tokenize=13a, "
                    "smooth_method=exp, lowercase=False",
        "cases": out,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "bleu_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        # json.dump writes floats via repr(), so values round-trip exactly.
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
