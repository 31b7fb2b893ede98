// Experiment 7: heads start different because each has its own randomly initialised slices of
// W_Q, W_K, W_V, and they learn different patterns: encoder layer 0's maps on one held-out
// sentence, at initialisation and after experiment 1's training.
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {
std::vector<tg::report::Heatmap> maps_of(const Tensor& w, const std::string& when, const std::vector<std::string>& labels) {
  const int64_t H = w.size(1), S = w.size(2);  // w [1, H, S, S]
  const std::vector<float> v = w.to_vector<float>();
  std::vector<tg::report::Heatmap> maps;
  for (int64_t h = 0; h < H; ++h) {
    tg::report::Heatmap m{fmt::format("{} head {}", when, h), {}, labels, labels};
    for (int64_t i = 0; i < S; ++i) m.w.emplace_back(v.begin() + (h * S + i) * S, v.begin() + (h * S + i + 1) * S);
    maps.push_back(std::move(m));
  }
  return maps;
}

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
  TG_CHECK(ctx.learned && ctx.heads_init.defined(), "explain_attention",
           "experiment 7 uses experiment 1's model: run experiment 1 first");
  const Tensor trained = encoder_attention(*ctx.learned, ctx.probe());
  std::vector<std::string> labels;
  for (int64_t id : ctx.probe()) labels.push_back(ctx.german->label(id));
  const double at_init = head_similarity(ctx.heads_init), after = head_similarity(trained);

  html.heading("7. Heads start different, and learn different patterns");
  html.paragraph(fmt::format("Encoder layer 0 on \"{}\". Every head has its own W_Q, W_K, W_V slices, drawn at random: "
                             "at initialisation their maps already differ (mean cosine between heads {:.3f}); after {} "
                             "steps of the same gradient descent they have moved to different patterns (mean cosine {:.3f}).",
                             ctx.german->decode(ctx.probe()), at_init, ctx.opt.steps, after));
  html.heatmap_grid("at initialisation", maps_of(ctx.heads_init, "init", labels));
  html.heatmap_grid(fmt::format("after {} steps", ctx.opt.steps), maps_of(trained, "trained", labels));
  log_result(ctx, "exp7", {{"head_cosine_init", at_init}, {"head_cosine_trained", after}});
  std::printf("experiment 7: mean cosine between heads %.3f at initialisation, %.3f after training\n", at_init, after);
}

}  // namespace explain
