// The model zoo forward on a GPU: the golden decoder folders (GPT-2, Llama, Llama 3, Qwen2; the
// tests' tiny random models with transformers' logits and greedy tokens) give the same logits
// within the CPU's tolerance and the same greedy tokens, through the KV cache on the device.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace {

using tg::Tensor;

std::string decoder_dir(const std::string& name) { return std::string(TG_TEST_DATA_DIR) + "/golden/decoders/" + name; }

class GpuDecoder : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuDecoder, LogitsAndGreedyTokensEqualTransformers) {
  TG_NEED_GPU();
  auto loaded = tg::load_causal_lm(decoder_dir(GetParam()));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  tg::CausalLM& m = **loaded;
  m.module().to(tg::Device::cuda());
  const tg::SafetensorsFile g = tg::load_safetensors(decoder_dir(GetParam()) + "/golden.safetensors").value();
  const Tensor prompt = g.tensors.at("prompt");
  {
    tg::NoGradGuard ng;
    const Tensor logits = m.forward(prompt.to(tg::Device::cuda()));
    ASSERT_TRUE(logits.is_cuda());
    const std::vector<double> got = logits.to_vector<double>(), want = g.tensors.at("logits").to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
  }
  const std::vector<int64_t> want = g.tensors.at("greedy").to_vector<int64_t>();
  for (bool cache : {true, false}) {
    EXPECT_EQ(tg::sample(m, prompt.to_vector<int64_t>(),
                         {.max_new_tokens = static_cast<int64_t>(want.size()), .temperature = 0, .use_cache = cache}),
              want) << (cache ? "with" : "without") << " the KV cache";
  }
}

INSTANTIATE_TEST_SUITE_P(Folders, GpuDecoder, ::testing::Values("gpt2", "llama", "llama3", "qwen2"));

}  // namespace
