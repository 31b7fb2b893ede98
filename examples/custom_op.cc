// A custom op defined in user code: softplus(x) = log(1 + exp(x)), with a hand-written forward
// loop and a backward attached through tg::record, then checked with tg::gradcheck. Built with
// CUDA, the forward has a GPU path too (examples/custom_op.cu), run where there is a GPU.
#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include <tapegrad/tapegrad.h>

using tg::Tensor;

#ifdef TG_EXAMPLE_CUDA
// examples/custom_op.cu: the same forward as a CUDA kernel, launched on tapegrad's stream.
void softplus_cuda(const float* x, float* y, int64_t n, void* stream);
void softplus_cuda(const double* x, double* y, int64_t n, void* stream);
#endif

// Forward: any code that fills the output. Backward: d softplus / dx = sigmoid(x), written with
// tg ops so that it can itself be differentiated (grad of grad), on either device.
Tensor softplus(const Tensor& x) {
  TG_CHECK(x.dtype() == tg::kFloat64 || x.dtype() == tg::kFloat32, "softplus", "expected a float tensor, got {}",
           x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  tg::dispatch_float(x.dtype(), "softplus", [&](auto tag) {
    using T = decltype(tag);
    if (x.is_cuda()) {  // the device pointers, and the stream tapegrad's own ops run on
#ifdef TG_EXAMPLE_CUDA
      softplus_cuda(x.cuda_data<T>(), y.cuda_data<T>(), x.numel(), tg::cuda::stream(x.device().index));
      tg::cuda::check_launch("softplus", x.device().index);
      return;
#else
      TG_CHECK(false, "softplus", "this example was built without its CUDA kernel");
#endif
    }
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)  // stable: max(x, 0) + log1p(exp(-|x|))
      out[i] = std::max(in[i], T(0)) + std::log1p(std::exp(-std::fabs(in[i])));
  });
  return tg::record("softplus", y, {x}, [x](const Tensor& g, const tg::Node&) {
    return tg::Grads{g * tg::sigmoid(x)};
  });
}

int main(int argc, char** argv) {
  uint64_t seed = 1;
  tg::cli::Flags flags("custom_op", "a user-defined op (softplus) with its own backward, gradchecked");
  flags.add("seed", &seed, "random seed for the input");
  if (tg::Status s = flags.parse(argc, argv); !s.ok()) tg::cli::fail(s.message());
  tg::manual_seed(seed);
  Tensor x = tg::randn({2, 3}, tg::kFloat64).requires_grad_();
  Tensor y = softplus(x);
  fmt::print("x = {}\nsoftplus(x) = {}\n", x, y);

  tg::sum(y).backward();
  fmt::print("d sum(softplus(x)) / dx = {}\n", x.grad());

  auto fn = [](const std::vector<Tensor>& in) { return softplus(in[0]); };
  tg::GradcheckResult first = tg::gradcheck(fn, {x});
  tg::GradcheckResult second = tg::gradgradcheck(fn, {x});
  fmt::print("gradcheck: {} (max error {:.2e}); gradgradcheck: {} (max error {:.2e})\n", first.ok ? "passed" : "FAILED",
             first.max_abs_error, second.ok ? "passed" : "FAILED", second.max_abs_error);
  if (!first.ok) fmt::print("{}", first.report);
  if (!second.ok) fmt::print("{}", second.report);
  bool same = true;
  if (tg::cuda::available()) {  // the GPU path against the CPU loop
    const Tensor on_gpu = softplus(x.detach().to(tg::Device::cuda())).to(tg::kCPU);
    const double diff = tg::amax(tg::abs(tg::sub(on_gpu, y.detach()))).item();
    same = diff < 1e-12;
    fmt::print("on {}: the CUDA kernel {} the CPU loop (max difference {:.1e})\n", tg::Device::cuda(),
               same ? "matches" : "DIFFERS FROM", diff);
  } else {
    fmt::print("no GPU here ({}); the GPU path is not run\n", tg::cuda::unavailable_reason());
  }
  return first.ok && second.ok && same ? 0 : 1;
}
