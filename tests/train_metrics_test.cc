// The metrics log (train/metrics.h): appends across reopenings, cuts back to a checkpoint's
// length, writes non-finite values as null, and its history survives a write and a parse
// unchanged. Also the text of the progress line (train/progress.h), computed without a clock.
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "graph/error.h"
#include "io/file.h"
#include "train/metrics.h"
#include "train/progress.h"

namespace tgt {
namespace {

using tg::train::Metrics;

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tg_metrics_test_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/metrics.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string contents() const { return tg::read_file(path_).value(); }
  std::string dir_, path_;
};

TEST_F(MetricsTest, WritesOneJsonObjectPerLine) {
  Metrics m = Metrics::open(path_).value();
  ASSERT_TRUE(m.log("train", 12, {{"loss", 2.5}, {"lr", 0.001}}).ok());
  ASSERT_TRUE(m.log("valid", 12, {{"valid_loss", 3}}).ok());
  EXPECT_EQ(contents(), "{\"kind\": \"train\", \"step\": 12, \"loss\": 2.5, \"lr\": 0.001}\n"
                        "{\"kind\": \"valid\", \"step\": 12, \"valid_loss\": 3}\n");
  EXPECT_EQ(m.bytes(), static_cast<int64_t>(contents().size()));
  EXPECT_EQ(m.path(), path_);
  EXPECT_EQ(m.history().at("train/loss"), (std::vector<std::pair<double, double>>{{12, 2.5}}));
  EXPECT_EQ(m.history().at("valid/valid_loss"), (std::vector<std::pair<double, double>>{{12, 3}}));
}

TEST_F(MetricsTest, AppendsAfterReopening) {
  {
    Metrics m = Metrics::open(path_).value();
    ASSERT_TRUE(m.log("train", 1, {{"loss", 4}}).ok());
  }
  Metrics m = Metrics::open(path_).value();  // the bug this replaces: reopening wiped the history
  EXPECT_EQ(m.bytes(), static_cast<int64_t>(contents().size()));
  ASSERT_TRUE(m.log("train", 2, {{"loss", 3}}).ok());
  EXPECT_EQ(contents(), "{\"kind\": \"train\", \"step\": 1, \"loss\": 4}\n{\"kind\": \"train\", \"step\": 2, \"loss\": 3}\n");
}

TEST_F(MetricsTest, ResumeCutsBackToTheCheckpoint) {
  int64_t at_checkpoint = 0;
  {
    Metrics m = Metrics::open(path_).value();
    ASSERT_TRUE(m.log("train", 1, {{"loss", 4}}).ok());
    at_checkpoint = m.bytes();
    ASSERT_TRUE(m.log("train", 2, {{"loss", 3}}).ok());  // written after the checkpoint, then the run died
  }
  Metrics m = Metrics::open(path_, at_checkpoint).value();
  EXPECT_EQ(m.bytes(), at_checkpoint);
  ASSERT_TRUE(m.log("train", 2, {{"loss", 3.5}}).ok());
  EXPECT_EQ(contents(), "{\"kind\": \"train\", \"step\": 1, \"loss\": 4}\n{\"kind\": \"train\", \"step\": 2, \"loss\": 3.5}\n");
  // keep_bytes 0 starts over.
  Metrics fresh = Metrics::open(path_, 0).value();
  EXPECT_EQ(contents(), "");
  EXPECT_EQ(fresh.bytes(), 0);
}

TEST_F(MetricsTest, KeepBytesBeyondTheFileIsAnError) {
  {
    Metrics m = Metrics::open(path_).value();
    ASSERT_TRUE(m.log("train", 1, {{"loss", 4}}).ok());
  }
  const std::string before = contents();
  tg::Result<Metrics> r = Metrics::open(path_, static_cast<int64_t>(before.size()) + 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path_), std::string::npos);
  EXPECT_NE(r.status().message().find("fewer than"), std::string::npos);
  EXPECT_EQ(contents(), before);  // untouched
  // A length that falls inside a line is not this log's checkpoint either.
  tg::Result<Metrics> mid = Metrics::open(path_, 5);
  ASSERT_FALSE(mid.ok());
  EXPECT_NE(mid.status().message().find("not the end of a line"), std::string::npos);
  EXPECT_EQ(contents(), before);
}

TEST_F(MetricsTest, TornLastLineIsDropped) {
  ASSERT_TRUE(tg::write_file_atomic(path_, "{\"kind\": \"train\", \"step\": 1, \"loss\": 4}\n{\"kind\": \"tra").ok());
  Metrics m = Metrics::open(path_).value();
  ASSERT_TRUE(m.log("train", 2, {{"loss", 3}}).ok());
  EXPECT_EQ(contents(), "{\"kind\": \"train\", \"step\": 1, \"loss\": 4}\n{\"kind\": \"train\", \"step\": 2, \"loss\": 3}\n");
  EXPECT_TRUE(Metrics::parse(contents(), path_).ok());
}

TEST_F(MetricsTest, NonFiniteValuesAreNull) {
  Metrics m = Metrics::open(path_).value();
  ASSERT_TRUE(m.log("train", 7, {{"loss", std::nan("")}, {"grad_norm", std::numeric_limits<double>::infinity()}, {"lr", 0.5}}).ok());
  EXPECT_EQ(contents(), "{\"kind\": \"train\", \"step\": 7, \"loss\": null, \"grad_norm\": null, \"lr\": 0.5}\n");
  EXPECT_EQ(m.history().count("train/loss"), 0u);
  EXPECT_EQ(m.history().at("train/lr").size(), 1u);
  EXPECT_EQ(Metrics::parse(contents(), path_).value(), m.history());
}

TEST_F(MetricsTest, HistoryRoundTripsThroughTheFile) {
  Metrics m = Metrics::open(path_).value();
  double x = 1.0 / 3;
  for (int64_t step = 1; step <= 200; ++step) {
    x = std::fmod(x * 3.7 + 0.123456789, 10.0);  // values that need all 17 digits
    ASSERT_TRUE(m.log("train", step, {{"loss", x}, {"lr", 1e-4 * x}, {"tiny", x * 1e-300}, {"huge", x * 1e300}}).ok());
    if (step % 50 == 0) {
      ASSERT_TRUE(m.log("valid", step, {{"valid_loss", x / 7}}).ok());
    }
  }
  ASSERT_TRUE(m.log("we\"ird\\kind", 201, {{"na\nme", -0.1}}).ok());  // names are escaped JSON strings
  const Metrics::History reloaded = Metrics::parse(contents(), path_).value();
  EXPECT_EQ(reloaded, m.history());
  EXPECT_EQ(reloaded.at("train/loss").size(), 200u);
  EXPECT_EQ(reloaded.at("valid/valid_loss").size(), 4u);
  EXPECT_EQ(reloaded.at("we\"ird\\kind/na\nme"), (std::vector<std::pair<double, double>>{{201, -0.1}}));

  // Resuming: the history comes back from the checkpoint, and new lines extend it.
  Metrics resumed = Metrics::open(path_, m.bytes()).value();
  resumed.set_history(m.history());
  ASSERT_TRUE(resumed.log("train", 202, {{"loss", 0.25}}).ok());
  EXPECT_EQ(Metrics::parse(contents(), path_).value(), resumed.history());
}

TEST_F(MetricsTest, MovesKeepTheFile) {
  Metrics a = Metrics::open(path_).value();
  Metrics b = std::move(a);
  ASSERT_TRUE(b.log("train", 1, {{"loss", 1}}).ok());
  Metrics c = Metrics::open(dir_ + "/other.jsonl").value();
  c = std::move(b);
  ASSERT_TRUE(c.log("train", 2, {{"loss", 2}}).ok());
  EXPECT_EQ(Metrics::parse(contents(), path_).value().at("train/loss").size(), 2u);
  EXPECT_EQ(c.history().at("train/loss").size(), 2u);
}

TEST_F(MetricsTest, ReservedAndRepeatedNamesAreRefused) {
  Metrics m = Metrics::open(path_).value();
  EXPECT_THROW((void)m.log("train", 1, {{"step", 1}}), tg::Error);
  EXPECT_THROW((void)m.log("train", 1, {{"loss", 1}, {"loss", 2}}), tg::Error);
  EXPECT_EQ(contents(), "");
}

TEST_F(MetricsTest, OpenFailsOnAFolder) {
  tg::Result<Metrics> r = Metrics::open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir_), std::string::npos);
}

TEST(MetricsParse, ErrorsNameTheLine) {
  const std::string good = "{\"kind\": \"train\", \"step\": 1, \"loss\": 2}\n";
  EXPECT_TRUE(Metrics::parse(good + "\n" + good, "m.jsonl").ok());  // blank lines are fine
  auto bad = Metrics::parse(good + good + "{\"kind\": \"train\", \"step\": 3, \"loss\": \n", "m.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "m.jsonl:3: not a JSON object");
  EXPECT_EQ(Metrics::parse("[1, 2]\n", "m.jsonl").status().message(), "m.jsonl:1: not a JSON object");
  EXPECT_EQ(Metrics::parse("{\"kind\": \"train\", \"loss\": 2}\n", "m.jsonl").status().message(), "m.jsonl:1: no numeric \"step\"");
  EXPECT_EQ(Metrics::parse("{\"step\": 1}", "m.jsonl").status().message(), "m.jsonl:1: no \"kind\" string");
  // Other values (text, flags) are allowed and skipped; the last line may lack its newline.
  auto h = Metrics::parse("{\"kind\": \"final\", \"step\": 9, \"bleu\": 0.25, \"note\": \"beam 4\", \"ok\": true}", "m.jsonl");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (Metrics::History{{"final/bleu", {{9, 0.25}}}}));
}

// ---- progress line ----

TEST(Progress, Durations) {
  using tg::train::format_duration;
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(125), "2:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(std::nan("")), "--:--");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "--:--");
}

TEST(Progress, LineParts) {
  using tg::train::progress_line;
  EXPECT_EQ(progress_line("train", 500, 2000, 10, 1234, "tok", "loss 2.31", 0), "train  25% 500/2000  0:10<0:30  1234 tok/s  loss 2.31");
  // Without a unit the rate counts steps; seconds per step when slow.
  EXPECT_EQ(progress_line("", 50, 100, 10, 5, "", "", 0), " 50% 50/100  0:10<0:10  5.00 it/s");
  EXPECT_EQ(progress_line("", 2, 100, 10, 0.2, "", "", 0), "  2% 2/100  0:10<8:10  5.00 s/it");
  EXPECT_EQ(progress_line("", 2, 100, 10, -1, "", "", 0), "  2% 2/100  0:10<8:10");
  EXPECT_EQ(progress_line("", 21300, 21300, 1, 21300, "words", "", 0), "100% 21300/21300  0:01  21.3k words/s");
  // Nothing measured yet: no ETA, no rate, no division by zero.
  EXPECT_EQ(progress_line("", 0, 10, 0, -1, "", "", 0), "  0% 0/10  0:00<--:--");
  EXPECT_EQ(progress_line("", 3, 10, 0, 7, "", "", 0), " 30% 3/10  0:00<--:--");
  EXPECT_EQ(progress_line("", 3, 10, 0.01, 300, "", "", 0), " 30% 3/10  0:00<--:--");  // 10 ms: noise
  EXPECT_EQ(progress_line("", 1, 0, 5, 0, "", "", 0), "100% 1/1  0:05");
}

TEST(Progress, Bar) {
  using tg::train::progress_line;
  const std::string full = "\u2588";
  std::string half = "[";
  for (int i = 0; i < 4; ++i) half += full;
  half += "    ] ";
  EXPECT_EQ(progress_line("", 5, 10, 1, -1, "", "", 8).substr(0, half.size()), half);
  EXPECT_EQ(progress_line("", 0, 10, 1, -1, "", "", 4).substr(0, 7), "[    ] ");
  EXPECT_EQ(progress_line("", 99, 10, 1, 99, "", "", 2), "[" + full + full + "] 100% 99/10  0:01  99.0 it/s");  // clamped
  EXPECT_EQ(progress_line("", 2, 16, 1, -1, "", "", 4).substr(0, 4), "[\u258c");  // a half block: 2/16 of 4 cells
}

TEST(Progress, RatesForHumans) {
  using tg::train::format_rate;
  EXPECT_EQ(format_rate(0.421), "0.42");
  EXPECT_EQ(format_rate(12.51), "12.5");
  EXPECT_EQ(format_rate(1234.4), "1234");
  EXPECT_EQ(format_rate(21300), "21.3k");
  EXPECT_EQ(format_rate(1.2e6), "1.2M");
}

}  // namespace
}  // namespace tgt
