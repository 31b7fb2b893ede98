// What every tokenizer shares: encode_pair (specials, truncation, padding), files, and finding the
// implementation by kind or by file content.
#include "text/tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>

#include <fmt/format.h>

#include "io/file.h"
#include "text/tokenizer_internal.h"

namespace tg::text {

namespace {

bool is_subword(std::string_view kind) { return kind == "bpe" || kind == "unigram"; }

int64_t round_up(int64_t n, int64_t multiple) { return multiple > 0 ? (n + multiple - 1) / multiple * multiple : n; }

void check_options(const EncodeOptions& o) {
  TG_CHECK(o.max_length >= 0, "encode_pair", "max_length must be 0 (no limit) or positive, not {}", o.max_length);
  TG_CHECK(o.pad_to_multiple_of >= 0, "encode_pair", "pad_to_multiple_of must be 0 (off) or positive, not {}",
           o.pad_to_multiple_of);
  TG_CHECK(o.padding != Padding::kMaxLength || o.max_length > 0, "encode_pair",
           "Padding::kMaxLength needs a max_length (it is 0)");
}

// Text is what a word/char file or a mistaken text file looks like; a SentencePiece model starts with a
// protobuf tag byte.
bool looks_like_text(std::string_view bytes) {
  for (unsigned char c : bytes.substr(0, 256))
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') return false;
  return true;
}

}  // namespace

// ---- encode_pair and batches ----

Encoding Tokenizer::assemble(std::vector<int64_t> a, std::optional<std::vector<int64_t>> b, const EncodeOptions& o) const {
  check_options(o);
  // Specials a tokenizer does not use (an id of -1: byte-level BPE puts nothing after a segment) are left out.
  const int64_t first = cls_id() >= 0 ? 1 : 0, after = sep_id() >= 0 ? 1 : 0;
  const int64_t specials = o.add_special_tokens ? first + after * (b ? 2 : 1) : 0;
  int64_t na = static_cast<int64_t>(a.size()), nb = b ? static_cast<int64_t>(b->size()) : 0;
  if (o.truncation && o.max_length > 0 && na + nb + specials > o.max_length) {
    TG_CHECK(o.max_length >= specials, "encode_pair", "max_length {} leaves no room for the {} special tokens", o.max_length,
             specials);
    int64_t remove = na + nb + specials - o.max_length;
    if (!b) {
      na -= remove;
    } else {  // longest first, as Hugging Face tokenizers: the shorter keeps all it can, else halves (b the odd one)
      const int64_t budget = o.max_length - specials;
      int64_t n1 = std::min(na, nb), n2 = std::max(na, nb);
      n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
      if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
      }
      if (na > nb) std::swap(n1, n2);
      na = std::min(na, n1);
      nb = std::min(nb, n2);
    }
    a.resize(static_cast<size_t>(na));
    if (b) b->resize(static_cast<size_t>(nb));
  }
  Encoding e;
  auto add = [&](int64_t id, int64_t type) {
    e.ids.push_back(id);
    e.type_ids.push_back(type);
    e.attention_mask.push_back(1);
  };
  if (o.add_special_tokens && first) add(cls_id(), 0);
  for (int64_t id : a) add(id, 0);
  if (o.add_special_tokens && after) add(sep_id(), 0);
  if (b) {
    for (int64_t id : *b) add(id, 1);
    if (o.add_special_tokens && after) add(sep_id(), 1);
  }
  if (o.padding == Padding::kMaxLength) pad(e, round_up(o.max_length, o.pad_to_multiple_of));
  if (o.padding == Padding::kLongest) pad(e, round_up(static_cast<int64_t>(e.ids.size()), o.pad_to_multiple_of));
  return e;
}

void Tokenizer::pad(Encoding& e, int64_t length) const {
  if (static_cast<int64_t>(e.ids.size()) >= length) return;
  const auto n = static_cast<size_t>(length);
  e.ids.resize(n, pad_id());
  e.type_ids.resize(n, 0);
  e.attention_mask.resize(n, 0);
}

Encoding Tokenizer::encode_pair(std::string_view a, std::optional<std::string_view> b, const EncodeOptions& options) const {
  std::optional<std::vector<int64_t>> second;
  if (b) second = encode(*b);
  return assemble(encode(a), std::move(second), options);
}

std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::string>& texts, const EncodeOptions& options) const {
  EncodeOptions each = options;
  each.padding = Padding::kNone;
  std::vector<Encoding> out;
  for (const std::string& t : texts) out.push_back(encode_pair(t, std::nullopt, each));
  return pad_batch(std::move(out), options);
}

std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::pair<std::string, std::string>>& pairs,
                                              const EncodeOptions& options) const {
  EncodeOptions each = options;
  each.padding = Padding::kNone;
  std::vector<Encoding> out;
  for (const auto& [a, b] : pairs) out.push_back(encode_pair(a, b, each));
  return pad_batch(std::move(out), options);
}

std::vector<Encoding> Tokenizer::pad_batch(std::vector<Encoding> batch, const EncodeOptions& options) const {
  check_options(options);
  int64_t target = options.max_length;
  if (options.padding == Padding::kNone) return batch;
  if (options.padding == Padding::kLongest) {
    target = 0;
    for (const Encoding& e : batch) target = std::max(target, static_cast<int64_t>(e.ids.size()));
  }
  for (Encoding& e : batch) pad(e, round_up(target, options.pad_to_multiple_of));
  return batch;
}

std::string Tokenizer::label(int64_t id) const {
  const std::string t = readable_token(id);
  if (t == " ") return "\xE2\x90\xA3";  // ␣
  std::string out;
  for (char c : t) out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : std::string(1, c);
  return out;
}

// ---- files ----

Status Tokenizer::save(const std::string& path) const { return write_file_atomic(path, serialize()); }

std::string Tokenizer::fingerprint() const { return tg::fingerprint(serialize()); }

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<std::uintmax_t>(kMaxFileBytes))
    return io_error("{}: {} bytes is too large for a tokenizer file (at most {} MiB)", path, size, kMaxFileBytes >> 20);
  Result<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  return parse(*bytes, path);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::parse(std::string_view bytes, std::string_view source) {
  if (static_cast<int64_t>(bytes.size()) > kMaxFileBytes)
    return io_error("{}: {} bytes is too large for a tokenizer file (at most {} MiB)", source, bytes.size(),
                    kMaxFileBytes >> 20);
  if (bytes.empty()) return io_error("{}: an empty file, not a tokenizer", source);
  if (internal::is_vocab_tokenizer_file(bytes)) return internal::parse_vocab_tokenizer(bytes, source);
  if (internal::is_hf_tokenizer_json(bytes)) return internal::parse_hf_tokenizer_json(bytes, source);
  Result<std::unique_ptr<Tokenizer>> spm = internal::parse_sentencepiece(bytes, source);
  if (spm.ok() || !looks_like_text(bytes)) return spm;
  return io_error("{}: not a tokenizer file (line 1 is not 'tapegrad tokenizer word|char ...', and the file is not a "
                  "SentencePiece model either)",
                  source);
}

std::string Tokenizer::file_name(std::string_view kind, std::string_view stem) {
  if (kind == "wordpiece" || kind == "byte_bpe") return fmt::format("{}.json", stem);
  check_kind(kind).or_throw();
  return fmt::format("{}.{}", stem, is_subword(kind) ? "spm" : "txt");
}

Status Tokenizer::save_in(const std::string& dir, std::string_view stem) const {
  return save(dir + "/" + file_name(kind(), stem));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load_in(const std::string& dir, std::string_view stem) {
  std::vector<std::string> found;
  for (const char* ext : {".txt", ".spm", ".json", "_vocab.txt"}) {
    std::error_code ec;
    const std::string path = fmt::format("{}/{}{}", dir, stem, ext);
    if (std::filesystem::exists(path, ec)) found.push_back(path);
  }
  if (found.empty()) return io_error("{}: no tokenizer file ({}.txt, {}.spm or {}.json)", dir, stem, stem, stem);
  if (found.size() > 1) return io_error("{}: both {} and {} exist; which tokenizer is meant?", dir, found[0], found[1]);
  return load(found[0]);
}

// ---- kinds ----

const std::vector<std::string>& Tokenizer::kinds() {
  static const std::vector<std::string> k = {"word", "char", "bpe", "unigram"};
  return k;
}

Status Tokenizer::check_kind(std::string_view kind) {
  for (const std::string& k : kinds())
    if (k == kind) return {};
  return io_error("unknown tokenizer '{}' (expected word, char, bpe or unigram)", kind);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::train(std::string_view kind, const std::vector<std::string>& sentences,
                                                    const TrainOptions& options) {
  if (kind == "byte_bpe") return internal::train_byte_bpe(sentences, options);
  TG_RETURN_IF_ERROR(check_kind(kind));
  return is_subword(kind) ? internal::train_sentencepiece(kind, sentences, options)
                          : internal::train_vocab_tokenizer(kind, sentences, options);
}

}  // namespace tg::text
