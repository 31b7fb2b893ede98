#!/usr/bin/env bash
# Decoding speed, tapegrad beside PyTorch, same machine, same run:
#   (a) greedy generation with a GPT-2-shaped LM (random weights, 128-token prompt, 512 new
#       tokens), with and without the key/value cache, 1 and 2 threads:
#       build/generate_speed (defaults) and bench/torch_generate.py (transformers GPT2LMHeadModel);
#   (b) translator beam search (beam 4, max_len 80, one sentence at a time) on the Multi30k
#       validation German sentences: build/translate --threads T, with its key/value cache and
#       with --no_cache, and bench/torch_decode.py (the same model re-implemented in PyTorch,
#       weights loaded 1:1, the same beam search with a key/value cache), 1 and 2 threads.
# Every line is printed as the programs report it (JSON lines; translate's 'sentences/s' line).
# The translations of tapegrad (cached, 1 thread) and PyTorch (2 threads) are compared at the end.
#
#   bench/decode_peers.sh MODEL_DIR [LIMIT]      (LIMIT sentences, default all 1014)
#   TORCH2_PYTHON=/path/python MULTI30K=/path/to/multi30k bench/decode_peers.sh runs/translator 200
set -euo pipefail
MODEL=${1:?usage: bench/decode_peers.sh MODEL_DIR [LIMIT]}
LIMIT=${2:-0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${TORCH2_PYTHON:-/tmp/torch2/bin/python}
DATA=${MULTI30K:-$ROOT/../shared/data/multi30k}
TMP=${KEEP_DIR:-$(mktemp -d)}
[[ -z ${KEEP_DIR:-} ]] && trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP"

flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]] && echo yes || echo no; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; avx2 $(has avx2), fma $(has fma), avx512f $(has avx512f)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); PyTorch python: $PY"

echo "== (a) LM generation: tapegrad (build/generate_speed)"
"$ROOT/build/generate_speed"
echo "== (a) LM generation: PyTorch (bench/torch_generate.py)"
"$PY" "$ROOT/bench/torch_generate.py" --threads 1,2

# (awk reads to the end: `head` would stop zcat with SIGPIPE, which pipefail turns into a failure)
zcat "$DATA/val.de.gz" | awk -v n="$LIMIT" 'n == 0 || NR <= n' >"$TMP/src.txt"
echo "== (b) translator $MODEL, $(wc -l <"$TMP/src.txt") sentences of $DATA/val.de.gz, beam 4"
# translate OUT [flags...]: translations to OUT, its 'sentences/s' line (or all of stderr) shown.
translate() {
  local out=$1
  shift
  if ! "$ROOT/build/translate" --load "$MODEL" --beam 4 "$@" <"$TMP/src.txt" >"$out" 2>"$TMP/tg.err"; then
    cat "$TMP/tg.err" >&2
    exit 1
  fi
  grep 'sentences/s' "$TMP/tg.err" || { echo "translate printed no speed line; its stderr:"; cat "$TMP/tg.err"; }
}
for T in 1 2; do
  echo "tapegrad, $T thread(s), key/value cache:"
  translate "$TMP/tg_cache_$T.txt" --threads "$T"
  echo "tapegrad, $T thread(s), no cache:"
  translate "$TMP/tg_nocache_$T.txt" --threads "$T" --no_cache
done
echo "PyTorch (bench/torch_decode.py), key/value cache, threads 1,2:"
"$PY" "$ROOT/bench/torch_decode.py" --load "$MODEL" --src "$TMP/src.txt" --beam 4 --threads 1,2 --out "$TMP/torch.txt"

same() { awk 'NR == FNR { a[FNR] = $0; next } { n++; if (a[FNR] == $0) s++ } END { printf "%d of %d\n", s, n }' "$1" "$2"; }
echo "identical translations: tapegrad cached vs no cache (1 thread) $(same "$TMP/tg_cache_1.txt" "$TMP/tg_nocache_1.txt");" \
  "tapegrad vs PyTorch $(same "$TMP/tg_cache_1.txt" "$TMP/torch.txt")"
