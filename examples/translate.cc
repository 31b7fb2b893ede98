// translate: reads source sentences on stdin, writes one translation a line on stdout.
//
//   echo "Das Haus ist alt." | ./build/translate --load runs/translator
#include <cstdio>
#include <iostream>
#include <string>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>

#include "examples/common.h"
#include "examples/translator_common.h"

ABSL_FLAG(std::string, load, "runs/translator", "folder written by train_translator");
ABSL_FLAG(int64_t, beam, 4, "beam size");
ABSL_FLAG(int64_t, max_len, 80, "most tokens per translation");
ABSL_FLAG(int32_t, threads, 0, "threads (0: TG_NUM_THREADS or all cores)");

int main(int argc, char** argv) {
  namespace ex = tg::examples;
  ex::set_program_name(argv[0]);
  absl::SetProgramUsageMessage("translate stdin, one sentence a line: translate --load DIR");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_beam) < 1 || absl::GetFlag(FLAGS_max_len) < 1) ex::fail("--beam and --max_len must be >= 1");
  if (absl::GetFlag(FLAGS_threads) > 0) tg::set_num_threads(absl::GetFlag(FLAGS_threads));
  ex::Translator t = ex::or_fail(ex::load_translator(absl::GetFlag(FLAGS_load)));
  std::string line;
  while (std::getline(std::cin, line)) {
    std::cout << t.translate(line, absl::GetFlag(FLAGS_beam), absl::GetFlag(FLAGS_max_len)) << '\n' << std::flush;
  }
  return 0;
}
