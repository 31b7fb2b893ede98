#!/usr/bin/env bash
# generate against transformers on this CPU, same run (issue 28's speed goals): a Llama-shaped
# model of 100 M parameters made from a random config (hidden 768, 12 layers, 12 heads on 4
# key/value heads, SwiGLU 2048, vocabulary 32,000, tied head; written by transformers), a
# 128-token prompt (fixed random ids) and 256 new tokens chosen greedily, 1 and 2 threads,
# float32 and bfloat16. Also the machine's read bandwidth (build/mem_bandwidth) and what decoding
# reads per token (every weight once, the head included, plus the KV cache), so the fraction of
# the bandwidth decoding reaches is printed beside the tokens/s (the median of three runs against the
# higher of the bandwidths measured just before and just after them).
#
#   bench/hf_generate_peers.sh            (TORCH2_PYTHON=/path/to/python with torch 2.x and transformers)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${TORCH2_PYTHON:-$ROOT/../venv/bin/python}
B=${BUILD:-$ROOT/build}
TMP=${KEEP_DIR:-$(mktemp -d)}
[[ -z ${KEEP_DIR:-} ]] && trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP"
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]] && echo yes || echo no; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; avx512f $(has avx512f), avx512_bf16 $(has avx512_bf16), amx_bf16 $(has amx_bf16)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); python: $PY"
if [ ! -f "$TMP/model/model.safetensors" ]; then
  "$PY" - "$TMP/model" "$ROOT/tests/golden/tokenizers/llama3/tokenizer.json" <<'PYEOF'
import shutil, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                  num_key_value_heads=4, max_position_embeddings=1024, tie_word_embeddings=True, bos_token_id=None,
                  eos_token_id=None)
LlamaForCausalLM(cfg).save_pretrained(sys.argv[1])
shutil.copy(sys.argv[2], sys.argv[1] + "/tokenizer.json")
print(f"model: {sum(p.numel() for p in LlamaForCausalLM(cfg).parameters()) / 1e6:.1f} M parameters")
PYEOF
fi
PROMPT=$("$PY" -c "import random; r = random.Random(0); print(' '.join(str(r.randrange(32000)) for _ in range(128)))")
# Bytes read per decoded token: every parameter (the tied head reads the whole embedding) plus
# the KV cache at the mean position (128 + 256 / 2): 12 layers x K and V x 4 heads x 64 x 4 bytes.
P=100092672 KV=$((12 * 2 * 4 * 64 * (128 + 128)))
bytes_per_token() { if [[ $1 == bf16 ]]; then echo $((P * 2 + KV * 4)); else echo $((P * 4 + KV * 4)); fi; }
echo "bytes per token: fp32 $(bytes_per_token fp32), bf16 $(bytes_per_token bf16) (KV cache $((KV * 4)))"
bandwidth() { "$B/mem_bandwidth" --threads $1 2>/dev/null | sed -n 's/.*"gb_per_s": \([0-9.]*\).*/\1/p'; }
for dtype in fp32 bf16; do
  for t in 1 2; do
    # The VM's bandwidth moves by 10-15% from minute to minute: measured just before and just after
    # each configuration's three runs (median of 5 passes each); the fraction takes the median run
    # against the higher of the two bandwidth figures.
    bw0=$(bandwidth $t)
    runs=()
    for r in 1 2 3; do
      "$B/generate" --model "$TMP/model" --prompt_ids "$PROMPT" --max_new_tokens 256 --temperature 0 --threads $t \
        --precision $dtype --ids >"$TMP/ids" 2>"$TMP/err"
      line=$(grep "generated" "$TMP/err")
      runs+=("$(sed -n 's/.*, \([0-9.]*\) tokens\/s$/\1/p' <<<"$line") $line")
    done
    bw1=$(bandwidth $t)
    mid=$(printf '%s\n' "${runs[@]}" | sort -g | sed -n 2p)
    all=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f1 | sort -g | tr '\n' ' ')
    bw=$(awk "BEGIN{print ($bw0 > $bw1 ? $bw0 : $bw1)}")
    frac=$(awk "BEGIN{printf \"%.2f\", ${mid%% *} * $(bytes_per_token $dtype) / 1e9 / $bw}")
    echo "{\"bench\": \"hf_generate\", \"peer\": \"tapegrad generate\", \"threads\": $t, \"dtype\": \"$dtype\", \"median_run\": \"${mid#* }\", \"gen_tok_s_runs\": \"${all% }\", \"read_gb_per_s_before_after\": \"$bw0 $bw1\", \"bandwidth_fraction\": $frac, \"first_ids\": \"$(cut -d' ' -f129-136 "$TMP/ids")\"}"
    "$PY" "$ROOT/bench/torch_hf_generate.py" --model "$TMP/model" --prompt_ids "$PROMPT" --new 256 --threads $t --dtype $dtype 2>/dev/null
  done
done
