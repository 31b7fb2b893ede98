#pragma once
// Splitting text into tokens before any vocabulary: UTF-8 characters and words. The word and
// character tokenizers use these; BLEU has its own splitter (tokenize_13a in text/metrics.h).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tg::text {

// UTF-8 code points, optionally with ASCII letters lower-cased. A byte that does not start a
// well-formed sequence (a stray continuation byte, a truncated sequence) stands alone.
std::vector<std::string> utf8_chars(std::string_view text, bool lowercase = false);

// The byte offset of the first ill-formed UTF-8 sequence (overlong forms, surrogates and code
// points above U+10FFFF count as ill-formed), or std::string_view::npos when the text is valid.
size_t invalid_utf8_offset(std::string_view text);

// Words and punctuation: letters, digits, apostrophes and non-ASCII bytes form words; every other
// printable ASCII character is a token of its own; whitespace separates. With keep_newlines a line
// break is a token "\n" (otherwise it is whitespace). Lower-casing touches ASCII letters only.
//   word_tokens("Don't worry, it's well-known!") ==
//     {"Don't", "worry", ",", "it's", "well", "-", "known", "!"}
std::vector<std::string> word_tokens(std::string_view text, bool lowercase = false, bool keep_newlines = false);
// The inverse spacing: no space before . , ! ? ; : ) % or a line break, none after ( " - or a line
// break, and "well - known" joined as "well-known".
std::string detokenize(const std::vector<std::string>& tokens);

}  // namespace tg::text
