// Bad input raises tg::Error naming the op, the shapes or values, and what was expected.
#include "test_util.h"

namespace {
using namespace tgt;

TEST(Errors, ShapeMismatches) {
  Tensor a = tg::ones({2, 3}), b = tg::ones({4});
  EXPECT_TRUE(throws_with([&] { tg::add(a, b); }, {"add:", "[2, 3]", "[4]", "broadcast"}));
  EXPECT_TRUE(throws_with([&] { tg::mul(a, tg::ones({3, 3})); }, {"mul:", "[2, 3]", "[3, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::matmul(tg::ones({32, 64}), tg::ones({32, 64})); },
                          {"matmul:", "[32, 64]", "inner dimensions 64 and 32 differ"}));
  EXPECT_TRUE(throws_with([&] { tg::matmul(tg::ones({2, 2, 3}), tg::ones({3, 3, 2})); }, {"matmul", "broadcast"}));
  EXPECT_TRUE(throws_with([&] { tg::reshape(a, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"}));
  EXPECT_TRUE(throws_with([&] { tg::reshape(a, {-1, -1}); }, {"reshape", "only one dimension can be -1"}));
  EXPECT_TRUE(throws_with([&] { tg::reshape(a, {4, -1}); }, {"reshape", "[2, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::expand(a, {2, 4}); }, {"expand", "[2, 3]", "[2, 4]"}));
  EXPECT_TRUE(throws_with([&] { tg::concat({a, tg::ones({2, 3, 1})}, 0); }, {"concat", "[2, 3, 1]"}));
  EXPECT_TRUE(throws_with([&] { tg::concat({}, 0); }, {"concat", "at least one"}));
  EXPECT_TRUE(throws_with([&] { tg::stack({a, b}); }, {"stack", "[4]", "[2, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::split(a, std::vector<int64_t>{1, 1}, 1); }, {"split", "add up to 2", "size 3"}));
  EXPECT_TRUE(throws_with([&] { tg::masked_fill(a, tg::ones({2, 1, 3}).to(tg::kBool), 0); }, {"masked_fill", "[2, 1, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::layer_norm(a, 1, tg::ones({2})); }, {"layer_norm", "weight", "[2]", "[3]"}));
  EXPECT_TRUE(throws_with([&] { tg::layer_norm(a, 3); }, {"layer_norm", "normalized_ndim 3"}));
  EXPECT_TRUE(throws_with([&] { tg::rms_norm(a, tg::ones({2})); }, {"rms_norm", "weight", "[2]", "[3]"}));
  EXPECT_TRUE(throws_with([&] { tg::rms_norm(a, tg::ones({3}, tg::kFloat64)); }, {"rms_norm", "weight", "float64"}));
  EXPECT_TRUE(throws_with([&] { tg::rms_norm(a, {}, 0.0); }, {"rms_norm", "eps"}));
  EXPECT_TRUE(throws_with([&] { tg::rms_norm(tg::ones({2, 3}, tg::kInt64)); }, {"rms_norm"}));
  EXPECT_TRUE(throws_with([&] { tg::rotary_embedding(a, tg::ones({2, 1}), tg::ones({2, 1})); }, {"rotary_embedding", "d even"}));
  EXPECT_TRUE(throws_with([&] { tg::rotary_embedding(tg::ones({2, 4}), tg::ones({2, 1}), tg::ones({2, 2})); },
                          {"rotary_embedding", "cos", "[2, 1]", "[2, 2]"}));
  EXPECT_TRUE(throws_with([&] { tg::rotary_embedding(tg::ones({2, 4}), tg::ones({2, 2}), tg::ones({3, 2})); },
                          {"rotary_embedding", "sin", "[3, 2]"}));
  EXPECT_TRUE(throws_with([&] { tg::repeat_kv(a, 2); }, {"repeat_kv", "[2, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::repeat_kv(tg::ones({1, 2, 3, 4}), 0); }, {"repeat_kv", "n_rep"}));
  EXPECT_TRUE(throws_with([&] { tg::bias_act(a, tg::ones({2}), tg::Activation::kRelu); }, {"bias_act", "[2]", "[2, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::linear(a, tg::ones({4, 2})); }, {"linear", "[2, 3]", "in_features = 2"}));
  EXPECT_TRUE(throws_with([&] { tg::linear(a, tg::ones({4, 3, 1})); }, {"linear", "weight", "[4, 3, 1]"}));
  EXPECT_TRUE(throws_with([&] { tg::linear(a, tg::ones({4, 3}), tg::ones({3})); }, {"linear", "bias", "[3]", "[4, 3]"}));
  EXPECT_TRUE(throws_with([&] { tg::linear(a, tg::ones({4, 3}, tg::kFloat64)); }, {"linear", "dtypes"}));
}

TEST(Errors, AxesAndRanks) {
  Tensor a = tg::ones({2, 3});
  EXPECT_TRUE(throws_with([&] { tg::sum(a, {2}); }, {"sum", "dimension 2", "rank 2"}));
  EXPECT_TRUE(throws_with([&] { tg::sum(a, {1, -1}); }, {"sum", "more than once"}));
  EXPECT_TRUE(throws_with([&] { tg::softmax(a, -3); }, {"softmax", "-3"}));
  EXPECT_TRUE(throws_with([&] { tg::permute(a, {0, 0}); }, {"permute", "repeats"}));
  EXPECT_TRUE(throws_with([&] { tg::permute(a, {0}); }, {"permute", "rank 2"}));
  EXPECT_TRUE(throws_with([&] { tg::transpose(a, 0, 5); }, {"transpose", "5"}));
  EXPECT_TRUE(throws_with([&] { tg::slice(a, 1, 0, 2, 0); }, {"slice", "step"}));
  EXPECT_TRUE(throws_with([&] { tg::narrow(a, 1, 2, 2); }, {"narrow", "size 3"}));
  EXPECT_TRUE(throws_with([&] { tg::matmul(tg::scalar(1), a); }, {"matmul", "at least one dimension"}));
  EXPECT_TRUE(throws_with([&] { tg::embedding(tg::ones({3}), tg::arange(2)); }, {"embedding", "2-D"}));
  EXPECT_TRUE(throws_with([&] { a.size(4); }, {"size", "4"}));
}

TEST(Errors, Dtypes) {
  Tensor i = tg::arange(3), f = tg::ones({3});
  EXPECT_TRUE(throws_with([&] { tg::exp(i); }, {"exp", "int64", "float32 or float64"}));
  EXPECT_TRUE(throws_with([&] { tg::add(i, i); }, {"add", "int64"}));
  EXPECT_TRUE(throws_with([&] { tg::index_select(f, 0, f); }, {"index_select", "int64", "float32"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::ones({2})); }, {"cross_entropy", "int64"}));
  EXPECT_TRUE(throws_with([&] { tg::where(f, f, f); }, {"where", "bool mask"}));
  EXPECT_TRUE(throws_with([&] { tg::matmul(tg::ones({2, 2}), tg::ones({2, 2}, tg::kFloat64)); }, {"matmul", "dtypes"}));
  EXPECT_TRUE(throws_with([&] { i.requires_grad_(); }, {"requires_grad", "int64"}));
  EXPECT_TRUE(throws_with([&] { f.data<double>(); }, {"data", "float32", "float64"}));
  EXPECT_TRUE(throws_with([&] { tg::randn({2}, tg::kInt64); }, {"normal", "int64"}));
}

TEST(Errors, IndicesOutOfRange) {
  Tensor w = tg::ones({5, 2});
  EXPECT_TRUE(throws_with([&] { tg::embedding(w, tg::from_vector<int64_t>({1, 5}, {2})); },
                          {"embedding", "id 5", "5 embeddings"}));
  EXPECT_TRUE(throws_with([&] { tg::index_select(w, 1, tg::from_vector<int64_t>({-1}, {1})); }, {"index -1"}));
  EXPECT_TRUE(throws_with([&] { tg::gather(w, 1, tg::from_vector<int64_t>({0, 2}, {1, 2})); }, {"gather", "index 2"}));
  EXPECT_TRUE(throws_with([&] { tg::gather(w, 1, tg::from_vector<int64_t>({0}, {1})); }, {"gather", "rank"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::from_vector<int64_t>({0, 3}, {2})); },
                          {"cross_entropy", "target 3", "3 classes"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::from_vector<int64_t>({0}, {1})); },
                          {"cross_entropy", "target shape [1]", "[2, 3]"}));
}

TEST(Errors, EmptyAndValues) {
  EXPECT_TRUE(throws_with([&] { tg::amax(tg::zeros({0, 3}), {0}); }, {"amax", "size 0"}));
  EXPECT_TRUE(throws_with([&] { tg::max(tg::zeros({2, 0}), 1); }, {"max", "size 0"}));
  EXPECT_TRUE(throws_with([&] { tg::softmax(tg::zeros({0})); }, {"softmax", "non-empty"}));
  EXPECT_TRUE(throws_with([&] { tg::ones({2}).item(); }, {"item", "[2]", "2 elements"}));
  EXPECT_TRUE(throws_with([&] { tg::var(tg::ones({1})); }, {"var", "degrees of freedom"}));
  EXPECT_TRUE(throws_with([&] { tg::dropout(tg::ones({2}), 1.5); }, {"dropout", "1.5"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::arange(2), {.label_smoothing = 2}); },
                          {"cross_entropy", "label_smoothing"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::arange(2), {.weight = tg::ones({2})}); },
                          {"cross_entropy", "weight of shape [2]", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_with([&] { tg::nll_loss(tg::ones({2, 3}), tg::arange(2), -100, tg::Reduction::kMean, tg::arange(3)); },
                          {"nll_loss", "int64"}));
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(tg::ones({2, 3}), tg::arange(2), {.weight = tg::full({3}, NAN)}); },
                          {"cross_entropy", "finite"}));
  EXPECT_TRUE(throws_with([&] { tg::zeros({2, -1}); }, {"negative dimension -1"}));
  EXPECT_TRUE(throws_with([&] { tg::arange(0, 1, 0); }, {"arange", "step"}));
  EXPECT_TRUE(throws_with([&] { tg::from_vector(std::vector<double>{1, 2}, {3}); }, {"from_vector", "2 values", "[3]"}));
  EXPECT_TRUE(throws_with([&] { tg::tensor({{1, 2}, {3}}); }, {"tensor", "ragged"}));
  EXPECT_TRUE(throws_with([&] { tg::clamp(tg::ones({1}), 2, 1); }, {"clamp", "exceeds"}));
  EXPECT_TRUE(throws_with([&] { Tensor().shape(); }, {"undefined Tensor"}));
  EXPECT_TRUE(throws_with([&] { tg::add(Tensor(), tg::ones({1})); }, {"add", "undefined"}));
  EXPECT_TRUE(throws_with([&] { tg::randint(3, 3, {2}); }, {"randint", "below"}));
}

TEST(Errors, Autograd) {
  Tensor x = tg::ones({2}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_TRUE(throws_with([&] { y.requires_grad_(false); }, {"requires_grad", "leaf", "'mul'"}));
  EXPECT_TRUE(throws_with([&] { tg::gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x}); },
                          {"gradcheck", "float64"}));
  EXPECT_TRUE(throws_with([&] { x.set_grad(tg::ones({3})); }, {"set_grad", "[3]", "[2]"}));
  EXPECT_TRUE(throws_with([&] { tg::ones({1}).register_hook([](const Tensor& g) { return g; }); },
                          {"register_hook", "does not require grad"}));
}

}  // namespace
