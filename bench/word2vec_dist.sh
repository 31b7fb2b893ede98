#!/usr/bin/env bash
# train_word2vec in 2 processes (mpirun, one thread each) against 1 process with one thread and
# with two (seed 1): words/s, WordSim-353 Spearman and analogy accuracy, seeds 1-3, skip-gram and CBOW.
#   bench/word2vec_dist.sh data/wordnet.txt questions-words.txt wordsim353.tsv [build] > table.txt
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=$1 Q=$2 S=$3 BUILD=${4:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
row() {  # label, command...
  local label=$1; shift
  rm -rf "$out/v"
  "$@" --train "$TEXT" --output "$out/v/v.txt" --analogies "$Q" --similarity "$S" 2>/dev/null > "$out/log"
  printf '%s | %s | %s | %s\n' "$label" "$(grep -o '[0-9]* words/s' "$out/log")" \
    "$(grep -o 'Spearman [0-9.-]*' "$out/log")" "$(grep -o '[0-9.]*% of [0-9]* questions' "$out/log")"
}
for mode in skipgram cbow; do
  flag=(); [ $mode = cbow ] && flag=(--cbow)
  for seed in 1 2 3; do
    row "$mode seed $seed, 1 process x 1 thread" "$BUILD/train_word2vec" "${flag[@]}" --seed $seed --threads 1
    [ $seed = 1 ] && row "$mode seed $seed, 1 process x 2 threads" "$BUILD/train_word2vec" "${flag[@]}" --seed $seed --threads 2
    row "$mode seed $seed, 2 processes x 1 thread" mpirun -np 2 --bind-to core "$BUILD/train_word2vec" "${flag[@]}" --seed $seed --threads 1
  done
done
