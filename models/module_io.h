#pragma once
// A module's parameters in a safetensors file, under their hierarchical names.
#include <string>

#include "../io/safetensors.h"
#include "module.h"

namespace tg {

Status save_module(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads into an existing module (its architecture must match: names and shapes are checked;
// with strict, missing and unexpected names are errors). Returns the file's metadata.
Result<Metadata> load_module(Module& module, const std::string& path, bool strict = true);

}  // namespace tg
