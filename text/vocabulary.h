#pragma once
// Vocabulary: tokens <-> ids. The one vocabulary behind the word and character tokenizers (and,
// later, WordPiece's vocab.txt). By default ids 0..3 are the specials <pad> <bos> <eos> <unk>.
//
//   auto v = tg::text::Vocabulary::build({{"the", "cat"}, {"the", "dog"}}, /*max_size=*/1000);
//   v.id("the");     // 4: the most frequent token comes right after the specials
//   v.id("zebra");   // tg::text::kUnk
//   v.save("vocab.txt").or_throw();
//
// The file holds one token a line, in id order. A backslash, a line break and a carriage return
// inside a token are written as \\, \n and \r; when reading, any other backslash is kept as it is
// (so foreign vocab.txt files read unchanged).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../io/status.h"

namespace tg::text {

// The default special ids and tokens.
inline constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;
const std::vector<std::string>& default_specials();  // {"<pad>", "<bos>", "<eos>", "<unk>"}

// Limits that keep a corrupt or hostile file from exhausting memory.
inline constexpr int64_t kMaxTokenBytes = 65536;
inline constexpr int64_t kMaxVocabularySize = int64_t{1} << 24;

// A token and how often it occurs.
using TokenCount = std::pair<std::string, int64_t>;

class Vocabulary {
 public:
  Vocabulary();  // just the default specials

  // The specials, then the most frequent tokens seen at least min_count times, ties in first-seen
  // order, until the vocabulary holds max_size tokens (specials included; 0: no limit). Empty tokens,
  // tokens longer than kMaxTokenBytes and tokens equal to a special are skipped.
  static Vocabulary build(const std::vector<std::vector<std::string>>& sequences, int64_t max_size,
                          int64_t min_count = 1, const std::vector<std::string>& specials = default_specials());
  // The same from counts listed in first-seen order (a token listed twice has its counts added).
  static Vocabulary build_from_counts(const std::vector<TokenCount>& counts, int64_t max_size, int64_t min_count = 1,
                                      const std::vector<std::string>& specials = default_specials());
  // Exactly these tokens in this order; refused when one is empty, too long or repeated.
  static Result<Vocabulary> from_tokens(std::vector<std::string> tokens, std::string_view source = "vocabulary");

  // The id of a token; the unknown id when absent (tg::Error when there is no unknown token).
  int64_t id(std::string_view token) const;
  bool contains(std::string_view token) const;
  // The token of an id; tg::Error when the id is out of range.
  const std::string& token(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }

  // The id that id() returns for absent tokens: that of "<unk>" when present, else -1 (none).
  int64_t unk_id() const { return unk_id_; }
  // Makes another token the unknown one (e.g. "[UNK]"); tg::Error when it is absent.
  void set_unk_token(std::string_view token);

  // One token a line (see the top of this file).
  std::string serialize() const;
  // Parses serialize()'s format. Errors name `source` and the line: "vocab.txt: line 7: token 'the'
  // appears twice (first on line 5)". `first_line` numbers the first line of `bytes` (for files that
  // hold a vocabulary after a header).
  static Result<Vocabulary> parse(std::string_view bytes, std::string_view source, int64_t first_line = 1);
  Status save(const std::string& path) const;  // atomically
  static Result<Vocabulary> load(const std::string& path);

  bool operator==(const Vocabulary& o) const { return tokens_ == o.tokens_ && unk_id_ == o.unk_id_; }

 private:
  struct Hash {  // lets index_ be searched with a string_view
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> index_;
  int64_t unk_id_ = -1;
};

// A token made printable for error messages: line breaks, tabs and control bytes escaped, long
// tokens shortened.
std::string quote_token(std::string_view token);

}  // namespace tg::text
