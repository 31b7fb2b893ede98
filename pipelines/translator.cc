#include "pipelines/translator.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "graph/factory.h"
#include "graph/node.h"
#include "io/file.h"
#include "models/generate.h"
#include "models/module_io.h"

namespace tg::text {

TransformerConfig TranslatorConfig::model(int64_t src_vocab, int64_t tgt_vocab) const {
  TransformerConfig c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.layer = {.d_model = width, .heads = heads, .d_ff = ff, .dropout = dropout};
  c.encoder_layers = c.decoder_layers = layers;
  c.max_len = max_len;
  c.pad_id = kPad;
  return c;
}

Metadata TranslatorConfig::to_metadata() const {
  return {{"layers", std::to_string(layers)}, {"width", std::to_string(width)},     {"heads", std::to_string(heads)},
          {"ff", std::to_string(ff)},         {"max_len", std::to_string(max_len)}, {"dropout", fmt::format("{:.17g}", dropout)},
          {"tokenizer", tokenizer}};
}

Result<TranslatorConfig> TranslatorConfig::from_metadata(const Metadata& m, const std::string& source) {
  TranslatorConfig c;
  for (auto [key, value, lo, hi] : {std::tuple{"layers", &c.layers, 1, 64}, std::tuple{"width", &c.width, 1, 16384},
                                    std::tuple{"heads", &c.heads, 1, 1024}, std::tuple{"ff", &c.ff, 1, 65536},
                                    std::tuple{"max_len", &c.max_len, 2, 65536}}) {
    Result<int64_t> v = metadata_int(m, key, source, lo, hi);
    if (!v.ok()) return v.status();
    *value = *v;
  }
  if (c.width % c.heads != 0) return io_error("{}: metadata width {} is not a multiple of heads {}", source, c.width, c.heads);
  Result<double> d = metadata_double(m, "dropout", source, 0, 0.999);
  if (!d.ok()) return d.status();
  c.dropout = *d;
  if (m.count("tokenizer")) {  // older models have none: words
    c.tokenizer = m.at("tokenizer");
    Status k = Tokenizer::check_kind(c.tokenizer);
    if (!k.ok()) return io_error("{}: metadata 'tokenizer': {}", source, k.message());
  }
  return c;
}

Translator Translator::create(const TranslatorConfig& config, std::unique_ptr<Tokenizer> src, std::unique_ptr<Tokenizer> tgt) {
  TG_CHECK(src && tgt, "Translator::create", "both tokenizers are needed");
  TG_CHECK(src->kind() == config.tokenizer && tgt->kind() == config.tokenizer, "Translator::create",
           "the tokenizers are '{}' and '{}', but the configuration says '{}'", src->kind(), tgt->kind(), config.tokenizer);
  Translator t;
  t.config = config;
  t.model = std::make_unique<Transformer>(config.model(src->size(), tgt->size()));
  t.src = std::move(src);
  t.tgt = std::move(tgt);
  return t;
}

Status Translator::save(const std::string& dir) const {
  TG_RETURN_IF_ERROR(make_dirs(dir));
  TG_RETURN_IF_ERROR(src->save_in(dir, "src"));
  TG_RETURN_IF_ERROR(tgt->save_in(dir, "tgt"));
  Metadata meta = config.to_metadata();
  meta["src_tokenizer_fingerprint"] = src->fingerprint();
  meta["tgt_tokenizer_fingerprint"] = tgt->fingerprint();
  return save_module(*model, dir + "/model.safetensors", meta);
}

std::string Translator::translate(const std::string& sentence, const TranslateOptions& options) const {
  std::vector<int64_t> ids = src->encode(sentence);
  if (ids.empty()) return "";
  if (static_cast<int64_t>(ids.size()) > config.max_len - 2) ids.resize(static_cast<size_t>(config.max_len - 2));
  Tensor s = from_vector(ids, {1, static_cast<int64_t>(ids.size())}).to(model->device());
  auto hyps = beam_search(*model, s,
                          {.bos = tgt->bos_id(), .eos = tgt->eos_id(),
                           .max_len = std::min<int64_t>(options.max_len, config.max_len - 1), .beam_size = options.beam,
                           .use_cache = options.use_cache});
  return hyps.empty() ? "" : tgt->decode(hyps[0].tokens);
}

std::vector<std::string> Translator::translate_greedy(const std::vector<Example>& data, int64_t n) const {
  const int64_t size = static_cast<int64_t>(data.size());
  n = n <= 0 ? size : std::min(n, size);
  NoGradGuard ng;
  const SpecialIds ids = special_ids(*tgt);
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; i += 64) {
    std::vector<int64_t> idx;
    for (int64_t j = i; j < std::min<int64_t>(n, i + 64); ++j) idx.push_back(j);
    Seq2SeqBatch b = make_seq2seq_batch(data, idx, ids);
    for (const auto& tokens : greedy_decode(*model, b.src.to(model->device()), {.bos = ids.bos, .eos = ids.eos, .max_len = b.tgt_in.size(1) + 10}))
      out.push_back(tgt->decode(tokens));
  }
  return out;
}

Result<Translator> Translator::load(const std::string& dir) {
  Translator t;
  const std::string path = dir + "/model.safetensors";
  Result<SafetensorsFile> f = load_safetensors(path);
  if (!f.ok()) return f.status();
  Result<TranslatorConfig> cfg = TranslatorConfig::from_metadata(f->metadata, path);
  if (!cfg.ok()) return cfg.status();
  t.config = *cfg;
  for (auto [side, tok] : {std::pair{"src", &t.src}, std::pair{"tgt", &t.tgt}}) {
    auto loaded = Tokenizer::load_in(dir, side);
    if (!loaded.ok()) return loaded.status();
    *tok = std::move(*loaded);
    if ((*tok)->kind() != t.config.tokenizer)
      return io_error("{}: the {} tokenizer in {} is '{}', but the model was trained with '{}'", path, side, dir, (*tok)->kind(),
                      t.config.tokenizer);
    const std::string key = std::string(side) + "_tokenizer_fingerprint";
    if (f->metadata.count(key) && f->metadata.at(key) != (*tok)->fingerprint())
      return io_error("{}: the {} tokenizer file in {} is not the one this model was trained with (fingerprint {}, "
                      "expected {}): were the src and tgt files swapped or replaced?",
                      path, side, dir, (*tok)->fingerprint(), f->metadata.at(key));
  }
  // The tensors' shapes are checked against the configuration before the model is built. Every
  // size the model's memory grows with (vocabularies, width, ff, layers) is checked against a
  // tensor in the file, so a model is only as large as its file says; the positional table
  // (max_len x width, computed, not stored) is capped.
  const TransformerConfig mc = t.config.model(t.src->size(), t.tgt->size());
  const int64_t W = mc.layer.d_model, F = mc.layer.d_ff;
  TG_RETURN_IF_ERROR(check_implied_shapes(*f, path,
                                          {{"src_embed.weight", {mc.src_vocab, W}},
                                           {"tgt_embed.weight", {mc.tgt_vocab, W}},
                                           {"generator.weight", {mc.tgt_vocab, W}},
                                           {"encoder.layers.0.ffn.linear1.weight", {F, W}},
                                           {"decoder.layers.0.ffn.linear1.weight", {F, W}}},
                                          "the metadata and tokenizers"));
  if (t.config.max_len * W > (int64_t{1} << 26))
    return io_error("{}: metadata max_len {} x width {} is past the limit of 2^26 positional values", path, t.config.max_len, W);
  TG_RETURN_IF_ERROR(check_layer_count(*f, path, "encoder.", t.config.layers, "encoder "));
  TG_RETURN_IF_ERROR(check_layer_count(*f, path, "decoder.", t.config.layers, "decoder "));
  t.model = std::make_unique<Transformer>(mc);
  try {
    t.model->load_state_dict(f->tensors);
  } catch (const Error& e) {
    return io_error("{}: {}", path, e.what());
  }
  t.model->eval();
  return t;
}

}  // namespace tg::text
