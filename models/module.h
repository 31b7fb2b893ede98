#pragma once
// Module: the base of every layer and model. It registers parameters and child modules by name,
// so that every weight has a PyTorch-style hierarchical name
// (`encoder.layers.0.self_attn.w_q.weight`) used by state dicts, checkpoints and optimizers.
//
//   struct Mlp : tg::Module {
//     std::shared_ptr<tg::Linear> fc1 = register_module("fc1", std::make_shared<tg::Linear>(4, 16));
//     std::shared_ptr<tg::Linear> fc2 = register_module("fc2", std::make_shared<tg::Linear>(16, 1));
//     tg::Tensor forward(const tg::Tensor& x) { return fc2->forward(tg::relu(fc1->forward(x))); }
//   };
//
// Parameters are ordinary leaf tensors with requires_grad: the model's code reads them, the
// backward engine fills their .grad(), an optimizer updates them in place. Nothing else is special.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../graph/tensor.h"
#include "../io/state_dict.h"

namespace tg {

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Registration: the tensor becomes a leaf that requires grad (a parameter); buffers (constant
  // tables such as the sinusoidal positions) are moved by to() but neither trained nor saved.
  Tensor register_parameter(const std::string& name, Tensor t);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // Every parameter under this module, by hierarchical name. A tensor registered twice (weight
  // tying) appears once, under the first name, as in PyTorch.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> trainable_parameters() const;  // those that require grad (not frozen)
  int64_t num_parameters(bool trainable_only = false) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  std::shared_ptr<Module> child(const std::string& dotted_name) const;  // "encoder.layers.0"

  // Training mode (dropout active) for this module and every descendant.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();  // drops every parameter's gradient (set_to_none, as PyTorch's default)
  // Freezing: the parameters stop requiring grad (no gradient is computed or applied). On the
  // whole subtree, or on one parameter by its name relative to this module.
  void freeze(bool frozen = true);
  void unfreeze() { freeze(false); }
  void freeze_parameter(const std::string& name, bool frozen = true);

  // Moves every parameter and float buffer to a dtype in place (the tensors keep their identity,
  // so optimizers built before and tied weights stay valid). float64 runs a model for gradchecks;
  // bfloat16 stores weights in half the memory (ops that do not take bfloat16 refuse it by name;
  // training keeps float32 weights under autocast, and optimizers refuse bfloat16 parameters).
  void to(DType dtype);
  // Moves every parameter and buffer to a device in place, as to(dtype) does (the same handles, so
  // an optimizer built before holds the moved tensors; gradients are dropped). Where the first
  // parameter (or buffer) lives: device().
  void to(Device device);
  Device device() const;

  // State dict: the parameters by name (the same tensors, sharing storage). load_state_dict
  // copies values in (onto each parameter's device: loading a file into a model on a GPU copies
  // there); with strict, a missing or unexpected name is an error; a wrong shape always is.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd, bool strict = true);

  // A table: every parameter's name, shape, count and whether it trains, then the totals.
  std::string summary() const;
  virtual std::string type_name() const { return "Module"; }

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, NamedTensors& out, std::vector<const TensorImpl*>& seen) const;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Parameters registered while a guard lives are stored in its dtype (float32 by default), as
// torch.set_default_dtype around a model's construction: a model built under
// ParameterDTypeGuard(kBFloat16) is never held whole in float32 (each parameter is converted as it
// is registered), so a bfloat16 checkpoint loaded into it takes about the file's size. Per thread.
class ParameterDTypeGuard {
 public:
  explicit ParameterDTypeGuard(DType dtype);
  ~ParameterDTypeGuard();
  ParameterDTypeGuard(const ParameterDTypeGuard&) = delete;
  ParameterDTypeGuard& operator=(const ParameterDTypeGuard&) = delete;
  static DType current();

 private:
  DType prev_;
};

// An indexed list of modules, named "0", "1", ... (as torch.nn.ModuleList).
template <class M>
class ModuleList : public Module {
 public:
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    items_.push_back(m);
    add_child(std::to_string(items_.size() - 1), m);
    return m;
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<M>& operator[](size_t i) const { return items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace tg
