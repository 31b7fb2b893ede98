#include "translator.h"

#include <algorithm>
#include <stdexcept>

namespace translator {

void fix_projections(tg::Module& m, const std::string& how) {
  if (how == "learned") return;
  if (how != "identity" && how != "frozen") throw std::invalid_argument("fix_projections: '" + how + "' is not learned, identity or frozen");
  for (auto& [n, p] : m.named_parameters()) {
    const bool proj = n.find(".w_q.") != std::string::npos || n.find(".w_k.") != std::string::npos ||
                      n.find(".w_v.") != std::string::npos;
    if (!proj) continue;
    if (how == "identity") {
      tg::NoGradGuard ng;
      p.detach().copy_(n.ends_with(".weight") ? tg::eye(p.size(0)) : tg::zeros(p.shape()));
    }
    m.freeze_parameter(n);
  }
}

tg::TransformerConfig Config::model(int64_t src_vocab, int64_t tgt_vocab) const {
  tg::TransformerConfig c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.layer = {.d_model = width, .heads = heads, .d_ff = ff, .dropout = dropout};
  c.encoder_layers = c.decoder_layers = layers;
  c.max_len = max_len;
  c.pad_id = tg::text::kPad;
  return c;
}

tg::Metadata Config::to_metadata() const {
  return {{"layers", std::to_string(layers)}, {"width", std::to_string(width)},   {"heads", std::to_string(heads)},
          {"ff", std::to_string(ff)},         {"max_len", std::to_string(max_len)}, {"dropout", fmt::format("{:.17g}", dropout)},
          {"tokenizer", tokenizer}};
}

tg::Result<Config> Config::from_metadata(const tg::Metadata& m, const std::string& source) {
  Config c;
  for (auto [key, value, lo, hi] : {std::tuple{"layers", &c.layers, 1, 64}, std::tuple{"width", &c.width, 1, 16384},
                                    std::tuple{"heads", &c.heads, 1, 1024}, std::tuple{"ff", &c.ff, 1, 65536},
                                    std::tuple{"max_len", &c.max_len, 2, 65536}}) {
    tg::Result<int64_t> v = tg::metadata_int(m, key, source, lo, hi);
    if (!v.ok()) return v.status();
    *value = *v;
  }
  if (c.width % c.heads != 0)
    return tg::io_error("{}: metadata width {} is not a multiple of heads {}", source, c.width, c.heads);
  tg::Result<double> d = tg::metadata_double(m, "dropout", source, 0, 0.999);
  if (!d.ok()) return d.status();
  c.dropout = *d;
  if (m.count("tokenizer")) {  // older models have none: words
    c.tokenizer = m.at("tokenizer");
    tg::Status k = tg::text::Tokenizer::check_kind(c.tokenizer);
    if (!k.ok()) return tg::io_error("{}: metadata 'tokenizer': {}", source, k.message());
  }
  return c;
}

std::string Translator::translate(const std::string& sentence, int64_t beam, int64_t max_len, bool use_cache) const {
  std::vector<int64_t> ids = src->encode(sentence);
  if (ids.empty()) return "";
  if (static_cast<int64_t>(ids.size()) > cfg.max_len - 2) ids.resize(static_cast<size_t>(cfg.max_len - 2));
  tg::Tensor s = tg::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  auto hyps = tg::beam_search(*model, s,
                              {.bos = tgt->bos_id(), .eos = tgt->eos_id(),
                               .max_len = std::min<int64_t>(max_len, cfg.max_len - 1), .beam_size = beam,
                               .use_cache = use_cache});
  return hyps.empty() ? "" : tgt->decode(hyps[0].tokens);
}

tg::Result<Translator> load(const std::string& dir) {
  Translator t;
  const std::string path = dir + "/model.safetensors";
  tg::Result<tg::SafetensorsFile> f = tg::load_safetensors(path);
  if (!f.ok()) return f.status();
  tg::Result<Config> cfg = Config::from_metadata(f->metadata, path);
  if (!cfg.ok()) return cfg.status();
  t.cfg = *cfg;
  for (auto [side, tok] : {std::pair{"src", &t.src}, std::pair{"tgt", &t.tgt}}) {
    auto loaded = tg::text::Tokenizer::load_in(dir, side);
    if (!loaded.ok()) return loaded.status();
    *tok = std::move(*loaded);
    if ((*tok)->kind() != t.cfg.tokenizer)
      return tg::io_error("{}: the {} tokenizer in {} is '{}', but the model was trained with '{}'", path, side, dir,
                          (*tok)->kind(), t.cfg.tokenizer);
    const std::string key = std::string(side) + "_tokenizer_fingerprint";
    if (f->metadata.count(key) && f->metadata.at(key) != (*tok)->fingerprint())
      return tg::io_error("{}: the {} tokenizer file in {} is not the one this model was trained with (fingerprint {}, "
                          "expected {}): were the src and tgt files swapped or replaced?",
                          path, side, dir, (*tok)->fingerprint(), f->metadata.at(key));
  }
  // The tensors' shapes are checked against the configuration before the model is built.
  // Every size the model's memory grows with (vocabularies, width, ff, layers) is checked against
  // a tensor in the file, so a model is only as large as its file says; the positional table
  // (max_len x width, computed, not stored) is capped.
  tg::TransformerConfig mc = t.cfg.model(t.src->size(), t.tgt->size());
  const int64_t W = mc.layer.d_model, F = mc.layer.d_ff;
  TG_RETURN_IF_ERROR(tg::check_implied_shapes(*f, path,
                                               {{"src_embed.weight", {mc.src_vocab, W}},
                                                {"tgt_embed.weight", {mc.tgt_vocab, W}},
                                                {"generator.weight", {mc.tgt_vocab, W}},
                                                {"encoder.layers.0.ffn.linear1.weight", {F, W}},
                                                {"decoder.layers.0.ffn.linear1.weight", {F, W}}},
                                               "the metadata and tokenizers"));
  if (t.cfg.max_len * W > (int64_t{1} << 26))
    return tg::io_error("{}: metadata max_len {} x width {} is past the limit of 2^26 positional values", path, t.cfg.max_len, W);
  TG_RETURN_IF_ERROR(tg::check_layer_count(*f, path, "encoder.", t.cfg.layers, "encoder "));
  TG_RETURN_IF_ERROR(tg::check_layer_count(*f, path, "decoder.", t.cfg.layers, "decoder "));
  t.model = std::make_unique<tg::Transformer>(mc);
  try {
    t.model->load_state_dict(f->tensors);
  } catch (const tg::Error& e) {
    return tg::io_error("{}: {}", path, e.what());
  }
  t.model->eval();
  return t;
}

}  // namespace translator
