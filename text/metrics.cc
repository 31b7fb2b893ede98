#include "text/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <regex>

#include "graph/error.h"

namespace tg::text {

std::vector<std::string> tokenize_13a(std::string_view input) {
  // sacreBLEU's 13a: the mteval-v13a rules, as regular expressions over the line.
  std::string line(input);
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t p = line.find(from); p != std::string::npos; p = line.find(from, p + to.size())) line.replace(p, from.size(), to);
  };
  replace_all("<skipped>", "");
  replace_all("-\n", "");
  replace_all("\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all("&quot;", "\"");
    replace_all("&amp;", "&");
    replace_all("&lt;", "<");
    replace_all("&gt;", ">");
  }
  line = " " + line + " ";
  static const std::regex r1("([\\{-\\~\\[-\\` -\\&\\(-\\+\\:-\\@\\/])");
  static const std::regex r2("([^0-9])([\\.,])");
  static const std::regex r3("([\\.,])([^0-9])");
  static const std::regex r4("([0-9])(-)");
  line = std::regex_replace(line, r1, " $1 ");
  line = std::regex_replace(line, r2, "$1 $2 ");
  line = std::regex_replace(line, r3, " $1 $2");
  line = std::regex_replace(line, r4, "$1 $2 ");
  std::vector<std::string> out;
  const std::string_view space = " \t\n\r\f\v";
  for (size_t b = line.find_first_not_of(space); b != std::string::npos; b = line.find_first_not_of(space, b)) {
    const size_t e = std::min(line.find_first_of(space, b), line.size());
    out.push_back(line.substr(b, e - b));
    b = e;
  }
  return out;
}

Bleu corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  int64_t correct[4] = {0, 0, 0, 0}, total[4] = {0, 0, 0, 0};
  Bleu b;
  for (size_t i = 0; i < hyps.size() && i < refs.size(); ++i) {
    std::vector<std::string> h = tokenize_13a(hyps[i]), r = tokenize_13a(refs[i]);
    b.sys_len += static_cast<int64_t>(h.size());
    b.ref_len += static_cast<int64_t>(r.size());
    for (size_t n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, int64_t> hc, rc;
      for (size_t j = 0; j + n <= h.size(); ++j) ++hc[std::vector<std::string>(h.begin() + j, h.begin() + j + n)];
      for (size_t j = 0; j + n <= r.size(); ++j) ++rc[std::vector<std::string>(r.begin() + j, r.begin() + j + n)];
      for (const auto& [g, c] : hc) {
        auto it = rc.find(g);
        if (it != rc.end()) correct[n - 1] += std::min(c, it->second);
      }
      total[n - 1] += std::max<int64_t>(0, static_cast<int64_t>(h.size()) - static_cast<int64_t>(n) + 1);
    }
  }
  // Smoothing "exp": the k-th n-gram order without a match gets precision 1 / (2^k total).
  double smooth = 1, log_sum = 0;
  const bool any_match = correct[0] + correct[1] + correct[2] + correct[3] > 0;  // else precisions stay 0
  for (int n = 0; n < 4 && any_match; ++n) {
    if (total[n] == 0) break;
    if (correct[n] == 0) {
      smooth *= 2;
      b.precisions[n] = 100.0 / (smooth * static_cast<double>(total[n]));
    } else {
      b.precisions[n] = 100.0 * static_cast<double>(correct[n]) / static_cast<double>(total[n]);
    }
  }
  for (double p : b.precisions) log_sum += p > 0 ? std::log(p) : -9999999999.0;
  b.bp = b.sys_len < b.ref_len
             ? (b.sys_len > 0 ? std::exp(1.0 - static_cast<double>(b.ref_len) / static_cast<double>(b.sys_len)) : 0.0)
             : 1.0;
  b.score = b.bp * std::exp(log_sum / 4);
  return b;
}

double perplexity(double total_nats, int64_t tokens) {
  TG_CHECK(tokens > 0, "perplexity", "the token count must be positive, not {}", tokens);
  TG_CHECK(std::isfinite(total_nats), "perplexity", "the summed loss is {} (not finite: did training diverge?)", total_nats);
  TG_CHECK(total_nats >= 0, "perplexity", "the summed loss {} is negative (a cross-entropy in nats is >= 0)", total_nats);
  return std::exp(total_nats / static_cast<double>(tokens));
}

}  // namespace tg::text
