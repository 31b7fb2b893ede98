#pragma once
// A decoder-only language model from a Hugging Face folder, whatever its family: config.json's
// model_type chooses LlamaForCausalLM (llama, mistral, qwen2) or DecoderLM (gpt2).
//
//   auto lm = tg::load_causal_lm("models/SmolLM2-135M").value();
//   tg::Tensor logits = lm->forward(ids);  // [1, T, vocab]
#include <memory>
#include <string>

#include "llama.h"
#include "gpt2.h"
#include "transformer.h"

namespace tg {

// The model in eval mode; an unsupported model_type is refused naming it and the types supported.
Result<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& dir);

}  // namespace tg
