#pragma once
// NamedTensors and StateDict: tensors under names, the currency of modules, optimizers and
// checkpoint files. Below models/ and optim/, so that both can use it without knowing each other.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../graph/tensor.h"

namespace tg {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// An ordered name -> tensor map (the order is insertion order, as PyTorch's OrderedDict).
class StateDict {
 public:
  void insert(std::string name, Tensor t);          // tg::Error on a duplicate name
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const Tensor& at(const std::string& name) const;  // tg::Error naming the key when absent
  const NamedTensors& items() const { return items_; }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  NamedTensors items_;
  std::map<std::string, size_t> index_;
};

// The flat index of the first NaN or infinity in a float tensor (float32, float64, bfloat16);
// -1 when every value is finite or the dtype is not a float type. Loaders refuse such weights.
int64_t first_non_finite(const Tensor& t);
// "NaN" or "Inf" (or "-Inf"), for messages about that value.
std::string non_finite_name(const Tensor& t, int64_t index);

}  // namespace tg
