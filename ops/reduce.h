#pragma once
// Reductions over any set of axes (empty = all), with keepdim.
#include <initializer_list>
#include <vector>

#include "../graph/tensor.h"

namespace tg {

using Axes = std::vector<int64_t>;

Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& x, const Axes& axes = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdim = false);
// Largest / smallest values over axes (the gradient is shared evenly between ties, as torch.amax).
Tensor amax(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Axes& axes = {}, bool keepdim = false);

// Along one axis, with the int64 index of the first extreme value, as torch.max(x, dim).
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& x, int64_t axis, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t axis, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim = false);

// Sums a broadcast gradient back to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace tg
