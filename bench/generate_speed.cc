// Generation speed of a GPT-2-shaped decoder LM (random weights: vocabulary 96, context 1024,
// d_model 256, 8 heads, d_ff 1024, 4 pre-norm GELU blocks, tied head): a 128-token prompt, then
// 512 tokens chosen greedily (top_k = 1), with the key/value cache (the default) and without it
// (the whole prefix recomputed each step), on 1 and 2 threads. One JSON line per case; the
// PyTorch / Hugging Face peer is bench/torch_generate.py, both run by bench/decode_peers.sh.
//
//   build/generate_speed [--new_tokens 512] [--prompt 128] [--threads 1,2] [--repeats 3]
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "tapegrad.h"

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    int64_t new_tokens = 512, prompt_len = 128, repeats = 3;
    std::string threads = "1,2";
    tg::cli::Flags flags("generate_speed", "tokens/s of greedy generation with and without the key/value cache");
    flags.add("new_tokens", &new_tokens, "tokens generated").range(1, 896);
    flags.add("prompt", &prompt_len, "prompt tokens").range(1, 128);
    flags.add("threads", &threads, "comma-separated thread counts");
    flags.add("repeats", &repeats, "runs per cached case (the median is reported; uncached runs once)").min(1);
    flags.parse(argc, argv).or_throw();
    tg::manual_seed(0);
    tg::DecoderLM lm({.vocab = 96, .context = 1024,
                      .layer = {.d_model = 256, .heads = 8, .d_ff = 1024, .dropout = 0.0,
                                .activation = tg::Activation::kGelu, .norm_first = true},
                      .layers = 4});
    tg::Generator g(0);
    std::vector<int64_t> prompt;
    for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int64_t>(g.next_u64() % 96));
    std::vector<int> counts;
    for (size_t pos = 0; pos < threads.size();) {
      size_t comma = std::min(threads.find(',', pos), threads.size());
      counts.push_back(std::stoi(threads.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    for (int n : counts) {
      tg::set_num_threads(n);
      for (bool cache : {true, false}) {
        std::vector<double> secs;
        for (int64_t r = 0; r < (cache ? repeats : 1); ++r) {
          auto start = std::chrono::steady_clock::now();
          auto out = tg::sample(lm, prompt, {.max_new_tokens = new_tokens, .top_k = 1, .use_cache = cache});
          secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          if (static_cast<int64_t>(out.size()) != new_tokens) throw tg::Error("generate_speed: generated too few tokens");
        }
        std::sort(secs.begin(), secs.end());
        const double s = secs[secs.size() / 2];
        fmt::print("{{\"peer\": \"tapegrad\", \"cache\": {}, \"threads\": {}, \"prompt\": {}, \"new_tokens\": {}, "
                   "\"seconds\": {:.4f}, \"tokens_per_s\": {:.1f}, \"arch\": \"{}\"}}\n",
                   cache, n, prompt_len, new_tokens, s, static_cast<double>(new_tokens) / s, tg::build_march());
        std::fflush(stdout);
      }
    }
    return 0;
  });
}
