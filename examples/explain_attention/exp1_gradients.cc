// Experiment 1: W_Q, W_K, W_V are ordinary parameters. The German->English baseline trains with
// two trainer callbacks: on_grad_ready sees each watched parameter once its gradient for the step
// is complete (before the optimizer touches it), on_step runs after the update. Their norms, every
// 5 steps, show that the projections get gradients and updates of the same kind as the embedding
// table and the FFN. The trained model stays in the context for experiments 2, 3 and 7.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common.h"

namespace explain {

void exp1_gradients(Context& ctx, tg::report::Html& html) {
  struct Watched {
    std::string name, label, key;  // parameter, legend, metrics.jsonl
  };
  const std::vector<Watched> watched = {{"encoder.layers.0.self_attn.w_q.weight", "W_Q (enc. layer 0)", "w_q"},
                                        {"encoder.layers.0.self_attn.w_k.weight", "W_K (enc. layer 0)", "w_k"},
                                        {"encoder.layers.0.self_attn.w_v.weight", "W_V (enc. layer 0)", "w_v"},
                                        {"src_embed.weight", "source embedding", "src_embed"},
                                        {"encoder.layers.0.ffn.linear1.weight", "FFN W_1 (enc. layer 0)", "ffn_w1"}};
  std::map<std::string, Curve> grad_norms, update_sizes;
  std::map<std::string, std::pair<double, tg::Tensor>> pending;  // name -> (||summed gradient||, W before the update)

  ctx.learned = new_model(ctx, ctx.de_en);
  std::map<std::string, tg::Tensor> params;
  for (const auto& [name, p] : ctx.learned->named_parameters())
    if (std::any_of(watched.begin(), watched.end(), [&name = name](const auto& w) { return w.name == name; })) params[name] = p;
  ctx.heads_init = encoder_attention(*ctx.learned, ctx.probe());  // for experiment 7
  auto recorded = [](int64_t step) { return step == 1 || step % 5 == 0; };
  ctx.learned_run = train(ctx, *ctx.learned, ctx.de_en, "learned", [&](tg::train::Trainer& trainer) {
    trainer.callbacks.on_grad_ready = [&](const std::string& name, const tg::Tensor& p) {
      if (!recorded(trainer.state().step + 1) || !params.count(name)) return;
      pending[name] = {norm(p.grad()), p.detach().clone()};
    };
    trainer.callbacks.on_step = [&](const tg::train::StepInfo& info) {
      tg::NoGradGuard ng;
      const double step = static_cast<double>(info.step);
      for (auto& [name, before] : pending) {
        // The loop divides the summed gradient by the step's token count before the update: the
        // norm of the mean gradient, which is what the optimizer sees.
        grad_norms[name].emplace_back(step, before.first / info.count);
        update_sizes[name].emplace_back(step, norm(params.at(name) - before.second));
      }
      pending.clear();
    };
  });
  // Every recorded step: one "grad_norm" and one "update_size" line with a value per parameter.
  for (size_t i = 0; i < grad_norms[watched[0].name].size(); ++i) {
    std::vector<std::pair<std::string, double>> g, u;
    for (const auto& w : watched) {
      g.emplace_back(w.key, grad_norms[w.name].at(i).second);
      u.emplace_back(w.key, update_sizes[w.name].at(i).second);
    }
    const auto step = static_cast<int64_t>(grad_norms[watched[0].name][i].first);
    ctx.metrics->log("grad_norm", step, g).or_throw();
    ctx.metrics->log("update_size", step, u).or_throw();
  }

  html.heading("1. W_Q, W_K and W_V are ordinary parameters");
  html.paragraph("One loss.backward() gives every parameter its gradient; one opt.step() (AdamW) updates them all. Below, the "
                 "gradient norm and the size of each update of encoder layer 0's W_Q, W_K, W_V, beside the source embedding table "
                 "and the same layer's first FFN matrix: the same machinery, numbers of the same kind.");
  std::vector<tg::report::Series> gs, us;
  for (const auto& w : watched) gs.push_back({w.label, grad_norms[w.name]}), us.push_back({w.label, update_sizes[w.name]});
  html.line_chart("gradient norm ||dL/dW||", gs, {.x_label = "step", .y_label = "L2 norm of the mean gradient", .log_y = true});
  html.line_chart("update size ||W_after - W_before||", us, {.x_label = "step", .y_label = "L2 norm of the change", .log_y = true});
}

}  // namespace explain
