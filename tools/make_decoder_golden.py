#!/usr/bin/env python3
"""Writes tests/golden/decoders/: tiny random Llama-family checkpoints saved by Hugging Face
transformers, with the logits and greedy continuations tapegrad must reproduce.

Run from the repository root with transformers 5 and PyTorch 2 (PyPI):
    python3 tools/make_decoder_golden.py

For each model, a folder with config.json, model.safetensors (float32, as save_pretrained writes
them), tokenizer.json (a byte-level BPE of 320 tokens, the model's vocabulary, trained by
`tokenizers` on Shakespeare in the family's form: tools/make_byte_bpe_golden.py) and
golden.safetensors:
    prompt  int64 [1, P]      the prompt's ids (PROMPT through the tokenizer, specials included)
    logits  float32 [1, P, V] the model's logits on the prompt
    greedy  int64 [64]        64 greedy tokens after the prompt (transformers' generate)
Models:
    llama  grouped-query attention (4 query heads, 2 key/value heads), untied head
    qwen2  biases on Q, K and V, multi-query (4 heads, 1 key/value head), tied head, theta 1e6
    llama3 Llama 3's rope scaling (rope_type llama3), 8 heads on 2, head_dim 16
    gpt2   GPT-2 (Conv1D weights, fused c_attn, learned positions, gelu_new, tied head), saved in
           shards (model.safetensors.index.json and two files) to test sharded loading
Each folder also gets config_hub.json: the same configuration in the older form most hub files
have (transformers 4: rope_theta and rope_scaling at the top, torch_dtype; Qwen2's disabled
sliding window set shorter than the context).
The weights are drawn with a wider spread than the models' default (initializer_range 0.2) and the
seed is chosen so that at every greedy step the top two logits differ by at least 1e-3: no
near-ties for float32 rounding to flip.
"""
import os

import torch
from safetensors.torch import save_file
import json
import sys

from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "decoders")
TEXT = os.path.join(HERE, "..", "..", "shared", "data", "tinyshakespeare.txt")
PROMPT = "To be, or not to be: that is the question."
VOCAB = 320
sys.path.insert(0, HERE)
import make_byte_bpe_golden  # noqa: E402  (the tokenizer forms)

TOKENIZER_FORM = {"llama": "llama3", "llama3": "llama3", "qwen2": "qwen2", "gpt2": "gpt2"}
NEW = 64
MARGIN = 1e-3

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=256, initializer_range=0.2, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2)
MODELS = {
    "llama": (LlamaConfig, LlamaForCausalLM, dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False)),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(COMMON, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=1e6)),
    "llama3": (LlamaConfig, LlamaForCausalLM,
               dict(COMMON, num_attention_heads=8, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                      original_max_position_embeddings=32), rope_theta=500000.0)),
    "gpt2": (GPT2Config, GPT2LMHeadModel,
             dict(vocab_size=VOCAB, n_positions=256, n_embd=64, n_layer=2, n_head=4, initializer_range=0.2,
                  bos_token_id=1, eos_token_id=2)),
}
SHARDED = {"gpt2": "100KB"}


def hub_config(config):
    """The transformers-4 form of a transformers-5 config.json."""
    c = dict(config)
    rope = c.pop("rope_parameters", None)
    if rope is not None:
        rope = dict(rope)
        c["rope_theta"] = rope.pop("rope_theta")
        if rope.get("rope_type", "default") != "default":
            c["rope_scaling"] = rope
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    c.pop("layer_types", None)
    if c.get("model_type") == "qwen2":
        c.update(use_sliding_window=False, sliding_window=32, max_window_layers=2)
    c["transformers_version"] = "4.44.0"
    return c


def greedy_with_margin(model, prompt):
    """64 greedy tokens, and the smallest top-2 logit gap over the steps (recomputed, no cache)."""
    ids = prompt.clone()
    smallest = float("inf")
    for _ in range(NEW):
        with torch.no_grad():
            last = model(ids).logits[0, -1]
        top = torch.topk(last, 2).values
        smallest = min(smallest, float(top[0] - top[1]))
        ids = torch.cat([ids, last.argmax().view(1, 1)], dim=1)
    return ids[0, prompt.shape[1]:], smallest


def main():
    text = open(TEXT, encoding="utf-8").read()
    make_byte_bpe_golden.VOCAB = VOCAB - 1  # the llama3 form adds one token after training
    for name, (config_cls, model_cls, kw) in MODELS.items():
        tok = make_byte_bpe_golden.train(TOKENIZER_FORM[name], text)
        assert tok.get_vocab_size() <= VOCAB, tok.get_vocab_size()
        specials = make_byte_bpe_golden.SPECIALS[TOKENIZER_FORM[name]]
        kw = dict(kw, bos_token_id=tok.token_to_id(specials[0]), eos_token_id=tok.token_to_id(specials[min(1, len(specials) - 1)]))
        ids = tok.encode(PROMPT).ids
        for seed in range(100):
            torch.manual_seed(seed)
            model = model_cls(config_cls(**kw)).eval()
            prompt = torch.tensor([ids])
            greedy, margin = greedy_with_margin(model, prompt)
            with torch.no_grad():
                generated = model.generate(prompt, max_new_tokens=NEW, do_sample=False, min_new_tokens=NEW)[0, prompt.shape[1]:]
            if margin >= MARGIN and torch.equal(generated, greedy):
                break
        else:
            raise SystemExit(f"{name}: no seed in 0..99 gives a top-2 margin >= {MARGIN}")
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            if old.startswith("model"):
                os.remove(os.path.join(d, old))
        if name in SHARDED:
            model.save_pretrained(d, max_shard_size=SHARDED[name])
            assert os.path.exists(os.path.join(d, "model.safetensors.index.json")), "not sharded"
        else:
            model.save_pretrained(d)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(d, "config_hub.json"), "w") as f:
            json.dump(hub_config(config), f, indent=2, sort_keys=True)
            f.write("\n")
        with torch.no_grad():
            logits = model(prompt).logits
        save_file({"prompt": prompt.contiguous(), "logits": logits.contiguous(), "greedy": greedy.contiguous()},
                  os.path.join(d, "golden.safetensors"))
        for extra in ("generation_config.json",):
            if os.path.exists(os.path.join(d, extra)):
                os.remove(os.path.join(d, extra))
        print(f"{name}: seed {seed}, smallest top-2 margin {margin:.4f}, greedy {greedy[:8].tolist()}...")


if __name__ == "__main__":
    main()
