// translate: reads source sentences on stdin, writes one translation a line on stdout, and at the
// end the number of sentences and the decoding speed on stderr.
//
//   echo "Das Haus ist alt." | ./build/translate --load runs/translator
#include <chrono>
#include <iostream>
#include <string>

#include <fmt/core.h>

#include <tapegrad/tapegrad.h>

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    std::string load = "runs/translator", precision = "fp32", device_flag = "auto";
    int64_t beam = 4, max_len = 80, threads = 0;
    bool no_cache = false;
    tg::cli::Flags flags("translate", "translate stdin, one sentence a line, with a model train_translator saved");
    flags.add("load", &load, "folder written by train_translator").not_empty();
    flags.add("beam", &beam, "beam size").range(1, 64);
    flags.add("max_len", &max_len, "most tokens per translation").range(1, 10000);
    flags.add("threads", &threads, "threads (0: TG_NUM_THREADS or all cores)").range(0, 1024);
    flags.add("no_cache", &no_cache, "recompute the whole prefix at every step instead of using key/value caches (for comparisons)");
    tg::cli::add_precision(flags, &precision);
    tg::cli::add_device(flags, &device_flag);
    flags.parse(argc, argv).or_throw();
    const tg::Device device = tg::cli::device(device_flag);
    if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
    tg::AutocastGuard autocast(tg::cli::precision(precision));
    const tg::text::Translator t = tg::text::Translator::load(load).value();
    if (tg::autocast_enabled()) tg::check_representable(*t.model, tg::kBFloat16, load).or_throw();
    t.model->to(device);
    fmt::print(stderr, "translate: {} on {}, beam {}, {}\n", load, tg::cli::describe_device(device), beam, precision);
    std::string line;
    int64_t sentences = 0;
    double seconds = 0;
    while (std::getline(std::cin, line)) {
      auto start = std::chrono::steady_clock::now();
      std::string out = t.translate(line, {.beam = beam, .max_len = max_len, .use_cache = !no_cache});
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++sentences;
      std::cout << out << '\n' << std::flush;
    }
    fmt::print(stderr, "translate: {} sentences in {:.2f} s of decoding (beam {}, {}): {:.1f} sentences/s\n", sentences,
               seconds, beam, no_cache ? "no cache" : "key/value cache", seconds > 0 ? static_cast<double>(sentences) / seconds : 0.0);
    return 0;
  });
}
