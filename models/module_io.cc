#include "models/module_io.h"

namespace tg {

Status save_module(const Module& module, const std::string& path, const Metadata& metadata) {
  return save_safetensors(path, module.state_dict(), metadata);
}

Result<Metadata> load_module(Module& module, const std::string& path, bool strict) {
  Result<SafetensorsFile> f = load_safetensors(path);
  if (!f.ok()) return f.status();
  try {
    module.load_state_dict(f->tensors, strict);
  } catch (const Error& e) {
    return io_error("{}: {}", path, e.what());
  }
  return f->metadata;
}

}  // namespace tg
