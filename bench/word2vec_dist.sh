#!/usr/bin/env bash
# train_word2vec in 2 processes (mpirun, one thread each) against 1 process with one thread, over
# SEEDS seeds, skip-gram and CBOW: words/s, WordSim-353 Spearman and analogy accuracy per seed,
# then the means and the 2-process minus 1-process difference with its 95% interval (Welch).
# One process with two threads is timed on the first 3 seeds (its vectors equal one thread's).
#   bench/word2vec_dist.sh data/kjv.txt questions-words.txt wordsim353.tsv [SEEDS=20] [BUILD=build] [flags...]
# Extra flags go to the 2-process runs (e.g. --hot_sync_words 0 for the full sums alone).
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=$1 Q=$2 S=$3 SEEDS=${4:-20} BUILD=${5:-build}
shift $(($# < 5 ? $# : 5))
EXTRA=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
row() {  # config seed command...: one line "config seed words/s spearman analogies"
  local config=$1 seed=$2; shift 2
  rm -rf "$out/v"
  "$@" --seed "$seed" --train "$TEXT" --output "$out/v/v.txt" --analogies "$Q" --similarity "$S" 2>/dev/null > "$out/log"
  echo "$config $seed $(grep -o '[0-9]* words/s' "$out/log" | cut -d' ' -f1) $(grep -o 'Spearman [0-9.-]*' "$out/log" |
    cut -d' ' -f2) $(grep -o '[0-9.]*% of' "$out/log" | cut -d% -f1)" | tee -a "$out/rows"
}
echo "# $TEXT, $SEEDS seeds, 2-process flags: ${EXTRA[*]:-(defaults)}"
for mode in skipgram cbow; do
  flag=(); [ $mode = cbow ] && flag=(--cbow)
  for seed in $(seq 1 "$SEEDS"); do
    row "$mode/1x1" "$seed" "$BUILD/train_word2vec" "${flag[@]}" --threads 1
    [ "$seed" -le 3 ] && row "$mode/1x2" "$seed" "$BUILD/train_word2vec" "${flag[@]}" --threads 2
    row "$mode/2x1" "$seed" mpirun -np 2 --bind-to core "$BUILD/train_word2vec" "${flag[@]}" --threads 1 "${EXTRA[@]}"
  done
done
python3 - "$out/rows" <<'EOF'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    config, _, *v = line.split()
    rows.setdefault(config, []).append([float(x) for x in v])
def col(c, i): return [r[i] for r in rows.get(c, [])]
def diff(a, b):  # mean(b) - mean(a) and the half-width of its 95% interval
    d = st.mean(b) - st.mean(a)
    return d, 1.96 * (st.variance(a) / len(a) + st.variance(b) / len(b)) ** 0.5
print("| model | words/s 1x1 / 1x2 / 2x1 (2x1 over 1x1) | Spearman 1 proc / 2 procs (difference, 95%) | analogies 1 proc / 2 procs (difference, 95%) |")
print("|---|---|---|---|")
for mode in ("skipgram", "cbow"):
    one, two, thr = f"{mode}/1x1", f"{mode}/2x1", f"{mode}/1x2"
    if one not in rows: continue
    w1, w2, wt = (st.mean(col(c, 0)) / 1e6 for c in (one, two, thr))
    s = diff(col(one, 1), col(two, 1)); a = diff(col(one, 2), col(two, 2))
    print(f"| {mode} | {w1:.2f} M / {wt:.2f} M / {w2:.2f} M ({w2 / w1:.2f}x) "
          f"| {st.mean(col(one, 1)):.3f} / {st.mean(col(two, 1)):.3f} ({s[0]:+.3f} ± {s[1]:.3f}) "
          f"| {st.mean(col(one, 2)):.2f}% / {st.mean(col(two, 2)):.2f}% ({a[0]:+.2f} ± {a[1]:.2f}) |")
EOF
