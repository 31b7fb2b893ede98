#!/usr/bin/env python3
"""Writes tests/golden/tokenizers/: byte-level BPE tokenizers trained by Hugging Face `tokenizers`
on a public-domain text (Shakespeare, ../shared/data/tinyshakespeare.txt; only the learned merges
are written), and the ids `tokenizers` gives on generated strings of many scripts, emoji and
whitespace runs, which tapegrad's byte_bpe tokenizer must reproduce.

    /path/to/python tools/make_byte_bpe_golden.py [--text ../shared/data/tinyshakespeare.txt]

Tokenizers (each a folder with tokenizer.json):
    gpt2    GPT-2's form: ByteLevel pre-tokenizer with its regex, <|endoftext|>, ByteLevel post-processor;
            also tokenizer_legacy.json, the same with merges as "a b" strings (the older file form)
    llama3  Llama 3's form: Split with Llama 3's pattern then ByteLevel, ignore_merges, a
            "<|begin_of_text|> $A" template, specials and one non-special added token
    qwen2   Qwen2's form: its split pattern (single digits) and the NFC normalizer
    smollm  SmolLM's form: Digits(individual_digits) then ByteLevel with GPT-2's regex
    llama2  SentencePiece-style BPE as Llama 2's / TinyLlama's tokenizer.json has it: Prepend "▁" and
            Replace " " -> "▁" normalizers, no pre-tokenizer, <0x00>..<0xFF> byte-fallback tokens at
            ids 3..258, fuse_unk, "<s> $A", a Replace/ByteFallback/Fuse/Strip decoder
    llama2_metaspace  the same vocabulary in the newer form (Metaspace pre-tokenizer, prepend_scheme
            "first", Metaspace decoder)
golden.json: {"strings": [...], "<name>": {"ids": [[...]], "ids_special": [[...]], "pieces": [[...]]}}
with ids without and with the post-processor's specials (only where they differ), the
pre-tokenizer's pieces (its pre_tokenize_str of the normalized text, byte-level characters; not for
smollm and the SentencePiece-style forms), and "decoded": tokenizers' decode (skipping special
tokens), where it is not the string itself (NFC for qwen2; Llama 2's forms do not round-trip).
"""
import argparse
import json
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "tokenizers")
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"""
          r"""\s+(?!\S)|\s+""")
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
VOCAB = 700

WORDS = ("the and of to a in that is was he for it with as his on be at by I you had not but what all were when we "
         "there can an your which their said if do will each about how up out them then she many some so these "
         "would other into has more her two like him see time could no make than first been its who now people my "
         "made over did down only way find use may water long little very after words called just where most know "
         "Hello World OpenAI LLAMA Qwen naïve café résumé Straße Ærø").split()
PIECES = ["'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'ſ", "'x", "''",
          "don't", "I'M", "we'Re", "1", "12", "123", "1234", "12345678", "3.14159", "1,000,000", "0x1F", "½", "²", "Ⅻ",
          "٣٤٥", "१२३", "!", "?!", "...", "—", "--", "(", ")", "[x]", "{}", "<b>", "#", "@user", "$5", "€20", "™",
          "a+b=c", "->", "\\", "/", "\"quoted\"", "`code`", "α", "βγδ", "Ωμέγα", "Привет", "мир", "中文", "日本語の文",
          "한국어", "العربية", "עברית", "हिन्दी", "ไทย", "ქართული", "e\u0301", "n\u0303o", "\u0300", "😀", "👍🏽",
          "👨\u200d👩\u200d👧", "🇩🇪", "❤️", "🤖🤖", "\u200b", "\u00a0", "\u3000", "\u2028", "\u0085", "\t", "\x0b", "\x0c",
          "\ufeff", "\U0001F600x", "x\U000E0001", "ſ", "K", "İ",
          # NFC: decomposed and precomposed letters, marks out of class order, singletons,
          # exclusions, Hangul syllables and jamo
          "e\u0301\u0323", "e\u0323\u0301", "q\u0307\u0323", "\u212b", "\u2126", "A\u030a", "\u0958", "\u0344",
          "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8", "한국", "\u0f73", "ﬁ", "\u1e9b\u0323", "o\u0308\u0304",
          "\u0300a", "a\u0300\u0300", "\u05d1\u05bc\u05bf", "\u0915\u093c", "\u00c5\u0301", "Ω\u0301"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ", "\n\n\n", "  \n  ", ""]
SPECIALS = {"gpt2": ["<|endoftext|>"], "smollm": ["<|endoftext|>"], "qwen2": ["<|endoftext|>"],
            "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<tg_extra>"]}


def strings(n, seed=0):
    rng = random.Random(seed)
    out = ["", " ", "  ", "\n", "\n\n\n", " \t\n ", "Hello world", " Hello  world ", "It's I'M we'll THEY'RE",
           "<|endoftext|>", "a<|endoftext|>b", "<|begin_of_text|>Hi<|end_of_text|>", "x <tg_extra> y"]
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 7)):
            r = rng.random()
            parts.append(rng.choice(WORDS) if r < 0.5 else rng.choice(PIECES) if r < 0.9 else
                         rng.choice(["<|endoftext|>", "<|begin_of_text|>", "<tg_extra>", "<|end_of_text|>"]))
            parts.append(rng.choice(SPACES))
        s = "".join(parts)
        if rng.random() < 0.2:
            s = rng.choice(SPACES) + s
        out.append(s)
    return out


def train_sentencepiece_style(name, text):
    """Llama 2's tokenizer.json form: trained on whole lines (no pre-tokenizer), then the 256 byte
    tokens put at ids 3..258 as Llama 2 has them."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 256, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=70,
                                  show_progress=False)
    tok.train_from_iterator(text.splitlines(), trainer)
    j = json.loads(tok.to_str())
    specials = ["<unk>", "<s>", "</s>"]
    rest = [t for t, _ in sorted(j["model"]["vocab"].items(), key=lambda x: x[1]) if t not in specials]
    order = specials + [f"<0x{b:02X}>" for b in range(256)] + rest
    j["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    for a in j["added_tokens"]:
        a["id"] = order.index(a["content"])
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    if name == "llama2":
        j["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
        j["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(j))


def train(name, text):
    if name.startswith("llama2"):
        return train_sentencepiece_style(name, text)
    tok = Tokenizer(models.BPE(ignore_merges=(name == "llama3")))
    if name == "qwen2":
        tok.normalizer = normalizers.NFC()
    if name == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    elif name == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if name == "llama3" else QWEN2), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    specials = [s for s in SPECIALS[name] if s != "<tg_extra>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text.splitlines(), trainer)
    if name == "llama3":
        tok.add_tokens(["<tg_extra>"])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                                                   "tinyshakespeare.txt"))
    ap.add_argument("--strings", type=int, default=2000)
    args = ap.parse_args()
    text = open(args.text, encoding="utf-8").read()
    golden = {"strings": strings(args.strings)}
    for name in ("gpt2", "llama3", "qwen2", "smollm", "llama2", "llama2_metaspace"):
        tok = train(name, text)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        tok.save(path)
        tok = Tokenizer.from_file(path)  # what the file says, read back
        entry = {"ids": [], "ids_special": [], "pieces": [], "decoded": []}
        for s in golden["strings"]:
            entry["ids"].append(tok.encode(s, add_special_tokens=False).ids)
            entry["ids_special"].append(tok.encode(s).ids)
            want = tok.normalizer.normalize_str(s) if tok.normalizer and not name.startswith("llama2") else s
            entry["pieces"].append([p for p, _ in tok.pre_tokenizer.pre_tokenize_str(want)] if tok.pre_tokenizer else [])
            if not name.startswith("llama2"):  # byte-level BPE round-trips (after NFC)
                assert tok.decode(entry["ids"][-1], skip_special_tokens=False) == want, (name, s)
            entry["decoded"].append(tok.decode(entry["ids"][-1], skip_special_tokens=True))
        if all(d == s for d, s in zip(entry["decoded"], golden["strings"])):
            del entry["decoded"]
        if entry["ids_special"] == entry["ids"]:  # no template: kept once
            del entry["ids_special"]
        if name in ("smollm", "llama2", "llama2_metaspace"):  # GPT-2's pieces with digits apart; no pre-tokenizer
            del entry["pieces"]
        golden[name] = entry
        if name == "gpt2":
            with open(path) as f:
                j = json.load(f)
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
            with open(os.path.join(d, "tokenizer_legacy.json"), "w") as f:
                json.dump(j, f, ensure_ascii=False, indent=2)
            assert Tokenizer.from_file(os.path.join(d, "tokenizer_legacy.json")).encode(golden["strings"][7]).ids == \
                entry["ids"][7]
        print(f"{name}: vocabulary {tok.get_vocab_size()}, {sum(map(len, entry['ids']))} ids on {len(golden['strings'])} strings")
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
