#include "train/checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "graph/factory.h"

namespace tg::train {

namespace {

constexpr const char* kFormat = "tapegrad.train_state";
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / 4;

std::string rng_to_string(const Generator::State& s) {
  uint64_t spare_bits;
  std::memcpy(&spare_bits, &s.spare, 8);
  return fmt::format("{} {} {} {} {} {}", s.s[0], s.s[1], s.s[2], s.s[3], s.has_spare ? 1 : 0, spare_bits);
}

bool rng_from_string(const std::string& text, Generator::State& s) {
  uint64_t v[6];
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 6; ++i) {
    if (i > 0) {
      if (p == end || *p != ' ') return false;
      ++p;
    }
    auto [next, ec] = std::from_chars(p, end, v[i]);
    if (ec != std::errc() || next == p) return false;
    p = next;
  }
  if (p != end || v[4] > 1) return false;
  for (int i = 0; i < 4; ++i) s.s[i] = v[i];
  s.has_spare = v[4] != 0;
  std::memcpy(&s.spare, &v[5], 8);
  return true;
}

// The metadata and history of a parsed file; model and optimizer tensors are left to the caller.
Result<TrainState> read_state(const SafetensorsFile& f, const std::string& path, StateDict* model_sd, StateDict* optim_sd) {
  const Metadata& m = f.metadata;
  auto format = m.find("format");
  if (format == m.end() || format->second != kFormat)
    return io_error("{}: not a tapegrad training state (metadata 'format' is '{}', expected '{}')", path,
                    format == m.end() ? "" : format->second, kFormat);
  TrainState st;
#define TG_GET(lhs, expr)               \
  do {                                  \
    auto r_ = (expr);                   \
    if (!r_.ok()) return r_.status();   \
    lhs = *r_;                          \
  } while (0)
  int64_t version = 0;
  TG_GET(version, metadata_int(m, "version", path, 1, 1000000));
  if (version != TrainState::kVersion)
    return io_error("{}: training state version {} is not supported (this build reads version {})", path, version,
                    TrainState::kVersion);
  TG_GET(st.step, metadata_int(m, "step", path, 0, kMaxCount));
  TG_GET(st.micro_step, metadata_int(m, "micro_step", path, 0, kMaxCount));
  TG_GET(st.epoch, metadata_int(m, "epoch", path, 0, kMaxCount));
  TG_GET(st.epoch_samples, metadata_int(m, "epoch_samples", path, 0, kMaxCount));
  TG_GET(st.samples, metadata_int(m, "samples", path, 0, kMaxCount));
  TG_GET(st.sampler_seed, metadata_uint(m, "sampler_seed", path));
  TG_GET(st.seconds, metadata_double(m, "seconds", path, 0, 1e12));
  int64_t has_best = 0;
  TG_GET(has_best, metadata_int(m, "early_stop.has_best", path, 0, 1));
  st.has_best = has_best != 0;
  if (st.has_best) TG_GET(st.best, metadata_double(m, "early_stop.best", path, -1e300, 1e300));
  TG_GET(st.best_step, metadata_int(m, "early_stop.best_step", path, 0, kMaxCount));
  TG_GET(st.bad_evals, metadata_int(m, "early_stop.bad_evals", path, 0, kMaxCount));
  TG_GET(st.metrics_bytes, metadata_int(m, "metrics_bytes", path, -1, kMaxCount));
  // "kept" (a list of file names older versions wrote) is ignored: files to delete come from the folder.
  TG_GET(st.config_hash, metadata_string(m, "config_hash", path));
  TG_GET(st.tokenizer_fingerprint, metadata_string(m, "tokenizer_fingerprint", path));
  // Older checkpoints have neither: float32.
  if (m.count("precision")) TG_GET(st.precision, metadata_string(m, "precision", path));
  if (m.count("cpu_path")) TG_GET(st.cpu_path, metadata_string(m, "cpu_path", path));
  if (st.precision != "float32" && st.precision != "bfloat16")
    return io_error("{}: metadata 'precision' = '{}' (expected float32 or bfloat16)", path, clip_for_message(st.precision));
#undef TG_GET
  for (const auto& [k, v] : m) {
    if (k.rfind("rng.", 0) == 0) {
      Generator::State s{};
      if (!rng_from_string(v, s)) return io_error("{}: metadata '{}' is not a generator state (6 whole numbers)", path, k);
      st.rngs[k.substr(4)] = s;
    } else if (k.rfind("user.", 0) == 0) {
      st.user[k.substr(5)] = v;
    } else if (k.rfind("config.", 0) == 0) {
      st.config[k.substr(7)] = v;
    }
  }
  for (const auto& [n, t] : f.tensors) {
    if (n.rfind("model.", 0) == 0) {
      if (model_sd) model_sd->insert(n.substr(6), t);
    } else if (n.rfind("optim.", 0) == 0) {
      if (optim_sd) optim_sd->insert(n.substr(6), t);
    } else if (n.rfind("history.", 0) == 0) {
      if (t.dtype() != kFloat64 || t.dim() != 2 || t.size(1) != 2)
        return io_error("{}: tensor '{}' should be float64 of shape [n, 2], got {} {}", path, n, dtype_name(t.dtype()), t.shape());
      std::vector<double> v = t.to_vector<double>();
      auto& pts = st.history[n.substr(8)];
      for (size_t i = 0; i + 1 < v.size(); i += 2) pts.emplace_back(v[i], v[i + 1]);
    } else {
      return io_error("{}: unexpected tensor '{}' in a training state", path, n);
    }
  }
  return st;
}

}  // namespace

namespace {
void build_state(const TrainState& st, const Module& model, const Optimizer& opt, StateDict& all, Metadata& meta) {
  for (const auto& [n, t] : model.state_dict()) all.insert("model." + n, t);
  for (const auto& [n, t] : opt.state()) all.insert("optim." + n, t);
  for (const auto& [name, pts] : st.history) {
    std::vector<double> flat;
    flat.reserve(pts.size() * 2);
    for (const auto& [x, y] : pts) flat.push_back(x), flat.push_back(y);
    all.insert("history." + name, from_vector(flat, {static_cast<int64_t>(pts.size()), 2}, kFloat64));
  }
  meta["format"] = kFormat;
  meta["version"] = std::to_string(TrainState::kVersion);
  meta["optimizer"] = opt.type_name();
  meta["lr"] = fmt::format("{:.17g}", opt.lr());
  meta["step"] = std::to_string(st.step);
  meta["micro_step"] = std::to_string(st.micro_step);
  meta["epoch"] = std::to_string(st.epoch);
  meta["epoch_samples"] = std::to_string(st.epoch_samples);
  meta["samples"] = std::to_string(st.samples);
  meta["sampler_seed"] = std::to_string(st.sampler_seed);
  meta["seconds"] = fmt::format("{:.17g}", st.seconds);
  meta["early_stop.has_best"] = st.has_best ? "1" : "0";
  if (st.has_best) meta["early_stop.best"] = fmt::format("{:.17g}", st.best);
  meta["early_stop.best_step"] = std::to_string(st.best_step);
  meta["early_stop.bad_evals"] = std::to_string(st.bad_evals);
  meta["metrics_bytes"] = std::to_string(st.metrics_bytes);
  meta["config_hash"] = st.config_hash;
  meta["tokenizer_fingerprint"] = st.tokenizer_fingerprint;
  meta["precision"] = st.precision;
  if (!st.cpu_path.empty()) meta["cpu_path"] = st.cpu_path;
  for (const auto& [name, s] : st.rngs) meta["rng." + name] = rng_to_string(s);
  for (const auto& [k, v] : st.user) meta["user." + k] = v;
  for (const auto& [k, v] : st.config) meta["config." + k] = v;
}

// Model parameters and optimizer state must be finite (history points are, by construction).
Status check_finite_state(const SafetensorsFile& f, const std::string& path) {
  for (const auto& [name, t] : f.tensors) {
    if (name.rfind("model.", 0) != 0 && name.rfind("optim.", 0) != 0) continue;
    if (const int64_t bad = first_non_finite(t); bad >= 0)
      return io_error("{}: '{}' holds {} at flat index {} (of shape {}): non-finite weights are refused", path, name,
                      non_finite_name(t, bad), bad, t.shape());
  }
  return {};
}

Result<TrainState> load_parsed(const Result<SafetensorsFile>& f, const std::string& path, Module& model, Optimizer& opt) {
  if (!f.ok()) return f.status();
  TG_RETURN_IF_ERROR(check_finite_state(*f, path));
  StateDict model_sd, optim_sd;
  Result<TrainState> st = read_state(*f, path, &model_sd, &optim_sd);
  if (!st.ok()) return st;
  Result<std::string> type = metadata_string(f->metadata, "optimizer", path);
  if (!type.ok()) return type.status();
  if (*type != opt.type_name())
    return io_error("{}: saved with optimizer '{}', resuming with '{}'", path, *type, opt.type_name());
  Result<double> lr = metadata_double(f->metadata, "lr", path, 0, 1e300);
  if (!lr.ok()) return lr.status();
  try {
    // Everything is checked before anything is copied: a failed load changes nothing.
    opt.check_state(optim_sd);
    model.load_state_dict(model_sd, true);
    opt.load_state(optim_sd);
  } catch (const Error& e) {
    return io_error("{}: {}", path, e.what());
  }
  opt.set_lr(*lr);
  return st;
}
}  // namespace

int64_t checkpoint_step(std::string_view name) {
  constexpr std::string_view kPrefix = "checkpoint-", kSuffix = ".safetensors";
  if (name.size() < kPrefix.size() + 8 + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return -1;
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18) return -1;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::string checkpoint_name(int64_t step) { return fmt::format("checkpoint-{:08}.safetensors", step); }

Status save_train_state(const std::string& path, const TrainState& st, const Module& model, const Optimizer& opt) {
  StateDict all;
  Metadata meta;
  build_state(st, model, opt, all, meta);
  return save_safetensors(path, all, meta);
}

std::string serialize_train_state(const TrainState& st, const Module& model, const Optimizer& opt) {
  StateDict all;
  Metadata meta;
  build_state(st, model, opt, all, meta);
  return serialize_safetensors(all, meta);
}

Result<TrainState> load_train_state(const std::string& path, Module& model, Optimizer& opt) {
  return load_parsed(load_safetensors(path), path, model, opt);
}

Result<TrainState> parse_train_state(std::string_view bytes, const std::string& source, Module& model, Optimizer& opt) {
  return load_parsed(parse_safetensors(bytes, source), source, model, opt);
}

Result<TrainState> peek_train_state(const std::string& path) {
  Result<SafetensorsFile> f = load_safetensors(path);
  if (!f.ok()) return f.status();
  return read_state(*f, path, nullptr, nullptr);
}

Result<SafetensorsFile> read_checkpoint(const std::string& path, bool* corrupt) {
  if (corrupt) *corrupt = false;
  Result<std::string> bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  Result<SafetensorsFile> f = parse_safetensors(*bytes, path);
  Status finite = f.ok() ? check_finite_state(*f, path) : f.status();
  if (!finite.ok()) {
    if (corrupt) *corrupt = true;
    return finite;
  }
  return f;
}

Result<TrainState> peek_train_state(const SafetensorsFile& file, const std::string& path) {
  return read_state(file, path, nullptr, nullptr);
}

Result<TrainState> load_train_state(const SafetensorsFile& file, const std::string& path, Module& model, Optimizer& opt) {
  return load_parsed(file, path, model, opt);
}

}  // namespace tg::train
