#pragma once
// SentencePiece (Debian's libsentencepiece-dev) behind an interface of standard types only: its
// header defines `absl::string_view` as std::string_view, which clashes with Debian's Abseil, so
// subword.cc is the one file that includes it and this header includes no Abseil.
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tg::examples {

class SubwordModel {
 public:
  // Trains a "bpe" or "unigram" model of `vocab_size` pieces on the sentences, with ids 0..3 for
  // <pad> <bos> <eos> <unk> (the translator's special ids). On success returns "" and sets
  // *serialized to the model file's bytes; on failure returns SentencePiece's message.
  // `user_symbols` become single pieces (ids 4, 5, ...), never split.
  static std::string train(const std::vector<std::string>& sentences, const std::string& type, int vocab_size,
                           bool lowercase, std::string* serialized, const std::vector<std::string>& user_symbols = {});
  // Parses a model file's bytes; on failure returns nullptr and sets *error.
  static std::unique_ptr<SubwordModel> parse(const std::string& serialized, std::string* error);

  ~SubwordModel();
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  std::string piece(int id) const;
  int piece_id(const std::string& piece) const;  // the unknown id (3) when absent
  int size() const;

 private:
  SubwordModel();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace tg::examples
