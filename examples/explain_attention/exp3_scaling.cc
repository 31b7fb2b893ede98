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
  TG_CHECK(!ctx.learned_runs.empty(), "explain_attention", "experiment 3 compares with experiment 1's models: run experiment 1 first");
  const int64_t dk = 64, T = 32, B = 8;
  // [0]: scaled, [1]: unscaled; each measured on the random q, k, v of every seed.
  Stat entropy[2], largest[2], grad[2], share[2];
  for (uint64_t seed : ctx.seeds()) {
    tg::manual_seed(seed);
    Tensor q = tg::randn({B, T, dk}, tg::kFloat64), k = tg::randn({B, T, dk}, tg::kFloat64), v = tg::randn({B, T, dk}, tg::kFloat64);
    Tensor g = tg::randn({B, T, dk}, tg::kFloat64);
    for (int u = 0; u < 2; ++u) {
      const double scale = u == 0 ? 1.0 / std::sqrt(static_cast<double>(dk)) : 1.0;
      // The same computation as scaled_dot_product_attention, with the scores kept as a leaf so
      // that the gradient reaching them through the softmax can be measured.
      Tensor scores = (tg::matmul(q, k, false, true) * scale).detach().requires_grad_();
      Tensor w = tg::softmax(scores, -1);
      (tg::matmul(w, v) * g).sum().backward();
      tg::NoGradGuard ng;
      entropy[u].values.push_back(mean_entropy(w));
      largest[u].values.push_back(tg::mean(tg::amax(w, {-1})).item());
      grad[u].values.push_back(norm(scores.grad()));
      share[u].values.push_back(top3_share(w, scores.grad(), B * T, T));
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (int u = 0; u < 2; ++u) {
    rows.push_back({u == 1 ? "no scaling: softmax(QK^T)" : "softmax(QK^T / sqrt(64))", show(entropy[u], 3),
                    fmt::format("{:.3f}", std::log(static_cast<double>(T))), show(largest[u], 3), show(grad[u], 1),
                    show(share[u], 0, 100) + " %"});
    const std::string which = u == 1 ? "unscaled" : "scaled";
    log_result(ctx, "exp3", {{which + "_entropy", entropy[u].mean()}, {which + "_largest_weight", largest[u].mean()},
                             {which + "_score_grad_norm", grad[u].mean()}, {which + "_top3_share", share[u].mean()}});
    ctx.headline("exp3", "random_" + which, "row_entropy", entropy[u]);
    ctx.headline("exp3", "random_" + which, "top3_gradient_share", share[u]);
  }
  const std::vector<Run> un = train_seeds(ctx, ctx.de_en, "unscaled", [](tg::Transformer& m) { set_attention_scale(m, 1.0); });
  const Stat scaled_loss = valid_losses(ctx.learned_runs), unscaled_loss = valid_losses(un);
  ctx.headline("exp3", "translation_scaled", "valid_loss", scaled_loss);
  ctx.headline("exp3", "translation_unscaled", "valid_loss", unscaled_loss);
  const std::string trained = verdict("the scaled model", scaled_loss, "the unscaled one", unscaled_loss, "nats", ctx.budget());
  const std::string in_translator =
      separated(scaled_loss, unscaled_loss)
          ? fmt::format("the translator trains {} without it ({} against {} nats after {}, every seed apart)",
                        unscaled_loss.mean() > scaled_loss.mean() ? "worse" : "better", show(unscaled_loss, 3), show(scaled_loss, 3),
                        ctx.budget())
          : fmt::format("in the translator the difference is not measurable after {}", ctx.budget());
  ctx.answers.push_back(
      {"Why divide by sqrt(d_k)?",
       fmt::format("q·k of d_k = 64 unit-variance entries has variance 64: unscaled, the softmax starts almost one-hot (row "
                   "entropy {} nats against {} scaled; uniform is {:.2f}) and {} of the gradient reaching the scores lands on "
                   "the three keys already picked ({} scaled), so the others hardly learn; {}.",
                   show(entropy[1], 2), show(entropy[0], 2), std::log(static_cast<double>(T)), show(share[1], 0, 100) + " %",
                   show(share[0], 0, 100) + " %", in_translator),
       "exp3", "experiment 3"});

  html.heading("3. Why divide by sqrt(d_k)", 2, "exp3");
  html.paragraph(fmt::format(
      "Random q, k and v with unit-variance entries, d_k = 64, 32 keys, drawn once per seed ({} seed{}): q.k has variance 64, "
      "so without the scaling the scores spread 8 times wider and the softmax starts almost one-hot. The table shows what "
      "that does: the row entropy collapses, and the gradient reaching the scores concentrates on the few keys a query "
      "already picked (see the last column), so the other keys get almost no signal to become relevant; the gradient's "
      "total size barely changes. The training curves below compare the two in a real model.",
      ctx.opt.seeds, ctx.opt.seeds == 1 ? "" : "s"));
  html.table({"attention", "mean row entropy (nats)", "uniform would be", "mean largest weight", "||dL/dscores||",
              "share of |dL/dscores| on the 3 heaviest keys"},
             rows);
  html.line_chart("training loss, with and without 1/sqrt(d_k) (mean over the seeds)",
                  {{"softmax(QK^T/sqrt(d_k)) V", mean_curve(ctx.learned_runs)}, {"softmax(QK^T) V", mean_curve(un)}},
                  {.x_label = "step", .y_label = "nats/token"});
  html.paragraph(fmt::format("Validation loss: {} with the scaling, {} without (d_k = {}). ", show(scaled_loss), show(unscaled_loss),
                             ctx.opt.width / ctx.opt.heads) +
                 trained);
  log_result(ctx, "exp3", {{"scaled_valid_loss", scaled_loss.mean()}, {"unscaled_valid_loss", unscaled_loss.mean()}});
  std::printf("experiment 3: validation loss with 1/sqrt(d_k) %s, without %s\n", show(scaled_loss).c_str(), show(unscaled_loss).c_str());
}

}  // namespace explain
