#!/usr/bin/env bash
# The example programs on bad input: one clear line on stderr and a non-zero exit, never a crash.
#   tests/cli_test.sh BUILD_DIR
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
# expect_error "fragment" command...
expect_error() {
  local fragment=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  lines=$(grep -c . "$TMP/err")
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
expect_error "Illegal value" "$BIN/train_lm" --layers=x --text "$TMP/text.txt"
expect_error "Unknown command line flag" "$BIN/train_lm" --no_such_flag
expect_error "bad model flags" "$BIN/train_lm" --text "$TMP/text.txt" --width 10 --heads 3 --out "$TMP/run"
expect_error "too little text" "$BIN/train_lm" --text "$TMP/text.txt" --context 4096 --out "$TMP/run"
echo "not gzip" >"$TMP/bad.gz"
expect_error "not a valid gzip file" "$BIN/train_lm" --text "$TMP/bad.gz" --out "$TMP/run"
mkdir -p "$TMP/corrupt"
echo "garbage" >"$TMP/corrupt/checkpoint.safetensors"
expect_error "not a valid safetensors file" "$BIN/train_lm" --text "$TMP/text.txt" --out "$TMP/corrupt" --resume --steps 2
expect_error "characters or subwords" "$BIN/train_lm" --text "$TMP/text.txt" --tokenizer word --out "$TMP/run"
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
expect_error "must be aligned" "$BIN/train_translator" --src "$TMP/text.txt" --tgt "$TMP/two.txt" --save "$TMP/tr"
expect_error "bad flags" "$BIN/train_translator" --width 10 --heads 3 --save "$TMP/tr"
printf 'eins zwei\n' >"$TMP/one.tsv"
expect_error "no tab" "$BIN/train_translator" --pairs "$TMP/one.tsv" --save "$TMP/tr"
expect_error "cannot open" "$BIN/translate" --load "$TMP/nothing"
mkdir -p "$TMP/badmodel"
printf 'lowercase 0\n<pad>\n<bos>\n<eos>\n<unk>\nhallo\n' >"$TMP/badmodel/src_vocab.txt"
cp "$TMP/badmodel/src_vocab.txt" "$TMP/badmodel/tgt_vocab.txt"
head -c 100 /dev/urandom >"$TMP/badmodel/model.safetensors"
expect_error "not a valid safetensors file" "$BIN/translate" --load "$TMP/badmodel"
expect_error "unknown tokenizer 'wordpiece'" "$BIN/train_translator" --tokenizer wordpiece --save "$TMP/tr"
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
printf 'garbage' >"$TMP/tr_bpe/tgt.spm"
expect_error "not a SentencePiece model" "$BIN/translate" --load "$TMP/tr_bpe"
rm "$TMP/tr_char/src_vocab.txt"
expect_error "cannot open" "$BIN/translate" --load "$TMP/tr_char"
expect_error "bad flags" "$BIN/explain_attention" --width 10 --heads 3 --out "$TMP/ex"
expect_error "cannot open" "$BIN/explain_attention" --src "$TMP/missing" --tgt "$TMP/text.txt" --out "$TMP/ex"
exit $((failures > 0))
