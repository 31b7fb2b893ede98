#pragma once
// What the zoo's transformer files share (models/transformer.cc, models/gpt2.cc); not installed.
#include <cstdint>

#include "graph/tensor.h"
#include "models/module.h"

namespace tg {

// ids must be int64 [B, T]; who names the caller in the error. (The embedding checks the range.)
void check_token_ids(const Tensor& ids, int64_t vocab, const char* who);
// Turns recording of the attention weights of every MultiHeadAttention in m on or off.
void set_record_attention_of(Module& m, bool on);

}  // namespace tg
