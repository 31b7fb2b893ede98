#pragma once
// Text data for the translator: sentence pairs (from the Ding dictionary that Debian's
// trans-de-en ships, from two aligned files, or from one tab-separated file), a word tokenizer
// with a vocabulary, and corpus BLEU computed as sacreBLEU does (13a tokenization, BLEU-4,
// brevity penalty, exponential smoothing).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/status/statusor.h>

namespace tg::examples {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// Lines "German | German ... :: English | English ..." (the Ding format of /usr/share/trans/de-en):
// the i-th German and English alternatives are a pair; the first of ';'-separated synonyms is
// kept; only pairs that look like sentences are kept (4 to 30 words on each side, ending in . ! or
// ?, no dictionary annotations in brackets).
absl::StatusOr<Pairs> read_ding_pairs(const std::string& path);
// Two files with one sentence a line, aligned (gzip accepted).
absl::StatusOr<Pairs> read_aligned(const std::string& src_path, const std::string& tgt_path);
// One file of "source<TAB>target" lines (gzip accepted).
absl::StatusOr<Pairs> read_tsv(const std::string& path);

// A deterministic split by a hash of the source sentence: about `valid_percent`% to validation and
// as many to test, the rest to training; the same pair always lands in the same part.
struct Split {
  Pairs train, valid, test;
};
Split split_pairs(const Pairs& pairs, int valid_percent = 2);

// Words and punctuation: letters, digits and non-ASCII bytes form words; every other printable
// ASCII character is its own token. detokenize() undoes the spacing around punctuation.
std::vector<std::string> word_tokens(const std::string& text, bool lowercase = false);
std::string detokenize(const std::vector<std::string>& tokens);

// UTF-8 code points (an invalid byte stands alone), optionally ASCII-lower-cased.
std::vector<std::string> utf8_chars(const std::string& text, bool lowercase = false);

// A vocabulary of words (word_tokens) or of characters (utf8_chars).
class WordVocab {
 public:
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
  enum class Unit { kWords, kChars };
  // The max_size most frequent tokens seen at least min_count times (after the four specials),
  // ties in first-seen order.
  static WordVocab build(const std::vector<std::string>& sentences, int64_t max_size, bool lowercase,
                         int64_t min_count = 1, Unit unit = Unit::kWords);
  // One token a line; line 1: "lowercase 0|1" (words) or "characters lowercase 0|1".
  static absl::StatusOr<WordVocab> parse(const std::string& text);
  std::string serialize() const;
  std::vector<int64_t> encode(const std::string& sentence) const;  // no bos/eos
  std::string decode(const std::vector<int64_t>& ids) const;       // stops at eos, skips specials
  std::vector<std::string> tokens_of(const std::string& sentence) const {
    return unit_ == Unit::kChars ? utf8_chars(sentence, lowercase_) : word_tokens(sentence, lowercase_);
  }
  Unit unit() const { return unit_; }
  const std::string& token(int64_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::vector<std::string> tokens_;
  absl::flat_hash_map<std::string, int64_t> index_;
  bool lowercase_ = false;
  Unit unit_ = Unit::kWords;
};

struct Bleu {
  double score = 0;  // 0..100
  double bp = 0;
  int64_t sys_len = 0, ref_len = 0;
  double precisions[4] = {0, 0, 0, 0};  // percent
};
// sacreBLEU's default corpus BLEU: tokenize 13a, n-grams 1..4, smooth "exp", one reference each.
Bleu corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);
std::vector<std::string> tokenize_13a(const std::string& line);

}  // namespace tg::examples
