#pragma once
// Optimizers. Every parameter is updated the same way — W_Q like the embedding table — from the
// gradient the backward pass left in its .grad(). Parameters without a gradient (frozen, or not
// reached by this step's graph) are skipped, as in PyTorch.
//
//   tg::AdamW opt(model.named_parameters(), {.lr = 3e-4, .weight_decay = 0.01});
//   loss.backward();
//   tg::clip_grad_norm(model.parameters(), 1.0);
//   opt.step();
//   opt.zero_grad();
#include <cstdint>
#include <string>
#include <vector>

#include "../io/state_dict.h"

namespace tg {

class Optimizer {
 public:
  explicit Optimizer(NamedTensors params, double lr);
  virtual ~Optimizer();
  virtual void step() = 0;  // one update of every parameter that has a gradient
  void zero_grad();         // drops the gradients (set_to_none)
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }
  const NamedTensors& params() const { return params_; }

  // The optimizer's state as named tensors ("step", "<param>.exp_avg", ...), for checkpoints; the
  // hyper-parameters are the constructor's. load_state checks names and shapes.
  virtual StateDict state() const;
  virtual void load_state(const StateDict& sd);
  void check_state(const StateDict& sd) const;  // load_state's checks alone (tg::Error on a mismatch)
  virtual std::string type_name() const = 0;

 protected:
  // Per-parameter state buffers, created (zero) on first use.
  Tensor& buffer(size_t param_index, int slot);
  virtual std::vector<std::string> slot_names() const = 0;
  virtual size_t required_slots() const { return slot_names().size(); }  // buffers a stepped parameter has
  NamedTensors params_;
  std::vector<std::vector<Tensor>> buffers_;  // [param][slot]
  std::vector<int64_t> param_steps_;          // updates each parameter received (Adam's bias correction)
  double lr_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2, added to the gradient
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SGDOptions& opts = {});
  void step() override;
  std::string type_name() const override { return "SGD"; }
  SGDOptions opts;

 protected:
  std::vector<std::string> slot_names() const override { return {"momentum_buffer"}; }
  size_t required_slots() const override { return opts.momentum != 0 ? 1 : 0; }
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled decay
};

class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, const AdamOptions& opts = {});
  void step() override;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  AdamOptions opts;

 protected:
  Adam(NamedTensors params, const AdamOptions& opts, bool decoupled);
  std::vector<std::string> slot_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool decoupled_ = false;
};

// AdamW: Adam with decoupled weight decay, p *= 1 - lr * weight_decay before the Adam step
// (default weight_decay 0.01, as torch.optim.AdamW).
class AdamW : public Adam {
 public:
  AdamW(NamedTensors params, const AdamOptions& opts = {.weight_decay = 0.01});
};

// Scales every gradient by max_norm / (total_norm + 1e-6) when the global L2 norm over all of
// them exceeds max_norm (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The global L2 norm of the gradients (parameters without one are skipped), and g *= factor on each.
double grad_norm(const std::vector<Tensor>& params);
void scale_grads(const std::vector<Tensor>& params, double factor);

}  // namespace tg
