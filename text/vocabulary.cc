#include "text/vocabulary.h"

#include <algorithm>
#include <cstddef>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "io/file.h"

namespace tg::text {

const std::vector<std::string>& default_specials() {
  static const std::vector<std::string> specials = {"<pad>", "<bos>", "<eos>", "<unk>"};
  return specials;
}

std::string quote_token(std::string_view token) {
  std::string out = "'";
  for (size_t i = 0; i < token.size() && i < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (token.size() > 60) out += "...";
  return out + "'";
}

namespace {

std::string escape(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

// The inverse of escape(); a backslash before anything but \, n or r stays as it is.
std::string unescape(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == '\\' || line[i + 1] == 'n' || line[i + 1] == 'r')) {
      out += line[i + 1] == 'n' ? '\n' : line[i + 1] == 'r' ? '\r' : '\\';
      ++i;
    } else {
      out += line[i];
    }
  }
  return out;
}

// Why a token may not be added at this point, or "" when it may.
std::string refusal(const std::string& token, int64_t size_before) {
  if (token.empty()) return "empty token";
  if (static_cast<int64_t>(token.size()) > kMaxTokenBytes)
    return fmt::format("a token of {} bytes (at most {})", token.size(), kMaxTokenBytes);
  if (size_before >= kMaxVocabularySize) return fmt::format("more than {} tokens", kMaxVocabularySize);
  return "";
}

}  // namespace

Vocabulary::Vocabulary() {
  for (const std::string& s : default_specials()) {
    index_.emplace(s, size());
    tokens_.push_back(s);
  }
  unk_id_ = kUnk;
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& sequences, int64_t max_size, int64_t min_count,
                             const std::vector<std::string>& specials) {
  std::vector<TokenCount> counts;
  absl::flat_hash_map<std::string_view, size_t> where;  // views into the sequences
  for (const auto& seq : sequences)
    for (const std::string& t : seq) {
      auto [it, fresh] = where.try_emplace(t, counts.size());
      if (fresh) counts.emplace_back(t, 0);
      ++counts[it->second].second;
    }
  return build_from_counts(counts, max_size, min_count, specials);
}

Vocabulary Vocabulary::build_from_counts(const std::vector<TokenCount>& counts, int64_t max_size, int64_t min_count,
                                         const std::vector<std::string>& specials) {
  Vocabulary v;
  v.tokens_.clear();
  v.index_.clear();
  v.unk_id_ = -1;
  for (const std::string& s : specials) {
    TG_CHECK(refusal(s, v.size()).empty() && !v.contains(s), "Vocabulary::build", "special token {} is {}", quote_token(s),
             s.empty() ? "empty" : v.contains(s) ? "listed twice" : refusal(s, v.size()));
    v.index_.emplace(s, v.size());
    v.tokens_.push_back(s);
  }
  // Merge repeated entries, keeping the first-seen order; then most frequent first, ties stay in that order.
  std::vector<TokenCount> merged;
  absl::flat_hash_map<std::string_view, size_t> where;
  merged.reserve(counts.size());
  for (const auto& [token, n] : counts) {
    auto [it, fresh] = where.try_emplace(token, merged.size());
    if (fresh) merged.emplace_back(token, 0);
    merged[it->second].second += n;
  }
  std::stable_sort(merged.begin(), merged.end(), [](const TokenCount& a, const TokenCount& b) { return a.second > b.second; });
  const int64_t limit = max_size <= 0 ? kMaxVocabularySize : std::min(max_size, kMaxVocabularySize);
  for (const auto& [token, n] : merged) {
    if (v.size() >= limit || n < min_count) break;  // sorted: every later token is rarer
    if (!refusal(token, v.size()).empty() || v.contains(token)) continue;
    v.index_.emplace(token, v.size());
    v.tokens_.push_back(token);
  }
  if (auto it = v.index_.find(std::string_view("<unk>")); it != v.index_.end()) v.unk_id_ = it->second;
  return v;
}

Result<Vocabulary> Vocabulary::from_tokens(std::vector<std::string> tokens, std::string_view source) {
  Vocabulary v;
  v.tokens_.clear();
  v.index_.clear();
  v.unk_id_ = -1;
  for (std::string& t : tokens) {
    if (std::string why = refusal(t, v.size()); !why.empty()) return io_error("{}: token {}: {}", source, v.size(), why);
    auto [it, fresh] = v.index_.emplace(t, v.size());
    if (!fresh) return io_error("{}: token {} {} repeats token {}", source, v.size(), quote_token(t), it->second);
    v.tokens_.push_back(std::move(t));
  }
  if (auto it = v.index_.find(std::string_view("<unk>")); it != v.index_.end()) v.unk_id_ = it->second;
  return v;
}

bool Vocabulary::contains(std::string_view token) const { return index_.find(token) != index_.end(); }

int64_t Vocabulary::id(std::string_view token) const {
  auto it = index_.find(token);
  if (it != index_.end()) return it->second;
  TG_CHECK(unk_id_ >= 0, "Vocabulary::id", "{} is not in the vocabulary, which has no unknown token", quote_token(token));
  return unk_id_;
}

const std::string& Vocabulary::token(int64_t id) const {
  TG_CHECK(id >= 0 && id < size(), "Vocabulary::token", "id {} is out of range (the vocabulary has {} tokens)", id, size());
  return tokens_[static_cast<size_t>(id)];
}

void Vocabulary::set_unk_token(std::string_view token) {
  auto it = index_.find(token);
  TG_CHECK(it != index_.end(), "Vocabulary::set_unk_token", "{} is not in the vocabulary", quote_token(token));
  unk_id_ = it->second;
}

std::string Vocabulary::serialize() const {
  std::string out;
  for (const std::string& t : tokens_) out += escape(t) + '\n';
  return out;
}

Result<Vocabulary> Vocabulary::parse(std::string_view bytes, std::string_view source, int64_t first_line) {
  Vocabulary v;
  v.tokens_.clear();
  v.index_.clear();
  v.unk_id_ = -1;
  int64_t line_no = first_line;
  for (size_t pos = 0; pos < bytes.size(); ++line_no) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files; a token "\r" is written escaped
    std::string token = unescape(line);
    if (std::string why = refusal(token, v.size()); !why.empty()) return io_error("{}: line {}: {}", source, line_no, why);
    auto [it, fresh] = v.index_.emplace(token, v.size());
    if (!fresh)
      return io_error("{}: line {}: token {} appears twice (first on line {})", source, line_no, quote_token(token),
                      first_line + it->second);
    v.tokens_.push_back(std::move(token));
  }
  if (v.tokens_.empty()) return io_error("{}: an empty vocabulary (no tokens)", source);
  if (auto it = v.index_.find(std::string_view("<unk>")); it != v.index_.end()) v.unk_id_ = it->second;
  return v;
}

Status Vocabulary::save(const std::string& path) const { return write_file_atomic(path, serialize()); }

Result<Vocabulary> Vocabulary::load(const std::string& path) {
  Result<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  return parse(*bytes, path);
}

}  // namespace tg::text
