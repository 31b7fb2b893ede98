#!/usr/bin/env bash
# Sentence-embedding speed: tapegrad's bert_embed beside PyTorch + transformers
# (bench/torch_bert_embed.py, done as sentence-transformers does it), all-MiniLM-L6-v2, same input,
# same settings (mean pooling, normalized, max_length 256, batch 32), 1 and 2 threads; prints a
# markdown table: ratio = PyTorch's best time / tapegrad's time (> 1: tapegrad is faster).
#
#   bench/bert_embed_peers.sh MODEL_DIR BUILD_DIR        (e.g. data/models/all-MiniLM-L6-v2 build)
#
# The input: N (default 10000) lines of data/wordnet.txt, sampled with a fixed seed (Python's
# random.Random(1).sample, stdlib only). Environment: N, THREADS (default "1 2"), TG_BERT_WORK (work
# folder, default /tmp/tg_bert_peers), TG_TORCH_PYTHON (the interpreter with torch + transformers;
# default /tmp/torch2/bin/python if it exists, else python3).
#
# tapegrad is timed as a whole process (date +%s.%N around it): reading the input, loading the
# model, tokenization, the forward passes, pooling and writing the output. Its fixed cost is also
# measured on a 1-line input and shown apart. PyTorch's time excludes the interpreter's start and
# model loading (its load time is listed below the table), but includes sorting, tokenization and
# pooling; it runs with OMP_WAIT_POLICY=passive and with the OpenMP default (unset), and for each,
# eager and sdpa attention, the faster reported. Each run is a fresh process. Agreement: the minimum
# cosine between tapegrad's and PyTorch's embeddings.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 MODEL_DIR BUILD_DIR" >&2
  exit 2
fi
MODEL=$1 BUILD=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
N=${N:-10000}
THREADS=${THREADS:-"1 2"}
W=${TG_BERT_WORK:-/tmp/tg_bert_peers}
if [[ -n ${TG_TORCH_PYTHON:-} ]]; then
  PY=$TG_TORCH_PYTHON
elif [[ -x /tmp/torch2/bin/python ]]; then
  PY=/tmp/torch2/bin/python
else
  PY=python3
fi
OURS="$BUILD/bert_embed"
if [[ ! -x $OURS ]]; then
  echo "error: '$OURS' not found or not executable (build the bert_embed target)" >&2
  exit 1
fi
mkdir -p "$W"
rm -f "$W"/*.safetensors  # bert_embed never replaces an existing output

python3 - "$ROOT/data/wordnet.txt" "$N" "$W/input.txt" "$W/one.txt" <<'EOF'
import random, sys
src, n, out, one = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(src, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
sample = random.Random(1).sample(lines, n)
with open(out, "w", encoding="utf-8") as f:
    f.writelines(s + "\n" for s in sample)
with open(one, "w", encoding="utf-8") as f:
    f.write(sample[0] + "\n")
EOF

now() { date +%s.%N; }
cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# bert_embed vs PyTorch, all-MiniLM-L6-v2 sentence embeddings, float32 CPU"
echo
echo "- command: \`$0 $*\` (N=$N THREADS=\"$THREADS\" TG_TORCH_PYTHON=$PY)"
echo "- input: $N lines of data/wordnet.txt (random.Random(1).sample), $(wc -c < "$W/input.txt") bytes"
echo "- CPU: $cpu ($(nproc) logical CPUs online)"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- torch: $("$PY" -c 'import torch, transformers; print(torch.__version__, "transformers", transformers.__version__)' 2>/dev/null)"
echo "- tapegrad: \`$OURS --model $MODEL --input INPUT --output OUT --threads N --batch 32\` (whole process)"
echo "- PyTorch: \`[OMP_WAIT_POLICY=passive] $PY bench/torch_bert_embed.py --model $MODEL --input INPUT --threads N --limit $N\`"
echo

for t in $THREADS; do
  echo "running bert_embed with --threads $t ..." >&2
  start=$(now)
  "$OURS" --model "$MODEL" --input "$W/one.txt" --output "$W/one_$t.safetensors" --threads "$t" --batch 32 \
    >"$W/ours_one_$t.log" 2>&1 || { cat "$W/ours_one_$t.log" >&2; exit 1; }
  end=$(now)
  echo "$start $end" >"$W/ours_one_$t.time"
  start=$(now)
  "$OURS" --model "$MODEL" --input "$W/input.txt" --output "$W/ours_$t.safetensors" --threads "$t" --batch 32 \
    >"$W/ours_$t.log" 2>&1 || { cat "$W/ours_$t.log" >&2; exit 1; }
  end=$(now)
  echo "$start $end" >"$W/ours_$t.time"
  echo "running torch_bert_embed.py with --threads $t, OMP_WAIT_POLICY=passive ..." >&2
  OMP_WAIT_POLICY=passive "$PY" "$HERE/torch_bert_embed.py" --model "$MODEL" --input "$W/input.txt" \
    --threads "$t" --limit "$N" --output "$W/torch_$t.safetensors" >"$W/torch_passive_$t.json" 2>"$W/torch_passive_$t.err" \
    || { cat "$W/torch_passive_$t.err" >&2; exit 1; }
  echo "running torch_bert_embed.py with --threads $t, default OMP_WAIT_POLICY ..." >&2
  env -u OMP_WAIT_POLICY "$PY" "$HERE/torch_bert_embed.py" --model "$MODEL" --input "$W/input.txt" \
    --threads "$t" --limit "$N" >"$W/torch_default_$t.json" 2>"$W/torch_default_$t.err" \
    || { cat "$W/torch_default_$t.err" >&2; exit 1; }
done

"$PY" - "$W" "$N" $THREADS <<'EOF'
import json, os, sys
w, n, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def elapsed(path):
    a, b = open(path).read().split()
    return float(b) - float(a)

def cell(s):
    return f"{s:.2f} s / {n / s:.0f}"

try:
    from safetensors.torch import load_file
    import torch
except ImportError:
    load_file = None

print("| threads | tapegrad s / sentences per s | PyTorch passive s / sentences per s | "
      "PyTorch default s / sentences per s | ratio |")
print("|---|---|---|---|---|")
notes = []
for t in threads:
    ours = elapsed(os.path.join(w, f"ours_{t}.time"))
    fixed = elapsed(os.path.join(w, f"ours_one_{t}.time"))
    p = json.loads(open(os.path.join(w, f"torch_passive_{t}.json")).read().splitlines()[-1])
    d = json.loads(open(os.path.join(w, f"torch_default_{t}.json")).read().splitlines()[-1])
    best = min(p["seconds"], d["seconds"])
    print(f"| {t} | {cell(ours)} | {cell(p['seconds'])} ({p['attn']}) | {cell(d['seconds'])} ({d['attn']}) | "
          f"{best / ours:.2f} |")
    note = (f"- {t} thread(s): tapegrad's fixed cost (1-line input, whole process) {fixed:.2f} s; "
            f"PyTorch model loading {p['load_seconds']:.2f} s (not timed); PyTorch eager / sdpa "
            f"{p['seconds_eager']:.2f} / {p['seconds_sdpa']:.2f} s (passive), "
            f"{d['seconds_eager']:.2f} / {d['seconds_sdpa']:.2f} s (default)")
    if load_file is not None:
        a = load_file(os.path.join(w, f"ours_{t}.safetensors"))["embeddings"].to(torch.float64)
        b = load_file(os.path.join(w, f"torch_{t}.safetensors"))["embeddings"].to(torch.float64)
        if a.shape == b.shape:
            cos = torch.nn.functional.cosine_similarity(a, b, dim=1)
            note += f"; min cosine tapegrad vs PyTorch {float(cos.min()):.7f}"
        else:
            note += f"; shapes differ: tapegrad {tuple(a.shape)}, PyTorch {tuple(b.shape)}"
    notes.append(note)
print()
print("ratio = the better PyTorch time / tapegrad's time (> 1: tapegrad is faster).")
print("\n".join(notes))
EOF
