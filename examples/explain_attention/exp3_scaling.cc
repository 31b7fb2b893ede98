// Experiment 3: why divide by sqrt(d_k). First on random q, k, v (d_k = 64, 32 keys): the entropy
// of the softmax rows and where the gradient reaching the scores goes, with and without the
// scaling. Then a translator trained without it, against experiment 1's model.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {
// The share of |dL/dscores| that falls on the three keys with the most weight, mean over rows.
double top3_share(const Tensor& w, const Tensor& grad, int64_t rows, int64_t keys) {
  const std::vector<double> wv = w.to_vector<double>(), gv = grad.to_vector<double>();
  double share = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> idx(static_cast<size_t>(keys));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(),
                      [&](int64_t a, int64_t b) { return wv[r * keys + a] > wv[r * keys + b]; });
    double top = 0, all = 0;
    for (int64_t j = 0; j < keys; ++j) all += std::fabs(gv[r * keys + j]);
    for (int j = 0; j < 3; ++j) top += std::fabs(gv[r * keys + idx[static_cast<size_t>(j)]]);
    share += all > 0 ? top / all : 0;
  }
  return share / static_cast<double>(rows);
}
}  // namespace

void exp3_scaling(Context& ctx, tg::report::Html& html) {
  TG_CHECK(ctx.learned, "explain_attention", "experiment 3 compares with experiment 1's model: run experiment 1 first");
  html.heading("3. Why divide by sqrt(d_k)");
  {
    tg::manual_seed(ctx.opt.seed);
    const int64_t dk = 64, T = 32, B = 8;
    Tensor q = tg::randn({B, T, dk}, tg::kFloat64), k = tg::randn({B, T, dk}, tg::kFloat64), v = tg::randn({B, T, dk}, tg::kFloat64);
    Tensor g = tg::randn({B, T, dk}, tg::kFloat64);
    std::vector<std::vector<std::string>> rows;
    for (double scale : {1.0 / std::sqrt(static_cast<double>(dk)), 1.0}) {
      // The same computation as scaled_dot_product_attention, with the scores kept as a leaf so
      // that the gradient reaching them through the softmax can be measured.
      Tensor scores = (tg::matmul(q, k, false, true) * scale).detach().requires_grad_();
      Tensor w = tg::softmax(scores, -1);
      (tg::matmul(w, v) * g).sum().backward();
      tg::NoGradGuard ng;
      const double entropy = mean_entropy(w), largest = tg::mean(tg::amax(w, {-1})).item(), grad = norm(scores.grad());
      const double share = top3_share(w, scores.grad(), B * T, T);
      rows.push_back({scale == 1.0 ? "no scaling: softmax(QK^T)" : "softmax(QK^T / sqrt(64))", fmt::format("{:.3f}", entropy),
                      fmt::format("{:.3f}", std::log(static_cast<double>(T))), fmt::format("{:.3f}", largest),
                      fmt::format("{:.3e}", grad), fmt::format("{:.0f}%", 100 * share)});
      const std::string which = scale == 1.0 ? "unscaled" : "scaled";
      log_result(ctx, "exp3", {{which + "_entropy", entropy}, {which + "_largest_weight", largest},
                               {which + "_score_grad_norm", grad}, {which + "_top3_share", share}});
    }
    html.paragraph("Random q, k and v with unit-variance entries, d_k = 64, 32 keys: q.k has variance 64, so without the "
                   "scaling the scores spread 8 times wider and the softmax starts almost one-hot. The table shows what that "
                   "does: the row entropy collapses, and the gradient reaching the scores concentrates on the few keys a query "
                   "already picked (see the last column), so the other keys get almost no signal to become relevant; the "
                   "gradient's total size barely changes. The training curves below compare the two in a real model.");
    html.table({"attention", "mean row entropy (nats)", "uniform would be", "mean largest weight", "||dL/dscores||",
                "share of |dL/dscores| on the 3 heaviest keys"},
               rows);
  }
  auto unscaled = new_model(ctx, ctx.de_en);
  set_attention_scale(*unscaled, 1.0);
  const Run un = train(ctx, *unscaled, ctx.de_en, "unscaled");
  html.line_chart("training loss, with and without 1/sqrt(d_k)",
                  {{"softmax(QK^T/sqrt(d_k)) V", ctx.learned_run.train_loss}, {"softmax(QK^T) V", un.train_loss}},
                  {.x_label = "step", .y_label = "nats/token"});
  html.paragraph(fmt::format("Validation loss after {} steps: {:.4f} with the scaling, {:.4f} without (d_k = {}).", ctx.opt.steps,
                             ctx.learned_run.valid_loss, un.valid_loss, ctx.opt.width / ctx.opt.heads));
  log_result(ctx, "exp3", {{"scaled_valid_loss", ctx.learned_run.valid_loss}, {"unscaled_valid_loss", un.valid_loss}});
  std::printf("experiment 3: validation loss with 1/sqrt(d_k) %.4f, without %.4f\n", ctx.learned_run.valid_loss, un.valid_loss);
}

}  // namespace explain
