#!/usr/bin/env python3
"""Loads the folders tapegrad's save_pretrained wrote (tests/llama_test.cc with TG_KEEP_SAVED=DIR)
with transformers' AutoModelForCausalLM and compares their logits on the golden prompt with the
golden logits of tests/golden/decoders (which tapegrad matches to 1e-4):

    TG_KEEP_SAVED=/tmp/saved build/tg_tests --gtest_filter='*SavePretrained*'
    python bench/check_saved_decoders.py /tmp/saved
"""
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "decoders")


def main():
    saved = sys.argv[1]
    worst = 0.0
    for name in sorted(os.listdir(saved)):
        g = load_file(os.path.join(GOLDEN, name, "golden.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(os.path.join(saved, name)).eval()
        with torch.no_grad():
            logits = model(g["prompt"]).logits
        diff = float((logits - g["logits"]).abs().max())
        worst = max(worst, diff)
        print(f"{name}: {type(model).__name__} loaded from tapegrad's folder; max |logits - golden| = {diff:.2e}")
    if worst > 1e-4:
        raise SystemExit(f"logits differ by {worst:.2e} (> 1e-4)")


if __name__ == "__main__":
    main()
