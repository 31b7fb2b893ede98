#include "examples/tokenizer.h"

#include <absl/strings/str_cat.h>

#include "examples/common.h"
#include "tapegrad.h"

namespace tg::examples {

absl::StatusOr<TokenizerKind> parse_tokenizer_kind(const std::string& name) {
  if (name == "word") return TokenizerKind::kWord;
  if (name == "char") return TokenizerKind::kChar;
  if (name == "bpe") return TokenizerKind::kBpe;
  if (name == "unigram") return TokenizerKind::kUnigram;
  return absl::InvalidArgumentError(absl::StrCat("unknown tokenizer '", name, "' (expected word, char, bpe or unigram)"));
}

const char* tokenizer_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kWord: return "word";
    case TokenizerKind::kChar: return "char";
    case TokenizerKind::kBpe: return "bpe";
    case TokenizerKind::kUnigram: return "unigram";
  }
  return "?";
}

namespace {
bool subword(TokenizerKind k) { return k == TokenizerKind::kBpe || k == TokenizerKind::kUnigram; }
}  // namespace

absl::StatusOr<Tokenizer> Tokenizer::train(TokenizerKind kind, const std::vector<std::string>& sentences, const Options& o) {
  Tokenizer t;
  t.kind_ = kind;
  if (!subword(kind)) {
    t.vocab_ = WordVocab::build(sentences, o.vocab_size, o.lowercase, o.min_count,
                                kind == TokenizerKind::kChar ? WordVocab::Unit::kChars : WordVocab::Unit::kWords);
    return t;
  }
  if (o.vocab_size < 8 || o.vocab_size > 1000000)
    return absl::InvalidArgumentError(absl::StrCat("a subword vocabulary needs 8 to 1000000 pieces, not ", o.vocab_size));
  std::string err = SubwordModel::train(sentences, tokenizer_name(kind), static_cast<int>(o.vocab_size), o.lowercase, &t.spm_bytes_,
                                          o.user_symbols);
  if (!err.empty()) return absl::InvalidArgumentError(err);
  std::shared_ptr<const SubwordModel> m = SubwordModel::parse(t.spm_bytes_, &err);
  if (!m) return absl::InternalError(err);
  t.spm_ = std::move(m);
  return t;
}

std::string Tokenizer::file_name(TokenizerKind kind, const std::string& side) {
  return subword(kind) ? side + ".spm" : side + "_vocab.txt";
}

absl::Status Tokenizer::save(const std::string& path) const {
  return tg::write_file_atomic(path, subword(kind_) ? spm_bytes_ : vocab_.serialize());
}

absl::StatusOr<Tokenizer> Tokenizer::load(TokenizerKind kind, const std::string& path) {
  absl::StatusOr<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  Tokenizer t;
  t.kind_ = kind;
  if (subword(kind)) {
    std::string err;
    std::shared_ptr<const SubwordModel> m = SubwordModel::parse(*bytes, &err);
    if (!m) return absl::InvalidArgumentError(absl::StrCat(path, ": ", err));
    t.spm_ = std::move(m);
    t.spm_bytes_ = *std::move(bytes);
    return t;
  }
  absl::StatusOr<WordVocab> v = WordVocab::parse(*bytes);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", v.status().message()));
  if ((v->unit() == WordVocab::Unit::kChars) != (kind == TokenizerKind::kChar))
    return absl::InvalidArgumentError(absl::StrCat(path, ": a ", v->unit() == WordVocab::Unit::kChars ? "character" : "word",
                                                   " vocabulary, but the model was trained with ", tokenizer_name(kind), " tokens"));
  t.vocab_ = *std::move(v);
  return t;
}

std::vector<int64_t> Tokenizer::encode(const std::string& sentence) const {
  if (!spm_) return vocab_.encode(sentence);
  std::vector<int> ids = spm_->encode(sentence);
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  if (!spm_) return vocab_.decode(ids);
  std::vector<int> keep;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id >= kUnk && id < size()) keep.push_back(static_cast<int>(id));  // <unk> kept: SentencePiece writes it
  }
  return spm_->decode(keep);
}

std::string Tokenizer::token(int64_t id) const {
  if (!spm_) return vocab_.token(id);
  return id >= 0 && id < size() ? spm_->piece(static_cast<int>(id)) : "?";
}

int64_t Tokenizer::id_of(const std::string& token) const {
  if (spm_) return spm_->piece_id(token);
  auto ids = vocab_.encode(token);
  return ids.size() == 1 ? ids[0] : kUnk;
}

int64_t Tokenizer::size() const { return spm_ ? spm_->size() : vocab_.size(); }

}  // namespace tg::examples
