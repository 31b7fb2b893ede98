// text/readers.h: lines, TSV pairs, aligned files, the Ding dictionary and the hash split; errors
// name the file and the line (read from bytes in memory, as a fuzzer would).
#include <fstream>

#include <gtest/gtest.h>

#include "text/readers.h"

namespace tgt {
namespace {

namespace text = tg::text;

TEST(TextReaders, FilesAndSplit) {  // the cases of the translator's readers
  std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/text_readers_ding.txt") << "# comment\n"
                                                << "Haus {n} | Das Haus ist sehr alt. :: house | The house is very old.\n"
                                                << "Er kommt morgen wieder zurück. :: He will come back tomorrow.\n"
                                                << "kurz :: short\n";
  auto d = text::read_ding_pairs(dir + "/text_readers_ding.txt");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0], (std::pair<std::string, std::string>{"Das Haus ist sehr alt.", "The house is very old."}));
  EXPECT_EQ((*d)[1].first, "Er kommt morgen wieder zurück.");
  std::ofstream(dir + "/text_readers_a.txt") << "eins\nzwei\n";
  std::ofstream(dir + "/text_readers_b.txt") << "one\n";
  auto bad = text::read_aligned(dir + "/text_readers_a.txt", dir + "/text_readers_b.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), dir + "/text_readers_a.txt has 2 lines but " + dir +
                                        "/text_readers_b.txt has 1: the files must be aligned line by line");
  std::ofstream(dir + "/text_readers_p.tsv") << "eins\tone\nzwei two\n";
  auto tsv = text::read_tsv(dir + "/text_readers_p.tsv");
  ASSERT_FALSE(tsv.ok());
  EXPECT_EQ(tsv.status().message(), dir + "/text_readers_p.tsv: line 2: expected 'source<TAB>target', found no tab");
  auto missing = text::read_tsv(dir + "/text_readers_missing.tsv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("text_readers_missing.tsv"), std::string::npos);
  auto lines = text::read_lines(dir + "/text_readers_a.txt");
  ASSERT_TRUE(lines.ok()) << lines.status().message();
  EXPECT_EQ(*lines, (std::vector<std::string>{"eins", "zwei"}));

  text::Pairs many;
  for (int i = 0; i < 2000; ++i) many.emplace_back("satz " + std::to_string(i), "sentence " + std::to_string(i));
  text::Split s = text::split_pairs(many, 2), again = text::split_pairs(many, 2);
  EXPECT_EQ(s.train.size() + s.valid.size() + s.test.size(), 2000u);
  EXPECT_NEAR(static_cast<double>(s.valid.size()), 40, 25);
  EXPECT_NEAR(static_cast<double>(s.test.size()), 40, 25);
  EXPECT_EQ(s.valid, again.valid);  // deterministic
  EXPECT_EQ(s.test, again.test);
  EXPECT_EQ(text::split_pairs(many, 0).train.size(), 2000u);
}

TEST(TextReaders, TsvPairs) {
  auto p = text::parse_tsv("\xEF\xBB\xBF a b \t  c d\r\n\n   \nx\ty\n", "pairs.tsv");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, (text::Pairs{{"a b", "c d"}, {"x", "y"}}));  // trimmed; BOM, CR and blank lines dropped
  std::string many_lines;
  for (int i = 1; i < 17; ++i) many_lines += "s\tt\n";
  auto no_tab = text::parse_tsv(many_lines + "just one side\n", "pairs.tsv");
  ASSERT_FALSE(no_tab.ok());
  EXPECT_EQ(no_tab.status().message(), "pairs.tsv: line 17: expected 'source<TAB>target', found no tab");
  auto two_tabs = text::parse_tsv("a\tb\tc\n", "pairs.tsv");
  ASSERT_FALSE(two_tabs.ok());
  EXPECT_EQ(two_tabs.status().message(), "pairs.tsv: line 1: expected 'source<TAB>target', found 2 tabs");
  auto empty_side = text::parse_tsv("a\tb\n\nc\t \n", "pairs.tsv");
  ASSERT_FALSE(empty_side.ok());
  EXPECT_EQ(empty_side.status().message(), "pairs.tsv: line 3: expected 'source<TAB>target', found an empty target");
  auto empty_source = text::parse_tsv("\tb\n", "pairs.tsv");
  ASSERT_FALSE(empty_source.ok());
  EXPECT_EQ(empty_source.status().message(), "pairs.tsv: line 1: expected 'source<TAB>target', found an empty source");
  auto utf8 = text::parse_tsv("a\tb\nc\td\xC3(\n", "pairs.tsv");
  ASSERT_FALSE(utf8.ok());
  EXPECT_EQ(utf8.status().message(), "pairs.tsv: line 2: invalid UTF-8 (byte 0xc3 at column 4)");
  auto nothing = text::parse_tsv("\n \n", "pairs.tsv");
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().message(), "pairs.tsv: no sentence pairs (expected 'source<TAB>target' lines)");
}

TEST(TextReaders, AlignedFiles) {
  auto p = text::parse_aligned("eins\n  zwei \n\nvier\n\n\n", "one\ntwo\nthree\n   four\n", "de.txt", "en.txt");
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Trailing blank lines ignored (4 lines each); pairs with a blank side skipped.
  EXPECT_EQ(*p, (text::Pairs{{"eins", "one"}, {"zwei", "two"}, {"vier", "four"}}));
  auto counts = text::parse_aligned("a\nb\nc\n", "x\ny\n", "de.txt", "en.txt");
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.status().message(), "de.txt has 3 lines but en.txt has 2: the files must be aligned line by line");
  auto utf8 = text::parse_aligned("a\nb\n", "x\n\xFF\n", "de.txt", "en.txt");
  ASSERT_FALSE(utf8.ok());
  EXPECT_EQ(utf8.status().message(), "en.txt: line 2: invalid UTF-8 (byte 0xff at column 1)");
  auto blank = text::parse_aligned("\n\n", " \n", "de.txt", "en.txt");
  ASSERT_FALSE(blank.ok());
  EXPECT_EQ(blank.status().message(), "de.txt and en.txt: no line pairs where both sides are non-empty");
}

TEST(TextReaders, Lines) {
  auto l = text::parse_lines(" a \r\n\n b\n", "t.txt");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, (std::vector<std::string>{"a", "b"}));
  auto raw = text::parse_lines(" a \r\n\n b", "t.txt", {.trim = false, .skip_empty = false});
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  EXPECT_EQ(*raw, (std::vector<std::string>{" a ", "", " b"}));
  auto bad = text::parse_lines("ok\nok\n\xE2\x82\n", "t.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "t.txt: line 3: invalid UTF-8 (byte 0xe2 at column 1)");
  auto empty = text::parse_lines("", "t.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "t.txt: no lines (an empty file)");
  auto blank = text::parse_lines("\n  \n", "t.txt");
  ASSERT_FALSE(blank.ok());
  EXPECT_EQ(blank.status().message(), "t.txt: no lines that are not blank");
}

TEST(TextReaders, DingDictionary) {
  const std::string ding =
      "# Version :: devel\n"
      "Das ist gut. | Wir gehen nach Hause. :: That is good. | We are going home.\n"     // 3 words: too short
      "Er liest ein Buch. ; Sie liest. :: He reads a book. ; She reads.\n"              // 4 words, first synonym
      "Ich habe keine Zeit (heute). :: I have no time today.\n"                         // an annotation
      "Ein | Zwei :: One\n"                                                             // 2 alternatives vs 1
      "Wir sehen uns morgen früh! :: We will see each other tomorrow morning!\r\n";     // CRLF
  auto p = text::parse_ding_pairs(ding, "de-en");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, (text::Pairs{{"Wir gehen nach Hause.", "We are going home."},
                             {"Er liest ein Buch.", "He reads a book."},
                             {"Wir sehen uns morgen früh!", "We will see each other tomorrow morning!"}}));
  auto none = text::parse_ding_pairs("kurz :: short\n", "de-en");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "de-en: no sentence pairs found (expected the Ding format 'German | ... :: English | ...')");
  auto utf8 = text::parse_ding_pairs("# a\n# b\nDas ist ein \xC0\xAF. :: x\n", "de-en");
  ASSERT_FALSE(utf8.ok());
  EXPECT_EQ(utf8.status().message(), "de-en: line 3: invalid UTF-8 (byte 0xc0 at column 13)");
}

}  // namespace
}  // namespace tgt
