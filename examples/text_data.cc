#include "examples/text_data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "examples/common.h"

namespace tg::examples {

namespace {

std::string trim(absl::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool sentence_like(const std::string& s) {
  if (s.empty() || s.find_first_of("{}[]<>()/") != std::string::npos) return false;
  char last = s.back();
  if (last != '.' && last != '!' && last != '?') return false;
  size_t words = std::count(s.begin(), s.end(), ' ') + 1;
  return words >= 4 && words <= 30;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n')) out.push_back(trim(l));
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

absl::StatusOr<Pairs> read_ding_pairs(const std::string& path) {
  absl::StatusOr<std::string> text = read_text(path);
  if (!text.ok()) return text.status();
  Pairs out;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    size_t sep = line.find("::");
    if (line.empty() || line[0] == '#' || sep == absl::string_view::npos) continue;
    std::vector<absl::string_view> de = absl::StrSplit(line.substr(0, sep), " | ");
    std::vector<absl::string_view> en = absl::StrSplit(line.substr(sep + 2), " | ");
    if (de.size() != en.size()) continue;
    for (size_t i = 0; i < de.size(); ++i) {
      std::string d = trim(de[i].substr(0, de[i].find("; "))), e = trim(en[i].substr(0, en[i].find("; ")));
      if (sentence_like(d) && sentence_like(e)) out.emplace_back(d, e);
    }
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no sentence pairs found (expected the Ding format 'German | ... :: English | ...')"));
  return out;
}

absl::StatusOr<Pairs> read_aligned(const std::string& src_path, const std::string& tgt_path) {
  absl::StatusOr<std::string> s = read_text(src_path), t = read_text(tgt_path);
  if (!s.ok()) return s.status();
  if (!t.ok()) return t.status();
  std::vector<std::string> a = lines_of(*s), b = lines_of(*t);
  if (a.size() != b.size())
    return absl::InvalidArgumentError(
        fmt::format("{} has {} lines but {} has {}: the files must be aligned line by line", src_path, a.size(), tgt_path, b.size()));
  Pairs out;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].empty() && !b[i].empty()) out.emplace_back(a[i], b[i]);
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(src_path, ": no non-empty sentence pairs"));
  return out;
}

absl::StatusOr<Pairs> read_tsv(const std::string& path) {
  absl::StatusOr<std::string> text = read_text(path);
  if (!text.ok()) return text.status();
  Pairs out;
  int64_t n = 0;
  for (const std::string& line : lines_of(*text)) {
    ++n;
    if (line.empty()) continue;
    size_t tab = line.find('\t');
    if (tab == std::string::npos)
      return absl::InvalidArgumentError(fmt::format("{}: line {} has no tab between source and target", path, n));
    out.emplace_back(trim(line.substr(0, tab)), trim(line.substr(tab + 1)));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no sentence pairs"));
  return out;
}

Split split_pairs(const Pairs& pairs, int valid_percent) {
  Split s;
  for (const auto& p : pairs) {
    uint64_t h = fnv1a(p.first) % 100;
    (h < static_cast<uint64_t>(valid_percent) ? s.valid : h < static_cast<uint64_t>(2 * valid_percent) ? s.test : s.train).push_back(p);
  }
  return s;
}

// ---- Words ----

std::vector<std::string> word_tokens(const std::string& text, bool lowercase) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
  };
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80 || c == '\'') {
      cur.push_back(lowercase && c < 0x80 ? static_cast<char>(std::tolower(c)) : ch);
    } else if (std::isspace(c)) {
      flush();
    } else {
      flush();
      out.emplace_back(1, ch);
    }
  }
  flush();
  return out;
}

std::string detokenize(const std::vector<std::string>& tokens) {
  std::string out;
  bool no_space_next = true;
  for (const auto& t : tokens) {
    bool closing = t.size() == 1 && std::string(".,!?;:)%").find(t[0]) != std::string::npos;
    if (!out.empty() && !closing && !no_space_next) out += ' ';
    out += t;
    no_space_next = t == "(" || t == "-" || t == "\"" ? true : false;
    if (t == "-" && !out.empty()) {  // "well - known" -> "well-known"
      out.pop_back();
      if (!out.empty() && out.back() == ' ') out.pop_back();
      out += '-';
    }
  }
  return out;
}

std::vector<std::string> utf8_chars(const std::string& text, bool lowercase) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + n > text.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) n = 1;
    out.push_back(text.substr(i, n));
    if (lowercase && n == 1 && c < 0x80) out.back()[0] = static_cast<char>(std::tolower(c));
    i += n;
  }
  return out;
}

WordVocab WordVocab::build(const std::vector<std::string>& sentences, int64_t max_size, bool lowercase, int64_t min_count,
                           Unit unit) {
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // token -> (count, first seen)
  int64_t order = 0;
  WordVocab w;
  w.lowercase_ = lowercase;
  w.unit_ = unit;
  for (const auto& s : sentences)
    for (auto& t : w.tokens_of(s)) {
      auto [it, fresh] = counts.try_emplace(t, 0, order);
      if (fresh) ++order;
      ++it->second.first;
    }
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> v(counts.begin(), counts.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first : a.second.second < b.second.second;
  });
  w.tokens_ = {"<pad>", "<bos>", "<eos>", "<unk>"};
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(w.tokens_.size()) < max_size; ++i)
    if (v[i].second.first >= min_count) w.tokens_.push_back(v[i].first);
  for (size_t i = 0; i < w.tokens_.size(); ++i) w.index_[w.tokens_[i]] = static_cast<int64_t>(i);
  return w;
}

std::string WordVocab::serialize() const {
  std::string out = fmt::format("{}lowercase {}\n", unit_ == Unit::kChars ? "characters " : "", lowercase_ ? 1 : 0);
  for (const auto& t : tokens_) out += t + "\n";
  return out;
}

absl::StatusOr<WordVocab> WordVocab::parse(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  WordVocab w;
  if (!lines.empty() && absl::StartsWith(lines[0], "characters ")) {
    w.unit_ = Unit::kChars;
    lines[0] = lines[0].substr(11);
  }
  if (lines.size() < 5 || (lines[0] != "lowercase 0" && lines[0] != "lowercase 1") || lines[1] != "<pad>" ||
      lines[2] != "<bos>" || lines[3] != "<eos>" || lines[4] != "<unk>")
    return absl::InvalidArgumentError(
        "not a vocabulary file (expected '[characters ]lowercase 0|1' then <pad> <bos> <eos> <unk>)");
  w.lowercase_ = lines[0] == "lowercase 1";
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty() && i + 1 == lines.size()) break;
    if (!w.index_.emplace(lines[i], static_cast<int64_t>(w.tokens_.size())).second)
      return absl::InvalidArgumentError(absl::StrCat("vocabulary token '", lines[i], "' appears twice"));
    w.tokens_.push_back(lines[i]);
  }
  return w;
}

std::vector<int64_t> WordVocab::encode(const std::string& sentence) const {
  std::vector<int64_t> out;
  for (const auto& t : tokens_of(sentence)) {
    auto it = index_.find(t);
    out.push_back(it == index_.end() ? kUnk : it->second);
  }
  return out;
}

std::string WordVocab::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> toks;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id < 0 || id >= size() || id == kPad || id == kBos) continue;
    toks.push_back(id == kUnk ? "<unk>" : tokens_[static_cast<size_t>(id)]);
  }
  if (unit_ == Unit::kWords) return detokenize(toks);
  std::string out;
  for (const auto& t : toks) out += t;
  return out;
}

// ---- BLEU ----

std::vector<std::string> tokenize_13a(const std::string& input) {
  // sacreBLEU's 13a: the mteval-v13a rules, as regular expressions over the line.
  std::string line = input;
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t p = line.find(from); p != std::string::npos; p = line.find(from, p + to.size())) line.replace(p, from.size(), to);
  };
  replace_all("<skipped>", "");
  replace_all("-\n", "");
  replace_all("\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all("&quot;", "\"");
    replace_all("&amp;", "&");
    replace_all("&lt;", "<");
    replace_all("&gt;", ">");
  }
  line = " " + line + " ";
  static const std::regex r1("([\\{-\\~\\[-\\` -\\&\\(-\\+\\:-\\@\\/])");
  static const std::regex r2("([^0-9])([\\.,])");
  static const std::regex r3("([\\.,])([^0-9])");
  static const std::regex r4("([0-9])(-)");
  line = std::regex_replace(line, r1, " $1 ");
  line = std::regex_replace(line, r2, "$1 $2 ");
  line = std::regex_replace(line, r3, " $1 $2");
  line = std::regex_replace(line, r4, "$1 $2 ");
  std::vector<std::string> out;
  for (absl::string_view t : absl::StrSplit(line, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty())) out.emplace_back(t);
  return out;
}

Bleu corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  int64_t correct[4] = {0, 0, 0, 0}, total[4] = {0, 0, 0, 0};
  Bleu b;
  for (size_t i = 0; i < hyps.size() && i < refs.size(); ++i) {
    std::vector<std::string> h = tokenize_13a(hyps[i]), r = tokenize_13a(refs[i]);
    b.sys_len += static_cast<int64_t>(h.size());
    b.ref_len += static_cast<int64_t>(r.size());
    for (int n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, int64_t> hc, rc;
      for (size_t j = 0; j + n <= h.size(); ++j) ++hc[std::vector<std::string>(h.begin() + j, h.begin() + j + n)];
      for (size_t j = 0; j + n <= r.size(); ++j) ++rc[std::vector<std::string>(r.begin() + j, r.begin() + j + n)];
      for (const auto& [g, c] : hc) {
        auto it = rc.find(g);
        if (it != rc.end()) correct[n - 1] += std::min(c, it->second);
      }
      total[n - 1] += std::max<int64_t>(0, static_cast<int64_t>(h.size()) - n + 1);
    }
  }
  double smooth = 1, log_sum = 0;
  const bool any_match = correct[0] + correct[1] + correct[2] + correct[3] > 0;  // else precisions stay 0
  for (int n = 0; n < 4 && any_match; ++n) {
    if (total[n] == 0) break;
    if (correct[n] == 0) {
      smooth *= 2;
      b.precisions[n] = 100.0 / (smooth * static_cast<double>(total[n]));
    } else {
      b.precisions[n] = 100.0 * static_cast<double>(correct[n]) / static_cast<double>(total[n]);
    }
  }
  for (double p : b.precisions) log_sum += p > 0 ? std::log(p) : -9999999999.0;
  b.bp = b.sys_len < b.ref_len ? (b.sys_len > 0 ? std::exp(1.0 - static_cast<double>(b.ref_len) / static_cast<double>(b.sys_len)) : 0.0) : 1.0;
  b.score = b.bp * std::exp(log_sum / 4);
  return b;
}

}  // namespace tg::examples
