#include "text/sentence_encoder.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/autocast.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "io/file.h"
#include "ops/kernels/parallel.h"
#include "ops/shape_ops.h"
#include "text/batching.h"

namespace tg::text {

namespace {
using nlohmann::json;

// A JSON value in a message: compact and short.
std::string brief(const nlohmann::json& v) { return clip_for_message(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)); }

// An optional JSON file of the folder: null when absent, an error when unreadable or not `kind`.
Result<json> optional_json(const std::string& path, json::value_t kind = json::value_t::object) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return json();
  Result<std::string> bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  if (json_depth(*bytes, 16) > 16) return io_error("{}: the JSON is nested too deeply", path);
  json j = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || j.type() != kind)
    return io_error("{}: not a JSON {}", path, kind == json::value_t::array ? "list" : "object");
  return j;
}

bool is_true(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
}  // namespace

Result<std::unique_ptr<SentenceEncoder>> SentenceEncoder::load(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return io_error("{}: not a model folder (no such directory)", dir);
  auto enc = std::make_unique<SentenceEncoder>();
  Result<std::unique_ptr<BertModel>> model = BertModel::from_pretrained(dir);
  if (!model.ok()) return model.status();
  enc->model_ = std::move(*model);
  const std::string tok_path = dir + "/tokenizer.json";
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::load(tok_path);
  if (!tok.ok()) return tok.status();
  enc->tokenizer_ = std::move(*tok);
  const BertConfig& cfg = enc->model_->cfg;
  if (enc->tokenizer_->size() != cfg.vocab)
    return io_error("{}: a vocabulary of {} tokens, but {}/config.json says vocab_size {} (a tokenizer of another model?)",
                    tok_path, enc->tokenizer_->size(), dir, cfg.vocab);
  // Pooling: sentence-transformers' 1_Pooling/config.json.
  const std::string pool_path = dir + "/1_Pooling/config.json";
  Result<json> pool = optional_json(pool_path);
  if (!pool.ok()) return pool.status();
  if (!pool->is_null()) {
    for (const char* unsupported : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                    "pooling_mode_lasttoken"})
      if (is_true(*pool, unsupported)) return io_error("{}: {} is not supported (mean or CLS pooling)", pool_path, unsupported);
    const bool cls = is_true(*pool, "pooling_mode_cls_token"), mean = is_true(*pool, "pooling_mode_mean_tokens");
    if (cls == mean) return io_error("{}: expected exactly one of pooling_mode_mean_tokens and pooling_mode_cls_token", pool_path);
    enc->pooling = cls ? Pooling::Cls : Pooling::Mean;
  }
  // Normalisation: a sentence_transformers.models.Normalize module in modules.json.
  Result<json> modules = optional_json(dir + "/modules.json", json::value_t::array);
  if (!modules.ok()) return modules.status();
  for (const json& m : *modules) {
    const std::string type = m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    if (type.ends_with(".Normalize")) enc->normalize = true;
    else if (!type.ends_with(".Transformer") && !type.ends_with(".Pooling"))
      return io_error("{}/modules.json: module {} is not supported (Transformer, Pooling and Normalize are)", dir, brief(m));
  }
  // The longest input.
  enc->max_length = std::min<int64_t>(cfg.max_positions, 512);
  const std::string st_path = dir + "/sentence_bert_config.json";
  Result<json> st = optional_json(st_path);
  if (!st.ok()) return st.status();
  if (!st->is_null() && st->contains("max_seq_length")) {
    const json& m = (*st)["max_seq_length"];
    if (!m.is_number_integer() || m.get<int64_t>() < 2 || m.get<int64_t>() > cfg.max_positions)
      return io_error("{}: max_seq_length = {} (expected 2..{}, the model's max_position_embeddings)", st_path, brief(m),
                      cfg.max_positions);
    enc->max_length = m.get<int64_t>();
  }
  return enc;
}

std::vector<Encoding> SentenceEncoder::tokenize(const std::vector<std::string>& batch) const {
  TG_CHECK(max_length >= 2 && max_length <= model_->cfg.max_positions, "SentenceEncoder",
           "max_length {} must be in [2, {}]", max_length, model_->cfg.max_positions);
  return tokenizer_->encode_batch(batch, {.max_length = max_length});
}

BertInputs SentenceEncoder::inputs(const std::vector<std::string>& batch) const {
  EncodedBatch b = stack_encodings(tokenize(batch), tokenizer_->pad_id());
  return {b.ids, b.attention_mask, b.type_ids};
}

Tensor SentenceEncoder::pooled(const BertInputs& in) {
  Tensor e = pool(model_->forward(in, nullptr, layer), in.attention_mask, pooling);
  return normalize ? l2_normalize(e) : e;
}

Tensor SentenceEncoder::forward(const std::vector<std::string>& batch) { return pooled(inputs(batch)); }

Tensor SentenceEncoder::encode(const std::vector<std::string>& sentences, int64_t batch,
                               const std::function<void(int64_t)>& progress) {
  TG_CHECK(batch >= 1, "SentenceEncoder::encode", "batch must be at least 1, got {}", batch);
  const int64_t n = static_cast<int64_t>(sentences.size()), hidden = model_->cfg.hidden;
  Tensor out = zeros({n, hidden});
  if (n == 0) return out;
  // Tokenized once; longest first (as sentence-transformers), by token count.
  const std::vector<Encoding> encodings = tokenize(sentences);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return encodings[static_cast<size_t>(a)].ids.size() > encodings[static_cast<size_t>(b)].ids.size();
  });
  // Eval mode for the run, restored however it ends.
  struct Mode {
    BertModel& m;
    bool was;
    ~Mode() { m.train(was); }
  } mode{*model_, model_->is_training()};
  model_->eval();
  float* dst = out.data<float>();
  // Whole batches in parallel, one per thread, each computed by single-threaded kernels (a
  // parallel_for inside a pool task runs serially): on small batches this scales better than
  // splitting every matrix product, and a batch's numbers do not depend on which thread ran it.
  const int64_t batches = n / batch + (n % batch != 0);
  // Recorded attention weights are one tensor per layer: with them, one batch at a time.
  bool recording = false;
  for (const auto& l : *model_->layers) recording = recording || l->self_attn->record_weights;
  const int threads = recording ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), batches));
  std::mutex progress_mutex;
  int64_t done = 0;
  const bool autocast = autocast_enabled();
  kernels::parallel_run(threads, [&](int c) {
    NoGradGuard ng;  // grad mode and autocast are per thread
    AutocastGuard ac(autocast ? kBFloat16 : kFloat32);
    for (int64_t b = c; b < batches; b += threads) {
      const int64_t start = b * batch, end = std::min(n, start + batch);
      std::vector<Encoding> part;
      for (int64_t k = start; k < end; ++k) part.push_back(encodings[static_cast<size_t>(order[static_cast<size_t>(k)])]);
      const EncodedBatch padded = stack_encodings(part, tokenizer_->pad_id());
      const std::vector<float> e = pooled({padded.ids, padded.attention_mask, padded.type_ids}).to_vector<float>();
      for (int64_t k = start; k < end; ++k)
        std::copy_n(e.begin() + (k - start) * hidden, hidden, dst + order[static_cast<size_t>(k)] * hidden);
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        done += end - start;
        progress(done);
      }
    }
  });
  return out;
}

}  // namespace tg::text
