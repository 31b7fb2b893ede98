#pragma once
// What train_translator and translate share: the model's configuration as file metadata, and
// loading a trained translator (model + vocabularies) from its folder.
#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "examples/text_data.h"
#include "examples/tokenizer.h"
#include "tapegrad.h"

namespace tg::examples {

struct TranslatorConfig {
  int64_t layers = 3, width = 256, heads = 4, ff = 1024, max_len = 256;
  double dropout = 0.1;
  TokenizerKind tokenizer = TokenizerKind::kWord;
  tg::TransformerConfig model(int64_t src_vocab, int64_t tgt_vocab) const;
  tg::Metadata to_metadata() const;
  static absl::StatusOr<TranslatorConfig> from_metadata(const tg::Metadata& m);
};

struct Translator {
  TranslatorConfig cfg;
  Tokenizer src_vocab, tgt_vocab;
  std::unique_ptr<tg::Transformer> model;
  // One sentence in, beam search, detokenized text out.
  std::string translate(const std::string& sentence, int64_t beam = 4, int64_t max_len = 80) const;
};

// One training pair as ids (target without bos/eos).
struct Example {
  std::vector<int64_t> src, tgt;
};
// Padded tensors for a batch: src [B, S], tgt_in = bos + target, tgt_out = target + eos; tokens
// counts the target tokens (eos included).
struct Batch {
  Tensor src, tgt_in, tgt_out;
  int64_t tokens;
};
Batch make_batch(const std::vector<Example>& data, const std::vector<size_t>& idx);

// DIR/model.safetensors (weights + config metadata, the tokenizer kind included) and the two
// tokenizer files (Tokenizer::file_name: src_vocab.txt / tgt_vocab.txt, or src.spm / tgt.spm).
absl::StatusOr<Translator> load_translator(const std::string& dir);

}  // namespace tg::examples
