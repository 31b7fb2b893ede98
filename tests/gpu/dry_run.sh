#!/usr/bin/env bash
# The GPU code without a GPU. Two modes:
#
#   tests/gpu/dry_run.sh         (`./tg.sh dry`) tapegrad built against tools/cuda_dry, a CUDA
#       runtime and cuBLASLt that run no kernel but check every launch, copy, capture and product
#       the host code makes (tools/cuda_dry/cuda_dry.cc says what); the kernels are nvcc's.
#   tests/gpu/dry_run.sh --emu   (`./tg.sh emu`; CI runs it) the same runtime and checks, and the
#       kernels run too: the .cu files compiled by the host compiler, every CUDA thread a fiber on
#       the CPU (tools/cuda_dry/emu/emu.h says how), products computed by a plain loop. So the GPU
#       suite's values are computed and its verdicts count (TG_REQUIRE_GPU=1), and the programs
#       really train and decode on `--device cuda`.
#
# Then:
#   1. the canary: each mistake the dry runtime must catch, made on purpose (so this run cannot pass
#      by checking nothing); emulated, also two overruns its memory check must catch (every device
#      allocation and the block's dynamic shared memory end at an unmapped page);
#   2. the programs on --device cuda, training and decoding, fp32 and bf16 (train_translator and
#      translate's beam search, train_lm gpt and llama, generate on the golden decoders greedy and
#      sampled; dry only: gpu_train's steps A, B, C eager and as CUDA graphs, with kernels and host
#      microseconds a step, host time without the driver's launch cost), and three on --device cpu,
#      which must make no CUDA call at all (a CPU run never initialises CUDA);
#   3. the GPU suite: dry, only what it launches is checked (its values are not computed); emulated,
#      it must pass as on a GPU (every buffer exactly its tensor's size: TG_CUDA_NO_CACHING=1),
#      a second time with each block's threads and the blocks in reverse order (a kernel whose
#      result depends on that order has a race).
# Each must finish with no finding.
#
#   BUILD_DIR (dry: build-dry, its own build; emulated: build, the CUDA build of `./tg.sh test`,
#   whose objects the emulated twins reuse: -DTG_CUDA_EMU=ON adds them in BUILD/emu/);
#   TG_DRY_SUITE=0 skips the GPU suite
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
EMU=0
if [ "${1:-}" = --emu ]; then EMU=1; shift; fi
NAME="dry run"
[ $EMU = 1 ] && NAME="emulated run"
B=${BUILD_DIR:-$([ $EMU = 1 ] && echo build || echo build-dry)}
JOBS=${TG_JOBS:-$(nproc)}
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "$NAME: needs the CUDA toolkit (nvcc)"; exit 1; }
PATH=$PATH:/usr/local/cuda/bin
targets=(cuda_dry_canary tg_gpu_tests train_translator translate train_lm generate)
if [ $EMU = 1 ]; then
  # The emulated twins beside BUILD's own targets (its settings kept; a new BUILD gets the test
  # command's: Release, warnings as errors).
  opts=(-DTG_CUDA=ON -DTG_CUDA_EMU=ON)
  [ -f "$B/CMakeCache.txt" ] || opts+=(-DCMAKE_BUILD_TYPE=Release -DTG_WERROR=ON)
  cmake -S . -B "$B" "${opts[@]}" > "$B.configure.log" 2>&1 || { cat "$B.configure.log"; exit 1; }
  targets+=(cuda_emu_memcheck_canary)
  cmake --build "$B" -j "$JOBS" --target "${targets[@]/%/_emu}"
  B=$B/emu
else
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTG_WERROR=ON -DTG_CUDA=ON -DTG_CUDA_DRY=ON -DTG_INSTALL=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90-real > "$B.configure.log" 2>&1 || { cat "$B.configure.log"; exit 1; }
  cmake --build "$B" -j "$JOBS" --target "${targets[@]}" gpu_train
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
# verdict REPORT [cpu]: "ok (...)" when the dry runtime's report exists, launched kernels and has no
# finding (with cpu: made no CUDA call at all); else what is wrong. (The report, not the output: a
# finding's line may follow printed text on the same line.)
verdict() {
  python3 - "$@" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit("no report from the dry runtime")
if sys.argv[2:] == ["cpu"]:
    if r["calls"]:
        sys.exit(f"{r['calls']} CUDA runtime calls: a CPU run must make none")
    print("ok (no CUDA call)")
    sys.exit(0)
if r["findings"]:
    sys.exit("findings " + ", ".join(f"{k}: {v}" for k, v in r["findings"].items()))
if r["launches"] == 0:
    sys.exit("no kernel launched")
print(f"ok ({r['launches']} kernels, {r['graph_launches']} graph launches, {r['syncs']} host waits)")
PY
}
# check [--cpu] NAME COMMAND...: runs it with a report; fails on a non-zero exit or a bad verdict.
check() {
  local mode=""
  if [ "$1" = --cpu ]; then mode=cpu; shift; fi
  local name=$1; shift
  local rc=0 v
  TG_CUDA_DRY_REPORT="$TMP/$name.json" "$@" > "$TMP/$name.out" 2>&1 || rc=$?
  if v=$(verdict "$TMP/$name.json" $mode 2>&1) && [ "$rc" -eq 0 ]; then
    echo "$NAME: $name: $v"
  else
    echo "$NAME: $name: FAILED (exit $rc; $v):"
    { grep -v '^{' "$TMP/$name.out" || true; } | tail -20
    failures=$((failures + 1))
  fi
}

# 1. The canary: every mistake refused, and the three it only reports, reported.
rc=0
"$B/cuda_dry_canary" > "$TMP/canary.out" 2>&1 || rc=$?
if [ $rc -ne 0 ] || ! grep -q 'cuda_dry: pointer: .*parameter 1 is' "$TMP/canary.out" ||
   ! grep -q 'cuda_dry: pointer: .*parameter block holds' "$TMP/canary.out" || ! grep -q 'cuda_dry: stream: ' "$TMP/canary.out"; then
  echo "$NAME: canary: FAILED (a mistake went unreported):"
  cat "$TMP/canary.out"
  exit 1
fi
echo "$NAME: canary: every mistake caught ($(grep -c 'cuda_dry: [a-zA-Z]*: ' "$TMP/canary.out" || true) findings)"
# Emulated, the memory check's canary too: a kernel writing past its buffer, and one past its
# dynamic shared memory, must each die with the emulator's line naming the overrun.
if [ $EMU = 1 ]; then
  for where in global shared; do
    rc=0
    # (in a subshell whose stderr is dropped: the death by the fault is the expected outcome, not
    # worth the shell's "Segmentation fault" line)
    bash -c '"$0" "$1" > "$2" 2>&1; exit $?' "$B/cuda_emu_memcheck_canary" $where "$TMP/memcheck_$where.out" 2> /dev/null ||
      rc=$?
    if [ $rc -eq 0 ] || ! grep -q '^cuda_emu: .* (past \(its\|their\) end)' "$TMP/memcheck_$where.out"; then
      echo "$NAME: memory-check canary ($where): FAILED (an overrun went unnoticed):"
      cat "$TMP/memcheck_$where.out"
      exit 1
    fi
  done
  echo "$NAME: memory-check canary: both overruns caught ($(grep -ho 'at offset [0-9]* of [^(]*' "$TMP"/memcheck_*.out |
    sed -E 's/ at 0x[0-9a-f]+//; s/ $//' | paste -sd ';' | sed 's/;/; /'))"
fi

# 2. The programs.
# (a "translation" of the docs' lines into themselves reversed: data every clone has)
grep -hv '^\s*$' README.md docs/*.md | tr -d '\t' | sed -n '1,400p' > "$TMP/lines.txt"
paste -d '\t' "$TMP/lines.txt" <(rev "$TMP/lines.txt") > "$TMP/pairs.tsv"
# (emulated, each kernel's threads run one at a time on the CPU: fewer steps and sentences)
steps=30 sentences=20 lm_steps=20 lm_eval=10
[ $EMU = 1 ] && { steps=3; sentences=3; lm_steps=4; lm_eval=2; }
for p in fp32 bf16; do
  check "train_translator_$p" "$B/train_translator" --device cuda --precision $p --pairs "$TMP/pairs.tsv" \
    --save "$TMP/tr_$p" --steps $steps --layers 2 --width 64 --heads 4 --ff 128 --bleu_sentences $sentences --samples 2 --beam 3
  check "translate_$p" sh -c "printf 'Das Haus\nIch habe keine Zeit\n' | '$B/translate' --load '$TMP/tr_$p' --device cuda --precision $p"
done
for arch in gpt llama; do
  dropout=0.1
  [ $arch = llama ] && dropout=0  # (the llama architecture has none)
  for p in fp32 bf16; do
    check "train_lm_${arch}_$p" "$B/train_lm" --device cuda --arch $arch --precision $p --text README.md \
      --out "$TMP/lm_${arch}_$p" --steps $lm_steps --eval_every $lm_eval --eval_windows 8 --layers 2 --width 64 --context 32 \
      --batch 4 --sample 20 --dropout $dropout
  done
done
for m in gpt2 llama qwen2; do
  for p in fp32 bf16; do
    check "generate_${m}_$p" "$B/generate" --model "tests/golden/decoders/$m" --prompt_ids "1 2 3 4 5 6 7 8" \
      --max_new_tokens 24 --temperature 0 --ids --device cuda --precision $p
  done
  check "generate_${m}_sampled" "$B/generate" --model "tests/golden/decoders/$m" --prompt_ids "1 2 3" \
    --max_new_tokens 24 --temperature 0.8 --top_k 20 --top_p 0.9 --ids --device cuda
done
# A CPU run never initialises CUDA: not one runtime call.
check --cpu train_translator_cpu "$B/train_translator" --device cpu --pairs "$TMP/pairs.tsv" --save "$TMP/tr_cpu" \
  --steps 5 --layers 1 --width 32 --heads 2 --ff 64 --bleu_sentences 5 --samples 1 --beam 2
check --cpu train_lm_cpu "$B/train_lm" --device cpu --text README.md --out "$TMP/lm_cpu" --steps 5 --eval_every 5 \
  --eval_windows 4 --layers 1 --width 32 --context 16 --batch 2 --sample 5
check --cpu generate_cpu "$B/generate" --model tests/golden/decoders/llama --prompt_ids "1 2 3" --max_new_tokens 8 \
  --temperature 0 --ids --device cpu
if [ $EMU = 0 ]; then  # (emulated, step C alone would take hours: its products are plain loops)
  check gpu_train "$B/gpu_train" --c_batches 16 --steps 3 --warmup 1
  check gpu_train_graph "$B/gpu_train" --c_batches 16 --steps 3 --warmup 1 --graph
  echo "$NAME: host time a training step (no kernel runs; without the driver's ~2-3 us a launch):"
  python3 - "$TMP/gpu_train.out" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith('{'):
        r = json.loads(line)
        if r.get('case') == 'train':
            print(f"  step {r['config']} (batch {r['batch']}) {r['precision']:>4}: {r['kernels']:5d} kernels, {r['host_us']:6.0f} us")
EOF
fi

# 3. The GPU suite. Dry: its values are not computed, so only what it launches is checked.
# Emulated: it must pass (every skip a failure), in both orders.
suite() {  # suite FILE LABEL [ENV...]
  local file=$1 label=$2; shift 2
  local rc=0 v
  env "$@" TG_CUDA_DRY_REPORT="$TMP/$file.json" "$B/tg_gpu_tests" --gtest_brief=1 > "$TMP/$file.out" 2>&1 || rc=$?
  if v=$(verdict "$TMP/$file.json" 2>&1) && grep -q '^\[==========\] .* ran\.' "$TMP/$file.out" &&
     { [ $EMU = 0 ] || [ $rc -eq 0 ]; }; then
    if [ $EMU = 1 ]; then
      echo "$NAME: $label: $(grep -o '[0-9]* tests\? from .* ran' "$TMP/$file.out" | head -1), all passed; $v"
    else
      echo "$NAME: $label: $v (its values are not computed here, so its own verdicts are not asked for)"
    fi
  else
    echo "$NAME: $label: FAILED (exit $rc; ${v:-the suite did not finish}):"
    { grep 'cuda_dry: \|cuda_emu: \|FAILED\|Failure\|terminate\|Segmentation\|Abort' "$TMP/$file.out" || true; } | head -30
    failures=$((failures + 1))
  fi
}
if [ "${TG_DRY_SUITE:-1}" != 0 ]; then
  if [ $EMU = 1 ]; then
    # (every buffer exactly its tensor's size, TG_CUDA_NO_CACHING=1: the emulator's memory check
    # then faults at an access past any tensor's end, not only past its allocator size class)
    suite suite "GPU suite, exact buffers" TG_REQUIRE_GPU=1 TG_CUDA_NO_CACHING=1
    # (the kernels whose threads cooperate through shared memory and barriers: every op, the
    # products, reductions and attention; the rest of the suite adds time, not kernels)
    suite suite_reversed "GPU suite's kernels, threads and blocks in reverse order" TG_REQUIRE_GPU=1 TG_CUDA_EMU_REVERSE=1 \
      'GTEST_FILTER=GpuParity.*:Gpu.*Attention*:Gpu.Reductions*:Gpu.SortedIndexAdd*:Gpu.Classification*:Gpu.Dropout*'
  else
    suite suite "GPU suite"
  fi
fi
if [ $failures -ne 0 ]; then
  echo "$NAME: $failures check(s) FAILED"
  exit 1
fi
echo "$NAME: every check passed"
