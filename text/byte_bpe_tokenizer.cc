// Byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM) read from a Hugging Face tokenizer.json, giving
// the ids of the Hugging Face `tokenizers` package:
//   1. added tokens (<|endoftext|>, <|begin_of_text|>, ...) are cut out of the text first, leftmost
//      and longest first, and become their own ids; the rest is NFC-normalized if the file says so
//      (tables from nfc_tables.inc, tools/make_nfc_tables.py);
//   2. each remaining segment is split by the pre-tokenizer: its regex (GPT-2's, Llama 3's or
//      Qwen2's, matched by hand below: std::regex has no \p{L} and backtracks slowly) and/or
//      single digits;
//   3. each piece's UTF-8 bytes become printable characters (GPT-2's bytes_to_unicode), which
//      byte-pair merges join by rank into vocabulary tokens.
// Decoding maps the characters back to bytes. The SentencePiece-style files of Llama 2, TinyLlama
// and Mistral (BPE with byte fallback) take the other path marked metaspace_: spaces become "▁",
// one is put before the text, the text is not split, and characters outside the vocabulary become
// their UTF-8 bytes' <0xXX> tokens. The Unicode classes come from byte_bpe_unicode.inc,
// probed from `tokenizers` itself by tools/make_byte_bpe_unicode.py.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "io/file.h"
#include "text/tokenizer_internal.h"

namespace tg::text::internal {
namespace {

struct CodeRange {
  char32_t first, last;
};
#include "byte_bpe_unicode.inc"

template <size_t N>
bool in(const CodeRange (&table)[N], char32_t c) {
  const CodeRange* it = std::upper_bound(table, table + N, c, [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != table && c <= (it - 1)->last;
}
bool is_letter(char32_t c) { return c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : in(kLetter, c); }
bool is_number(char32_t c) { return c < 0x80 ? (c >= '0' && c <= '9') : in(kNumber, c); }
bool is_space(char32_t c) { return c < 0x80 ? (c == ' ' || (c >= 9 && c <= 13)) : in(kSpace, c); }
bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// ---- NFC (Qwen2's normalizer): decompose, order marks by class, compose (UAX #15) ----
struct Decomposition {
  char32_t cp;
  uint16_t start, length;
};
struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Composite {
  char32_t first, second, composite;
};
#include "nfc_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

int ccc_of(char32_t c) {
  if (c < kNfcStable) return 0;
  const auto* it = std::lower_bound(std::begin(kCcc), std::end(kCcc), c, [](const CombiningClass& e, char32_t v) { return e.cp < v; });
  return it != std::end(kCcc) && it->cp == c ? it->ccc : 0;
}

// The primary composite of a + b, or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* it = std::lower_bound(std::begin(kCompose), std::end(kCompose), std::make_pair(a, b),
                                    [](const Composite& e, const std::pair<char32_t, char32_t>& v) {
                                      return e.first != v.first ? e.first < v.first : e.second < v.second;
                                    });
  return it != std::end(kCompose) && it->first == a && it->second == b ? it->composite : 0;
}

std::u32string nfc(const std::u32string& in) {
  if (std::all_of(in.begin(), in.end(), [](char32_t c) { return c < kNfcStable; })) return in;
  std::u32string d;  // canonical decomposition
  for (char32_t c : in) {
    if (c >= kSBase && c < kSBase + kSCount) {
      const char32_t i = c - kSBase;
      d += kLBase + i / kNCount;
      d += kVBase + (i % kNCount) / kTCount;
      if (i % kTCount) d += kTBase + i % kTCount;
      continue;
    }
    const auto* it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), c,
                                      [](const Decomposition& e, char32_t v) { return e.cp < v; });
    if (c >= kNfcStable && it != std::end(kDecomp) && it->cp == c) d.append(kDecompPool + it->start, it->length);
    else d += c;
  }
  // Canonical order: each run of marks (non-zero class) sorted by class, stably; n log n in a run's
  // length, however long a hostile run is.
  std::vector<std::pair<int, char32_t>> run;
  for (size_t i = 0; i < d.size();) {
    if (ccc_of(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    run.clear();
    for (; end < d.size(); ++end) {
      const int cc = ccc_of(d[end]);
      if (cc == 0) break;
      run.emplace_back(cc, d[end]);
    }
    std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = 0; k < run.size(); ++k) d[i + k] = run[k].second;
    i = end;
  }
  std::u32string out;
  if (d.empty()) return out;
  out += d[0];
  size_t starter = 0;
  int last = ccc_of(d[0]) == 0 ? 0 : 256;
  for (size_t i = 1; i < d.size(); ++i) {
    const int cc = ccc_of(d[i]);
    if (last != 256 && (last < cc || last == 0)) {
      if (const char32_t c = compose(out[starter], d[i]); c != 0 && (last < cc || (last == 0 && starter + 1 == out.size()))) {
        out[starter] = c;
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      last = 0;
    } else {
      last = cc;
    }
    out += d[i];
  }
  return out;
}

// The split patterns we match exactly (as tokenizer.json files spell them).
enum class Pattern { kNone, kGpt2, kLlama3, kQwen2 };
constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Length of the contraction ('s 't 're 've 'm 'll 'd) at s[i], 0 if none; case-insensitive as
// Oniguruma folds: s also matches S and U+017F.
size_t contraction(const std::u32string& s, size_t i, bool fold) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  auto is = [&](size_t k, char32_t lower) {
    if (k >= s.size()) return false;
    const char32_t c = s[k];
    return c == lower || (fold && (c == lower - 32 || (lower == 's' && c == 0x17F)));
  };
  if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) return 2;
  if ((is(i + 1, 'r') || is(i + 1, 'v')) && is(i + 2, 'e')) return 3;
  if (is(i + 1, 'l') && is(i + 2, 'l')) return 3;
  return 0;
}

// The pattern's match at s[i] (its length; the patterns match every character, so never 0).
size_t match_at(const std::u32string& s, size_t i, Pattern p) {
  const size_t n = s.size();
  auto run = [&](size_t k, auto pred) {
    while (k < n && pred(s[k])) ++k;
    return k;
  };
  auto other = [](char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); };
  if (size_t c = contraction(s, i, p != Pattern::kGpt2)) return c;
  if (p == Pattern::kGpt2) {
    const size_t j = s[i] == ' ' && i + 1 < n ? i + 1 : i;  // ' ?' then a class
    for (auto pred : {+[](char32_t c) { return is_letter(c); }, +[](char32_t c) { return is_number(c); }}) {
      if (pred(s[j])) return run(j, pred) - i;
      if (j != i && pred(s[i])) return run(i, pred) - i;
    }
    if (other(s[j])) return run(j, other) - i;
  } else {
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_newline(s[i]) && !is_letter(s[i]) && !is_number(s[i]) && i + 1 < n && is_letter(s[i + 1]))
      return run(i + 1, is_letter) - i;
    if (is_letter(s[i])) return run(i, is_letter) - i;
    if (is_number(s[i])) {  // \p{N}{1,3} or \p{N}
      size_t k = i + 1;
      while (p == Pattern::kLlama3 && k < n && k < i + 3 && is_number(s[k])) ++k;
      return k - i;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t j = s[i] == ' ' && i + 1 < n && other(s[i + 1]) ? i + 1 : i;
    if (other(s[j])) return run(run(j, other), is_newline) - i;
    // \s*[\r\n]+ : up to the last line break of the whitespace run
    const size_t end = run(i, is_space);
    for (size_t k = end; k > i; --k)
      if (is_newline(s[k - 1])) return k - i;
  }
  // \s+(?!\S) then \s+
  const size_t end = run(i, is_space);
  if (end == n || end - i == 1) return end - i;
  return end - 1 - i;
}

// Decodes UTF-8 strictly; returns the byte offset of the first invalid sequence, or npos.
size_t decode_utf8(std::string_view s, std::u32string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) return i;
    char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return i;
      c = (c << 6) | (b & 0x3F);
    }
    constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    out.push_back(c);
    i += static_cast<size_t>(len);
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for U+0100 on.
std::array<char32_t, 256> byte_chars() {
  std::array<char32_t, 256> m{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    m[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return m;
}

using nlohmann::json;
std::string brief(const json& v) { return clip_for_message(v.dump(-1, ' ', false, json::error_handler_t::replace)); }
const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}
std::string type_of(const json* o) {
  return o && o->is_object() && o->contains("type") && (*o)["type"].is_string() ? (*o)["type"].get<std::string>() : "";
}

// A pipeline component's steps: the members of a {"type": "Sequence", KEY: [...]}, else the
// component itself (none when null).
std::vector<const json*> steps_of(const json* o, const char* key) {
  std::vector<const json*> out;
  if (o && type_of(o) == "Sequence" && o->contains(key) && (*o)[key].is_array()) {
    for (const json& s : (*o)[key]) out.push_back(&s);
  } else if (o) {
    out.push_back(o);
  }
  return out;
}

class ByteBpeTokenizer : public Tokenizer {
 public:
  // j: the file's JSON, parsed once (bytes: the file, kept for serialize()).
  static Result<std::unique_ptr<Tokenizer>> parse(const nlohmann::json& j, std::string_view bytes, std::string_view source);

  std::string kind() const override { return "byte_bpe"; }
  std::vector<std::string> tokenize(std::string_view text) const override {
    std::vector<std::string> out;
    for (int64_t id : encode(text)) out.push_back(token(id));
    return out;
  }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string token(int64_t id) const override {
    TG_CHECK(id >= 0 && id < size(), "Tokenizer", "id {} is outside the vocabulary [0, {})", id, size());
    return tokens_[static_cast<size_t>(id)];
  }
  int64_t id_of(std::string_view token) const override {
    auto it = vocab_.find(std::string(token));
    return it == vocab_.end() ? unk_id() : it->second;
  }
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::string serialize() const override { return bytes_; }
  // The text a token decodes to, unless that is nothing (a special token) or part of a character
  // (decoded as U+FFFD): then the token itself.
  std::string readable_token(int64_t id) const override {
    const std::string text = decode({id});
    return text.empty() || text.find("\xEF\xBF\xBD") != std::string::npos ? token(id) : text;
  }
  int64_t pad_id() const override { return pad_; }
  int64_t bos_id() const override { return bos_; }
  int64_t eos_id() const override { return -1; }  // generation stops at the model's eos (config.json)
  int64_t unk_id() const override { return unk_; }
  int64_t cls_id() const override { return bos_; }  // what the post-processor puts before a text (-1: nothing)
  int64_t sep_id() const override { return -1; }
  // The pre-tokenizer's pieces of `text` as byte-level characters (tokenizers' pre_tokenize_str).
  std::vector<std::string> pre_tokenize(std::string_view text) const {
    std::u32string cps;
    TG_CHECK(decode_utf8(text, cps) == std::string_view::npos, "Tokenizer", "the text is not valid UTF-8");
    std::vector<std::string> out;
    for_each_piece(nfc_ ? nfc(cps) : cps, [&](const std::string& w) { out.push_back(w); });
    return out;
  }

 private:
  // `first`: the segment starts the text (no added token before it).
  void for_each_piece(const std::u32string& text, const std::function<void(const std::string&)>& f, bool first = true) const;
  void encode_segment(const std::u32string& text, std::vector<int64_t>& out, bool first) const;
  void bpe(const std::string& word, std::vector<int64_t>& out) const;

  std::string bytes_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges_;  // (left id, right id) -> (rank, merged id)
  struct Added {
    std::string content;
    int64_t id;
    bool special;
  };
  std::vector<Added> added_;  // longest first
  std::vector<char> is_special_, is_added_;
  std::array<bool, 256> added_first_{};  // the first bytes of added tokens
  std::array<std::string, 256> byte_token_;  // each byte's character as UTF-8
  std::unordered_map<char32_t, int> char_byte_;
  Pattern pattern_ = Pattern::kNone;
  bool digits_ = false, ignore_merges_ = false, nfc_ = false;
  // SentencePiece-style (metaspace_): spaces become U+2581 ("▁"), one is put before the text (each
  // segment between added tokens with a Prepend normalizer or prepend_scheme "always"; the first
  // only with "first"), the pieces are not split (or split before each ▁), and characters outside
  // the vocabulary become <0xXX> byte tokens (byte_fallback) or the unknown token.
  enum class Prefix { kNone, kEverySegment, kFirstSegment };
  Status parse_metaspace(const nlohmann::json& j, std::string_view source);
  bool metaspace_ = false, byte_fallback_ = false, fuse_unk_ = false, split_meta_ = false, strip_space_ = false;
  bool prefix_unless_there_ = false;  // Metaspace: no ▁ is added to a text that starts with one
  bool meta_decoder_ = false;         // the Metaspace decoder: every ▁ of the first token is dropped
  Prefix prefix_ = Prefix::kNone;
  std::array<int64_t, 256> byte_ids_{};  // the <0xXX> tokens (-1: absent)
  std::vector<int> id_byte_;             // their inverse (-1: not a byte token)
  int64_t unk_ = -1, bos_ = -1, pad_ = -1;
};

void ByteBpeTokenizer::bpe(const std::string& word, std::vector<int64_t>& out) const {
  if (ignore_merges_)
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  // The word's characters (each one byte's) as ids.
  std::vector<int64_t> sym;
  for (size_t i = 0; i < word.size();) {
    const auto b0 = static_cast<unsigned char>(word[i]);
    const size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : 4;
    auto it = vocab_.find(word.substr(i, len));
    if (it != vocab_.end()) {
      sym.push_back(it->second);
    } else if (byte_fallback_) {
      for (size_t k = i; k < i + len && k < word.size(); ++k) sym.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
    } else if (!(fuse_unk_ && unk_ >= 0 && !sym.empty() && sym.back() == unk_)) {
      sym.push_back(unk_);
    }
    i += len;
  }
  // Merges by rank with a queue of candidate pairs, lowest rank first and then leftmost (as
  // tokenizers does it), over a linked list of symbols: O(n log n), so a long word (a
  // SentencePiece-style text is one word per segment) costs no quadratic time.
  const size_t n = sym.size();
  if (n > 1) {
    std::vector<int64_t> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
      prev[i] = static_cast<int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    }
    struct Candidate {
      int64_t rank, pos, left, right, merged;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto consider = [&](int64_t i) {
      if (i < 0 || next[static_cast<size_t>(i)] < 0) return;
      const int64_t l = sym[static_cast<size_t>(i)], r = sym[static_cast<size_t>(next[static_cast<size_t>(i)])];
      if (l < 0 || r < 0) return;
      auto it = merges_.find(static_cast<uint64_t>(l) << 32 | static_cast<uint64_t>(r));
      if (it != merges_.end()) queue.push({it->second.first, i, l, r, it->second.second});
    };
    for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int64_t>(i));
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      const auto i = static_cast<size_t>(c.pos);
      const int64_t j = next[i];
      if (sym[i] != c.left || j < 0 || sym[static_cast<size_t>(j)] != c.right) continue;  // stale
      sym[i] = c.merged;
      sym[static_cast<size_t>(j)] = -2;  // removed
      next[i] = next[static_cast<size_t>(j)];
      if (next[i] >= 0) prev[static_cast<size_t>(next[i])] = c.pos;
      consider(prev[i]);
      consider(c.pos);
    }
    std::vector<int64_t> kept;
    for (int64_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) kept.push_back(sym[static_cast<size_t>(i)]);
    sym.swap(kept);
  }
  for (int64_t id : sym)
    if (id >= 0) out.push_back(id);  // a character outside the vocabulary with no unk token is dropped, as tokenizers does
}

void ByteBpeTokenizer::encode_segment(const std::u32string& text, std::vector<int64_t>& out, bool first) const {
  for_each_piece(text, [&](const std::string& word) { bpe(word, out); }, first);
}

void ByteBpeTokenizer::for_each_piece(const std::u32string& text, const std::function<void(const std::string&)>& f,
                                      bool first) const {
  if (metaspace_) {
    constexpr char32_t kMeta = 0x2581;
    std::u32string w;
    const bool starts = !text.empty() && (text[0] == ' ' || text[0] == kMeta);
    if (!text.empty() && (prefix_ == Prefix::kEverySegment || (prefix_ == Prefix::kFirstSegment && first)) &&
        !(prefix_unless_there_ && starts))
      w += kMeta;
    for (char32_t c : text) w += c == ' ' ? kMeta : c;
    std::string piece;
    for (size_t i = 0; i < w.size(); ++i) {
      if (split_meta_ && w[i] == kMeta && !piece.empty()) {
        f(piece);
        piece.clear();
      }
      append_utf8(piece, w[i]);
    }
    if (!piece.empty()) f(piece);
    return;
  }
  std::string utf8, word;
  auto emit = [&](size_t from, size_t to) {
    utf8.clear();
    for (size_t k = from; k < to; ++k) append_utf8(utf8, text[k]);
    word.clear();
    for (char b : utf8) word += byte_token_[static_cast<unsigned char>(b)];
    f(word);
  };
  auto split = [&](size_t from, size_t to) {  // the pattern's pieces of text[from, to)
    if (pattern_ == Pattern::kNone) return emit(from, to);
    const std::u32string part = text.substr(from, to - from);
    for (size_t i = 0; i < part.size();) {
      const size_t len = match_at(part, i, pattern_);
      emit(from + i, from + i + len);
      i += len;
    }
  };
  if (!digits_) return split(0, text.size());
  size_t start = 0;  // Digits(individual_digits): each ASCII digit a piece of its own
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] >= '0' && text[i] <= '9') {
      if (start < i) split(start, i);
      split(i, i + 1);
      start = i + 1;
    }
  if (start < text.size()) split(start, text.size());
}

std::vector<int64_t> ByteBpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  std::u32string cps;
  auto segment = [&](std::string_view s, size_t offset) {
    if (s.empty()) return;
    cps.clear();
    const size_t bad = decode_utf8(s, cps);
    if (bad != std::string_view::npos) {
      const size_t at = offset + bad;
      const size_t line_start = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
      const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n')) + 1;
      const size_t column = line_start == std::string_view::npos ? at + 1 : at - line_start;
      TG_CHECK(false, "Tokenizer", "the text is not valid UTF-8: byte 0x{:02X} at line {}, column {}",
               static_cast<unsigned char>(text[at]), line, column);
    }
    encode_segment(nfc_ ? nfc(cps) : cps, out, offset == 0);
  };
  size_t from = 0, i = 0;
  while (i < text.size()) {
    const Added* hit = nullptr;
    if (added_first_[static_cast<unsigned char>(text[i])])
      for (const Added& a : added_)
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    segment(text.substr(from, i - from), from);
    out.push_back(hit->id);
    i += hit->content.size();
    from = i;
  }
  segment(text.substr(from), from);
  return out;
}

std::string ByteBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  if (metaspace_) {
    std::string out, pending;  // pending: a run of byte tokens (tokenizers' ByteFallback decoder)
    size_t pending_count = 0;
    auto flush = [&] {
      std::u32string cps;
      if (decode_utf8(pending, cps) == std::string_view::npos) out += pending;
      else for (size_t k = 0; k < pending_count; ++k) out += "\xEF\xBF\xBD";  // one U+FFFD per byte
      pending.clear();
      pending_count = 0;
    };
    bool first = true;  // the first token the decoders see (special tokens are skipped before)
    for (int64_t id : ids) {
      if (id < 0 || id >= size() || is_special_[static_cast<size_t>(id)]) continue;
      const bool drop_meta = first && meta_decoder_;
      first = false;
      if (const int b = id_byte_[static_cast<size_t>(id)]; b >= 0) {
        pending += static_cast<char>(b);
        ++pending_count;
        continue;
      }
      flush();
      const std::string& tkn = tokens_[static_cast<size_t>(id)];
      for (size_t i = 0; i < tkn.size();) {
        if (tkn.compare(i, 3, "\xE2\x96\x81") == 0 && !is_added_[static_cast<size_t>(id)]) {
          if (!drop_meta) out += ' ';
          i += 3;
        } else {
          out += tkn[i++];
        }
      }
    }
    flush();
    if (strip_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
  }
  std::string bytes;
  for (int64_t id : ids) {
    if (id < 0 || id >= size() || is_special_[static_cast<size_t>(id)]) continue;
    if (is_added_[static_cast<size_t>(id)]) {
      bytes += tokens_[static_cast<size_t>(id)];
      continue;
    }
    std::u32string cps;
    decode_utf8(tokens_[static_cast<size_t>(id)], cps);
    for (char32_t c : cps) {
      auto it = char_byte_.find(c);
      if (it != char_byte_.end()) bytes += static_cast<char>(it->second);
      else append_utf8(bytes, c);
    }
  }
  // Bytes that are not UTF-8 read as U+FFFD, as tokenizers' from_utf8_lossy.
  std::string out;
  std::u32string cps;
  for (size_t i = 0; i < bytes.size();) {
    cps.clear();
    const size_t bad = decode_utf8(std::string_view(bytes).substr(i), cps);
    for (char32_t c : cps) append_utf8(out, c);
    if (bad == std::string_view::npos) break;
    out += "\xEF\xBF\xBD";
    // Skip the maximal invalid prefix: a lead byte and the continuation bytes that fit it.
    size_t k = i + bad + 1;
    const auto b0 = static_cast<unsigned char>(bytes[i + bad]);
    const size_t want = (b0 >> 5) == 0x6 ? 1 : (b0 >> 4) == 0xE ? 2 : (b0 >> 3) == 0x1E ? 3 : 0;
    for (size_t c = 0; c < want && k < bytes.size() && (static_cast<unsigned char>(bytes[k]) & 0xC0) == 0x80; ++c) ++k;
    i = k;
  }
  return out;
}

Status ByteBpeTokenizer::parse_metaspace(const json& j, std::string_view source) {
  metaspace_ = true;
  const std::string meta = "\xE2\x96\x81";
  bool replaces_spaces = false;
  auto str = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string("\x01");
  };
  for (const json* n : steps_of(member(j, "normalizer"), "normalizers")) {
    const std::string type = type_of(n);
    if (type == "Prepend" && str(*n, "prepend") == meta) {
      prefix_ = Prefix::kEverySegment;
    } else if (type == "Replace" && n->contains("pattern") && str((*n)["pattern"], "String") == " " && str(*n, "content") == meta) {
      replaces_spaces = true;
    } else {
      return io_error("{}: normalizer step {} is not supported (SentencePiece-style BPE: Prepend \"▁\", Replace \" \" with \"▁\")",
                      source, brief(*n));
    }
  }
  if (const json* pre = member(j, "pre_tokenizer")) {
    if (type_of(pre) != "Metaspace" || str(*pre, "replacement") != meta)
      return io_error("{}: pre_tokenizer {} is not supported with byte fallback (Metaspace with \"▁\", or none)", source, brief(*pre));
    replaces_spaces = true;
    prefix_unless_there_ = true;
    const std::string scheme = str(*pre, "prepend_scheme");
    if (scheme == "always") prefix_ = Prefix::kEverySegment;
    else if (scheme == "first") prefix_ = Prefix::kFirstSegment;
    else if (scheme == "never") prefix_ = Prefix::kNone;
    else if (pre->contains("add_prefix_space") && (*pre)["add_prefix_space"].is_boolean())  // the older form
      prefix_ = (*pre)["add_prefix_space"].get<bool>() ? Prefix::kEverySegment : Prefix::kNone;
    else return io_error("{}: pre_tokenizer Metaspace prepend_scheme {} is not supported (always, first or never)", source,
                         pre->contains("prepend_scheme") ? brief((*pre)["prepend_scheme"]) : "(none)");
    if (const json* sp = member(*pre, "split")) split_meta_ = sp->is_boolean() && sp->get<bool>();
  }
  if (!replaces_spaces)
    return io_error("{}: a BPE with byte fallback whose spaces are not replaced by \"▁\" is not supported", source);
  for (const json* d : steps_of(member(j, "decoder"), "decoders")) {
    const std::string type = type_of(d);
    if (type == "Strip") {
      strip_space_ = str(*d, "content") == " " && d->contains("start") && (*d)["start"] == 1;
      if (!strip_space_ || !d->contains("stop") || (*d)["stop"] != 0)
        return io_error("{}: decoder step {} is not supported (Strip of one leading space)", source, brief(*d));
    } else if (type == "Metaspace") {
      meta_decoder_ = prefix_ != Prefix::kNone;
    } else if (type != "ByteFallback" && type != "Fuse" &&
               !(type == "Replace" && d->contains("pattern") && str((*d)["pattern"], "String") == meta && str(*d, "content") == " ")) {
      return io_error("{}: decoder step {} is not supported (Replace \"▁\", ByteFallback, Fuse, Strip, Metaspace)", source, brief(*d));
    }
  }
  byte_ids_.fill(-1);
  id_byte_.assign(tokens_.size(), -1);
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    if (it != vocab_.end()) {
      byte_ids_[static_cast<size_t>(b)] = it->second;
      id_byte_[static_cast<size_t>(it->second)] = b;
    } else if (byte_fallback_) {
      return io_error("{}: model.byte_fallback is on but the vocabulary has no token <0x{:02X}>", source, b);
    }
  }
  return {};
}

Result<std::unique_ptr<Tokenizer>> ByteBpeTokenizer::parse(const json& j, std::string_view bytes, std::string_view source) {
  auto t = std::make_unique<ByteBpeTokenizer>();
  t->bytes_ = std::string(bytes);
  const json& model = j["model"];
  // The BPE model: vocabulary, merges and the options that would change the result.
  if (const json* d = member(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0))
    return io_error("{}: model.dropout = {} is not supported (BPE dropout is for training)", source, brief(*d));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* v = member(model, key); v && !(v->is_string() && v->get<std::string>().empty()))
      return io_error("{}: model.{} = {} is not supported (byte-level BPE has none)", source, key, brief(*v));
  if (const json* v = member(model, "byte_fallback")) {
    if (!v->is_boolean()) return io_error("{}: model.byte_fallback = {} (expected true or false)", source, brief(*v));
    t->byte_fallback_ = v->get<bool>();
  }
  if (const json* v = member(model, "fuse_unk")) {
    if (!v->is_boolean()) return io_error("{}: model.fuse_unk = {} (expected true or false)", source, brief(*v));
    t->fuse_unk_ = v->get<bool>();
  }
  if (const json* v = member(model, "ignore_merges")) {
    if (!v->is_boolean()) return io_error("{}: model.ignore_merges = {} (expected true or false)", source, brief(*v));
    t->ignore_merges_ = v->get<bool>();
  }
  const json* vocab = member(model, "vocab");
  if (!vocab || !vocab->is_object() || vocab->empty()) return io_error("{}: model.vocab is not an object of tokens and ids", source);
  constexpr int64_t kMaxVocab = int64_t{1} << 24;
  int64_t n = 0;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() >= kMaxVocab)
      return io_error("{}: model.vocab['{}'] = {} (expected an id in [0, {}))", source, clip_for_message(it.key()),
                      brief(it.value()), kMaxVocab);
    n = std::max(n, it.value().get<int64_t>() + 1);
  }
  // Added tokens may have ids past the model's vocabulary.
  const json* added = member(j, "added_tokens");
  if (added && !added->is_array()) return io_error("{}: added_tokens is not a list", source);
  if (added)
    for (const json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string() || a["content"].get<std::string>().empty() || a["id"].get<int64_t>() < 0 ||
          a["id"].get<int64_t>() >= kMaxVocab)
        return io_error("{}: an added_tokens entry without an id in [0, {}) and a content string: {}", source, kMaxVocab, brief(a));
      n = std::max(n, a["id"].get<int64_t>() + 1);
    }
  // Holes are allowed, but not a sparse table that a few entries could make huge.
  const int64_t entries = static_cast<int64_t>(vocab->size() + (added ? added->size() : 0));
  if (n > 2 * entries + 65536)
    return io_error("{}: the largest id is {} for {} tokens (too sparse a vocabulary)", source, n - 1, entries);
  t->tokens_.assign(static_cast<size_t>(n), std::string());
  t->is_special_.assign(static_cast<size_t>(n), 0);
  t->is_added_.assign(static_cast<size_t>(n), 0);
  std::vector<char> used(static_cast<size_t>(n), 0);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const auto id = static_cast<size_t>(it.value().get<int64_t>());
    if (used[id]) return io_error("{}: model.vocab gives id {} to '{}' and '{}'", source, id, clip_for_message(t->tokens_[id]),
                                  clip_for_message(it.key()));
    used[id] = 1;
    t->tokens_[id] = it.key();
    t->vocab_[it.key()] = static_cast<int64_t>(id);
  }
  if (added)
    for (const json& a : *added) {
      const auto id = static_cast<size_t>(a["id"].get<int64_t>());
      const std::string content = a["content"].get<std::string>();
      if (used[id] && t->tokens_[id] != content)
        return io_error("{}: added token '{}' has id {}, which the vocabulary gives to '{}'", source, clip_for_message(content), id,
                        clip_for_message(t->tokens_[id]));
      // Each added token once: a repeated entry would be matched again at every position of a text.
      if (t->is_added_[id])
        return io_error("{}: added token '{}' (id {}) is listed twice in added_tokens", source, clip_for_message(content), id);
      if (auto same = t->vocab_.find(content); same != t->vocab_.end() && t->is_added_[static_cast<size_t>(same->second)])
        return io_error("{}: added token '{}' is listed twice in added_tokens (ids {} and {})", source, clip_for_message(content),
                        same->second, id);
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        if (a.contains(key) && !(a[key].is_boolean() && !a[key].get<bool>()))
          return io_error("{}: added token '{}' has {} = {}, which is not supported", source, clip_for_message(content), key,
                          brief(a[key]));
      used[id] = 1;
      t->tokens_[id] = content;
      t->vocab_[content] = static_cast<int64_t>(id);
      const bool special = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
      t->is_special_[id] = special;
      t->added_.push_back({content, static_cast<int64_t>(id), special});
      t->is_added_[id] = 1;
      t->added_first_[static_cast<unsigned char>(content[0])] = true;
    }
  // Ids no token has (tokenizers allows such holes) decode to nothing.
  for (size_t id = 0; id < used.size(); ++id)
    if (!used[id]) t->is_special_[id] = 1;
  std::stable_sort(t->added_.begin(), t->added_.end(), [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
  if (const json* u = member(model, "unk_token")) {
    if (!u->is_string() || !t->vocab_.count(u->get<std::string>()))
      return io_error("{}: model.unk_token = {} is not in the vocabulary", source, brief(*u));
    t->unk_ = t->vocab_[u->get<std::string>()];
  }
  // Merges: "a b" strings or ["a", "b"] pairs, by rank; each result must be a token.
  const json* merges = member(model, "merges");
  if (!merges || !merges->is_array()) return io_error("{}: model.merges is not a list", source);
  int64_t rank = 0;
  for (const json& m : *merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        return io_error("{}: merge {} of model.merges is {} (expected \"left right\")", source, rank, brief(m));
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      return io_error("{}: merge {} of model.merges is {} (expected \"left right\" or [\"left\", \"right\"])", source, rank, brief(m));
    }
    auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), ic = t->vocab_.find(a + b);
    if (ia == t->vocab_.end() || ib == t->vocab_.end() || ic == t->vocab_.end())
      return io_error("{}: merge {} of model.merges ({}) joins tokens that are not all in the vocabulary", source, rank, brief(m));
    t->merges_.emplace(static_cast<uint64_t>(ia->second) << 32 | static_cast<uint64_t>(ib->second), std::make_pair(rank, ic->second));
    ++rank;
  }
  // SentencePiece-style BPE (Llama 2, TinyLlama, Mistral): spaces as U+2581, byte fallback.
  const json* norm_j = member(j, "normalizer");
  const json* pre_j = member(j, "pre_tokenizer");
  bool metaspace = t->byte_fallback_ || type_of(pre_j) == "Metaspace";
  for (const json* n : steps_of(norm_j, "normalizers")) metaspace = metaspace || type_of(n) == "Prepend" || type_of(n) == "Replace";
  if (metaspace) {
    TG_RETURN_IF_ERROR(t->parse_metaspace(j, source));
  } else {
    // The byte alphabet: every byte's character must be a token.
    const std::array<char32_t, 256> chars = byte_chars();
    for (int b = 0; b < 256; ++b) {
      std::string s;
      append_utf8(s, chars[static_cast<size_t>(b)]);
      if (!t->vocab_.count(s))
        return io_error("{}: the vocabulary lacks the byte-level character of byte 0x{:02X} ('{}'): not a byte-level BPE", source, b, s);
      t->byte_token_[static_cast<size_t>(b)] = s;
      t->char_byte_[chars[static_cast<size_t>(b)]] = b;
    }
    // Normalizer: none, or NFC (Qwen2), alone or as a one-step Sequence.
    if (const json* norm = member(j, "normalizer")) {
      const std::vector<const json*> n = steps_of(norm, "normalizers");
      if (n.size() != 1 || type_of(n[0]) != "NFC")
        return io_error("{}: normalizer '{}' is not supported (byte-level BPE: none or NFC)", source,
                        type_of(norm).empty() ? brief(*norm) : type_of(norm));
      t->nfc_ = true;
    }
    // Pre-tokenizer: ByteLevel (with GPT-2's regex or after a Split), optionally after Digits.
    const json* pre = member(j, "pre_tokenizer");
    bool byte_level = false;
    for (const json* s : steps_of(pre, "pretokenizers")) {
      const std::string type = type_of(s);
      if (byte_level) return io_error("{}: pre_tokenizer step '{}' after ByteLevel is not supported", source, type);
      if (type == "ByteLevel") {
        byte_level = true;
        if (const json* v = member(*s, "add_prefix_space"); v && !(v->is_boolean() && !v->get<bool>()))
          return io_error("{}: pre_tokenizer ByteLevel add_prefix_space = {} is not supported", source, brief(*v));
        const json* re = member(*s, "use_regex");
        if (!re || (re->is_boolean() && re->get<bool>())) {
          if (t->pattern_ != Pattern::kNone) return io_error("{}: pre_tokenizer splits twice (Split, then ByteLevel's regex)", source);
          t->pattern_ = Pattern::kGpt2;
        }
      } else if (type == "Split") {
        const json* pat = member(*s, "pattern");
        const json* regex = pat && pat->is_object() ? member(*pat, "Regex") : nullptr;
        const std::string p = regex && regex->is_string() ? regex->get<std::string>() : "";
        const std::string behavior = s->contains("behavior") && (*s)["behavior"].is_string() ? (*s)["behavior"].get<std::string>() : "";
        const bool invert = s->contains("invert") && (*s)["invert"].is_boolean() && (*s)["invert"].get<bool>();
        if (behavior != "Isolated" || invert)
          return io_error("{}: pre_tokenizer Split with behavior {} and invert {} is not supported (Isolated, false)", source,
                          s->contains("behavior") ? brief((*s)["behavior"]) : "(none)", invert);
        if (t->pattern_ != Pattern::kNone) return io_error("{}: pre_tokenizer has two split patterns", source);
        t->pattern_ = p == kGpt2Regex ? Pattern::kGpt2 : p == kLlama3Regex ? Pattern::kLlama3 : p == kQwen2Regex ? Pattern::kQwen2 : Pattern::kNone;
        if (t->pattern_ == Pattern::kNone)
          return io_error("{}: pre_tokenizer split pattern {} is not supported (GPT-2's, Llama 3's or Qwen2's only)", source,
                          pat ? brief(*pat) : "(none)");
      } else if (type == "Digits") {
        const json* ind = member(*s, "individual_digits");
        if (!ind || !ind->is_boolean() || !ind->get<bool>())
          return io_error("{}: pre_tokenizer Digits without individual_digits is not supported", source);
        if (t->pattern_ != Pattern::kNone) return io_error("{}: pre_tokenizer Digits after a split is not supported", source);
        t->digits_ = true;
      } else {
        return io_error("{}: pre_tokenizer '{}' is not supported (byte-level BPE: ByteLevel, Split, Digits)", source,
                        type.empty() ? "(none)" : type);
      }
    }
    if (!byte_level)
      return io_error("{}: no ByteLevel pre_tokenizer: not a byte-level BPE (Metaspace / SentencePiece-style BPE is not supported yet)",
                      source);
    if (const json* dec = member(j, "decoder"); dec && type_of(dec) != "ByteLevel")
      return io_error("{}: decoder '{}' is not supported (ByteLevel)", source, type_of(dec).empty() ? brief(*dec) : type_of(dec));
  }
  // Post-processor: ByteLevel (nothing added) and/or a template that puts a token before $A.
  for (const json* p : steps_of(member(j, "post_processor"), "processors")) {
    const std::string type = type_of(p);
    if (type == "ByteLevel") continue;
    if (type != "TemplateProcessing")
      return io_error("{}: post_processor '{}' is not supported (ByteLevel or TemplateProcessing)", source, type);
    const json* single = member(*p, "single");
    bool ok = single && single->is_array() && !single->empty() && single->size() <= 2;
    size_t seq_at = SIZE_MAX;
    for (size_t k = 0; ok && k < single->size(); ++k) {
      const json& item = (*single)[k];
      if (item.contains("Sequence")) {
        // Only "$A" once: "$A $A" (the sequence twice) or "$B" would not be what we produce.
        const json& seq = item["Sequence"];
        ok = seq_at == SIZE_MAX && seq.is_object() && seq.contains("id") && seq["id"] == "A";
        seq_at = k;
      } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string()) {
        auto it = t->vocab_.find(item["SpecialToken"]["id"].get<std::string>());
        ok = it != t->vocab_.end();
        if (ok) t->bos_ = it->second;
      } else {
        ok = false;
      }
    }
    if (!ok || seq_at == SIZE_MAX || (single->size() == 2 && seq_at != 1) || (single->size() == 1 && t->bos_ >= 0))
      return io_error("{}: post_processor template {} is not supported (\"$A\" or \"TOKEN $A\")", source,
                      single ? brief(*single) : "(none)");
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

std::u32string nfc_for_tests(const std::u32string& in) { return nfc(in); }

Result<std::unique_ptr<Tokenizer>> parse_hf_tokenizer_json(std::string_view bytes, std::string_view source) {
  // Parsed once here; a BPE model is read from it, anything else goes to the WordPiece reader,
  // which names what it cannot read (depth and syntax errors included).
  if (json_depth(bytes, 16) <= 16) {
    const json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("model") && type_of(&j["model"]) == "BPE") return ByteBpeTokenizer::parse(j, bytes, source);
  }
  return parse_wordpiece(bytes, source);
}

// Byte-pair training as Hugging Face's BpeTrainer does it on a byte-level model: the texts are split
// by GPT-2's pattern, each distinct piece counted once with its frequency; starting from the 256
// byte tokens, the most frequent adjacent pair (ties: the smaller ids) is merged into a new token,
// the counts of the pairs around each merged occurrence updated in place, until the vocabulary is
// full or no pair occurs min_count times.
Result<std::unique_ptr<Tokenizer>> train_byte_bpe(const std::vector<std::string>& texts, const TrainOptions& o) {
  constexpr std::string_view kWhere = "byte_bpe training";
  if (o.lowercase) return io_error("{}: lowercase is not supported (byte-level BPE keeps the text as it is)", kWhere);
  using ojson = nlohmann::ordered_json;
  std::vector<std::string> tokens = {"<|endoftext|>"};
  ojson added = ojson::array();
  auto add_token = [&](const std::string& content, bool special) {
    added.push_back({{"id", tokens.size() - 1}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", special}});
  };
  add_token(tokens[0], true);
  for (const std::string& u : o.user_symbols) {
    std::u32string probe;
    if (u.empty() || decode_utf8(u, probe) != std::string_view::npos || std::find(tokens.begin(), tokens.end(), u) != tokens.end())
      return io_error("{}: user symbol '{}' is empty, not UTF-8 or given twice", kWhere, clip_for_message(u));
    tokens.push_back(u);
    add_token(u, false);
  }
  const auto first_byte = static_cast<int32_t>(tokens.size());
  const std::array<char32_t, 256> chars = byte_chars();
  std::unordered_map<char32_t, int32_t> char_id;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(s, chars[static_cast<size_t>(b)]);
    char_id[chars[static_cast<size_t>(b)]] = static_cast<int32_t>(tokens.size());
    tokens.push_back(s);
  }
  if (o.vocab_size < static_cast<int64_t>(tokens.size()))
    return io_error("{}: a vocabulary of {} cannot hold the 256 byte tokens and {} added token(s)", kWhere, o.vocab_size, first_byte);
  std::vector<std::pair<int32_t, int32_t>> merges;
  auto to_json = [&] {
    ojson vocab = ojson::object();
    for (size_t id = 0; id < tokens.size(); ++id)
      if (!vocab.contains(tokens[id])) vocab[tokens[id]] = id;
    ojson m = ojson::array();
    for (auto [a, b] : merges) m.push_back({tokens[static_cast<size_t>(a)], tokens[static_cast<size_t>(b)]});
    const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    ojson j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
               {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"post_processor", byte_level}, {"decoder", byte_level},
               {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                          {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                          {"vocab", vocab}, {"merges", m}}}};
    const std::string bytes = j.dump(1, ' ', false) + "\n";
    return ByteBpeTokenizer::parse(j, bytes, kWhere);
  };

  // The pieces, as the trained tokenizer will split text, and how often each occurs.
  auto boot = to_json();
  if (!boot.ok()) return boot.status();
  const auto& splitter = dynamic_cast<const ByteBpeTokenizer&>(**boot);
  std::unordered_map<std::string, int64_t> counts;
  for (size_t t = 0; t < texts.size(); ++t) {
    std::u32string cps;
    const std::string_view text = texts[t];
    if (const size_t bad = decode_utf8(text, cps); bad != std::string_view::npos) {
      const auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n') + 1;
      return io_error("{}: text {} is not valid UTF-8 (byte 0x{:02X} on its line {})", kWhere, t + 1,
                      static_cast<unsigned char>(text[bad]), line);
    }
    for (std::string& piece : splitter.pre_tokenize(text)) ++counts[std::move(piece)];
  }
  if (counts.empty()) return io_error("{}: no text to learn from", kWhere);

  // Each distinct piece as token ids (sorted, so that the same texts give the same file).
  struct Word {
    std::vector<int32_t> s;
    int64_t n;
  };
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [piece, n] : sorted) {
    std::u32string cps;
    decode_utf8(piece, cps);
    Word w{{}, n};
    for (char32_t c : cps) w.s.push_back(char_id.at(c));
    words.push_back(std::move(w));
  }
  auto key = [](int32_t a, int32_t b) { return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b); };
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // words that held the pair (maybe no longer)
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].s.size(); ++i) {
      const uint64_t k = key(words[w].s[i], words[w].s[i + 1]);
      pair_count[k] += words[w].n;
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  // Most frequent first; among equals the smaller pair. Entries go stale as counts change: a
  // popped entry whose count is no longer the pair's is skipped (its current count was pushed).
  using Entry = std::pair<int64_t, uint64_t>;
  auto later = [](const Entry& x, const Entry& y) { return x.first != y.first ? x.first < y.first : x.second > y.second; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> queue(later);
  for (const auto& [k, n] : pair_count) queue.push({n, k});
  std::unordered_map<std::string, int32_t> existing;
  for (size_t id = 0; id < tokens.size(); ++id) existing.emplace(tokens[id], static_cast<int32_t>(id));
  std::vector<int32_t> visited(words.size(), -1);
  const int64_t min_count = std::max<int64_t>(o.min_count, 1);
  while (static_cast<int64_t>(tokens.size()) < o.vocab_size && !queue.empty()) {
    const auto [n, k] = queue.top();
    queue.pop();
    auto it = pair_count.find(k);
    if (it == pair_count.end() || it->second != n) continue;
    if (n < min_count) break;
    const auto a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xFFFFFFFFu);
    const std::string joined = tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)];
    auto [at, fresh] = existing.emplace(joined, static_cast<int32_t>(tokens.size()));
    if (fresh) tokens.push_back(joined);
    const int32_t merged = at->second, step = static_cast<int32_t>(merges.size());
    merges.emplace_back(a, b);
    std::unordered_map<uint64_t, int64_t> delta;
    const std::vector<int32_t> holders = std::move(where[k]);
    where.erase(k);
    for (int32_t w : holders) {
      if (visited[static_cast<size_t>(w)] == step) continue;
      visited[static_cast<size_t>(w)] = step;
      Word& word = words[static_cast<size_t>(w)];
      std::vector<int32_t> next;
      next.reserve(word.s.size());
      bool hit = false;
      for (size_t i = 0; i < word.s.size(); ++i) {
        if (i + 1 < word.s.size() && word.s[i] == a && word.s[i + 1] == b) {
          next.push_back(merged);
          ++i;
          hit = true;
        } else {
          next.push_back(word.s[i]);
        }
      }
      if (!hit) continue;
      for (size_t i = 0; i + 1 < word.s.size(); ++i) delta[key(word.s[i], word.s[i + 1])] -= word.n;
      for (size_t i = 0; i + 1 < next.size(); ++i) {
        const uint64_t nk = key(next[i], next[i + 1]);
        delta[nk] += word.n;
        if (next[i] == merged || next[i + 1] == merged) {
          auto& list = where[nk];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
      word.s = std::move(next);
    }
    for (const auto& [dk, d] : delta) {
      if (d == 0) continue;
      int64_t& c = pair_count[dk];
      c += d;
      if (c > 0) queue.push({c, dk});
      else pair_count.erase(dk);
    }
    pair_count.erase(k);
  }
  return to_json();
}

std::vector<std::string> byte_bpe_pre_tokenize(const Tokenizer& t, std::string_view text) {
  const auto* b = dynamic_cast<const ByteBpeTokenizer*>(&t);
  TG_CHECK(b != nullptr, "byte_bpe_pre_tokenize", "the tokenizer is {}, not byte_bpe", t.kind());
  return b->pre_tokenize(text);
}

}  // namespace tg::text::internal
