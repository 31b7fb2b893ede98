#pragma once
// Batches of token ids as tensors: length-bucketed grouping of samples, padding with a key-padding
// mask, the source/target tensors of a sequence-to-sequence batch, and a language model's windows
// over one token stream.
//
//   auto groups = tg::text::bucket_batches(examples, /*max_tokens=*/1500);   // indices, similar lengths
//   for (const auto& idx : groups) {
//     tg::text::Seq2SeqBatch b = tg::text::make_seq2seq_batch(examples, idx);
//     loss = cross_entropy(model(b.src, b.tgt_in), b.tgt_out);  ...
//   }
#include <cstdint>
#include <utility>
#include <vector>

#include "../graph/tensor.h"
#include "readers.h"
#include "tokenizer.h"

namespace tg::text {

// Groups sample indices so that samples of similar length share a batch: the indices are sorted
// (stably) by sort_keys[i] (by lengths[i] when sort_keys is empty), then batches are filled greedily
// in that order while (longest length in the batch) x (batch size) <= max_tokens. A sample longer
// than max_tokens gets a batch of its own. Every index appears in exactly one batch.
std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths, int64_t max_tokens,
                                                 const std::vector<std::pair<int64_t, int64_t>>& sort_keys = {});

// ids [B, T] (T the longest sequence, at least 1) filled with pad_id after each sequence, and
// padding_mask bool [B, T], true where padding (PyTorch's key_padding_mask; AttentionMask::key_padding).
struct Padded {
  Tensor ids, padding_mask;
};
Padded pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id);

// One training pair as ids, without specials.
struct Example {
  std::vector<int64_t> src, tgt;
};
// Each pair encoded with the source and the target tokenizer. Pairs with an empty side, or a side
// longer than max_tokens (0: no limit), are left out; `kept`, when given, receives the indices of the
// pairs that were not (e.g. to keep their text as BLEU references).
std::vector<Example> encode_pairs(const Pairs& pairs, const Tokenizer& src, const Tokenizer& tgt, int64_t max_tokens = 0,
                                  std::vector<int64_t>* kept = nullptr);

struct SpecialIds {
  int64_t pad = kPad, bos = kBos, eos = kEos;
};
SpecialIds special_ids(const Tokenizer& tokenizer);  // the target tokenizer's

// A sequence-to-sequence batch: src [B, S]; tgt_in = bos + target and tgt_out = target + eos,
// both [B, T] (teacher forcing: position t of tgt_in predicts position t of tgt_out); the padding
// masks of src and tgt_in (bool, true where padding); tokens = the target tokens counted by the loss,
// eos included.
struct Seq2SeqBatch {
  Tensor src, tgt_in, tgt_out;
  Tensor src_padding_mask, tgt_padding_mask;
  int64_t tokens = 0;
};
Seq2SeqBatch make_seq2seq_batch(const std::vector<Example>& data, const std::vector<int64_t>& indices,
                                const SpecialIds& ids = {});
// bucket_batches for translation: padded length max(|src|, |tgt| + 1), sorted by (|tgt|, |src|).
std::vector<std::vector<int64_t>> bucket_batches(const std::vector<Example>& data, int64_t max_tokens);

// Encodings of equal length (Tokenizer::encode_batch with padding) as tensors [B, T]; shorter ones
// are padded with pad_id here. padding_mask is true where attention_mask is 0.
struct EncodedBatch {
  Tensor ids, type_ids, attention_mask, padding_mask;
};
EncodedBatch stack_encodings(const std::vector<Encoding>& encodings, int64_t pad_id);

// A language model's training windows over one token stream (as nanoGPT's and llm.c's loaders):
// window w starts at start(w) and covers context + 1 tokens; its inputs are the first `context`, its
// targets the same shifted by one. Windows sit at stride `context` (no input token in two
// windows); max_windows > 0 keeps that many, evenly spaced over the stream (a validation subset).
//
//   tg::text::TokenWindows train(tok.encode(text), /*context=*/64);
//   loss = cross_entropy(model(train.inputs(batch)), train.targets(batch));   // batch: window indices
class TokenWindows {
 public:
  TokenWindows(std::vector<int64_t> ids, int64_t context, int64_t max_windows = 0);
  int64_t size() const { return static_cast<int64_t>(starts_.size()); }  // 0 when ids hold fewer than context + 1
  int64_t context() const { return context_; }
  int64_t start(int64_t w) const;
  const std::vector<int64_t>& ids() const { return ids_; }
  Tensor inputs(const std::vector<int64_t>& windows) const { return take(windows, 0); }   // int64 [n, context]
  Tensor targets(const std::vector<int64_t>& windows) const { return take(windows, 1); }  // int64 [n, context]

 private:
  Tensor take(const std::vector<int64_t>& windows, int64_t shift) const;
  std::vector<int64_t> ids_;
  int64_t context_;
  std::vector<int64_t> starts_;
};

}  // namespace tg::text
