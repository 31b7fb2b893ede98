#pragma once
// The translator's tokenizers behind one interface: words (WordVocab), characters (UTF-8 code
// points), and subwords (SentencePiece BPE or unigram, trained on the training text). All use ids
// 0..3 for <pad> <bos> <eos> <unk>. Each is saved as one file next to the model: SIDE_vocab.txt for
// words and characters, SIDE.spm (a SentencePiece model file) for subwords.
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "examples/subword.h"
#include "examples/text_data.h"

namespace tg::examples {

enum class TokenizerKind { kWord, kChar, kBpe, kUnigram };
absl::StatusOr<TokenizerKind> parse_tokenizer_kind(const std::string& name);  // word, char, bpe, unigram
const char* tokenizer_name(TokenizerKind kind);

class Tokenizer {
 public:
  static constexpr int64_t kPad = WordVocab::kPad, kBos = WordVocab::kBos, kEos = WordVocab::kEos, kUnk = WordVocab::kUnk;
  struct Options {
    int64_t vocab_size = 8000;  // largest vocabulary (word, char); the exact size for subwords
    int64_t min_count = 2;      // rarer words or characters become <unk> (word, char)
    bool lowercase = false;
    std::vector<std::string> user_symbols = {};  // subwords: kept whole, ids from 4 on
  };
  static absl::StatusOr<Tokenizer> train(TokenizerKind kind, const std::vector<std::string>& sentences, const Options& o);
  // The file name for one side ("src" or "tgt") in a model folder.
  static std::string file_name(TokenizerKind kind, const std::string& side);
  absl::Status save(const std::string& path) const;  // atomically
  static absl::StatusOr<Tokenizer> load(TokenizerKind kind, const std::string& path);

  std::vector<int64_t> encode(const std::string& sentence) const;  // no bos/eos
  std::string decode(const std::vector<int64_t>& ids) const;       // stops at eos, skips specials
  std::string token(int64_t id) const;                             // a label for heatmaps
  int64_t id_of(const std::string& token) const;                   // kUnk when absent
  int64_t size() const;
  TokenizerKind kind() const { return kind_; }

 private:
  TokenizerKind kind_ = TokenizerKind::kWord;
  WordVocab vocab_;                            // word, char
  std::shared_ptr<const SubwordModel> spm_;    // bpe, unigram
  std::string spm_bytes_;
};

}  // namespace tg::examples
