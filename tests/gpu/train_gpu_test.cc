// The training loop on a GPU: the same losses as the CPU's run, no host wait between reports, the
// divergence stop through the device flag (naming the first bad step, parameters from before it),
// and checkpoints that move between devices. Needs a GPU (gpu_test_util.h).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace {

using tg::Device;
using tg::Tensor;
namespace fs = std::filesystem;
const Device kGpu = Device::cuda(0);

struct Mlp : tg::Module {
  std::shared_ptr<tg::Linear> fc1 = register_module("fc1", std::make_shared<tg::Linear>(8, 32));
  std::shared_ptr<tg::Dropout> drop = register_module("drop", std::make_shared<tg::Dropout>(0.1));
  std::shared_ptr<tg::Linear> fc2 = register_module("fc2", std::make_shared<tg::Linear>(32, 4));
  Tensor forward(const Tensor& x) const { return fc2->forward(drop->forward(tg::relu(fc1->forward(x)))); }
};

// 64 samples of 8 features in 4 classes; a sample with id `poison` gives a NaN feature.
struct TrainingRun {
  std::unique_ptr<Mlp> model;
  std::unique_ptr<tg::AdamW> opt;
  std::unique_ptr<tg::train::Trainer> trainer;
  std::vector<double> losses;
  Device device;
  int64_t poison = -1;
  TrainingRun(const Device& dev, tg::train::TrainerOptions o) : device(dev) {
    tg::manual_seed(5);
    model = std::make_unique<Mlp>();
    model->to(dev);
    opt = std::make_unique<tg::AdamW>(model->named_parameters(), tg::AdamOptions{.lr = 1e-2});
    o.show_progress = false;
    o.handle_interrupts = false;
    trainer = std::make_unique<tg::train::Trainer>(*model, *opt, o);
  }
  tg::train::StepOutput step(const std::vector<int64_t>& ids) const {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t i : ids) {
      y.push_back(i % 4);
      for (int j = 0; j < 8; ++j) x.push_back(i == poison ? NAN : static_cast<float>(std::sin(i * 8 + j) + (j % 4 == i % 4)));
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    tg::train::CrossEntropyStep ce{.logits = [&](const auto&) { return model->forward(tg::from_vector(x, {n, 8}).to(device)); },
                                   .targets = [&](const auto&) { return tg::from_vector(y, {n}); }};
    return ce(ids);
  }
  tg::train::FitResult fit() {
    return trainer->fit(tg::train::ShuffledSampler(64, 8), [this](const std::vector<int64_t>& ids) { return step(ids); });
  }
  std::vector<double> weights() const {
    std::vector<double> w;
    for (const Tensor& p : model->parameters())
      for (double v : p.to(tg::kCPU).to_vector<double>()) w.push_back(v);
    return w;
  }
};

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tg_gpu_train_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

TEST(GpuTrain, TheLoopGivesTheCpusLosses) {
  TG_NEED_GPU();
  auto losses = [](const Device& dev) {
    TrainingRun r(dev, {.max_steps = 20});
    r.trainer->callbacks.on_step = [&r](const tg::train::StepInfo& i) { r.losses.push_back(i.loss); };
    EXPECT_EQ(r.fit().reason, tg::train::StopReason::kMaxSteps);
    return r.losses;
  };
  const std::vector<double> cpu = losses(tg::kCPU), gpu = losses(kGpu);
  ASSERT_EQ(cpu.size(), 20u);
  ASSERT_EQ(gpu.size(), 20u);
  for (size_t i = 0; i < cpu.size(); ++i) {
    std::printf("step %zu: loss %.8f on the CPU, %.8f on the GPU\n", i + 1, cpu[i], gpu[i]);
    EXPECT_NEAR(gpu[i], cpu[i], (i == 0 ? 1e-5 : 1e-4) * std::fabs(cpu[i])) << "step " << i + 1;
  }
}

// Between two reports (log_every) a step waits for the GPU nowhere: the waits grow with the
// reports, not with the steps.
TEST(GpuTrain, StepsBetweenReportsNeverWaitForTheGpu) {
  TG_NEED_GPU();
  auto waits = [](int64_t steps) {
    TrainingRun r(kGpu, {.max_steps = steps, .eval_at_end = false, .log_every = 1000});
    const uint64_t before = tg::cuda::host_waits();
    r.fit();
    return tg::cuda::host_waits() - before;
  };
  const uint64_t short_run = waits(5), long_run = waits(40);
  std::printf("host waits: %llu for 5 steps, %llu for 40 steps\n", static_cast<unsigned long long>(short_run),
              static_cast<unsigned long long>(long_run));
  EXPECT_EQ(long_run, short_run);
  EXPECT_LE(long_run, 8u);
}

// A NaN at step 3 raises the device flag; the loop finds it at its next report (step 6), names
// step 3 and leaves the parameters of step 2.
TEST(GpuTrain, TheDivergenceStopNamesTheFirstBadStep) {
  TG_NEED_GPU();
  TrainingRun bad(kGpu, {.max_steps = 20, .log_every = 6});
  std::vector<std::vector<int64_t>> order = tg::train::ShuffledSampler(64, 8).batches(bad.trainer->options().seed, 0);
  bad.poison = order[2][0];  // a sample of step 3's batch
  const tg::train::FitResult r = bad.fit();
  EXPECT_TRUE(r.diverged());
  EXPECT_NE(r.message.find("diverged at step 3"), std::string::npos) << r.message;
  EXPECT_EQ(r.step, 2);
  TrainingRun good(kGpu, {.max_steps = 2});
  good.fit();
  const std::vector<double> a = bad.weights(), b = good.weights();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "parameter value " << i;
}

// A checkpoint written from the GPU resumes on the CPU (and the other way round), continuing the run.
TEST(GpuTrain, CheckpointsMoveBetweenDevices) {
  TG_NEED_GPU();
  for (bool gpu_first : {true, false}) {
    const std::string dir = fresh_dir(gpu_first ? "g2c" : "c2g");
    {
      TrainingRun first(gpu_first ? kGpu : tg::kCPU, {.run_dir = dir, .max_steps = 8});
      first.fit();
    }
    TrainingRun resumed(gpu_first ? tg::kCPU : kGpu, {.run_dir = dir, .max_steps = 16});
    ASSERT_TRUE(resumed.trainer->resume().ok());
    EXPECT_EQ(resumed.trainer->state().step, 8);
    resumed.fit();
    TrainingRun straight(tg::kCPU, {.max_steps = 16});
    straight.fit();
    const std::vector<double> a = resumed.weights(), b = straight.weights();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(b[i]))) << "value " << i;
    fs::remove_all(dir);
  }
}

}  // namespace
