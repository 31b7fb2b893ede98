#pragma once
// A trained translator as one object: an encoder-decoder Transformer, its configuration and the
// source and target tokenizers, saved to and loaded from a folder (what train_translator writes).
//
//   auto t = tg::text::Translator::load("runs/translator").value();
//   std::string en = t.translate("Das Haus ist alt.");  // beam search with key/value caches
//
// Folder:
//   DIR/model.safetensors   weights; metadata: the configuration and the tokenizers' fingerprints
//   DIR/src.txt|src.spm     the source tokenizer (Tokenizer::save_in(DIR, "src"))
//   DIR/tgt.txt|tgt.spm     the target tokenizer
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../io/safetensors.h"
#include "../models/transformer.h"
#include "../text/batching.h"
#include "../text/tokenizer.h"

namespace tg::text {

// The sizes of a translator (encoder and decoder alike) and its tokenizer kind.
struct TranslatorConfig {
  int64_t layers = 2, width = 256, heads = 4, ff = 1024, max_len = 256;
  double dropout = 0.1;
  std::string tokenizer = "word";  // word, char, bpe or unigram (Tokenizer::train's kinds)

  TransformerConfig model(int64_t src_vocab, int64_t tgt_vocab) const;
  Metadata to_metadata() const;
  // Every value checked: whole numbers in range, width a multiple of heads, a known tokenizer;
  // a problem is one line naming `source`.
  static Result<TranslatorConfig> from_metadata(const Metadata& m, const std::string& source);
};

struct TranslateOptions {
  int64_t beam = 4;        // beam size (1: greedy)
  int64_t max_len = 80;    // most target tokens (also capped by the model's max_len)
  bool use_cache = true;   // incremental decoding with key/value caches (false: recompute the prefix)
};

struct Translator {
  TranslatorConfig config;
  std::unique_ptr<Tokenizer> src, tgt;
  std::unique_ptr<Transformer> model;

  // A new, randomly initialised model for the two tokenizers (call tg::manual_seed first).
  static Translator create(const TranslatorConfig& config, std::unique_ptr<Tokenizer> src, std::unique_ptr<Tokenizer> tgt);
  // Reads DIR's model and tokenizers, every file checked before the model is built (a tensor
  // whose shape differs from what the metadata and tokenizers imply, a tokenizer whose fingerprint
  // differs from the one the model was trained with: one line naming the file). Evaluation mode.
  static Result<Translator> load(const std::string& dir);
  // Writes the tokenizers and model.safetensors into DIR (made if missing), each file atomically.
  Status save(const std::string& dir) const;

  // One sentence in, detokenized text out (beam search; no gradient). Longer inputs are cut to
  // the model's max_len.
  std::string translate(const std::string& sentence, const TranslateOptions& options = {}) const;
  // Greedy translations of the first n encoded pairs (all when n <= 0), 64 to a batch, detokenized;
  // no gradient, the model in evaluation mode meanwhile (greedy_decode restores its mode).
  std::vector<std::string> translate_greedy(const std::vector<Example>& data, int64_t n = 0) const;
};

}  // namespace tg::text
