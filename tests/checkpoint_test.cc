// safetensors round trips and rejection of corrupt files; training checkpoints that resume
// bit-identically.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

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
  EXPECT_NE(std::string(mismatch.status().message()).find("shape mismatch for weight: checkpoint [2, 4], model [2, 3]"), std::string::npos)
      << mismatch.status().message();
  std::remove(path.c_str());
}

// XXH64 against the reference library's values (tests/golden/xxh64.txt, tools/make_xxh64_golden.py).
TEST(Safetensors, Xxh64MatchesTheReferenceImplementation) {
  std::ifstream in(std::string(TG_TEST_DATA_DIR) + "/golden/xxh64.txt");
  ASSERT_TRUE(in) << "tests/golden/xxh64.txt (tools/make_xxh64_golden.py)";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    size_t n = 0;
    std::string want;
    fields >> n >> want;
    std::string bytes(n, '\0');
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 131 + 7) & 255);
    EXPECT_EQ(tg::xxh64_hex(bytes.data(), n), want) << "length " << n;
    ++checked;
  }
  EXPECT_GE(checked, 19);
}

// Our files carry an XXH64 per tensor (over the stored bytes, whatever the dtype); a changed byte
// is named by tensor; files without checksums (Hugging Face's) still load; the record itself is
// checked.
TEST(Safetensors, EveryTensorsChecksumIsRecordedAndVerified) {
  tg::StateDict sd;
  sd.insert("w", tg::randn({4, 4}));
  sd.insert("h", tg::randn({3}).to(tg::kBFloat16));
  sd.insert("n", tg::randint(0, 9, {2}));
  const std::string good = tg::serialize_safetensors(sd, {{"note", "x"}});
  auto f = tg::parse_safetensors(good, "case");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->metadata, (tg::Metadata{{"note", "x"}})) << "the checksums are not the caller's metadata";
  EXPECT_NE(good.find("\"tapegrad.xxh64\""), std::string::npos);
  uint64_t header = 0;
  std::memcpy(&header, good.data(), 8);
  const size_t data = 8 + header;
  // A flipped bit in each tensor's bytes: w (float32 [0, 64)), h (bf16 [64, 70)), n (int64 [70, 86)).
  for (auto [offset, name] : {std::pair{size_t{5}, "w"}, std::pair{size_t{65}, "h"}, std::pair{size_t{80}, "n"}}) {
    std::string bad = good;
    bad[data + offset] ^= 0x01;
    auto r = tg::parse_safetensors(bad, "case");
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(fmt::format("case: tensor '{}' fails its checksum", name)), std::string::npos)
        << r.status().message();
  }
  // No record at all (a file from elsewhere): loads.
  EXPECT_TRUE(tg::parse_safetensors(file_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd")).ok());
  // A record that is not one.
  auto with_sums = [](const std::string& sums) {
    nlohmann::json meta = {{"tapegrad.xxh64", sums}};
    return file_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":)" + meta.dump() + "}", "abcd");
  };
  const std::string w_sum = tg::xxh64_hex("abcd", 4);
  EXPECT_TRUE(tg::parse_safetensors(with_sums(R"({"w":")" + w_sum + R"("})")).ok());
  auto rejects = [](const std::string& bytes, const std::string& fragment) {
    auto r = tg::parse_safetensors(bytes, "case");
    return !r.ok() && r.status().message().find(fragment) != std::string::npos;
  };
  EXPECT_TRUE(rejects(with_sums("[]"), "is not a JSON object of checksums by tensor name"));
  EXPECT_TRUE(rejects(with_sums("{"), "is not a JSON object"));
  EXPECT_TRUE(rejects(with_sums(std::string(100, '[')), "is not a JSON object"));
  EXPECT_TRUE(rejects(with_sums(R"({"w": 5})"), "the checksum of 'w' is 5, not 16 hex digits"));
  EXPECT_TRUE(rejects(with_sums(R"({"w": "00"})"), "not 16 hex digits"));
  EXPECT_TRUE(rejects(with_sums("{}"), "has no checksum for tensor 'w'"));
  EXPECT_TRUE(rejects(with_sums(R"({"w":")" + w_sum + R"(","v":")" + w_sum + R"("})"), "names 'v', which is not a tensor"));
  EXPECT_TRUE(rejects(with_sums(R"({"w":"0123456789abcdef"})"), "fails its checksum"));
}

// Every model loader refuses a NaN or infinite weight by name: load_module (the programs' own
// files), load_state_dict / load_pretrained (Hugging Face files, which carry no checksums).
TEST(Safetensors, NonFiniteWeightsAreRefusedByName) {
  tg::Linear lin(3, 2);
  const std::vector<float> before = lin.weight.to_vector<float>();
  const std::string path = temp_path("nan.safetensors");
  for (double v : {double(NAN), double(INFINITY), -double(INFINITY)}) {
    tg::StateDict sd;
    std::vector<float> w(6, 0.5f);
    w[4] = static_cast<float>(v);
    sd.insert("weight", tg::from_vector(w, {2, 3}));
    sd.insert("bias", tg::zeros({2}));
    ASSERT_TRUE(tg::save_safetensors(path, sd).ok());
    const std::string name = std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf";
    auto r = tg::load_module(lin, path);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'weight' holds " + name + " at flat index 4 (of shape [2, 3])"), std::string::npos)
        << r.status().message();
    auto p = tg::load_pretrained(lin, path);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("'weight' holds " + name + " at flat index 4"), std::string::npos) << p.status().message();
    EXPECT_EQ(lin.weight.to_vector<float>(), before) << "a refused load changes nothing";
  }
  // bfloat16 and float64 too.
  EXPECT_EQ(tg::first_non_finite(tg::full({5}, 1.0, tg::kBFloat16)), -1);
  EXPECT_EQ(tg::first_non_finite(tg::from_vector(std::vector<double>{1, 2, INFINITY}, {3})), 2);
  tg::Tensor b = tg::from_vector(std::vector<float>{1, NAN, 3}, {3}).to(tg::kBFloat16);
  EXPECT_EQ(tg::first_non_finite(b), 1);
  EXPECT_EQ(tg::non_finite_name(b, 1), "NaN");
  EXPECT_EQ(tg::first_non_finite(tg::randint(0, 5, {4})), -1) << "not a float type";
  std::remove(path.c_str());
}

// The reader: the header alone at open(), each tensor's bytes when asked, with the same checks.
TEST(Safetensors, ReaderReadsTensorByTensor) {
  tg::manual_seed(8);
  tg::StateDict sd;
  sd.insert("w", tg::randn({3, 4}));
  sd.insert("h", tg::randn({5}).to(tg::kBFloat16));
  sd.insert("n", tg::randint(0, 9, {2}));
  const std::string path = temp_path("reader.safetensors");
  ASSERT_TRUE(tg::save_safetensors(path, sd, {{"note", "x"}}).ok());
  auto r = tg::SafetensorsReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metadata(), (tg::Metadata{{"note", "x"}}));
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->tensors()[1].name, "h");
  EXPECT_EQ(r->tensors()[1].dtype, "BF16");
  EXPECT_EQ(r->tensors()[1].shape, (Shape{5}));
  EXPECT_EQ(r->tensors()[1].loads_as, tg::kBFloat16);
  EXPECT_EQ(r->find("nope"), nullptr);
  for (const auto& [name, t] : sd) {
    tg::Tensor back = r->read(name).value();
    ASSERT_EQ(back.dtype(), t.dtype()) << name;
    EXPECT_EQ(std::memcmp(back.raw_data(), t.raw_data(), t.numel() * tg::dtype_size(t.dtype())), 0) << name;
  }
  // Into existing tensors: the same dtype read in place, another float type converted (rounded to
  // nearest even into bfloat16, exactly widened out of it).
  tg::Tensor w = tg::zeros({3, 4}), wb = tg::zeros({3, 4}, tg::kBFloat16), h = tg::zeros({5});
  ASSERT_TRUE(r->read_into("w", w).ok());
  EXPECT_EQ(w.to_vector<float>(), sd.at("w").to_vector<float>());
  ASSERT_TRUE(r->read_into("w", wb).ok());
  EXPECT_EQ(wb.to_vector<float>(), sd.at("w").to(tg::kBFloat16).to_vector<float>());
  ASSERT_TRUE(r->read_into("h", h).ok());
  EXPECT_EQ(h.to_vector<float>(), sd.at("h").to_vector<float>());
  auto wrong = r->read_into("w", h);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("tensor 'w' has shape [3, 4], the destination [5]"), std::string::npos)
      << wrong.message();
  EXPECT_NE(r->read("nope").status().message().find(path + ": no tensor 'nope'"), std::string::npos);
  // A byte changed after open() is found when its tensor is read; a file cut short after open()
  // is named as such.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  auto changed = r->read("n");
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find("tensor 'n' fails its checksum"), std::string::npos) << changed.status().message();
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  auto cut = r->read("n");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("the file ended inside tensor 'n'"), std::string::npos) << cut.status().message();
  // Opening checks the header against the file: the shortened file is refused at once.
  auto reopened = tg::SafetensorsReader::open(path);
  ASSERT_FALSE(reopened.ok());
  EXPECT_NE(reopened.status().message().find("outside the 64-byte data section"), std::string::npos) << reopened.status().message();
  EXPECT_FALSE(tg::SafetensorsReader::open(temp_path("absent.safetensors")).ok());
  EXPECT_NE(tg::SafetensorsReader::open("/tmp").status().message().find("not a regular file"), std::string::npos);
  std::remove(path.c_str());
}

// A bfloat16 model: built under ParameterDTypeGuard (never whole in float32), loaded from a file
// tensor by tensor; a refused load (a flipped byte, a NaN) changes nothing.
TEST(Safetensors, BFloat16ModelLoadsAFileInPlace) {
  struct Net : tg::Module {
    std::shared_ptr<tg::Embedding> emb = register_module("emb", std::make_shared<tg::Embedding>(7, 4));
    std::shared_ptr<tg::LayerNorm> norm = register_module("norm", std::make_shared<tg::LayerNorm>(4));
    std::shared_ptr<tg::Linear> out = register_module("out", std::make_shared<tg::Linear>(4, 3));
  };
  tg::manual_seed(9);
  Net f32;
  std::unique_ptr<Net> bf;
  {
    tg::ParameterDTypeGuard guard(tg::kBFloat16);
    bf = std::make_unique<Net>();
  }
  for (const auto& [name, p] : bf->named_parameters()) EXPECT_EQ(p.dtype(), tg::kBFloat16) << name;
  EXPECT_EQ(bf->norm->weight.to_vector<float>(), std::vector<float>(4, 1.0f)) << "ones stay ones";
  EXPECT_EQ(tg::ParameterDTypeGuard::current(), tg::kFloat32) << "the guard is scoped";
  Net other;
  EXPECT_EQ(other.out->weight.dtype(), tg::kFloat32);
  // A float32 file into the bfloat16 model: each value rounded to nearest even.
  const std::string path = temp_path("bf16_model.safetensors");
  ASSERT_TRUE(tg::save_module(f32, path).ok());
  ASSERT_TRUE(tg::load_pretrained(*bf, path).ok());
  for (const auto& [name, p] : bf->named_parameters())
    EXPECT_EQ(p.to_vector<float>(), f32.state_dict().at(name).to(tg::kBFloat16).to_vector<float>()) << name;
  // A bfloat16 file into it: the bytes themselves.
  Net f32b;
  f32b.to(tg::kBFloat16);
  ASSERT_TRUE(tg::save_module(f32b, path).ok());
  ASSERT_TRUE(tg::load_module(*bf, path).ok());
  for (const auto& [name, p] : bf->named_parameters())
    EXPECT_EQ(std::memcmp(p.raw_data(), f32b.state_dict().at(name).raw_data(), p.numel() * 2), 0) << name;
  // Refused loads change nothing: a flipped byte in the last tensor, a NaN under a valid checksum.
  const std::vector<float> before = bf->emb->weight.to_vector<float>();
  std::string bytes = tg::read_file(path).value();
  bytes[bytes.size() - 1] ^= 0x01;
  ASSERT_TRUE(tg::write_file_atomic(path, bytes).ok());
  auto flipped = tg::load_pretrained(*bf, path);
  ASSERT_FALSE(flipped.ok());
  EXPECT_NE(flipped.status().message().find("fails its checksum"), std::string::npos) << flipped.status().message();
  EXPECT_EQ(bf->emb->weight.to_vector<float>(), before);
  tg::StateDict nan_sd = f32b.state_dict();
  tg::StateDict with_nan;
  for (const auto& [name, t] : nan_sd) with_nan.insert(name, name == "out.bias" ? tg::full({3}, NAN, tg::kBFloat16) : t);
  ASSERT_TRUE(tg::save_safetensors(path, with_nan).ok());  // a valid checksum over a NaN
  auto nan = tg::load_pretrained(*bf, path);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("'out.bias' holds NaN at flat index 0"), std::string::npos) << nan.status().message();
  EXPECT_EQ(bf->emb->weight.to_vector<float>(), before) << "checked before anything was copied";
  // Names and shapes come first: a file of another model is refused for them before any value is
  // read (here a tensor whose name matches holds a NaN too, and that is not what the message says).
  tg::StateDict renamed;
  for (const auto& [name, t] : nan_sd)
    renamed.insert(name == "out.bias" ? "head.bias" : name, name == "out.weight" ? tg::full(t.shape(), NAN, t.dtype()) : t);
  ASSERT_TRUE(tg::save_safetensors(path, renamed).ok());
  auto misnamed = tg::load_pretrained(*bf, path);
  ASSERT_FALSE(misnamed.ok());
  EXPECT_NE(misnamed.status().message().find("missing (out.bias)"), std::string::npos) << misnamed.status().message();
  EXPECT_NE(misnamed.status().message().find("unexpected (head.bias)"), std::string::npos) << misnamed.status().message();
  EXPECT_EQ(misnamed.status().message().find("NaN"), std::string::npos) << "no value read: " << misnamed.status().message();
  // Module::to(bfloat16) and back keeps identity; an optimizer refuses bfloat16 parameters.
  tg::Tensor handle = f32.out->weight;
  f32.to(tg::kBFloat16);
  EXPECT_EQ(handle.dtype(), tg::kBFloat16);
  EXPECT_TRUE(throws_with([&] { tg::AdamW opt(f32.named_parameters(), {}); }, {"Optimizer", "bfloat16"}));
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
