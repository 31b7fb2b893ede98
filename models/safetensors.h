#pragma once
// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
// "__metadata__": {"key": "value"}}, then the raw little-endian tensor data. Files written here
// load in PyTorch, JAX, MLX and candle, with PyTorch-style names.
//
// Writing is atomic (a temporary file in the same folder, flushed, then renamed over the target).
// Reading validates everything before touching the data — header length against the file size,
// JSON syntax and nesting, duplicate names, dtypes, shapes and their byte sizes, offsets inside
// the data section, no overlaps and no holes, bool bytes — and reports the first problem with
// the file name; it never reads outside the file.
#include <map>
#include <string>
#include <string_view>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "models/module.h"

namespace tg {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  StateDict tensors;  // in file order
  Metadata metadata;
};

// dtypes written: F32, F64, I64, BOOL. Read: also F16 and BF16 (converted to float32) and I32
// (to int64).
absl::Status save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});
absl::StatusOr<SafetensorsFile> load_safetensors(const std::string& path);
// The same checks on bytes in memory; `source` names them in messages.
absl::StatusOr<SafetensorsFile> parse_safetensors(std::string_view bytes, const std::string& source = "<memory>");
std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata = {});

// A module's parameters under their hierarchical names.
absl::Status save_module(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads into an existing module (its architecture must match: names and shapes are checked;
// with strict, missing and unexpected names are errors). Returns the file's metadata.
absl::StatusOr<Metadata> load_module(Module& module, const std::string& path, bool strict = true);

// Writes bytes to path atomically (temporary file, fsync, rename); used by every writer here.
absl::Status write_file_atomic(const std::string& path, std::string_view bytes);
absl::StatusOr<std::string> read_file(const std::string& path);

}  // namespace tg
