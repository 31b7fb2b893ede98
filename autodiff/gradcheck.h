#pragma once
// Checks analytical gradients against central finite differences, in float64.
//
//   auto r = tg::gradcheck([](const std::vector<Tensor>& in) { return tg::tanh(in[0] * in[1]); },
//                          {x, y});   // x, y: float64 leaves with requires_grad
//   if (!r.ok) fmt::print("{}\n", r.report);
#include <functional>
#include <string>
#include <vector>

#include "../graph/tensor.h"

namespace tg {

struct GradcheckOptions {
  double eps = 1e-6;    // finite-difference step
  double atol = 1e-5;
  double rtol = 1e-3;
};
struct GradcheckResult {
  bool ok = true;
  std::string report;   // the first mismatches: input, element, analytical vs numerical
  double max_abs_error = 0;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Compares the full Jacobian of fn (any output shape) with respect to every input that requires
// grad. Inputs must be float64; they may be on a GPU (the Jacobians are read back to the host,
// each perturbation written to the device in place).
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

// Checks second derivatives: the gradient of sum(fn(inputs) * v) (v fixed, random) with respect
// to the inputs, computed with create_graph, is itself checked by gradcheck.
GradcheckResult gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

}  // namespace tg
