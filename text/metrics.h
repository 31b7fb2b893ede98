#pragma once
// Text metrics: corpus BLEU exactly as sacreBLEU computes it, and perplexity.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tg::text {

struct Bleu {
  double score = 0;  // 0..100
  double bp = 0;     // brevity penalty
  int64_t sys_len = 0, ref_len = 0;
  double precisions[4] = {0, 0, 0, 0};  // n-gram precisions in percent, n = 1..4
};
// sacreBLEU's default corpus BLEU (2.x): tokenizer 13a, n-grams 1..4, brevity penalty, smoothing
// "exp", one reference per hypothesis (pairs beyond the shorter list are ignored).
Bleu corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);
// sacreBLEU's 13a tokenizer (mteval-v13a): BLEU's own word splitter, not a model tokenizer.
std::vector<std::string> tokenize_13a(std::string_view line);

// exp(total_nats / tokens): the perplexity of a summed cross-entropy loss (in nats) over `tokens`
// predicted tokens. tg::Error when tokens <= 0 or the sum is not finite (a diverged run).
double perplexity(double total_nats, int64_t tokens);

}  // namespace tg::text
