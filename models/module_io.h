#pragma once
// A module's parameters in a safetensors file, under their hierarchical names; and loading a
// checkpoint made elsewhere (PyTorch, Hugging Face) through name-mapping rules, with PyTorch's
// strictness: every missing, unexpected and mis-shaped name is reported at once.
//
//   tg::LoadOptions o;
//   o.names.strip_prefixes = {"bert."};                              // BertForSequenceClassification
//   o.names.renames = {{R"(^encoder\.layer\.(\d+)\.)", "layers.$1."}};  // regex -> replacement
//   o.names.ignore = {R"(^embeddings\.position_ids$)"};                // a buffer we do not keep
//   tg::LoadReport r = tg::load_pretrained(model, "model.safetensors", o).value();
#include <string>
#include <utility>
#include <vector>

#include "../io/safetensors.h"
#include "module.h"

namespace tg {

Status save_module(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads into an existing module (its architecture must match: names and shapes are checked;
// with strict, missing and unexpected names are errors). Returns the file's metadata.
Result<Metadata> load_module(Module& module, const std::string& path, bool strict = true);

// Every parameter of `module` stays finite in `dtype` (a float32 weight of 3.4e38 becomes infinite
// in bfloat16): the first that does not is named, with its value and where it is. Programs call it
// before computing in bfloat16 (--precision bf16).
Status check_representable(const Module& module, DType dtype, const std::string& who);

// How a checkpoint's names become the module's, applied in this order to each name.
struct NameMapping {
  std::vector<std::string> ignore = {};       // regexes (ECMAScript, searched) over the checkpoint's names: dropped
  std::vector<std::string> strip_prefixes = {};  // the first that starts a name is removed ("module.", "bert.")
  std::string add_prefix = {};                // then put before every name
  std::vector<std::pair<std::string, std::string>> renames = {};  // each (regex, replacement with $1..) in turn, all matches
  std::vector<std::string> transpose = {};    // regexes over the mapped names: 2-D tensors stored [in, out]
  // A fused tensor split into equal parts along dim 0 (after any transpose): a mapped name that
  // matches `pattern` becomes one name per `into` (regex replacements with $1..). GPT-2's c_attn:
  //   {R"(^(layers\.\d+\.self_attn\.)c_attn\.(weight|bias)$)", {"$1w_q.$2", "$1w_k.$2", "$1w_v.$2"}}
  struct Split {
    std::string pattern;
    std::vector<std::string> into;
  };
  std::vector<Split> splits = {};
};

struct LoadOptions {
  bool strict = true;  // missing and unexpected names are errors (shape mismatches always are)
  NameMapping names = {};
  std::string source = "state dict";  // names the checkpoint in messages (load_pretrained: the file)
};

// What a load found, as PyTorch's load_state_dict result (names are the module's, except
// `unexpected` and `ignored`, which are the checkpoint's).
struct LoadReport {
  std::vector<std::string> loaded = {}, missing = {}, unexpected = {}, ignored = {};
};

// Maps the names, checks everything before copying anything (a failed load leaves the module
// untouched) and reports every problem in one line: "<source>: does not match BertModel: 2
// missing (a, b); 1 unexpected (c); shape mismatch for x: checkpoint [2, 3], model [3, 2]".
// Checkpoint tensors may be float16/bfloat16/float32/float64 (converted to the parameter's dtype).
Result<LoadReport> load_state_dict(Module& module, const StateDict& sd, const LoadOptions& options = {});
// The same from a safetensors file, read tensor by tensor: every tensor is first read, verified
// (checksum, finite values) and dropped, then read again straight into its parameter. Memory: the
// model plus one tensor (never the whole file beside it); a refused load changes nothing.
Result<LoadReport> load_pretrained(Module& module, const std::string& path, const LoadOptions& options = {});
Result<LoadReport> load_pretrained(Module& module, const SafetensorsReader& file, const LoadOptions& options = {});
// From every file of a (possibly sharded) checkpoint at once: names are matched over the union.
Result<LoadReport> load_pretrained(Module& module, const SafetensorsCheckpoint& checkpoint, const LoadOptions& options = {});

}  // namespace tg
