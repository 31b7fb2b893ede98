#include "models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/error.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "io/state_dict.h"
#include "ops/ops.h"

namespace tg {

namespace {

// Eval mode and no graph for the duration of a decode; the previous mode is restored.
class InferenceScope {
 public:
  explicit InferenceScope(Module& m) : m_(m), was_training_(m.is_training()) { m.eval(); }
  ~InferenceScope() { m_.train(was_training_); }

 private:
  NoGradGuard no_grad_;
  Module& m_;
  bool was_training_;
};

// Logits must be finite: NaN or an infinity (a weight or activation that overflowed, in bfloat16
// above 3.39e38) would otherwise be decoded as token 0, over and over. One line naming the step.
void check_finite_logits(const Tensor& logits, int64_t step, const char* who) {
  const int64_t bad = first_non_finite(logits);
  if (bad < 0) return;
  const double x = logits.reshape({-1}).narrow(0, bad, 1).to(kFloat64).item();
  detail::fail(who, "step {}: the model's logits are not finite ({} at flat index {} of {}): a weight or an activation "
               "overflowed{}; nothing is decoded from them", step, x, bad, logits.shape(),
               autocast_enabled() || logits.dtype() == kBFloat16 ? " (in bfloat16 values past 3.39e38 become infinite)" : "");
}

// Log-probabilities of the next token for every row: the last position of logits [B, T, V].
std::vector<std::vector<double>> last_log_probs(const Tensor& logits, int64_t step, const char* who) {
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  const Tensor last = logits.narrow(1, T - 1, 1).to(kCPU);  // (from a GPU: the step's one copy and wait)
  check_finite_logits(last, step, who);
  std::vector<double> lp = log_softmax(last, -1).to_vector<double>();
  std::vector<std::vector<double>> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) out[static_cast<size_t>(b)].assign(lp.begin() + b * V, lp.begin() + (b + 1) * V);
  return out;
}

// Token ids on the device the model's weights are on (the one copy a decode step makes to the
// device; its logits come back to the host to be chosen from).
Tensor ids_tensor(const std::vector<std::vector<int64_t>>& rows, Device device) {
  const int64_t B = static_cast<int64_t>(rows.size()), T = static_cast<int64_t>(rows[0].size());
  std::vector<int64_t> flat;
  flat.reserve(static_cast<size_t>(B * T));
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return from_vector(flat, {B, T}).to(device);
}

void check_decode(const Transformer& model, const Tensor& src, const DecodeOptions& o, const char* who) {
  TG_CHECK(src.defined() && src.dtype() == kInt64 && src.dim() == 2 && src.size(0) > 0 && src.size(1) > 0, who,
           "expects int64 source ids [B, S]");
  TG_CHECK(o.max_len > 0 && o.max_len < model.cfg.max_len, who, "max_len {} must be in [1, {})", o.max_len,
           model.cfg.max_len);
  TG_CHECK(o.bos >= 0 && o.bos < model.cfg.tgt_vocab && o.eos >= 0 && o.eos < model.cfg.tgt_vocab, who,
           "bos {} and eos {} must be target ids below {}", o.bos, o.eos, model.cfg.tgt_vocab);
  TG_CHECK(o.length_penalty >= 0, who, "length_penalty must be >= 0, got {}", o.length_penalty);
}

double length_norm(size_t len, double alpha) { return std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha); }

}  // namespace

std::vector<std::vector<int64_t>> greedy_decode(Transformer& model, const Tensor& src, const DecodeOptions& o) {
  check_decode(model, src, o, "greedy_decode");
  InferenceScope scope(model);
  const size_t B = static_cast<size_t>(src.size(0));
  Tensor memory = model.encode(src);
  std::vector<std::vector<int64_t>> ys(B, std::vector<int64_t>{o.bos});
  std::vector<bool> done(B, false);
  DecoderCache cache;
  for (int64_t step = 0; step < o.max_len; ++step) {
    Tensor logits;
    if (o.use_cache) {  // only the newest token of each row
      std::vector<std::vector<int64_t>> last;
      for (const auto& y : ys) last.push_back({y.back()});
      logits = model.decode(ids_tensor(last, model.device()), memory, src, true, &cache);
    } else {
      logits = model.decode(ids_tensor(ys, model.device()), memory, src, /*last_only=*/true);
    }
    auto lp = last_log_probs(logits, step, "greedy_decode");
    bool all_done = true;
    for (size_t b = 0; b < B; ++b) {
      int64_t next = done[b] ? o.eos : std::max_element(lp[b].begin(), lp[b].end()) - lp[b].begin();
      ys[b].push_back(next);
      if (next == o.eos) done[b] = true;
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  for (auto& y : ys) {
    auto end = std::find(y.begin() + 1, y.end(), o.eos);
    y = std::vector<int64_t>(y.begin() + 1, end);
  }
  return ys;
}

std::vector<Hypothesis> beam_search(Transformer& model, const Tensor& src, const DecodeOptions& o) {
  check_decode(model, src, o, "beam_search");
  TG_CHECK(src.size(0) == 1, "beam_search", "decodes one sentence at a time: src must be [1, S], got {}", src.shape());
  TG_CHECK(o.beam_size >= 1, "beam_search", "beam_size must be >= 1, got {}", o.beam_size);
  InferenceScope scope(model);
  Tensor memory1 = model.encode(src);
  struct Beam {
    std::vector<int64_t> ys;  // with bos
    double lp;
  };
  std::vector<Beam> alive{{{o.bos}, 0.0}};
  std::vector<Hypothesis> finished;
  const size_t K = static_cast<size_t>(o.beam_size);
  DecoderCache cache;  // one row per live beam, in the order of `alive`
  for (int64_t step = 0; step < o.max_len && !alive.empty(); ++step) {
    const int64_t nb = static_cast<int64_t>(alive.size());
    std::vector<std::vector<int64_t>> rows;
    for (const Beam& b : alive) rows.push_back(o.use_cache ? std::vector<int64_t>{b.ys.back()} : b.ys);
    Tensor memory = nb == 1 ? memory1 : expand(memory1, {nb, -1, -1});
    Tensor srcs = nb == 1 ? src : expand(src, {nb, -1});
    auto lp = last_log_probs(model.decode(ids_tensor(rows, model.device()), memory, srcs, /*last_only=*/true,
                                          o.use_cache ? &cache : nullptr), step, "beam_search");
    // The K best continuations over all beams.
    struct Cand {
      double lp;
      size_t beam;
      int64_t tok;
    };
    std::vector<Cand> cands;
    for (size_t b = 0; b < alive.size(); ++b) {
      std::vector<int64_t> idx(lp[b].size());
      std::iota(idx.begin(), idx.end(), 0);
      size_t take = std::min(K, idx.size());
      std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(take), idx.end(),
                        [&](int64_t x, int64_t y) { return lp[b][x] > lp[b][y]; });
      for (size_t j = 0; j < take; ++j) cands.push_back({alive[b].lp + lp[b][idx[j]], b, idx[j]});
    }
    std::sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) { return x.lp > y.lp; });
    std::vector<Beam> next;
    std::vector<int64_t> parents;  // the cache row each surviving beam continues
    for (const Cand& c : cands) {
      if (next.size() >= K) break;
      std::vector<int64_t> ys = alive[c.beam].ys;
      if (c.tok == o.eos) {
        std::vector<int64_t> toks(ys.begin() + 1, ys.end());
        finished.push_back({toks, c.lp, c.lp / length_norm(toks.size() + 1, o.length_penalty), true});
        continue;
      }
      ys.push_back(c.tok);
      next.push_back({std::move(ys), c.lp});
      parents.push_back(static_cast<int64_t>(c.beam));
    }
    alive = std::move(next);
    if (o.use_cache && !alive.empty()) cache.reorder(from_vector(parents, {static_cast<int64_t>(parents.size())}));
    // Stop once K hypotheses finished and no live beam can still beat the worst kept one
    // (log-probabilities only fall; the length penalty is bounded by the max_len one).
    if (finished.size() >= K) {
      std::sort(finished.begin(), finished.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
      finished.resize(K);
      double best_alive = alive.empty() ? -INFINITY : alive.front().lp / length_norm(static_cast<size_t>(o.max_len), o.length_penalty);
      if (best_alive < finished.back().score) break;
    }
  }
  for (const Beam& b : alive) {
    std::vector<int64_t> toks(b.ys.begin() + 1, b.ys.end());
    finished.push_back({toks, b.lp, b.lp / length_norm(toks.size(), o.length_penalty), false});
  }
  std::stable_sort(finished.begin(), finished.end(), [](const Hypothesis& x, const Hypothesis& y) {
    if (x.finished != y.finished) return x.finished;  // a finished sentence beats a cut one
    return x.score > y.score;
  });
  if (finished.size() > K) finished.resize(K);
  return finished;
}

namespace {
// One token drawn from logits w (changed in place) after temperature, top-k and top-p.
int64_t draw(std::vector<double>& w, const SampleOptions& o, Generator& gen, int64_t fallback) {
  const size_t V = w.size();
  for (double& x : w) x /= o.temperature;
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < V) {
    std::vector<double> sorted = w;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<double>());
    double kth = sorted[static_cast<size_t>(o.top_k - 1)];
    for (double& x : w)
      if (x < kth) x = -INFINITY;
  }
  double mx = *std::max_element(w.begin(), w.end()), total = 0;
  for (double& x : w) total += (x = std::exp(x - mx));
  if (o.top_p < 1) {  // keep the most likely tokens until their share reaches top_p (ties: lower id first)
    std::vector<size_t> order(V);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
    double acc = 0, kept = 0;
    size_t n = 0;
    while (n < V && (n == 0 || acc < o.top_p * total)) acc += w[order[n++]];
    for (size_t j = n; j < V; ++j) w[order[j]] = 0;
    for (size_t j = 0; j < n; ++j) kept += w[order[j]];
    total = kept;
  }
  double r = gen.uniform() * total, acc = 0;
  for (size_t v = 0; v < V; ++v) {
    acc += w[v];
    if (r < acc) return static_cast<int64_t>(v);
  }
  return fallback;  // if rounding leaves r past the end
}
}  // namespace

std::vector<int64_t> sample(CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& o, Generator& gen) {
  TG_CHECK(!prompt.empty(), "sample", "the prompt must hold at least one token");
  TG_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "sample", "temperature must be >= 0, got {}", o.temperature);
  TG_CHECK(o.top_k >= 0 && o.max_new_tokens >= 0, "sample", "top_k ({}) and max_new_tokens ({}) must be >= 0", o.top_k,
           o.max_new_tokens);
  TG_CHECK(o.top_p > 0 && o.top_p <= 1, "sample", "top_p must be in (0, 1], got {}", o.top_p);
  TG_CHECK(o.repetition_penalty > 0 && std::isfinite(o.repetition_penalty), "sample",
           "repetition_penalty must be > 0, got {}", o.repetition_penalty);
  const int64_t vocab = model.vocab_size();
  for (int64_t id : prompt)
    TG_CHECK(id >= 0 && id < vocab, "sample", "prompt id {} is outside the vocabulary [0, {})", id, vocab);
  InferenceScope scope(model.module());
  std::vector<int64_t> seq = prompt, out;
  const size_t ctx = static_cast<size_t>(model.max_positions());
  std::vector<char> seen(static_cast<size_t>(vocab), 0);
  for (int64_t id : prompt) seen[static_cast<size_t>(id)] = 1;
  DecoderCache cache;
  cache.reserve = static_cast<int64_t>(std::min(ctx, prompt.size() + static_cast<size_t>(o.max_new_tokens)));
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    Tensor logits;
    if (o.use_cache && seq.size() <= ctx && cache.length > 0) {  // the cache holds seq minus its last token
      logits = model.forward(from_vector(std::vector<int64_t>{seq.back()}, {1, 1}).to(model.module().device()), &cache, true);
    } else {  // the window of the last `context` tokens, from scratch (and into a fresh cache)
      std::vector<int64_t> window(seq.size() > ctx ? seq.end() - static_cast<std::ptrdiff_t>(ctx) : seq.begin(), seq.end());
      cache.clear();
      logits = model.forward(from_vector(window, {1, static_cast<int64_t>(window.size())}).to(model.module().device()),
                             o.use_cache && seq.size() < ctx ? &cache : nullptr, true);
    }
    const Tensor host = logits.to(kCPU);  // (from a GPU: the step's one copy and wait; on the CPU, itself)
    check_finite_logits(host, i, "sample");
    std::vector<double> w = host.reshape({-1}).to(kFloat64).to_vector<double>();
    const size_t V = w.size();
    if (o.repetition_penalty != 1)
      for (size_t v = 0; v < V; ++v)
        if (seen[v]) w[v] = w[v] > 0 ? w[v] / o.repetition_penalty : w[v] * o.repetition_penalty;
    int64_t next = std::max_element(w.begin(), w.end()) - w.begin();  // greedy; sampling's fallback
    if (o.temperature > 0) next = draw(w, o, gen, next);
    seq.push_back(next);
    out.push_back(next);
    seen[static_cast<size_t>(next)] = 1;
    if (o.on_token && !o.on_token(next)) break;
    if (next == o.stop_token) break;
  }
  return out;
}

}  // namespace tg
