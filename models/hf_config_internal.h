#pragma once
// Reading Hugging Face config.json files (BertModel, LlamaForCausalLM): parse with a depth limit,
// and members checked against their ranges, every error naming the file, the key and the value.
// Library-private (not installed).
#include <map>
#include <memory>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/shape.h"
#include "io/safetensors.h"
#include "io/status.h"
#include "models/layers.h"
#include "models/module_io.h"

namespace tg::hf {

using nlohmann::json;
using nlohmann::ordered_json;

// A JSON value in a message: compact and short.
std::string brief(const json& v);
// The file as a JSON object, or an error naming it.
Result<json> read_config(const std::string& path);
// An integer member within [lo, hi]; absent (or null) keeps `value`.
Status read_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t& value, const std::string& path);
// A number member within (lo, hi) (open), or [lo, hi) with lo_closed; absent (or null) keeps `value`.
Status read_number(const json& j, const char* key, double lo, double hi, double& value, const std::string& path,
                   bool lo_closed = false);
// A boolean member; absent (or null) keeps `value`.
Status read_bool(const json& j, const char* key, bool& value, const std::string& path);

// A checkpoint's tensor shapes by name, `prefix` removed where a name starts with it ("bert.",
// "model."), and how many layers it holds: the highest N + 1 over names "<layer_prefix>N." (N < 1024).
// What from_pretrained compares with config.json before allocating anything.
struct HeaderShapes {
  std::map<std::string, Shape> shapes;
  int64_t layers = 0;
  std::string source, config;  // the checkpoint and the config.json, for messages
  // `name` is there with shape `want` (what `keys` of the config imply), or an error naming both files.
  Status expect(const std::string& name, const Shape& want, const char* keys) const;
  // The layer count agrees with the config's `key` ("holds 2 <what> but config.json says KEY 3").
  Status expect_layers(int64_t want, const char* key, const char* what = "layers") const;
};
HeaderShapes header_shapes(const SafetensorsCheckpoint& checkpoint, const std::string& prefix,
                           const std::string& layer_prefix, const std::string& config_path);

// bos_token_id / eos_token_id: a number or a list (its first), within [0, vocab); absent or null keeps `value`.
Status read_token_id(const json& j, const char* key, int64_t vocab, int64_t& value, const std::string& path);

// from_pretrained's last step, once the header agrees with the config: the model built without
// random initialisation (a failed allocation is an error naming both files), loaded strictly
// through `names`, in eval mode.
template <class M, class Config>
Result<std::unique_ptr<M>> build_and_load(const Config& cfg, const SafetensorsCheckpoint& file, const NameMapping& names,
                                          const std::string& config_path) {
  std::unique_ptr<M> model;
  try {
    SkipInitGuard no_random_init;  // every weight is loaded below (strictly)
    model = std::make_unique<M>(cfg);
  } catch (const std::bad_alloc&) {
    return io_error("{}: not enough memory for the model {} describes", file.source, config_path);
  }
  Result<LoadReport> r = tg::load_pretrained(*model, file, {.strict = true, .names = names});
  if (!r.ok()) return r.status();
  model->eval();
  return model;
}

// save_pretrained's folder: created if missing; one that holds a config.json already is refused
// unless overwrite ("DIR holds a model (config.json); pass overwrite to replace it").
Status prepare_folder(const std::string& dir, bool overwrite);
// DIR/config.json (indented, as transformers writes it) and DIR/model.safetensors, each atomically.
Status write_folder(const std::string& dir, const ordered_json& config, const StateDict& weights);

}  // namespace tg::hf
