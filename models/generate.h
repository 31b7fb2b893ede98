#pragma once
// Decoding: greedy and beam search for the encoder-decoder Transformer, and sampling with
// temperature and top-k for the decoder-only language model. All run without recording a graph
// and in eval mode (dropout off); the model's mode is restored afterwards.
#include <cstdint>
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
  double temperature = 1.0;  // > 0; lower is more conservative
  int64_t top_k = 0;         // 0: the whole vocabulary
  int64_t stop_token = -1;   // stop after generating it (>= 0)
};
// Continues prompt (at least one id) and returns only the new ids. Uses the last `context`
// tokens as the model's input at each step.
std::vector<int64_t> sample(DecoderLM& model, const std::vector<int64_t>& prompt, const SampleOptions& opts = {},
                            Generator& gen = default_generator());

}  // namespace tg
