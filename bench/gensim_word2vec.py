#!/usr/bin/env python3
"""The gensim peer of examples/train_word2vec: the same text preparation (lower-cased, punctuation
stripped at word edges, one sentence a line), the same settings, then the same evaluations
(analogies among the 30,000 most frequent words, Spearman on a similarity file).

    /usr/bin/python3 bench/gensim_word2vec.py --train data/kjv.txt --workers 2 \
        --analogies questions-words.txt --similarity wordsim353.tsv
    /usr/bin/python3 bench/gensim_word2vec.py --vectors vectors.bin --analogies ... --similarity ...

The second form only evaluates vectors in the original word2vec binary format (bench/word2vec_peers.sh
uses it for the C word2vec's output). Uses Debian's python3-gensim. Prints one JSON line.
"""
import argparse, json, math, string, sys, time


def normalise(w):
    return w.strip(string.punctuation).lower()


def sentences(path):
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            ws = [normalise(t) for t in line.split()]
            ws = [w for w in ws if w]
            if ws:
                out.append(ws)
    return out


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    sxy = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    sxx = sum((x - ma) ** 2 for x in ra)
    syy = sum((y - mb) ** 2 for y in rb)
    return sxy / math.sqrt(sxx * syy)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", default="")
    ap.add_argument("--vectors", default="", help="evaluate these vectors (word2vec binary format) instead of training")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--negative", type=int, default=5)
    ap.add_argument("--sample", type=float, default=1e-3)
    ap.add_argument("--min_count", type=int, default=5)
    ap.add_argument("--iter", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cbow", action="store_true")
    ap.add_argument("--alpha", type=float, default=0.025)
    ap.add_argument("--analogies", default="")
    ap.add_argument("--similarity", default="")
    a = ap.parse_args()
    import gensim
    from gensim.models import KeyedVectors, Word2Vec
    if a.vectors:
        kv = KeyedVectors.load_word2vec_format(a.vectors, binary=True)
        res = {"vectors": a.vectors, "vocab": len(kv)}
    else:
        sents = sentences(a.train)
        words = sum(len(s) for s in sents)
        t0 = time.perf_counter()
        m = Word2Vec(sents, vector_size=a.size, window=a.window, negative=a.negative, hs=0, sample=a.sample,
                     min_count=a.min_count, epochs=a.iter, workers=a.workers, sg=0 if a.cbow else 1, seed=1,
                     alpha=a.alpha, min_alpha=a.alpha * 1e-4)
        secs = time.perf_counter() - t0
        res = {"peer": "gensim " + gensim.__version__, "words": words, "vocab": len(m.wv), "seconds": secs,
               "words_per_s": words * a.iter / secs, "workers": a.workers}
        kv = m.wv
    if a.analogies:
        top = set(kv.index_to_key[:30000])
        right = asked = skipped = 0
        for line in open(a.analogies, encoding="utf-8"):
            if not line.strip() or line.startswith(":"):
                continue
            q = [normalise(w) for w in line.split()]
            if len(q) != 4 or not all(w in top for w in q):
                skipped += 1
                continue
            best = kv.most_similar(positive=[q[1], q[2]], negative=[q[0]], topn=1, restrict_vocab=30000)
            right += best[0][0] == q[3]
            asked += 1
        res.update(analogy_accuracy=right / asked if asked else None, analogies_asked=asked, analogies_skipped=skipped)
    if a.similarity:
        hs, ms, skipped = [], [], 0
        for line in open(a.similarity, encoding="utf-8"):
            f = line.replace(",", " ").split()
            if len(f) < 3:
                continue
            try:
                s = float(f[2])
            except ValueError:
                continue
            x, y = normalise(f[0]), normalise(f[1])
            if x not in kv or y not in kv:
                skipped += 1
                continue
            hs.append(s)
            ms.append(float(kv.similarity(x, y)))
        res.update(spearman=spearman(hs, ms) if len(hs) > 1 else None, similarity_pairs=len(hs), similarity_skipped=skipped)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
