// Experiment 4: static vs contextual embeddings. word2vec gives an ambiguous word ("bank",
// "watch") one vector; the encoder of an English->German translator gives it one per sentence.
// The word2vec model and the English->German translator stay in the context for experiment 6.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common.h"

namespace explain {

using tg::Tensor;

namespace {

// Each word three times: the first two sentences use it in one sense, the third in another.
struct Ambiguous {
  const char* word;
  const char* sentences[3];
};
const Ambiguous kAmbiguous[] = {
    {"bank", {"We sat on the bank of the river.", "The boat drifted to the bank of the lake.", "I have to go to the bank to get money."}},
    {"watch", {"My watch is five minutes slow.", "He lost his watch yesterday.", "We watch television every evening."}},
    {"train", {"The train leaves at six.", "We missed the last train.", "They train every morning."}},
    {"light", {"Please turn on the light.", "The light in the kitchen is broken.", "This suitcase is very light."}},
    {"match", {"We won the match yesterday.", "The match ended in a draw.", "He struck a match in the dark."}},
    {"play", {"The children play in the garden.", "They play football every day.", "We saw a play at the theatre."}},
    {"left", {"Turn left at the next corner.", "The shop is on the left side.", "He left the house early."}},
    {"can", {"I can swim very well.", "I think you can help me.", "He opened a can of beans."}},
    {"kind", {"She is very kind to me.", "That was very kind of you.", "What kind of music do you like?"}},
};

// Skip-gram word2vec (width dimensions, 10 epochs) on the English training sentences and
// --w2v_text, tokenized as the translator tokenizes them.
std::unique_ptr<tg::Word2Vec> train_word2vec(const Context& ctx) {
  std::vector<std::vector<std::string>> sentences;
  for (const auto& [de, en] : ctx.split.train) sentences.push_back(ctx.english->tokenize(en));
  for (const auto& line : ctx.w2v_lines) sentences.push_back(ctx.english->tokenize(line));
  std::vector<std::string> flat;
  for (const auto& s : sentences) flat.insert(flat.end(), s.begin(), s.end());
  tg::WordCounts vocab = tg::WordCounts::build(flat, 2);
  std::vector<int64_t> corpus;
  for (const auto& s : sentences) {
    for (int64_t id : vocab.encode(s)) corpus.push_back(id);
    corpus.push_back(-1);  // a window never crosses a sentence
  }
  const int64_t words = vocab.size(), tokens = vocab.total();
  const tg::Word2VecOptions options{.dim = ctx.opt.width, .window = 5, .negative = 5, .sample = 1e-3, .epochs = 10, .seed = ctx.opt.seed};
  auto w2v = std::make_unique<tg::Word2Vec>(std::move(vocab), options);
  tg::train::Progress progress(static_cast<int64_t>(corpus.size() - sentences.size()) * 10, "word2vec", "words");
  w2v->train(corpus, [&](const tg::Word2VecProgress& p) {
    progress.update(p.words_done, fmt::format("loss {:.3f}", p.loss), p.words_done);
  });
  progress.finish(fmt::format("{} words, {} tokens x 10 epochs", words, tokens));
  return w2v;
}

}  // namespace

void exp4_contextual(Context& ctx, tg::report::Html& html) {
  const int64_t width = ctx.opt.width;
  ctx.w2v = train_word2vec(ctx);
  for (uint64_t seed : ctx.seeds()) {
    ctx.en_de_models.push_back(new_model(ctx.en_de, ctx.opt, seed));
    ctx.en_de_runs.push_back(train(ctx, *ctx.en_de_models.back(), ctx.en_de, "en_de", seed));
  }
  const tg::Word2Vec& w2v = *ctx.w2v;
  const tg::text::Tokenizer& english = *ctx.english;

  const std::vector<float> table = w2v.vectors().to_vector<float>();
  auto static_vec = [&](const std::string& w) {
    const int64_t id = w2v.vocab().id(w);
    return std::vector<float>(table.begin() + id * width, table.begin() + (id + 1) * width);
  };
  // The encoder's output vector at the word's position in the sentence.
  auto contextual = [&](tg::Transformer& en_de, const std::string& sentence, const std::string& w) {
    const std::vector<std::string> toks = english.tokenize(sentence);
    auto it = std::find(toks.begin(), toks.end(), w);
    if (it == toks.end()) throw tg::Error(fmt::format("experiment 4: '{}' is not a token of \"{}\"", w, sentence));
    const std::vector<int64_t> ids = english.encode(sentence);
    tg::NoGradGuard ng;
    en_de.eval();
    const std::vector<float> h =
        en_de.encode(tg::from_vector(ids, {1, static_cast<int64_t>(ids.size())}).to(en_de.device())).to_vector<float>();
    en_de.train();
    const int64_t pos = it - toks.begin();
    return std::vector<float>(h.begin() + pos * width, h.begin() + (pos + 1) * width);
  };

  // Per seed's model: the mean cosine of same-sense and different-sense pairs, and how many words
  // have their same-sense pair closer than both others; the table shows the first seed's model.
  std::vector<std::vector<std::string>> rows;
  Stat same, diff, separated_words;
  int words = 0;
  std::string skipped;
  for (auto& model : ctx.en_de_models) {
    const bool first = rows.empty() && skipped.empty();
    double same_sum = 0, diff_sum = 0;
    int same_n = 0, diff_n = 0, separated = 0;
    words = 0;
    for (const Ambiguous& a : kAmbiguous) {
      if (english.id_of(a.word) == english.unk_id() || w2v.vocab().id(a.word) < 0) {
        if (first) skipped += (skipped.empty() ? "" : ", ") + std::string(a.word);
        continue;
      }
      std::vector<float> c[3];
      for (int i = 0; i < 3; ++i) c[i] = contextual(*model, a.sentences[i], a.word);
      const double stat = cosine(static_vec(a.word), static_vec(a.word));
      ++words;
      separated += cosine(c[0], c[1]) > std::max(cosine(c[0], c[2]), cosine(c[1], c[2]));
      for (auto [i, j] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 2}}) {
        const bool is_same = j != 2;
        const double cs = cosine(c[i], c[j]);
        (is_same ? same_sum : diff_sum) += cs;
        ++(is_same ? same_n : diff_n);
        if (first)
          rows.push_back({a.word, a.sentences[i], a.sentences[j], is_same ? "same" : "different", fmt::format("{:.3f}", stat),
                          fmt::format("{:.3f}", cs)});
      }
    }
    same.values.push_back(same_n ? same_sum / same_n : 0);
    diff.values.push_back(diff_n ? diff_sum / diff_n : 0);
    separated_words.values.push_back(separated);
  }
  const Stat en_de_loss = valid_losses(ctx.en_de_runs);
  ctx.headline("exp4", "translator_encoder", "same_sense_cosine", same);
  ctx.headline("exp4", "translator_encoder", "different_sense_cosine", diff);
  ctx.headline("exp4", "translator_encoder", "separated_words", separated_words);
  const bool apart = same.mean() > diff.mean() && separated(same, diff);

  html.heading("4. Static vs contextual embeddings", 2, "exp4");
  html.paragraph(fmt::format(
      "word2vec (skip-gram, {} dimensions, trained on the {} English training sentences{}) stores one vector per word: "
      "\"bank\" by a river and \"bank\" with money are the same point, cosine 1. A transformer encoder computes each word's "
      "vector from the whole sentence through attention, so the same word gets a different vector in every sentence. Below, "
      "the encoder of an English->German model trained like the others ({}; validation loss {}): cosine between the "
      "encoder outputs at the word in two sentences (the table: the first seed's model). Mean over the pairs where the word "
      "has the same sense: {}; where the senses differ: {}{} Words whose same-sense pair is closer than both "
      "different-sense pairs: {} of {}; the rest show that a small model after {} steps also mixes in other context "
      "(sentence position, neighbouring words) — the vectors are contextual, not yet cleanly sense-separated.",
      width, ctx.split.train.size(), ctx.opt.w2v_text.empty() ? "" : " and " + ctx.opt.w2v_text, ctx.budget(),
      show(en_de_loss, 3), show(same, 3), show(diff, 3),
      apart ? ": same-sense occurrences sit closer together, on every seed."
            : ": at this budget the senses are not measurably apart (the seeds overlap).",
      show(separated_words, 1), words, ctx.opt.steps));
  html.table({"word", "sentence A", "sentence B", "sense", "word2vec cosine", "encoder cosine"}, rows);
  if (!skipped.empty()) html.paragraph("Left out (not in the vocabulary of this data): " + skipped + ".");
  log_result(ctx, "exp4", {{"same_sense_cosine", same.mean()}, {"different_sense_cosine", diff.mean()},
                           {"separated_words", separated_words.mean()}, {"words", words}});
  std::printf("experiment 4: encoder cosine same sense %s, different sense %s (%s of %d words separated)\n", show(same, 3).c_str(),
              show(diff, 3).c_str(), show(separated_words, 1).c_str(), words);
  const std::string minilm = exp4_minilm(ctx, html);
  ctx.answers.push_back(
      {"How do contextual vectors differ from static ones?",
       "word2vec stores one vector per word: \"bank\" by a river and at the bank are the same point (cosine 1). A transformer "
       "computes a word's vector from its sentence through attention, so each use gets its own. " +
           (minilm.empty() ? fmt::format("In the small translator's encoder, same-sense uses have cosine {} and different "
                                         "senses {}{}.",
                                         show(same, 3), show(diff, 3), apart ? "" : " (not measurably apart at this budget)")
                           : minilm),
       "exp4", "experiment 4"});
}

}  // namespace explain
