#!/usr/bin/env python3
"""PyTorch peer of build/bert_embed for speed: sentence embeddings with Hugging Face transformers,
done as sentence-transformers' SentenceTransformer.encode does them (it is not installed here):

  sort the sentences by character length, longest first; batches of --batch (32); the tokenizer
  (transformers' AutoTokenizer, the Rust "fast" one) with padding to the batch's longest,
  truncation "longest_first" to --max_length (256, sentence_bert_config.json); BertModel forward in
  float32 under torch.inference_mode; mean pooling by the attention mask; L2 normalization; the
  original order restored.

Both attention implementations are timed, one after the other — "eager" (explicit matmul + softmax)
and "sdpa" (torch.nn.functional.scaled_dot_product_attention, transformers' default) — each after an
untimed warm-up on the first (longest) batch; the faster is reported as "seconds"/"attn", both
in "seconds_eager"/"seconds_sdpa" (--attn eager|sdpa times one only). The timing includes sorting,
tokenization, the forward passes, pooling and normalization; it excludes reading the input and loading
the model ("load_seconds", the tokenizer and both models).

    OMP_WAIT_POLICY=passive /tmp/torch2/bin/python bench/torch_bert_embed.py \\
        --model data/models/all-MiniLM-L6-v2 --input /tmp/sentences.txt --threads 1

Prints one JSON line. torch.set_num_threads(N); OMP/MKL/OpenBLAS threads and the tokenizer's Rayon
pool (RAYON_NUM_THREADS; TOKENIZERS_PARALLELISM=false for one thread) are limited to N as well,
unless already set in the environment. --output FILE.safetensors writes the embeddings (input order,
float32 `embeddings`, from the faster implementation) for agreement checks.
"""
import argparse
import json
import os
import sys
import time

from torch_children import cpu_model  # bench/torch_children.py, beside this script


def read_lines(path, limit):
    """Lines split on "\\n" only, as bert_embed reads them (no empty piece after a final newline)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:limit] if limit else lines


def encode(model, tokenizer, sentences, batch, max_length, warm_up):
    """sentence-transformers' encode: [n, hidden] float32, normalized, in input order."""
    import torch
    import torch.nn.functional as F
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    if warm_up:  # the first (longest) batch only, as its own input
        sentences = [sentences[i] for i in order[:batch]]
        order = list(range(len(sentences)))
    chunks = []
    with torch.inference_mode():
        for b in range(0, len(order), batch):
            feats = tokenizer([sentences[i] for i in order[b:b + batch]], padding=True,
                              truncation="longest_first", max_length=max_length, return_tensors="pt")
            tokens = model(**feats).last_hidden_state
            mask = feats["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            chunks.append(F.normalize(mean, p=2, dim=1))
        out = torch.cat(chunks)
        restored = torch.empty_like(out)
        restored[torch.tensor(order)] = out  # back to input order (as sentence-transformers does)
    return restored


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder (all-MiniLM-L6-v2)")
    ap.add_argument("--input", required=True, help="UTF-8 text, one sentence a line")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max_length", "--max-length", type=int, default=256)
    ap.add_argument("--limit", type=int, default=10000, help="the first N lines (0: all)")
    ap.add_argument("--attn", choices=["both", "eager", "sdpa"], default="both")
    ap.add_argument("--output", help="write the embeddings here (.safetensors, `embeddings`)")
    args = ap.parse_args()

    # Before torch and tokenizers start their thread pools.
    n = str(args.threads)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS",
                "RAYON_RS_NUM_CPUS"):
        os.environ.setdefault(var, n)
    if args.threads == 1:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()

    sentences = read_lines(args.input, args.limit)
    if not sentences:
        sys.exit(f"{args.input}: no lines")

    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    impls = ["eager", "sdpa"] if args.attn == "both" else [args.attn]
    models = {}
    for impl in impls:
        models[impl] = AutoModel.from_pretrained(args.model, attn_implementation=impl, dtype=torch.float32,
                                                 local_files_only=True).eval()
    load_seconds = time.perf_counter() - t0

    seconds, outputs = {}, {}
    for impl in impls:
        encode(models[impl], tokenizer, sentences, args.batch, args.max_length, warm_up=True)
        start = time.perf_counter()
        outputs[impl] = encode(models[impl], tokenizer, sentences, args.batch, args.max_length, warm_up=False)
        seconds[impl] = time.perf_counter() - start
    best = min(impls, key=lambda k: seconds[k])

    if args.output:
        from safetensors.torch import save_file
        save_file({"embeddings": outputs[best].contiguous()}, args.output,
                  metadata={"attn": best, "torch": torch.__version__})
    if len(impls) == 2:
        agree = float(torch.nn.functional.cosine_similarity(outputs["eager"], outputs["sdpa"]).min())
    else:
        agree = None

    rec = {"sentences": len(sentences), "seconds": round(seconds[best], 4),
           "sentences_per_s": round(len(sentences) / seconds[best], 2), "threads": args.threads,
           "torch": torch.__version__, "attn": best}
    rec.update({f"seconds_{k}": round(v, 4) for k, v in seconds.items()})
    rec.update({"min_cosine_eager_sdpa": agree, "load_seconds": round(load_seconds, 3),
                "transformers": transformers.__version__, "batch": args.batch, "max_length": args.max_length,
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "cpu": cpu_model()})
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
