// tg::cli: every form of a flag, every error message, usage, and run_main's exception handling.
#include "train/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace tg::cli {
namespace {

// argv for parse(): argv[0] is "prog".
class Argv {
 public:
  Argv(std::initializer_list<const char*> args, const char* program = "prog") {
    strings_.emplace_back(program);
    for (const char* a : args) strings_.emplace_back(a);
    for (auto& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(strings_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The flags of a typical training program, with their defaults.
struct TrainFlags {
  int64_t layers = 4, size = 100, width = 128, heads = 4;
  int threads = 0;
  uint64_t seed = 1;
  double lr = 1e-3, dropout = 0.0;
  bool cbow = false, lowercase = true;
  std::string tokenizer = "char", out = "runs/lm", prompt = "\n";
  Flags flags{"train_thing", "train a thing"};

  TrainFlags() {
    flags.add("layers", &layers, "transformer blocks").min(1);
    flags.add("size", &size, "vector dimensions").range(1, 10000);
    flags.add("width", &width, "model width").min(1);
    flags.add("heads", &heads, "attention heads").min(1);
    flags.add("threads", &threads, "threads (0: all cores)").min(0);
    flags.add("seed", &seed, "random seed");
    flags.add("lr", &lr, "learning rate").above(0);
    flags.add("dropout", &dropout, "dropout").min(0).below(1);
    flags.add("cbow", &cbow, "CBOW instead of skip-gram");
    flags.add("lowercase", &lowercase, "lower-case the text");
    flags.add("tokenizer", &tokenizer, "how text becomes tokens").choices({"word", "char", "bpe", "unigram"});
    flags.add("out", &out, "output folder").not_empty();
    flags.add("prompt", &prompt, "text the sample continues");
    flags.check([this] {
      return width % heads == 0 ? "" : fmt::format("--width {} must be a multiple of --heads {}", width, heads);
    });
  }
  Status parse(std::initializer_list<const char*> args) {
    Argv a(args);
    return flags.parse(a.argc(), a.argv());
  }
  Status parse(const std::vector<const char*>& args) {
    std::vector<char*> argv{const_cast<char*>("prog")};
    for (const char* s : args) argv.push_back(const_cast<char*>(s));
    return flags.parse(static_cast<int>(argv.size()), argv.data());
  }
  std::string error(std::initializer_list<const char*> args) {
    Status s = parse(args);
    return s.ok() ? "(no error)" : s.message();
  }
};

// The error of one parse on fresh flags ("(no error)" when it succeeds).
std::string parse_error(std::initializer_list<const char*> args) {
  TrainFlags t;
  return t.error(args);
}

TEST(CliTest, NoArgumentsKeepsDefaults) {
  TrainFlags t;
  ASSERT_TRUE(t.parse({}).ok());
  EXPECT_EQ(t.layers, 4);
  EXPECT_DOUBLE_EQ(t.lr, 1e-3);
  EXPECT_FALSE(t.cbow);
  EXPECT_TRUE(t.lowercase);
  EXPECT_EQ(t.tokenizer, "char");
  EXPECT_FALSE(t.flags.given("layers"));
}

TEST(CliTest, ValueForms) {
  for (auto args : {std::initializer_list<const char*>{"--layers=8"}, {"--layers", "8"}, {"-layers", "8"}, {"-layers=8"}}) {
    TrainFlags t;
    ASSERT_TRUE(t.parse(args).ok()) << *args.begin();
    EXPECT_EQ(t.layers, 8) << *args.begin();
    EXPECT_TRUE(t.flags.given("layers"));
    EXPECT_FALSE(t.flags.given("lr"));
  }
  TrainFlags t;
  ASSERT_TRUE(t.parse({"--lr", "2e-4", "-tokenizer", "bpe", "--out=runs/x=1", "--seed", "18446744073709551615", "--threads",
                       "+3", "--prompt", "-"})
                  .ok());
  EXPECT_DOUBLE_EQ(t.lr, 2e-4);
  EXPECT_EQ(t.tokenizer, "bpe");
  EXPECT_EQ(t.out, "runs/x=1");
  EXPECT_EQ(t.seed, 18446744073709551615ull);
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.prompt, "-");
}

TEST(CliTest, LastOneWins) {
  TrainFlags t;
  ASSERT_TRUE(t.parse({"--layers", "2", "--layers=3"}).ok());
  EXPECT_EQ(t.layers, 3);
}

TEST(CliTest, BoolForms) {
  struct Case {
    std::vector<const char*> args;
    bool cbow;
  };
  const std::vector<Case> cases = {
      {{"--cbow"}, true},           {{"-cbow"}, true},          {{"--nocbow"}, false},       {{"--cbow=true"}, true},
      {{"--cbow=false"}, false},    {{"--cbow=1"}, true},       {{"--cbow=0"}, false},       {{"--cbow", "0"}, false},
      {{"--cbow", "false"}, false}, {{"--cbow", "1"}, true},    {{"-cbow", "1"}, true},      {{"-cbow", "0"}, false},
      {{"--cbow", "true"}, true},   {{"--cbow", "--nocbow"}, false},
  };
  for (const Case& c : cases) {
    TrainFlags t;
    t.cbow = !c.cbow;  // so that a form that does nothing fails
    ASSERT_TRUE(t.parse(c.args).ok()) << *c.args.begin() << " " << t.parse(c.args).message();
    EXPECT_EQ(t.cbow, c.cbow) << *c.args.begin() << (c.args.size() > 1 ? c.args.begin()[1] : "");
    EXPECT_TRUE(t.flags.given("cbow"));
  }
  TrainFlags t;
  ASSERT_TRUE(t.parse({"--nolowercase"}).ok());
  EXPECT_FALSE(t.lowercase);
}

TEST(CliTest, Word2VecSingleDashForm) {
  TrainFlags t;
  t.cbow = true;
  ASSERT_TRUE(t.parse({"-cbow", "0", "-size", "200", "-lr", "0.05"}).ok());
  EXPECT_FALSE(t.cbow);  // the old parser read `--cbow 0` as true and then stopped at "0"
  EXPECT_EQ(t.size, 200);
  EXPECT_DOUBLE_EQ(t.lr, 0.05);
}

TEST(CliTest, BoolDoesNotSwallowOtherArguments) {
  TrainFlags t;
  ASSERT_TRUE(t.parse({"--cbow", "--layers", "3"}).ok());
  EXPECT_TRUE(t.cbow);
  EXPECT_EQ(t.layers, 3);
  EXPECT_EQ(parse_error({"--cbow", "yes"}), "unexpected argument 'yes' (flags start with --)");
  EXPECT_EQ(parse_error({"--nocbow", "1"}), "unexpected argument '1' (flags start with --)");
}

TEST(CliTest, BoolErrors) {
  EXPECT_EQ(parse_error({"--cbow=yes"}), "--cbow: expected true, false, 1 or 0, got 'yes'");
  EXPECT_EQ(parse_error({"--cbow="}), "--cbow: expected true, false, 1 or 0, got ''");
  EXPECT_EQ(parse_error({"--nocbow=true"}), "--nocbow: takes no value (write --cbow=true)");
}

TEST(CliTest, TheIssuesMessages) {
  EXPECT_EQ(parse_error({"--lr", "abc"}), "--lr: expected a number, got 'abc'");
  EXPECT_EQ(parse_error({"--dropout", "1.5"}), "--dropout: must be in [0, 1), got 1.5");
  EXPECT_EQ(parse_error({"--lrr", "0.1"}), "unknown flag --lrr (did you mean --lr?)");
  EXPECT_EQ(parse_error({"foo"}), "unexpected argument 'foo' (flags start with --)");
  EXPECT_EQ(parse_error({"--tokenizer", "x"}), "--tokenizer: expected one of word, char, bpe, unigram, got 'x'");
  EXPECT_EQ(parse_error({"--layers"}), "--layers: missing value");
}

TEST(CliTest, UnknownFlags) {
  EXPECT_EQ(parse_error({"-lrr", "0.1"}), "unknown flag -lrr (did you mean -lr?)");
  EXPECT_EQ(parse_error({"--lrr=0.1"}), "unknown flag --lrr (did you mean --lr?)");
  EXPECT_EQ(parse_error({"--dropuot", "0.1"}), "unknown flag --dropuot (did you mean --dropout?)");
  EXPECT_EQ(parse_error({"--tokeniser", "bpe"}), "unknown flag --tokeniser (did you mean --tokenizer?)");
  EXPECT_EQ(parse_error({"--tok", "bpe"}), "unknown flag --tok (did you mean --tokenizer?)");  // the one it abbreviates
  EXPECT_EQ(parse_error({"--zzz"}), "unknown flag --zzz");
  EXPECT_EQ(parse_error({"--nolayers"}), "unknown flag --nolayers (did you mean --layers?)");  // not a bool
}

TEST(CliTest, StrayArguments) {
  TrainFlags t;
  EXPECT_EQ(parse_error({"--layers", "3", "data.txt"}), "unexpected argument 'data.txt' (flags start with --)");
  EXPECT_EQ(parse_error({"-5"}), "unexpected argument '-5' (flags start with --)");
  EXPECT_EQ(parse_error({"-"}), "unexpected argument '-' (flags start with --)");
  EXPECT_EQ(parse_error({"--", "--layers"}), "unexpected argument '--layers' (flags start with --)");
  EXPECT_TRUE(t.parse({"--layers", "3", "--"}).ok());
}

TEST(CliTest, MissingValues) {
  TrainFlags t;
  EXPECT_EQ(t.error({"--out", "--cbow"}),
            "--out: missing value (the next argument '--cbow' is a flag; write --out=VALUE for a value that starts with -)");
  EXPECT_EQ(t.out, "runs/lm");
  ASSERT_TRUE(t.parse({"--prompt=--x"}).ok());
  EXPECT_EQ(t.prompt, "--x");
}

TEST(CliTest, Integers) {
  EXPECT_EQ(parse_error({"--layers", "12abc"}), "--layers: expected an integer, got '12abc'");
  EXPECT_EQ(parse_error({"--layers", "1e3"}), "--layers: expected an integer, got '1e3'");
  EXPECT_EQ(parse_error({"--layers", "2.0"}), "--layers: expected an integer, got '2.0'");
  EXPECT_EQ(parse_error({"--layers", "0x10"}), "--layers: expected an integer, got '0x10'");
  EXPECT_EQ(parse_error({"--layers", " 5"}), "--layers: expected an integer, got ' 5'");
  EXPECT_EQ(parse_error({"--layers="}), "--layers: expected an integer, got ''");
  EXPECT_EQ(parse_error({"--layers", "999999999999999999999"}),
            "--layers: expected an integer from -9223372036854775808 to 9223372036854775807, got '999999999999999999999'");
  EXPECT_EQ(parse_error({"--threads", "99999999999"}),
            "--threads: expected an integer from -2147483648 to 2147483647, got '99999999999'");
  EXPECT_EQ(parse_error({"--seed", "-1"}), "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(parse_error({"--seed", "18446744073709551616"}),
            "--seed: expected an integer from 0 to 18446744073709551615, got '18446744073709551616'");
  EXPECT_EQ(parse_error({"--layers", "-3"}), "--layers: must be >= 1, got -3");  // a negative number is a value
}

TEST(CliTest, DoublesAreFinite) {
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "+inf"}) {
    TrainFlags t;
    EXPECT_EQ(t.error({"--lr", bad}), fmt::format("--lr: expected a finite number, got '{}'", bad));
    EXPECT_DOUBLE_EQ(t.lr, 1e-3);
  }
  TrainFlags t;
  EXPECT_EQ(parse_error({"--lr=1e999"}), "--lr: '1e999' is out of the range of a double");
  EXPECT_EQ(parse_error({"--lr=0.1.2"}), "--lr: expected a number, got '0.1.2'");
  EXPECT_EQ(parse_error({"--lr="}), "--lr: expected a number, got ''");
  EXPECT_EQ(parse_error({"--lr", "-0.5"}), "--lr: must be > 0, got -0.5");
  ASSERT_TRUE(t.parse({"--lr", ".5"}).ok());
  EXPECT_DOUBLE_EQ(t.lr, 0.5);
}

TEST(CliTest, Ranges) {
  TrainFlags t;
  EXPECT_TRUE(t.parse({"--dropout", "0"}).ok());
  EXPECT_TRUE(t.parse({"--dropout", "0.999"}).ok());
  EXPECT_EQ(parse_error({"--dropout", "1"}), "--dropout: must be in [0, 1), got 1");
  EXPECT_EQ(parse_error({"--dropout", "-0.1"}), "--dropout: must be in [0, 1), got -0.1");
  EXPECT_TRUE(t.parse({"--size", "1"}).ok());
  EXPECT_TRUE(t.parse({"--size", "10000"}).ok());
  EXPECT_EQ(parse_error({"--size", "10001"}), "--size: must be in [1, 10000], got 10001");
  EXPECT_EQ(parse_error({"--size", "0"}), "--size: must be in [1, 10000], got 0");
  EXPECT_EQ(parse_error({"--lr", "0"}), "--lr: must be > 0, got 0");
  EXPECT_EQ(parse_error({"--layers", "0"}), "--layers: must be >= 1, got 0");
  EXPECT_EQ(parse_error({"--threads", "-1"}), "--threads: must be >= 0, got -1");

  Flags f("p", "s");
  uint64_t big = 0;
  double d = 0;
  f.add("big", &big, "").max(9007199254740993.0);  // 2^53 + 1 rounds to 2^53 as a double
  f.add("d", &d, "").below(0.5);
  Argv a{"--big", "9007199254740993", "--d", "0.25"};
  EXPECT_EQ(f.parse(a.argc(), a.argv()).message(), "--big: must be <= 9007199254740992, got 9007199254740993");
  big = 0;
  Argv b{"--d", "0.5"};
  EXPECT_EQ(f.parse(b.argc(), b.argv()).message(), "--d: must be < 0.5, got 0.5");
}

TEST(CliTest, StringChecks) {
  TrainFlags t;
  for (const char* tok : {"word", "char", "bpe", "unigram"}) {
    ASSERT_TRUE(t.parse({"--tokenizer", tok}).ok());
    EXPECT_EQ(t.tokenizer, tok);
  }
  EXPECT_EQ(parse_error({"--tokenizer="}), "--tokenizer: expected one of word, char, bpe, unigram, got ''");
  EXPECT_EQ(parse_error({"--out="}), "--out: must not be empty");
  ASSERT_TRUE(t.parse({"--prompt="}).ok());
  EXPECT_EQ(t.prompt, "");
}

TEST(CliTest, CombinationChecksRunAfterSingleFlagChecks) {
  TrainFlags t;
  EXPECT_EQ(parse_error({"--width", "10", "--heads", "3"}), "--width 10 must be a multiple of --heads 3");
  EXPECT_EQ(parse_error({"--width", "10", "--heads", "3", "--dropout", "2"}), "--dropout: must be in [0, 1), got 2");
  EXPECT_TRUE(t.parse({"--width", "12", "--heads", "3"}).ok());
}

TEST(CliTest, DefaultsAreCheckedToo) {
  TrainFlags t;
  t.dropout = 1.0;
  EXPECT_EQ(t.error({}), "--dropout: must be in [0, 1), got 1 (the default)");
  t.dropout = 0;
  t.tokenizer = "chars";
  EXPECT_EQ(t.error({}), "--tokenizer: expected one of word, char, bpe, unigram, got 'chars' (the default)");
}

TEST(CliTest, Given) {
  TrainFlags t;
  ASSERT_TRUE(t.parse({"--layers", "4", "--nocbow"}).ok());
  EXPECT_TRUE(t.flags.given("layers"));  // given, even though it equals the default
  EXPECT_TRUE(t.flags.given("cbow"));
  EXPECT_FALSE(t.flags.given("lr"));
  ASSERT_TRUE(t.parse({}).ok());
  EXPECT_FALSE(t.flags.given("layers"));  // a new parse starts afresh
  EXPECT_THROW((void)t.flags.given("nope"), tg::Error);
}

TEST(CliTest, RegistrationMistakesThrow) {
  Flags f("p", "s");
  int64_t n = 0;
  bool b = false, nob = false;
  std::string s;
  f.add("n", &n, "");
  EXPECT_THROW(f.add("n", &n, ""), tg::Error);
  EXPECT_THROW(f.add("help", &b, ""), tg::Error);
  EXPECT_THROW(f.add("Bad-Name", &b, ""), tg::Error);
  EXPECT_THROW(f.add("", &b, ""), tg::Error);
  f.add("b", &b, "");
  EXPECT_THROW(f.add("nob", &nob, ""), tg::Error);  // --nob already means b=false
  EXPECT_THROW(f.add("s", &s, "").min(1), tg::Error);
  EXPECT_THROW(f.add("s2", &s, "").choices({}), tg::Error);
  EXPECT_THROW(f.add("n2", &n, "").choices({"a"}), tg::Error);
  EXPECT_THROW(f.add("n3", &n, "").range(2, 1), tg::Error);
  EXPECT_THROW(f.add("b2", &b, "").not_empty(), tg::Error);
}

TEST(CliTest, UsageListsEveryFlagWithItsDefault) {
  TrainFlags t;
  const std::string u = t.flags.usage();
  EXPECT_EQ(u.rfind("train_thing: train a thing\n", 0), 0u) << u;
  EXPECT_NE(u.find("usage: train_thing [flags]"), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"--layers INT", "transformer blocks (default: 4; >= 1)"},
      {"--size INT", "vector dimensions (default: 100; in [1, 10000])"},
      {"--width INT", "model width (default: 128; >= 1)"},
      {"--heads INT", "attention heads (default: 4; >= 1)"},
      {"--threads INT", "threads (0: all cores) (default: 0; >= 0)"},
      {"--seed UINT", "random seed (default: 1)"},
      {"--lr NUM", "learning rate (default: 0.001; > 0)"},
      {"--dropout NUM", "dropout (default: 0; in [0, 1))"},
      {"--[no]cbow", "CBOW instead of skip-gram (default: false)"},
      {"--[no]lowercase", "lower-case the text (default: true)"},
      {"--tokenizer STR", "how text becomes tokens (default: \"char\"; one of word, char, bpe, unigram)"},
      {"--out STR", "output folder (default: \"runs/lm\"; not empty)"},
      {"--prompt STR", "text the sample continues (default: \"\\n\")"},
      {"--help", "print this help and exit"},
  };
  // One line a flag, in the order added, the help texts in one column.
  std::istringstream lines(u);
  std::string line;
  size_t next = 0, column = 0;
  while (std::getline(lines, line) && next < expected.size()) {
    const auto& [head, rest] = expected[next];
    if (line.rfind("  " + head + " ", 0) != 0) continue;
    const size_t at = line.find(rest);
    ASSERT_NE(at, std::string::npos) << line;
    EXPECT_EQ(at + rest.size(), line.size()) << line;
    if (next == 0) column = at;
    EXPECT_EQ(at, column) << line;
    EXPECT_EQ(line.find_first_not_of(' ', 2 + head.size()), at) << line;
    ++next;
  }
  EXPECT_EQ(next, expected.size()) << "missing or out of order: " << expected[std::min(next, expected.size() - 1)].first
                                   << "\n" << u;
  EXPECT_NE(u.find("-name value"), std::string::npos);
}

TEST(CliTest, HelpExitsZero) {
  // Re-executed, not only forked: the library's thread pool may be running in this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::freopen("/dev/null", "w", stdout);  // the usage is not the test's output
        TrainFlags t;
        (void)t.parse({"--help"});
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        std::freopen("/dev/null", "w", stdout);  // the usage is not the test's output
        TrainFlags t;
        (void)t.parse({"--lrr", "-h"});  // help wins over an error before it
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        std::freopen("/dev/null", "w", stdout);  // the usage is not the test's output
        TrainFlags t;
        (void)t.parse({"-help"});
      },
      testing::ExitedWithCode(0), "");
  // After "--", -h is a stray argument, not a request for help.
  TrainFlags t;
  EXPECT_EQ(parse_error({"--", "-h"}), "unexpected argument '-h' (flags start with --)");
}

int run(std::function<int()> body, std::string* err) {
  Argv a({}, "/some/dir/myprog");
  testing::internal::CaptureStderr();
  const int rc = run_main(a.argc(), a.argv(), body);
  *err = testing::internal::GetCapturedStderr();
  return rc;
}

TEST(CliTest, RunMainMapsExceptionsToOneLineAndExitCode1) {
  // Re-executed, not only forked: the library's thread pool may be running in this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string err;
  EXPECT_EQ(run([] { return 0; }, &err), 0);
  EXPECT_EQ(err, "");
  EXPECT_EQ(program_name(), "myprog");
  EXPECT_EQ(run([] { return 3; }, &err), 3);
  EXPECT_EQ(run([]() -> int { throw tg::Error("matmul: shapes differ"); }, &err), 1);
  EXPECT_EQ(err, "myprog: matmul: shapes differ\n");
  EXPECT_EQ(run([]() -> int { throw std::runtime_error("disk full\n"); }, &err), 1);
  EXPECT_EQ(err, "myprog: disk full\n");
  EXPECT_EQ(run([]() -> int { throw 42; }, &err), 1);
  EXPECT_EQ(err, "myprog: unknown error (an exception that is not a std::exception)\n");
  EXPECT_EQ(run([]() -> int { throw std::bad_alloc(); }, &err), 1);
  EXPECT_EQ(err, "myprog: out of memory\n");
  EXPECT_EQ(run(
                [] {
                  TrainFlags t;
                  t.parse({"--lr", "abc"}).or_throw();
                  return 0;
                },
                &err),
            1);
  // The first Flags::parse of a process prints the version line first (whichever test parses first).
  if (err.find(": tapegrad ") != std::string::npos) err.erase(0, err.find('\n') + 1);
  EXPECT_EQ(err, "myprog: --lr: expected a number, got 'abc'\n");
}

TEST(CliTest, RunMainExitCodeInAProcess) {
  // Re-executed, not only forked: the library's thread pool may be running in this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Argv a({}, "./build/train_thing");
  EXPECT_EXIT(std::exit(run_main(a.argc(), a.argv(), []() -> int { throw tg::Error("boom"); })),
              testing::ExitedWithCode(1), "train_thing: boom");
  EXPECT_EXIT(run_main(a.argc(), a.argv(), [] {
                fail("no data", 3);
                return 0;
              }),
              testing::ExitedWithCode(3), "train_thing: no data");
  EXPECT_EXIT(run_main(a.argc(), a.argv(), [] {
                fail("bad input");
                return 0;
              }),
              testing::ExitedWithCode(1), "train_thing: bad input");
}

}  // namespace
}  // namespace tg::cli
