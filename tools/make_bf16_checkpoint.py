"""Writes a bfloat16 Hugging Face BERT folder (config.json + model.safetensors) for bench/load_rss.cc.

  python tools/make_bf16_checkpoint.py --from data/models/all-MiniLM-L6-v2 --out /tmp/minilm-bf16
  python tools/make_bf16_checkpoint.py --large --out /tmp/bert-large-bf16   # BERT-large shapes, random

--from converts a float32 folder's every float tensor to bfloat16 (as `model.to(torch.bfloat16)`
then `save_pretrained` would); --large builds transformers' BertModel with BERT-large's config
(24 layers, hidden 1024, 335M parameters) and random weights, saved in bfloat16 (670 MB).
"""
import argparse
import json
import os
import shutil

import torch
from safetensors.torch import load_file, save_file

ap = argparse.ArgumentParser()
ap.add_argument("--from", dest="src")
ap.add_argument("--large", action="store_true")
ap.add_argument("--out", required=True)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
if a.src:
    sd = load_file(os.path.join(a.src, "model.safetensors"))
    shutil.copy(os.path.join(a.src, "config.json"), os.path.join(a.out, "config.json"))
else:
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    torch.manual_seed(0)
    sd = BertModel(cfg).state_dict()
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg.to_dict(), f, indent=2)
sd = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
save_file(sd, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
print(a.out, sum(v.numel() for v in sd.values()), "values")
