#include "pipelines/sentence_encoder.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/autocast.h"
#include "graph/error.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "io/file.h"
#include "io/state_dict.h"
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

}  // namespace

Result<SentenceSettings> read_sentence_settings(const std::string& dir, const BertConfig& cfg, const Tokenizer* tok) {
  SentenceSettings out;
  // Pooling: sentence-transformers' 1_Pooling/config.json. Every key that would change the
  // result is type-checked and the unsupported modes refused; others (include_prompt) ignored.
  const std::string pool_path = dir + "/1_Pooling/config.json";
  Result<json> pool = optional_json(pool_path);
  if (!pool.ok()) return pool.status();
  if (!pool->is_null()) {
    bool cls = false, mean = false;
    for (auto it = pool->begin(); it != pool->end(); ++it) {
      const std::string& key = it.key();
      if (key.rfind("pooling_mode_", 0) == 0) {
        if (!it->is_boolean()) return io_error("{}: {} = {} is not true or false", pool_path, key, brief(*it));
        if (key == "pooling_mode_cls_token") cls = it->get<bool>();
        else if (key == "pooling_mode_mean_tokens") mean = it->get<bool>();
        else if (it->get<bool>()) return io_error("{}: {} is not supported (mean or CLS pooling)", pool_path, key);
      } else if (key == "word_embedding_dimension") {
        if (!it->is_number_integer() || it->get<int64_t>() != cfg.hidden)
          return io_error("{}: word_embedding_dimension = {}, but {}/config.json says hidden_size {}", pool_path, brief(*it), dir,
                          cfg.hidden);
      }
    }
    if (cls == mean) return io_error("{}: expected exactly one of pooling_mode_mean_tokens and pooling_mode_cls_token true", pool_path);
    out.pooling = cls ? Pooling::kCls : Pooling::kMean;
  }
  // The modules: sentence-transformers' Transformer, then Pooling (its settings in 1_Pooling),
  // then optionally Normalize; anything else (Dense, another order, none) is refused.
  const std::string modules_path = dir + "/modules.json";
  Result<json> modules = optional_json(modules_path, json::value_t::array);
  if (!modules.ok()) return modules.status();
  if (!modules->is_null()) {
    std::vector<std::string> kinds;
    for (const json& m : *modules) {
      const json* type = m.is_object() && m.contains("type") ? &m["type"] : nullptr;
      if (!type || !type->is_string())
        return io_error("{}: module {} has no \"type\" string", modules_path, brief(m));
      const std::string t = type->get<std::string>();
      const std::string kind = t.substr(t.rfind('.') == std::string::npos ? 0 : t.rfind('.') + 1);
      if (kind != "Transformer" && kind != "Pooling" && kind != "Normalize")
        return io_error("{}: module {} is not supported (Transformer, Pooling and Normalize are)", modules_path, brief(m));
      if (kind == "Pooling" && m.contains("path") && !(m["path"].is_string() && m["path"].get<std::string>() == "1_Pooling"))
        return io_error("{}: the Pooling module's path is {}; only 1_Pooling is read", modules_path, brief(m["path"]));
      kinds.push_back(kind);
    }
    const bool shape_ok = (kinds.size() == 2 || kinds.size() == 3) && kinds[0] == "Transformer" && kinds[1] == "Pooling" &&
                          (kinds.size() == 2 || kinds[2] == "Normalize");
    if (!shape_ok)
      return io_error("{}: modules {} (expected Transformer, Pooling and optionally Normalize, in that order)", modules_path,
                      kinds.empty() ? std::string("[] (none)") : fmt::format("{}", fmt::join(kinds, ", ")));
    out.normalize = kinds.size() == 3;
  }
  // The longest input, and sentence-transformers' own lower-casing.
  out.max_length = std::min<int64_t>(cfg.max_positions, 512);
  const std::string st_path = dir + "/sentence_bert_config.json";
  Result<json> st = optional_json(st_path);
  if (!st.ok()) return st.status();
  if (!st->is_null() && st->contains("max_seq_length")) {
    const json& m = (*st)["max_seq_length"];
    if (!m.is_number_integer() || m.get<int64_t>() < 2 || m.get<int64_t>() > cfg.max_positions)
      return io_error("{}: max_seq_length = {} (expected 2..{}, the model's max_position_embeddings)", st_path, brief(m),
                      cfg.max_positions);
    out.max_length = m.get<int64_t>();
  }
  if (!st->is_null() && st->contains("do_lower_case")) {
    const json& m = (*st)["do_lower_case"];
    if (!m.is_boolean()) return io_error("{}: do_lower_case = {} is not true or false", st_path, brief(m));
    // Lower-casing first changes nothing when the tokenizer lower-cases itself; otherwise refused.
    if (m.get<bool>() && tok && tok->tokenize("The QUICK Fox") != tok->tokenize("the quick fox"))
      return io_error("{}: do_lower_case is true, but {}/tokenizer.json does not lower-case; not supported", st_path, dir);
  }
  return out;
}

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
  Result<SentenceSettings> settings = read_sentence_settings(dir, cfg, enc->tokenizer_.get());
  if (!settings.ok()) return settings.status();
  enc->pooling = settings->pooling;
  enc->normalize = settings->normalize;
  enc->max_length = settings->max_length;
  return enc;
}

std::vector<Encoding> SentenceEncoder::tokenize(const std::vector<std::string>& batch) const {
  TG_CHECK(max_length >= 2 && max_length <= model_->cfg.max_positions, "SentenceEncoder",
           "max_length {} must be in [2, {}]", max_length, model_->cfg.max_positions);
  return tokenizer_->encode_batch(batch, {.max_length = max_length});
}

BertInputs SentenceEncoder::inputs(const std::vector<std::string>& batch) const {
  EncodedBatch b = stack_encodings(tokenize(batch), tokenizer_->pad_id());
  const Device d = model_->device();  // the ids go where the weights are
  return {b.ids.to(d), b.attention_mask.to(d), b.type_ids.defined() ? b.type_ids.to(d) : b.type_ids};
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
  // On a GPU one host thread queues the batches (the device runs them in order either way).
  const Device device = model_->device();
  const int threads = recording || device.is_cuda() ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), batches));
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
      const Tensor out = pooled({padded.ids.to(device), padded.attention_mask.to(device),
                                 padded.type_ids.defined() ? padded.type_ids.to(device) : padded.type_ids})
                             .to(kCPU);  // (from a GPU: one copy, one wait, for the check and the rows)
      if (const int64_t bad = first_non_finite(out); bad >= 0)  // never write garbage vectors
        detail::fail("SentenceEncoder::encode", "sentence {}: the embedding is not finite (at dimension {}): a weight or an "
                     "activation overflowed{}", order[static_cast<size_t>(start + bad / hidden)], bad % hidden,
                     autocast ? " (in bfloat16 values past 3.39e38 become infinite)" : "");
      const std::vector<float> e = out.to_vector<float>();
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
