#pragma once
// fmt::print("{}", t) prints a tensor in PyTorch's layout:
//   tensor([[ 0.5000, -1.2500],
//           [ 3.0000,  4.0000]], requires_grad=true)
// Large tensors (over 1000 elements) show the first and last 3 entries of each dimension.
#include <string>

#include <fmt/core.h>

#include "tensor.h"

namespace tg {
std::string to_string(const Tensor& t);
}

template <>
struct fmt::formatter<tg::Tensor> : tg::detail::StringFormatter {
  template <class Ctx>
  auto format(const tg::Tensor& t, Ctx& ctx) const { return write(tg::to_string(t), ctx); }
};
