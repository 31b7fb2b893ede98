#!/usr/bin/env bash
# The bundled programs under `mpirun -np 2` on this machine: the same loss curves as one process
# (train_lm and train_translator, dropout on, batches that split unevenly), checkpoints that resume
# with another process count, bit-identical repeats and resumes with the same count, processes started with different flags refused with one line, and
# a killed or stopped process ending the job with a message within 60 s instead of a hang.
#   tests/dist_programs_test.sh BUILD_DIR [MPIEXEC]
set -euo pipefail
bin=$(cd "$1" && pwd)
mpiexec=${2:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
mpi() { "$mpiexec" --oversubscribe -np "$@"; }
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# Training losses of a run folder, "step loss" a line.
losses() { awk '/"kind": "train"/ { match($0, /"step": [0-9]+/); st = substr($0, RSTART + 8, RLENGTH - 8)
                                   match($0, /"loss": [-+0-9.eE]+/); print st, substr($0, RSTART + 8, RLENGTH - 8) }' "$1/metrics.jsonl"; }
# Same steps, losses within 2e-5 relative (the order of float32 sums is the only difference).
same_curve() {
  paste -d ' ' "$1" "$2" | awk -v na="$(wc -l < "$1")" -v nb="$(wc -l < "$2")" '
    { d = $2 - $4; if (d < 0) d = -d; m = $4 < 0 ? -$4 : $4; if (m < 1) m = 1
      if ($1 != $3 || d > 2e-5 * m) { printf "step %s: %s vs %s\n", $1, $2, $4; bad = 1; exit 1 }
      if (d > worst) worst = d }
    END { if (bad) exit 1; if (na != nb || na == 0) { printf "%d vs %d steps\n", na, nb; exit 1 }
          printf "%d steps agree; largest difference %.2e\n", na, worst }'
}

# ---- data: a text for the LM, sentence pairs for the translator ----
awk -v w="$work" 'BEGIN { srand(5); n = split("the a house tree river stone light road city field garden window door night day", v, " ")
  for (i = 0; i < 2500; i++) { k = 4 + int(rand() * 9); line = ""; for (j = 0; j < k; j++) line = line (j ? " " : "") v[1 + int(rand() * n)]
                               print line > (w "/text.txt") }
  for (i = 0; i < 600; i++) { k = 2 + int(rand() * 6); a = ""; b = ""
                              for (j = 0; j < k; j++) { x = v[1 + int(rand() * n)]; a = a (j ? " " : "") x; b = x (j ? " " : "") b }
                              print a "\t" b > (w "/pairs.tsv") } }'

LM=(--text "$work/text.txt" --layers 2 --width 32 --heads 2 --context 24 --batch 7 --dropout 0.1 --eval_every 10
    --eval_windows 20 --sample 10 --threads 1)
TR=(--pairs "$work/pairs.tsv" --tokenizer word --layers 1 --width 32 --heads 2 --ff 64 --dropout 0.1 --batch_tokens 90
    --warmup 5 --bleu_sentences 10 --final_bleu false --samples 1 --threads 1 --minutes 10)

# ---- 1. the same curves ----
"$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/lm1" > "$work/lm1.log" 2>&1 || fail "train_lm (1 process)"
mpi 2 "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/lm2" > "$work/lm2.log" 2>&1 || { cat "$work/lm2.log"; fail "train_lm (2 processes)"; }
losses "$work/lm1" > "$work/c1"; losses "$work/lm2" > "$work/c2"
if out=$(same_curve "$work/c2" "$work/c1" 2>&1); then pass "train_lm, 2 processes vs 1: $out"; else fail "train_lm curves: $out"; fi
[ "$(grep -c 'validation loss' "$work/lm2.log")" = 1 ] && pass "train_lm prints once" || fail "train_lm output repeated: $(cat "$work/lm2.log")"
# A data-parallel run says so, once: process count, threads, the global batch (7 samples).
if [ "$(grep -c 'data-parallel training: 2 processes x 1 thread; a step.s global batch is 7 samples (about 4 a process)' "$work/lm2.log")" = 1 ] &&
   ! grep -q 'data-parallel' "$work/lm1.log"; then pass "train_lm under mpirun -np 2 says 2 processes x 1 thread, global batch 7"
else fail "the data-parallel line: $(grep -i 'parallel\|tapegrad' "$work/lm2.log")"; fi

"$bin/train_translator" "${TR[@]}" --steps 20 --save "$work/tr1" > "$work/tr1.log" 2>&1 || { cat "$work/tr1.log"; fail "train_translator (1 process)"; }
mpi 2 "$bin/train_translator" "${TR[@]}" --steps 20 --save "$work/tr2" > "$work/tr2.log" 2>&1 || { cat "$work/tr2.log"; fail "train_translator (2 processes)"; }
losses "$work/tr1" > "$work/t1"; losses "$work/tr2" > "$work/t2"
if out=$(same_curve "$work/t2" "$work/t1" 2>&1); then pass "train_translator, 2 processes vs 1: $out"; else fail "train_translator curves: $out"; fi

# ---- 2. checkpoints across process counts: 2 then 1, and 1 then 2, against 20 steps in one go ----
mpi 2 "$bin/train_lm" "${LM[@]}" --steps 10 --out "$work/r21" > /dev/null 2>&1 &&
  "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/r21" --resume > /dev/null 2>&1 || fail "train_lm resume 2 -> 1"
"$bin/train_lm" "${LM[@]}" --steps 10 --out "$work/r12" > /dev/null 2>&1 &&
  mpi 2 "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/r12" --resume > /dev/null 2>&1 || fail "train_lm resume 1 -> 2"
for d in r21 r12; do
  losses "$work/$d" > "$work/$d.c"
  if out=$(same_curve "$work/$d.c" "$work/c1" 2>&1); then pass "resume $d: $out"; else fail "resume $d: $out"; fi
done

# ---- the same number of processes: bit-identical when repeated, and across a resume ----
mpi 2 "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/lm2b" > /dev/null 2>&1 || fail "train_lm (2 processes, again)"
mpi 2 "$bin/train_lm" "${LM[@]}" --steps 10 --out "$work/r22" > /dev/null 2>&1 &&
  mpi 2 "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/r22" --resume > /dev/null 2>&1 || fail "train_lm resume 2 -> 2"
losses "$work/lm2b" > "$work/c2b"; losses "$work/r22" > "$work/c22"
if cmp -s "$work/c2" "$work/c2b" && cmp -s "$work/c2" "$work/c22" && cmp -s "$work/lm2/model.safetensors" "$work/lm2b/model.safetensors" &&
   cmp -s "$work/lm2/model.safetensors" "$work/r22/model.safetensors"; then
  pass "2 processes: a repeat and a resume at step 10 give bit-identical losses and weights"
else
  fail "2 processes are not bit-identical across a repeat or a resume"
fi

# ---- word2vec: 2 processes x 2 threads, a sync every 1,000 words (the threads wait at each) ----
if mpi 2 "$bin/train_word2vec" --train "$work/text.txt" --output "$work/w2v/v.txt" --threads 2 --sync_words 1000 --min_count 1 \
     --iter 2 > "$work/w2v.log" 2>&1 && grep -q '2 processes, each on about' "$work/w2v.log" && [ -s "$work/w2v/v.txt" ]; then
  pass "train_word2vec, 2 processes x 2 threads: $(grep -o 'summed [0-9]* times' "$work/w2v.log")"
else
  fail "train_word2vec under mpirun: $(cat "$work/w2v.log")"
fi

# ---- 3. processes started differently: one line, from process 0, before training ----
set +e
mpi 1 "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/mix" : -np 1 "$bin/train_lm" "${LM[@]}" --width 48 --steps 20 \
  --out "$work/mix" > "$work/mix.log" 2>&1
rc=$?
set -e
n=$(grep -c 'the processes were started differently' "$work/mix.log" || true)
if [ $rc -ne 0 ] && [ "$n" = 1 ] && grep -q '^train_lm: the processes were started differently: process 1 has' "$work/mix.log" &&
   [ ! -e "$work/mix/metrics.jsonl" ]; then
  pass "different flags: $(grep 'started differently' "$work/mix.log")"
else
  fail "different flags (exit $rc, $n lines): $(cat "$work/mix.log")"
fi

# ---- 4. a process killed, and one stopped (SIGSTOP), mid-run ----
# Starts a long run in the background, waits for training to be under way, signals process 1.
fault() {  # fault NAME SIGNAL
  local name=$1 sig=$2 out="$work/$1"
  mpi 2 "$bin/train_lm" "${LM[@]}" --steps 1000000 --eval_every 1000000 --out "$out" > "$out.log" 2>&1 &
  local job=$!
  for _ in $(seq 600); do
    [ -s "$out/metrics.jsonl" ] && [ "$(wc -l < "$out/metrics.jsonl")" -ge 5 ] && break
    sleep 0.1
  done
  local victim=""
  for p in $(pgrep -f "train_lm.*$out" || true); do
    grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$p/environ" 2>/dev/null && victim=$p
  done
  [ -n "$victim" ] || { fail "$name: process 1 not found"; kill -KILL $job; return; }
  local t0=$SECONDS
  kill "-$sig" "$victim"
  local waited=0
  while kill -0 $job 2>/dev/null && [ $waited -lt 90 ]; do sleep 1; waited=$((SECONDS - t0)); done
  if kill -0 $job 2>/dev/null; then
    fail "$name: the job still runs $waited s after SIG$sig to process 1"
    pkill -KILL -f "train_lm.*$out" || true
    return
  fi
  set +e; wait $job; local rc=$?; set -e
  echo "  $name: job ended $((SECONDS - t0)) s after SIG$sig, exit $rc; its last lines:"; tail -n 4 "$out.log" | sed 's/^/    /'
  [ $rc -ne 0 ] && [ $((SECONDS - t0)) -le 60 ] && grep -q "$3" "$out.log" && pass "$name" || fail "$name"
}
fault killed KILL 'signal 9\|Killed\|exited on signal'
fault stopped STOP 'no answer from the other processes for 30 s'

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all data-parallel program checks passed"
