#!/usr/bin/env python3
"""The transformers side of bench/hf_generate_peers.sh: greedy generation with a Hugging Face
decoder folder on the CPU, its best settings (torch.inference_mode, the KV cache, SDPA
attention; bfloat16 weights for --dtype bf16), timed as tapegrad's `generate` reports it:
prompt tokens/s (the prompt's forward with the cache) and generation tokens/s (the tokens after
the first, over the time after it). One JSON line.

    python bench/torch_hf_generate.py --model DIR --prompt_ids "1 2 3" --new 256 --threads 1 [--dtype bf16]
"""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt_ids", required=True)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="sdpa").eval()
    ids = torch.tensor([[int(x) for x in a.prompt_ids.replace(",", " ").split()]])
    best = None
    for _ in range(a.repeats):
        with torch.inference_mode():
            cache = DynamicCache()
            t0 = time.perf_counter()
            out = model(ids, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            t1 = time.perf_counter()
            tokens = [int(nxt)]
            for _ in range(a.new - 1):
                out = model(nxt, past_key_values=out.past_key_values, use_cache=True)
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                tokens.append(int(nxt))
            t2 = time.perf_counter()
        r = {"prompt_tok_s": ids.shape[1] / (t1 - t0), "gen_tok_s": (a.new - 1) / (t2 - t1)}
        if best is None or r["gen_tok_s"] > best["gen_tok_s"]:
            best = r
    print(json.dumps({"bench": "hf_generate", "peer": f"transformers (torch {torch.__version__})", "threads": a.threads,
                      "dtype": a.dtype, "prompt": ids.shape[1], "new": a.new,
                      "prompt_tok_s": round(best["prompt_tok_s"], 1), "gen_tok_s": round(best["gen_tok_s"], 2),
                      "first_ids": tokens[:8]}))


if __name__ == "__main__":
    main()
