#pragma once
// A sentence-transformers model folder (all-MiniLM-L6-v2 and its kind) as one object: the BERT
// weights, the WordPiece tokenizer, the pooling, the normalisation and the longest input, read
// from the folder's own files.
//
//   auto enc = tg::text::SentenceEncoder::load("data/models/all-MiniLM-L6-v2").value();
//   tg::Tensor e = enc->encode({"A man is playing a guitar.", "Someone plays music."});  // [2, 384]
//
// Folder: config.json + model.safetensors (BertModel::from_pretrained), tokenizer.json, and
// optionally 1_Pooling/config.json (mean or CLS), modules.json (a Normalize module: unit vectors)
// and sentence_bert_config.json (max_seq_length). Absent, they mean: mean pooling, no
// normalisation, the model's max_position_embeddings.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../models/bert.h"
#include "../text/tokenizer.h"

namespace tg::text {

// sentence-transformers' settings of a model folder: 1_Pooling/config.json, modules.json and
// sentence_bert_config.json (each optional; absent: mean pooling, no normalisation, at most
// min(512, max_position_embeddings) tokens). Every field that changes the result is type- and
// range-checked, unsupported ones refused by name; `tok` (when given) checks do_lower_case.
struct SentenceSettings {
  Pooling pooling = Pooling::kMean;
  bool normalize = false;
  int64_t max_length = 512;
};
Result<SentenceSettings> read_sentence_settings(const std::string& dir, const BertConfig& cfg, const Tokenizer* tok = nullptr);

class SentenceEncoder {
 public:
  // Every file checked; a problem is one line naming the file.
  static Result<std::unique_ptr<SentenceEncoder>> load(const std::string& dir);

  // Sentence vectors [n, hidden], float32, in the input order. Batches of `batch` sentences sorted
  // by length and padded to their longest (so padding costs little), run in parallel one batch a
  // thread (the numbers do not depend on the thread count); no gradient. `progress` gets the
  // number of sentences done after each batch (from any thread, one call at a time).
  Tensor encode(const std::vector<std::string>& sentences, int64_t batch = 32,
                const std::function<void(int64_t)>& progress = {});
  // One batch, differentiable (fine-tuning): [B, hidden] pooled (and normalised when set).
  Tensor forward(const std::vector<std::string>& batch);
  // The padded model inputs of a batch (truncated to max_length).
  BertInputs inputs(const std::vector<std::string>& batch) const;

  BertModel& model() { return *model_; }
  std::shared_ptr<BertModel> shared_model() { return model_; }  // to build a larger model around it
  const Tokenizer& tokenizer() const { return *tokenizer_; }

  Pooling pooling = Pooling::kMean;
  bool normalize = false;
  int64_t max_length = 512;  // tokens, [CLS] and [SEP] included
  int64_t layer = -1;        // >= 0: pool the hidden states after that layer (0: the embeddings)

 private:
  std::vector<Encoding> tokenize(const std::vector<std::string>& batch) const;  // truncated, unpadded
  Tensor pooled(const BertInputs& in);  // the model, pooling and normalisation
  std::shared_ptr<BertModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace tg::text
