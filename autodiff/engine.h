#pragma once
// The backward engine: loss.backward() and the functional tg::grad.
#include <vector>

#include "../graph/node.h"

namespace tg {

// Accumulates d(sum of outputs * grad_outputs)/d(leaf) into every reachable leaf's .grad().
// grad_outputs may be empty for one-element outputs (taken as 1).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              BackwardOptions opts = {});

struct GradOptions {
  bool retain_graph = false;   // keep the graph for another backward (implied by create_graph)
  bool create_graph = false;   // record the backward itself, so the result can be differentiated
  bool allow_unused = false;   // an input the outputs do not depend on gets an undefined Tensor
};
// Gradients of outputs with respect to inputs (leaves or intermediate tensors), returned rather
// than accumulated into .grad(), as torch.autograd.grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions opts = {});

}  // namespace tg
