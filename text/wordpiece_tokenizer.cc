// WordPiece (BERT) read from a Hugging Face tokenizer.json: the BertNormalizer, the
// BertPreTokenizer, the WordPiece model and the [CLS] A [SEP] (B [SEP]) template, giving the ids
// of the Hugging Face `tokenizers` package. The Unicode classes come from bert_unicode.inc, made
// by tools/make_bert_unicode.py by probing that package's own normalizer and pre-tokenizer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/file.h"
#include "text/tokenizer_internal.h"

namespace tg::text::internal {
namespace {

struct CodeRange {
  char32_t first, last;
};
struct CodeMap {
  char32_t from;
  const char* to;
};
#include "bert_unicode.inc"

template <size_t N>
bool in(const CodeRange (&table)[N], char32_t c) {
  const CodeRange* it = std::upper_bound(table, table + N, c, [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != table && c <= (it - 1)->last;
}
template <size_t N>
const char* mapped(const CodeMap (&table)[N], char32_t c) {
  const CodeMap* it = std::lower_bound(table, table + N, c, [](const CodeMap& m, char32_t v) { return m.from < v; });
  return it != table + N && it->from == c ? it->to : nullptr;
}

// Decodes one code point at s[i], advancing i; an invalid byte reads as U+FFFD (which the
// normalizer's clean_text removes, as Python would have refused the bytes).
char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (b & 0x3F);
  }
  const char32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += static_cast<size_t>(len);
  return c;
}

void append_utf8(std::u32string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// Lookups by string_view without building a string (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct NormalizerOptions {
  bool clean_text = true, chinese = true, strip_accents = true, lowercase = true;
};

// Canonical decomposition of a Hangul syllable (Unicode's formula): L V (T).
bool decompose_hangul(char32_t c, std::u32string& out) {
  constexpr char32_t kS = 0xAC00, kL = 0x1100, kV = 0x1161, kT = 0x11A7, kVCount = 21, kTCount = 28, kCount = 11172;
  if (c < kS || c >= kS + kCount) return false;
  const char32_t i = c - kS;
  out.push_back(kL + i / (kVCount * kTCount));
  out.push_back(kV + (i % (kVCount * kTCount)) / kTCount);
  if (i % kTCount) out.push_back(kT + i % kTCount);
  return true;
}

// The BertNormalizer, one code point at a time. Hugging Face's is too, except that its NFD also
// reorders runs of combining marks by class: that differs only where two marks that survive
// accent stripping (of 83 rare code points: spacing viramas, Hangul tone marks, musical flags)
// stand out of order in one run (tools/make_bert_unicode.py lists them).
std::u32string normalize(std::u32string_view text, const NormalizerOptions& o) {
  std::u32string out, step;
  out.reserve(text.size() + 8);
  for (char32_t c : text) {
    if (o.clean_text) {
      if (in(kBertControl, c)) continue;
      if (in(kBertWhitespace, c)) c = U' ';
    }
    const bool chinese = o.chinese && in(kBertChinese, c);
    if (chinese) out.push_back(U' ');
    step.clear();
    if (o.strip_accents) {
      if (const char* d = mapped(kBertDecompose, c)) {
        append_utf8(step, d);
      } else if (!decompose_hangul(c, step)) {
        step.push_back(c);
      }
      std::erase_if(step, [](char32_t m) { return in(kBertMarks, m); });
    } else {
      step.push_back(c);
    }
    for (char32_t s : step) {
      if (o.lowercase) {
        if (const char* l = mapped(kBertLower, s)) {
          append_utf8(out, l);
          continue;
        }
      }
      out.push_back(s);
    }
    if (chinese) out.push_back(U' ');
  }
  return out;
}

class WordPieceTokenizer final : public Tokenizer {
 public:
  std::string kind() const override { return "wordpiece"; }

  std::vector<std::string> tokenize(std::string_view text) const override {
    std::vector<std::string> out;
    for (int64_t id : encode(text)) out.push_back(tokens_[static_cast<size_t>(id)]);
    return out;
  }

  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    // Added tokens ([CLS], [MASK], ...) written in the text are matched before normalization.
    // Each token's next occurrence is searched again only once the text has moved past it, so
    // the scan stays linear in the text for every token.
    std::vector<size_t> next(added_.size(), 0);
    std::vector<bool> searched(added_.size(), false);
    size_t start = 0;
    while (start < text.size()) {
      size_t best = std::string_view::npos, best_len = 0;
      int64_t best_id = -1;
      for (size_t k = 0; k < added_.size(); ++k) {
        const auto& [content, id] = added_[k];
        if (!searched[k] || next[k] < start) {
          next[k] = text.find(content, start);
          searched[k] = true;
        }
        const size_t at = next[k];
        if (at == std::string_view::npos) continue;
        if (at < best || (at == best && content.size() > best_len)) {
          best = at;
          best_len = content.size();
          best_id = id;
        }
      }
      encode_plain(text.substr(start, best == std::string_view::npos ? std::string_view::npos : best - start), ids);
      if (best == std::string_view::npos) break;
      ids.push_back(best_id);
      start = best + best_len;
    }
    return ids;
  }

  // Hugging Face's WordPiece decoder with cleanup, skipping the special tokens.
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string out;
    for (int64_t id : ids) {
      if (id < 0 || id >= size() || special_[static_cast<size_t>(id)]) continue;
      const std::string& t = tokens_[static_cast<size_t>(id)];
      if (t.rfind(prefix_, 0) == 0 && !out.empty()) {
        out += t.substr(prefix_.size());
      } else {
        if (!out.empty()) out += ' ';
        out += t;
      }
    }
    for (const auto& [from, to] : {std::pair{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                   {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}) {
      for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + std::string_view(to).size()))
        out.replace(at, std::string_view(from).size(), to);
    }
    return out;
  }

  std::string token(int64_t id) const override {
    TG_CHECK(id >= 0 && id < size(), "Tokenizer::token", "id {} out of range for a vocabulary of {}", id, size());
    return tokens_[static_cast<size_t>(id)];
  }
  int64_t id_of(std::string_view token) const override {
    auto it = vocab_.find(token);
    return it == vocab_.end() ? unk_ : it->second;
  }
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::string serialize() const override { return bytes_; }

  int64_t pad_id() const override { return pad_; }
  int64_t bos_id() const override { return cls_; }
  int64_t eos_id() const override { return sep_; }
  int64_t unk_id() const override { return unk_; }

  static Result<std::unique_ptr<Tokenizer>> parse(std::string_view bytes, std::string_view source);

 private:
  // Normalize, split into words, and each word into pieces.
  void encode_plain(std::string_view text, std::vector<int64_t>& ids) const {
    if (text.empty()) return;
    std::u32string cps;
    append_utf8(cps, text);
    const std::u32string norm = normalize(cps, norm_);
    std::u32string word;
    auto flush = [&] {
      if (!word.empty()) word_pieces(word, ids);
      word.clear();
    };
    for (char32_t c : norm) {
      if (split_on_space_ && in(kBertSplitSpace, c)) {
        flush();
      } else if (split_on_punct_ && in(kBertPunct, c)) {
        flush();
        word.push_back(c);
        flush();
      } else {
        word.push_back(c);
      }
    }
    flush();
  }

  // Greedy longest-match-first; a word with a part no piece covers, or longer than
  // max_input_chars_per_word, is one unknown token.
  void word_pieces(const std::u32string& word, std::vector<int64_t>& ids) const {
    if (static_cast<int64_t>(word.size()) > max_chars_) {
      ids.push_back(unk_);
      return;
    }
    std::string utf8;
    std::vector<size_t> offset;
    for (char32_t c : word) {
      offset.push_back(utf8.size());
      append_utf8(utf8, c);
    }
    offset.push_back(utf8.size());
    const size_t mark = ids.size();
    std::string candidate;
    for (size_t start = 0; start < word.size();) {
      size_t end = word.size();
      int64_t found = -1;
      for (; end > start; --end) {
        candidate.assign(start > 0 ? prefix_ : "");
        candidate.append(utf8, offset[start], offset[end] - offset[start]);
        if (auto it = vocab_.find(candidate); it != vocab_.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0) {
        ids.resize(mark);
        ids.push_back(unk_);
        return;
      }
      ids.push_back(found);
      start = end;
    }
  }

  std::string bytes_;
  std::vector<std::string> tokens_;
  std::vector<bool> special_;
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::pair<std::string, int64_t>> added_;
  NormalizerOptions norm_;
  bool split_on_space_ = true, split_on_punct_ = true;
  std::string prefix_ = "##";
  int64_t max_chars_ = 100, unk_ = -1, pad_ = 0, cls_ = -1, sep_ = -1;
};

using nlohmann::json;

// A JSON value in a message: compact and short.
std::string brief(const nlohmann::json& v) { return clip_for_message(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)); }

// The `key` member of object j when it is of the wanted kind; null when absent or JSON null.
const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Result<std::unique_ptr<Tokenizer>> WordPieceTokenizer::parse(std::string_view bytes, std::string_view source) {
  if (json_depth(bytes, 16) > 16) return io_error("{}: the JSON is nested too deeply for a tokenizer.json", source);
  const json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return io_error("{}: not valid JSON (a Hugging Face tokenizer.json was expected)", source);
  if (!j.is_object()) return io_error("{}: the JSON is not an object (a Hugging Face tokenizer.json was expected)", source);
  auto t = std::make_unique<WordPieceTokenizer>();
  t->bytes_ = std::string(bytes);
  const json* model = member(j, "model");
  if (!model || !model->is_object()) return io_error("{}: no \"model\" object (not a Hugging Face tokenizer.json)", source);
  const json* type = member(*model, "type");
  const std::string mtype = type && type->is_string() ? type->get<std::string>() : "";
  if (mtype != "WordPiece")
    return io_error("{}: model type '{}' is not supported (expected a WordPiece model, as BERT's)", source,
                    mtype.empty() ? "(none)" : mtype);
  // The vocabulary: token -> id, ids 0..N-1 each once.
  const json* vocab = member(*model, "vocab");
  if (!vocab || !vocab->is_object() || vocab->empty()) return io_error("{}: model.vocab is missing or empty", source);
  const size_t n = vocab->size();
  t->tokens_.assign(n, {});
  std::vector<bool> seen(n, false);
  for (const auto& [tok, idv] : vocab->items()) {
    if (!idv.is_number_integer() || idv.get<int64_t>() < 0 || idv.get<int64_t>() >= static_cast<int64_t>(n))
      return io_error("{}: model.vocab[{}] = {} is not an id in 0..{}", source, brief(json(tok)), brief(idv), n - 1);
    const auto id = static_cast<size_t>(idv.get<int64_t>());
    if (seen[id]) return io_error("{}: model.vocab gives id {} to two tokens ({} and {})", source, id, brief(json(t->tokens_[id])), brief(json(tok)));
    seen[id] = true;
    t->tokens_[id] = tok;
    t->vocab_.emplace(tok, static_cast<int64_t>(id));
  }
  t->special_.assign(n, false);
  auto id_of_token = [&](const json* v, const char* what) -> Result<int64_t> {
    if (!v || !v->is_string()) return io_error("{}: {} is missing or not a string", source, what);
    auto it = t->vocab_.find(v->get<std::string>());
    if (it == t->vocab_.end()) return io_error("{}: {} '{}' is not in the vocabulary", source, what, v->get<std::string>());
    return it->second;
  };
  Result<int64_t> unk = id_of_token(member(*model, "unk_token"), "model.unk_token");
  if (!unk.ok()) return unk.status();
  t->unk_ = *unk;
  if (const json* p = member(*model, "continuing_subword_prefix")) {
    if (!p->is_string()) return io_error("{}: model.continuing_subword_prefix is not a string", source);
    t->prefix_ = p->get<std::string>();
  }
  if (const json* m = member(*model, "max_input_chars_per_word")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1)
      return io_error("{}: model.max_input_chars_per_word = {} (expected a positive whole number)", source, brief(*m));
    t->max_chars_ = m->get<int64_t>();
  }
  // Normalizer and pre-tokenizer: BERT's (or none).
  auto flag = [&](const json& o, const char* key, bool dflt) -> Result<bool> {
    const json* v = member(o, key);
    if (!v) return dflt;
    if (!v->is_boolean()) return io_error("{}: normalizer.{} = {} is not true or false", source, key, brief(*v));
    return v->get<bool>();
  };
  auto kind_of = [](const json* o) { return o && o->is_object() && o->contains("type") && (*o)["type"].is_string() ? (*o)["type"].get<std::string>() : std::string(); };
  if (const json* nm = member(j, "normalizer")) {
    if (kind_of(nm) != "BertNormalizer")
      return io_error("{}: normalizer '{}' is not supported (expected BertNormalizer or none)", source, kind_of(nm));
    Result<bool> clean = flag(*nm, "clean_text", true), chinese = flag(*nm, "handle_chinese_chars", true),
                 lower = flag(*nm, "lowercase", true);
    if (!clean.ok()) return clean.status();
    if (!chinese.ok()) return chinese.status();
    if (!lower.ok()) return lower.status();
    Result<bool> strip = flag(*nm, "strip_accents", *lower);  // null: as lowercase
    if (!strip.ok()) return strip.status();
    t->norm_ = {.clean_text = *clean, .chinese = *chinese, .strip_accents = *strip, .lowercase = *lower};
  } else {
    t->norm_ = {.clean_text = false, .chinese = false, .strip_accents = false, .lowercase = false};
  }
  if (const json* pt = member(j, "pre_tokenizer")) {
    if (kind_of(pt) != "BertPreTokenizer")
      return io_error("{}: pre_tokenizer '{}' is not supported (expected BertPreTokenizer or none)", source, kind_of(pt));
  } else {
    t->split_on_space_ = t->split_on_punct_ = false;
  }
  // Added tokens, matched in the raw text; special ones are skipped by decode().
  if (const json* added = member(j, "added_tokens")) {
    if (!added->is_array()) return io_error("{}: added_tokens is not a list", source);
    for (const json& a : *added) {
      const json* id = a.is_object() ? member(a, "id") : nullptr;
      const json* content = a.is_object() ? member(a, "content") : nullptr;
      if (!id || !id->is_number_integer() || !content || !content->is_string() || content->get<std::string>().empty())
        return io_error("{}: an added_tokens entry without an integer id and a content string: {}", source, brief(a));
      const int64_t i = id->get<int64_t>();
      if (i < 0 || i >= static_cast<int64_t>(n))
        return io_error("{}: added token {} has id {}, outside the vocabulary of {}", source, brief(*content), i, n);
      for (const char* flag : {"lstrip", "rstrip", "single_word", "special", "normalized"})
        if (const json* f = member(a, flag); f && !f->is_boolean())
          return io_error("{}: added token {}: {} = {} is not true or false", source, brief(*content), flag, brief(*f));
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (const json* f = member(a, flag); f && f->get<bool>())
          return io_error("{}: added token {} has {} set, which is not supported", source, brief(*content), flag);
      t->added_.emplace_back(content->get<std::string>(), i);
      if (const json* sp = member(a, "special"); sp && sp->get<bool>()) t->special_[static_cast<size_t>(i)] = true;
    }
  }
  // The post-processor: [CLS] $A [SEP] ($B [SEP]), as a template or BertProcessing.
  const json* post = member(j, "post_processor");
  const std::string ptype = kind_of(post);
  auto vocab_id = [&](const std::string& tok) -> int64_t {
    auto it = t->vocab_.find(tok);
    return it == t->vocab_.end() ? -1 : it->second;
  };
  // A special token's id as the post_processor gives it must be the vocabulary's id of that token.
  auto agrees = [&](const std::string& tok, int64_t id) -> Status {
    const int64_t in_vocab = vocab_id(tok);
    if (in_vocab >= 0 && in_vocab != id)
      return io_error("{}: post_processor gives {} the id {}, but the vocabulary has it at {}", source, brief(json(tok)), id,
                      in_vocab);
    return {};
  };
  if (ptype == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json* v = member(*post, key);
      if (!v || !v->is_array() || v->size() != 2 || !(*v)[0].is_string() || !(*v)[1].is_number_integer())
        return io_error("{}: post_processor.{} = {} (expected [\"token\", id])", source, key, v ? brief(*v) : "missing");
      TG_RETURN_IF_ERROR(agrees((*v)[0].get<std::string>(), (*v)[1].get<int64_t>()));
      (std::string_view(key) == "cls" ? t->cls_ : t->sep_) = (*v)[1].get<int64_t>();
    }
  } else if (ptype == "TemplateProcessing") {
    // single: Special, Sequence A, Special; pair: the same then Sequence B (type 1) and the second special.
    auto piece = [](const json& e, std::string& special, std::string& seq, int64_t& type) {
      if (!e.is_object()) return false;
      const json* inner = e.contains("SpecialToken") ? &e["SpecialToken"] : e.contains("Sequence") ? &e["Sequence"] : nullptr;
      if (!inner || !inner->is_object() || !inner->contains("id") || !(*inner)["id"].is_string()) return false;
      (e.contains("SpecialToken") ? special : seq) = (*inner)["id"].get<std::string>();
      if (inner->contains("type_id") && !(*inner)["type_id"].is_number_integer()) return false;
      type = inner->contains("type_id") ? (*inner)["type_id"].get<int64_t>() : 0;
      return true;
    };
    const json* single = member(*post, "single");
    const json* pair = member(*post, "pair");
    std::vector<std::string> specials, seqs;
    std::vector<int64_t> types;
    bool ok = single && single->is_array() && single->size() == 3 && pair && pair->is_array() && pair->size() == 5;
    for (const json* list : {single, pair}) {
      if (!ok) break;
      for (const json& e : *list) {
        std::string sp, sq;
        int64_t ty = 0;
        ok = ok && piece(e, sp, sq, ty);
        specials.push_back(sp);
        seqs.push_back(sq);
        types.push_back(ty);
      }
    }
    // entries 0-2: single; 3-7: pair
    ok = ok && seqs[1] == "A" && seqs[4] == "A" && seqs[6] == "B" && !specials[0].empty() && !specials[2].empty() &&
         specials[3] == specials[0] && specials[5] == specials[2] && specials[7] == specials[2] &&
         types == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1};
    if (!ok) return io_error("{}: post_processor template is not BERT's [CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP]", source);
    const json* st = member(*post, "special_tokens");
    if (st && !st->is_object()) return io_error("{}: post_processor.special_tokens is not an object", source);
    auto special_id = [&](const std::string& name) -> Result<int64_t> {
      const json* e = st ? member(*st, name.c_str()) : nullptr;
      if (!e) return vocab_id(name);
      const json* ids = e->is_object() ? member(*e, "ids") : nullptr;
      if (!ids || !ids->is_array() || ids->size() != 1 || !(*ids)[0].is_number_integer())
        return io_error("{}: post_processor.special_tokens[{}] = {} (expected \"ids\": [one id])", source, brief(json(name)),
                        brief(*e));
      TG_RETURN_IF_ERROR(agrees(name, (*ids)[0].get<int64_t>()));
      return (*ids)[0].get<int64_t>();
    };
    Result<int64_t> cls = special_id(specials[0]), sep = special_id(specials[2]);
    if (!cls.ok()) return cls.status();
    if (!sep.ok()) return sep.status();
    t->cls_ = *cls;
    t->sep_ = *sep;
  } else if (!post) {
    t->cls_ = vocab_id("[CLS]");
    t->sep_ = vocab_id("[SEP]");
  } else {
    return io_error("{}: post_processor '{}' is not supported (expected TemplateProcessing or BertProcessing)", source, ptype);
  }
  if (t->cls_ < 0 || t->cls_ >= static_cast<int64_t>(n) || t->sep_ < 0 || t->sep_ >= static_cast<int64_t>(n))
    return io_error("{}: no [CLS] / [SEP] ids within the vocabulary of {} in the post_processor", source, n);
  // Padding id: the file's padding settings, else [PAD], else 0.
  const json* padding = member(j, "padding");
  if (padding && !padding->is_null() && !padding->is_object()) return io_error("{}: padding = {} is not an object", source, brief(*padding));
  const json* pad_id = padding && padding->is_object() ? member(*padding, "pad_id") : nullptr;
  if (pad_id && !(pad_id->is_number_integer() && pad_id->get<int64_t>() >= 0 && pad_id->get<int64_t>() < static_cast<int64_t>(n)))
    return io_error("{}: padding.pad_id = {} (expected an id within the vocabulary of {})", source, brief(*pad_id), n);
  t->pad_ = pad_id ? pad_id->get<int64_t>() : std::max<int64_t>(0, vocab_id("[PAD]"));
  std::sort(t->added_.begin(), t->added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

bool is_hf_tokenizer_json(std::string_view bytes) {
  const size_t i = bytes.find_first_not_of(" \t\r\n");
  return i != std::string_view::npos && bytes[i] == '{';
}

Result<std::unique_ptr<Tokenizer>> parse_wordpiece(std::string_view bytes, std::string_view source) {
  return WordPieceTokenizer::parse(bytes, source);
}

}  // namespace tg::text::internal
