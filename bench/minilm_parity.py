#!/usr/bin/env python3
"""Parity of build/bert_embed with Hugging Face transformers on every line of a file.

    build/bert_embed --model data/models/all-MiniLM-L6-v2 --input /tmp/parity.txt --output /tmp/ours.safetensors
    /tmp/torch2/bin/python bench/minilm_parity.py --model data/models/all-MiniLM-L6-v2 \\
        --input /tmp/parity.txt --ours /tmp/ours.safetensors

(/tmp/parity.txt from tools/make_parity_sentences.py). The reference is computed as bert_embed does:
one sentence per line of --input (split on "\\n" only: a final "\\n" ends the last line, empty lines
are sentences too; "\\r" and other separators such as U+2028 stay inside the line, where BERT's
normalizer treats them as spaces or drops them), the model folder's tokenizer.json with truncation to
--max_length tokens (specials included, "longest_first") and no padding of its own, padded batches of
--batch consecutive lines IN FILE ORDER (not sorted; --sort sorts by character length, longest first,
as sentence-transformers does, and restores the order), float32, eager attention (--attn sdpa for the
other), then pooling of hidden_states[--layer] (default: the last layer) by the attention mask:
  mean  sum of the masked token states / number of tokens
  cls   the state at position 0 ([CLS])
and L2 normalization if asked. Defaults are bert_embed's: pooling from 1_Pooling/config.json,
normalization if modules.json has a Normalize module, max_length from sentence_bert_config.json.
--normalize, --normalize=true, --normalize=false and --no-normalize are accepted.

Compares with the float tensor `embeddings` [lines, hidden] in --ours and prints: the count, the
minimum cosine (and where), the maximum and mean absolute difference, how many lines had more than
128 tokens (all-MiniLM-L6-v2's tokenizer.json truncates at 128 by itself; sentence-transformers uses
256) and how many were truncated, and the worst lines. Exits 1 if the minimum cosine is below
0.99999 or the maximum absolute difference above 1e-4 (--min-cos, --max-abs), or on a shape mismatch.

--save-ref FILE also writes the reference (`embeddings`, float32, plus int64 `lengths`), e.g. to
check this script against itself with other batch sizes; with --save-ref, --ours may be left out.
"""
import argparse
import json
import os
import sys


def read_lines(path):
    """Lines of a UTF-8 file split on "\\n" only (str.splitlines would also split on \\x1c, \\x85,
    U+2028, ...), without the empty piece after a final newline."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        sys.exit(f"{path}: not valid UTF-8 ({e})")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def model_defaults(model_dir):
    """(pooling, normalize, max_length) as bert_embed takes them from the model folder."""
    pooling, normalize, max_length = "mean", False, 512
    p = os.path.join(model_dir, "1_Pooling", "config.json")
    if os.path.exists(p):
        cfg = json.load(open(p))
        if cfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif cfg.get("pooling_mode_mean_tokens"):
            pooling = "mean"
    p = os.path.join(model_dir, "modules.json")
    if os.path.exists(p):
        normalize = any(m.get("type", "").endswith("Normalize") for m in json.load(open(p)))
    p = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.exists(p):
        max_length = int(json.load(open(p)).get("max_seq_length", max_length))
    return pooling, normalize, max_length


def parse_bool(s):
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {s!r}")


def load_tokenizer(model_dir, max_length):
    """tokenizer.json with the file's own truncation/padding replaced: truncate to max_length,
    pad to the longest of each batch."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    untruncated = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    untruncated.no_truncation()
    untruncated.no_padding()
    tok.enable_truncation(max_length, strategy="longest_first")
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_type_id=0, pad_token="[PAD]")
    return tok, untruncated


def reference(model, tok, lines, batch, pooling, layer, normalize, sort):
    """The HF embeddings of `lines` [n, hidden] (float32) and the token counts after truncation."""
    import torch
    import torch.nn.functional as F
    order = list(range(len(lines)))
    if sort:
        order.sort(key=lambda i: -len(lines[i]))  # stable (ties keep file order)
    out = [None] * len(lines)
    lengths = [0] * len(lines)
    with torch.inference_mode():
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            encs = tok.encode_batch([lines[i] for i in idx], add_special_tokens=True)
            ids = torch.tensor([e.ids for e in encs], dtype=torch.long)
            types = torch.tensor([e.type_ids for e in encs], dtype=torch.long)
            mask = torch.tensor([e.attention_mask for e in encs], dtype=torch.long)
            res = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                        output_hidden_states=layer is not None)
            h = res.last_hidden_state if layer is None else res.hidden_states[layer]
            if pooling == "mean":
                m = mask.unsqueeze(-1).to(h.dtype)
                e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            else:
                e = h[:, 0]
            if normalize:
                e = F.normalize(e, p=2, dim=1)
            for j, i in enumerate(idx):
                out[i] = e[j].clone()
                lengths[i] = int(mask[j].sum())
    return torch.stack(out).to(torch.float32), lengths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder (config.json, model.safetensors, tokenizer.json)")
    ap.add_argument("--input", required=True, help="UTF-8 text, one sentence a line")
    ap.add_argument("--ours", help="bert_embed's output (.safetensors with `embeddings`)")
    ap.add_argument("--pooling", choices=["mean", "cls"], help="default: from 1_Pooling/config.json")
    ap.add_argument("--normalize", nargs="?", const=True, type=parse_bool, default=None,
                    help="L2-normalize (--normalize=false: do not); default: from modules.json")
    ap.add_argument("--no-normalize", dest="normalize", action="store_false")
    ap.add_argument("--layer", type=int, help="pool hidden_states[N] (0 = embeddings output); default: last")
    ap.add_argument("--max_length", "--max-length", type=int, help="default: sentence_bert_config.json")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--sort", action="store_true", help="batch by character length, longest first")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--min-cos", type=float, default=0.99999)
    ap.add_argument("--max-abs", type=float, default=1e-4)
    ap.add_argument("--worst", type=int, default=5, help="lines to show, lowest cosine first")
    ap.add_argument("--save-ref", help="also write the reference embeddings here")
    args = ap.parse_args()
    if args.ours is None and args.save_ref is None:
        ap.error("--ours is required (or --save-ref)")

    import torch
    import transformers
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import AutoModel
    transformers.utils.logging.disable_progress_bar()

    pooling, normalize, max_length = model_defaults(args.model)
    pooling = args.pooling or pooling
    normalize = normalize if args.normalize is None else args.normalize
    max_length = args.max_length or max_length
    if args.threads:
        torch.set_num_threads(args.threads)

    lines = read_lines(args.input)
    if not lines:
        sys.exit(f"{args.input}: no lines")
    tok, untruncated = load_tokenizer(args.model, max_length)
    full_lengths = [len(e.ids) for e in untruncated.encode_batch(lines, add_special_tokens=True)]

    model = AutoModel.from_pretrained(args.model, attn_implementation=args.attn, dtype=torch.float32,
                                      local_files_only=True)
    model.eval()
    n_layers = model.config.num_hidden_layers
    if args.layer is not None and not 0 <= args.layer <= n_layers:
        sys.exit(f"--layer must be in 0..{n_layers}")
    layer = None if args.layer is None or args.layer == n_layers else args.layer

    ref, lengths = reference(model, tok, lines, args.batch, pooling, layer, normalize, args.sort)
    print(f"reference: transformers {transformers.__version__}, torch {torch.__version__}, {args.attn} attention, "
          f"pooling {pooling} of layer {n_layers if layer is None else layer}, normalize {normalize}, "
          f"max_length {max_length}, batches of {args.batch} {'sorted by length' if args.sort else 'in file order'}")
    if args.save_ref:
        save_file({"embeddings": ref.contiguous(), "lengths": torch.tensor(lengths, dtype=torch.int64)},
                  args.save_ref)
        print(f"reference written to {args.save_ref}")
    if args.ours is None:
        return

    with safe_open(args.ours, "pt") as f:
        if "embeddings" not in f.keys():
            sys.exit(f"{args.ours}: no tensor `embeddings` (has {list(f.keys())})")
        ours = f.get_tensor("embeddings")
    if tuple(ours.shape) != tuple(ref.shape):
        print(f"FAIL: {args.ours}: embeddings {tuple(ours.shape)}, expected {tuple(ref.shape)}")
        sys.exit(1)
    if ours.dtype != torch.float32:
        print(f"note: embeddings are {ours.dtype}, not float32")

    a, b = ours.to(torch.float64), ref.to(torch.float64)
    cos = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp(min=1e-300)
    diff = (a - b).abs()
    worst_row = diff.max(dim=1).values
    min_cos, at = float(cos.min()), int(cos.argmin())
    max_abs, mean_abs = float(diff.max()), float(diff.mean())
    over128 = sum(1 for n in full_lengths if n > 128)
    truncated = sum(1 for n in full_lengths if n > max_length)
    finite = bool(torch.isfinite(a).all())

    print(f"count {len(lines)}")
    print(f"min cosine {min_cos:.9f} (line {at + 1})")
    print(f"max abs difference {max_abs:.3e}")
    print(f"mean abs difference {mean_abs:.3e}")
    print(f"lines over 128 tokens {over128}, truncated to {max_length}: {truncated} "
          f"(tokens per line: max {max(full_lengths)} before truncation)")
    for i in cos.argsort()[:args.worst].tolist():
        print(f"  line {i + 1}: cosine {float(cos[i]):.9f}, max abs {float(worst_row[i]):.2e}, "
              f"{lengths[i]} tokens: {lines[i][:60]!r}")
    ok = finite and min_cos >= args.min_cos and max_abs <= args.max_abs
    if not finite:
        print("FAIL: non-finite values in ours")
    print(("PASS" if ok else "FAIL") + f" (thresholds: min cosine >= {args.min_cos}, max abs <= {args.max_abs})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
