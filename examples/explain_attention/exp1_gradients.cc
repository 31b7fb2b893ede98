// Experiment 1: W_Q, W_K, W_V are ordinary parameters. The German->English baseline trains with
// two trainer callbacks: on_grad_ready sees each watched parameter once its gradient for the step
// is complete (before the optimizer touches it), on_step runs after the update. Their norms, every
// 5 steps, show that the projections get gradients and updates of the same kind as the embedding
// table and the FFN. The trained models (one per seed) stay in the context for experiments 2, 3 and 7.
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
  std::map<std::string, Curve> grad_norms, update_sizes;  // the first seed's, for the charts
  std::map<std::string, Stat> mean_grad;                  // per parameter: its mean gradient norm over the run, per seed
  for (uint64_t seed : ctx.seeds()) {
    const bool first = ctx.learned.empty();
    auto model = new_model(ctx.de_en, ctx.opt, seed);
    std::map<std::string, tg::Tensor> params;
    for (const auto& [name, p] : model->named_parameters())
      if (std::any_of(watched.begin(), watched.end(), [&name = name](const auto& w) { return w.name == name; })) params[name] = p;
    ctx.heads_init.push_back(encoder_attention(*model, ctx.probe()));  // for experiment 7
    std::map<std::string, std::pair<double, tg::Tensor>> pending;  // name -> (||summed gradient||, W before the update)
    std::map<std::string, Curve> g_seed, u_seed;
    auto recorded = [](int64_t step) { return step == 1 || step % 5 == 0; };
    ctx.learned_runs.push_back(train(ctx, *model, ctx.de_en, "learned", seed, [&](tg::train::Trainer& trainer) {
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
          g_seed[name].emplace_back(step, before.first / info.count);
          u_seed[name].emplace_back(step, norm(params.at(name) - before.second));
        }
        pending.clear();
      };
    }));
    ctx.learned.push_back(std::move(model));
    for (const auto& w : watched) {
      double sum = 0;
      for (const auto& [step, g] : g_seed[w.name]) sum += g;
      mean_grad[w.name].values.push_back(g_seed[w.name].empty() ? 0 : sum / static_cast<double>(g_seed[w.name].size()));
    }
    if (first) grad_norms = g_seed, update_sizes = u_seed;
  }
  // Every recorded step of the first seed: one "grad_norm" and one "update_size" line with a value per parameter.
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
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : watched) {
    rows.push_back({w.label, show(mean_grad[w.name], 4)});
    ctx.headline("exp1", w.key, "mean_grad_norm", mean_grad[w.name]);
  }
  const Stat& wq = mean_grad[watched[0].name];
  const Stat& emb = mean_grad[watched[3].name];
  ctx.answers.push_back(
      {"Are W_Q, W_K and W_V trained like any other weight?",
       fmt::format("Yes. They start random, one loss.backward() gives them a gradient and one optimizer step updates them, "
                   "exactly like the embedding table: over {} the mean gradient norm of W_Q is {} against the source "
                   "embedding's {}.",
                   ctx.budget(), show(wq, 4), show(emb, 4)),
       "exp1", "experiment 1"});

  html.heading("1. W_Q, W_K and W_V are ordinary parameters", 2, "exp1");
  html.paragraph("One loss.backward() gives every parameter its gradient; one opt.step() (AdamW) updates them all. Below, the "
                 "gradient norm and the size of each update of encoder layer 0's W_Q, W_K, W_V, beside the source embedding table "
                 "and the same layer's first FFN matrix: the same machinery, numbers of the same kind (charts: the first seed; "
                 "table: the mean over the run, mean ± spread over the seeds).");
  html.table({"parameter", "mean ||dL/dW|| over the run"}, rows);
  std::vector<tg::report::Series> gs, us;
  for (const auto& w : watched) gs.push_back({w.label, grad_norms[w.name]}), us.push_back({w.label, update_sizes[w.name]});
  html.line_chart("gradient norm ||dL/dW||", gs, {.x_label = "step", .y_label = "L2 norm of the mean gradient", .log_y = true});
  html.line_chart("update size ||W_after - W_before||", us, {.x_label = "step", .y_label = "L2 norm of the change", .log_y = true});
}

}  // namespace explain
