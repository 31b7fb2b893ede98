// Products on the GPU through cuBLASLt, loaded with dlopen at the first GPU product: a
// CUDA-enabled library neither needs cuBLAS to load nor touches it in a CPU run. Per device: one
// handle and a 32 MiB workspace; per product shape: the descriptors and the algorithm the
// heuristic chose first, kept (the heuristic query is slow, and one algorithm per shape keeps the
// results the same run after run). Split-K schemes that reduce in place are excluded.
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "graph/cuda/runtime.h"
#include "graph/error.h"
#include "ops/cuda/matmul.h"

namespace tg::cuda_ops {
namespace {

using detail::fail;

// ---- cuBLASLt, by dlopen --------------------------------------------------------------------------
struct Lt {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  std::string error;  // why it could not be loaded
};

const Lt& lt(const char* op) {
  static const Lt* loaded = [] {
    auto* l = new Lt();
    const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef TG_CUDA_LIB_DIR
    if (h == nullptr) h = ::dlopen((std::string(TG_CUDA_LIB_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);  // the build's toolkit
#endif
    if (h == nullptr) {
      const char* e = ::dlerror();
      l->error = fmt::format("cannot load {} (CUDA {}'s cuBLASLt, which products on the GPU use): {}; install the "
                             "toolkit's cuBLAS or put its folder on LD_LIBRARY_PATH", name, CUBLAS_VER_MAJOR,
                             e != nullptr ? e : "not found");
      return l;
    }
    auto sym = [&](auto& fn, const char* s) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, s));
      if (fn == nullptr && l->error.empty()) l->error = fmt::format("{} has no {}", name, s);
    };
    sym(l->create, "cublasLtCreate");
    sym(l->status_string, "cublasLtGetStatusString");
    sym(l->desc_create, "cublasLtMatmulDescCreate");
    sym(l->desc_set, "cublasLtMatmulDescSetAttribute");
    sym(l->layout_create, "cublasLtMatrixLayoutCreate");
    sym(l->layout_set, "cublasLtMatrixLayoutSetAttribute");
    sym(l->pref_create, "cublasLtMatmulPreferenceCreate");
    sym(l->pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(l->pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(l->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(l->matmul, "cublasLtMatmul");
    return l;
  }();
  if (!loaded->error.empty()) fail(op, "{}", loaded->error);
  return *loaded;
}

void check(const Lt& l, cublasStatus_t s, const char* op, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) [[likely]] return;
  fail(op, "cuBLASLt {} failed: {}", what, l.status_string != nullptr ? l.status_string(s) : "unknown status");
}

// ---- Per device: the handle and the workspace -----------------------------------------------------
constexpr size_t kWorkspace = size_t{32} << 20;
struct DeviceLt {
  std::once_flag once;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};
DeviceLt& device_lt(int device, const char* op) {
  static auto* all = new std::array<DeviceLt, 64>();  // never destroyed: used until the process ends
  TG_CHECK(device >= 0 && device < 64, op, "cuda:{} is not a device index", device);
  DeviceLt& d = (*all)[static_cast<size_t>(device)];
  std::call_once(d.once, [&] {
    const Lt& l = lt(op);
    cuda_rt::use_device(device, op);
    check(l, l.create(&d.handle), op, "create");
    d.workspace = cuda_rt::malloc(device, kWorkspace, op);
    if (d.workspace == nullptr) fail(op, "cuda:{}: out of memory for cuBLASLt's 32 MiB workspace", device);
  });
  if (d.handle == nullptr) fail(op, "cuda:{}: cuBLASLt could not be set up (an earlier call failed)", device);
  return d;
}

// ---- Per shape: descriptors and the chosen algorithm -----------------------------------------------
using Key = std::tuple<int, int, int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool,
                       uintptr_t, int>;  // device, types, tf32, M, N, K, batch, strides, transposes, alignment, epilogue
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

cudaDataType_t data_type(Scalar t) {
  switch (t) {
    case Scalar::kF64: return CUDA_R_64F;
    case Scalar::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasLtMatrixLayout_t layout(const Lt& l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride, const char* op) {
  cublasLtMatrixLayout_t m = nullptr;
  check(l, l.layout_create(&m, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), op, "layout");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    check(l, l.layout_set(m, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), op, "batch count");
    check(l, l.layout_set(m, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride), op, "batch stride");
  }
  return m;
}

const Plan& plan_for(const GemmArgs& g, DeviceLt& d, const Lt& l) {
  static std::mutex mu;
  static auto* plans = new std::map<Key, std::unique_ptr<Plan>>();  // never destroyed (device handles outlive it)
  // Alignment changes which algorithms apply: cuBLASLt assumes 256-byte operands unless told (as
  // PyTorch tells it), so each operand's alignment — its pointer's, and its batch stride's — up to
  // 256 bytes is given to the search and kept in the key.
  auto alignment = [&g](const void* ptr, int64_t stride, Scalar t) {
    const size_t elem = t == Scalar::kF64 ? 8 : t == Scalar::kBF16 ? 2 : 4;
    uintptr_t v = reinterpret_cast<uintptr_t>(ptr) | 256;
    if (g.batch > 1) v |= static_cast<uintptr_t>(stride) * elem;
    return static_cast<uint32_t>(v & (~v + 1));  // the lowest set bit
  };
  const uint32_t align_a = alignment(g.A, g.stride_a, g.in_type), align_b = alignment(g.B, g.stride_b, g.in_type),
                 align_c = alignment(g.C, g.stride_c, g.out_type);
  const uintptr_t align = align_a | static_cast<uintptr_t>(align_b) << 12 | static_cast<uintptr_t>(align_c) << 24;
  const int epilogue = g.bias == nullptr ? (g.relu ? 3 : 0) : g.relu ? 2 : 1;
  const Key key{g.device, static_cast<int>(g.in_type), static_cast<int>(g.out_type), g.tf32, g.M, g.N, g.K, g.batch,
                g.stride_a, g.stride_b, g.stride_c, g.trans_a, g.trans_b, align, epilogue};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans->find(key);
  if (it != plans->end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const GemmMapping m = gemm_mapping(g.M, g.N, g.K, g.trans_a, g.trans_b);
  const cublasComputeType_t compute = g.in_type == Scalar::kF64 ? CUBLAS_COMPUTE_64F
                                      : (g.in_type == Scalar::kF32 && g.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                               : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = g.in_type == Scalar::kF64 ? CUDA_R_64F : CUDA_R_32F;
  check(l, l.desc_create(&p->desc, compute, scale), g.op, "descriptor");
  const cublasOperation_t ta = m.first.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = m.second.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), g.op, "transpose");
  check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), g.op, "transpose");
  const cudaDataType_t in = data_type(g.in_type), out = data_type(g.out_type);
  if (epilogue == 3) {  // ReLU alone
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_RELU;
    check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e), g.op, "epilogue");
  } else if (epilogue != 0) {  // the bias runs along cuBLAS's rows (our columns); its pointer is set per call
    const cublasLtEpilogue_t e = epilogue == 2 ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e), g.op, "epilogue");
    check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out, sizeof out), g.op, "bias type");
    check(l, l.desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias), g.op, "bias");
  }
  p->a = layout(l, in, m.first.rows, m.first.cols, m.first.ld, g.batch, g.stride_b, g.op);    // cuBLAS's A: our B
  p->b = layout(l, in, m.second.rows, m.second.cols, m.second.ld, g.batch, g.stride_a, g.op);  // cuBLAS's B: our A
  p->c = layout(l, out, m.m, m.n, m.ldc, g.batch, g.stride_c, g.op);
  cublasLtMatmulPreference_t pref = nullptr;
  check(l, l.pref_create(&pref), g.op, "preference");
  const uint64_t ws = kWorkspace;
  // Not in place: a fixed order of sums. Partial sums kept in a bfloat16 output's type would round
  // before the last add, so a bfloat16 output takes only float32 ones.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           (g.out_type == Scalar::kBF16 ? 0u : static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE));
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), g.op, "workspace");
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes), g.op, "schemes");
  // (cuBLAS's A is our B, its B our A; C and D are our output)
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b, sizeof align_b), g.op, "alignment");
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a, sizeof align_a), g.op, "alignment");
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c), g.op, "alignment");
  check(l, l.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c), g.op, "alignment");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s = l.heuristic(d.handle, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  l.pref_destroy(pref);
  check(l, s, g.op, "algorithm search");
  if (found == 0) {
    fail(g.op, "cuBLASLt has no algorithm for a product of [{}, {}] x [{}, {}] in {}", g.M, g.K, g.K, g.N,
         g.in_type == Scalar::kF64 ? "float64" : g.in_type == Scalar::kBF16 ? "bfloat16" : "float32");
  }
  p->algo = result.algo;
  return *plans->emplace(key, std::move(p)).first->second;
}

}  // namespace

void gemm(const GemmArgs& g) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const Lt& l = lt(g.op);
  DeviceLt& d = device_lt(g.device, g.op);
  TG_CHECK((g.bias == nullptr && !g.relu) || (g.batch == 1 && !g.accumulate), g.op,
           "a bias or ReLU epilogue takes one product, not added into C");
  if (g.K == 0) {  // an empty sum: zeros, or C unchanged (cuBLAS is not asked about k = 0)
    if (g.accumulate) return;
    const size_t elem = g.out_type == Scalar::kF64 ? 8 : g.out_type == Scalar::kBF16 ? 2 : 4;
    cuda_rt::fill_bytes(g.device, g.C, static_cast<size_t>(g.M * g.N * g.batch) * elem, 0, g.op);
    return;
  }
  const Plan& p = plan_for(g, d, l);
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = g.in_type == Scalar::kF64;
  cudaStream_t s = static_cast<cudaStream_t>(cuda_rt::stream(g.device));
  // A plan with an epilogue is shared by every call of its shape: its bias pointer is set and used
  // under one lock (the call only queues the work).
  static std::mutex epilogue_mu;
  std::unique_lock<std::mutex> bias_lock(epilogue_mu, std::defer_lock);
  if (g.bias != nullptr) {
    bias_lock.lock();
    check(l, l.desc_set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias), g.op, "bias");
  }
  check(l, l.matmul(d.handle, p.desc, f64 ? static_cast<const void*>(&one64) : &one32, g.B, p.a, g.A, p.b,
                    f64 ? static_cast<const void*>(g.accumulate ? &one64 : &zero64) : (g.accumulate ? &one32 : &zero32),
                    g.C, p.c, g.C, p.c, &p.algo, d.workspace, kWorkspace, s),
        g.op, "matmul");
  cuda_rt::count_launch();
  cuda_rt::after_launch(g.device, g.op);
}

}  // namespace tg::cuda_ops
