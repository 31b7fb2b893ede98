#include "text/readers.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "io/file.h"
#include "text/split.h"

namespace tg::text {
namespace {

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Calls fn(line_number, line) for every line (without its \n or a \r before it), after checking it
// is valid UTF-8; stops at the first Status fn returns that is not ok.
template <class Fn>
Status for_each_line(std::string_view bytes, std::string_view source, Fn&& fn) {
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);  // byte-order mark
  int64_t line_no = 1;
  for (size_t pos = 0; pos < bytes.size(); ++line_no) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (size_t bad = invalid_utf8_offset(line); bad != std::string_view::npos)
      return io_error("{}: line {}: invalid UTF-8 (byte 0x{:02x} at column {})", source, line_no,
                      static_cast<unsigned char>(line[bad]), bad + 1);
    TG_RETURN_IF_ERROR(fn(line_no, line));
  }
  return {};
}

// Trimmed lines, blank lines at the end dropped (inner ones kept: they hold a line number).
Result<std::vector<std::string_view>> trimmed_lines(std::string_view bytes, std::string_view source) {
  std::vector<std::string_view> out;
  TG_RETURN_IF_ERROR(for_each_line(bytes, source, [&](int64_t, std::string_view line) {
    out.push_back(trim(line));
    return Status();
  }));
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

bool sentence_like(std::string_view s) {
  if (s.empty() || s.find_first_of("{}[]<>()/") != std::string_view::npos) return false;
  const char last = s.back();
  if (last != '.' && last != '!' && last != '?') return false;
  const auto words = std::count(s.begin(), s.end(), ' ') + 1;
  return words >= 4 && words <= 30;
}

std::vector<std::string_view> split_on(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  for (size_t p = s.find(sep); p != std::string_view::npos; p = s.find(sep)) {
    out.push_back(s.substr(0, p));
    s.remove_prefix(p + sep.size());
  }
  out.push_back(s);
  return out;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Result<std::vector<std::string>> parse_lines(std::string_view bytes, std::string_view source, const LineOptions& o) {
  std::vector<std::string> out;
  TG_RETURN_IF_ERROR(for_each_line(bytes, source, [&](int64_t, std::string_view line) {
    if (o.trim) line = trim(line);
    if (!line.empty() || !o.skip_empty) out.emplace_back(line);
    return Status();
  }));
  if (out.empty()) return io_error("{}: no lines{}", source, bytes.empty() ? " (an empty file)" : " that are not blank");
  return out;
}

Result<std::vector<std::string>> read_lines(const std::string& path, const LineOptions& options) {
  Result<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  return parse_lines(*bytes, path, options);
}

Result<Pairs> parse_tsv(std::string_view bytes, std::string_view source) {
  Pairs out;
  TG_RETURN_IF_ERROR(for_each_line(bytes, source, [&](int64_t n, std::string_view line) {
    if (trim(line).empty()) return Status();
    const auto tabs = std::count(line.begin(), line.end(), '\t');
    if (tabs != 1)
      return io_error("{}: line {}: expected 'source<TAB>target', found {}", source, n,
                      tabs == 0 ? std::string("no tab") : fmt::format("{} tabs", tabs));
    const size_t tab = line.find('\t');
    std::string_view src = trim(line.substr(0, tab)), tgt = trim(line.substr(tab + 1));
    if (src.empty() || tgt.empty())
      return io_error("{}: line {}: expected 'source<TAB>target', found an empty {}", source, n, src.empty() ? "source" : "target");
    out.emplace_back(src, tgt);
    return Status();
  }));
  if (out.empty()) return io_error("{}: no sentence pairs (expected 'source<TAB>target' lines)", source);
  return out;
}

Result<Pairs> read_tsv(const std::string& path) {
  Result<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  return parse_tsv(*bytes, path);
}

Result<Pairs> parse_aligned(std::string_view src_bytes, std::string_view tgt_bytes, std::string_view src_name,
                            std::string_view tgt_name) {
  Result<std::vector<std::string_view>> a = trimmed_lines(src_bytes, src_name), b = trimmed_lines(tgt_bytes, tgt_name);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  if (a->size() != b->size())
    return io_error("{} has {} lines but {} has {}: the files must be aligned line by line", src_name, a->size(), tgt_name,
                    b->size());
  Pairs out;
  for (size_t i = 0; i < a->size(); ++i)
    if (!(*a)[i].empty() && !(*b)[i].empty()) out.emplace_back((*a)[i], (*b)[i]);
  if (out.empty()) return io_error("{} and {}: no line pairs where both sides are non-empty", src_name, tgt_name);
  return out;
}

Result<Pairs> read_aligned(const std::string& src_path, const std::string& tgt_path) {
  Result<std::string> s = read_text(src_path);
  if (!s.ok()) return s.status();
  Result<std::string> t = read_text(tgt_path);
  if (!t.ok()) return t.status();
  return parse_aligned(*s, *t, src_path, tgt_path);
}

Result<Pairs> parse_ding_pairs(std::string_view bytes, std::string_view source) {
  Pairs out;
  TG_RETURN_IF_ERROR(for_each_line(bytes, source, [&](int64_t, std::string_view line) {
    const size_t sep = line.find("::");
    if (line.empty() || line[0] == '#' || sep == std::string_view::npos) return Status();
    std::vector<std::string_view> de = split_on(line.substr(0, sep), " | "), en = split_on(line.substr(sep + 2), " | ");
    if (de.size() != en.size()) return Status();
    for (size_t i = 0; i < de.size(); ++i) {
      std::string_view d = trim(de[i].substr(0, de[i].find("; "))), e = trim(en[i].substr(0, en[i].find("; ")));
      if (sentence_like(d) && sentence_like(e)) out.emplace_back(d, e);
    }
    return Status();
  }));
  if (out.empty())
    return io_error("{}: no sentence pairs found (expected the Ding format 'German | ... :: English | ...')", source);
  return out;
}

Result<Pairs> read_ding_pairs(const std::string& path) {
  Result<std::string> bytes = read_text(path);
  if (!bytes.ok()) return bytes.status();
  return parse_ding_pairs(*bytes, path);
}

Split split_pairs(const Pairs& pairs, int valid_percent) {
  Split s;
  const auto v = static_cast<uint64_t>(std::max(valid_percent, 0));
  for (const auto& p : pairs) {
    const uint64_t h = fnv1a(p.first) % 100;
    (h < v ? s.valid : h < 2 * v ? s.test : s.train).push_back(p);
  }
  return s;
}

}  // namespace tg::text
