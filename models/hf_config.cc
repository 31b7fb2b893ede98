#include "models/hf_config_internal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "graph/format.h"
#include "io/file.h"

namespace tg::hf {

std::string brief(const json& v) { return clip_for_message(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

Result<json> read_config(const std::string& path) {
  Result<std::string> bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  if (json_depth(*bytes, 16) > 16) return io_error("{}: the JSON is nested too deeply for a config.json", path);
  json j = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return io_error("{}: not a JSON object (a Hugging Face config.json was expected)", path);
  return j;
}

Status read_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t& value, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return io_error("{}: {} = {} (expected a whole number in [{}, {}])", path, key, brief(*it), lo, hi);
  value = it->get<int64_t>();
  return {};
}

Status read_number(const json& j, const char* key, double lo, double hi, double& value, const std::string& path,
                   bool lo_closed) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  const double v = it->is_number() ? it->get<double>() : std::nan("");
  if (!(std::isfinite(v) && (lo_closed ? v >= lo : v > lo) && v < hi))
    return io_error("{}: {} = {} (expected a number in {}{}, {}))", path, key, brief(*it), lo_closed ? "[" : "(", lo, hi);
  value = v;
  return {};
}

Status read_bool(const json& j, const char* key, bool& value, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_boolean()) return io_error("{}: {} = {} (expected true or false)", path, key, brief(*it));
  value = it->get<bool>();
  return {};
}

Status read_token_id(const json& j, const char* key, int64_t vocab, int64_t& value, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  const json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
    return io_error("{}: {} = {} (expected a token id in [0, {}))", path, key, brief(*it), vocab);
  value = v.get<int64_t>();
  return {};
}

HeaderShapes header_shapes(const SafetensorsCheckpoint& checkpoint, const std::string& prefix,
                           const std::string& layer_prefix, const std::string& config_path) {
  HeaderShapes h;
  h.source = checkpoint.source;
  h.config = config_path;
  for (const SafetensorsReader& file : checkpoint.files)
  for (const auto& [name, dtype, shape, loads_as] : file.tensors()) {
    std::string n = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    if (n.rfind(layer_prefix, 0) == 0) {
      int64_t i = -1;
      const char* first = n.c_str() + layer_prefix.size();
      const auto [end, ec] = std::from_chars(first, n.c_str() + n.size(), i);
      if (ec == std::errc() && end != first && i >= 0 && i < 1024) h.layers = std::max(h.layers, i + 1);
    }
    h.shapes[std::move(n)] = shape;
  }
  return h;
}

Status HeaderShapes::expect(const std::string& name, const Shape& want, const char* keys) const {
  auto it = shapes.find(name);
  if (it == shapes.end()) return io_error("{}: no tensor '{}' (is this the model {} describes?)", source, name, config);
  if (it->second != want) return io_error("{}: '{}' is {} but {} says {} ({})", source, name, it->second, config, want, keys);
  return {};
}

Status HeaderShapes::expect_layers(int64_t want, const char* key, const char* what) const {
  if (layers != want) return io_error("{}: holds {} {} but {} says {} {}", source, layers, what, config, key, want);
  return {};
}

Status prepare_folder(const std::string& dir, bool overwrite) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/config.json", ec) && !overwrite)
    return io_error("{} holds a model (config.json); pass overwrite to replace it, or save elsewhere", dir);
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("{}: cannot create the folder ({})", dir, ec.message());
  return {};
}

Status write_folder(const std::string& dir, const ordered_json& config, const StateDict& weights) {
  // The weights first: a folder with a config.json is a whole model.
  TG_RETURN_IF_ERROR(save_safetensors(dir + "/model.safetensors", weights, {{"format", "pt"}}));
  return write_file_atomic(dir + "/config.json", config.dump(2) + "\n");
}

}  // namespace tg::hf
