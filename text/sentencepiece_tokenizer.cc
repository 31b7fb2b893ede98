// SentencePiece BPE and unigram tokenizers (Debian's libsentencepiece-dev).
//
// This file must include no Abseil header: sentencepiece_processor.h defines its own
// absl::string_view (as std::string_view), which clashes with Abseil's.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "io/file.h"
#include "text/tokenizer_internal.h"
#include "text/vocabulary.h"

namespace tg::text::internal {
namespace {

// "Internal: ./src/x.cc(660) [condition] What went wrong." -> "What went wrong." (on one line).
std::string clean(const sentencepiece::util::Status& st) {
  std::string m = st.ToString();
  const size_t p = m.rfind("] ");
  if (p != std::string::npos) m = m.substr(p + 2);
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
}

// What parse() needs from the model's protobuf that the processor does not tell: the model type,
// and whether the file is whole. Walks ModelProto { repeated pieces = 1; TrainerSpec trainer_spec
// = 2; NormalizerSpec normalizer_spec = 3; ... } with TrainerSpec { model_type = 3; vocab_size = 4; }.
//
// SentencePiece trusts the tables inside a model (a flipped byte in the normalizer's character map
// can crash Encode), so the files we write end with one more field, unknown to SentencePiece and
// ignored by it (and by Python's sentencepiece): the fingerprint of every byte before it. parse()
// refuses a file whose fingerprint does not match; files without one (written elsewhere) are trusted.
constexpr uint64_t kChecksumField = 2121;

std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
  return out + static_cast<char>(v);
}

std::string with_checksum(const std::string& model) {
  const std::string sum = tg::fingerprint(model);
  return model + varint(kChecksumField << 3 | 2) + varint(sum.size()) + sum;
}

struct ProtoSummary {
  std::string error;  // "" when the bytes are well-formed protobuf
  size_t checksum_at = std::string_view::npos;  // where the checksum field starts, if there is one
  std::string checksum;
  bool has_trainer_spec = false, has_normalizer_spec = false;
  uint64_t model_type = 1;  // UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4 (1 when unset, as protobuf's default)
  int64_t vocab_size = -1;
};

bool read_varint(std::string_view s, size_t& p, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[p++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Calls on_field(field, wire_type, varint value, length-delimited bytes, offset) for each field; "" or why not.
template <class F>
std::string walk(std::string_view s, F&& on_field) {
  size_t p = 0;
  while (p < s.size()) {
    const size_t at = p;
    uint64_t tag = 0, v = 0;
    if (!read_varint(s, p, tag)) return fmt::format("a field is cut off at byte {}", at);
    const uint64_t field = tag >> 3, wire = tag & 7;
    std::string_view bytes;
    if (field == 0) return fmt::format("field number 0 at byte {}", at);
    if (wire == 0) {
      if (!read_varint(s, p, v)) return fmt::format("a number is cut off at byte {}", at);
    } else if (wire == 1 || wire == 5) {
      const size_t n = wire == 1 ? 8 : 4;
      if (s.size() - p < n) return fmt::format("a number is cut off at byte {}", at);
      p += n;
    } else if (wire == 2) {
      if (!read_varint(s, p, v) || v > s.size() - p) return fmt::format("a field of byte {} runs past the end", at);
      bytes = s.substr(p, static_cast<size_t>(v));
      p += static_cast<size_t>(v);
    } else {
      return fmt::format("an unknown wire type {} at byte {}", wire, at);
    }
    on_field(field, wire, v, bytes, at);
  }
  return "";
}

ProtoSummary summarize(std::string_view model) {
  ProtoSummary sum;
  std::string inner;
  sum.error = walk(model, [&](uint64_t field, uint64_t wire, uint64_t, std::string_view bytes, size_t at) {
    if (field == kChecksumField) {
      if (sum.checksum_at == std::string_view::npos) sum.checksum_at = at, sum.checksum = std::string(bytes);
      else sum.checksum_at = 0;  // twice: never valid
    }
    if (wire != 2) return;
    if (field == 3) sum.has_normalizer_spec = true;
    if (field != 2) return;
    sum.has_trainer_spec = true;
    std::string e = walk(bytes, [&](uint64_t f, uint64_t w, uint64_t v, std::string_view, size_t) {
      if (w == 0 && f == 3) sum.model_type = v;
      if (w == 0 && f == 4) sum.vocab_size = static_cast<int64_t>(v);
    });
    if (!e.empty() && inner.empty()) inner = "trainer settings: " + e;
  });
  if (sum.error.empty()) sum.error = inner;
  return sum;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string bytes, std::string kind)
      : sp_(std::move(sp)), bytes_(std::move(bytes)), kind_(std::move(kind)) {
    const int nl = sp_->PieceToId(std::string(kNewlinePiece));
    newline_id_ = nl == sp_->unk_id() ? -1 : nl;
  }

  std::string kind() const override { return kind_; }
  std::vector<std::string> tokenize(std::string_view text) const override {
    std::vector<std::string> out;
    for (int64_t id : encode(text)) out.push_back(sp_->IdToPiece(static_cast<int>(id)));
    return out;
  }
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> out;
    if (newline_id_ < 0) return encode_line(text, out);
    for (size_t start = 0;;) {  // SentencePiece reads lines: encode each, with the line-break piece between
      const size_t end = text.find('\n', start);
      encode_line(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start), out);
      if (end == std::string_view::npos) return out;
      out.push_back(newline_id_);
      start = end + 1;
    }
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string out;
    std::vector<int> run;
    auto flush = [&] {
      std::string piece;
      if (!run.empty() && sp_->Decode(run, &piece).ok()) out += piece;
      run.clear();
    };
    for (int64_t id : ids) {
      if (id == eos_id()) break;
      if (id == newline_id_) {
        flush();
        out += '\n';
      } else if (id >= unk_id() && id < size()) {  // <unk> kept: SentencePiece writes it as " ⁇ "
        run.push_back(static_cast<int>(id));
      }
    }
    flush();
    return out;
  }
  std::string token(int64_t id) const override {
    TG_CHECK(id >= 0 && id < size(), "Tokenizer::token", "id {} is out of range (the {} tokenizer has {} tokens)", id, kind_,
             size());
    return sp_->IdToPiece(static_cast<int>(id));
  }
  int64_t id_of(std::string_view token) const override { return sp_->PieceToId(token); }
  int64_t size() const override { return sp_->GetPieceSize(); }
  std::string serialize() const override { return bytes_; }

 private:
  std::vector<int64_t>& encode_line(std::string_view line, std::vector<int64_t>& out) const {
    std::vector<int> ids;
    if (sp_->Encode(line, &ids).ok()) out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_, kind_;
  int64_t newline_id_ = -1;  // the U+2424 piece when the model has one (TrainOptions::keep_newlines)
};

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

Result<std::unique_ptr<Tokenizer>> parse_sentencepiece(std::string_view bytes, std::string_view source) {
  const ProtoSummary sum = summarize(bytes);
  if (!sum.error.empty()) return io_error("{}: not a SentencePiece model file (corrupt or truncated: {})", source, sum.error);
  if (sum.checksum_at != std::string_view::npos &&
      (sum.checksum_at == 0 || sum.checksum != tg::fingerprint(bytes.substr(0, sum.checksum_at)) ||
       bytes.size() != sum.checksum_at + varint(kChecksumField << 3 | 2).size() + 1 + sum.checksum.size()))
    return io_error("{}: a corrupt SentencePiece model (its bytes do not match the fingerprint saved with them)", source);
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (sentencepiece::util::Status st = sp->LoadFromSerializedProto(bytes); !st.ok())
    return io_error("{}: not a SentencePiece model file ({})", source, clean(st));
  if (!sum.has_trainer_spec || !sum.has_normalizer_spec)
    return io_error("{}: a SentencePiece model without its {} settings (truncated?)", source,
                    sum.has_trainer_spec ? "normalizer" : "trainer");
  if (sum.model_type != 1 && sum.model_type != 2)
    return io_error("{}: a SentencePiece {} model; only bpe and unigram models are supported", source,
                    sum.model_type == 3 ? "word" : sum.model_type == 4 ? "char" : "unknown-type");
  if (sum.vocab_size != sp->GetPieceSize())
    return io_error("{}: the SentencePiece model lists {} pieces but was trained for {} (truncated?)", source,
                    sp->GetPieceSize(), sum.vocab_size);
  if (sp->GetPieceSize() < 4 || sp->pad_id() != kPad || sp->bos_id() != kBos || sp->eos_id() != kEos || sp->unk_id() != kUnk)
    return io_error("{}: the SentencePiece model does not use ids 0..3 for <pad> <bos> <eos> <unk>", source);
  return std::unique_ptr<Tokenizer>(
      std::make_unique<SentencePieceTokenizer>(std::move(sp), std::string(bytes), sum.model_type == 2 ? "bpe" : "unigram"));
}

Result<std::unique_ptr<Tokenizer>> train_sentencepiece(std::string_view kind, const std::vector<std::string>& sentences,
                                                       const TrainOptions& o) {
  if (o.vocab_size < 8 || o.vocab_size > 1000000)
    return io_error("a {} vocabulary needs 8 to 1000000 pieces, not {}", kind, o.vocab_size);
  // SentencePiece reads lines: the text's line breaks separate sentences.
  std::vector<std::string> lines;
  for (const std::string& s : sentences)
    for (size_t start = 0; start <= s.size();) {
      size_t end = s.find('\n', start);
      if (end == std::string::npos) end = s.size();
      if (s.find_first_not_of(" \t\r", start) < end) lines.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  if (lines.empty()) return io_error("no text to train the {} tokenizer on", kind);
  std::vector<std::string> symbols = o.user_symbols;
  if (o.keep_newlines && std::find(symbols.begin(), symbols.end(), kNewlinePiece) == symbols.end())
    symbols.emplace_back(kNewlinePiece);
  std::string joined;
  for (const std::string& u : symbols) {
    if (u.empty() || u.find(',') != std::string::npos || u.find_first_of(" \t\n\r") != std::string::npos)
      return io_error("the user symbol {} cannot be a piece (empty, or with a comma or whitespace)", quote_token(u));
    joined += (joined.empty() ? "" : ",") + u;
  }
  std::unordered_map<std::string, std::string> args = {
      {"model_type", std::string(kind)},
      {"vocab_size", std::to_string(o.vocab_size)},
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
      {"normalization_rule_name", o.lowercase ? "nmt_nfkc_cf" : "nmt_nfkc"},
      {"minloglevel", "2"},  // no progress chatter on stderr
  };
  if (!joined.empty()) args["user_defined_symbols"] = joined;
  Sentences it(lines);
  std::string model;
  if (sentencepiece::util::Status st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model); !st.ok())
    return io_error("SentencePiece could not train a {} model of {} pieces: {}", kind, o.vocab_size, clean(st));
  return parse_sentencepiece(with_checksum(model), "the trained SentencePiece model");
}

}  // namespace tg::text::internal
