#include "autodiff/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "autodiff/engine.h"
#include "graph/factory.h"
#include "graph/format.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {

namespace {
// A one-hot host vector as a tensor of `like`'s shape on its device (the analytical Jacobian's probe).
Tensor one_hot_like(const Tensor& like, int64_t o) {
  Tensor v = zeros(like.shape(), kFloat64);
  v.data<double>()[o] = 1.0;
  return v.to(like.device());
}

// Sets element j of an input to `value`, in place: directly on the CPU; on a GPU the host copy of
// its values goes back through copy_ (not recorded).
void set_element(const Tensor& t, std::vector<double>& host, int64_t j, double value) {
  host[static_cast<size_t>(j)] = value;
  if (!t.is_cuda()) {
    t.data<double>()[j] = value;
    return;
  }
  NoGradGuard ng;
  Tensor(t).copy_(from_vector(host, t.shape(), kFloat64).to(t.device()));
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts) {
  std::vector<Tensor> diff;  // inputs that require grad
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(inputs[i].defined(), "gradcheck", "input {} is undefined", i);
    if (!inputs[i].requires_grad()) continue;
    TG_CHECK(inputs[i].dtype() == kFloat64, "gradcheck", "input {} has dtype {}; gradcheck needs float64 inputs "
             "(finite differences in float32 are too coarse)", i, inputs[i].dtype());
    diff.push_back(inputs[i]);
  }
  TG_CHECK(!diff.empty(), "gradcheck", "no input requires grad");
  Tensor out = fn(inputs);
  TG_CHECK(out.dtype() == kFloat64, "gradcheck", "the function returned {}, expected float64", out.dtype());
  const int64_t m = out.numel();
  GradcheckResult res;
  int reported = 0;
  auto note = [&](std::string line) {
    res.ok = false;
    if (reported++ < 8) res.report += line + "\n";
  };
  // Analytical Jacobian, one output element at a time: rows[o][input] = d out[o] / d input.
  std::vector<std::vector<std::vector<double>>> analytic(static_cast<size_t>(m));
  if (out.requires_grad()) {
    for (int64_t o = 0; o < m; ++o) {
      std::vector<Tensor> g = grad({out}, diff, {one_hot_like(out, o)}, {.retain_graph = true, .allow_unused = true});
      for (size_t k = 0; k < diff.size(); ++k)
        analytic[o].push_back(g[k].defined() ? g[k].to_vector<double>() : std::vector<double>(diff[k].numel(), 0.0));
    }
  } else {
    for (int64_t o = 0; o < m; ++o)
      for (const Tensor& d : diff) analytic[o].push_back(std::vector<double>(d.numel(), 0.0));
  }
  // Numerical Jacobian, perturbing one input element at a time. Grad mode stays as it is: fn
  // may itself take gradients (gradgradcheck); the graphs it records are simply dropped.
  for (size_t k = 0; k < diff.size(); ++k) {
    std::vector<double> host = diff[k].to_vector<double>();
    for (int64_t j = 0; j < diff[k].numel(); ++j) {
      const double saved = host[static_cast<size_t>(j)];
      set_element(diff[k], host, j, saved + opts.eps);
      std::vector<double> plus = fn(inputs).to_vector<double>();
      set_element(diff[k], host, j, saved - opts.eps);
      std::vector<double> minus = fn(inputs).to_vector<double>();
      set_element(diff[k], host, j, saved);
      for (int64_t o = 0; o < m; ++o) {
        double num = (plus[o] - minus[o]) / (2 * opts.eps);
        double ana = analytic[o][k][j];
        double err = std::fabs(num - ana);
        res.max_abs_error = std::max(res.max_abs_error, err);
        if (!(err <= opts.atol + opts.rtol * std::fabs(num)))
          note(fmt::format("input {} element {}, output element {}: analytical {:.8g} vs numerical {:.8g}", k, j, o, ana, num));
      }
    }
  }
  if (!res.ok) res.report = fmt::format("gradcheck failed (output shape {}):\n", out.shape()) + res.report;
  return res;
}

GradcheckResult gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts) {
  Tensor probe;
  {
    NoGradGuard ng;
    probe = fn(inputs);
  }
  Tensor v = randn(probe.shape(), kFloat64).to(probe.device());
  GradcheckFn first = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> diff;
    for (const Tensor& t : in)
      if (t.requires_grad()) diff.push_back(t);
    Tensor out = fn(in);
    std::vector<Tensor> gs = grad({out}, diff, {v}, {.create_graph = true, .allow_unused = true});
    // Concatenate the gradients into one vector output (as sum of flattened pieces).
    std::vector<Tensor> parts;
    for (size_t i = 0; i < gs.size(); ++i)
      parts.push_back(gs[i].defined() ? gs[i].reshape({diff[i].numel()}) : zeros({diff[i].numel()}, kFloat64, diff[i].device()));
    return concat(parts, 0);
  };
  return gradcheck(first, inputs, opts);
}

}  // namespace tg
