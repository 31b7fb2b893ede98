#pragma once
// What train_translator, translate and explain_attention share: the translator's configuration
// (stored as model-file metadata, read back strictly) and loading a trained model folder:
//   DIR/model.safetensors   weights + configuration + the fingerprints of the two tokenizers
//   DIR/src.txt|src.spm     the source tokenizer (text::Tokenizer::save_in(dir, "src"))
//   DIR/tgt.txt|tgt.spm     the target tokenizer
#include <memory>
#include <string>

#include <tapegrad/tapegrad.h>

namespace translator {

struct Config {
  int64_t layers = 2, width = 256, heads = 4, ff = 1024, max_len = 256;
  double dropout = 0.1;
  std::string tokenizer = "word";
  tg::TransformerConfig model(int64_t src_vocab, int64_t tgt_vocab) const;
  tg::Metadata to_metadata() const;
  // Every value checked: whole numbers in range, width a multiple of heads, a known tokenizer.
  static tg::Result<Config> from_metadata(const tg::Metadata& m, const std::string& source);
};

struct Translator {
  Config cfg;
  std::unique_ptr<tg::text::Tokenizer> src, tgt;
  std::unique_ptr<tg::Transformer> model;
  // One sentence in, beam search (incremental, with key/value caches, unless use_cache is false),
  // detokenized text out.
  std::string translate(const std::string& sentence, int64_t beam = 4, int64_t max_len = 80, bool use_cache = true) const;
};

// The ablation of explain_attention's experiment 2 and train_translator --projections: every
// attention's W_Q, W_K and W_V (weights and biases) are taken out of training, "frozen" at their
// random initialisation or first set to "identity" (W = I, b = 0: Q = K = V = X). Call it before
// the optimizer is made; "learned" changes nothing.
void fix_projections(tg::Module& m, const std::string& how);

// Loads DIR/model.safetensors and the tokenizers beside it; a tokenizer whose fingerprint differs
// from the one the model was trained with is refused, naming both files.
tg::Result<Translator> load(const std::string& dir);

}  // namespace translator
