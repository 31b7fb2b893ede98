#!/usr/bin/env python3
"""PyTorch / Hugging Face peer of build/generate_speed: greedy generation with a GPT-2-shaped
decoder LM, float32, CPU, with and without the key/value cache.

The model is transformers' GPT2LMHeadModel with random weights (seed 0), shaped as tapegrad's
bench/generate_speed.cc: vocabulary 96, context 1024, d_model 256, 8 heads, d_ff 1024, 4 pre-norm
blocks, exact (erf) GELU, dropout 0, head tied to the token embedding; eval mode under
torch.inference_mode. A prompt of 128 random ids (seed 0), then 512 tokens chosen by argmax in a
hand-written loop (not model.generate, whose own overheads would be counted):
  cache     the prompt prefilled once (use_cache=True), then one token a step with past_key_values
  no cache  the whole sequence fed every step (use_cache=False), the last position's logits used
tokens/s = new tokens / seconds, the prefill included; the cached case reports the median of
--repeats runs, the uncached one a single run (as generate_speed does); one untimed forward of
the prompt comes first.

Each thread count runs in a fresh child process (torch.set_num_threads(t), OMP_NUM_THREADS=t,
OMP_WAIT_POLICY from --wait-policy, passive by default); one JSON line per (cache, threads).

  /tmp/torch2/bin/python bench/torch_generate.py [--threads 1,2] [--new-tokens 512] [--prompt 128]
                                                 [--repeats 3] [--quick]
"""
import argparse
import json
import os
import statistics
import sys
import time

from torch_children import cpu_model, run_per_thread  # bench/torch_children.py, beside this script

VOCAB, CONTEXT, D, HEADS, FF, LAYERS = 96, 1024, 256, 8, 1024, 4


def child(threads, args):
    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, n_embd=D, n_layer=LAYERS, n_head=HEADS, n_inner=FF,
                     activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).float().eval()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr(), "head not tied"
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, VOCAB, (1, args.prompt), generator=g)
    n = args.new_tokens
    assert args.prompt + n <= CONTEXT, "prompt + new tokens must fit in the context"

    def cached():
        out = model(prompt, use_cache=True)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        toks = [nxt]
        past = out.past_key_values
        for _ in range(n - 1):
            out = model(nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            toks.append(nxt)
        return torch.cat(toks, 1)

    def uncached():
        seq = prompt
        for _ in range(n):
            logits = model(seq, use_cache=False).logits
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], 1)
        return seq[:, args.prompt:]

    results = {}
    with torch.inference_mode():
        model(prompt, use_cache=False)  # one untimed forward: first-call setup out of the timings
        for cache, fn in ((True, cached), (False, uncached)):
            secs = []
            for _ in range(args.repeats if cache else 1):
                t0 = time.perf_counter()
                out = fn()
                secs.append(time.perf_counter() - t0)
                assert out.shape == (1, n)
            results[cache] = out
            s = statistics.median(secs)
            print(json.dumps(dict(
                peer="pytorch", cache=cache, threads=threads, prompt=args.prompt, new_tokens=n,
                seconds=round(s, 4), tokens_per_s=round(n / s, 1), runs=len(secs),
                attn=getattr(model.config, "_attn_implementation", None),
                wait_policy=os.environ.get("OMP_WAIT_POLICY"), torch=torch.__version__,
                transformers=transformers.__version__, cpu=cpu_model())), flush=True)
    same = int((results[True] == results[False]).sum())
    if same != n:  # float differences can flip a near tie; worth knowing, not fatal
        print(f"torch_generate.py: cached and uncached agree on {same} of {n} tokens", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="runs of the cached case (median reported)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 32 new tokens, 1 repeat")
    ap.add_argument("--wait-policy", default="passive", help="OMP_WAIT_POLICY for the children")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.new_tokens, args.repeats = 32, 1
    if args.child is not None:
        child(args.child, args)
        return
    run_per_thread(__file__, args.threads, args.wait_policy, ["--new-tokens", str(args.new_tokens), "--prompt", str(args.prompt), "--repeats", str(args.repeats)])


if __name__ == "__main__":
    main()
