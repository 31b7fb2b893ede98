// The word and character tokenizers: a splitter (text/split.h) and a Vocabulary.
//
// File format: a header line, then the vocabulary (text/vocabulary.h), one token a line:
//   tapegrad tokenizer word lowercase=0 newlines=0
//   tapegrad tokenizer char lowercase=1
// Files of the older translator ("lowercase 0|1" or "characters lowercase 0|1" on line 1) load too.
#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "text/split.h"
#include "text/tokenizer_internal.h"
#include "text/vocabulary.h"

namespace tg::text::internal {
namespace {

constexpr std::string_view kMagic = "tapegrad tokenizer ";

class VocabTokenizer final : public Tokenizer {
 public:
  VocabTokenizer(bool chars, bool lowercase, bool newlines, Vocabulary vocab)
      : chars_(chars), lowercase_(lowercase), newlines_(newlines && !chars), vocab_(std::move(vocab)) {}

  std::string kind() const override { return chars_ ? "char" : "word"; }
  std::vector<std::string> tokenize(std::string_view text) const override {
    return chars_ ? utf8_chars(text, lowercase_) : word_tokens(text, lowercase_, newlines_);
  }
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    for (const std::string& t : tokenize(text)) ids.push_back(vocab_.id(t));
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<std::string> tokens;
    for (int64_t id : ids) {
      if (id == kEos) break;
      if (id < 0 || id >= size() || id == kPad || id == kBos) continue;
      tokens.push_back(vocab_.token(id));  // <unk> is written as "<unk>"
    }
    if (!chars_) return detokenize(tokens);
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
  }
  std::string token(int64_t id) const override { return vocab_.token(id); }
  int64_t id_of(std::string_view token) const override { return vocab_.id(token); }
  int64_t size() const override { return vocab_.size(); }
  std::string serialize() const override {
    std::string header = fmt::format("{}{} lowercase={}", kMagic, kind(), lowercase_ ? 1 : 0);
    if (!chars_) header += fmt::format(" newlines={}", newlines_ ? 1 : 0);
    return header + "\n" + vocab_.serialize();
  }

 private:
  bool chars_, lowercase_, newlines_;
  Vocabulary vocab_;
};

std::string_view first_line(std::string_view bytes) {
  std::string_view line = bytes.substr(0, bytes.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool is_legacy_header(std::string_view line) {
  return line == "lowercase 0" || line == "lowercase 1" || line == "characters lowercase 0" ||
         line == "characters lowercase 1";
}

}  // namespace

bool is_vocab_tokenizer_file(std::string_view bytes) {
  return bytes.substr(0, kMagic.size()) == kMagic || is_legacy_header(first_line(bytes));
}

Result<std::unique_ptr<Tokenizer>> parse_vocab_tokenizer(std::string_view bytes, std::string_view source) {
  const std::string_view header = first_line(bytes);
  bool chars = false, lowercase = false, newlines = false;
  if (is_legacy_header(header)) {
    chars = header.substr(0, 11) == "characters ";
    lowercase = header.back() == '1';
  } else {
    std::vector<std::string_view> fields;
    for (std::string_view rest = header.substr(kMagic.size()); !rest.empty();) {
      const size_t space = std::min(rest.find(' '), rest.size());
      if (space > 0) fields.push_back(rest.substr(0, space));
      rest.remove_prefix(std::min(space + 1, rest.size()));
    }
    if (fields.empty() || (fields[0] != "word" && fields[0] != "char"))
      return io_error("{}: line 1: expected 'tapegrad tokenizer word|char ...', found the kind {}", source,
                      fields.empty() ? std::string("missing") : quote_token(fields[0]));
    chars = fields[0] == "char";
    for (size_t i = 1; i < fields.size(); ++i) {
      const std::string_view f = fields[i];
      const size_t eq = f.find('=');
      const std::string_view key = f.substr(0, eq), value = eq == std::string_view::npos ? "" : f.substr(eq + 1);
      if ((key != "lowercase" && (key != "newlines" || chars)) || (value != "0" && value != "1"))
        return io_error("{}: line 1: unexpected option {} (a {} tokenizer takes lowercase=0|1{})", source, quote_token(f),
                        fields[0], chars ? "" : " and newlines=0|1");
      (key == "lowercase" ? lowercase : newlines) = value == "1";
    }
  }
  const size_t nl = bytes.find('\n');
  const std::string_view body = nl == std::string_view::npos ? std::string_view() : bytes.substr(nl + 1);
  if (body.empty()) return io_error("{}: line 2: the vocabulary is missing (expected <pad> <bos> <eos> <unk> first)", source);
  Result<Vocabulary> vocab = Vocabulary::parse(body, source, 2);
  if (!vocab.ok()) return vocab.status();
  const std::vector<std::string>& specials = default_specials();
  for (size_t i = 0; i < specials.size(); ++i) {
    if (static_cast<int64_t>(i) >= vocab->size())
      return io_error("{}: line {}: the file ends before the special tokens <pad> <bos> <eos> <unk> are all listed", source,
                      i + 2);
    if (vocab->token(static_cast<int64_t>(i)) != specials[i])
      return io_error("{}: line {}: expected {} (the vocabulary starts with <pad> <bos> <eos> <unk>), found {}", source, i + 2,
                      quote_token(specials[i]), quote_token(vocab->token(static_cast<int64_t>(i))));
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<VocabTokenizer>(chars, lowercase, newlines, *std::move(vocab)));
}

Result<std::unique_ptr<Tokenizer>> train_vocab_tokenizer(std::string_view kind, const std::vector<std::string>& sentences,
                                                         const TrainOptions& o) {
  const bool chars = kind == "char";
  if (o.vocab_size <= 4 || o.vocab_size > kMaxVocabularySize)
    return io_error("a {} vocabulary needs 5 to {} tokens (4 of them special), not {}", kind, kMaxVocabularySize, o.vocab_size);
  if (o.min_count < 1) return io_error("min_count must be at least 1, not {}", o.min_count);
  if (sentences.empty()) return io_error("no text to train the {} tokenizer on", kind);
  // Count the tokens in first-seen order, without keeping every sentence's tokens.
  VocabTokenizer splitter(chars, o.lowercase, o.keep_newlines, Vocabulary());
  std::vector<TokenCount> counts;
  absl::flat_hash_map<std::string, size_t> where;
  for (const std::string& s : sentences)
    for (std::string& t : splitter.tokenize(s)) {
      auto [it, fresh] = where.try_emplace(t, counts.size());
      if (fresh) counts.emplace_back(std::move(t), 0);
      ++counts[it->second].second;
    }
  return std::unique_ptr<Tokenizer>(std::make_unique<VocabTokenizer>(
      chars, o.lowercase, o.keep_newlines, Vocabulary::build_from_counts(counts, o.vocab_size, o.min_count)));
}

}  // namespace tg::text::internal
