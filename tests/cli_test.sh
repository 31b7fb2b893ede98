#!/usr/bin/env bash
# The example programs on bad input: one clear line on stderr and a non-zero exit, never a crash.
#   tests/cli_test.sh BUILD_DIR
set -u
BIN=$(cd "$1" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
# expect_error "fragment" command...
expect_error() {
  local fragment=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  # The first line is the program's version line (tapegrad, its build, the bf16 path); then the error.
  lines=$(grep -v "^[a-z_0-9]*: tapegrad [0-9]" "$TMP/err" | grep -c .)
  if [[ $rc -eq 0 || $rc -gt 125 ]]; then
    echo "FAIL: '$*' exited with $rc (expected an error exit, not success or a signal)"; failures=$((failures + 1))
  elif ! grep -q -- "$fragment" "$TMP/err"; then
    echo "FAIL: '$*' stderr lacks '$fragment':"; cat "$TMP/err"; failures=$((failures + 1))
  elif [[ $lines -gt 2 ]]; then
    echo "FAIL: '$*' printed $lines lines on stderr (expected one):"; cat "$TMP/err"; failures=$((failures + 1))
  else
    echo "ok: $* -> $(grep . "$TMP/err" | tail -1)"
  fi
}
printf 'hello world, this is a tiny text.\n%.0s' $(seq 1 200) >"$TMP/text.txt"
expect_error "cannot open" "$BIN/train_lm" --text "$TMP/missing.txt" --out "$TMP/run"
expect_error "--layers: expected an integer" "$BIN/train_lm" --layers=x --text "$TMP/text.txt"
expect_error "unknown flag --no_such_flag" "$BIN/train_lm" --no_such_flag
expect_error "must be a multiple of --heads" "$BIN/train_lm" --text "$TMP/text.txt" --width 10 --heads 3 --out "$TMP/run"
expect_error "too little text" "$BIN/train_lm" --text "$TMP/text.txt" --context 4096 --out "$TMP/run"
echo "not gzip" >"$TMP/bad.gz"
expect_error "not a valid gzip file" "$BIN/train_lm" --text "$TMP/bad.gz" --out "$TMP/run"
"$BIN/train_lm" --text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 2 --eval_every 2 --sample 1 \
  --out "$TMP/corrupt" >/dev/null 2>&1
# A corrupt newest checkpoint: --resume sets it aside as *.corrupt, says so and uses the one before.
echo "garbage" >"$TMP/corrupt/checkpoint-00000099.safetensors"
if "$BIN/train_lm" --text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 4 --eval_every 2 --sample 1 \
     --out "$TMP/corrupt" --resume >"$TMP/out" 2>"$TMP/err" &&
   grep -q "checkpoint-00000099.safetensors: not a valid safetensors file" "$TMP/err" &&
   grep -q "set aside as checkpoint-00000099.safetensors.corrupt" "$TMP/err" &&
   grep -q "resuming from checkpoint-00000002.safetensors" "$TMP/err" && [ -f "$TMP/corrupt/checkpoint-00000099.safetensors.corrupt" ]; then
  echo "ok: train_lm --resume sets a corrupt newest checkpoint aside"; else
  echo "FAIL: train_lm --resume over a corrupt newest checkpoint:"; cat "$TMP/err"; failures=$((failures + 1)); fi
# Settings a resumed run cannot change are named; data paths compare by file, not spelling; a
# finished run resumed says there is nothing left to do.
expect_error "--tokenizer is bpe here but char in the run being resumed" "$BIN/train_lm" --text "$TMP/text.txt" --layers 1 \
  --width 16 --heads 2 --context 8 --steps 6 --out "$TMP/corrupt" --resume --tokenizer bpe --vocab 50
expect_error "--vocab 50: sets the number of subword pieces, with --tokenizer bpe, unigram or byte_bpe" "$BIN/train_lm" --text "$TMP/text.txt" \
  --out "$TMP/corrupt" --resume --vocab 50
expect_error "--layers is 2 here but 1 in the run being resumed" "$BIN/train_lm" --text "$TMP/text.txt" --layers 2 \
  --width 16 --heads 2 --context 8 --steps 6 --out "$TMP/corrupt" --resume
if (cd "$TMP" && "$BIN/train_lm" --text ./text.txt --layers 1 --width 16 --heads 2 --context 8 --steps 4 --eval_every 2 --sample 1 \
      --out corrupt --resume >"$TMP/out" 2>"$TMP/err") &&
   grep -q "nothing left to do: the run (at step 4, epoch 0, .* min of training) reached max_steps 4 already" "$TMP/err"; then
  echo "ok: train_lm --resume by a relative path, with nothing left to do"; else
  echo "FAIL: train_lm --resume by a relative path / nothing left:"; cat "$TMP/err"; failures=$((failures + 1)); fi
# A changed byte in a model file: its checksum names the tensor.
cp -r "$TMP/corrupt" "$TMP/flipped"
perl -0777 -pi -e 'substr($_, -5, 1) ^= "\x10"' "$TMP/flipped/model.safetensors"
expect_error "fails its checksum" "$BIN/train_lm" --load "$TMP/flipped" --sample 5
expect_error "expected one of char, bpe, unigram, byte_bpe" "$BIN/train_lm" --text "$TMP/text.txt" --tokenizer word --out "$TMP/run"
for tok in bpe unigram; do  # a subword LM end to end, then resumed
  if "$BIN/train_lm" --text "$TMP/text.txt" --tokenizer "$tok" --vocab 23 --layers 1 --width 16 --heads 2 --context 8 \
       --steps 3 --eval_every 2 --sample 5 --out "$TMP/lm_$tok" >"$TMP/out" 2>&1 &&
     "$BIN/train_lm" --text "$TMP/text.txt" --tokenizer "$tok" --vocab 23 --layers 1 --width 16 --heads 2 --context 8 \
       --steps 4 --eval_every 2 --sample 5 --out "$TMP/lm_$tok" --resume >"$TMP/out" 2>&1 &&
     grep -q "nats/token" "$TMP/out" && [ -s "$TMP/lm_$tok/tokenizer.spm" ]; then
    echo "ok: train_lm --tokenizer $tok, then --resume"
  else
    echo "FAIL: train_lm --tokenizer $tok:"; tail -5 "$TMP/out"; failures=$((failures + 1))
  fi
done
printf 'garbage' >"$TMP/lm_bpe/tokenizer.spm"
expect_error "not a SentencePiece model" "$BIN/train_lm" --text "$TMP/text.txt" --tokenizer bpe --vocab 23 --out "$TMP/lm_bpe" --resume
expect_error "cannot open" "$BIN/train_translator" --src "$TMP/missing.de" --tgt "$TMP/text.txt" --save "$TMP/tr"
printf "a\\nb\\n" >"$TMP/two.txt"
expect_error "must be aligned line by line" "$BIN/train_translator" --src "$TMP/text.txt" --tgt "$TMP/two.txt" --save "$TMP/tr"
expect_error "must be a multiple of --heads" "$BIN/train_translator" --width 10 --heads 3 --save "$TMP/tr"
printf 'eins zwei\n' >"$TMP/one.tsv"
expect_error "no tab" "$BIN/train_translator" --pairs "$TMP/one.tsv" --save "$TMP/tr"
expect_error "cannot open" "$BIN/translate" --load "$TMP/nothing"
mkdir -p "$TMP/badmodel"
printf 'lowercase 0\n<pad>\n<bos>\n<eos>\n<unk>\nhallo\n' >"$TMP/badmodel/src_vocab.txt"
cp "$TMP/badmodel/src_vocab.txt" "$TMP/badmodel/tgt_vocab.txt"
head -c 100 /dev/urandom >"$TMP/badmodel/model.safetensors"
expect_error "not a valid safetensors file" "$BIN/translate" --load "$TMP/badmodel"
expect_error "expected one of word, char, bpe, unigram" "$BIN/train_translator" --tokenizer wordpiece --save "$TMP/tr"
for i in $(seq 1 300); do printf 'das haus nummer %d ist alt.\tthe house number %d is old.\n' "$i" "$i"; done >"$TMP/pairs.tsv"
expect_error "Vocabulary size too high" "$BIN/train_translator" --pairs "$TMP/pairs.tsv" --tokenizer bpe --vocab 5000 --save "$TMP/tr"
# Subword and character translators train, save and load end to end; a corrupt subword model is refused.
for tok in bpe unigram char; do
  if ! "$BIN/train_translator" --pairs "$TMP/pairs.tsv" --tokenizer "$tok" --vocab 40 --layers 1 --width 32 --heads 2 --ff 64 \
       --epochs 1 --samples 1 --save "$TMP/tr_$tok" >"$TMP/out" 2>&1; then
    echo "FAIL: train_translator --tokenizer $tok:"; tail -5 "$TMP/out"; failures=$((failures + 1))
  elif ! echo "das haus nummer 7 ist alt." | "$BIN/translate" --load "$TMP/tr_$tok" >"$TMP/out" 2>&1; then
    echo "FAIL: translate --load (tokenizer $tok):"; cat "$TMP/out"; failures=$((failures + 1))
  else
    echo "ok: train_translator --tokenizer $tok, then translate"
  fi
done
# A translator resumed with another vocabulary size is refused by name; resumed when finished, it says so.
TR=(--pairs "$TMP/pairs.tsv" --tokenizer char --vocab 40 --layers 1 --width 32 --heads 2 --ff 64 --epochs 1 --samples 1)
expect_error "--vocab is 300 here but 40 in the run being resumed" "$BIN/train_translator" "${TR[@]}" --vocab 300 --save "$TMP/tr_char" --resume
if "$BIN/train_translator" "${TR[@]}" --save "$TMP/tr_char" --resume >"$TMP/out" 2>"$TMP/err" &&
   grep -q "nothing left to do: .* finished 1 epochs already" "$TMP/err" && ! grep -q "loss nan" "$TMP/out" "$TMP/err"; then
  echo "ok: train_translator --resume of a finished run: nothing left to do"; else
  echo "FAIL: train_translator --resume of a finished run:"; cat "$TMP/out" "$TMP/err"; failures=$((failures + 1)); fi
cp -r "$TMP/tr_unigram" "$TMP/tr_flipped"
perl -0777 -pi -e 'substr($_, -5, 1) ^= "\x10"' "$TMP/tr_flipped/model.safetensors"
expect_error "fails its checksum" "$BIN/translate" --load "$TMP/tr_flipped"
# Metadata that does not match the tensors (a feed-forward width of 99 in a model trained with 64)
# is refused before the model is built.
cp -r "$TMP/tr_char" "$TMP/tr_ff"
perl -0777 -pi -e 's/"ff":"64"/"ff":"99"/' "$TMP/tr_ff/model.safetensors"
expect_error "ffn.linear1.weight has shape \[64, 32\], but the metadata and tokenizers say \[99, 32\]" "$BIN/translate" --load "$TMP/tr_ff"
printf 'garbage' >"$TMP/tr_bpe/tgt.spm"
expect_error "not a SentencePiece model" "$BIN/translate" --load "$TMP/tr_bpe"
rm "$TMP/tr_char/src.txt"
expect_error "no tokenizer file" "$BIN/translate" --load "$TMP/tr_char"
expect_error "multiple of --heads" "$BIN/explain_attention" --width 10 --heads 3 --out "$TMP/ex"
expect_error "cannot open" "$BIN/explain_attention" --src "$TMP/missing" --tgt "$TMP/text.txt" --out "$TMP/ex"
# Flags are checked before any data is read (issue: values that crashed or were silently misread).
expect_error "--eval_every: must be >= 1" "$BIN/train_lm" --eval_every 0 --text "$TMP/missing.txt"
expect_error "--lr: expected a finite number" "$BIN/train_lm" --lr nan --text "$TMP/missing.txt"
expect_error "--lr: must be > 0" "$BIN/train_lm" --lr -1 --text "$TMP/missing.txt"
expect_error "--dropout: must be in" "$BIN/train_translator" --dropout 1.5 --save "$TMP/tr"
expect_error "--label_smoothing: must be in" "$BIN/train_translator" --label_smoothing 2 --save "$TMP/tr"
expect_error "--beam: must be in" "$BIN/train_translator" --beam 0 --save "$TMP/tr"
expect_error "--temperature: must be >= 0" "$BIN/train_lm" --temperature -1 --text "$TMP/missing.txt"
expect_error "--top_k: must be >= 0" "$BIN/train_lm" --top_k -3 --text "$TMP/missing.txt"
expect_error "unexpected argument 'stray'" "$BIN/translate" stray
expect_error "--size: must be in" "$BIN/train_word2vec" --size 100000000 --train "$TMP/text.txt"
for prog in train_lm train_translator translate train_word2vec explain_attention quickstart custom_op bert_embed classify_glosses generate; do
  if "$BIN/$prog" --help >"$TMP/out" 2>&1 && grep -q -- "--help" "$TMP/out"; then echo "ok: $prog --help"; else
    echo "FAIL: $prog --help"; cat "$TMP/out"; failures=$((failures + 1)); fi
done
# A run folder is never silently overwritten; --overwrite replaces it; a finished LM samples with --load.
LM=(--text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --eval_every 2 --sample 5)
"$BIN/train_lm" "${LM[@]}" --steps 2 --out "$TMP/lm_once" >/dev/null 2>&1
expect_error "holds an earlier run" "$BIN/train_lm" "${LM[@]}" --steps 2 --out "$TMP/lm_once"
if "$BIN/train_lm" "${LM[@]}" --steps 2 --out "$TMP/lm_once" --overwrite >/dev/null 2>&1 &&
   "$BIN/train_lm" --load "$TMP/lm_once" --sample 10 >"$TMP/out" 2>&1 && [ -s "$TMP/out" ]; then
  echo "ok: train_lm --overwrite, then --load samples without training"; else
  echo "FAIL: train_lm --overwrite / --load"; cat "$TMP/out"; failures=$((failures + 1)); fi
# A config.json that claims more layers than the file holds is refused before the model is built.
cp -r "$TMP/lm_once" "$TMP/lm_layers"
perl -0777 -pi -e 's/"n_layer": 1/"n_layer": 9/' "$TMP/lm_layers/config.json"
expect_error "model.safetensors: holds 1 layers but .*config.json says n_layer 9" "$BIN/train_lm" --load "$TMP/lm_layers" --sample 5
# --arch llama with a byte-level BPE it trains: a Hugging Face folder that generate loads, --resume
# continues, and --load samples from; the flags that only make sense together are checked.
LL=(--text "$TMP/text.txt" --arch llama --kv_heads 1 --tokenizer byte_bpe --vocab 300 --layers 1 --width 16 --heads 2 --context 8
    --eval_every 2 --sample 5)
if "$BIN/train_lm" "${LL[@]}" --steps 2 --out "$TMP/lm_llama" >"$TMP/out" 2>&1 &&
   "$BIN/train_lm" "${LL[@]}" --steps 4 --out "$TMP/lm_llama" --resume >>"$TMP/out" 2>&1 &&
   grep -q "LlamaForCausalLM" "$TMP/out" && grep -q '"num_key_value_heads": 1' "$TMP/lm_llama/config.json" &&
   [ -s "$TMP/lm_llama/tokenizer.json" ] && [ -s "$TMP/lm_llama/tokenizer_config.json" ] &&
   "$BIN/generate" --model "$TMP/lm_llama" --prompt "hello" --max_new_tokens 5 >/dev/null 2>>"$TMP/out" &&
   "$BIN/train_lm" --load "$TMP/lm_llama" --sample 5 >/dev/null 2>>"$TMP/out"; then
  echo "ok: train_lm --arch llama --tokenizer byte_bpe, --resume, then generate and --load"; else
  echo "FAIL: train_lm --arch llama"; tail -5 "$TMP/out"; failures=$((failures + 1)); fi
expect_error "--kv_heads 3 must divide --heads 4" "$BIN/train_lm" "${LL[@]}" --heads 4 --kv_heads 3 --out "$TMP/run"
expect_error "--kv_heads is for --arch llama" "$BIN/train_lm" --text "$TMP/text.txt" --kv_heads 2 --out "$TMP/run"
expect_error "must be even" "$BIN/train_lm" "${LL[@]}" --width 18 --heads 2 --out "$TMP/run"
expect_error "--dropout: the llama architecture has none" "$BIN/train_lm" "${LL[@]}" --dropout 0.1 --out "$TMP/run"
expect_error "--vocab 100: a byte_bpe vocabulary holds <|endoftext|> and the 256 bytes at least" "$BIN/train_lm" "${LL[@]}" --vocab 100 --out "$TMP/run_v"
expect_error "expected one of gpt, llama" "$BIN/train_lm" --text "$TMP/text.txt" --arch mamba --out "$TMP/run"
# Divergence: the run stops before the optimizer step with exit code 3 and one message.
"$BIN/train_lm" "${LM[@]}" --steps 60 --lr 1e6 --out "$TMP/lm_nan" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 3 ]] && grep -q "training diverged at step" "$TMP/err"; then echo "ok: train_lm --lr 1e6 -> exit 3"; else
  echo "FAIL: train_lm --lr 1e6 exited $rc"; cat "$TMP/err"; failures=$((failures + 1)); fi
# Swapped tokenizer files are refused instead of translating garbage.
cp "$TMP/tr_bpe/src.spm" "$TMP/swap" 2>/dev/null || true
if [ -f "$TMP/tr_unigram/src.spm" ]; then
  cp "$TMP/tr_unigram/src.spm" "$TMP/x.spm"; cp "$TMP/tr_unigram/tgt.spm" "$TMP/tr_unigram/src.spm"; cp "$TMP/x.spm" "$TMP/tr_unigram/tgt.spm"
  expect_error "were the src and tgt files swapped" "$BIN/translate" --load "$TMP/tr_unigram"
fi
# word2vec's original single-dash form: -cbow 0 trains skip-gram (it used to do the opposite).
for i in $(seq 1 40); do echo "the king and the queen walk to the house of the lord and the people"; done >"$TMP/w2v.txt"
if "$BIN/train_word2vec" -train "$TMP/w2v.txt" -output "$TMP/w2v/v.txt" -cbow 0 -size 8 -iter 1 -min_count 1 >"$TMP/out" 2>&1 &&
   grep -q "skip-gram" "$TMP/out"; then echo "ok: train_word2vec -cbow 0 is skip-gram"; else
  echo "FAIL: train_word2vec -cbow 0"; cat "$TMP/out"; failures=$((failures + 1)); fi
printf '# no pairs here\n' >"$TMP/empty.tsv"
expect_error "no word pair" "$BIN/train_word2vec" --train "$TMP/w2v.txt" --output "$TMP/w2v2/v.txt" --min_count 1 --similarity "$TMP/empty.tsv"
# A bad pretrained-model folder: one line naming the file and the problem.
echo "a sentence" >"$TMP/s.txt"
expect_error "not a model folder" "$BIN/bert_embed" --model "$TMP/no_model" --input "$TMP/s.txt" --output "$TMP/e.safetensors"
mkdir -p "$TMP/bad_model"
echo '{"model_type": "gpt2"}' >"$TMP/bad_model/config.json"
expect_error "config.json: model_type \"gpt2\" is not supported" "$BIN/bert_embed" --model "$TMP/bad_model" --input "$TMP/s.txt" --output "$TMP/e.safetensors"
echo '{"model_type": "bert", "hidden_size": 10, "num_attention_heads": 3}' >"$TMP/bad_model/config.json"
expect_error "hidden_size 10 is not a multiple of num_attention_heads 3" "$BIN/bert_embed" --model "$TMP/bad_model" --input "$TMP/s.txt" --output "$TMP/e.safetensors"
echo '{"model_type": "bert"}' >"$TMP/bad_model/config.json"
expect_error "bad_model/model.safetensors" "$BIN/bert_embed" --model "$TMP/bad_model" --input "$TMP/s.txt" --output "$TMP/e.safetensors"
expect_error "--pooling: expected one of" "$BIN/bert_embed" --model "$TMP/bad_model" --input "$TMP/s.txt" --output "$TMP/e.safetensors" --pooling max
touch "$TMP/exists.safetensors"
expect_error "exists; pass --overwrite" "$BIN/bert_embed" --model "$TMP/bad_model" --input "$TMP/s.txt" --output "$TMP/exists.safetensors"
expect_error "not a model folder" "$BIN/classify_glosses" --model "$TMP/no_model" --out "$TMP/glosses"
expect_error "--model $TMP/no_model: not a model folder" "$BIN/explain_attention" --model "$TMP/no_model" --out "$TMP/explain"
# Precision and the bf16 path: --version names it, every program's first stderr line too, a bad
# value is one line, a bf16 run trains and resumes (and records its precision).
expect_error "--precision: expected one of fp32, bf16" "$BIN/train_lm" --text "$TMP/text.txt" --precision fp16 --out "$TMP/run"
if "$BIN/train_lm" --version | grep -q "bf16 matmul: " && "$BIN/translate" --version | grep -q "tapegrad "; then echo "ok: --version"; else
  echo "FAIL: --version"; failures=$((failures + 1)); fi
expect_error "TG_CPU_CAPABILITY=avx1024 is not a path" env TG_CPU_CAPABILITY=avx1024 "$BIN/train_lm" --text "$TMP/text.txt" --out "$TMP/run"
if "$BIN/train_lm" --text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 3 --eval_every 2 --sample 5 \
     --precision bf16 --out "$TMP/lm_bf16" >"$TMP/out" 2>"$TMP/err" &&
   head -1 "$TMP/err" | grep -q "bf16 matmul: " &&
   "$BIN/train_lm" --text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 4 --eval_every 2 --sample 5 \
     --precision bf16 --out "$TMP/lm_bf16" --resume >"$TMP/out" 2>"$TMP/err" && ! grep -q "was computed in" "$TMP/err" &&
   "$BIN/train_lm" --text "$TMP/text.txt" --layers 1 --width 16 --heads 2 --context 8 --steps 5 --eval_every 2 --sample 5 \
     --out "$TMP/lm_bf16" --resume >"$TMP/out" 2>"$TMP/err" && grep -q "was computed in bfloat16 on the" "$TMP/err"; then
  echo "ok: train_lm --precision bf16, resumed in bf16, then in fp32 (reported)"
else
  echo "FAIL: train_lm --precision bf16:"; tail -5 "$TMP/err"; failures=$((failures + 1))
fi
# docs/tutorial.md shows examples/custom_model.cc (tests/docs_test.sh checks it is that file); it trains.
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if "$BIN/custom_model" --run_dir "$TMP/digits" >"$TMP/out" 2>&1 && grep -q "validation accuracy" "$TMP/out"; then
  echo "ok: custom_model: $(tail -1 "$TMP/out")"; else echo "FAIL: custom_model"; tail -3 "$TMP/out"; failures=$((failures + 1)); fi
expect_error "holds an earlier run" "$BIN/custom_model" --run_dir "$TMP/digits"
# word2vec's divergence stop: exit 3, one line, no vectors written.
"$BIN/train_word2vec" --train "$TMP/w2v.txt" --output "$TMP/w2v_nan/v.txt" --min_count 1 --size 8 --iter 5 --alpha 1e9 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 3 ]] && grep -q "training diverged" "$TMP/err" && [ ! -e "$TMP/w2v_nan/v.txt" ]; then echo "ok: train_word2vec --alpha 1e9 -> exit 3, no vectors"; else
  echo "FAIL: train_word2vec --alpha 1e9 exited $rc"; cat "$TMP/err"; failures=$((failures + 1)); fi
# Saving never replaces what is not a regular file, and never writes through a symbolic link.
mkfifo "$TMP/pipe"
expect_error "is not a regular file" "$BIN/train_word2vec" --train "$TMP/w2v.txt" --output "$TMP/pipe" --min_count 1 --size 8 --iter 1 --overwrite
echo old >"$TMP/target.txt"; ln -s target.txt "$TMP/link.txt"
expect_error "link.txt: a symbolic link; a file is never written through a link" \
  "$BIN/train_word2vec" --train "$TMP/w2v.txt" --output "$TMP/link.txt" --min_count 1 --size 8 --iter 1 --overwrite
if [ "$(cat "$TMP/target.txt")" = "old" ]; then echo "ok: the link's target is untouched"; else
  echo "FAIL: symlinked output replaced its target"; failures=$((failures + 1)); fi
# generate: a Hugging Face decoder folder (the tests' tiny random ones, with their tokenizers).
DEC="$SRC/tests/golden/decoders"
expect_error "give one of --prompt, --prompt_file and --prompt_ids" "$BIN/generate" --model "$DEC/llama"
expect_error "--prompt_ids: '999' is not a token id in \[0, 320)" "$BIN/generate" --model "$DEC/llama" --prompt_ids "1 2,999"
expect_error "no_model/config.json" "$BIN/generate" --model "$TMP/no_model" --prompt hi
printf 'ok\nab\xffc' >"$TMP/bad_prompt.txt"
expect_error "bad_prompt.txt: .*line 2, column 3" "$BIN/generate" --model "$DEC/gpt2" --prompt_file "$TMP/bad_prompt.txt"
head -c 2000000 /dev/zero | tr '\0' 'a' >"$TMP/long_prompt.txt"  # far past the context: refused before it is encoded
expect_error "long_prompt.txt: the prompt is 2000000 bytes, at least .* tokens; the model takes at most" \
  "$BIN/generate" --model "$DEC/llama" --prompt_file "$TMP/long_prompt.txt"
expect_error "--top_p: must be in" "$BIN/generate" --model "$DEC/gpt2" --prompt hi --top_p 0
# --device: a name that is no device, and a GPU asked for where none is usable (this machine: no GPU;
# skipped where one is) are one line each; the first line of the program's own says where it runs.
expect_error "--device: 'gpu' is not a device (expected auto, cpu, cuda or cuda:N)" "$BIN/generate" --model "$DEC/llama" --prompt hi --device gpu
if ! "$BIN/generate" --model "$DEC/llama" --prompt hi --max_new_tokens 1 --device cuda:0 >/dev/null 2>"$TMP/gpu_probe"; then
  expect_error "--device cuda:7: no GPU is usable: " "$BIN/generate" --model "$DEC/llama" --prompt hi --device cuda:7
  expect_error "--device cuda: no GPU is usable: " "$BIN/translate" --load "$TMP/none" --device cuda </dev/null
  expect_error "--device cuda:1: no GPU is usable: " "$BIN/bert_embed" --model "$TMP/none" --input "$TMP/text.txt" \
    --output "$TMP/e.safetensors" --device cuda:1
  expect_error "--device cuda: no GPU is usable: " "$BIN/train_lm" --text "$TMP/none.txt" --out "$TMP/lm_gpu" --device cuda
  expect_error "--device cuda: no GPU is usable: " "$BIN/train_translator" --save "$TMP/tr_gpu" --device cuda
  expect_error "--device cuda: no GPU is usable: " "$BIN/explain_attention" --out "$TMP/ex_gpu" --device cuda
fi
# Word2vec trains on the CPU only: cuda is refused with why (checked before any GPU probe).
expect_error "--device cuda: word2vec (its negative-sampling loss has no GPU kernel) runs on the CPU only" \
  "$BIN/train_word2vec" --train "$TMP/none.txt" --output "$TMP/w2v_gpu/v.txt" --device cuda
if "$BIN/generate" --model "$DEC/llama" --prompt hi --max_new_tokens 2 --device cpu 2>&1 >/dev/null | grep -v ": tapegrad [0-9]" |
   head -1 | grep -q "^generate: .*, on cpu, "; then echo "ok: generate --device cpu says so in its first line"; else
  echo "FAIL: generate --device cpu does not say where it runs"; failures=$((failures + 1)); fi
for m in llama qwen2 llama3 gpt2; do
  if "$BIN/generate" --model "$DEC/$m" --prompt "To be, or not to be" --max_new_tokens 48 --seed 7 --threads 1 >"$TMP/gen1" 2>"$TMP/err" &&
     "$BIN/generate" --model "$DEC/$m" --prompt "To be, or not to be" --max_new_tokens 48 --seed 7 --threads 2 >"$TMP/gen2" 2>>"$TMP/err" &&
     cmp -s "$TMP/gen1" "$TMP/gen2" && iconv -f UTF-8 -t UTF-8 "$TMP/gen1" >/dev/null && grep -q "tokens/s" "$TMP/err"; then
    echo "ok: generate $m: same text at 1 and 2 threads, valid UTF-8: $(head -c 40 "$TMP/gen1" | tr '\n' ' ')"
  else echo "FAIL: generate $m"; cat "$TMP/err"; failures=$((failures + 1)); fi
done
# --stop ends the text at the first occurrence; --ids prints the prompt's ids first.
"$BIN/generate" --model "$DEC/gpt2" --prompt "To be" --temperature 0 --max_new_tokens 64 >"$TMP/full" 2>/dev/null
stop=$(LC_ALL=C grep -ao '[a-z][a-z]' "$TMP/full" | sed -n 2p)  # the second pair of ASCII letters it holds
if [ -n "$stop" ] && "$BIN/generate" --model "$DEC/gpt2" --prompt "To be" --temperature 0 --max_new_tokens 64 --stop "$stop" >"$TMP/cut" 2>/dev/null &&
   [ "$(wc -c <"$TMP/cut")" -lt "$(wc -c <"$TMP/full")" ] && grep -qF -- "$stop" "$TMP/cut"; then echo "ok: generate --stop '$stop'"; else
  echo "FAIL: generate --stop"; failures=$((failures + 1)); fi
if "$BIN/generate" --model "$DEC/llama" --prompt "To be" --ids --max_new_tokens 3 2>/dev/null | grep -qE '^[0-9]+( [0-9]+){3,} *$'; then
  echo "ok: generate --ids"; else echo "FAIL: generate --ids"; failures=$((failures + 1)); fi
exit $((failures > 0))
