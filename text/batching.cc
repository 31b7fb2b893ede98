#include "text/batching.h"

#include <algorithm>
#include <numeric>

#include "graph/factory.h"

namespace tg::text {

std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths, int64_t max_tokens,
                                                 const std::vector<std::pair<int64_t, int64_t>>& sort_keys) {
  TG_CHECK(max_tokens >= 1, "bucket_batches", "max_tokens must be positive, not {}", max_tokens);
  TG_CHECK(sort_keys.empty() || sort_keys.size() == lengths.size(), "bucket_batches",
           "{} sort keys for {} samples (give one per sample, or none)", sort_keys.size(), lengths.size());
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  if (sort_keys.empty()) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sort_keys[a] < sort_keys[b]; });
  }
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  int64_t longest = 0;
  for (int64_t i : order) {
    const int64_t len = lengths[static_cast<size_t>(i)];
    TG_CHECK(len >= 0, "bucket_batches", "sample {} has a negative length {}", i, len);
    if (!cur.empty() && std::max(longest, len) * static_cast<int64_t>(cur.size() + 1) > max_tokens) {
      out.push_back(std::move(cur));
      cur.clear();
      longest = 0;
    }
    cur.push_back(i);
    longest = std::max(longest, len);
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::vector<int64_t>> bucket_batches(const std::vector<Example>& data, int64_t max_tokens) {
  std::vector<int64_t> lengths;
  std::vector<std::pair<int64_t, int64_t>> keys;
  lengths.reserve(data.size());
  keys.reserve(data.size());
  for (const Example& e : data) {
    const auto s = static_cast<int64_t>(e.src.size()), t = static_cast<int64_t>(e.tgt.size());
    lengths.push_back(std::max(t + 1, s));
    keys.emplace_back(t, s);
  }
  return bucket_batches(lengths, max_tokens, keys);
}

Padded pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id) {
  size_t T = 1;
  for (const auto& s : seqs) T = std::max(T, s.size());
  const auto B = static_cast<int64_t>(seqs.size());
  std::vector<int64_t> ids(seqs.size() * T, pad_id), mask(seqs.size() * T, 1);
  for (size_t b = 0; b < seqs.size(); ++b) {
    std::copy(seqs[b].begin(), seqs[b].end(), ids.begin() + static_cast<std::ptrdiff_t>(b * T));
    std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(b * T), seqs[b].size(), 0);
  }
  const Shape shape{B, static_cast<int64_t>(T)};
  return {from_vector(ids, shape), from_vector(mask, shape, kBool)};
}

std::vector<Example> encode_pairs(const Pairs& pairs, const Tokenizer& src, const Tokenizer& tgt, int64_t max_tokens,
                                  std::vector<int64_t>* kept) {
  std::vector<Example> out;
  if (kept) kept->clear();
  auto fits = [&](const std::vector<int64_t>& ids) {
    return !ids.empty() && (max_tokens <= 0 || static_cast<int64_t>(ids.size()) <= max_tokens);
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    Example e{src.encode(pairs[i].first), tgt.encode(pairs[i].second)};
    if (!fits(e.src) || !fits(e.tgt)) continue;
    out.push_back(std::move(e));
    if (kept) kept->push_back(static_cast<int64_t>(i));
  }
  return out;
}

SpecialIds special_ids(const Tokenizer& tokenizer) {
  return {.pad = tokenizer.pad_id(), .bos = tokenizer.bos_id(), .eos = tokenizer.eos_id()};
}

Seq2SeqBatch make_seq2seq_batch(const std::vector<Example>& data, const std::vector<int64_t>& indices, const SpecialIds& sp) {
  size_t S = 1, T = 1;
  for (int64_t i : indices) {
    TG_CHECK(i >= 0 && i < static_cast<int64_t>(data.size()), "make_seq2seq_batch", "index {} is out of range ({} examples)",
             i, data.size());
    S = std::max(S, data[static_cast<size_t>(i)].src.size());
    T = std::max(T, data[static_cast<size_t>(i)].tgt.size() + 1);
  }
  const size_t n = indices.size();
  std::vector<int64_t> src(n * S, sp.pad), tin(n * T, sp.pad), tout(n * T, sp.pad), src_mask(n * S, 1), tgt_mask(n * T, 1);
  Seq2SeqBatch batch;
  for (size_t b = 0; b < n; ++b) {
    const Example& e = data[static_cast<size_t>(indices[b])];
    std::copy(e.src.begin(), e.src.end(), src.begin() + static_cast<std::ptrdiff_t>(b * S));
    std::fill_n(src_mask.begin() + static_cast<std::ptrdiff_t>(b * S), e.src.size(), 0);
    tin[b * T] = sp.bos;
    for (size_t j = 0; j < e.tgt.size(); ++j) tin[b * T + j + 1] = tout[b * T + j] = e.tgt[j];
    tout[b * T + e.tgt.size()] = sp.eos;
    std::fill_n(tgt_mask.begin() + static_cast<std::ptrdiff_t>(b * T), e.tgt.size() + 1, 0);
    batch.tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  }
  const Shape ss{static_cast<int64_t>(n), static_cast<int64_t>(S)}, ts{static_cast<int64_t>(n), static_cast<int64_t>(T)};
  batch.src = from_vector(src, ss);
  batch.tgt_in = from_vector(tin, ts);
  batch.tgt_out = from_vector(tout, ts);
  batch.src_padding_mask = from_vector(src_mask, ss, kBool);
  batch.tgt_padding_mask = from_vector(tgt_mask, ts, kBool);
  return batch;
}

EncodedBatch stack_encodings(const std::vector<Encoding>& encodings, int64_t pad_id) {
  size_t T = 1;
  for (const Encoding& e : encodings) {
    TG_CHECK(e.type_ids.size() == e.ids.size() && e.attention_mask.size() == e.ids.size(), "stack_encodings",
             "an encoding has {} ids, {} type ids and {} mask entries (they must match)", e.ids.size(), e.type_ids.size(),
             e.attention_mask.size());
    T = std::max(T, e.ids.size());
  }
  const size_t n = encodings.size();
  std::vector<int64_t> ids(n * T, pad_id), types(n * T, 0), attend(n * T, 0), padding(n * T, 1);
  for (size_t b = 0; b < n; ++b) {
    const Encoding& e = encodings[b];
    for (size_t j = 0; j < e.ids.size(); ++j) {
      ids[b * T + j] = e.ids[j];
      types[b * T + j] = e.type_ids[j];
      attend[b * T + j] = e.attention_mask[j];
      padding[b * T + j] = e.attention_mask[j] == 0;
    }
  }
  const Shape shape{static_cast<int64_t>(n), static_cast<int64_t>(T)};
  return {from_vector(ids, shape), from_vector(types, shape), from_vector(attend, shape), from_vector(padding, shape, kBool)};
}

TokenWindows::TokenWindows(std::vector<int64_t> ids, int64_t context, int64_t max_windows)
    : ids_(std::move(ids)), context_(context) {
  TG_CHECK(context >= 1, "TokenWindows", "context must be at least 1, not {}", context);
  TG_CHECK(max_windows >= 0, "TokenWindows", "max_windows must be 0 (all) or positive, not {}", max_windows);
  const int64_t available = ids_.empty() ? 0 : (static_cast<int64_t>(ids_.size()) - 1) / context;
  const int64_t n = max_windows > 0 ? std::min(available, max_windows) : available;
  starts_.reserve(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) starts_.push_back(j * available / n * context);
}

int64_t TokenWindows::start(int64_t w) const {
  TG_CHECK(w >= 0 && w < size(), "TokenWindows", "window {} is out of range: there are {}", w, size());
  return starts_[static_cast<size_t>(w)];
}

Tensor TokenWindows::take(const std::vector<int64_t>& windows, int64_t shift) const {
  std::vector<int64_t> flat;
  flat.reserve(windows.size() * static_cast<size_t>(context_));
  for (int64_t w : windows) {
    const auto at = ids_.begin() + start(w) + shift;
    flat.insert(flat.end(), at, at + context_);
  }
  return from_vector(flat, {static_cast<int64_t>(windows.size()), context_});
}

}  // namespace tg::text
