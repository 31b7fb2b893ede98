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
//
// Integrity: the writer records an XXH64 of each tensor's stored bytes in the metadata under
// "tapegrad.xxh64" (a JSON object by tensor name); the reader verifies each one and names a tensor
// whose bytes changed ("tensor 'w' fails its checksum"), then drops that entry from the metadata
// it returns. A file without the entry (from Hugging Face, PyTorch, ...) loads unverified.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "file.h"
#include "state_dict.h"
#include "status.h"

namespace tg {

using Metadata = std::map<std::string, std::string>;

// The longest tensor name read (bytes): a longer one is refused by name, in a header and in a
// load's name mapping (whose regular expressions would recurse on it), before any other work.
inline constexpr size_t kMaxTensorName = 1024;

struct SafetensorsFile {
  StateDict tensors;  // in file order
  Metadata metadata;
};

// dtypes written: F32, F64, BF16, I64, BOOL. Read: also F16 (converted to float32) and I32 (to
// int64); BF16 stays bfloat16 (a loader converts it to its parameters' dtype).
Status save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});
Result<SafetensorsFile> load_safetensors(const std::string& path);
// A file read tensor by tensor: open() reads and checks the header only (everything above but the
// tensors' bytes); read() and read_into() read one tensor's bytes when asked, straight into the
// destination's storage where no conversion is needed, and verify them (checksum, bool bytes).
// Loading a model this way holds the model plus one tensor, never the whole file beside it
// (load_pretrained and load_module do).
class SafetensorsReader {
 public:
  struct TensorInfo {
    std::string name;
    std::string dtype;  // as stored: "F32", "BF16", "F16", ...
    Shape shape;
    DType loads_as;     // the tensor read() returns: F16 -> float32, I32 -> int64, others their own
  };
  static Result<SafetensorsReader> open(const std::string& path);
  const std::string& path() const;
  const std::vector<TensorInfo>& tensors() const;  // in file order
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent
  const Metadata& metadata() const;                 // without our checksum entry
  Result<Tensor> read(const std::string& name) const;
  // Into an existing tensor of the same shape (a parameter), converting between float types.
  // A checksum failure is found after the bytes are in dst (load_pretrained reads and checks each
  // tensor once before, so that a refused load changes nothing).
  Status read_into(const std::string& name, Tensor& dst) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// A Hugging Face checkpoint folder's weights: DIR/STEM.safetensors when it exists, else the shards
// DIR/STEM.safetensors.index.json lists in its "weight_map" (tensor name -> shard file). Each
// shard must be a plain file name inside DIR (no '/' or '\\', not '.' or '..'); every tensor of
// a shard must be listed as being in that shard and every listed tensor must be in its shard, so
// each tensor is in exactly one file. Only headers are read here.
struct SafetensorsCheckpoint {
  std::string source;                    // the file, or the index, for messages
  std::vector<SafetensorsReader> files;  // one, or the shards (sorted by name)
};
Result<SafetensorsCheckpoint> open_safetensors_checkpoint(const std::string& dir, const std::string& stem = "model");

// The same checks on bytes in memory; `source` names them in messages.
Result<SafetensorsFile> parse_safetensors(std::string_view bytes, const std::string& source = "<memory>");
std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata = {});

// A model built from a file's metadata is checked against the file before it is allocated (so a
// model is only as large as its file): each (name, shape) the metadata implies must be a tensor of
// that shape ("SOURCE: NAME has shape [..], but IMPLIED_BY say [..]"), and a stack of `layers`
// blocks named PREFIX.layers.I.norm1.weight must hold exactly that many ("SOURCE: metadata says
// 6 LABELlayers, but the file's tensors do not").
Status check_implied_shapes(const SafetensorsFile& f, const std::string& source,
                            const std::vector<std::pair<std::string, Shape>>& expected, std::string_view implied_by);
Status check_layer_count(const SafetensorsFile& f, const std::string& source, const std::string& prefix, int64_t layers,
                         std::string_view label = "");

// Metadata values read strictly: present, the whole string a number (no "1x", no "" ), finite and
// within [min, max]. Messages name the source file, the key and the value:
//   "run/ckpt.safetensors: metadata 'step' = 'abc' is not a whole number"
Result<int64_t> metadata_int(const Metadata& m, const std::string& key, const std::string& source, int64_t min, int64_t max);
Result<uint64_t> metadata_uint(const Metadata& m, const std::string& key, const std::string& source);
Result<double> metadata_double(const Metadata& m, const std::string& key, const std::string& source, double min, double max);
Result<std::string> metadata_string(const Metadata& m, const std::string& key, const std::string& source);

}  // namespace tg
