#pragma once
// Decoding: greedy and beam search for the encoder-decoder Transformer, and sampling with
// temperature, top-k, top-p and a repetition penalty for decoder-only language models (CausalLM). All run without recording a
// graph and in eval mode (dropout off); the model's mode is restored afterwards. By default they
// decode incrementally with key/value caches (DecoderCache): each step feeds one new token
// instead of the whole prefix, O(T) work per token rather than O(T^2); use_cache = false gives
// the same results by recomputing the prefix (for comparisons).
#include <cstdint>
#include <functional>
#include <vector>

#include "../graph/random.h"
#include "transformer.h"

namespace tg {

struct DecodeOptions {
  int64_t bos = 1;          // the first decoder input
  int64_t eos = 2;          // ends a hypothesis (not included in the result)
  int64_t max_len = 100;    // most tokens generated per sentence
  int64_t beam_size = 4;    // beam search only
  double length_penalty = 0.6;  // beam search: scores divided by ((5 + len) / 6)^alpha (GNMT)
  bool use_cache = true;        // incremental decoding with key/value caches
};

// src [B, S] -> for each row, the generated ids (without bos and eos).
std::vector<std::vector<int64_t>> greedy_decode(Transformer& model, const Tensor& src, const DecodeOptions& opts = {});

struct Hypothesis {
  std::vector<int64_t> tokens;  // without bos and eos
  double log_prob = 0;          // sum of token log-probabilities (eos included when finished)
  double score = 0;             // log_prob after the length penalty
  bool finished = false;        // ended with eos (rather than at max_len)
};
// src [1, S] (one sentence) -> up to beam_size hypotheses, best first.
std::vector<Hypothesis> beam_search(Transformer& model, const Tensor& src, const DecodeOptions& opts = {});

struct SampleOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;  // >= 0; lower is more conservative; 0: greedy (the most likely token, lowest id on ties)
  int64_t top_k = 0;         // 0: the whole vocabulary
  double top_p = 1.0;        // nucleus sampling: the fewest most likely tokens whose probability
                             // reaches top_p (in (0, 1]; 1: all), after temperature and top-k
  double repetition_penalty = 1.0;  // >= 1 discourages tokens already in the sequence (prompt included):
                                    // their logit is divided by it when positive, multiplied when
                                    // negative (CTRL; transformers' repetition_penalty)
  int64_t stop_token = -1;   // stop after generating it (>= 0)
  bool use_cache = true;     // incremental decoding with key/value caches
  // Called with each new id as soon as it is chosen (streaming); returning false stops.
  std::function<bool(int64_t)> on_token = {};
};
// Continues prompt (at least one id) and returns only the new ids. The model sees at most its
// last max_positions() tokens: once the sequence is longer, each step recomputes that window
// (positions shift), with or without the cache.
std::vector<int64_t> sample(CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& opts = {},
                            Generator& gen = default_generator());

}  // namespace tg
