#!/usr/bin/env python3
"""Writes the input of the BERT parity check (bench/minilm_parity.py), one sentence a line:

    python3 tools/make_parity_sentences.py --out /tmp/parity.txt

  - --sample (250) lines sampled with a fixed seed from three corpora, about a third each:
    data/kjv.txt (KJV verses), data/wordnet.txt (WordNet glosses) and
    /work/shared/data/multi30k/train.en.gz (English captions);
  - the tricky texts of tools/minilm_golden.py's tokenizer cases and sentences (accents, CJK, emoji,
    numbers, punctuation, control and zero-width characters, Unicode spaces, words of 100+ letters,
    literal [MASK]/[CLS]), with their newlines made spaces; among them one empty line and one line of
    spaces and a tab (--no-empty leaves those two out);
  - --long (40) lines of consecutive KJV verses joined until the line has 130 to 250 pre-tokens
    (runs of letters/digits and single punctuation marks, each at least one token, so with [CLS] and
    [SEP] the line has more than 128 tokens), or, for a quarter of them, 300 to 500, so that
    truncation at 256 tokens matters too.
All shuffled together with the same seed, so batches mix short and long lines. Stdlib only; the
result depends only on the corpora and --seed.
"""
import argparse
import gzip
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_golden import SENTENCES, TOKENIZER_CASES  # noqa: E402  (tools/, beside this script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_corpus(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()]


def tricky(no_empty):
    """The golden texts (and second sentences of pairs), each made one line, in a fixed order."""
    out, seen = [], set()
    for text, pair, _ in TOKENIZER_CASES:
        for t in (text, pair):
            if t is None:
                continue
            t = t.replace("\r\n", " ").replace("\n", " ")
            if t not in seen:
                seen.add(t)
                out.append(t)
    for t in SENTENCES:
        if t not in seen:
            seen.add(t)
            out.append(t)
    if no_empty:
        out = [t for t in out if t.strip()]
    return out


# What BERT's pre-tokenizer at least splits ASCII text into: runs of word characters, single marks.
PRE_TOKEN = re.compile(r"\w+|[^\w\s]")


def long_lines(verses, rng, count):
    """`count` lines of consecutive verses from random places, cut at a word: 3/4 of them with 130-250
    pre-tokens, 1/4 with 300-500."""
    out = []
    for k in range(count):
        lo, hi = (300, 500) if k % 4 == 3 else (130, 250)
        target = rng.randint(lo, hi)
        i = rng.randrange(len(verses))
        words, n = [], 0
        while n < target:
            for w in verses[i % len(verses)].split():
                words.append(w)
                n += len(PRE_TOKEN.findall(w))
                if n >= target:
                    break
            i += 1
        out.append(" ".join(words))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output text file (e.g. /tmp/parity.txt)")
    ap.add_argument("--kjv", default=os.path.join(ROOT, "data", "kjv.txt"))
    ap.add_argument("--wordnet", default=os.path.join(ROOT, "data", "wordnet.txt"))
    ap.add_argument("--captions", default="/work/shared/data/multi30k/train.en.gz")
    ap.add_argument("--sample", type=int, default=250, help="lines sampled from the corpora")
    ap.add_argument("--long", type=int, default=40, help="lines of joined verses (over 128 tokens)")
    ap.add_argument("--seed", type=int, default=20240531)
    ap.add_argument("--no-empty", action="store_true", help="leave out the empty and the blank line")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    kjv = read_corpus(args.kjv)
    corpora = [kjv, read_corpus(args.wordnet), read_corpus(args.captions)]
    lines = []
    for j, corpus in enumerate(corpora):
        n = args.sample // 3 + (1 if j < args.sample % 3 else 0)
        lines += rng.sample(corpus, n)
    lines += tricky(args.no_empty)
    lines += long_lines(kjv, rng, args.long)
    rng.shuffle(lines)

    for t in lines:
        assert "\n" not in t, repr(t)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for t in lines:
            f.write(t + "\n")
    n_long = sum(1 for t in lines if len(PRE_TOKEN.findall(t)) >= 127)
    print(f"{len(lines)} lines ({args.sample} sampled, {len(lines) - args.sample - args.long} tricky, "
          f"{args.long} joined verses; {n_long} lines of 127+ pre-tokens) -> {args.out}")


if __name__ == "__main__":
    main()
