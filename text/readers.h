#pragma once
// Reading text corpora: lines, sentence pairs (two aligned files, one TSV file, the Ding dictionary
// of Debian's trans-de-en) and a deterministic train/valid/test split.
//
// Every reader has a file form (read_*: gzip-compressed files ending in .gz are accepted) and a
// bytes form (parse_*: the same parser over bytes in memory, with a name for messages). Errors are
// one line naming the file and the line: "pairs.tsv: line 17: expected 'source<TAB>target', found no
// tab". Common to all: lines end at \n (a \r before it is dropped), a UTF-8 byte-order mark at the
// start is skipped, and a line that is not valid UTF-8 is an error. An empty result is an error.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/status.h"

namespace tg::text {

using Pairs = std::vector<std::pair<std::string, std::string>>;  // (source, target)

struct LineOptions {
  bool trim = true;        // strip whitespace at both ends of each line
  bool skip_empty = true;  // leave out lines that are empty (after trimming)
};
Result<std::vector<std::string>> read_lines(const std::string& path, const LineOptions& options = {});
Result<std::vector<std::string>> parse_lines(std::string_view bytes, std::string_view source,
                                             const LineOptions& options = {});

// One "source<TAB>target" pair a line, both sides trimmed. Blank lines are skipped; a line with no
// tab, with two or more tabs, or with an empty side is an error.
Result<Pairs> read_tsv(const std::string& path);
Result<Pairs> parse_tsv(std::string_view bytes, std::string_view source);

// Line i of the source file with line i of the target file, both trimmed. Blank lines at the end of
// either file are ignored; the files must then have as many lines. Pairs with a blank side are skipped.
Result<Pairs> read_aligned(const std::string& src_path, const std::string& tgt_path);
Result<Pairs> parse_aligned(std::string_view src_bytes, std::string_view tgt_bytes, std::string_view src_name,
                            std::string_view tgt_name);

// The Ding format of /usr/share/trans/de-en: "German | German ... :: English | English ...". The
// i-th German and English alternatives make a pair; of ';'-separated synonyms the first is kept.
// Skipped: blank and '#' comment lines, lines without "::", lines whose sides have different numbers
// of alternatives, and pairs that do not look like sentences (each side must have 4 to 30 words, end
// in . ! or ?, and contain no dictionary annotations: none of {}[]<>()/).
Result<Pairs> read_ding_pairs(const std::string& path);
Result<Pairs> parse_ding_pairs(std::string_view bytes, std::string_view source);

// A deterministic split by a hash (FNV-1a) of the source sentence: about valid_percent% of the pairs
// to validation and as many to test, the rest to training; a pair always lands in the same part.
struct Split {
  Pairs train, valid, test;
};
Split split_pairs(const Pairs& pairs, int valid_percent = 2);

}  // namespace tg::text
