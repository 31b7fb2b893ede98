// Experiment 5: an embedding lookup is a one-hot vector times the table — the same output and the
// same gradient, computed both ways in float64.
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

void exp5_one_hot(Context& ctx, tg::report::Html& html) {
  tg::manual_seed(ctx.opt.seed);
  Tensor W1 = tg::randn({10, 4}, tg::kFloat64).requires_grad_();
  Tensor W2 = W1.detach().clone().requires_grad_();
  Tensor ids = tg::tensor({3, 7, 3}).to(tg::kInt64);
  Tensor one_hot = tg::eq(ids.unsqueeze(1), tg::arange(10).unsqueeze(0)).to(tg::kFloat64);  // [3, 10]
  Tensor a = tg::embedding(W1, ids), b = tg::matmul(one_hot, W2);
  Tensor g = tg::randn({3, 4}, tg::kFloat64);
  (a * g).sum().backward();
  (b * g).sum().backward();
  tg::NoGradGuard ng;
  const double out_diff = tg::amax(tg::abs(a - b)).item(), grad_diff = tg::amax(tg::abs(W1.grad() - W2.grad())).item();

  ctx.headline("exp5", "lookup_vs_one_hot", "output_difference", {{out_diff}});
  ctx.headline("exp5", "lookup_vs_one_hot", "gradient_difference", {{grad_diff}});
  ctx.answers.push_back({"Is an embedding lookup just a matrix product?",
                         fmt::format("Yes: embedding(W, ids) equals one_hot(ids) @ W, output and gradient (largest "
                                     "differences {:.1e} and {:.1e}, in float64); the lookup is only the cheap way to "
                                     "compute it, and the table is trained like any weight.",
                                     out_diff, grad_diff),
                         "exp5", "experiment 5"});
  html.heading("5. An embedding lookup is a one-hot vector times the table", 2, "exp5");
  html.table({"", "embedding(W, ids)", "one_hot(ids) @ W", "largest difference"},
             {{"output [3, 4]", fmt::format("{:.6f} ...", a.to_vector<double>()[0]),
               fmt::format("{:.6f} ...", b.to_vector<double>()[0]), fmt::format("{:.1e}", out_diff)},
              {"gradient of W [10, 4]", "rows 3 (twice) and 7 only", "rows 3 (twice) and 7 only", fmt::format("{:.1e}", grad_diff)}});
  html.paragraph("The lookup is the matrix product with the one-hot rows; it is computed as a row copy because the product "
                 "would cost V times more. Its gradient adds into the used rows only: that is why the embedding table is an "
                 "ordinary parameter trained by the same backward pass.");
  log_result(ctx, "exp5", {{"output_difference", out_diff}, {"gradient_difference", grad_diff}});
  std::printf("experiment 5: lookup vs one-hot product: output difference %.1e, gradient difference %.1e\n", out_diff, grad_diff);
}

}  // namespace explain
