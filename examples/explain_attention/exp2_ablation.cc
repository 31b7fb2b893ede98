// Experiment 2: the ablation. The same translator with W_Q, W_K, W_V learned (experiment 1's
// model), fixed to the identity (Q = K = V = X), and frozen at their random initialisation.
#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "common.h"

namespace explain {

namespace {
// Freezes every W_Q, W_K, W_V (weights and biases); with identity, first sets them to I and 0.
void fix_projections(tg::Transformer& m, bool identity) {
  for (auto& [n, p] : m.named_parameters()) {
    const bool proj = n.find(".w_q.") != std::string::npos || n.find(".w_k.") != std::string::npos ||
                      n.find(".w_v.") != std::string::npos;
    if (!proj) continue;
    if (identity) {
      tg::NoGradGuard ng;
      p.detach().copy_(n.ends_with(".weight") ? tg::eye(p.size(0)) : tg::zeros(p.shape()));
    }
    m.freeze_parameter(n);
  }
}
}  // namespace

void exp2_ablation(Context& ctx, tg::report::Html& html) {
  TG_CHECK(ctx.learned, "explain_attention", "experiment 2 compares with experiment 1's model: run experiment 1 first");
  auto identity = new_model(ctx, ctx.de_en);
  fix_projections(*identity, true);
  const Run id = train(ctx, *identity, ctx.de_en, "identity");
  auto frozen = new_model(ctx, ctx.de_en);
  fix_projections(*frozen, false);
  const Run fr = train(ctx, *frozen, ctx.de_en, "frozen_random");
  const double learned = ctx.learned_run.valid_loss;

  html.heading("2. Ablation: learned vs identity vs frozen random projections");
  html.table({"W_Q, W_K, W_V", "validation loss (nats/token)", "trainable parameters"},
             {{"learned (the transformer)", fmt::format("{:.4f}", learned), std::to_string(ctx.learned->num_parameters(true))},
              {"identity: Q = K = V = X", fmt::format("{:.4f}", id.valid_loss), std::to_string(identity->num_parameters(true))},
              {"frozen at their random initialisation", fmt::format("{:.4f}", fr.valid_loss),
               std::to_string(frozen->num_parameters(true))}});
  html.line_chart("training loss",
                  {{"learned", ctx.learned_run.train_loss}, {"identity", id.train_loss}, {"frozen random", fr.train_loss}},
                  {.x_label = "step", .y_label = "nats/token"});
  const double spread = std::max({learned, id.valid_loss, fr.valid_loss}) - std::min({learned, id.valid_loss, fr.valid_loss});
  html.paragraph(fmt::format("After {} steps the three validation losses lie within {:.3f} nats of each other{}", ctx.opt.steps,
                             spread,
                             spread < 0.05 ? ": at this budget the kind of projection makes little difference yet; more "
                                             "--steps show whether the learned projections pull ahead."
                                           : "."));
  log_result(ctx, "exp2", {{"learned", learned}, {"identity", id.valid_loss}, {"frozen_random", fr.valid_loss}});
  std::printf("experiment 2: validation loss learned %.4f, identity %.4f, frozen random %.4f\n", learned, id.valid_loss,
              fr.valid_loss);
}

}  // namespace explain
