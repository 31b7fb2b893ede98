#include "examples/translator_common.h"

#include <algorithm>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include "examples/common.h"

namespace tg::examples {

tg::TransformerConfig TranslatorConfig::model(int64_t src_vocab, int64_t tgt_vocab) const {
  tg::TransformerConfig c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.layer = {.d_model = width, .heads = heads, .d_ff = ff, .dropout = dropout};
  c.encoder_layers = c.decoder_layers = layers;
  c.max_len = max_len;
  c.pad_id = WordVocab::kPad;
  return c;
}

tg::Metadata TranslatorConfig::to_metadata() const {
  return {{"layers", std::to_string(layers)}, {"width", std::to_string(width)}, {"heads", std::to_string(heads)},
          {"ff", std::to_string(ff)},         {"max_len", std::to_string(max_len)}, {"dropout", std::to_string(dropout)},
          {"tokenizer", tokenizer_name(tokenizer)}};
}

absl::StatusOr<TranslatorConfig> TranslatorConfig::from_metadata(const tg::Metadata& m) {
  TranslatorConfig c;
  auto get = [&](const char* key, int64_t& v) {
    auto it = m.find(key);
    return it != m.end() && absl::SimpleAtoi(it->second, &v) && v > 0;
  };
  auto it = m.find("dropout");
  if (!get("layers", c.layers) || !get("width", c.width) || !get("heads", c.heads) || !get("ff", c.ff) ||
      !get("max_len", c.max_len) || it == m.end() || !absl::SimpleAtod(it->second, &c.dropout) || c.width % c.heads != 0)
    return absl::InvalidArgumentError("the model file lacks a valid translator configuration (layers, width, heads, ff, max_len, dropout)");
  if (auto t = m.find("tokenizer"); t != m.end()) {  // older models have none: words
    absl::StatusOr<TokenizerKind> k = parse_tokenizer_kind(t->second);
    if (!k.ok()) return k.status();
    c.tokenizer = *k;
  }
  return c;
}

std::string Translator::translate(const std::string& sentence, int64_t beam, int64_t max_len) const {
  std::vector<int64_t> ids = src_vocab.encode(sentence);
  if (ids.empty()) return "";
  if (static_cast<int64_t>(ids.size()) > cfg.max_len - 2) ids.resize(static_cast<size_t>(cfg.max_len - 2));
  Tensor src = tg::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  auto hyps = tg::beam_search(*model, src,
                              {.bos = WordVocab::kBos, .eos = WordVocab::kEos,
                               .max_len = std::min<int64_t>(max_len, cfg.max_len - 1), .beam_size = beam});
  return hyps.empty() ? "" : tgt_vocab.decode(hyps[0].tokens);
}

Batch make_batch(const std::vector<Example>& data, const std::vector<size_t>& idx) {
  size_t S = 1, T = 1;
  for (size_t i : idx) S = std::max(S, data[i].src.size()), T = std::max(T, data[i].tgt.size() + 1);
  const int64_t n = static_cast<int64_t>(idx.size());
  std::vector<int64_t> src(n * S, WordVocab::kPad), tin(n * T, WordVocab::kPad), tout(n * T, WordVocab::kPad);
  int64_t tokens = 0;
  for (int64_t b = 0; b < n; ++b) {
    const Example& e = data[idx[static_cast<size_t>(b)]];
    std::copy(e.src.begin(), e.src.end(), src.begin() + b * static_cast<int64_t>(S));
    tin[b * T] = WordVocab::kBos;
    for (size_t j = 0; j < e.tgt.size(); ++j) tin[b * T + j + 1] = tout[b * T + j] = e.tgt[j];
    tout[b * T + e.tgt.size()] = WordVocab::kEos;
    tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  }
  return {tg::from_vector(src, {n, static_cast<int64_t>(S)}), tg::from_vector(tin, {n, static_cast<int64_t>(T)}),
          tg::from_vector(tout, {n, static_cast<int64_t>(T)}), tokens};
}

absl::StatusOr<Translator> load_translator(const std::string& dir) {
  Translator t;
  const std::string path = dir + "/model.safetensors";
  absl::StatusOr<tg::SafetensorsFile> f = tg::load_safetensors(path);
  if (!f.ok()) return f.status();
  absl::StatusOr<TranslatorConfig> cfg = TranslatorConfig::from_metadata(f->metadata);
  if (!cfg.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", cfg.status().message()));
  t.cfg = *cfg;
  for (auto [side, tok] : {std::pair{"src", &t.src_vocab}, std::pair{"tgt", &t.tgt_vocab}}) {
    absl::StatusOr<Tokenizer> v = Tokenizer::load(t.cfg.tokenizer, dir + "/" + Tokenizer::file_name(t.cfg.tokenizer, side));
    if (!v.ok()) return v.status();
    *tok = *std::move(v);
  }
  t.model = std::make_unique<tg::Transformer>(t.cfg.model(t.src_vocab.size(), t.tgt_vocab.size()));
  try {
    t.model->load_state_dict(f->tensors);
  } catch (const tg::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  t.model->eval();
  return t;
}

}  // namespace tg::examples
