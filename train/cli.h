#pragma once
// tg::cli: the command line of every bundled program. A flag binds a variable that already holds
// its default; parse() checks every value (syntax, overflow, NaN, ranges, choices, then the
// program's combination rules) before any data is read, and says what is wrong in one line that
// names the flag. run_main() turns any exception that escapes main into "program: message" on
// stderr and exit code 1.
//
//   int main(int argc, char** argv) {
//     return tg::cli::run_main(argc, argv, [&] {
//       int64_t width = 128, heads = 4;
//       double dropout = 0.0;
//       std::string tokenizer = "char";
//       bool resume = false;
//       tg::cli::Flags flags("train_lm", "train a GPT-style language model");
//       flags.add("width", &width, "model width").min(1);
//       flags.add("heads", &heads, "attention heads").min(1);
//       flags.add("dropout", &dropout, "dropout").min(0).below(1);        // [0, 1)
//       flags.add("tokenizer", &tokenizer, "how text becomes tokens").choices({"char", "bpe", "unigram"});
//       flags.add("resume", &resume, "continue from the checkpoint");
//       flags.check([&] { return width % heads == 0 ? "" : "--width must be a multiple of --heads"; });
//       flags.parse(argc, argv).or_throw();   // --help: prints the usage, exits 0
//       ...                                   // read data, train
//       return 0;
//     });
//   }
//
// Syntax: --name=value, --name value, -name=value and -name value are the same (the single dash is
// the original word2vec's `-cbow 0 -size 200`). Bools: --name, --noname, --name=true|false|1|0, and
// --name 0 / -name 1 (a following argument that is exactly 0, 1, true or false is the value).
// A value that starts with '-' and is not a number is written with '=' (--prompt=-x), so that
// `--out --resume` is an error rather than an output folder named "--resume". A repeated flag: the
// last one wins. Positional arguments are errors. -h, -help and --help print the usage.
//
// Every flag is checked, defaults included (a failing default is reported with "(the default)"),
// so a sentinel default such as `alpha = -1` (automatic) is allowed by a check() rule, not by .above(0).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../graph/device.h"
#include "../graph/shape.h"
#include "../io/status.h"

namespace tg::cli {

// The handle add() returns, for declaring what values a flag allows. Bounds are for numeric flags,
// choices and not_empty for strings; declaring one on another kind of flag throws tg::Error.
// Doubles are always finite: NaN and inf are rejected when parsed.
class Flag {
 public:
  Flag& min(double lo);                // value >= lo
  Flag& max(double hi);                // value <= hi
  Flag& above(double lo);              // value > lo
  Flag& below(double hi);              // value < hi
  Flag& range(double lo, double hi);   // lo <= value <= hi; for [0, 1) write .min(0).below(1)
  Flag& choices(std::vector<std::string> allowed);
  Flag& not_empty();
  const std::string& name() const;
  ~Flag();

 private:
  friend class Flags;
  struct Spec;  // what the flag is and allows (cli.cc)
  explicit Flag(std::unique_ptr<Spec> spec);
  std::unique_ptr<Spec> spec_;
};

class Flags {
 public:
  // program: the name shown by --help; summary: one line saying what the program does.
  Flags(std::string program, std::string summary);
  ~Flags();
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // Binds *value, which holds the default, to --name (lower-case letters, digits and '_').
  // A name taken twice, or "help" / "h", throws tg::Error.
  Flag& add(const std::string& name, int* value, std::string help);
  Flag& add(const std::string& name, int64_t* value, std::string help);
  Flag& add(const std::string& name, uint64_t* value, std::string help);
  Flag& add(const std::string& name, double* value, std::string help);
  Flag& add(const std::string& name, bool* value, std::string help);
  Flag& add(const std::string& name, std::string* value, std::string help);

  // A rule over several flags, run in order after every single-flag check: it returns "" when the
  // values are fine, else the message (which names the flags: "--src and --tgt go together").
  void check(std::function<std::string()> rule);

  // Whether --name was set on the command line (rather than left at its default).
  // An unknown name throws tg::Error.
  bool given(std::string_view name) const;

  // Sets the bound variables from argv (argv[0] is the program) and checks them; meant to be called
  // once, and on error the program stops. The first call prints version_line() on stderr (process 0) (values parsed before the error stay set). On -h/--help:
  // prints usage() to stdout and exits 0; on --version, version_line(). Otherwise returns the first error, e.g.
  //   "--lr: expected a number, got 'abc'"        "--dropout: must be in [0, 1), got 1.5"
  //   "unknown flag --lrr (did you mean --lr?)"  "unexpected argument 'foo' (flags start with --)"
  //   "--layers: missing value"                  "--tokenizer: expected one of word, char, got 'x'"
  Status parse(int argc, char** argv);

  // The program, its summary and every flag (type, help, default and allowed values), aligned.
  std::string usage() const;

 private:
  Flag& add_flag(const std::string& name, std::unique_ptr<Flag::Spec> spec);
  Flag::Spec* find(std::string_view name) const;

  std::string program_, summary_;
  std::vector<std::unique_ptr<Flag>> flags_;
  std::vector<std::function<std::string()>> rules_;
};

// --precision fp32|bf16 (default fp32), for the programs that train or run a model: fp32 computes in
// float32; bf16 runs the matrix products under tg::AutocastGuard (bfloat16 inputs, float32 sums;
// weights and everything else stay float32).
Flag& add_precision(Flags& f, std::string* value);
// The dtype a --precision value names. For bf16 on a CPU without AVX512-BF16 or AMX, one warning
// line on stderr: the products are then rounded to bfloat16 and computed by the float32 kernels.
DType precision(const std::string& value);

// --device auto|cpu|cuda|cuda:N (default auto: the GPU where one is usable, else the CPU), for the
// programs that run a model.
Flag& add_device(Flags& f, std::string* value);
// The device a --device value names. cuda where no GPU is usable (none, no driver, a driver too old,
// a build without CUDA) or cuda:N past the last GPU is one line and exit 2, before anything loads.
Device device(const std::string& value);
// The device a training program's --device names: as device(), except that data-parallel
// training (several processes) and work that has no GPU path (`cpu_only`, e.g. "word2vec's
// negative-sampling loss") stay on the CPU: auto is then the CPU, and cuda is one line and exit 2.
Device training_device(const std::string& value, const std::string& cpu_only = "");
// "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB)": for a program's first line.
std::string describe_device(Device d);

// "PROGRAM: tapegrad 0.1.0 (TG_ARCH=native, -march=znver3), bf16 matmul: avx512_bf16 (CPU: ...)":
// what --version prints, and what run_main() prints first on stderr.
std::string version_line();

// Sets program_name() to basename(argv[0]) and returns body()'s exit code. Any exception escaping
// body (tg::Error, std::exception, anything else) becomes one line "program: message" on stderr and
// exit code 1. It parses nothing itself. Launched as one of several processes (mpirun, srun), it
// first joins the others (tg::dist::world()); then only process 0's standard output is kept, an
// error all processes raised together is printed once, and an error of one process alone is
// printed as "program: process R of N: message" and ends the whole job.
int run_main(int argc, char** argv, const std::function<int()>& body);

// A program's own fatal error: prints "program: message" on stderr and exits with `code`.
[[noreturn]] void fail(const std::string& message, int code = 1);

// The name run_main() took from argv[0]; empty before (fail() then prints the message alone).
const std::string& program_name();

}  // namespace tg::cli
