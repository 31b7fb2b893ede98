#!/usr/bin/env python3
"""Golden files for tapegrad's BERT-family support (all-MiniLM-L6-v2), from Hugging Face's own code:

    /tmp/torch2/bin/python tools/minilm_golden.py --model data/models/all-MiniLM-L6-v2 \\
        --out tests/golden/minilm

writes, under --out:

  tokenizer_cases.json    a list of {"text", "pair" (str or null), "max_length" (0 = no truncation),
                          "ids", "type_ids", "tokens"}, from tokenizers.Tokenizer.from_file on the
                          model's tokenizer.json with the file's own truncation (128) and padding
                          (fixed 128) switched OFF; for max_length > 0, truncation "longest_first"
                          to max_length (special tokens included). add_special_tokens=True.
  sentences.txt           SENTENCES below, one a line (UTF-8, "\\n" after each).
  embeddings.safetensors  float32 [24, 384] each:
                            mean             mean over the attention mask of the last hidden state
                            mean_normalized  the same, L2-normalized (what sentence-transformers returns)
                            cls              the last hidden state at [CLS], not normalized
                            layer3_mean      mean pooling of hidden_states[3] (after the 3rd layer;
                                             hidden_states[0] is the embeddings' output)
                          int64 lengths [24]: tokens per sentence after truncation (specials included).
                          All with truncation to 256 tokens (sentence_bert_config.json), padded batches
                          of 8 consecutive sentences in file order (not sorted), float32, eager attention.
                          Metadata: the model file's sha256, versions, settings.

Needs tokenizers, torch, transformers and safetensors (the venv at /tmp/torch2); reads nothing from the
network (local_files_only). Also checks that transformers' AutoTokenizer gives the same ids as the raw
tokenizer, with the same truncation, on the sentences.
"""
import argparse
import hashlib
import json
import os
import sys

# ---- the tokenizer cases: (text, pair or None, max_length or 0) ----
# The long texts are built here rather than read from data/ (which is not in the repository).
_LONG = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
         "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. "
         "And God said, Let there be light: and there was light.")

TOKENIZER_CASES = [
    # plain English, capitals
    ("The quick brown fox jumps over the lazy dog.", None, 0),
    ("Hello, World! HOW are you doing TODAY?", None, 0),
    # accents: stripped (strip_accents follows lowercase=true), NFD first
    ("café naïve Ångström Zürich résumé façade", None, 0),
    ("Die Größe der Straße ändert sich über Nacht.", None, 0),
    ("L'élève a mangé une crème brûlée à Noël, n'est-ce pas ?", None, 0),
    ("¿Dónde está el niño? ¡Mañana será otro día!", None, 0),
    # decomposed input (combining marks written separately), half-width katakana with its sound mark
    ("e\u0301 n\u0303 A\u030angstro\u0308m ｶﾞｷﾞ", None, 0),
    # Greek (final sigma, tonos) and Cyrillic (Ё, й) with capitals
    ("Η Αθήνα είναι η ΠΡΩΤΕΥΟΥΣΑ της Ελλάδας.", None, 0),
    ("Москва — СТОЛИЦА России; ёлка, Ёжик и йогурт.", None, 0),
    # capital final sigma: lowercased character by character (Σ -> σ, never ς as Python's str.lower gives)
    ("ΟΔΟΣ ΑΘΗΝΑΣ ΣΑΣ οδος", None, 0),
    # lone combining marks vanish (a word of only marks disappears)
    ("\u0301 x\u0301y \u0308\u0301", None, 0),
    # CJK: ideographs become single words; kana and Hangul do not (Hangul is decomposed by NFD)
    ("我爱北京天安门，天安门上太阳升。", None, 0),
    ("こんにちは、世界！カタカナとひらがな、がぎぐげご。", None, 0),
    ("안녕하세요 세계, 한국어 문장입니다.", None, 0),
    ("naïveté中文mixed𠀀𠀁text", None, 0),
    # other scripts: Hebrew, Arabic, Thai, Devanagari (vowel signs are Mn / Mc)
    ("שלום עולם مرحبا بالعالم สวัสดีครับ नमस्ते दुनिया", None, 0),
    # punctuation runs and ASCII symbols (BERT treats all ASCII non-alphanumerics as punctuation)
    ("Wait... what?!?! --- (really) [sic] {ok} <tag> \"quoted\" #hash @at $5 ^_^ `code` ~x~ |pipe| a+b=c",
     None, 0),
    ("!!!!!!!!!! ...... ,,,, ;;;; ????", None, 0),
    # numbers with separators
    ("pi is 3.14, a million is 1,000,000 and 10% of 1e-5 is 0.000001; 2024-01-31 12:30:45 ±3 °C", None, 0),
    # symbols that are not punctuation (Sm, Sc, So, No)
    ("x² + y² = z² ∑ ∞ ≠ ≤ → € £ ¥ ₹ © ® 5€ ½ Ⅻ ㎏ ﬁnance", None, 0),
    # emoji, old and new; flags, skin tones, ZWJ sequences, variation selectors; emoji inside words
    ("I ☺ it ☹ ★ ♥ ✓ ☀ ☃ ❤️", None, 0),
    ("😀 🥰 🫠 🤖🎉 hello😀world I❤NY", None, 0),
    ("🇫🇷 🇯🇵 👨\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈 👍🏽", None, 0),
    # zero-width and control characters (clean_text drops Cc/Cf and U+FFFD; \t is a space)
    ("zero\u200bwidth soft\u00adhyphen tab\there nul\x00byte bad\ufffdchar bom\ufeffx \x07bell \x1b[0m", None, 0),
    # non-breaking and other Unicode spaces; U+2028 (a line separator that Python's splitlines splits on)
    ("a\u00a0b\u2002c\u2003d\u2009e\u202ff\u3000g\u205fh\u1680i\u2028j\u0085k", None, 0),
    ("   leading and   multiple   spaces, trailing   ", None, 0),
    # full-width Latin (NFD leaves it; lowercase maps it)
    ("ＡＢＣ１２３ ｆｕｌｌｗｉｄｔｈ", None, 0),
    # special letters: ß, capital ẞ, dotted İ (its lowercase has a combining dot), titlecase ǅ
    ("ß ẞ İstanbul ǅ Æsir Øresund œuvre", None, 0),
    # WordPiece's 100-character rule counts characters (after normalization), not bytes
    ("abcdefghij" * 15, None, 0),           # 150 letters: [UNK]
    ("ab" * 50 + " " + "ab" * 50 + "a", None, 0),  # exactly 100 (split) and 101 ([UNK])
    ("é" * 100 + " " + "ж" * 60, None, 0),  # 200 and 120 bytes, but 100 and 60 characters
    # words longer than any vocabulary piece (18 characters)
    ("pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism "
     "supercalifragilisticexpialidocious", None, 0),
    # special tokens written literally: matched before normalization, case-sensitively
    ("[MASK] is written [CLS] literally, x[SEP]y, and [mask] lowercase, [UNK] [PAD] [Mask]", None, 0),
    # URLs, e-mails
    ("Visit https://www.example.com/path?q=1&r=two#frag or mail john.doe+tag@example.co.uk now.", None, 0),
    # apostrophes, ASCII and typographic
    ("don't won't it’s ‘quoted’ “double” rock'n'roll O'Neill", None, 0),
    # empty and whitespace only: just [CLS] [SEP]
    ("", None, 0),
    (" \t \n  ", None, 0),
    # sentence pairs (type ids 1 for the second), with and without truncation
    ("How old are you?", "I am six years old.", 0),
    ("The cat sat on the mat, looking out of the window at the birds in the garden.", "A cat.", 16),
    ("The cat sat on the mat, looking out of the window at the birds in the garden.",
     "Outside, the birds were singing in the old oak tree while the sun was going down.", 24),
    ("Short first.", "A much longer second sentence that has to be cut down to fit in sixteen tokens.", 16),
    ("", "Only the second sentence here.", 0),
    # single texts with truncation
    (_LONG, None, 32),
    ("One two three four five six seven eight nine ten.", None, 8),
]

# ---- the embedding sentences (24; one has over 300 tokens, one is a single word) ----
_VERY_LONG = (
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided "
    "the light from the darkness. And God called the light Day, and the darkness he called Night. And the "
    "evening and the morning were the first day. And God said, Let there be a firmament in the midst of the "
    "waters, and let it divide the waters from the waters. And God made the firmament, and divided the waters "
    "which were under the firmament from the waters which were above the firmament: and it was so. And God "
    "called the firmament Heaven. And the evening and the morning were the second day. And God said, Let the "
    "waters under the heaven be gathered together unto one place, and let the dry land appear: and it was so. "
    "And God called the dry land Earth; and the gathering together of the waters called he Seas: and God saw "
    "that it was good. And God said, Let the earth bring forth grass, the herb yielding seed, and the fruit "
    "tree yielding fruit after his kind, whose seed is in itself, upon the earth: and it was so. And the earth "
    "brought forth grass, and herb yielding seed after his kind, and the tree yielding fruit, whose seed was "
    "in itself, after his kind: and God saw that it was good. And the evening and the morning were the third day.")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
    "A man is playing a guitar on the street corner.",
    "Two young, White males are outside near many bushes.",
    "an entity that has physical existence",
    "café naïve Ångström Zürich résumé façade",
    "Die Größe der Straße ändert sich über Nacht.",
    "¿Dónde está el niño? ¡Mañana será otro día!",
    "Москва — СТОЛИЦА России; ёлка, Ёжик и йогурт.",
    "Η Αθήνα είναι η ΠΡΩΤΕΥΟΥΣΑ της Ελλάδας.",
    "我爱北京天安门，天安门上太阳升。",
    "こんにちは、世界！カタカナとひらがな。 안녕하세요 세계",
    "I ☺ it 😀 🥰 🫠 🇫🇷 👨\u200d👩\u200d👧 hello😀world ★",
    "pi is 3.14, a million is 1,000,000 and 10% of 1e-5 is 0.000001",
    "Wait... what?!?! --- (really) [sic] {ok} <tag> \"quoted\" #hash",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "[MASK] is written [CLS] literally and [mask] lowercase.",
    "Visit https://www.example.com/path?q=1 or mail john.doe@example.co.uk",
    "don't won't it’s ‘quoted’ rock'n'roll",
    "zero\u200bwidth soft\u00adhyphen tab\there a\u00a0b\u3000c",
    "And God said, Let there be light: and there was light.",
    "A child in a pink dress is climbing up a set of stairs in an entry way.",
    "abcdefghij" * 15 + " is a word of 150 letters",
    _VERY_LONG,
]

BATCH = 8
MAX_LENGTH = 256


def load_tokenizer(model_dir):
    """The model's tokenizer.json with the file's own truncation and padding switched off."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def tokenizer_cases(tok):
    out = []
    for text, pair, max_length in TOKENIZER_CASES:
        if max_length > 0:
            tok.enable_truncation(max_length, strategy="longest_first")
        else:
            tok.no_truncation()
        enc = tok.encode(text, pair, add_special_tokens=True)
        out.append({"text": text, "pair": pair, "max_length": max_length, "ids": enc.ids,
                    "type_ids": enc.type_ids, "tokens": enc.tokens})
    tok.no_truncation()
    return out


def write_cases_json(path, cases):
    """One case a line, UTF-8 (control characters escaped by json), so diffs stay readable."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]\n")


def embed(model, tok, sentences, batch, max_length):
    """Padded batches of `batch` consecutive sentences (file order). Returns a dict of float32 tensors
    (mean, mean_normalized, cls, layer3_mean) and the int64 lengths."""
    import torch
    import torch.nn.functional as F
    tok.enable_truncation(max_length, strategy="longest_first")
    tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")  # to the longest in the batch
    parts = {"mean": [], "mean_normalized": [], "cls": [], "layer3_mean": []}
    lengths = []
    with torch.inference_mode():
        for i in range(0, len(sentences), batch):
            encs = tok.encode_batch(sentences[i:i + batch], add_special_tokens=True)
            ids = torch.tensor([e.ids for e in encs], dtype=torch.long)
            types = torch.tensor([e.type_ids for e in encs], dtype=torch.long)
            mask = torch.tensor([e.attention_mask for e in encs], dtype=torch.long)
            out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
            m = mask.unsqueeze(-1).to(torch.float32)

            def mean_pool(h):
                return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)

            mean = mean_pool(out.last_hidden_state)
            parts["mean"].append(mean)
            parts["mean_normalized"].append(F.normalize(mean, p=2, dim=1))
            parts["cls"].append(out.last_hidden_state[:, 0])
            parts["layer3_mean"].append(mean_pool(out.hidden_states[3]))
            lengths += [int(x) for x in mask.sum(1)]
    tok.no_truncation()
    tok.no_padding()
    res = {k: torch.cat(v).to(torch.float32).contiguous() for k, v in parts.items()}
    res["lengths"] = torch.tensor(lengths, dtype=torch.int64)
    return res


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the all-MiniLM-L6-v2 folder")
    ap.add_argument("--out", required=True, help="output folder (e.g. tests/golden/minilm)")
    args = ap.parse_args()

    import tokenizers
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer
    transformers.utils.logging.disable_progress_bar()

    for s in SENTENCES:
        assert s and "\n" not in s and "\r" not in s, repr(s)
    assert len(SENTENCES) == 24

    os.makedirs(args.out, exist_ok=True)
    tok = load_tokenizer(args.model)

    cases = tokenizer_cases(tok)
    write_cases_json(os.path.join(args.out, "tokenizer_cases.json"), cases)

    with open(os.path.join(args.out, "sentences.txt"), "w", encoding="utf-8", newline="\n") as f:
        for s in SENTENCES:
            f.write(s + "\n")

    # transformers' tokenizer (what sentence-transformers calls) must agree with the raw one.
    hf_tok = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    hf_ids = hf_tok(SENTENCES, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    tok.enable_truncation(MAX_LENGTH, strategy="longest_first")
    raw_ids = [e.ids for e in tok.encode_batch(SENTENCES)]
    tok.no_truncation()
    if hf_ids != raw_ids:
        sys.exit("AutoTokenizer and tokenizers.Tokenizer disagree on the sentences")

    torch.manual_seed(0)
    model = AutoModel.from_pretrained(args.model, attn_implementation="eager", dtype=torch.float32,
                                      local_files_only=True)
    model.eval()
    res = embed(model, tok, SENTENCES, BATCH, MAX_LENGTH)
    model_file = os.path.join(args.model, "model.safetensors")
    meta = {
        "model_sha256": sha256(model_file),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizers": tokenizers.__version__,
        "settings": f"max_length {MAX_LENGTH} (longest_first), padded batches of {BATCH} in file order, "
                    "float32, attn_implementation eager; mean = masked mean of last_hidden_state, "
                    "layer3_mean = masked mean of hidden_states[3], cls = last_hidden_state[:, 0]",
    }
    save_file(res, os.path.join(args.out, "embeddings.safetensors"), metadata=meta)

    lengths = res["lengths"].tolist()
    print(f"{len(cases)} tokenizer cases, {len(SENTENCES)} sentences (tokens: min {min(lengths)}, "
          f"max {max(lengths)}), written to {args.out}")
    total = 0
    for name in ("tokenizer_cases.json", "sentences.txt", "embeddings.safetensors"):
        size = os.path.getsize(os.path.join(args.out, name))
        total += size
        print(f"  {name}: {size} bytes")
    print(f"  total {total} bytes")


if __name__ == "__main__":
    main()
