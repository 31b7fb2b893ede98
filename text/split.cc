#include "text/split.h"

#include <cctype>
#include <cstdint>
#include <utility>

namespace tg::text {

std::vector<std::string> utf8_chars(std::string_view text, bool lowercase) {
  std::vector<std::string> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + n > text.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) n = 1;
    out.emplace_back(text.substr(i, n));
    if (lowercase && n == 1 && c < 0x80) out.back()[0] = static_cast<char>(std::tolower(c));
    i += n;
  }
  return out;
}

size_t invalid_utf8_offset(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::vector<std::string> word_tokens(std::string_view text, bool lowercase, bool keep_newlines) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80 || c == '\'') {
      cur.push_back(lowercase && c < 0x80 ? static_cast<char>(std::tolower(c)) : ch);
    } else if (c == '\n' && keep_newlines) {
      flush();
      out.emplace_back("\n");
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
    const bool closing = t.size() == 1 && std::string_view(".,!?;:)%\n").find(t[0]) != std::string_view::npos;
    if (!out.empty() && !closing && !no_space_next) out += ' ';
    out += t;
    no_space_next = t == "(" || t == "-" || t == "\"" || t == "\n";
    if (t == "-") {  // "well - known" -> "well-known"
      out.pop_back();
      if (!out.empty() && out.back() == ' ') out.pop_back();
      out += '-';
    }
  }
  return out;
}

}  // namespace tg::text
