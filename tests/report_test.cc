// The HTML report: well-formed (balanced elements, escaped text), charts present, a heatmap for
// every layer and head of a model's attention.
#include <regex>

#include "examples/report.h"
#include "test_util.h"

namespace tgt {
namespace {

// Every opened element of these kinds is closed, in order (a small structural check).
::testing::AssertionResult balanced(const std::string& html) {
  std::vector<std::string> stack;
  std::regex tag("<(/?)(html|head|body|svg|div|section|table|tr|td|th|figure|pre|p|h[1-4]|text|title|rect|polyline|circle|line)\\b[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    if (m[3] == "/") continue;  // self-closing
    if (m[1] == "/") {
      if (stack.empty() || stack.back() != m[2]) return ::testing::AssertionFailure() << "unexpected </" << m[2] << ">";
      stack.pop_back();
    } else {
      stack.push_back(m[2]);
    }
  }
  if (!stack.empty()) return ::testing::AssertionFailure() << "<" << stack.back() << "> never closed";
  return ::testing::AssertionSuccess();
}

TEST(Report, WellFormedWithEveryLayerAndHead) {
  tg::manual_seed(2);
  tg::DecoderLM lm({.vocab = 10, .context = 8, .layer = {.d_model = 12, .heads = 3, .d_ff = 24, .dropout = 0.0,
                                                          .activation = tg::Activation::Gelu, .norm_first = true},
                    .layers = 2});
  lm.set_record_attention(true);
  {
    tg::NoGradGuard ng;
    lm.forward(tg::randint(0, 10, {1, 6}));
  }
  tg::report::Html html("test <report> & \"quotes\"");
  html.paragraph("a < b & c");
  html.line_chart("loss", "step", {{"train", {{1, 3.0}, {2, 2.0}, {3, 1.5}}}, {"valid", {{3, 1.7}}}});
  html.line_chart("empty", "step", {});
  html.table({"a", "b"}, {{"1", "<2>"}});
  std::vector<std::string> labels = {"a", "b", "<c>", "d", "e", "f"};
  for (size_t l = 0; l < lm.layers->size(); ++l) {
    std::vector<float> w = (*lm.layers)[l]->self_attn->last_weights.to_vector<float>();
    ASSERT_EQ(w.size(), 3u * 6 * 6);
    std::vector<tg::report::Heatmap> maps;
    for (int h = 0; h < 3; ++h) {
      tg::report::Heatmap m{"layer " + std::to_string(l) + " head " + std::to_string(h), {}, labels, labels};
      for (int i = 0; i < 6; ++i) m.w.emplace_back(w.begin() + (h * 6 + i) * 6, w.begin() + (h * 6 + i + 1) * 6);
      maps.push_back(m);
    }
    html.heatmap_grid("self-attention, layer " + std::to_string(l), maps);
  }
  std::string s = html.str();
  EXPECT_TRUE(balanced(s));
  EXPECT_EQ(s.find("<report>"), std::string::npos);  // escaped
  EXPECT_NE(s.find("&lt;report&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  EXPECT_NE(s.find("&lt;c&gt;"), std::string::npos);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h) EXPECT_NE(s.find("layer " + std::to_string(l) + " head " + std::to_string(h)), std::string::npos);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n') > 10, true);
  // 2 layers x 3 heads x 36 cells.
  size_t cells = 0;
  for (size_t p = s.find("<rect x=\""); p != std::string::npos; p = s.find("<rect x=\"", p + 1)) ++cells;
  EXPECT_GE(cells, 2u * 3 * 36);
  EXPECT_NE(s.find("<polyline"), std::string::npos);
  EXPECT_NE(s.find("no data"), std::string::npos);
}

}  // namespace
}  // namespace tgt
