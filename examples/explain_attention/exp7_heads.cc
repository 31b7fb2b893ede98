// Experiment 7: heads start different because each has its own randomly initialised slices of
// W_Q, W_K, W_V, and they learn different patterns: encoder layer 0's maps on one held-out
// sentence, at initialisation and after experiment 1's training.
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {
// Mean pairwise cosine between the heads' maps (1: all alike).
double head_similarity(const Tensor& w) {
  tg::NoGradGuard ng;
  const int64_t H = w.size(1);
  if (H < 2) return 1;
  Tensor flat = w.reshape({H, w.numel() / H}).to(tg::kFloat64);
  Tensor unit = flat / tg::sqrt(tg::sum(flat * flat, {1}, true));
  Tensor c = tg::matmul(unit, unit, false, true);
  return (c.sum().item() - static_cast<double>(H)) / static_cast<double>(H * (H - 1));
}
}  // namespace

void exp7_heads(Context& ctx, tg::report::Html& html) {
  TG_CHECK(!ctx.learned.empty() && ctx.heads_init.size() == ctx.learned.size(), "explain_attention",
           "experiment 7 uses experiment 1's models: run experiment 1 first");
  Stat at_init, after;
  Tensor first_trained;
  for (size_t s = 0; s < ctx.learned.size(); ++s) {
    const Tensor trained = encoder_attention(*ctx.learned[s], ctx.probe());
    if (s == 0) first_trained = trained;
    at_init.values.push_back(head_similarity(ctx.heads_init[s]));
    after.values.push_back(head_similarity(trained));
  }
  std::vector<std::string> labels;
  for (int64_t id : ctx.probe()) labels.push_back(ctx.german->label(id));
  ctx.headline("exp7", "at_initialisation", "mean_head_cosine", at_init);
  ctx.headline("exp7", "trained", "mean_head_cosine", after);
  const bool apart = separated(after, at_init) && after.mean() < at_init.mean();
  const std::string change = apart ? fmt::format("after {} they are further apart ({}), on every seed", ctx.budget(), show(after, 3))
                                   : fmt::format("after {} their similarity is {}: no measurable change at this budget",
                                                 ctx.budget(), show(after, 3));

  html.heading("7. Heads start different, and learn different patterns", 2, "exp7");
  html.paragraph(fmt::format("Encoder layer 0 on \"{}\". Every head has its own W_Q, W_K, W_V slices, drawn at random: "
                             "at initialisation their maps already differ (mean cosine between heads {}); {}. The maps: the "
                             "first seed's model.",
                             ctx.german->decode(ctx.probe()), show(at_init, 3), change));
  html.heatmap_grid("at initialisation", tg::report::head_heatmaps(ctx.heads_init[0], "init", labels, labels));
  html.heatmap_grid(fmt::format("after {} steps", ctx.opt.steps), tg::report::head_heatmaps(first_trained, "trained", labels, labels));
  ctx.answers.push_back({"What do the heads do, and why do they differ?",
                         fmt::format("Each head has its own slices of W_Q, W_K, W_V, drawn at random, so the heads start "
                                     "with different maps (mean cosine between them {}); {}. The maps show what each "
                                     "attends to.",
                                     show(at_init, 3), change),
                         "exp7", "experiment 7"});
  log_result(ctx, "exp7", {{"head_cosine_init", at_init.mean()}, {"head_cosine_trained", after.mean()}});
  std::printf("experiment 7: mean cosine between heads %s at initialisation, %s after training\n", show(at_init, 3).c_str(),
              show(after, 3).c_str());
}

}  // namespace explain
