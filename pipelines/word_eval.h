#pragma once
// Evaluating word vectors as word2vec's own tools and gensim do: analogy questions
// (questions-words.txt: "a b c d", a is to b as c is to d) and word pairs with human similarity
// scores (WordSim-353, SimLex-999: Spearman's rank correlation with the vectors' cosines).
//
//   auto questions = tg::text::read_analogies("questions-words.txt").value();
//   tg::text::AnalogyResult r = tg::text::evaluate_analogies(w2v, questions);
//   std::printf("%.1f%% of %lld\n", 100 * r.accuracy(), (long long)r.asked);
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../io/status.h"
#include "../models/word2vec.h"

namespace tg::text {

// A word as train_word2vec's vocabulary holds it: with lowercase, punctuation at its edges
// stripped and ASCII letters lower-cased ("Lord," -> "lord"); without, unchanged.
std::string normalise_word(std::string_view word, bool lowercase);
// The words of a line, split on white space (as the original word2vec), normalised; empty ones dropped.
std::vector<std::string> normalised_words(std::string_view line, bool lowercase);

// ---- Analogies

struct Analogy {
  std::string a, b, c, d;  // a is to b as c is to d: d should be nearest to b - a + c
};
// Lines of four words (normalised); blank lines and section headers (": capital-common-countries")
// skipped. Any other line, or a file without a question, is an error naming the file and line.
Result<std::vector<Analogy>> read_analogies(const std::string& path, bool lowercase = true);

struct AnalogyResult {
  int64_t right = 0, asked = 0;
  int64_t skipped = 0;  // a word not among the restrict_vocab most frequent
  double accuracy() const { return asked > 0 ? static_cast<double>(right) / static_cast<double>(asked) : 0.0; }
};
// Questions whose four words are all among the restrict_vocab most frequent (30,000, as the
// original's compute-accuracy) are asked: right when the nearest word to b - a + c, a, b and c
// excluded, is d.
AnalogyResult evaluate_analogies(const Word2Vec& vectors, const std::vector<Analogy>& questions,
                                 int64_t restrict_vocab = 30000);

// ---- Word pairs with human scores

struct ScoredPair {
  std::string a, b;
  double score;  // the human judgement
};
// Lines "word word score", tab, comma or space separated (more columns allowed); '#' lines and
// lines whose third field is not a finite number (a header) skipped; a file without a pair is an error.
Result<std::vector<ScoredPair>> read_word_pairs(const std::string& path, bool lowercase = true);

struct WordPairResult {
  double spearman = 0;   // NaN when fewer than two pairs were known (or either side is constant)
  int64_t pairs = 0;     // pairs with both words in the vocabulary
  int64_t skipped = 0;   // the others
};
WordPairResult evaluate_word_pairs(const Word2Vec& vectors, const std::vector<ScoredPair>& pairs);

// Spearman's rank correlation of x and y (tied values share their mean rank); NaN when there are
// fewer than two values or either side is constant. tg::Error when the sizes differ.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace tg::text
