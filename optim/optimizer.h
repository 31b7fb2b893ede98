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
//
// Parameters on a GPU are updated there, as many as fit in one launch (ops/cuda/optim.h) at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "../io/state_dict.h"

namespace tg {

// A divergence flag for training without a host read per step (what a GPU needs to stay busy):
// check() raises it, on the flag's device and without waiting for it, when a value is NaN or
// infinite, remembering the step; an optimizer given the flag (Optimizer::set_skip_flag) skips
// every update once it is raised, so the parameters stay those from before the bad step.
// raised() and first_step() read it (on a GPU they wait for the device: call them at log steps).
class NonFiniteFlag {
 public:
  explicit NonFiniteFlag(Device device = kCPU);
  void check(const Tensor& t, int64_t step);  // t: float32 or float64, on the flag's device
  bool raised() const;
  int64_t first_step() const;  // the step that raised it; 0 while not raised
  void reset();
  Device device() const { return state_.device(); }
  const Tensor& state() const { return state_; }  // int64 [2]: raised, first step

 private:
  Tensor state_;
};

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
  // Skip every update while this flag is raised (nullptr: never skip). The flag must outlive the
  // optimizer's use of it and sit on the parameters' device.
  void set_skip_flag(const NonFiniteFlag* flag) { skip_flag_ = flag; }

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
  const NonFiniteFlag* skip_flag_ = nullptr;
  bool skip_on_cpu() const;  // a CPU flag that is raised (a GPU flag is read by the update kernel)
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
// Gradients on a GPU: the norm is read back (a wait for the device); see clip_grad_norm_.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The same without reading the norm back: returns it as a 0-d float64 tensor on the gradients'
// device (all on one), computed and applied there (max_norm 0: the norm alone, no clipping). With
// a flag, a non-finite norm raises it for `step`. `scale` multiplies the gradients first, in the
// same pass (a training loop's 1 / count: the norm is then the mean gradient's). On a GPU: no host
// read, a few launches.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, NonFiniteFlag* flag = nullptr,
                       int64_t step = 0, double scale = 1.0);
// The global L2 norm of the gradients (parameters without one are skipped), and g *= factor on each.
double grad_norm(const std::vector<Tensor>& params);
void scale_grads(const std::vector<Tensor>& params, double factor);

}  // namespace tg
