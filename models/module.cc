#include "models/module.h"

#include <algorithm>

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/node.h"
#include "ops/elementwise.h"

namespace tg {

Module::~Module() = default;

static void check_name(const std::string& name, const char* what) {
  TG_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module",
           "{} name '{}' must be non-empty and contain no '.'", what, name);
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name, "parameter");
  TG_CHECK(t.defined(), "Module", "parameter '{}' is an undefined tensor", name);
  TG_CHECK(t.is_leaf(), "Module", "parameter '{}' must be a leaf tensor (detach it first)", name);
  TG_CHECK(is_floating(t.dtype()), "Module", "parameter '{}' has dtype {} (expected float32, float64 or bfloat16)", name,
           t.dtype());
  if (const DType want = ParameterDTypeGuard::current(); want != t.dtype()) {
    NoGradGuard ng;
    t = t.detach().to(want);
  }
  for (auto& [n, p] : params_) TG_CHECK(n != name, "Module", "parameter '{}' registered twice", name);
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name, "module");
  TG_CHECK(m != nullptr, "Module", "child module '{}' is null", name);
  for (auto& [n, c] : children_) TG_CHECK(n != name, "Module", "child module '{}' registered twice", name);
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, NamedTensors& out, std::vector<const TensorImpl*>& seen) const {
  for (auto& [n, p] : params_) {
    const TensorImpl* id = p.impl_ptr().get();
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    out.emplace_back(prefix + n, p);
  }
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", out, seen);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", out, seen);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<Tensor> Module::trainable_parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

std::shared_ptr<Module> Module::child(const std::string& dotted) const {
  const Module* m = this;
  std::shared_ptr<Module> found;
  size_t start = 0;
  while (start <= dotted.size()) {
    size_t dot = dotted.find('.', start);
    std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    found = nullptr;
    for (auto& [n, c] : m->children_)
      if (n == part) found = c;
    TG_CHECK(found, "Module", "no child module '{}' (looking for '{}')", part, dotted);
    m = found.get();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return found;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& [n, p] : named_parameters()) p.zero_grad();
}

void Module::freeze(bool frozen) {
  for (auto& [n, p] : named_parameters()) {
    p.set_requires_grad(!frozen);
    if (frozen) p.zero_grad();
  }
}

void Module::freeze_parameter(const std::string& name, bool frozen) {
  for (auto& [n, p] : named_parameters()) {
    if (n != name) continue;
    p.set_requires_grad(!frozen);
    if (frozen) p.zero_grad();
    return;
  }
  detail::fail("Module::freeze_parameter", "no parameter named '{}'", name);
}

// Replaces the storage under the same TensorImpl, so every handle (the module's member, the
// optimizer's list, a tied weight) sees the converted values.
static void convert_in_place(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return;
  Tensor c;
  {
    NoGradGuard ng;
    c = t.detach().to(dtype);
  }
  TensorImpl& impl = t.impl();
  impl.storage = c.impl().storage;
  impl.offset = c.impl().offset;
  impl.dtype = dtype;
  impl.grad = nullptr;
}

namespace {
thread_local DType t_parameter_dtype = kFloat32;
}  // namespace

ParameterDTypeGuard::ParameterDTypeGuard(DType dtype) : prev_(t_parameter_dtype) {
  TG_CHECK(is_floating(dtype), "ParameterDTypeGuard", "dtype {} is not a float type", dtype);
  t_parameter_dtype = dtype;
}
ParameterDTypeGuard::~ParameterDTypeGuard() { t_parameter_dtype = prev_; }
DType ParameterDTypeGuard::current() { return t_parameter_dtype; }

void Module::to(DType dtype) {
  TG_CHECK(is_floating(dtype), "Module::to", "dtype {} is not a float type", dtype);
  for (auto& [n, p] : params_) convert_in_place(p, dtype);
  for (auto& [n, b] : buffers_)
    if (is_floating(b.dtype())) convert_in_place(b, dtype);
  for (auto& [n, c] : children_) c->to(dtype);
}

// As convert_in_place, to a device: the storage is replaced under the same TensorImpl.
static void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  Tensor c;
  {
    NoGradGuard ng;
    c = t.detach().to(device);
  }
  TensorImpl& impl = t.impl();
  impl.storage = c.impl().storage;
  impl.offset = c.impl().offset;
  impl.grad = nullptr;
}

void Module::to(Device device) {
  for (auto& [n, p] : params_) move_in_place(p, device);
  for (auto& [n, b] : buffers_) move_in_place(b, device);
  for (auto& [n, c] : children_) c->to(device);
}

Device Module::device() const {
  if (!params_.empty()) return params_.front().second.device();
  if (!buffers_.empty()) return buffers_.front().second.device();
  for (auto& [n, c] : children_) {
    if (!c->params_.empty() || !c->buffers_.empty() || !c->children_.empty()) return c->device();
  }
  return kCPU;
}

StateDict Module::state_dict() const {
  StateDict sd;
  for (auto& [n, p] : named_parameters()) sd.insert(n, p);
  return sd;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  NamedTensors mine = named_parameters();
  std::vector<std::string> missing, unexpected;
  std::map<std::string, bool> known;
  for (auto& [n, p] : mine) {
    known[n] = true;
    if (!sd.contains(n)) missing.push_back(n);
  }
  for (auto& [n, t] : sd)
    if (!known.count(n)) unexpected.push_back(n);
  if (strict) {
    TG_CHECK(missing.empty() && unexpected.empty(), "load_state_dict",
             "state dict does not match the model: missing [{}], unexpected [{}]",
             fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  }
  // Check every shape before copying anything, so a failed load leaves the model untouched.
  for (auto& [n, p] : mine) {
    if (!sd.contains(n)) continue;
    const Tensor& src = sd.at(n);
    TG_CHECK(src.shape() == p.shape(), "load_state_dict",
             "shape mismatch for '{}': the checkpoint has {}, the model expects {}", n, src.shape(), p.shape());
    TG_CHECK(is_floating(src.dtype()), "load_state_dict",
             "'{}' has dtype {} (expected a float type)", n, src.dtype());
    const int64_t bad = first_non_finite(src);
    TG_CHECK(bad < 0, "load_state_dict", "'{}' holds {} at flat index {} (of shape {}): non-finite weights are refused",
             n, non_finite_name(src, bad), bad, src.shape());
  }
  NoGradGuard ng;
  for (auto& [n, p] : mine) {
    if (!sd.contains(n)) continue;
    const Tensor& src = sd.at(n);
    if (src.same(p)) continue;
    const Tensor here = src.device() == p.device() ? src : src.to(p.device());  // loading is the copy
    p.copy_(here.dtype() == p.dtype() ? here : here.to(p.dtype()));
  }
}

std::string Module::summary() const {
  NamedTensors ps = named_parameters();
  size_t w = 4;
  for (auto& [n, p] : ps) w = std::max(w, n.size());
  std::string out = fmt::format("{:<{}}  {:<18} {:>12}  {}\n", "name", w, "shape", "parameters", "trains");
  int64_t total = 0, trainable = 0;
  for (auto& [n, p] : ps) {
    out += fmt::format("{:<{}}  {:<18} {:>12}  {}\n", n, w, fmt::format("{}", p.shape()), p.numel(),
                       p.requires_grad() ? "yes" : "frozen");
    total += p.numel();
    if (p.requires_grad()) trainable += p.numel();
  }
  out += fmt::format("{} tensors, {} parameters ({} trainable, {} frozen)\n", ps.size(), total, trainable,
                     total - trainable);
  return out;
}

}  // namespace tg
