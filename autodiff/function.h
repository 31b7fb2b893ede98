#pragma once
// Custom ops from user code, without touching the library: compute the output with any code
// (raw loops, other libraries, tg ops under NoGradGuard), then attach a backward with
// tg::record, exactly as the built-in ops do:
//
//   Tensor softplus(const Tensor& x) {
//     Tensor y = Tensor::empty(x.shape(), x.dtype());
//     ... fill y from x.data<double>() ...
//     return tg::record("softplus", y, {x}, [x](const Tensor& g, const tg::Node&) {
//       return tg::Grads{g * tg::sigmoid(x)};   // written with tg ops: differentiable again
//     });
//   }
//
// The backward receives the output's gradient and the node (node.needs(i) tells which inputs
// want a gradient; node.output() is the op's output when record(..., save_output=true)).
// It returns one gradient per input (an undefined Tensor for "none"), shaped like that input.
// node.grad_sink(i), where defined (for a node that asked: out.grad_fn()->take_grad_sinks()), is
// the gradient already gathered for input i: the backward may add its own into it in place and
// return it (graph/node.h).
// Check it with tg::gradcheck.
#include "../graph/node.h"
