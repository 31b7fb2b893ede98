// bfloat16: conversions (every path the same bits, equal to PyTorch's on a golden set), the ops
// that take it, and the matrix products on every path this machine has, against a float64
// reference on bfloat16-rounded inputs; the AMX path's packing, VNNI-2 layout and edge tiles
// through emulated tiles on every CPU; results independent of the thread count.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "ops/kernels/bf16.h"
#include "test_util.h"

namespace tgt {
namespace {

namespace k = tg::kernels;
using tg::bfloat16;

float bits_to_float(uint32_t u) { return std::bit_cast<float>(u); }

// Every path this CPU can run.
std::vector<tg::CpuCapability> paths_here() {
  std::vector<tg::CpuCapability> out;
  for (int p = 0; p <= static_cast<int>(tg::best_cpu_capability()); ++p) out.push_back(static_cast<tg::CpuCapability>(p));
  return out;
}

// Restores the path in use when a test changes it.
struct PathScope {
  tg::CpuCapability saved = tg::cpu_capability();
  ~PathScope() { tg::set_cpu_capability(saved); }
};

TEST(BFloat16, RoundsToNearestEvenKeepingInfinitiesZerosAndNaN) {
  auto r = [](uint32_t u) { return bfloat16::round_bits(bits_to_float(u)); };
  EXPECT_EQ(r(0x3F800000), 0x3F80);  // 1.0
  EXPECT_EQ(r(0x3F808000), 0x3F80);  // a tie rounds to the even neighbour (down)
  EXPECT_EQ(r(0x3F818000), 0x3F82);  // a tie rounds to the even neighbour (up)
  EXPECT_EQ(r(0x3F808001), 0x3F81);  // just past a tie
  EXPECT_EQ(r(0x80000000), 0x8000);  // -0
  EXPECT_EQ(r(0xFF800000), 0xFF80);  // -inf
  EXPECT_EQ(r(0x7F7FFFFF), 0x7F80);  // past the largest bfloat16: inf
  EXPECT_EQ(r(0x00018000), 0x0002);  // subnormals round, never flush
  EXPECT_EQ(r(0x00008000), 0x0000);
  EXPECT_EQ(r(0xFFC00001), 0xFFC0);  // a NaN stays a NaN, sign kept
  EXPECT_EQ(r(0x7F800001), 0x7FC0);  // a signalling NaN becomes quiet (never inf)
  EXPECT_EQ(static_cast<float>(bfloat16::from_bits(0x4049)), 3.140625f);
}

TEST(BFloat16, EveryConversionPathGivesPyTorchsBits) {
  std::ifstream in(std::string(TG_TEST_DATA_DIR) + "/golden/bf16_rounding.txt");
  ASSERT_TRUE(in) << "tests/golden/bf16_rounding.txt (tools/make_bf16_golden.py)";
  std::vector<uint32_t> from;
  std::vector<uint16_t> want;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    uint32_t a = 0, b = 0;
    s >> std::hex >> a >> b;
    from.push_back(a);
    want.push_back(static_cast<uint16_t>(b));
  }
  ASSERT_GT(from.size(), 4000u);
  std::vector<float> f(from.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = bits_to_float(from[i]);
  std::vector<uint16_t> vec(f.size());
  k::float_to_bf16(f.data(), vec.data(), static_cast<int64_t>(f.size()));  // the vectorized kernel
  tg::Tensor t = tg::to(tg::from_vector(f, {static_cast<int64_t>(f.size())}), tg::kBFloat16);  // the op
  const auto* op = reinterpret_cast<const uint16_t*>(t.data<bfloat16>());
  int nans = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t scalar = bfloat16::round_bits(f[i]);
    ASSERT_EQ(vec[i], scalar) << std::hex << from[i];
    ASSERT_EQ(op[i], scalar) << std::hex << from[i];
    if (std::isnan(f[i])) {  // documented difference: PyTorch's NaN bits are 0xFFFF or 0x7FC0
      ++nans;
      EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16::from_bits(scalar))));
      EXPECT_EQ(scalar >> 15, from[i] >> 31) << "sign kept";
    } else {
      ASSERT_EQ(scalar, want[i]) << "float32 bits " << std::hex << from[i];
    }
  }
  EXPECT_GE(nans, 4);
}

TEST(BFloat16, TensorsConvertPrintCompareAndDoArithmetic) {
  Tensor x = tg::from_vector(std::vector<float>{1.0f, -2.5f, 3.14159f, 1e-3f}, {4});
  Tensor b = x.to(tg::kBFloat16);
  EXPECT_EQ(b.dtype(), tg::kBFloat16);
  EXPECT_EQ(tg::dtype_size(tg::kBFloat16), 2u);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, -2.5f, 3.140625f, static_cast<float>(bfloat16(1e-3f))}));
  EXPECT_EQ(b.to(tg::kFloat64).to_vector<double>()[2], 3.140625);
  EXPECT_EQ(tg::to_string(b), "tensor([ 1.0000, -2.5000,  3.1406,  0.0010], dtype=bfloat16)");
  EXPECT_EQ(tg::full({2}, 7.0, tg::kInt64).to(tg::kBFloat16).to_vector<float>(), (std::vector<float>{7, 7}));
  // Arithmetic in float32, rounded once: 1 + 2^-8 is not a bfloat16 (8 significant bits).
  Tensor one = tg::ones({1}, tg::kBFloat16), tiny = tg::full({1}, 1.0 / 256, tg::kBFloat16);
  EXPECT_EQ(tg::add(one, tiny).to_vector<float>()[0], 1.0f);
  EXPECT_EQ(tg::add(one, tg::mul(tiny, 2.0)).dtype(), tg::kBFloat16);
  EXPECT_EQ(tg::add(one, tg::mul(tiny, 2.0)).to_vector<float>()[0], 1.0078125f);
  EXPECT_EQ(tg::sub(b, b).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(tg::div(tg::mul(b, b), b).to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(tg::add(b, x).dtype(), tg::kFloat32);  // float32 wins, as in PyTorch
  EXPECT_EQ(tg::gt(b, 0.0).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(tg::eq(b, x.to(tg::kBFloat16)).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  // Movement ops copy 2-byte elements.
  EXPECT_EQ(b.reshape({2, 2}).t().to_vector<float>(), (std::vector<float>{1.0f, 3.140625f, -2.5f, b.to_vector<float>()[3]}));
  EXPECT_EQ(b.reshape({1, 4}).expand({2, 4}).to_vector<float>()[5], -2.5f);
  Tensor c = tg::zeros({4}, tg::kBFloat16);
  c.copy_(x);
  EXPECT_EQ(c.to_vector<float>(), b.to_vector<float>());
}

TEST(BFloat16, OtherOpsRefuseItNamingThemselves) {
  Tensor b = tg::ones({2, 3}, tg::kBFloat16);
  for (const auto& [name, fn] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"softmax", [&] { tg::softmax(b, -1); }},
           {"exp", [&] { tg::exp(b); }},
           {"sum", [&] { tg::sum(b); }},
           {"log", [&] { tg::log(b); }},
       }) {
    try {
      fn();
      ADD_FAILURE() << name << " accepted bfloat16";
    } catch (const tg::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ":", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
    }
  }
}

TEST(BFloat16, GradientsFlowThroughTheCastsAndOps) {
  Tensor x = tg::from_vector(std::vector<float>{0.5f, -1.25f, 2.0f}, {3}).requires_grad_();
  Tensor w = tg::from_vector(std::vector<float>{3.0f, 0.75f, -1.5f}, {3}).requires_grad_();
  Tensor y = tg::mul(x.to(tg::kBFloat16), w.to(tg::kBFloat16));
  EXPECT_EQ(y.dtype(), tg::kBFloat16);
  tg::sum(y.to(tg::kFloat32)).backward();
  EXPECT_EQ(x.grad().dtype(), tg::kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), w.to_vector<float>());  // exact: the values are bfloat16 already
  EXPECT_EQ(w.grad().to_vector<float>(), x.to_vector<float>());
}

TEST(BFloat16, EmbeddingAndLinearOfABFloat16Model) {
  tg::manual_seed(3);
  Tensor table = tg::randn({5, 4}).to(tg::kBFloat16).requires_grad_();
  Tensor ids = tg::from_vector(std::vector<int64_t>{1, 3, 1}, {3});
  Tensor e = tg::embedding(table, ids);
  EXPECT_EQ(e.dtype(), tg::kBFloat16);
  tg::Linear lin(4, 2);
  lin.weight = lin.weight.detach().to(tg::kBFloat16).requires_grad_();
  lin.bias = lin.bias.detach().to(tg::kBFloat16).requires_grad_();
  Tensor y = lin.forward(e);
  EXPECT_EQ(y.dtype(), tg::kBFloat16);
  tg::sum(y.to(tg::kFloat32)).backward();
  ASSERT_TRUE(table.grad().defined());
  EXPECT_EQ(table.grad().dtype(), tg::kBFloat16);
  // Row 1 was looked up twice, rows 0, 2, 4 never: their gradient is zero.
  std::vector<float> g = table.grad().to_vector<float>(), w = lin.weight.to(tg::kFloat32).sum({0}).to_vector<float>();
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(g[0 * 4 + j], 0.0f);
    EXPECT_NEAR(g[1 * 4 + j], 2 * w[j], 0.02 * std::fabs(w[j]) + 1e-3);
    EXPECT_NEAR(g[3 * 4 + j], w[j], 0.01 * std::fabs(w[j]) + 1e-3);
  }
  EXPECT_EQ(lin.weight.grad().dtype(), tg::kBFloat16);
}

TEST(BFloat16, SafetensorsKeepsBFloat16) {
  tg::manual_seed(4);
  tg::StateDict sd;
  sd.insert("w", tg::randn({3, 5}).to(tg::kBFloat16));
  tg::SafetensorsFile f = tg::parse_safetensors(tg::serialize_safetensors(sd), "mem").value();
  Tensor back = f.tensors.at("w");
  EXPECT_EQ(back.dtype(), tg::kBFloat16);
  EXPECT_EQ(std::memcmp(back.raw_data(), sd.at("w").raw_data(), 30), 0);
  EXPECT_NE(tg::serialize_safetensors(sd).find("\"BF16\""), std::string::npos);
  // A float32 model loads a bfloat16 checkpoint (converted exactly).
  tg::Linear lin(5, 3, false);
  tg::StateDict weights;
  weights.insert("weight", sd.at("w"));
  lin.load_state_dict(weights, true);
  EXPECT_EQ(lin.weight.to_vector<float>(), sd.at("w").to_vector<float>());
}

// ---- Matrix products ----

// The reference: float64 sums of the bfloat16-rounded operands.
std::vector<double> reference(int64_t M, int64_t N, int64_t K, const std::vector<float>& A, bool ta, const std::vector<float>& B,
                              bool tb) {
  auto r = [](float v) { return static_cast<double>(static_cast<float>(bfloat16(v))); };
  std::vector<double> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < K; ++kk)
        s += r(A[ta ? kk * M + i : i * K + kk]) * r(B[tb ? j * K + kk : kk * N + j]);
      C[i * N + j] = s;
    }
  return C;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  tg::Generator g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(g.normal());
  return v;
}

std::vector<uint16_t> to_bits(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  k::float_to_bf16(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

// Runs C (+)= op(A) op(B) through `run` for operands given as float32 or as bfloat16, and checks
// against the float64 reference within float32 summation error.
void check_products(const std::string& what, const std::function<void(int64_t, int64_t, int64_t, const k::Bf16Operand&,
                                                                        const k::Bf16Operand&, float*, int64_t, bool)>& run) {
  // K a multiple of 32 with whole and partial row tiles (the AMX row tile is 32 rows).
  const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},      {8, 32, 32},    {17, 33, 31}, {33, 31, 65},
                               {40, 70, 100}, {64, 96, 128}, {5, 200, 300}, {72, 40, 64}};
  for (const auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    for (int t = 0; t < 6; ++t) {
      // t = 4, 5: a plain A stored inside a wider matrix whose extra columns hold NaN (never read).
      const bool ta = t < 4 && (t & 1), tb = t & 2, wide = t >= 4;
      const std::vector<float> A = random_floats(M * K, 11 + M), B = random_floats(K * N, 17 + N);
      const int64_t lda = ta ? M : wide ? K + 8 : K;
      std::vector<float> As(static_cast<size_t>((ta ? K : M) * lda), std::numeric_limits<float>::quiet_NaN());
      for (int64_t r = 0; r < (ta ? K : M); ++r)
        for (int64_t c = 0; c < (ta ? M : K); ++c) As[r * lda + c] = A[r * (ta ? M : K) + c];
      const std::vector<uint16_t> Ab = to_bits(As), Bb = to_bits(B);
      const std::vector<double> want = reference(M, N, K, A, ta, B, tb);
      for (int bf16_inputs = 0; bf16_inputs < 2; ++bf16_inputs)
        for (int accumulate = 0; accumulate < 2; ++accumulate) {
          const int64_t ldc = N + 3;  // C inside a wider matrix: the columns past N stay untouched
          std::vector<float> C(static_cast<size_t>(M * ldc), 0.5f);
          k::Bf16Operand a{bf16_inputs ? static_cast<const void*>(Ab.data()) : As.data(), bf16_inputs != 0, lda, ta};
          k::Bf16Operand b{bf16_inputs ? static_cast<const void*>(Bb.data()) : B.data(), bf16_inputs != 0, tb ? K : N, tb};
          run(M, N, K, a, b, C.data(), ldc, accumulate != 0);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const double got = C[i * ldc + j];
              if (j >= N) {
                ASSERT_EQ(got, 0.5) << what << " wrote past column N";
                continue;
              }
              const double w = want[i * N + j] + (accumulate ? 0.5 : 0.0);
              ASSERT_NEAR(got, w, 1e-5 * std::sqrt(static_cast<double>(K)) * 4 + 1e-6 * std::fabs(w))
                  << what << " M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " bf16 "
                  << bf16_inputs << " acc " << accumulate << " at " << i << "," << j;
            }
        }
    }
  }
}

TEST(BFloat16Gemm, EveryPathThisCpuHasMatchesTheFloat64Reference) {
  for (tg::CpuCapability p : paths_here()) {
    SCOPED_TRACE(tg::cpu_capability_name(p));
    check_products(tg::cpu_capability_name(p), [p](auto M, auto N, auto K, const auto& a, const auto& b, float* C, int64_t ldc, bool acc) {
      k::gemm_bf16(M, N, K, a, b, C, ldc, acc, p);
    });
  }
}

// A bfloat16 C holds the float32 product's sums, each rounded once (the bits float_to_bf16 gives),
// on every path and shape (edge blocks, a bfloat16 A in place or packed, C inside a wider matrix).
void check_bf16_output(const std::string& what,
                       const std::function<void(int64_t, int64_t, int64_t, const k::Bf16Operand&, const k::Bf16Operand&,
                                                float*, uint16_t*, int64_t)>& run) {
  const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 31}, {72, 40, 64}, {40, 70, 100}, {64, 96, 128}};
  for (const auto& s : shapes)
    for (int bf16_inputs = 0; bf16_inputs < 2; ++bf16_inputs) {
      const int64_t M = s[0], N = s[1], K = s[2], ldc = N + 5;
      const std::vector<float> A = random_floats(M * K, 5 + M), B = random_floats(K * N, 7 + N);
      const std::vector<uint16_t> Ab = to_bits(A), Bb = to_bits(B);
      const k::Bf16Operand a{bf16_inputs ? static_cast<const void*>(Ab.data()) : A.data(), bf16_inputs != 0, K, false};
      const k::Bf16Operand b{bf16_inputs ? static_cast<const void*>(Bb.data()) : B.data(), bf16_inputs != 0, N, false};
      std::vector<float> c32(static_cast<size_t>(M * ldc));
      std::vector<uint16_t> c16(static_cast<size_t>(M * ldc), 0x7777), want(static_cast<size_t>(M * ldc));
      run(M, N, K, a, b, c32.data(), nullptr, ldc);
      run(M, N, K, a, b, nullptr, c16.data(), ldc);
      k::float_to_bf16(c32.data(), want.data(), M * ldc);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < ldc; ++j)
          ASSERT_EQ(c16[i * ldc + j], j < N ? want[i * ldc + j] : 0x7777)
              << what << " M " << M << " N " << N << " K " << K << " bf16 " << bf16_inputs << " at " << i << "," << j;
    }
}

TEST(BFloat16Gemm, BFloat16OutputIsTheFloat32SumsRoundedOnEveryPath) {
  for (tg::CpuCapability p : paths_here()) {
    check_bf16_output(tg::cpu_capability_name(p), [p](auto M, auto N, auto K, const auto& a, const auto& b, float* c32, uint16_t* c16,
                                               int64_t ldc) {
      if (c32) k::gemm_bf16(M, N, K, a, b, c32, ldc, false, p);
      else k::gemm_bf16_to_bf16(M, N, K, a, b, c16, ldc, p);
    });
  }
}

// ---- The AMX path without AMX: its kernel body (ops/kernels/amx_tiles.inc) over emulated tiles.

struct EmulatedTiles {
  alignas(64) unsigned char t[8][16][64];  // 8 tiles of 16 rows x 64 bytes (the configuration tile_amx loads)
  bool configured = false;                  // between amx_tiles_begin and amx_tiles_end
};
thread_local EmulatedTiles tiles;
std::atomic<int64_t> tiles_unconfigured{0}, tiles_begun{0}, tiles_ended{0};
void tiles_begin_emulated() {
  if (tiles.configured) ++tiles_unconfigured;  // configured twice on one thread without a release
  tiles.configured = true;
  ++tiles_begun;
}
void tiles_end_emulated() {
  if (!tiles.configured) ++tiles_unconfigured;
  tiles.configured = false;
  ++tiles_ended;
}

void tile_load(int t, const void* p, int64_t stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(tiles.t[t][r], static_cast<const char*>(p) + r * stride, 64);
}
void tile_store(int t, void* p, int64_t stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(static_cast<char*>(p) + r * stride, tiles.t[t][r], 64);
}
// tdpbf16ps: C[m][n] += sum over pairs p of A[m][2p] B[p][2n] + A[m][2p+1] B[p][2n+1].
void tile_dp(int c, int a, int b) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float acc;
      std::memcpy(&acc, tiles.t[c][m] + 4 * n, 4);
      for (int p = 0; p < 16; ++p) {
        uint16_t a0, a1, b0, b1;
        std::memcpy(&a0, tiles.t[a][m] + 4 * p, 2);
        std::memcpy(&a1, tiles.t[a][m] + 4 * p + 2, 2);
        std::memcpy(&b0, tiles.t[b][p] + 4 * n, 2);
        std::memcpy(&b1, tiles.t[b][p] + 4 * n + 2, 2);
        acc += static_cast<float>(bfloat16::from_bits(a0)) * static_cast<float>(bfloat16::from_bits(b0)) +
               static_cast<float>(bfloat16::from_bits(a1)) * static_cast<float>(bfloat16::from_bits(b1));
      }
      std::memcpy(tiles.t[c][m] + 4 * n, &acc, 4);
    }
}

void tile_amx_emulated(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t Kp, float* C, int64_t ldc, int64_t rows,
                       int64_t cols, bool accumulate) {
  if (!tiles.configured) ++tiles_unconfigured;  // real AMX: tileloadd without a configuration is a SIGILL
#define TG_TILE_LOAD(t, ptr, stride) tile_load(t, ptr, stride)
#define TG_TILE_STREAM_LOAD(t, ptr, stride) tile_load(t, ptr, stride)
#define TG_TILE_STORE(t, ptr, stride) tile_store(t, ptr, stride)
#define TG_TILE_ZERO(n) std::memset(tiles.t[n], 0, sizeof tiles.t[n])
#define TG_TILE_DP(c, x, y) tile_dp(c, x, y)
#include "ops/kernels/amx_tiles.inc"
#undef TG_TILE_LOAD
#undef TG_TILE_STREAM_LOAD
#undef TG_TILE_STORE
#undef TG_TILE_ZERO
#undef TG_TILE_DP
}

TEST(BFloat16Gemm, AmxKernelBodyOverEmulatedTilesMatchesTheReference) {
  tiles_unconfigured = tiles_begun = tiles_ended = 0;
  // K in chunks of 64 (the real kernel: 512), so that the shapes here cross chunks; A packed in
  // tiles as for the real kernel, in blocks of 8 KB (at least one row tile), so that M spans several.
  const k::Bf16Kernel emulated{tile_amx_emulated, k::kAmxRows, tiles_begin_emulated, tiles_end_emulated,
                               k::round_block_bf16_portable, 64, 8 << 10, true, k::store_block_portable};
  check_products("amx (emulated)", [&](auto M, auto N, auto K, const auto& a, const auto& b, float* C, int64_t ldc, bool acc) {
    k::gemm_bf16_packed(M, N, K, a, b, C, ldc, acc, emulated);
  });
  check_bf16_output("amx (emulated)", [&](auto M, auto N, auto K, const auto& a, const auto& b, float* c32, uint16_t* c16,
                                          int64_t ldc) { k::gemm_bf16_packed(M, N, K, a, b, c32, ldc, false, emulated, c16); });
  // Every tile ran inside its thread's configuration, and every thread released its tiles.
  EXPECT_EQ(tiles_unconfigured.load(), 0);
  EXPECT_GT(tiles_begun.load(), 0);
  EXPECT_EQ(tiles_begun.load(), tiles_ended.load());
  EXPECT_FALSE(tiles.configured);
}

// A product's epilogue (a linear layer's bias and ReLU) on every path and on the emulated AMX kernel
// (K across its 64-deep chunks, so the epilogue follows the L1 block's store): the same bits as the
// product without it, then the portable epilogue over C; the columns past N untouched.
TEST(BFloat16Gemm, EpilogueAddsTheBiasAndReluToTheFinishedSums) {
  const k::Bf16Kernel emulated{tile_amx_emulated, k::kAmxRows, tiles_begin_emulated, tiles_end_emulated,
                               k::round_block_bf16_portable, 64, 8 << 10, true, k::store_block_portable};
  using Run = std::function<void(int64_t, int64_t, int64_t, const k::Bf16Operand&, const k::Bf16Operand&, float*, int64_t,
                                 bool, const k::Bf16Epilogue*)>;
  std::vector<std::pair<std::string, Run>> runs;
  for (tg::CpuCapability p : paths_here())
    runs.push_back({tg::cpu_capability_name(p), [p](auto M, auto N, auto K, const auto& a, const auto& b, float* C, int64_t ldc,
                                             bool acc, const k::Bf16Epilogue* ep) {
                      k::gemm_bf16(M, N, K, a, b, C, ldc, acc, p, nullptr, ep);
                    }});
  runs.push_back({"amx (emulated)", [&](auto M, auto N, auto K, const auto& a, const auto& b, float* C, int64_t ldc, bool acc,
                                        const k::Bf16Epilogue* ep) {
                    k::gemm_bf16_packed(M, N, K, a, b, C, ldc, acc, emulated, nullptr, ep);
                  }});
  const int64_t shapes[][3] = {{1, 1, 1}, {17, 33, 31}, {40, 70, 100}, {72, 40, 300}, {5, 200, 64}, {3, 4, 0}};
  for (const auto& [name, run] : runs)
    for (const auto& s : shapes) {
      const int64_t M = s[0], N = s[1], K = s[2], ldc = N + 3;
      if (K == 0 && name == "amx (emulated)") continue;  // gemm_bf16 answers K = 0 before any kernel
      const std::vector<float> A = random_floats(M * K + 1, 5 + M), B = random_floats(K * N + 1, 7 + N),
                               bias = random_floats(N, 9);
      for (int relu = 0; relu < 2; ++relu)
        for (int with_bias = 0; with_bias < 2; ++with_bias)
          for (int acc = 0; acc < 2; ++acc) {
            const k::Bf16Epilogue ep{with_bias ? bias.data() : nullptr, relu != 0};
            std::vector<float> want(static_cast<size_t>(M * ldc), 0.25f), got = want;
            run(M, N, K, {A.data(), false, K, false}, {B.data(), false, N, false}, want.data(), ldc, acc != 0, nullptr);
            k::epilogue_block_portable(want.data(), ldc, M, N, ep.bias, ep.relu);
            run(M, N, K, {A.data(), false, K, false}, {B.data(), false, N, false}, got.data(), ldc, acc != 0, &ep);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << name << " M " << M << " N " << N << " K " << K << " relu " << relu << " bias " << with_bias << " acc "
                << acc;
          }
    }
}

// The AVX-512 epilogue gives the portable one's bits: -0, NaN (ReLU makes it 0, as x > 0 ? x : 0),
// partial vectors at a row's end.
TEST(BFloat16Gemm, EpilogueAvx512MatchesPortable) {
  if (tg::best_cpu_capability() == tg::CpuCapability::kPortable) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const int64_t rows = 7, cols = 37, ld = 40;
  std::vector<float> C = random_floats(rows * ld, 3), bias = random_floats(cols, 4);
  C[0] = -0.0f;
  C[5] = std::numeric_limits<float>::quiet_NaN();
  C[ld + 36] = -std::numeric_limits<float>::infinity();
  for (int relu = 0; relu < 2; ++relu)
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      std::vector<float> want = C, got = C;
      k::epilogue_block_portable(want.data(), ld, rows, cols, with_bias ? bias.data() : nullptr, relu != 0);
      k::epilogue_block_avx512bf16(got.data(), ld, rows, cols, with_bias ? bias.data() : nullptr, relu != 0);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << relu << with_bias;
    }
}

// A packed weight starts on a 64-byte line, as the per-call scratch does: a tile row (64 bytes) or a
// vector of a misaligned pack straddles two lines (on AMX the cached-weight products ran 15-20%
// slower than packing B afresh on every call).
TEST(BFloat16Gemm, PackedWeightsStartOnACacheLine) {
  for (int64_t N : {1, 33, 512})
    for (tg::CpuCapability p : paths_here()) {
      if (p == tg::CpuCapability::kPortable) continue;
      std::vector<float> W(static_cast<size_t>(N * 70), 0.5f);
      for (int i = 0; i < 4; ++i) {  // a few allocations, whatever malloc hands out
        const k::PackedB packed = k::pack_b_bf16({W.data(), false, 70, true}, N, 70, p);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.panels.data()) % 64, 0u) << tg::cpu_capability_name(p) << " N " << N;
      }
    }
}

TEST(BFloat16Gemm, PackedLayoutsAreRowMajorAndVnniPairs) {
  const int64_t K = 5, N = 3;  // K padded to 32, 3 of 32 columns
  std::vector<float> B(K * N);
  for (int64_t i = 0; i < K * N; ++i) B[i] = static_cast<float>(i + 1);
  std::vector<uint16_t> panel(32 * k::kBf16PanelCols, 0xFFFF);
  k::pack_b_panel_bf16({B.data(), false, N, false}, 0, N, K, panel.data());
  for (int64_t kk = 0; kk < 32; ++kk)
    for (int64_t c = 0; c < 32; ++c) {
      const uint16_t want = kk < K && c < N ? bfloat16::round_bits(B[kk * N + c]) : 0;
      ASSERT_EQ(panel[(kk / 2) * 64 + c * 2 + (kk & 1)], want) << kk << "," << c;
    }
  std::vector<uint16_t> rows(32 * 32, 0xFFFF);
  k::pack_a_bf16({B.data(), false, N, true}, 1, 2, K, rows.data(), 32);  // op(A) = B^T: rows 1, 2 of it
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t kk = 0; kk < 32; ++kk)
      ASSERT_EQ(rows[r * 32 + kk], r < 2 && kk < K ? bfloat16::round_bits(B[kk * N + 1 + r]) : 0) << r << "," << kk;
  // In tiles (AMX): 40 rows x K = 70 of a plain A, ldd 96 (Kp): tile (g, s) holds rows 16g.., k 32s..
  // as 16 runs of 32 values, at (g * 16 * 96 + s * 512); rows past 40 and k past 70 are zeros.
  const int64_t M2 = 40, K2 = 70, ldd = 96;
  std::vector<float> A(M2 * K2);
  for (int64_t i = 0; i < M2 * K2; ++i) A[i] = static_cast<float>(i % 251) - 100.0f;
  std::vector<uint16_t> tiled(64 * ldd, 0xFFFF);
  k::pack_a_bf16({A.data(), false, K2, false}, 0, M2, K2, tiled.data(), ldd, /*tiles=*/true);
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t kk = 0; kk < ldd; ++kk) {
      const uint16_t want = r < M2 && kk < K2 ? bfloat16::round_bits(A[r * K2 + kk]) : 0;
      ASSERT_EQ(tiled[(r / 16) * 16 * ldd + (kk / 32) * 512 + (r % 16) * 32 + kk % 32], want) << r << "," << kk;
    }
}

// The AVX-512 rounding of C's blocks (vcvtne2ps2bf16, software where a value is subnormal) writes
// the portable bits: ties, subnormals among normal values, NaNs, infinities, rows of any length.
TEST(BFloat16Gemm, VectorizedRoundingOfCWritesThePortableBits) {
  if (static_cast<int>(tg::best_cpu_capability()) < static_cast<int>(tg::CpuCapability::kAvx512Bf16))
    GTEST_SKIP() << "no AVX-512 with BF16 on this CPU";
  const float special[] = {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-7f, 0x1p-130f, -0x1.fffffep-127f,
                           3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY, std::bit_cast<float>(0x7F800001u),
                           std::bit_cast<float>(0xFFC12345u), std::bit_cast<float>(0x7FBFFFFFu), 1e-40f, 0x1p-126f};
  for (int64_t cols : {1, 17, 32, 45, 64}) {
    const int64_t rows = 6, lds = cols + 3, ldd = cols + 5;
    std::vector<float> x = random_floats(rows * lds, 9 + cols);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = special[(i / 7) % std::size(special)];
    for (int64_t c = 0; c < cols; ++c) x[c] = 1.5f + static_cast<float>(c);  // row 0: no subnormal (the instruction's path)
    std::vector<uint16_t> want(static_cast<size_t>(rows * ldd), 0xABCD), got = want;
    k::round_block_bf16_portable(x.data(), lds, want.data(), ldd, rows, cols);
    k::round_block_avx512bf16(x.data(), lds, got.data(), ldd, rows, cols);
    ASSERT_EQ(got, want) << "cols " << cols;
  }
}

// The AVX-512 store of a float32 block into C (AMX's float32 C over several K chunks) writes what
// the portable one does, accumulating or not, for rows of any length.
TEST(BFloat16Gemm, VectorizedBlockStoreWritesWhatThePortableOneDoes) {
  if (static_cast<int>(tg::best_cpu_capability()) < static_cast<int>(tg::CpuCapability::kAvx512Bf16))
    GTEST_SKIP() << "no AVX-512 with BF16 on this CPU";
  for (int64_t cols : {1, 15, 16, 17, 31, 32})
    for (bool acc : {false, true}) {
      const int64_t rows = 5, lds = 32, ldd = cols + 7;
      const std::vector<float> src = random_floats(rows * lds, 21 + cols);
      std::vector<float> want = random_floats(rows * ldd, 5), got = want;
      k::store_block_portable(src.data(), lds, want.data(), ldd, rows, cols, acc);
      k::store_block_avx512bf16(src.data(), lds, got.data(), ldd, rows, cols, acc);
      ASSERT_EQ(got, want) << "cols " << cols << " accumulate " << acc;
    }
}

TEST(BFloat16Gemm, VectorizedPackingWritesThePortableBits) {
  if (static_cast<int>(tg::best_cpu_capability()) < static_cast<int>(tg::CpuCapability::kAvx512Bf16))
    GTEST_SKIP() << "no AVX-512 with BF16 on this CPU: the AVX-512 packing cannot run here";
  // Values whose rounding is delicate: ties both ways, subnormals, the largest finite, infinities,
  // NaNs with payloads, signed zeros; then normal values.
  const float special[] = {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-7f, 0x1p-130f, -0x1.fffffep-127f,
                           3.4028235e38f, -3.4028235e38f, INFINITY, -INFINITY, std::bit_cast<float>(0x7F800001u),
                           std::bit_cast<float>(0xFFC12345u), std::bit_cast<float>(0x7FBFFFFFu), 1e-40f};
  for (const auto& [stored_rows, stored_cols] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {16, 16}, {17, 33}, {40, 70}, {64, 31}, {3, 100}, {33, 150}}) {
    std::vector<float> x = random_floats(stored_rows * stored_cols, 3 + stored_rows);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = special[(i / 3) % std::size(special)];
    const std::vector<uint16_t> xb = to_bits(x);
    for (int trans = 0; trans < 2; ++trans)
      for (int is_bf16 = 0; is_bf16 < 2; ++is_bf16) {
        // op(A) is rows x K: the stored matrix, or its transpose.
        const int64_t M = trans ? stored_cols : stored_rows, K = trans ? stored_rows : stored_cols;
        const k::Bf16Operand a{is_bf16 ? static_cast<const void*>(xb.data()) : x.data(), is_bf16 != 0, stored_cols, trans != 0};
        for (const auto& [i0, rows] : {std::pair<int64_t, int64_t>{0, M}, {M / 3, M - M / 3}, {M - 1, 1}})
          for (int64_t pad : {0, 32})  // packed rows (or 16-row groups of tiles) Kp apart, or Kp + 32
            for (bool tiles : {false, true}) {
              const int64_t ldd = k::bf16_padded_k(K) + pad;
              const size_t n = static_cast<size_t>((rows + k::kBf16RowStep) * ldd);
              std::vector<uint16_t> want(n, 0xABCD), got(n, 0xABCD);
              k::pack_a_bf16_portable(a, i0, rows, K, want.data(), ldd, tiles);
              k::pack_a_avx512bf16(a, i0, rows, K, got.data(), ldd, tiles);
              ASSERT_EQ(got, want) << "stored " << stored_rows << "x" << stored_cols << " trans " << trans << " bf16 "
                                   << is_bf16 << " rows " << i0 << "+" << rows << " pad " << pad << " tiles " << tiles;
            }
        if (trans) {
          // The stored matrix as a transposed op(B) (x Wᵀ: K = stored columns, N = stored rows),
          // one panel at a time, the last one part empty.
          const int64_t Kb = stored_cols, Nb = stored_rows, panel = k::bf16_padded_k(Kb) * k::kBf16PanelCols;
          for (int64_t j0 = 0; j0 < Nb; j0 += k::kBf16PanelCols) {
            const int64_t cols = std::min(k::kBf16PanelCols, Nb - j0);
            std::vector<uint16_t> want(static_cast<size_t>(panel), 0xABCD), got(static_cast<size_t>(panel), 0xABCD);
            k::pack_b_panel_bf16_portable(a, j0, cols, Kb, want.data());
            k::pack_b_panel_avx512bf16(a, j0, cols, Kb, got.data());
            ASSERT_EQ(got, want) << "panel " << j0 << " of " << stored_rows << "x" << stored_cols << " bf16 " << is_bf16;
          }
          continue;
        }
        // The same matrix as a plain op(B) (K = stored rows, N = stored columns), pair rows packed
        // in two ranges as the threads do.
        const int64_t Kb = stored_rows, Nb = stored_cols, pairs = k::bf16_padded_k(Kb) / 2;
        const size_t n = static_cast<size_t>((Nb + k::kBf16PanelCols - 1) / k::kBf16PanelCols * pairs * 2 * k::kBf16PanelCols);
        std::vector<uint16_t> want(n, 0xABCD), got(n, 0xABCD);
        for (const auto& [p0, p1] : {std::pair<int64_t, int64_t>{0, pairs / 2}, {pairs / 2, pairs}}) {
          k::pack_b_pair_rows_bf16_portable(a, Nb, Kb, p0, p1, want.data());
          k::pack_b_pair_rows_avx512bf16(a, Nb, Kb, p0, p1, got.data());
        }
        ASSERT_EQ(got, want) << "pair rows of " << stored_rows << "x" << stored_cols << " bf16 " << is_bf16;
      }
  }
}

TEST(BFloat16Gemm, ResultsDoNotDependOnTheThreadCount) {
  const int64_t M = 150, N = 130, K = 200;
  const std::vector<float> A = random_floats(M * K, 5), B = random_floats(K * N, 6);
  const int saved = tg::num_threads();
  for (tg::CpuCapability p : paths_here()) {
    std::vector<float> one(M * N), two(M * N);
    tg::set_num_threads(1);
    k::gemm_bf16(M, N, K, {A.data(), false, K, false}, {B.data(), false, N, false}, one.data(), N, false, p);
    tg::set_num_threads(2);
    k::gemm_bf16(M, N, K, {A.data(), false, K, false}, {B.data(), false, N, false}, two.data(), N, false, p);
    EXPECT_EQ(one, two) << tg::cpu_capability_name(p);
  }
  tg::set_num_threads(saved);
}


// On the ISA paths a row's product has the same bits whether it is multiplied alone (a decoding
// step: the kernels then skip the packed block's zero rows) or among 2, 3, ... 9 rows (the
// prompt). (The portable path is float32 GEMM, whose matrix-vector products sum in another order.)
TEST(BFloat16Gemm, ARowsResultDoesNotDependOnHowManyRowsAreMultiplied) {
  const int64_t N = 70, K = 300, rows = 9;
  const std::vector<float> A = random_floats(rows * K, 7), B = random_floats(N * K, 8);
  if (paths_here().size() == 1) GTEST_SKIP() << "only the portable path on this CPU";
  for (tg::CpuCapability p : paths_here()) {
    if (p == tg::CpuCapability::kPortable) continue;
    std::vector<float> all(rows * N);
    k::gemm_bf16(rows, N, K, {A.data(), false, K, false}, {B.data(), false, K, true}, all.data(), N, false, p);
    for (int64_t M = 1; M < rows; ++M)
      for (int64_t i0 = 0; i0 + M <= rows; i0 += M) {
        std::vector<float> part(M * N);
        k::gemm_bf16(M, N, K, {A.data() + i0 * K, false, K, false}, {B.data(), false, K, true}, part.data(), N, false, p);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(part[i], all[i0 * N + i]) << tg::cpu_capability_name(p) << ": " << M << " rows from row " << i0;
      }
  }
}
TEST(BFloat16Gemm, MatmulOfBFloat16TensorsOnEveryPath) {
  PathScope restore;
  tg::manual_seed(9);
  Tensor a = tg::randn({2, 9, 40}).to(tg::kBFloat16), b = tg::randn({40, 24}).to(tg::kBFloat16);
  Tensor want = tg::matmul(a.to(tg::kFloat64), b.to(tg::kFloat64));
  for (tg::CpuCapability p : paths_here()) {
    tg::set_cpu_capability(static_cast<tg::CpuCapability>(p));
    Tensor c = tg::matmul(a, b);
    EXPECT_EQ(c.dtype(), tg::kBFloat16);
    EXPECT_TRUE(close(c, want, 1e-2, 1e-2)) << tg::cpu_capability_name(p);  // one bfloat16 rounding of the output
  }
  Tensor w = tg::randn({24, 40}).to(tg::kBFloat16).requires_grad_();
  tg::sum(tg::matmul(a, w, false, true).to(tg::kFloat32)).backward();
  EXPECT_EQ(w.grad().dtype(), tg::kBFloat16);
  EXPECT_TRUE(close(w.grad(), tg::sum(a.to(tg::kFloat64), {0, 1}).unsqueeze(0).expand({24, 40}), 1e-2, 2e-2));
}

// Under tests/cpu_paths_test.sh: the path TG_CPU_CAPABILITY names is the one in use.
TEST(BFloat16Gemm, EnvironmentChoosesThePath) {
  const char* env = std::getenv("TG_CPU_CAPABILITY");
  const std::string in_use = tg::cpu_capability_name(tg::cpu_capability());  // throws tg::Error for a bad value
  if (env != nullptr && *env != '\0') EXPECT_EQ(in_use, env);
  else EXPECT_EQ(tg::cpu_capability(), tg::best_cpu_capability());
}

TEST(BFloat16Gemm, CapabilityIsNamedAndCannotBeRaised) {
  EXPECT_NE(tg::cpu_capability_description().find("bf16 matmul: "), std::string::npos);
  if (tg::best_cpu_capability() != tg::CpuCapability::kAmx) {
    EXPECT_THROW(tg::set_cpu_capability(tg::CpuCapability::kAmx), tg::Error);
  }
}

}  // namespace
}  // namespace tgt
