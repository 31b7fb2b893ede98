#pragma once
// One tokenizer interface, several algorithms:
//   "char"     UTF-8 code points (line breaks and spaces are tokens too: a character LM reads whole text)
//   "word"     words and punctuation (text/split.h), detokenized on decode
//   "bpe"      SentencePiece byte-pair encoding  } trained on the training text
//   "unigram"  SentencePiece unigram LM          }
//   "byte_bpe" BPE read from a Hugging Face tokenizer.json, or trained here in GPT-2's form (see
//              train()): byte-level (GPT-2,
//              Llama 3, Qwen2 with NFC, SmolLM: GPT-2's or Llama 3's / Qwen2's split pattern) or
//              SentencePiece-style (Llama 2, TinyLlama, Mistral: "▁" for spaces, byte fallback);
//              added tokens, merges by rank, a BOS from the post-processor; the ids of `tokenizers`.
//              Text must be UTF-8 (else tg::Error naming line and column); decode() skips
//              special tokens and round-trips bytes
//   "wordpiece" BERT's WordPiece, read from a Hugging Face tokenizer.json (not trained here):
//              its normalizer, pre-tokenizer and [CLS]/[SEP] template, giving the ids of the
//              Hugging Face `tokenizers` package (the file's truncation and padding settings are
//              not applied: pass EncodeOptions)
// The four trained here use ids 0..3 for <pad> <bos> <eos> <unk>. A tokenizer is one file saved
// beside a checkpoint; load() recognises the kind from the content:
//
//   auto tok = tg::text::Tokenizer::train("bpe", lines, {.vocab_size = 8000}).value();
//   tok->save_in("runs/lm").or_throw();                   // runs/lm/tokenizer.spm
//   auto again = tg::text::Tokenizer::load_in("runs/lm").value();
//   std::vector<int64_t> ids = again->encode("Hello world");   // no specials
//   again->decode(ids);                                        // "Hello world"
//
// For models that take one or two segments (BERT), encode_pair() adds the specials, truncates,
// pads and returns type ids and an attention mask, as Hugging Face tokenizers do.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/status.h"
#include "vocabulary.h"  // kPad, kBos, kEos, kUnk

namespace tg::text {

struct TrainOptions {
  int64_t vocab_size = 8000;  // the largest vocabulary (word, char); the exact number of pieces (bpe, unigram)
  int64_t min_count = 2;      // rarer words or characters become <unk> (word, char)
  bool lowercase = false;     // ASCII letters (word, char); Unicode case folding (bpe, unigram)
  std::vector<std::string> user_symbols = {};  // bpe, unigram: pieces never split (ids from 4 on)
  // Line breaks become a token of their own: "\n" for words; for bpe and unigram the piece
  // U+2424 (␤), which encode() puts between lines and decode() turns back into "\n". The char
  // tokenizer always keeps line breaks.
  bool keep_newlines = false;
};

enum class Padding {
  kNone,       // no padding
  kLongest,    // encode_batch: to the longest encoding of the batch
  kMaxLength,  // to EncodeOptions::max_length
};

struct EncodeOptions {
  bool add_special_tokens = true;  // [cls] a [sep] (b [sep]): for our tokenizers <bos> a <eos> (b <eos>)
  // With truncation, the longest a result may be (specials included); 0: no limit. Pairs are cut
  // longest first: one token at a time from the longer segment (from b when they are as long).
  int64_t max_length = 0;
  bool truncation = true;
  Padding padding = Padding::kNone;  // on the right, with pad_id()
  int64_t pad_to_multiple_of = 0;    // round the padded length up to a multiple (0: off)
};

// One encoded input, the three lists as long as each other.
struct Encoding {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;        // segment: 0 for a (and its specials), 1 for b; 0 on padding
  std::vector<int64_t> attention_mask;  // 1 for tokens, 0 for padding
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // ---- what each algorithm provides ----
  virtual std::string kind() const = 0;  // "char", "word", "bpe", "unigram", "byte_bpe" or "wordpiece"
  // The token strings of a text before the vocabulary (words, characters, pieces).
  virtual std::vector<std::string> tokenize(std::string_view text) const = 0;
  // Ids without specials; unknown tokens are unk_id().
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Text from ids: stops at eos_id(), skips pad, bos and out-of-range ids; the unknown id reads
  // "<unk>" (word, char) or " ⁇ " (SentencePiece's own).
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual std::string token(int64_t id) const = 0;          // the token of an id; tg::Error when out of range
  virtual int64_t id_of(std::string_view token) const = 0;  // unk_id() when absent
  virtual int64_t size() const = 0;                         // ids are 0 .. size()-1
  virtual std::string serialize() const = 0;                // the file's bytes

  // ---- special ids (overridable: a WordPiece tokenizer has [PAD] [CLS] [SEP] [UNK] elsewhere) ----
  virtual int64_t pad_id() const { return kPad; }
  virtual int64_t bos_id() const { return kBos; }
  virtual int64_t eos_id() const { return kEos; }
  virtual int64_t unk_id() const { return kUnk; }
  virtual int64_t cls_id() const { return bos_id(); }  // what encode_pair() puts first (-1: nothing)
  virtual int64_t sep_id() const { return eos_id(); }  // what encode_pair() puts after each segment (-1: nothing)

  // ---- built on the above ----
  // One or two segments with specials, truncation, padding, type ids and attention mask.
  Encoding encode_pair(std::string_view a, std::optional<std::string_view> b = std::nullopt,
                       const EncodeOptions& options = {}) const;
  // Each text (or pair) as encode_pair() does; Padding::kLongest pads all to the longest.
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, const EncodeOptions& options = {}) const;
  std::vector<Encoding> encode_batch(const std::vector<std::pair<std::string, std::string>>& pairs,
                                     const EncodeOptions& options = {}) const;
  // readable_token(id) made readable in a plot: "\n" as \n, a tab as \t, a lone space as ␣.
  std::string label(int64_t id) const;

  Status save(const std::string& path) const;  // atomically
  std::string fingerprint() const;             // tg::fingerprint of serialize(): 16 hex digits

  // ---- making one ----
  // kind: "word", "char", "bpe" or "unigram"; or "byte_bpe": GPT-2's byte-level BPE (its split
  // pattern, <|endoftext|> at id 0, user_symbols as added tokens, the 256 bytes, then at most
  // vocab_size tokens in all, merging no pair seen fewer than min_count times), saved as a
  // tokenizer.json that Hugging Face's tokenizers loads. Refuses an unknown kind, no text, or a
  // vocabulary SentencePiece cannot fill.
  static Result<std::unique_ptr<Tokenizer>> train(std::string_view kind, const std::vector<std::string>& sentences,
                                                   const TrainOptions& options = {});
  // A file written by save(), of any kind: word and char files start with a line
  // "tapegrad tokenizer word|char ..."; a JSON object is a Hugging Face tokenizer.json (WordPiece or byte-level BPE
  // models only); anything else is tried as a SentencePiece model (ours end
  // with a fingerprint field that SentencePiece ignores; a changed byte is refused). Refuses corrupt,
  // truncated and oversized files with one line naming the file.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);
  static Result<std::unique_ptr<Tokenizer>> parse(std::string_view bytes, std::string_view source);

  // The conventional file name in a model folder: STEM.txt (word, char), STEM.spm (bpe, unigram)
  // or STEM.json (wordpiece, byte_bpe).
  static std::string file_name(std::string_view kind, std::string_view stem = "tokenizer");
  // save() as DIR/file_name(kind(), stem); load_in finds DIR/STEM.txt, STEM.spm or STEM.json (or an older
  // DIR/STEM_vocab.txt).
  Status save_in(const std::string& dir, std::string_view stem = "tokenizer") const;
  static Result<std::unique_ptr<Tokenizer>> load_in(const std::string& dir, std::string_view stem = "tokenizer");

  static const std::vector<std::string>& kinds();  // {"word", "char", "bpe", "unigram"}
  // An error naming the kinds when `kind` is none of them (for command-line flags).
  static Status check_kind(std::string_view kind);

  static constexpr int64_t kMaxFileBytes = int64_t{512} << 20;  // load() and parse() refuse larger files

 protected:
  // The token as a reader should see it: token(id), unless its spelling is an encoding of the text
  // (byte_bpe: " the", not "Ġthe").
  virtual std::string readable_token(int64_t id) const { return token(id); }

 private:
  Encoding assemble(std::vector<int64_t> a, std::optional<std::vector<int64_t>> b, const EncodeOptions& o) const;
  void pad(Encoding& e, int64_t length) const;
  std::vector<Encoding> pad_batch(std::vector<Encoding> batch, const EncodeOptions& o) const;
};

}  // namespace tg::text
