#include "models/module_io.h"

#include <algorithm>
#include <functional>
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
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  if (!r.ok()) return r.status();
  Result<LoadReport> loaded = load_pretrained(module, *r, {.strict = strict, .names = {}, .source = path});
  if (!loaded.ok()) return loaded.status();
  return r->metadata();
}

namespace {

// Compiles the rules once; a malformed regex is an error naming it.
struct CompiledMapping {
  std::vector<std::regex> ignore, transpose;
  std::vector<std::pair<std::regex, std::string>> renames;
  std::vector<std::pair<std::regex, std::vector<std::string>>> splits;
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
  for (const auto& [p, into] : m.splits) {
    Result<std::regex> r = compile(p, "split");
    if (!r.ok()) return r.status();
    if (into.size() < 2) return io_error("load_state_dict: split pattern '{}' needs at least two parts", p);
    c.splits.emplace_back(std::move(*r), into);
  }
  return c;
}

bool any_match(const std::vector<std::regex>& rs, const std::string& s) {
  for (const auto& r : rs)
    if (std::regex_search(s, r)) return true;
  return false;
}

// "3 missing (a, b, c)", at most 8 names shown, each clipped.
std::string listed(const std::vector<std::string>& names, const char* what) {
  constexpr size_t kShown = 8;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(kShown, names.size()); ++i) shown.push_back(clip_for_message(names[i], 100));
  return fmt::format("{} {} ({}{})", names.size(), what, fmt::join(shown, ", "),
                     names.size() > kShown ? fmt::format(", ... {} more", names.size() - kShown) : "");
}

}  // namespace

namespace {

// Where a load's tensors come from: a state dict in memory, or a safetensors file read tensor by
// tensor. Names, shapes and dtypes are known up front; values are read when copied.
struct Source {
  struct Item {
    std::string name;
    Shape shape;
    DType dtype;
  };
  std::vector<Item> items;
  std::function<Result<Tensor>(size_t)> value;        // item i's tensor
  std::function<Status(size_t, Tensor&)> read_into;   // item i into a parameter of its shape
};

Result<LoadReport> load_from(Module& module, const Source& src, const LoadOptions& o) {
  Result<CompiledMapping> rules = compile(o.names);
  if (!rules.ok()) return rules.status();
  LoadReport report;
  struct Mapped {
    std::string name;  // the checkpoint's
    size_t item;
    bool transposed;
    Shape shape;       // after the transpose and split
    int64_t part = 0, parts = 1;  // this name's share of dim 0 (splits)
  };
  std::map<std::string, Mapped> mapped;  // module name -> where its values are
  std::vector<std::string> problems;
  for (size_t i = 0; i < src.items.size(); ++i) {
    const auto& [name, shape, dtype] = src.items[i];
    if (name.size() > kMaxTensorName) {  // before any regular expression sees it
      problems.push_back(fmt::format("a tensor name of {} bytes ('{}') exceeds the limit of {} bytes", name.size(),
                                     clip_for_message(name), kMaxTensorName));
      continue;
    }
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
    Mapped m{name, i, false, shape};
    if (any_match(rules->transpose, n)) {
      if (shape.size() != 2) {
        problems.push_back(fmt::format("'{}' is to be transposed but has shape {}", name, shape));
        continue;
      }
      m.transposed = true;
      m.shape = {shape[1], shape[0]};
    }
    std::vector<std::string> targets = {n};
    for (const auto& [re, into] : rules->splits) {
      if (!std::regex_search(n, re)) continue;
      const int64_t k = static_cast<int64_t>(into.size());
      if (m.shape.empty() || m.shape[0] % k != 0) {
        problems.push_back(fmt::format("'{}' of shape {} cannot be split in {} equal parts along dim 0", name, m.shape, k));
        targets.clear();
        break;
      }
      m.parts = k;
      m.shape[0] /= k;
      targets.clear();
      for (const auto& to : into) targets.push_back(std::regex_replace(n, re, to));
      break;
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      if (auto it = mapped.find(targets[t]); it != mapped.end()) {
        problems.push_back(fmt::format("'{}' and '{}' both map to '{}'", it->second.name, name, targets[t]));
        continue;
      }
      Mapped mt = m;
      mt.part = static_cast<int64_t>(t);
      mapped.emplace(targets[t], std::move(mt));
    }
  }
  auto non_finite = [](const std::string& name, const Tensor& t) -> std::string {
    const int64_t bad = first_non_finite(t);
    if (bad < 0) return "";
    return fmt::format("'{}' holds {} at flat index {} (of shape {}): non-finite weights are refused", name,
                       non_finite_name(t, bad), bad, t.shape());
  };
  // A value finite in the file but not in the parameter's dtype (1e300 into float32, 3.4e38 into
  // bfloat16) would turn into an infinity as it is copied.
  auto overflows = [](const std::string& name, const Tensor& v, DType to) -> std::string {
    const int64_t bad = first_non_finite(v.to(to));
    if (bad < 0) return "";
    const double x = v.reshape({-1}).narrow(0, bad, 1).to(kFloat64).item();
    return fmt::format("'{}' holds {:g} at flat index {} (of shape {}), finite as the file's {} but beyond the range of the "
                       "model's {}: refused", name, x, bad, v.shape(), v.dtype(), to);
  };
  const NamedTensors mine = module.named_parameters();
  std::map<std::string, bool> known;
  std::vector<std::string> shapes;
  struct Agreed {
    std::string name;  // the module's
    size_t item;
    DType dtype;       // the parameter's
  };
  std::vector<Agreed> agree;  // names and shapes that match
  std::map<size_t, bool> checked;  // items whose values were read and checked
  for (const auto& [n, p] : mine) {
    known[n] = true;
    auto it = mapped.find(n);
    if (it == mapped.end()) {
      report.missing.push_back(n);
      continue;
    }
    const Mapped& m = it->second;
    const DType dt = src.items[m.item].dtype;
    if (!is_floating(dt)) {
      problems.push_back(fmt::format("'{}' is {} (expected a float type)", m.name, dt));
    } else if (m.shape != p.shape()) {
      shapes.push_back(fmt::format("{}: checkpoint {}, model {}", n, m.shape, p.shape()));
    } else {
      agree.push_back({n, m.item, p.dtype()});
    }
  }
  std::vector<char> listed_item(src.items.size(), 0);  // a split tensor's names list it once
  for (const auto& [n, entry] : mapped)
    if (!known.count(n) && !listed_item[entry.item]) {
      listed_item[entry.item] = 1;
      report.unexpected.push_back(entry.name);
    }
  auto refuse = [&] {
    std::vector<std::string> parts;
    if (o.strict && !report.missing.empty()) parts.push_back(listed(report.missing, "missing"));
    if (o.strict && !report.unexpected.empty()) parts.push_back(listed(report.unexpected, "unexpected"));
    if (!shapes.empty()) {
      const size_t shown = std::min<size_t>(shapes.size(), 8);
      parts.push_back(fmt::format("shape mismatch for {}{}", fmt::join(shapes.begin(), shapes.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
                                  shapes.size() > shown ? fmt::format("; ... {} more", shapes.size() - shown) : ""));
    }
    constexpr size_t kProblemsShown = 8;
    for (size_t i = 0; i < std::min(problems.size(), kProblemsShown); ++i) parts.push_back(std::move(problems[i]));
    if (problems.size() > kProblemsShown) parts.push_back(fmt::format("... {} more problems", problems.size() - kProblemsShown));
    return parts.empty() ? Status() : io_error("{}: does not match {}: {}", o.source, module.type_name(), fmt::join(parts, "; "));
  };
  // Names, shapes and types first: a file of another model is refused before any value is read.
  TG_RETURN_IF_ERROR(refuse());
  // Then the values, checked before anything is copied (a file's tensor is read here, verified
  // against its checksum and dropped; read again below straight into the parameter), so a refused
  // load leaves the module as it was, and memory holds one tensor beside the model.
  for (const auto& [n, item, param_dtype] : agree) {
    if (checked.count(item)) {  // a split tensor, read once
      if (checked[item]) report.loaded.push_back(n);
      continue;
    }
    Result<Tensor> v = src.value(item);
    if (!v.ok()) return v.status();
    std::string bad = non_finite(src.items[item].name, *v);
    if (bad.empty() && v->dtype() != param_dtype) bad = overflows(src.items[item].name, *v, param_dtype);
    checked[item] = bad.empty();
    if (!bad.empty()) problems.push_back(std::move(bad));
    else report.loaded.push_back(n);
  }
  TG_RETURN_IF_ERROR(refuse());
  // Everything is checked; now the values, one at a time (a file's bytes go straight into the
  // parameter where no conversion is needed, verified against their checksum again).
  NoGradGuard ng;
  for (auto [n, p] : mine) {
    auto it = mapped.find(n);
    if (it == mapped.end()) continue;
    const Mapped& m = it->second;
    if (m.transposed || m.parts > 1) {
      Result<Tensor> v = src.value(m.item);
      if (!v.ok()) return v.status();
      Tensor t = m.transposed ? v->transpose(0, 1) : *v;
      if (m.parts > 1) t = t.narrow(0, m.part * m.shape[0], m.shape[0]);
      t = t.contiguous();
      p.copy_(t.dtype() == p.dtype() ? t : t.to(p.dtype()));
    } else {
      TG_RETURN_IF_ERROR(src.read_into(m.item, p));
    }
    if (std::string bad = non_finite(m.name, p); !bad.empty())  // the file changed between the two reads
      return io_error("{}: {} (the file changed while it was loaded; the model holds part of it)", o.source, bad);
  }
  return report;
}

Source source_of(const StateDict& sd) {
  Source s;
  for (const auto& [name, t] : sd) s.items.push_back({name, t.shape(), t.dtype()});
  s.value = [&sd](size_t i) -> Result<Tensor> { return sd.items()[i].second; };
  s.read_into = [&sd](size_t i, Tensor& dst) -> Status {
    const Tensor& t = sd.items()[i].second;
    if (!t.same(dst)) dst.copy_(t.dtype() == dst.dtype() ? t : t.to(dst.dtype()));
    return {};
  };
  return s;
}

// Every tensor of every file; item i is file where[i].first's tensor where[i].second.
Source source_of(const std::vector<SafetensorsReader>& files) {
  Source s;
  auto where = std::make_shared<std::vector<std::pair<size_t, size_t>>>();
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t t = 0; t < files[f].tensors().size(); ++t) {
      const auto& info = files[f].tensors()[t];
      s.items.push_back({info.name, info.shape, info.loads_as});
      where->emplace_back(f, t);
    }
  s.value = [&files, where](size_t i) {
    const auto [f, t] = (*where)[i];
    return files[f].read(files[f].tensors()[t].name);
  };
  s.read_into = [&files, where](size_t i, Tensor& dst) {
    const auto [f, t] = (*where)[i];
    return files[f].read_into(files[f].tensors()[t].name, dst);
  };
  return s;
}

}  // namespace

Result<LoadReport> load_state_dict(Module& module, const StateDict& sd, const LoadOptions& o) {
  return load_from(module, source_of(sd), o);
}

Result<LoadReport> load_pretrained(Module& module, const SafetensorsReader& file, const LoadOptions& options) {
  LoadOptions o = options;
  o.source = file.path();
  const std::vector<SafetensorsReader> files = {file};
  return load_from(module, source_of(files), o);
}

Result<LoadReport> load_pretrained(Module& module, const SafetensorsCheckpoint& checkpoint, const LoadOptions& options) {
  LoadOptions o = options;
  o.source = checkpoint.source;
  return load_from(module, source_of(checkpoint.files), o);
}

Result<LoadReport> load_pretrained(Module& module, const std::string& path, const LoadOptions& options) {
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  if (!r.ok()) return r.status();
  return load_pretrained(module, *r, options);
}

Status check_representable(const Module& module, DType dtype, const std::string& who) {
  for (const auto& [name, p] : module.named_parameters()) {
    if (p.dtype() == dtype || !is_floating(p.dtype())) continue;
    const int64_t bad = first_non_finite(p.to(dtype));
    if (bad < 0 || first_non_finite(p) == bad) continue;  // already non-finite: not this check's to report
    const double x = p.reshape({-1}).narrow(0, bad, 1).to(kFloat64).item();
    return io_error("{}: weight '{}' holds {:g} at flat index {} (of shape {}), finite in {} but beyond the range of {}: "
                    "refused (run it in {} instead)", who, name, x, bad, p.shape(), p.dtype(), dtype, p.dtype());
  }
  return {};
}

}  // namespace tg
