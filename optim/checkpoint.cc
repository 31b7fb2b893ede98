#include "optim/checkpoint.h"

#include <cmath>
#include <cstring>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "graph/random.h"

namespace tg {

namespace {
constexpr const char* kFormat = "tapegrad-checkpoint-1";

std::string rng_to_string(const Generator::State& s) {
  uint64_t spare_bits;
  std::memcpy(&spare_bits, &s.spare, 8);
  return fmt::format("{} {} {} {} {} {}", s.s[0], s.s[1], s.s[2], s.s[3], s.has_spare ? 1 : 0, spare_bits);
}

bool rng_from_string(const std::string& text, Generator::State& s) {
  std::vector<std::string> parts = absl::StrSplit(text, ' ');
  if (parts.size() != 6) return false;
  uint64_t v[6];
  for (int i = 0; i < 6; ++i)
    if (!absl::SimpleAtoi(parts[static_cast<size_t>(i)], &v[i])) return false;
  for (int i = 0; i < 4; ++i) s.s[i] = v[i];
  s.has_spare = v[4] != 0;
  std::memcpy(&s.spare, &v[5], 8);
  return true;
}
}  // namespace

absl::Status save_checkpoint(const std::string& path, const Module& model, const Optimizer& opt, const Metadata& user) {
  StateDict all;
  for (const auto& [n, t] : model.state_dict()) all.insert("model." + n, t);
  for (const auto& [n, t] : opt.state()) all.insert("optim." + n, t);
  Metadata meta;
  meta["format"] = kFormat;
  meta["optimizer"] = opt.type_name();
  meta["lr"] = fmt::format("{:.17g}", opt.lr());
  meta["rng"] = rng_to_string(default_generator().state());
  for (const auto& [k, v] : user) meta["user." + k] = v;
  return save_safetensors(path, all, meta);
}

absl::StatusOr<Metadata> load_checkpoint(const std::string& path, Module& model, Optimizer& opt) {
  absl::StatusOr<SafetensorsFile> f = load_safetensors(path);
  if (!f.ok()) return f.status();
  const Metadata& meta = f->metadata;
  auto get = [&](const char* key) -> const std::string* {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string* format = get("format");
  if (!format || *format != kFormat)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a tapegrad training checkpoint (format '",
                                                   format ? *format : "", "', expected '", kFormat, "')"));
  const std::string* type = get("optimizer");
  if (!type || *type != opt.type_name())
    return absl::InvalidArgumentError(absl::StrCat(path, ": saved with optimizer '", type ? *type : "",
                                                   "', resuming with '", opt.type_name(), "'"));
  double lr;
  Generator::State rng;
  const std::string* lr_text = get("lr");
  const std::string* rng_text = get("rng");
  if (!lr_text || !absl::SimpleAtod(*lr_text, &lr) || !std::isfinite(lr) || lr < 0 || !rng_text ||
      !rng_from_string(*rng_text, rng))
    return absl::InvalidArgumentError(absl::StrCat(path, ": checkpoint metadata 'lr' or 'rng' is missing or malformed"));
  StateDict model_sd, optim_sd;
  for (const auto& [n, t] : f->tensors) {
    if (n.rfind("model.", 0) == 0) model_sd.insert(n.substr(6), t);
    else if (n.rfind("optim.", 0) == 0) optim_sd.insert(n.substr(6), t);
    else return absl::InvalidArgumentError(absl::StrCat(path, ": unexpected tensor '", n, "' in a checkpoint"));
  }
  try {
    // Everything is checked before anything is copied: a failed load changes nothing.
    opt.check_state(optim_sd);
    model.load_state_dict(model_sd, true);
    opt.load_state(optim_sd);
  } catch (const Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  opt.set_lr(lr);
  default_generator().set_state(rng);
  Metadata user;
  for (const auto& [k, v] : meta)
    if (k.rfind("user.", 0) == 0) user[k.substr(5)] = v;
  return user;
}

}  // namespace tg
