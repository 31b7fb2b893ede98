#!/usr/bin/env python3
"""Writes tests/golden/train_lm_llama/: a model trained by tapegrad's own train_lm (--arch llama,
grouped-query attention 4/2, --tokenizer byte_bpe) on Shakespeare, as the Hugging Face folder
train_lm saves (config.json, model.safetensors, tokenizer.json, tokenizer_config.json), and what
transformers and tokenizers make of it:

    golden.safetensors   prompt int64 [1, P] (AutoTokenizer's ids), logits float32 [1, P, V]
                         (AutoModelForCausalLM), greedy int64 [64] (transformers' generate)
    tokenizer_ids.json   {"ids": [[...]]}: AutoTokenizer's ids of the 2,000 strings of
                         tests/golden/tokenizers/golden.json (many scripts, emoji, whitespace runs)

tests/llama_test.cc checks that tapegrad gives the same (logits to 1e-4, the same 64 greedy tokens
cached and uncached, the same token ids). The training seed is the first whose greedy steps all
have a top-2 logit margin >= 1e-3 (no near-ties).

    cmake --build build --target train_lm
    /path/to/python tools/make_train_lm_golden.py [--text ../shared/data/tinyshakespeare.txt]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from make_decoder_golden import MARGIN, NEW, greedy_with_margin  # the same 64 steps and near-tie rule

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "golden", "train_lm_llama")
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--train_lm", default=os.path.join(ROOT, "build", "train_lm"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, 21):
            run = os.path.join(tmp, f"seed{seed}")
            subprocess.run([args.train_lm, "--text", args.text, "--arch", "llama", "--kv_heads", "2", "--tokenizer", "byte_bpe",
                            "--vocab", "400", "--layers", "2", "--heads", "4", "--width", "32", "--context", "128", "--batch", "16",
                            "--steps", "1000", "--lr", "3e-3", "--eval_every", "500", "--sample", "0", "--threads", "1", "--seed", str(seed),
                            "--out", run], check=True, stdout=subprocess.DEVNULL)
            tok = AutoTokenizer.from_pretrained(run)
            model = AutoModelForCausalLM.from_pretrained(run).eval()
            prompt = tok(PROMPT, return_tensors="pt").input_ids
            greedy, margin = greedy_with_margin(model, prompt)
            with torch.no_grad():
                generated = model.generate(prompt, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)[0, prompt.shape[1]:]
            if margin >= MARGIN and torch.equal(generated, greedy):
                break
            print(f"seed {seed}: smallest top-2 margin {margin:.2e}, trying the next")
        else:
            raise SystemExit(f"no seed in 1..20 gives a top-2 margin >= {MARGIN}")
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        for f in FILES:
            shutil.copy(os.path.join(run, f), OUT)
    with torch.no_grad():
        logits = model(prompt).logits
    save_file({"prompt": prompt.contiguous(), "logits": logits.contiguous(), "greedy": greedy.contiguous()},
              os.path.join(OUT, "golden.safetensors"))
    with open(os.path.join(ROOT, "tests", "golden", "tokenizers", "golden.json"), encoding="utf-8") as f:
        strings = json.load(f)["strings"]
    ids = [tok(s, add_special_tokens=False).input_ids for s in strings]
    with open(os.path.join(OUT, "tokenizer_ids.json"), "w", encoding="utf-8") as f:
        json.dump({"ids": ids}, f, separators=(",", ":"))
        f.write("\n")
    print(f"{type(model).__name__} ({type(tok).__name__}) from train_lm --seed {seed}: prompt of {prompt.shape[1]} tokens, "
          f"smallest top-2 margin {margin:.4f}, greedy {tok.decode(greedy)!r}; ids of {len(strings)} strings")


if __name__ == "__main__":
    main()
