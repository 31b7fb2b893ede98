// translate: reads source sentences on stdin, writes one translation a line on stdout.
//
//   echo "Das Haus ist alt." | ./build/translate --load runs/translator
#include <iostream>
#include <string>

#include "translator.h"
#include <tapegrad/tapegrad.h>

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string load = "runs/translator";
    int64_t beam = 4, max_len = 80, threads = 0;
    tg::cli::Flags flags("translate", "translate stdin, one sentence a line, with a model train_translator saved");
    flags.add("load", &load, "folder written by train_translator").not_empty();
    flags.add("beam", &beam, "beam size").range(1, 64);
    flags.add("max_len", &max_len, "most tokens per translation").range(1, 10000);
    flags.add("threads", &threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
    flags.parse(argc, argv).or_throw();
    if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
    translator::Translator t = translator::load(load).value();
    std::string line;
    while (std::getline(std::cin, line)) std::cout << t.translate(line, beam, max_len) << '\n' << std::flush;
    return 0;
  });
}
