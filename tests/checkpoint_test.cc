// safetensors round trips and rejection of corrupt files; training checkpoints that resume
// bit-identically.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace tgt {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tg_" + std::to_string(::getpid()) + "_" + name)).string();
}

tg::TransformerConfig tiny() {
  tg::TransformerConfig c;
  c.src_vocab = 12;
  c.tgt_vocab = 12;
  c.layer = {.d_model = 16, .heads = 2, .d_ff = 32, .dropout = 0.1};
  c.encoder_layers = c.decoder_layers = 1;
  c.max_len = 32;
  return c;
}

TEST(Safetensors, ModelRoundTripGivesIdenticalOutputs) {
  tg::manual_seed(1);
  tg::Transformer a(tiny());
  a.eval();
  tg::manual_seed(2);
  tg::Transformer b(tiny());
  b.eval();
  Tensor src = tg::randint(1, 12, {2, 7}), tgt = tg::randint(1, 12, {2, 5});
  std::string path = temp_path("model.safetensors");
  ASSERT_TRUE(tg::save_module(a, path, {{"note", "round trip"}}).ok());
  auto meta = tg::load_module(b, path);
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->at("note"), "round trip");
  EXPECT_TRUE(close(b.forward(src, tgt), a.forward(src, tgt), 0, 0));
  // The names inside are PyTorch-style.
  auto f = tg::load_safetensors(path);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->tensors.contains("encoder.layers.0.self_attn.w_q.weight"));
  EXPECT_TRUE(f->tensors.contains("decoder.layers.0.cross_attn.w_k.bias"));
  std::remove(path.c_str());
}

TEST(Safetensors, AllDtypesRoundTrip) {
  tg::StateDict sd;
  sd.insert("f32", tg::randn({3, 2}));
  sd.insert("f64", tg::randn({4}, tg::kFloat64));
  sd.insert("i64", tg::randint(-5, 5, {2, 2}));
  sd.insert("b", tg::gt(tg::randn({5}), 0.0));
  sd.insert("scalar", tg::scalar(3.5));
  sd.insert("empty", tg::zeros({0, 3}));
  auto f = tg::parse_safetensors(tg::serialize_safetensors(sd));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->tensors.size(), sd.size());
  for (const auto& [n, t] : sd) {
    const Tensor& got = f->tensors.at(n);
    EXPECT_EQ(got.dtype(), t.dtype()) << n;
    EXPECT_EQ(got.shape(), t.shape()) << n;
    EXPECT_EQ(got.to_vector<double>(), t.to_vector<double>()) << n;
  }
}

// Builds a file from a header string and a data section, for corruption cases.
std::string file_with(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(Safetensors, CorruptFilesAreRejectedWithAMessage) {
  tg::StateDict sd;
  sd.insert("w", tg::randn({4, 4}));
  sd.insert("b", tg::randn({4}));
  const std::string good = tg::serialize_safetensors(sd);
  ASSERT_TRUE(tg::parse_safetensors(good).ok());
  auto rejects = [](const std::string& bytes, const std::string& fragment) -> ::testing::AssertionResult {
    auto r = tg::parse_safetensors(bytes, "case");
    if (r.ok()) return ::testing::AssertionFailure() << "accepted a corrupt file (" << fragment << ")";
    std::string msg(r.status().message());
    if (msg.find(fragment) == std::string::npos || msg.find("case") == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << fragment << "'";
    return ::testing::AssertionSuccess();
  };
  const std::string data(20 * 4, '\0');
  EXPECT_TRUE(rejects("", "fewer than the 8-byte header length"));
  EXPECT_TRUE(rejects(good.substr(0, 5), "fewer than the 8-byte"));
  for (size_t cut : {size_t{12}, good.size() / 2, good.size() - 1})  // truncated anywhere
    EXPECT_TRUE(rejects(good.substr(0, cut), "")) << "cut at " << cut;
  std::string huge = good;
  uint64_t n = 1ull << 62;
  std::memcpy(huge.data(), &n, 8);
  EXPECT_TRUE(rejects(huge, "exceeds the"));
  std::string garbled = good;
  garbled[9] = '#';  // {#w"... 
  EXPECT_TRUE(rejects(garbled, "not valid JSON"));
  EXPECT_TRUE(rejects(file_with("[1, 2]", ""), "does not start with '{'"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data),
                      "overlaps"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[4],"data_offsets":[64,96]}})", std::string(96, '\0')),
                      "needs 16 bytes, its offsets span 32"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[4],"data_offsets":[80,96]}})",
                                std::string(96, '\0')),
                      "hole"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[4],"data_offsets":[64,80]}})", data.substr(0, 70)),
                      "outside the 70-byte data section"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", "ab"), "unsupported dtype Q4"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), "invalid dimension -1"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", "abcd"),
                      "overflows"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), "needs dtype, shape and data_offsets"));
  EXPECT_TRUE(rejects(file_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "abcdefgh"),
                      "appears twice"));
  EXPECT_TRUE(rejects(file_with(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2)),
                      "holds byte 7"));
  EXPECT_TRUE(rejects(file_with(R"({"__metadata__":{"a":1}})", ""), "is not a string"));
  EXPECT_TRUE(rejects(file_with(std::string(100, '[') + std::string(100, ']'), ""), "start with '{'"));
  EXPECT_TRUE(rejects(file_with("{\"a\":" + std::string(50, '[') + std::string(50, ']') + "}", ""), "nested too deeply"));
  // Files: missing, and a model file that does not fit the model.
  tg::Linear lin(3, 2);
  auto missing = tg::load_module(lin, "/nonexistent/x.safetensors");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("cannot open"), std::string::npos);
  std::string path = temp_path("lin.safetensors");
  tg::Linear other(4, 2);
  ASSERT_TRUE(tg::save_module(other, path).ok());
  auto mismatch = tg::load_module(lin, path);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(std::string(mismatch.status().message()).find("shape mismatch for 'weight'"), std::string::npos)
      << mismatch.status().message();
  std::remove(path.c_str());
}

TEST(Safetensors, HalfPrecisionIsReadAsFloat32) {
  // 1.0, -2.0, 0.5 in IEEE half and bfloat16.
  std::string f16("\x00\x3c\x00\xc0\x00\x38", 6), bf16("\x80\x3f\x00\xc0\x00\x3f", 6);
  auto f = tg::parse_safetensors(file_with(R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[6,12]}})",
                                           f16 + bf16));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors.at("h").to_vector<double>(), (std::vector<double>{1.0, -2.0, 0.5}));
  EXPECT_EQ(f->tensors.at("b").to_vector<double>(), (std::vector<double>{1.0, -2.0, 0.5}));
}

TEST(Safetensors, WriteIsAtomic) {
  std::string path = temp_path("atomic.safetensors");
  tg::StateDict sd;
  sd.insert("x", tg::ones({2}));
  ASSERT_TRUE(tg::save_safetensors(path, sd).ok());
  // A failed write (the folder does not exist) leaves no partial file behind and says why.
  auto st = tg::save_safetensors("/nonexistent-dir/x.safetensors", sd);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("temporary file"), std::string::npos);
  // No temporary file is left beside the target.
  int leftovers = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    if (e.path().string().rfind(path + ".tmp", 0) == 0) ++leftovers;
  EXPECT_EQ(leftovers, 0);
  std::remove(path.c_str());
}

// Trains the tiny transformer (dropout on, so the generator state matters) for n steps.
struct TrainRun {
  std::unique_ptr<tg::Transformer> model;
  std::unique_ptr<tg::AdamW> opt;
  explicit TrainRun(uint64_t seed) {
    tg::manual_seed(seed);
    model = std::make_unique<tg::Transformer>(tiny());
    opt = std::make_unique<tg::AdamW>(model->named_parameters(), tg::AdamOptions{.lr = 1e-3, .weight_decay = 0.01});
  }
  std::vector<double> train(int from, int to) {
    std::vector<double> losses;
    tg::NoamSchedule sched{.d_model = 16, .warmup = 4, .factor = 0.5};
    for (int step = from; step < to; ++step) {
      // The batch depends only on the step, so a resumed run sees the same data.
      tg::Generator data(1000 + static_cast<uint64_t>(step));
      std::vector<int64_t> ids(2 * 6);
      for (auto& x : ids) x = 1 + static_cast<int64_t>(data.next_u64() % 11);
      Tensor src = tg::from_vector(ids, {2, 6});
      Tensor loss = tg::cross_entropy(model->forward(src, src.narrow(1, 0, 5)), src.narrow(1, 1, 5));
      opt->zero_grad();
      loss.backward();
      tg::clip_grad_norm(model->parameters(), 1.0);
      opt->set_lr(sched(opt->steps() + 1));
      opt->step();
      losses.push_back(loss.item());
    }
    return losses;
  }
};

TEST(Checkpoint, ResumedTrainingIsBitIdentical) {
  TrainRun straight(5);
  std::vector<double> want = straight.train(0, 8);

  std::string path = temp_path("train.ckpt");
  TrainRun first(5);
  std::vector<double> got = first.train(0, 4);
  tg::train::TrainState saved;
  saved.step = 4;
  saved.user["note"] = "four";
  saved.history["train/loss"] = {{1, 2.5}, {2, 2.25}};
  saved.rngs["default"] = tg::default_generator().state();
  ASSERT_TRUE(tg::train::save_train_state(path, saved, *first.model, *first.opt).ok());
  tg::manual_seed(12345);  // disturb the generator: the checkpoint must restore it
  TrainRun resumed(77);         // different initial weights: the checkpoint must restore them
  auto state = tg::train::load_train_state(path, *resumed.model, *resumed.opt);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->step, 4);
  EXPECT_EQ(state->user.at("note"), "four");
  EXPECT_EQ(state->history, saved.history);
  tg::default_generator().set_state(state->rngs.at("default"));
  std::vector<double> rest = resumed.train(4, 8);
  got.insert(got.end(), rest.begin(), rest.end());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;  // exactly

  // A checkpoint from another optimizer or model is refused, naming the problem.
  tg::SGD sgd(resumed.model->named_parameters());
  auto wrong_opt = tg::train::load_train_state(path, *resumed.model, sgd);
  ASSERT_FALSE(wrong_opt.ok());
  EXPECT_NE(std::string(wrong_opt.status().message()).find("saved with optimizer 'AdamW'"), std::string::npos);
  tg::TransformerConfig bigger = tiny();
  bigger.layer.d_ff = 64;
  tg::Transformer other(bigger);
  tg::AdamW other_opt(other.named_parameters());
  auto wrong_model = tg::train::load_train_state(path, other, other_opt);
  ASSERT_FALSE(wrong_model.ok());
  EXPECT_NE(std::string(wrong_model.status().message()).find("shape"), std::string::npos) << wrong_model.status().message();
  // A plain model file is not a training checkpoint.
  std::string model_only = temp_path("model_only.safetensors");
  ASSERT_TRUE(tg::save_module(*resumed.model, model_only).ok());
  auto not_ckpt = tg::train::load_train_state(model_only, *resumed.model, *resumed.opt);
  ASSERT_FALSE(not_ckpt.ok());
  EXPECT_NE(std::string(not_ckpt.status().message()).find("not a tapegrad training state"), std::string::npos);
  // Truncated checkpoint.
  auto bytes = tg::read_file(path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(tg::write_file_atomic(path, bytes->substr(0, bytes->size() / 2)).ok());
  EXPECT_FALSE(tg::train::load_train_state(path, *resumed.model, *resumed.opt).ok());
  std::remove(path.c_str());
  std::remove(model_only.c_str());
}

}  // namespace
}  // namespace tgt
