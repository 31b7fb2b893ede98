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
  table.copy_(tg::from_vector(init, table.shape()));
  return static_cast<int64_t>(rows.size());
}
}  // namespace

void exp6_pretrained(Context& ctx, tg::report::Html& html) {
  TG_CHECK(ctx.w2v && ctx.en_de_model, "explain_attention",
           "experiment 6 uses experiment 4's word2vec and English->German model: run experiment 4 first");
  const int64_t width = ctx.opt.width;
  auto frozen = new_model(ctx, ctx.en_de);
  const int64_t covered = embed_from_word2vec(*frozen, *ctx.w2v, *ctx.english, width);
  frozen->freeze_parameter("src_embed.weight");
  const Run fr = train(ctx, *frozen, ctx.en_de, "en_de_w2v_frozen");
  auto tuned = new_model(ctx, ctx.en_de);
  embed_from_word2vec(*tuned, *ctx.w2v, *ctx.english, width);
  const Run tu = train(ctx, *tuned, ctx.en_de, "en_de_w2v_tuned");
  const double learned = ctx.en_de_run.valid_loss;

  html.heading("6. Frozen pretrained word2vec embeddings vs learned ones");
  html.paragraph(fmt::format(
      "The English->German model of experiment 4 again, three ways: its source embedding table learned from random "
      "initialisation; set from the word2vec vectors above ({} of its {} words; the rest and the special tokens keep random "
      "rows) and frozen; set from them and trained further. Everything else is identical: seed, data order, {} steps.",
      covered, ctx.english->size() - 4, ctx.opt.steps));
  html.table({"source embedding", "validation loss (nats/token)", "trainable parameters"},
             {{"learned from random", fmt::format("{:.4f}", learned), std::to_string(ctx.en_de_model->num_parameters(true))},
              {"word2vec, frozen", fmt::format("{:.4f}", fr.valid_loss), std::to_string(frozen->num_parameters(true))},
              {"word2vec, fine-tuned", fmt::format("{:.4f}", tu.valid_loss), std::to_string(tuned->num_parameters(true))}});
  html.line_chart("training loss (English->German)",
                  {{"learned", ctx.en_de_run.train_loss}, {"word2vec frozen", fr.train_loss}, {"word2vec fine-tuned", tu.train_loss}},
                  {.x_label = "step", .y_label = "nats/token"});
  const double best = std::min({learned, fr.valid_loss, tu.valid_loss});
  const double spread = std::max({learned, fr.valid_loss, tu.valid_loss}) - best;
  html.paragraph(fmt::format("The three losses lie within {:.3f} nats. ", spread) +
                 (best == learned
                      ? "Here the learned table does best: word2vec trained on the same few sentences knows nothing the "
                        "translator cannot learn itself, and its vectors were made for predicting neighbours, not for "
                        "translating. Pretrained vectors pay off when they come from much more text than the task has "
                        "(--w2v_text adds some)."
                  : best == fr.valid_loss
                      ? "Here the frozen word2vec table does best: it starts the encoder from vectors that already "
                        "place related words together, and freezing them leaves fewer parameters to fit."
                      : "Here starting from word2vec and training further does best: the vectors give the encoder a "
                        "head start, and training adapts them to translation."));
  log_result(ctx, "exp6", {{"learned", learned}, {"w2v_frozen", fr.valid_loss}, {"w2v_tuned", tu.valid_loss}});
  std::printf("experiment 6: validation loss learned %.4f, word2vec frozen %.4f, word2vec fine-tuned %.4f\n", learned,
              fr.valid_loss, tu.valid_loss);
}

}  // namespace explain
