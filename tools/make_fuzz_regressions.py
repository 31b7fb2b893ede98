#!/usr/bin/env python3
"""Hostile files for the loaders, kept as fuzz regressions (tests/fuzz/regressions/TARGET/): the
cases the hardening issue found by hand (non-numeric and out-of-range checkpoint metadata, huge
dimensions, header lengths and offsets that lie, deep JSON) plus classic truncations. The replay
test (tests/fuzz_test.cc) runs every file through its loader in every build: each must be refused
or loaded, never crash. Run from the repository root: python3 tools/make_fuzz_regressions.py"""
import json
import os
import struct

ROOT = "tests/fuzz"


def put(target, name, data):
    d = os.path.join(ROOT, "regressions", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(target, name):
    with open(os.path.join(ROOT, "corpus", target, name), "rb") as f:
        return f.read()


def split(st):
    n = struct.unpack("<Q", st[:8])[0]
    return json.loads(st[8:8 + n]), st[8 + n:]


def join(header, data, length=None):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h) if length is None else length) + h + data


# ---- safetensors ----
st = read("safetensors", "mixed.safetensors")
header, data = split(st)
put("safetensors", "header_length_huge", join(header, data, 2**63))
put("safetensors", "header_length_past_limit", struct.pack("<Q", 100_000_001) + b"{" + b" " * 16)
put("safetensors", "truncated_data", st[:-5])
put("safetensors", "trailing_bytes", st + b"\0\0\0\0")
for name, change in {
    "overlap": lambda h: h["d"].update(data_offsets=[0, 16]),
    "offsets_reversed": lambda h: h["w"].update(data_offsets=[24, 0]),
    "shape_overflow": lambda h: h["w"].update(shape=[2**40, 2**40]),
    "negative_dim": lambda h: h["w"].update(shape=[-2, 3]),
    "dtype_unknown": lambda h: h["w"].update(dtype="F8_E4M3"),
    "metadata_not_string": lambda h: h["__metadata__"].update(step=7),
}.items():
    h = json.loads(json.dumps(header))
    change(h)
    put("safetensors", name, join(h, data))
deep = b'{"a":' + b"[" * 10000 + b"]" * 10000 + b"}"
put("safetensors", "deep_json", struct.pack("<Q", len(deep)) + deep)

# ---- training checkpoint: the metadata values that used to abort resume ----
ts = read("train_state", "step1.safetensors")
header, data = split(ts)
for i, (key, value) in enumerate([("step", "abc"), ("step", "inf"), ("step", ""), ("step", "999999999999999999999"),
                   ("seconds", "1x"), ("seconds", "nan"), ("epoch", "-1"), ("samples", "1e3"), ("version", "2"),
                   ("rng.default", "1 2 3"), ("kept", "[\"../../etc/passwd\"]")]):
    h = json.loads(json.dumps(header))
    if key in h["__metadata__"] or key.startswith("rng"):
        h["__metadata__"][key] = value
        put("train_state", f"metadata_{i:02d}_{key.replace('.', '_')}", join(h, data))
put("train_state", "truncated", ts[: len(ts) // 2])

# ---- the run-folder issue: checkpoints that once made --resume delete or cut files it does not own
# (the target resumes each in a scratch run folder beside run-outside.txt, tokenizer.txt and
# checkpoint-0.safetensors, trains a step with keep_last 1, and aborts if any of them changed) ----
victims = "../run-outside.txt\ntokenizer.txt\ncheckpoint-0.safetensors\nmetrics.jsonl"
resumable = {"step": "1", "samples": "1", "metrics_bytes": "0", "rng.default": "1 2 3 4 0 0"}  # a consistent state
for seed, name, meta in [
    ("fresh.safetensors", "kept_outside_and_own_files", dict(resumable, kept=victims)),
    ("fresh.safetensors", "kept_with_no_metrics_length", dict(resumable, kept=victims, metrics_bytes="-1")),
    ("step1.safetensors", "metrics_cut_before_its_history", resumable),
    ("fresh.safetensors", "step_past_samples", dict(resumable, step="100000000")),
]:
    header, data = split(read("train_state", seed))
    header["__metadata__"].update(meta)
    put("train_state", name, join(header, data))

# ---- weight integrity: per-tensor XXH64 checksums ("tapegrad.xxh64") and non-finite weights ----
import ctypes  # noqa: E402  (the reference XXH64, Debian's libxxhash0)
_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH64.restype = ctypes.c_uint64
_xxh.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]


def with_checksums(header, data, edit=None):
    h = json.loads(json.dumps(header))
    sums = {n: f"{_xxh.XXH64(data[e['data_offsets'][0]:e['data_offsets'][1]], e['data_offsets'][1] - e['data_offsets'][0], 0):016x}"
            for n, e in h.items() if n != "__metadata__"}
    if edit:
        edit(sums)
    h.setdefault("__metadata__", {})["tapegrad.xxh64"] = json.dumps(sums)
    return h


header, data = split(read("safetensors", "mixed.safetensors"))
put("safetensors", "checksums_valid", join(with_checksums(header, data), data))
flipped = bytearray(data)
flipped[3] ^= 0x10
put("safetensors", "checksum_flipped_byte", join(with_checksums(header, data), bytes(flipped)))
put("safetensors", "checksum_missing_tensor", join(with_checksums(header, data, lambda s: s.pop(next(iter(s)))), data))
put("safetensors", "checksum_extra_name", join(with_checksums(header, data, lambda s: s.update({"__metadata__": "0" * 16})), data))
put("safetensors", "checksum_not_hex", join(with_checksums(header, data, lambda s: s.update({next(iter(s)): "zz" * 8})), data))
for name, value in [("checksums_not_json", "{"), ("checksums_a_list", "[1,2]"), ("checksums_deep", "[" * 5000)]:
    h = json.loads(json.dumps(header))
    h.setdefault("__metadata__", {})["tapegrad.xxh64"] = value
    put("safetensors", name, join(h, data))
# A checkpoint whose model weight is NaN under a valid checksum, and one with a changed byte.
header, data = split(read("train_state", "step1.safetensors"))
w = header["model.weight"]["data_offsets"]
nan_data = data[:w[0]] + struct.pack("<f", float("nan")) + data[w[0] + 4:]
put("train_state", "nan_weight_valid_checksum", join(with_checksums(header, nan_data), nan_data))
put("train_state", "inf_weight_no_checksum", join(header, data[:w[0]] + struct.pack("<f", float("inf")) + data[w[0] + 4:]))
flipped = bytearray(data)
flipped[w[0] + 1] ^= 0x01
put("train_state", "checksum_flipped_weight", join(with_checksums(header, data), bytes(flipped)))
# tokenizer.json: post_processor ids that contradict the vocabulary, ill-typed padding.
wp = json.loads(read("tokenizer", "wordpiece.json"))
if isinstance(wp.get("post_processor"), dict) and "special_tokens" in wp["post_processor"]:
    for tok in wp["post_processor"]["special_tokens"].values():
        tok["ids"] = [0]
    put("tokenizer", "wordpiece_post_processor_contradicts_vocab", json.dumps(wp))
wp = json.loads(read("tokenizer", "wordpiece.json"))
wp["padding"] = {"pad_id": "0"}
put("tokenizer", "wordpiece_padding_ill_typed", json.dumps(wp))

# ---- word2vec vectors ----
put("word2vec", "header_huge_counts", "100000000 100000\nking 1 2 3\n")
put("word2vec", "header_negative", "-3 4\n")
put("word2vec", "binary_truncated", read("word2vec", "vectors.bin")[:-3])
put("word2vec", "text_nan", "2 2\na nan 1\nb 1 2\n")
put("word2vec", "duplicate_word", "2 2\na 1 1\na 1 2\n")

# ---- tokenizers and configuration JSON ----
put("tokenizer", "deep_json", "{" + '"a":[' * 5000 + "]" * 5000 + "}")
put("tokenizer", "wordpiece_bad_vocab_ids", read("tokenizer", "wordpiece.json").replace(b'"the": 4', b'"the": 99999999999'))
put("tokenizer", "char_header_only", "tapegrad tokenizer char\n")
put("tokenizer", "spm_truncated", read("tokenizer", "unigram.tok")[:1000])
put("bert_config", "huge_sizes", '{"model_type": "bert", "vocab_size": 4000000000, "hidden_size": 65536, "num_hidden_layers": 2147483648, '
    '"num_attention_heads": 1, "intermediate_size": 1, "max_position_embeddings": 1}')
put("bert_config", "wrong_types", '{"model_type": "bert", "vocab_size": "30", "hidden_size": 8.5, "num_hidden_layers": null}')
put("bert_config", "deep_json", "[" * 100000)
put("vocabulary", "only_newlines", "\n" * 100)
put("readers", "no_tabs_and_nul", b"a\0b\r\n\tc\t\t\n")
put("gzip", "truncated", read("gzip", "lines.txt.gz")[:20])
