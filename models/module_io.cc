#include "models/module_io.h"

#include <map>
#include <regex>

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/node.h"

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

namespace {

// Compiles the rules once; a malformed regex is an error naming it.
struct CompiledMapping {
  std::vector<std::regex> ignore, transpose;
  std::vector<std::pair<std::regex, std::string>> renames;
};

Result<std::regex> compile(const std::string& pattern, const char* what) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return io_error("load_state_dict: {} pattern '{}' is not a valid regular expression ({})", what, pattern, e.what());
  }
}

Result<CompiledMapping> compile(const NameMapping& m) {
  CompiledMapping c;
  for (const auto& p : m.ignore) {
    Result<std::regex> r = compile(p, "ignore");
    if (!r.ok()) return r.status();
    c.ignore.push_back(std::move(*r));
  }
  for (const auto& p : m.transpose) {
    Result<std::regex> r = compile(p, "transpose");
    if (!r.ok()) return r.status();
    c.transpose.push_back(std::move(*r));
  }
  for (const auto& [p, to] : m.renames) {
    Result<std::regex> r = compile(p, "rename");
    if (!r.ok()) return r.status();
    c.renames.emplace_back(std::move(*r), to);
  }
  return c;
}

bool any_match(const std::vector<std::regex>& rs, const std::string& s) {
  for (const auto& r : rs)
    if (std::regex_search(s, r)) return true;
  return false;
}

// "3 missing (a, b, c)", at most 8 names shown.
std::string listed(const std::vector<std::string>& names, const char* what) {
  constexpr size_t kShown = 8;
  std::vector<std::string> shown(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(kShown, names.size())));
  return fmt::format("{} {} ({}{})", names.size(), what, fmt::join(shown, ", "),
                     names.size() > kShown ? fmt::format(", ... {} more", names.size() - kShown) : "");
}

}  // namespace

Result<LoadReport> load_state_dict(Module& module, const StateDict& sd, const LoadOptions& o) {
  Result<CompiledMapping> rules = compile(o.names);
  if (!rules.ok()) return rules.status();
  LoadReport report;
  std::map<std::string, std::pair<std::string, Tensor>> mapped;  // module name -> (checkpoint name, tensor)
  std::vector<std::string> problems;
  for (const auto& [name, t] : sd) {
    if (any_match(rules->ignore, name)) {
      report.ignored.push_back(name);
      continue;
    }
    std::string n = name;
    for (const auto& p : o.names.strip_prefixes)
      if (n.rfind(p, 0) == 0) {
        n.erase(0, p.size());
        break;
      }
    n = o.names.add_prefix + n;
    for (const auto& [re, to] : rules->renames) n = std::regex_replace(n, re, to);
    Tensor v = t;
    if (any_match(rules->transpose, n)) {
      if (t.dim() != 2) {
        problems.push_back(fmt::format("'{}' is to be transposed but has shape {}", name, t.shape()));
        continue;
      }
      v = t.transpose(0, 1).contiguous();
    }
    if (auto it = mapped.find(n); it != mapped.end()) {
      problems.push_back(fmt::format("'{}' and '{}' both map to '{}'", it->second.first, name, n));
      continue;
    }
    mapped.emplace(n, std::pair{name, v});
  }
  const NamedTensors mine = module.named_parameters();
  std::map<std::string, bool> known;
  std::vector<std::string> shapes;
  for (const auto& [n, p] : mine) {
    known[n] = true;
    auto it = mapped.find(n);
    if (it == mapped.end()) {
      report.missing.push_back(n);
      continue;
    }
    const Tensor& src = it->second.second;
    if (!is_floating(src.dtype()))
      problems.push_back(fmt::format("'{}' is {} (expected a float type)", it->second.first, src.dtype()));
    else if (src.shape() != p.shape())
      shapes.push_back(fmt::format("{}: checkpoint {}, model {}", n, src.shape(), p.shape()));
    else if (const int64_t bad = first_non_finite(src); bad >= 0)
      problems.push_back(fmt::format("'{}' holds {} at flat index {} (of shape {}): non-finite weights are refused",
                                     it->second.first, non_finite_name(src, bad), bad, src.shape()));
    else
      report.loaded.push_back(n);
  }
  for (const auto& [n, entry] : mapped)
    if (!known.count(n)) report.unexpected.push_back(entry.first);
  std::vector<std::string> parts;
  if (o.strict && !report.missing.empty()) parts.push_back(listed(report.missing, "missing"));
  if (o.strict && !report.unexpected.empty()) parts.push_back(listed(report.unexpected, "unexpected"));
  if (!shapes.empty()) parts.push_back("shape mismatch for " + fmt::format("{}", fmt::join(shapes, "; ")));
  for (auto& p : problems) parts.push_back(std::move(p));
  if (!parts.empty())
    return io_error("{}: does not match {}: {}", o.source, module.type_name(), fmt::join(parts, "; "));
  NoGradGuard ng;
  for (auto [n, p] : mine) {
    auto it = mapped.find(n);
    if (it == mapped.end()) continue;
    const Tensor& src = it->second.second;
    if (src.same(p)) continue;
    p.copy_(src.dtype() == p.dtype() ? src : src.to(p.dtype()));
  }
  return report;
}

Result<LoadReport> load_pretrained(Module& module, const std::string& path, const LoadOptions& options) {
  Result<SafetensorsFile> f = load_safetensors(path);
  if (!f.ok()) return f.status();
  LoadOptions o = options;
  o.source = path;
  return load_state_dict(module, f->tensors, o);
}

}  // namespace tg
