// Experiment 4, second part: the same question with a real pretrained encoder, all-MiniLM-L6-v2
// (6 layers, trained on a billion sentence pairs). An ambiguous word ("bank", "bat", "spring") in
// three sentences of each of two senses: the cosine of its vectors (the mean of its WordPiece
// pieces' hidden states) within a sense and across senses, after each layer 0..6. word2vec's one
// vector per word has cosine 1 everywhere; the encoder's vectors start as that too (layer 0 is the
// embedding, nearly context-free) and separate the senses as the layers mix in the sentence.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {

struct TwoSenses {
  const char* word;
  const char* sense[2];
  const char* sentences[2][3];
};

const TwoSenses kWords[] = {
    {"bank", {"river side", "money"},
     {{"We sat on the bank of the river.", "The boat drifted towards the muddy bank.", "Reeds grow along the bank of the stream."},
      {"I have to go to the bank to get money.", "The bank raised its interest rates.", "She opened an account at the bank."}}},
    {"bat", {"animal", "club"},
     {{"A bat flew out of the cave at dusk.", "The bat hangs upside down while it sleeps.", "The bat hunts moths at night."},
      {"He swung the bat and hit the ball.", "She bought a new cricket bat.", "The player dropped his bat and ran."}}},
    {"bears", {"animals", "carries"},
     {{"The bears slept in the cave all winter.", "We saw two bears near the lake.", "Hungry bears searched the camp for food."},
      {"She bears the pain without complaint.", "The tree bears fruit every autumn.", "He bears the responsibility for the project."}}},
    {"spring", {"season", "water or coil"},
     {{"The flowers bloom in spring.", "We plan to travel next spring.", "Spring is my favourite season."},
      {"They drank cold water from the spring.", "The spring in the old mattress was broken.", "A spring bubbled up between the rocks."}}},
    {"match", {"game", "fire"},
     {{"We won the match yesterday.", "The match ended in a draw.", "Thousands watched the football match."},
      {"He struck a match in the dark.", "She lit the candle with a match.", "The match burned down to his fingers."}}},
    {"plant", {"factory", "vegetation"},
     {{"The plant employs two hundred workers.", "They built a new power plant by the river.", "The car plant closed last year."},
      {"Water the plant once a week.", "This plant needs a lot of sunlight.", "A small green plant grew on the windowsill."}}},
    {"seal", {"animal", "closure"},
     {{"A seal was resting on the rocks.", "The seal dived after the fish.", "We watched a seal swim in the harbour."},
      {"Check the seal on the jar before buying.", "The letter had a wax seal.", "The rubber seal around the door leaks."}}},
    {"light", {"lamp", "not heavy"},
     {{"Please turn on the light.", "The light in the kitchen is broken.", "A bright light shone through the window."},
      {"This suitcase is very light.", "She carried a light bag.", "The box was light enough to lift with one hand."}}},
};

// Positions [first, end) of the word's pieces among the sentence's ids (after [CLS]).
std::pair<int64_t, int64_t> find_word(const tg::text::Tokenizer& tok, const std::vector<int64_t>& ids, const std::string& word,
                                      const std::string& sentence) {
  const std::vector<int64_t> pieces = tok.encode(word);
  auto it = std::search(ids.begin(), ids.end(), pieces.begin(), pieces.end());
  if (pieces.empty() || it == ids.end())
    throw tg::Error(fmt::format("experiment 4: '{}' is not among the pieces of \"{}\"", word, sentence));
  const auto first = static_cast<int64_t>(it - ids.begin());
  return {first, first + static_cast<int64_t>(pieces.size())};
}

}  // namespace

std::string exp4_minilm(Context& ctx, tg::report::Html& html) {
  namespace fs = std::filesystem;
  html.heading("4b. The same with a pretrained encoder: all-MiniLM-L6-v2", 3);
  if (ctx.opt.model.empty() || !fs::exists(ctx.opt.model + "/model.safetensors")) {
    html.paragraph(fmt::format("Left out: no pretrained model in '{}' (./tg.sh models fetches all-MiniLM-L6-v2).", ctx.opt.model));
    std::fprintf(stderr, "experiment 4: no model in '%s' (./tg.sh models); its MiniLM part is left out\n", ctx.opt.model.c_str());
    return "";
  }
  auto enc = tg::text::SentenceEncoder::load(ctx.opt.model).value();
  tg::BertModel& bert = enc->model();
  const tg::text::Tokenizer& tok = enc->tokenizer();
  const int64_t L = bert.cfg.layers, D = bert.cfg.hidden;
  bert.eval();
  tg::NoGradGuard ng;

  // vec[w][s][i][layer]: the word's vector in sentence i of sense s after each layer.
  const size_t nw = std::size(kWords);
  std::vector<std::vector<std::vector<std::vector<std::vector<float>>>>> vec(nw);
  for (size_t w = 0; w < nw; ++w) {
    vec[w].resize(2);
    for (int s = 0; s < 2; ++s)
      for (const char* sentence : kWords[w].sentences[s]) {
        const tg::BertInputs in = enc->inputs({sentence});
        const auto [first, end] = find_word(tok, in.ids.to_vector<int64_t>(), kWords[w].word, sentence);
        std::vector<Tensor> hidden;
        bert.forward(in, &hidden);
        std::vector<std::vector<float>> per_layer;
        for (const Tensor& h : hidden) {  // [1, T, D] -> the mean over the word's pieces
          const std::vector<float> v = tg::mean(h.narrow(1, first, end - first), {1}).to_vector<float>();
          per_layer.emplace_back(v.begin(), v.begin() + D);
        }
        vec[w][static_cast<size_t>(s)].push_back(std::move(per_layer));
      }
  }
  // Per layer: mean cosine within a sense (3 + 3 pairs per word) and across senses (9 pairs), and
  // how many of the 6 occurrences have their nearest other occurrence in the same sense.
  std::vector<double> within(static_cast<size_t>(L + 1)), across(static_cast<size_t>(L + 1)), nearest(static_cast<size_t>(L + 1));
  std::vector<std::vector<std::string>> word_rows;
  for (int64_t l = 0; l <= L; ++l) {
    double in_sum = 0, out_sum = 0;
    int64_t in_n = 0, out_n = 0, right = 0, total = 0;
    for (size_t w = 0; w < nw; ++w) {
      double w_in = 0, w_out = 0;
      for (int s = 0; s < 2; ++s)
        for (int i = 0; i < 3; ++i) {
          const auto& a = vec[w][static_cast<size_t>(s)][static_cast<size_t>(i)][static_cast<size_t>(l)];
          double best = -2;
          int best_sense = -1;
          for (int t = 0; t < 2; ++t)
            for (int j = 0; j < 3; ++j) {
              if (s == t && i == j) continue;
              const double c = cosine(a, vec[w][static_cast<size_t>(t)][static_cast<size_t>(j)][static_cast<size_t>(l)]);
              if (c > best) best = c, best_sense = t;
              if (s == t && j > i) in_sum += c, w_in += c, ++in_n;
              if (s == 0 && t == 1) out_sum += c, w_out += c, ++out_n;
            }
          right += best_sense == s;
          ++total;
        }
      if (l == L)
        word_rows.push_back({kWords[w].word, fmt::format("{} / {}", kWords[w].sense[0], kWords[w].sense[1]), "1.000",
                             fmt::format("{:.3f}", w_in / 6), fmt::format("{:.3f}", w_out / 9)});
    }
    within[static_cast<size_t>(l)] = in_sum / static_cast<double>(in_n);
    across[static_cast<size_t>(l)] = out_sum / static_cast<double>(out_n);
    nearest[static_cast<size_t>(l)] = static_cast<double>(right) / static_cast<double>(total);
  }

  tg::report::Series s_within{"MiniLM, same sense", {}}, s_across{"MiniLM, different senses", {}}, s_w2v{"word2vec (any two)", {}};
  std::vector<std::vector<std::string>> layer_rows;
  for (int64_t l = 0; l <= L; ++l) {
    const auto i = static_cast<size_t>(l);
    s_within.points.emplace_back(l, within[i]);
    s_across.points.emplace_back(l, across[i]);
    s_w2v.points.emplace_back(l, 1.0);
    layer_rows.push_back({std::to_string(l), fmt::format("{:.3f}", within[i]), fmt::format("{:.3f}", across[i]),
                          fmt::format("{:.3f}", within[i] - across[i]), fmt::format("{:.0f}%", 100 * nearest[i])});
    ctx.metrics->log("exp4_minilm", l, {{"same_sense_cosine", within[i]}, {"different_sense_cosine", across[i]},
                                        {"nearest_same_sense", nearest[i]}}).or_throw();
  }
  html.paragraph(fmt::format(
      "{} ambiguous words, each in three sentences of two senses, through all-MiniLM-L6-v2 ({} layers, width {}, pretrained; "
      "loaded from {} with its WordPiece tokenizer). A word's vector in a sentence is the mean of its pieces' hidden states. "
      "Layer 0 is the embedding layer: token + position + segment embeddings, nearly one vector per word, like word2vec (whose "
      "cosine between any two occurrences is exactly 1). Each layer of attention mixes in the sentence: after layer {} the "
      "occurrences of one sense have mean cosine {:.3f}, those of different senses {:.3f}, and {:.0f}% of occurrences have "
      "their nearest other occurrence in the same sense (chance: 40%, as 2 of the other 5 share the sense).",
      nw, L, D, ctx.opt.model, L, within.back(), across.back(), 100 * nearest.back()));
  html.line_chart("cosine between occurrences of an ambiguous word, by layer", {s_within, s_across, s_w2v},
                  {.x_label = "layer (0: embeddings)", .y_label = "mean cosine"});
  html.table({"layer", "same sense", "different senses", "gap", "nearest is same sense"}, layer_rows);
  html.table({"word", "senses", "word2vec cosine", fmt::format("layer {} same sense", L), fmt::format("layer {} different", L)},
             word_rows);
  std::printf("experiment 4 (MiniLM): layer 0 same %.3f / different %.3f; layer %lld same %.3f / different %.3f; nearest same sense %.0f%%\n",
              within[0], across[0], static_cast<long long>(L), within.back(), across.back(), 100 * nearest.back());
  // A pretrained model has no seed: one value each.
  ctx.headline("exp4", "minilm_layer0", "same_sense_cosine", {{within[0]}});
  ctx.headline("exp4", "minilm_layer0", "different_sense_cosine", {{across[0]}});
  ctx.headline("exp4", fmt::format("minilm_layer{}", L), "same_sense_cosine", {{within.back()}});
  ctx.headline("exp4", fmt::format("minilm_layer{}", L), "different_sense_cosine", {{across.back()}});
  ctx.headline("exp4", fmt::format("minilm_layer{}", L), "nearest_same_sense", {{nearest.back()}});
  return fmt::format("In all-MiniLM-L6-v2 the occurrences of an ambiguous word start alike (layer 0: cosine {:.3f} within a "
                     "sense, {:.3f} across senses) and attention pulls the senses apart layer by layer (layer {}: {:.3f} "
                     "against {:.3f}; {:.0f} % of occurrences have their nearest neighbour in the same sense, chance 40 %).",
                     within[0], across[0], L, within.back(), across.back(), 100 * nearest.back());
}

}  // namespace explain
