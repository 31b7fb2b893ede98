#include "examples/subword.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

namespace tg::examples {
namespace {

// "Internal: ./src/x.cc(660) [condition] What went wrong." -> "What went wrong."
std::string clean(const sentencepiece::util::Status& st) {
  std::string m = st.ToString();
  size_t p = m.rfind("] ");
  if (p != std::string::npos && p + 2 < m.size()) return m.substr(p + 2);
  return p != std::string::npos ? "" : m;
}

class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

}  // namespace

SubwordModel::SubwordModel() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SubwordModel::~SubwordModel() = default;

std::string SubwordModel::train(const std::vector<std::string>& sentences, const std::string& type, int vocab_size,
                                bool lowercase, std::string* serialized, const std::vector<std::string>& user_symbols) {
  if (type != "bpe" && type != "unigram") return "the subword model type must be bpe or unigram, not '" + type + "'";
  if (sentences.empty()) return "no sentences to train the subword model on";
  std::unordered_map<std::string, std::string> args = {
      {"model_type", type},
      {"vocab_size", std::to_string(vocab_size)},
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", "<pad>"},
      {"bos_piece", "<bos>"},
      {"eos_piece", "<eos>"},
      {"unk_piece", "<unk>"},
      {"character_coverage", "1.0"},
      {"num_threads", "1"},  // the same model whatever the machine
      {"shuffle_input_sentence", "false"},
      {"normalization_rule_name", lowercase ? "nmt_nfkc_cf" : "nmt_nfkc"},
      {"minloglevel", "2"},  // no progress chatter on stderr
  };
  if (!user_symbols.empty()) {
    std::string joined;
    for (const auto& u : user_symbols) joined += (joined.empty() ? "" : ",") + u;
    args["user_defined_symbols"] = joined;
  }
  Sentences it(sentences);
  sentencepiece::util::Status st = sentencepiece::SentencePieceTrainer::Train(args, &it, serialized);
  return st.ok() ? "" : "SentencePiece: " + clean(st);
}

std::unique_ptr<SubwordModel> SubwordModel::parse(const std::string& serialized, std::string* error) {
  std::unique_ptr<SubwordModel> m(new SubwordModel());
  sentencepiece::util::Status st = m->sp_->LoadFromSerializedProto(serialized);
  if (!st.ok()) {
    std::string why = clean(st);
    *error = why.empty() ? "not a SentencePiece model file" : "not a SentencePiece model file (" + why + ")";
    return nullptr;
  }
  if (m->size() < 4 || m->sp_->pad_id() != 0 || m->sp_->bos_id() != 1 || m->sp_->eos_id() != 2 || m->sp_->unk_id() != 3) {
    *error = "the SentencePiece model does not use ids 0..3 for <pad> <bos> <eos> <unk>";
    return nullptr;
  }
  return m;
}

std::vector<int> SubwordModel::encode(const std::string& text) const {
  std::vector<int> ids;
  if (!sp_->Encode(text, &ids).ok()) ids.clear();
  return ids;
}

std::string SubwordModel::decode(const std::vector<int>& ids) const {
  std::string out;
  if (!sp_->Decode(ids, &out).ok()) out.clear();
  return out;
}

std::string SubwordModel::piece(int id) const { return sp_->IdToPiece(id); }
int SubwordModel::piece_id(const std::string& piece) const { return sp_->PieceToId(piece); }
int SubwordModel::size() const { return sp_->GetPieceSize(); }
}  // namespace tg::examples
