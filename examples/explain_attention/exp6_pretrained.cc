// Experiment 6: frozen pretrained word2vec vectors as the English->German model's input
// embeddings, vs fine-tuned ones, vs experiment 4's table learned from random initialisation.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {
// Sets the model's source embedding from the word2vec vectors, scaled to the RMS of the random
// initialisation (the transformer multiplies embeddings by sqrt(d_model)); words word2vec lacks
// and the special tokens keep their random rows. Returns how many rows came from word2vec.
int64_t embed_from_word2vec(tg::Transformer& m, const tg::Word2Vec& w2v, const tg::text::Tokenizer& vocab, int64_t width) {
  tg::NoGradGuard ng;
  Tensor table = m.src_embed->weight.detach();
  std::vector<float> init = table.to_vector<float>();
  const std::vector<float> w = w2v.vectors().to_vector<float>();
  double init_ss = 0, w_ss = 0;
  for (float x : init) init_ss += double(x) * x;
  std::vector<std::pair<int64_t, int64_t>> rows;  // (table row, word2vec row)
  for (int64_t id = 4; id < vocab.size(); ++id)
    if (int64_t j = w2v.vocab().id(vocab.token(id)); j >= 0) rows.emplace_back(id, j);
  for (auto [id, j] : rows)
    for (int64_t k = 0; k < width; ++k) w_ss += double(w[j * width + k]) * w[j * width + k];
  const double scale = std::sqrt(init_ss / static_cast<double>(init.size())) /
                       std::sqrt(w_ss / static_cast<double>(std::max<size_t>(1, rows.size()) * width));
  for (auto [id, j] : rows)
    for (int64_t k = 0; k < width; ++k) init[id * width + k] = static_cast<float>(w[j * width + k] * scale);
  table.copy_(tg::from_vector(init, table.shape()).to(table.device()));
  return static_cast<int64_t>(rows.size());
}
}  // namespace

void exp6_pretrained(Context& ctx, tg::report::Html& html) {
  TG_CHECK(ctx.w2v && !ctx.en_de_runs.empty(), "explain_attention",
           "experiment 6 uses experiment 4's word2vec and English->German models: run experiment 4 first");
  const int64_t width = ctx.opt.width;
  int64_t covered = 0;
  const std::vector<Run> fr = train_seeds(ctx, ctx.en_de, "en_de_w2v_frozen", [&](tg::Transformer& m) {
    covered = embed_from_word2vec(m, *ctx.w2v, *ctx.english, width);
    m.freeze_parameter("src_embed.weight");
  });
  const std::vector<Run> tu = train_seeds(ctx, ctx.en_de, "en_de_w2v_tuned",
                                          [&](tg::Transformer& m) { embed_from_word2vec(m, *ctx.w2v, *ctx.english, width); });
  const Stat learned = valid_losses(ctx.en_de_runs), frozen = valid_losses(fr), tuned = valid_losses(tu);
  ctx.headline("exp6", "learned", "valid_loss", learned);
  ctx.headline("exp6", "w2v_frozen", "valid_loss", frozen);
  ctx.headline("exp6", "w2v_tuned", "valid_loss", tuned);
  const int64_t all = ctx.en_de_models[0]->num_parameters(true), table = ctx.en_de_models[0]->src_embed->weight.numel();

  html.heading("6. Frozen pretrained word2vec embeddings vs learned ones", 2, "exp6");
  html.paragraph(fmt::format(
      "The English->German model of experiment 4 again, three ways: its source embedding table learned from random "
      "initialisation; set from the word2vec vectors above ({} of its {} words; the rest and the special tokens keep random "
      "rows) and frozen; set from them and trained further. Everything else is identical: seeds, data order, {}.",
      covered, ctx.english->size() - 4, ctx.budget()));
  html.table({"source embedding", "validation loss (nats/token)", "trainable parameters"},
             {{"learned from random", show(learned), std::to_string(all)},
              {"word2vec, frozen", show(frozen), std::to_string(all - table)},
              {"word2vec, fine-tuned", show(tuned), std::to_string(all)}});
  html.line_chart("training loss (English->German, mean over the seeds)",
                  {{"learned", mean_curve(ctx.en_de_runs)}, {"word2vec frozen", mean_curve(fr)}, {"word2vec fine-tuned", mean_curve(tu)}},
                  {.x_label = "step", .y_label = "nats/token"});
  const std::string vs_frozen = verdict("learned", learned, "word2vec frozen", frozen, "nats", ctx.budget());
  const std::string vs_tuned = verdict("learned", learned, "word2vec fine-tuned", tuned, "nats", ctx.budget());
  // What the comparison says, in one phrase: pretrained (the better of frozen and fine-tuned) against learned.
  const Stat& pre = frozen.mean() < tuned.mean() ? frozen : tuned;
  const std::string finding =
      separated(learned, pre) ? (pre.mean() < learned.mean() ? "Yes, measurably at this budget, though they come from the same small text"
                                                             : "No: the table learned from random initialisation does better")
                              : "Not measurably at this budget";
  html.paragraph("Learned vs frozen word2vec: " + vs_frozen + " Learned vs fine-tuned word2vec: " + vs_tuned +
                 " Here word2vec saw only the translator's own English sentences" +
                 (ctx.opt.w2v_text.empty() ? "" : " and --w2v_text") +
                 ": its vectors were made for predicting neighbours, not for translating, and know only what this text "
                 "holds. Pretrained vectors pay off most when they come from much more text than the task has.");
  ctx.answers.push_back({"Do pretrained word vectors help the transformer?",
                         fmt::format("{}: validation loss {} learned, {} with word2vec frozen, {} fine-tuned ({}).", finding,
                                     show(learned), show(frozen), show(tuned), ctx.budget()),
                         "exp6", "experiment 6"});
  log_result(ctx, "exp6", {{"learned", learned.mean()}, {"w2v_frozen", frozen.mean()}, {"w2v_tuned", tuned.mean()}});
  std::printf("experiment 6: validation loss learned %s, word2vec frozen %s, word2vec fine-tuned %s\n", show(learned).c_str(),
              show(frozen).c_str(), show(tuned).c_str());
}

}  // namespace explain
