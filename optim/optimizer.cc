#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "graph/capture_internal.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "ops/cuda/optim.h"
#include "ops/kernels/optim.h"
#include "ops/op_util.h"
#include "ops/ops.h"

namespace tg {

Optimizer::~Optimizer() = default;

namespace k = kernels;

namespace {
// The gradient in the parameter's dtype (a copy only when they differ).
Tensor grad_as(const Tensor& p) {
  Tensor g = p.grad();
  return g.dtype() == p.dtype() ? g : g.to(p.dtype());
}

// An optimizer's state is made (zeros) at its first step: not while a CUDA graph is captured, where
// the zeros would be written again at every replay.
void check_not_capturing(const char* op, const std::string& name, const Tensor& p) {
  TG_CHECK(!p.is_cuda() || !detail::capturing(p.device().index), op,
           "the state of parameter '{}' would be made inside a CUDA graph's capture (every replay would zero it "
           "again): run an eager step before capturing", name);
}

// Adam's bias-corrected step size and 1 / sqrt(1 - beta2^t) for a parameter's t-th update.
void adam_scalars(double lr, const AdamOptions& o, double t, double* step_size, double* inv_sqrt_bc2) {
  const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
  *step_size = lr / bc1;
  *inv_sqrt_bc2 = 1 / std::sqrt(bc2);
}

// While a CUDA graph is captured, a launch's scalars are step values (graph/capture_internal.h):
// before each replay the optimizer writes those of OptimArgs::scalars for the parameters of the
// launch (their indices), doing the host work its step() would (counting the step at the first).
using ReplayScalars = std::function<void(const std::vector<size_t>& params, bool first_launch, double* out)>;

// Updates of parameters on a GPU, gathered into launch tables (one per dtype) and launched each
// time a table fills and at the end (ops/cuda/optim.h): SGD or Adam, its scalars set by the caller
// in `proto`. Every parameter must be on one device, the skip flag (if any) on it too.
class GpuUpdates {
 public:
  GpuUpdates(const char* op, const cuda_ops::OptimArgs& proto, const NonFiniteFlag* skip, ReplayScalars replay)
      : op_(op), proto_(proto), skip_(skip), replay_(std::move(replay)) {}
  ~GpuUpdates() = default;
  void add(const std::string& name, size_t index, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
           double step_size, double inv_sqrt_bc2, bool first) {
    // Autocast's bfloat16 copy of p, if it has one: rewritten by the same pass, valid for p's new
    // version (p's storage version was bumped before this update).
    const Tensor copy = detail::gpu_bf16_copy(p);
    if (!device_.is_cuda()) {
      device_ = p.device();
      if (skip_ != nullptr) {
        TG_CHECK(skip_->device() == device_, op_, "the skip flag is on {}, parameter '{}' on {} (expected one device)",
                 skip_->device(), name, device_);
      }
    }
    TG_CHECK(p.device() == device_, op_, "parameter '{}' is on {}, others on {} (one optimizer updates one device's "
             "parameters)", name, p.device(), device_);
    detail::check_same_device(op_, p, "parameter", g, "gradient");
    Pending& t = p.dtype() == kFloat64 ? f64_ : f32_;
    const int i = t.table.count++;
    t.table.p[i] = detail::gpu_ptr(p);
    t.table.g[i] = detail::gpu_ptr(g);
    t.table.m[i] = m.defined() ? detail::gpu_ptr(m) : nullptr;
    t.table.v[i] = v.defined() ? detail::gpu_ptr(v) : nullptr;
    t.table.n[i] = p.numel();
    t.table.step_size[i] = step_size;
    t.table.inv_sqrt_bc2[i] = inv_sqrt_bc2;
    t.table.first[i] = first;
    t.table.bf16[i] = copy.defined() ? detail::gpu_ptr(copy) : nullptr;
    if (copy.defined()) detail::mark_gpu_bf16_copy_fresh(p);
    t.grads.push_back(g);
    t.params.push_back(index);
    if (t.table.count == cuda_ops::kMaxTensors) launch(t, p.dtype());
  }
  void finish() {
    launch(f32_, kFloat32);
    launch(f64_, kFloat64);
  }

 private:
  struct Pending {
    cuda_ops::OptimTable table;
    std::vector<Tensor> grads;  // converted gradients, alive until their launch is queued
    std::vector<size_t> params;
  };
  void launch(Pending& t, DType dtype) {
    if (t.table.count == 0) return;
    cuda_ops::OptimArgs a = proto_;
    a.device = device_.index;
    a.op = op_;
    a.type = detail::gpu_scalar(dtype);
    a.skip_flag = skip_ != nullptr ? static_cast<const int64_t*>(detail::gpu_ptr(skip_->state())) : nullptr;
    a.table = t.table;
    if (detail::capturing(device_.index)) {  // the scalars as step values: this step's now, the optimizer's next
      const size_t c = static_cast<size_t>(t.table.count);
      std::vector<double> now(1 + 3 * c);
      now[0] = proto_.adam ? proto_.decay : proto_.lr;
      for (size_t k = 0; k < c; ++k) {
        now[1 + k] = t.table.step_size[k];
        now[1 + c + k] = t.table.inv_sqrt_bc2[k];
        now[1 + 2 * c + k] = t.table.first[k] ? 1.0 : 0.0;
      }
      std::vector<uint64_t> bits(now.size());
      std::memcpy(bits.data(), now.data(), now.size() * sizeof(double));
      a.scalars = reinterpret_cast<const double*>(detail::step_values(
          device_.index, bits.data(), bits.size(),
          [replay = replay_, params = t.params, first_launch = launches_ == 0](uint64_t* out) {
            std::vector<double> v(1 + 3 * params.size());
            replay(params, first_launch, v.data());
            std::memcpy(out, v.data(), v.size() * sizeof(double));
          }));
    }
    cuda_ops::optimizer_step(a);
    ++launches_;
    t.table.count = 0;
    t.grads.clear();
    t.params.clear();
  }
  const char* op_;
  cuda_ops::OptimArgs proto_;
  const NonFiniteFlag* skip_;
  ReplayScalars replay_;
  Device device_ = kCPU;
  Pending f32_, f64_;
  int launches_ = 0;
};
}  // namespace

// ---- NonFiniteFlag ----

NonFiniteFlag::NonFiniteFlag(Device device) : state_(zeros({2}, kInt64, device)) {}

void NonFiniteFlag::check(const Tensor& t, int64_t step) {
  detail::check_float(t, "NonFiniteFlag::check");
  detail::check_same_device("NonFiniteFlag::check", state_, "flag", t, "tensor");
  if (t.is_cuda()) {
    dispatch_float(t.dtype(), "NonFiniteFlag::check", [](auto) {});
    cuda_ops::check_finite(t.device().index, "NonFiniteFlag::check", detail::gpu_scalar(t.dtype()), detail::gpu_ptr(t),
                           t.numel(), static_cast<int64_t*>(detail::gpu_ptr(state_)), step,
                           detail::replay_step(t.device().index, step));
    return;
  }
  int64_t* f = state_.data<int64_t>();
  if (f[0] != 0) return;
  for (double v : t.to_vector<double>()) {
    if (!std::isfinite(v)) {
      f[0] = 1;
      f[1] = step;
      return;
    }
  }
}

bool NonFiniteFlag::raised() const { return state_.to_vector<int64_t>()[0] != 0; }
int64_t NonFiniteFlag::first_step() const { return state_.to_vector<int64_t>()[1]; }
void NonFiniteFlag::reset() { fill_(state_, 0.0); }

bool Optimizer::skip_on_cpu() const {
  return skip_flag_ != nullptr && !skip_flag_->device().is_cuda() && skip_flag_->raised();
}

Optimizer::Optimizer(NamedTensors params, double lr) : params_(std::move(params)), lr_(lr) {
  TG_CHECK(lr >= 0, "Optimizer", "learning rate must be >= 0, got {}", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [n, p] = params_[i];
    TG_CHECK(p.defined() && p.is_leaf(), "Optimizer", "parameter '{}' must be a leaf tensor", n);
    TG_CHECK(p.dtype() == kFloat32 || p.dtype() == kFloat64, "Optimizer",
             "parameter '{}' is {}: optimizers update float32 or float64 weights (for bfloat16 speed, train float32 "
             "weights under autocast)", n, p.dtype());
    for (size_t j = 0; j < i; ++j)
      TG_CHECK(!params_[j].second.same(p) && params_[j].first != n, "Optimizer",
               "parameter '{}' is listed twice (as '{}'): it would be updated twice per step", n, params_[j].first);
  }
  buffers_.resize(params_.size());
  param_steps_.assign(params_.size(), 0);
}

void Optimizer::zero_grad() {
  for (auto& [n, p] : params_) p.zero_grad();
}

Tensor& Optimizer::buffer(size_t i, int slot) {
  auto& slots = buffers_[i];
  if (slots.size() <= static_cast<size_t>(slot)) slots.resize(static_cast<size_t>(slot) + 1);
  Tensor& b = slots[static_cast<size_t>(slot)];
  // The parameter may have been moved to another dtype (Module::to) since the buffer was made.
  if (b.defined() && b.dtype() != params_[i].second.dtype()) b = b.to(params_[i].second.dtype()).detach();
  return b;
}

StateDict Optimizer::state() const {
  StateDict sd;
  sd.insert("step", full({}, static_cast<double>(steps_), kInt64));
  std::vector<std::string> slots = slot_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_steps_[i] == 0) continue;
    sd.insert(params_[i].first + ".step", full({}, static_cast<double>(param_steps_[i]), kInt64));
    for (size_t s = 0; s < buffers_[i].size() && s < slots.size(); ++s)
      if (buffers_[i][s].defined()) sd.insert(params_[i].first + "." + slots[s], buffers_[i][s]);
  }
  return sd;
}

static int64_t count_of(const StateDict& sd, const std::string& key, const char* who) {
  const Tensor& t = sd.at(key);
  TG_CHECK(t.numel() == 1, who, "'{}' must hold one number, got shape {}", key, t.shape());
  double v = t.item();
  TG_CHECK(v >= 0 && v < 9.0e15 && v == static_cast<double>(static_cast<int64_t>(v)), who,
           "'{}' must be a non-negative integer, got {}", key, v);
  return static_cast<int64_t>(v);
}

void Optimizer::check_state(const StateDict& sd) const {
  const char* who = "Optimizer::load_state";
  TG_CHECK(sd.contains("step"), who, "{} state has no 'step' entry", type_name());
  count_of(sd, "step", who);
  std::vector<std::string> slots = slot_names();
  size_t used = 1;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    size_t present = 0, needed = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      std::string key = name + "." + slots[s];
      if (!sd.contains(key)) continue;
      ++present;
      const Tensor& t = sd.at(key);
      TG_CHECK(t.shape() == params_[i].second.shape() && (t.dtype() == kFloat32 || t.dtype() == kFloat64), who,
               "'{}' has shape {} ({}), the parameter has {}", key, t.shape(), t.dtype(), params_[i].second.shape());
    }
    if (sd.contains(name + ".step")) {
      ++used;
      needed = count_of(sd, name + ".step", who) > 0 ? required_slots() : 0;
    }
    TG_CHECK(present == 0 || present >= needed, who, "state of '{}' is incomplete ({} of {} buffers)", name, present,
             needed);
    TG_CHECK(present == 0 || sd.contains(name + ".step"), who, "state of '{}' has buffers but no step count", name);
    used += present;
  }
  TG_CHECK(used == sd.size(), who, "{} of {} state entries match no parameter of this {} (different model or optimizer?)",
           sd.size() - used, sd.size(), type_name());
}

void Optimizer::load_state(const StateDict& sd) {
  check_state(sd);  // everything first: a failed load leaves the optimizer as it was
  std::vector<std::string> slots = slot_names();
  steps_ = count_of(sd, "step", "Optimizer::load_state");
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    buffers_[i].clear();
    param_steps_[i] = sd.contains(name + ".step") ? count_of(sd, name + ".step", "Optimizer::load_state") : 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      std::string key = name + "." + slots[s];
      if (sd.contains(key)) {
        const Tensor& p = params_[i].second;
        buffer(i, static_cast<int>(s)) = sd.at(key).to(p.dtype()).detach().to(p.device()).clone();
      }
    }
  }
}

// ---- SGD ----

SGD::SGD(NamedTensors params, const SGDOptions& o) : Optimizer(std::move(params), o.lr), opts(o) {
  TG_CHECK(o.momentum >= 0 && o.weight_decay >= 0, "SGD", "momentum ({}) and weight_decay ({}) must be >= 0",
           o.momentum, o.weight_decay);
  TG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD",
           "Nesterov momentum needs momentum > 0 and dampening 0 (got {} and {})", o.momentum, o.dampening);
}

void SGD::step() {
  if (skip_on_cpu()) return;
  ++steps_;
  std::optional<GpuUpdates> gpu;  // made at the first parameter on a GPU: a CPU step builds no launch tables
  auto gpu_updates = [&]() -> GpuUpdates& {
    if (!gpu) {
      cuda_ops::OptimArgs proto;
      proto.adam = false;
      proto.lr = lr_;
      proto.wd = opts.weight_decay;
      proto.mu = opts.momentum;
      proto.dampening = opts.dampening;
      proto.nesterov = opts.nesterov;
      // A CUDA graph's replay: the step counted, the learning rate as set now, no first step.
      gpu.emplace("SGD", proto, skip_flag_, [this](const std::vector<size_t>& idx, bool first_launch, double* out) {
        if (first_launch) ++steps_;
        const size_t c = idx.size();
        out[0] = lr_;
        for (size_t k = 0; k < c; ++k) {
          ++param_steps_[idx[k]];
          out[1 + k] = out[1 + c + k] = out[1 + 2 * c + k] = 0;
        }
      });
    }
    return *gpu;
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    ++param_steps_[i];
    p.impl().storage->bump_version();  // autocast's packed copy of this weight is stale
    const bool has_momentum = opts.momentum != 0;
    bool first = false;
    if (has_momentum && !buffer(i, 0).defined()) {
      check_not_capturing("SGD", params_[i].first, p);
      buffer(i, 0) = zeros(p.shape(), p.dtype(), p.device());
      first = true;
    }
    if (p.is_cuda()) {
      gpu_updates().add(params_[i].first, i, p, grad_as(p), has_momentum ? buffer(i, 0) : Tensor(), Tensor(), 0, 0, first);
      continue;
    }
    dispatch_float(p.dtype(), "SGD", [&](auto tag) {
      using T = decltype(tag);
      T* buf = has_momentum ? buffer(i, 0).template data<T>() : nullptr;
      k::sgd_update<T>(p.data<T>(), grad_as(p).template data<T>(), buf, p.numel(), T(lr_), T(opts.weight_decay),
                       T(opts.momentum), T(opts.dampening), opts.nesterov, first);
    });
    refresh_autocast_packs(p);  // while p is in cache
  }
  if (gpu) gpu->finish();
}

// ---- Adam, AdamW ----

Adam::Adam(NamedTensors params, const AdamOptions& o) : Adam(std::move(params), o, false) {}

Adam::Adam(NamedTensors params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), opts(o), decoupled_(decoupled) {
  TG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps >= 0 && o.weight_decay >= 0,
           decoupled ? "AdamW" : "Adam", "invalid options: betas ({}, {}) must be in [0, 1), eps {} and weight_decay {} >= 0",
           o.beta1, o.beta2, o.eps, o.weight_decay);
}

AdamW::AdamW(NamedTensors params, const AdamOptions& o) : Adam(std::move(params), o, true) {}

void Adam::step() {
  if (skip_on_cpu()) return;
  ++steps_;
  const double wd_l2 = decoupled_ ? 0.0 : opts.weight_decay;
  const double decay = decoupled_ ? 1 - lr_ * opts.weight_decay : 1.0;
  std::optional<GpuUpdates> gpu;  // made at the first parameter on a GPU: a CPU step builds no launch tables
  auto gpu_updates = [&]() -> GpuUpdates& {
    if (!gpu) {
      cuda_ops::OptimArgs proto;
      proto.adam = true;
      proto.b1 = opts.beta1;
      proto.b2 = opts.beta2;
      proto.eps = opts.eps;
      proto.wd_l2 = wd_l2;
      proto.decay = decay;
      // A CUDA graph's replay: the step and each parameter's update counted, the learning rate as set now.
      gpu.emplace(decoupled_ ? "AdamW" : "Adam", proto, skip_flag_,
                  [this](const std::vector<size_t>& idx, bool first_launch, double* out) {
                    if (first_launch) ++steps_;
                    const size_t c = idx.size();
                    out[0] = decoupled_ ? 1 - lr_ * opts.weight_decay : 1.0;
                    for (size_t k = 0; k < c; ++k) {
                      adam_scalars(lr_, opts, static_cast<double>(++param_steps_[idx[k]]), &out[1 + k], &out[1 + c + k]);
                      out[1 + 2 * c + k] = 0;
                    }
                  });
    }
    return *gpu;
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    p.impl().storage->bump_version();  // autocast's packed copy of this weight is stale
    if (!buffer(i, 0).defined()) {
      check_not_capturing(type_name().c_str(), params_[i].first, p);
      buffer(i, 0) = zeros(p.shape(), p.dtype(), p.device());
      buffer(i, 1) = zeros(p.shape(), p.dtype(), p.device());
    }
    // Bias correction counts this parameter's own updates (as PyTorch's per-parameter step): a
    // parameter that joins late (unfrozen, or first reached by the graph) starts at step 1.
    double step_size = 0, inv_sqrt_bc2 = 0;
    adam_scalars(lr_, opts, static_cast<double>(++param_steps_[i]), &step_size, &inv_sqrt_bc2);
    if (p.is_cuda()) {
      gpu_updates().add(params_[i].first, i, p, grad_as(p), buffer(i, 0), buffer(i, 1), step_size, inv_sqrt_bc2, false);
      continue;
    }
    dispatch_float(p.dtype(), type_name().c_str(), [&](auto tag) {
      using T = decltype(tag);
      k::adam_update<T>(p.data<T>(), grad_as(p).template data<T>(), buffer(i, 0).template data<T>(),
                        buffer(i, 1).template data<T>(), p.numel(), T(opts.beta1), T(opts.beta2), T(opts.eps),
                        T(step_size), T(inv_sqrt_bc2), T(wd_l2), T(decay));
    });
    refresh_autocast_packs(p);  // while p is in cache
  }
  if (gpu) gpu->finish();
}

// ---- Clipping ----

namespace {
// The gradients' device: every gradient on one (refused otherwise, naming both); the CPU when none.
Device grads_device(const std::vector<Tensor>& params, const char* op) {
  Device d = kCPU;
  bool seen = false;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!seen) {
      d = g.device();
      seen = true;
    }
    TG_CHECK(g.device() == d, op, "gradients on {} and {} (expected all on one device)", d, g.device());
  }
  return d;
}
}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, NonFiniteFlag* flag, int64_t step,
                       double scale) {
  const char* op = "clip_grad_norm_";
  TG_CHECK(max_norm >= 0, op, "max_norm must be >= 0 (0: no clipping), got {}", max_norm);
  TG_CHECK(scale > 0 && std::isfinite(scale), op, "scale must be positive and finite, got {}", scale);
  const Device device = grads_device(params, op);
  bool any = false;
  for (const Tensor& p : params) any = any || p.grad().defined();
  if (!any) return full({}, 0.0, kFloat64, flag != nullptr ? flag->device() : device);  // no gradient: norm 0
  if (flag != nullptr) {
    TG_CHECK(flag->device() == device, op, "the flag is on {}, the gradients on {}", flag->device(), device);
  }
  if (!device.is_cuda()) {
    const double total = grad_norm(params) * scale;
    Tensor norm = full({}, total, kFloat64);
    if (flag != nullptr) flag->check(norm, step);
    const double clip = max_norm > 0 && max_norm / (total + 1e-6) < 1 ? max_norm / (total + 1e-6) : 1.0;
    scale_grads(params, scale * clip);
    return norm;
  }
  std::vector<cuda_ops::OptimTable> tables(1);
  std::vector<Tensor> grads;
  DType dtype = kFloat32;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (grads.empty()) dtype = g.dtype();
    TG_CHECK(g.dtype() == dtype, op, "gradients of dtypes {} and {} on {} (expected one float dtype)", dtype, g.dtype(),
             device);
    if (tables.back().count == cuda_ops::kMaxTensors) tables.emplace_back();
    cuda_ops::OptimTable& t = tables.back();
    t.g[t.count] = detail::gpu_ptr(g);
    t.n[t.count] = g.numel();
    ++t.count;
    grads.push_back(g);
  }
  dispatch_float(dtype, op, [](auto) {});
  int64_t blocks = 0;
  for (const cuda_ops::OptimTable& t : tables) blocks += cuda_ops::blocks_for_norm(t);
  Tensor partial = Tensor::empty({std::max<int64_t>(blocks, 1)}, kFloat64, device);
  Tensor norm = Tensor::empty({}, kFloat64, device), coef = Tensor::empty({}, kFloat64, device);
  cuda_ops::GradNormArgs a;
  a.device = device.index;
  a.op = op;
  a.type = detail::gpu_scalar(dtype);
  a.tables = tables.data();
  a.table_count = static_cast<int>(tables.size());
  a.partial = static_cast<double*>(detail::gpu_ptr(partial));
  a.norm = static_cast<double*>(detail::gpu_ptr(norm));
  a.max_norm = max_norm;
  a.scale = scale;
  a.coef = static_cast<double*>(detail::gpu_ptr(coef));
  a.flag = flag != nullptr ? static_cast<int64_t*>(detail::gpu_ptr(flag->state())) : nullptr;
  a.step = step;
  if (flag != nullptr) a.step_at = detail::replay_step(device.index, step);
  cuda_ops::grad_norm(a);
  if (max_norm > 0 || scale != 1.0) {
    for (const cuda_ops::OptimTable& t : tables)
      cuda_ops::scale_grads(device.index, op, a.type, t, static_cast<const double*>(detail::gpu_ptr(coef)));
    for (const Tensor& g : grads) g.impl().storage->bump_version();  // copies made of them (autocast's) are stale
  }
  return norm;
}

double grad_norm(const std::vector<Tensor>& params) {
  if (grads_device(params, "grad_norm").is_cuda()) return clip_grad_norm_(params, 0).item();
  double total = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "grad_norm", [&](auto tag) {
      using T = decltype(tag);
      total += k::sum_squares<T>(g.data<T>(), g.numel());
    });
  }
  return std::sqrt(total);
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  if (factor == 1.0) return;
  NoGradGuard ng;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) g.mul_(factor);
  }
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  TG_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be > 0, got {}", max_norm);
  if (grads_device(params, "clip_grad_norm").is_cuda()) return clip_grad_norm_(params, max_norm).item();
  const double total = grad_norm(params);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1) scale_grads(params, coef);
  return total;
}

}  // namespace tg
