// Model folders and files made by someone else: whatever they hold, a load ends with one line
// naming the file and what is wrong in it — no crash, no hang, no work beyond linear in the
// file, no garbage printed as if it were a result.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph/factory.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "models/gpt2.h"
#include "models/layers.h"
#include "models/generate.h"
#include "models/module_io.h"
#include "ops/ops.h"
#include "text/tokenizer.h"
#include "test_util.h"

namespace {
namespace fs = std::filesystem;

std::string temp_file(const std::string& name) {
  return (fs::temp_directory_path() / fmt::format("tg_hostile_{}_{}", ::getpid(), name)).string();
}

// A safetensors file in memory: the given header, then `data_bytes` zeros.
std::string with_header(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out[static_cast<size_t>(b)] = static_cast<char>((n >> (8 * b)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

std::string entry(const std::string& name, int64_t i) {
  return fmt::format("\"{}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}", name, 4 * i, 4 * i + 4);
}

::testing::AssertionResult says(const tg::Status& s, const std::vector<std::string>& words) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted";
  for (const std::string& w : words)
    if (s.message().find(w) == std::string::npos) return ::testing::AssertionFailure() << "'" << w << "' not in: " << s.message();
  return ::testing::AssertionSuccess();
}

// A 100,000-character layer index crashed the name mapping (std::regex recurses per character):
// names past kMaxTensorName are refused by name in the header and in a load, before any regex.
TEST(HostileFiles, AnOverlongTensorNameIsRefusedBeforeAnyPatternSeesIt) {
  const std::string name = "h." + std::string(100000, '7') + ".attn.c_attn.weight";
  auto parsed = tg::parse_safetensors(with_header("{" + entry("wte.weight", 0) + "," + entry(name, 1) + "}", 8), "big.safetensors");
  EXPECT_TRUE(says(parsed.status(), {"big.safetensors", "a tensor name of 100021 bytes", "limit of 1024 bytes"}));
  EXPECT_LT(parsed.status().message().size(), 400u);
  // The same name in a state dict, through GPT-2's mapping (regexes with \d+ over every name).
  tg::DecoderLM lm({.vocab = 8, .context = 8, .layer = {.d_model = 8, .heads = 2, .d_ff = 16}, .layers = 1});
  tg::StateDict sd;
  sd.insert(name, tg::zeros({1}));
  auto loaded = tg::load_state_dict(lm, sd, {.strict = false, .names = tg::DecoderLM::hugging_face_names()});
  EXPECT_TRUE(says(loaded.status(), {"a tensor name of 100021 bytes", "limit of 1024 bytes"}));
}

// The header is parsed, and duplicates found, in time linear in its size: 200,000 entries with a
// duplicate at the end is refused naming it (nlohmann's callback made this quadratic: minutes).
TEST(HostileFiles, ADuplicateAmongManyTensorsIsFoundInOnePass) {
  std::string header = "{";
  const int64_t n = 200000;
  for (int64_t i = 0; i < n; ++i) header += (i ? "," : "") + entry(fmt::format("t{}", i), i);
  auto ok = tg::parse_safetensors(with_header(header + "}", 4 * n));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->tensors.size(), static_cast<size_t>(n));
  header += "," + entry("t123", n) + "}";
  EXPECT_TRUE(says(tg::parse_safetensors(with_header(header, 4 * (n + 1))).status(), {"tensor 't123' appears twice"}));
}

// A refusal lists at most 8 names, each clipped: 5,000 unexpected names of 1,000 bytes make one
// short line, not a 5 MB one.
TEST(HostileFiles, UnexpectedNamesAreListedBrieflyAndClipped) {
  tg::Linear lin(2, 2);
  tg::StateDict sd;
  sd.insert("weight", tg::zeros({2, 2}));
  sd.insert("bias", tg::zeros({2}));
  for (int i = 0; i < 5000; ++i) sd.insert(fmt::format("{:0>1000}", i), tg::zeros({1}));
  auto r = tg::load_state_dict(lin, sd);
  EXPECT_TRUE(says(r.status(), {"5000 unexpected", "... 4992 more"}));
  EXPECT_LT(r.status().message().size(), 2000u);
}

// A FIFO (or a device, a folder) where a file should be is refused by name at once; opening it
// used to wait for a writer forever.
TEST(HostileFiles, AFifoOrDeviceOrFolderIsRefusedNotWaitedOn) {
  const std::string fifo = temp_file("model.safetensors");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(says(tg::read_file(fifo).status(), {fifo, "not a regular file (a FIFO)"}));
  EXPECT_TRUE(says(tg::SafetensorsReader::open(fifo).status(), {fifo, "a FIFO"}));
  EXPECT_TRUE(says(tg::load_safetensors(fifo).status(), {fifo, "a FIFO"}));
  EXPECT_TRUE(says(tg::text::Tokenizer::load(fifo).status(), {fifo, "a FIFO"}));
  const std::string gz = temp_file("text.gz");
  std::remove(gz.c_str());
  ASSERT_EQ(::mkfifo(gz.c_str(), 0600), 0);
  EXPECT_TRUE(says(tg::read_text(gz).status(), {gz, "a FIFO"}));
  EXPECT_TRUE(says(tg::read_file("/dev/zero").status(), {"/dev/zero", "a device"}));
  EXPECT_TRUE(says(tg::read_file(fs::temp_directory_path().string()).status(), {"a folder"}));
  std::remove(fifo.c_str());
  std::remove(gz.c_str());
}

// A value finite in the file but not in the model's dtype (float64 1e300 into float32; float32
// 3.4e38 into bfloat16) is refused by name, not reported as "the file changed" or computed as Inf.
TEST(HostileFiles, ValuesBeyondTheModelsDtypeAreRefusedByName) {
  tg::Linear lin(3, 2);
  tg::StateDict sd;
  std::vector<double> w(6, 0.5);
  w[5] = 1e300;
  sd.insert("weight", tg::from_vector(w, {2, 3}, tg::kFloat64));
  sd.insert("bias", tg::zeros({2}, tg::kFloat64));
  const std::vector<float> before = lin.weight.to_vector<float>();
  EXPECT_TRUE(says(tg::load_state_dict(lin, sd).status(), {"'weight' holds 1e+300 at flat index 5", "beyond the range", "float32"}));
  EXPECT_EQ(lin.weight.to_vector<float>(), before);
  {
    tg::NoGradGuard ng;
    lin.weight.fill_(3.4e38);
  }
  EXPECT_TRUE(says(tg::check_representable(lin, tg::kBFloat16, "model"),
                   {"model: weight 'weight' holds 3.4e+38 at flat index 0", "bfloat16"}));
  EXPECT_TRUE(tg::check_representable(lin, tg::kFloat32, "model").ok());
}

// Logits that are not finite stop decoding with one line naming the step, where token 0 used to
// be printed over and over.
TEST(HostileFiles, NonFiniteLogitsStopGenerationNamingTheStep) {
  tg::manual_seed(0);
  tg::DecoderLM lm({.vocab = 8, .context = 16, .layer = {.d_model = 8, .heads = 2, .d_ff = 16}, .layers = 1});
  {
    tg::NoGradGuard ng;
    lm.norm->weight.fill_(std::nan(""));
  }
  EXPECT_TRUE(tgt::throws_with([&] { tg::sample(lm, {1, 2, 3}, {.max_new_tokens = 4, .temperature = 0}); },
                          {"sample", "step 0", "logits are not finite"}));
  EXPECT_TRUE(tgt::throws_with([&] { tg::sample(lm, {1, 2, 3}, {.max_new_tokens = 4, .temperature = 1}); }, {"not finite"}));
  // The translator's decoders (greedy, beam search) likewise: an infinite weight in the encoder.
  tg::Transformer tr({.src_vocab = 8, .tgt_vocab = 8, .layer = {.d_model = 8, .heads = 2, .d_ff = 16}, .encoder_layers = 1,
                      .decoder_layers = 1, .max_len = 16});
  {
    tg::NoGradGuard ng;
    tr.named_parameters().front().second.fill_(INFINITY);
  }
  const tg::Tensor src = tg::from_vector(std::vector<int64_t>{3, 4, 5}, {1, 3});
  EXPECT_TRUE(tgt::throws_with([&] { tg::greedy_decode(tr, src, {.max_len = 4}); }, {"greedy_decode", "step 0", "not finite"}));
  EXPECT_TRUE(tgt::throws_with([&] { tg::beam_search(tr, src, {.max_len = 4, .beam_size = 2}); }, {"beam_search", "step 0", "not finite"}));
}

}  // namespace
