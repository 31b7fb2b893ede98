#!/usr/bin/env bash
# Crash- and interrupt-safe runs, with real processes:
#  1. train_lm killed (SIGKILL) at 100 points chosen by a seeded draw among the fault points a run
#     passes (io/file.h: inside every atomic write and between training steps): every surviving
#     folder resumes to the end (or, killed before its first checkpoint, starts again with
#     --overwrite), the finished model loads and samples, and no temporary file is left behind.
#  2. Restarts at steps 10 and 20 of 30 give byte-identical losses and final weights (one thread).
#  3. SIGTERM and SIGINT: the step finishes, a checkpoint is written, exit 143 / 130 with a message,
#     and --resume continues from that checkpoint.
#   tests/crash_test.sh BUILD_DIR [KILLS]
set -uo pipefail
bin=$(cd "$1" && pwd)
kills=${2:-100}
work=$(mktemp -d)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
printf 'hello world, this is a tiny text about the house by the river.\n%.0s' $(seq 1 300) > "$work/text.txt"
LM=(--text "$work/text.txt" --layers 1 --width 16 --heads 2 --context 8 --eval_every 5 --eval_windows 4 --sample 0
    --steps 30 --threads 1)

# ---- 1. SIGKILL at seeded fault points ----
TG_FAULT_COUNT_FILE="$work/points" "$bin/train_lm" "${LM[@]}" --out "$work/whole" > /dev/null 2>&1 || fail "the reference run failed"
points=$(cat "$work/points" 2>/dev/null || echo 0)
[ "$points" -gt 30 ] || fail "a run passes only $points fault points"
killed=0 restarted=0 resumed=0
for k in $(awk -v n="$kills" -v p="$points" 'BEGIN { srand(17); for (i = 0; i < n; i++) print 1 + int(rand() * p) }'); do
  d="$work/run"
  rm -rf "$d"
  ( TG_FAULT_KILL_AT=$k "$bin/train_lm" "${LM[@]}" --out "$d" > "$work/kill.log" 2>&1 ) 2> /dev/null
  rc=$?
  if [ $rc -ne 137 ]; then fail "fault point $k of $points: exit $rc, expected a kill (137)"; continue; fi
  killed=$((killed + 1))
  if ls "$d"/checkpoint-*.safetensors > /dev/null 2>&1; then
    "$bin/train_lm" "${LM[@]}" --out "$d" --resume > "$work/resume.log" 2>&1 || { fail "killed at point $k: --resume failed: $(tail -2 "$work/resume.log")"; continue; }
    resumed=$((resumed + 1))
  else
    "$bin/train_lm" "${LM[@]}" --out "$d" --overwrite > "$work/resume.log" 2>&1 || { fail "killed at point $k: a new run failed: $(tail -2 "$work/resume.log")"; continue; }
    restarted=$((restarted + 1))
  fi
  if ! "$bin/train_lm" --load "$d" --sample 5 > "$work/sample.log" 2>&1; then fail "killed at point $k: the finished model does not load: $(tail -1 "$work/sample.log")"; fi
  if ls "$d" | grep '\.tmp-' > /dev/null; then fail "killed at point $k: temporary files left: $(ls "$d" | grep '\.tmp-' | tr '\n' ' ')"; fi
done
[ $killed -eq "$kills" ] && pass "$kills kills among $points fault points: $resumed folders resumed, $restarted started again, every model loads, no temporary file left"

# ---- 2. restarts at steps 10 and 20 of 30: byte-identical ----
losses() { grep '"kind": "train"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+).*"loss": ([-+0-9.eE]+).*/\1 \2/'; }
"$bin/train_lm" "${LM[@]}" --steps 10 --out "$work/restart" > /dev/null 2>&1 &&
  "$bin/train_lm" "${LM[@]}" --steps 20 --out "$work/restart" --resume > /dev/null 2>&1 &&
  "$bin/train_lm" "${LM[@]}" --steps 30 --out "$work/restart" --resume > /dev/null 2>&1 || fail "the restarted run failed"
losses "$work/whole" > "$work/l1"
losses "$work/restart" > "$work/l2"
if [ "$(wc -l < "$work/l1")" -eq 30 ] && cmp -s "$work/l1" "$work/l2" && cmp -s "$work/whole/model.safetensors" "$work/restart/model.safetensors"; then
  pass "restarts at steps 10 and 20 of 30: byte-identical losses (30 steps) and final weights"
else
  fail "restarted run differs: $(diff "$work/l1" "$work/l2" | head -3)"
fi

# ---- 3. SIGTERM / SIGINT: finish the step, save, exit 128 + signal; --resume continues ----
for sig in TERM INT; do
  d="$work/sig$sig"
  # A long run in the background (its own process group, as a shell job), signalled once its first
  # training line is in metrics.jsonl (polled, so no fixed sleep decides the outcome).
  setsid "$bin/train_lm" "${LM[@]}" --steps 1000000 --eval_every 1000000 --out "$d" > "$work/sig.out" 2> "$work/sig.err" &
  pid=$!
  for _ in $(seq 1 600); do grep -q '"kind": "train"' "$d/metrics.jsonl" 2> /dev/null && break; sleep 0.1; done
  kill -"$sig" $pid
  wait $pid
  rc=$?
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  ck=$(ls "$d"/checkpoint-*.safetensors 2> /dev/null | tail -1)
  if [ $rc -eq "$want" ] && grep -q "interrupted by SIG$sig" "$work/sig.err" && grep -q "continue with --resume" "$work/sig.err" && [ -n "$ck" ]; then
    step=$(basename "$ck" .safetensors | sed 's/checkpoint-0*//')
    if "$bin/train_lm" "${LM[@]}" --steps $((step + 3)) --eval_every 1000000 --out "$d" --resume > "$work/sig.out" 2>&1 &&
       grep -q "resuming from .* at step $step" "$work/sig.out"; then
      pass "SIG$sig: exit $rc, checkpoint at step $step, resumed from it"
    else
      fail "SIG$sig: resuming from step $step failed: $(tail -2 "$work/sig.out")"
    fi
  else
    fail "SIG$sig: exit $rc (expected $want), checkpoint '$ck': $(cat "$work/sig.err" | tr '\r' '\n' | tail -3)"
  fi
done

echo "$fails failure(s)"
[ $fails -eq 0 ]
