#pragma once
// Every public op with inputs it must accept, as a table (in the spirit of PyTorch's OpInfo): the
// CPU sweep (op_sweep_test.cc) feeds each op bad variants of these inputs, and the GPU suite
// (gpu/op_parity_test.cc) runs each op on a GPU against the CPU — so an op added here gets both.
#include <functional>
#include <string>
#include <vector>

#include "tapegrad.h"

namespace tg::testing {
using tg::Tensor;

struct OpInfo {
  std::string name;  // what the error message must name
  // The op on its inputs; `good` are inputs it must accept.
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<Tensor> good;
};

inline Tensor f(const tg::Shape& s) { return tg::randn(s); }
inline Tensor i64(const tg::Shape& s, int64_t hi) { return tg::randint(0, hi, s); }

inline std::vector<OpInfo> unary_ops() {
  std::vector<OpInfo> ops;
  using U = Tensor (*)(const Tensor&);
  const std::vector<std::pair<std::string, U>> table = {
      {"neg", tg::neg},       {"exp", tg::exp},       {"log", tg::log},           {"sqrt", tg::sqrt},   {"rsqrt", tg::rsqrt},
      {"abs", tg::abs},       {"sign", tg::sign},     {"square", tg::square},     {"reciprocal", tg::reciprocal},
      {"tanh", tg::tanh},     {"sigmoid", tg::sigmoid}, {"relu", tg::relu},       {"silu", tg::silu},   {"erf", tg::erf},
      {"sin", tg::sin},       {"cos", tg::cos},       {"clone", tg::clone}};
  for (const auto& [name, fn] : table) ops.push_back({name, [fn = fn](const std::vector<Tensor>& x) { return fn(x[0]); }, {f({2, 3})}});
  ops.push_back({"gelu", [](const std::vector<Tensor>& x) { return tg::gelu(x[0]); }, {f({2, 3})}});
  return ops;
}

inline std::vector<OpInfo> binary_ops() {
  std::vector<OpInfo> ops;
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<std::string, B>> table = {
      {"add", tg::add}, {"sub", tg::sub}, {"mul", tg::mul}, {"div", tg::div}, {"pow", tg::pow}, {"maximum", tg::maximum},
      {"minimum", tg::minimum}, {"eq", tg::eq}, {"ne", tg::ne}, {"lt", tg::lt}, {"le", tg::le}, {"gt", tg::gt}, {"ge", tg::ge}};
  for (const auto& [name, fn] : table)
    ops.push_back({name, [fn = fn](const std::vector<Tensor>& x) { return fn(x[0], x[1]); }, {f({2, 3}), f({3})}});
  return ops;
}

inline std::vector<OpInfo> reduction_ops() {
  using R = Tensor (*)(const Tensor&, const tg::Axes&, bool);
  std::vector<OpInfo> ops;
  const std::vector<std::pair<std::string, R>> table = {{"sum", tg::sum}, {"mean", tg::mean}, {"amax", tg::amax}, {"amin", tg::amin},
                                                       {"logsumexp", tg::logsumexp}};
  for (const auto& [name, fn] : table)
    ops.push_back({name, [fn = fn](const std::vector<Tensor>& x) { return fn(x[0], {1}, false); }, {f({2, 3})}});
  ops.push_back({"var", [](const std::vector<Tensor>& x) { return tg::var(x[0], {1}); }, {f({2, 3})}});
  ops.push_back({"argmax", [](const std::vector<Tensor>& x) { return tg::argmax(x[0], 1); }, {f({2, 3})}});
  ops.push_back({"argmin", [](const std::vector<Tensor>& x) { return tg::argmin(x[0], 1); }, {f({2, 3})}});
  ops.push_back({"softmax", [](const std::vector<Tensor>& x) { return tg::softmax(x[0], 1); }, {f({2, 3})}});
  ops.push_back({"log_softmax", [](const std::vector<Tensor>& x) { return tg::log_softmax(x[0], 1); }, {f({2, 3})}});
  return ops;
}

// Ops with their own input structure: the good inputs, and the sweep's bad inputs come from them.
inline std::vector<OpInfo> structured_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({"matmul", [](const std::vector<Tensor>& x) { return tg::matmul(x[0], x[1]); }, {f({2, 3}), f({3, 4})}});
  ops.push_back({"index_select", [](const std::vector<Tensor>& x) { return tg::index_select(x[0], 0, x[1]); }, {f({4, 3}), i64({5}, 4)}});
  ops.push_back({"gather", [](const std::vector<Tensor>& x) { return tg::gather(x[0], 1, x[1]); }, {f({4, 3}), i64({4, 2}, 3)}});
  ops.push_back({"embedding", [](const std::vector<Tensor>& x) { return tg::embedding(x[0], x[1]); }, {f({6, 3}), i64({2, 5}, 6)}});
  ops.push_back({"cross_entropy", [](const std::vector<Tensor>& x) { return tg::cross_entropy(x[0], x[1]); }, {f({4, 5}), i64({4}, 5)}});
  ops.push_back({"nll_loss", [](const std::vector<Tensor>& x) { return tg::nll_loss(x[0], x[1]); }, {tg::log_softmax(f({4, 5})), i64({4}, 5)}});
  ops.push_back({"layer_norm", [](const std::vector<Tensor>& x) { return tg::layer_norm(x[0], 1, x[1], x[2]); }, {f({4, 3}), f({3}), f({3})}});
  ops.push_back({"rms_norm", [](const std::vector<Tensor>& x) { return tg::rms_norm(x[0], x[1]); }, {f({4, 3}), f({3})}});
  ops.push_back({"rotary_embedding", [](const std::vector<Tensor>& x) { return tg::rotary_embedding(x[0], x[1], x[2]); },
                 {f({3, 4}), f({3, 2}), f({3, 2})}});
  ops.push_back({"repeat_kv", [](const std::vector<Tensor>& x) { return tg::repeat_kv(x[0], 2); }, {f({1, 2, 3, 4})}});
  ops.push_back({"dropout", [](const std::vector<Tensor>& x) { return tg::dropout(x[0], 0.3, true); }, {f({4, 300})}});
  ops.push_back({"linear", [](const std::vector<Tensor>& x) { return tg::linear(x[0], x[1], x[2], tg::Activation::kRelu); },
                 {f({4, 3}), f({5, 3}), f({5})}});
  ops.push_back({"bias_act", [](const std::vector<Tensor>& x) { return tg::bias_act(x[0], x[1], tg::Activation::kRelu); }, {f({4, 3}), f({3})}});
  ops.push_back({"masked_fill", [](const std::vector<Tensor>& x) { return tg::masked_fill(x[0], x[1], 0.0); }, {f({2, 3}), tg::gt(f({2, 3}), 0.0)}});
  ops.push_back({"where", [](const std::vector<Tensor>& x) { return tg::where(x[0], x[1], x[2]); }, {tg::gt(f({2, 3}), 0.0), f({2, 3}), f({3})}});
  ops.push_back({"concat", [](const std::vector<Tensor>& x) { return tg::concat({x[0], x[1]}, 1); }, {f({2, 3}), f({2, 2})}});
  ops.push_back({"stack", [](const std::vector<Tensor>& x) { return tg::stack({x[0], x[1]}, 0); }, {f({2, 3}), f({2, 3})}});
  ops.push_back({"binary_cross_entropy_with_logits",
                 [](const std::vector<Tensor>& x) { return tg::binary_cross_entropy_with_logits(x[0], x[1]); }, {f({4, 3}), tg::rand({4, 3})}});
  ops.push_back({"flash_attention", [](const std::vector<Tensor>& x) { return tg::flash_attention(x[0], x[1], x[2]); },
                 {f({1, 2, 4, 8}), f({1, 2, 5, 8}), f({1, 2, 5, 8})}});
  ops.push_back({"reshape", [](const std::vector<Tensor>& x) { return tg::reshape(x[0], {3, -1}); }, {f({2, 3})}});
  ops.push_back({"transpose", [](const std::vector<Tensor>& x) { return tg::transpose(x[0], 0, 1); }, {f({2, 3})}});
  ops.push_back({"permute", [](const std::vector<Tensor>& x) { return tg::permute(x[0], {1, 0}); }, {f({2, 3})}});
  ops.push_back({"slice", [](const std::vector<Tensor>& x) { return tg::slice(x[0], 1, 1, 3); }, {f({2, 3})}});
  ops.push_back({"narrow", [](const std::vector<Tensor>& x) { return tg::narrow(x[0], 1, 1, 2); }, {f({2, 3})}});
  ops.push_back({"squeeze", [](const std::vector<Tensor>& x) { return tg::squeeze(x[0], 1); }, {f({2, 1})}});
  ops.push_back({"unsqueeze", [](const std::vector<Tensor>& x) { return tg::unsqueeze(x[0], 2); }, {f({2, 3})}});
  ops.push_back({"expand", [](const std::vector<Tensor>& x) { return tg::expand(x[0], {4, 3}); }, {f({1, 3})}});
  ops.push_back({"flatten", [](const std::vector<Tensor>& x) { return tg::flatten(x[0], 0, 1); }, {f({2, 3, 4})}});
  return ops;
}

inline std::vector<OpInfo> all_ops() {
  std::vector<OpInfo> all;
  for (auto* group : {&unary_ops, &binary_ops, &reduction_ops, &structured_ops})
    for (OpInfo& op : (*group)()) all.push_back(std::move(op));
  return all;
}

}  // namespace tg::testing
