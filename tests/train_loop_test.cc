// The train/ loop: bit-identical resume onto freshly built objects, the divergence stop, run
// folders that are never silently overwritten, accumulation that keeps means right, early
// stopping, keep-last-K, the gradient-ready hook.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "test_util.h"
#include "train/metrics.h"

namespace tgt {
namespace {

namespace fs = std::filesystem;
using tg::train::StepOutput;
using tg::train::Trainer;
using tg::train::TrainerOptions;

std::string loop_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tg_loop_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

// A user's own model (not one of the zoo's): an MLP classifier with dropout.
struct Classifier : tg::Module {
  std::shared_ptr<tg::Linear> fc1 = register_module("fc1", std::make_shared<tg::Linear>(6, 16));
  std::shared_ptr<tg::Dropout> drop = register_module("drop", std::make_shared<tg::Dropout>(0.2));
  std::shared_ptr<tg::Linear> fc2 = register_module("fc2", std::make_shared<tg::Linear>(16, 3));
  Tensor forward(const Tensor& x) const { return fc2->forward(drop->forward(tg::relu(fc1->forward(x)))); }
};

// 37 samples (an uneven last batch) of 6 features, 3 classes; the same for every seed.
struct Data {
  std::vector<float> x;
  std::vector<int64_t> y;
  Data() {
    tg::Generator g(99);
    for (int i = 0; i < 37; ++i) {
      int64_t c = static_cast<int64_t>(g.next_u64() % 3);
      y.push_back(c);
      for (int j = 0; j < 6; ++j) x.push_back(static_cast<float>(g.normal() + (j % 3 == c ? 1.5 : 0.0)));
    }
  }
  Tensor features(const std::vector<int64_t>& ids) const {
    std::vector<float> v;
    for (int64_t i : ids) v.insert(v.end(), x.begin() + i * 6, x.begin() + i * 6 + 6);
    return tg::from_vector(v, {static_cast<int64_t>(ids.size()), 6});
  }
  Tensor labels(const std::vector<int64_t>& ids) const {
    std::vector<int64_t> v;
    for (int64_t i : ids) v.push_back(y[static_cast<size_t>(i)]);
    return tg::from_vector(v, {static_cast<int64_t>(ids.size())});
  }
};

// Everything a run builds: model, optimizer, trainer (seeded: a resumed run must override it all).
struct TrainingRun {
  std::unique_ptr<Classifier> model;
  std::unique_ptr<tg::AdamW> opt;
  std::unique_ptr<Trainer> trainer;
  std::vector<double> losses;
  TrainingRun(uint64_t seed, TrainerOptions o) {
    tg::manual_seed(seed);
    model = std::make_unique<Classifier>();
    opt = std::make_unique<tg::AdamW>(model->named_parameters(), tg::AdamOptions{.lr = 3e-3, .weight_decay = 0.01});
    o.seed = seed;
    o.show_progress = false;
    trainer = std::make_unique<Trainer>(*model, *opt, o);
    trainer->set_schedule([](int64_t s) { return 3e-3 * std::min(1.0, static_cast<double>(s) / 4); });
    trainer->callbacks.on_step = [this](const tg::train::StepInfo& i) { losses.push_back(i.loss); };
  }
  tg::train::FitResult fit(const Data& d) {
    tg::train::CrossEntropyStep step{[&](const std::vector<int64_t>& ids) { return model->forward(d.features(ids)); },
                                     [&](const std::vector<int64_t>& ids) { return d.labels(ids); }};
    auto eval = [&] {
      return std::map<std::string, double>{{"valid_loss", trainer->evaluate_loss(tg::train::sequential_batches(37, 8), step)}};
    };
    return trainer->fit(tg::train::ShuffledSampler(37, 4), step, eval);
  }
};

std::string slurp(const std::string& path) { return tg::read_file(path).value(); }

// The losses of a run stopped part way (a) followed by those of its resumption (b).
std::vector<double> losses_of(const TrainingRun& a, const TrainingRun& b) {
  std::vector<double> all = a.losses;
  all.insert(all.end(), b.losses.begin(), b.losses.end());
  return all;
}

TEST(TrainLoop, ResumeIsBitIdenticalOntoFreshObjects) {
  const Data data;
  TrainerOptions o{.max_steps = 12, .accumulate = 2, .clip_grad_norm = 1.0, .eval_every = 3, .eval_at_end = false};
  // Straight through: 12 steps (an epoch is 10 batches = 5 steps, so three epochs begin).
  o.run_dir = loop_dir("straight");
  TrainingRun straight(1, o);
  straight.fit(data);
  ASSERT_EQ(straight.losses.size(), 12u);

  // Interrupted at step 7 (mid-epoch), then resumed by objects built from another seed.
  o.run_dir = loop_dir("interrupted");
  TrainerOptions first = o;
  first.max_steps = 7;
  TrainingRun a(1, first);
  tg::train::FitResult r = a.fit(data);
  EXPECT_EQ(r.reason, tg::train::StopReason::kMaxSteps);
  EXPECT_EQ(r.step, 7);
  ASSERT_TRUE(fs::exists(o.run_dir + "/checkpoint-00000007.safetensors"));
  // Lines written after the checkpoint (a crash between saves) must not survive the resume.
  { std::FILE* f = std::fopen((o.run_dir + "/metrics.jsonl").c_str(), "a"); std::fputs("{\"kind\": \"train\", \"step\": 8}\n", f); std::fclose(f); }
  tg::manual_seed(4242);  // disturb the global generator too
  TrainingRun b(7, o);
  ASSERT_TRUE(b.trainer->resume().ok());
  EXPECT_EQ(b.trainer->state().step, 7);
  EXPECT_EQ(b.trainer->state().sampler_seed, 1u);
  b.fit(data);
  const std::vector<double> joined = losses_of(a, b);
  ASSERT_EQ(joined.size(), straight.losses.size());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], straight.losses[i]) << "step " << i + 1;
  auto p1 = straight.model->named_parameters(), p2 = b.model->named_parameters();
  for (size_t i = 0; i < p1.size(); ++i)
    EXPECT_EQ(p1[i].second.to_vector<float>(), p2[i].second.to_vector<float>()) << p1[i].first;
  // The metrics history is unbroken: the same lines as the straight run, in the file and in memory.
  EXPECT_EQ(slurp(o.run_dir + "/metrics.jsonl"), slurp(straight.trainer->options().run_dir + "/metrics.jsonl"));
  EXPECT_EQ(b.trainer->history(), straight.trainer->history());
}

TEST(TrainLoop, NonFiniteLossStopsBeforeTheOptimizerStep) {
  const Data data;
  const std::string dir = loop_dir("nan");
  tg::manual_seed(3);
  Classifier model;
  tg::AdamW opt(model.named_parameters());
  Trainer trainer(model, opt, {.run_dir = dir, .max_steps = 20, .checkpoint_every = 2, .show_progress = false});
  std::map<int64_t, std::vector<std::vector<float>>> params_after;
  std::map<std::string, std::string> saved_bytes;
  trainer.callbacks.on_step = [&](const tg::train::StepInfo& i) {
    for (const auto& [n, p] : model.named_parameters()) params_after[i.step].push_back(p.to_vector<float>());
  };
  trainer.callbacks.on_checkpoint = [&](const std::string& path) { saved_bytes[path] = slurp(path); };
  const int64_t bad_step = 7;  // the step whose loss is NaN
  auto step = [&](const std::vector<int64_t>& ids) {
    Tensor loss = tg::cross_entropy(model.forward(data.features(ids)), data.labels(ids), {.reduction = tg::Reduction::kSum});
    if (trainer.state().step + 1 == bad_step) loss = loss * std::nan("");
    return StepOutput{loss, static_cast<double>(ids.size())};
  };
  tg::train::FitResult r = trainer.fit(tg::train::ShuffledSampler(37, 4), step);
  ASSERT_TRUE(r.diverged());
  EXPECT_EQ(r.step, bad_step - 1);
  EXPECT_NE(r.message.find("diverged at step 7"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("loss nan"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("checkpoint-00000006.safetensors"), std::string::npos) << r.message;
  // The parameters are those of step 6; no checkpoint of the bad state; the last one untouched.
  std::vector<std::vector<float>> now;
  for (const auto& [n, p] : model.named_parameters()) now.push_back(p.to_vector<float>());
  EXPECT_EQ(now, params_after.at(bad_step - 1));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint-00000007.safetensors"));
  for (const auto& [path, bytes] : saved_bytes)
    if (fs::exists(path)) {
      EXPECT_EQ(slurp(path), bytes) << path;
    }
  EXPECT_EQ(r.last_checkpoint, dir + "/checkpoint-00000006.safetensors");
}

// Ctrl-C during a step (raised by the step itself, so no timing is involved): the step finishes, a
// checkpoint is written, fit() returns kInterrupted with exit code 130; the resumed run continues
// the same losses as a run that was never interrupted.
TEST(TrainLoop, InterruptFinishesTheStepAndSaves) {
  const Data data;
  TrainerOptions o{.max_steps = 8, .eval_every = 100, .eval_at_end = false};
  o.run_dir = loop_dir("straight_for_interrupt");
  TrainingRun straight(1, o);
  straight.fit(data);
  o.run_dir = loop_dir("interrupted_by_signal");
  TrainingRun a(1, o);
  a.trainer->callbacks.on_step = [&](const tg::train::StepInfo& i) {
    a.losses.push_back(i.loss);
    if (i.step == 3) std::raise(SIGINT);  // arrives while the loop is busy; the guard turns it into a flag
  };
  tg::train::FitResult r = a.fit(data);
  EXPECT_EQ(r.reason, tg::train::StopReason::kInterrupted);
  EXPECT_EQ(r.signal, SIGINT);
  EXPECT_EQ(r.exit_code(), 130);
  EXPECT_EQ(r.step, 3);
  EXPECT_EQ(r.last_checkpoint, o.run_dir + "/checkpoint-00000003.safetensors");
  EXPECT_TRUE(fs::exists(r.last_checkpoint));
  EXPECT_EQ(tg::train::interrupt_signal(), 0) << "the flag belongs to the guard fit() installed";
  TrainingRun b(1, o);
  ASSERT_TRUE(b.trainer->resume().ok());
  b.fit(data);
  const std::vector<double> joined = losses_of(a, b);
  EXPECT_EQ(joined, straight.losses);
}

// A second Ctrl-C exits at once with 130, leaving the last complete checkpoint.
TEST(TrainLoopDeathTest, SecondInterruptExitsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Data data;
  TrainerOptions o{.max_steps = 8, .eval_every = 100, .eval_at_end = false};
  o.run_dir = loop_dir("interrupted_twice");
  EXPECT_EXIT(
      {
        TrainingRun a(1, o);
        a.trainer->callbacks.on_step = [&](const tg::train::StepInfo& i) {
          if (i.step == 2) {
            std::raise(SIGINT);
            std::raise(SIGINT);
          }
        };
        a.fit(data);
      },
      testing::ExitedWithCode(130), "second SIGINT: stopping now");
}

TEST(TrainLoop, RunFolderIsNeverSilentlyOverwritten) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("refuse"), .max_steps = 2, .eval_at_end = false};
  { TrainingRun a(1, o); a.fit(data); }
  TrainingRun b(1, o);
  tg::Status s = b.trainer->start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds an earlier run"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--overwrite"), std::string::npos) << s.message();
  EXPECT_THROW(b.fit(data), tg::Error);  // fit() starts a fresh run, which is refused too
  TrainingRun c(1, o);
  ASSERT_TRUE(c.trainer->start(/*overwrite=*/true).ok());
  c.fit(data);
  EXPECT_EQ(c.trainer->state().step, 2);
}

TEST(TrainLoop, ResumeRefusesAnotherConfigurationOrTokenizer) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("config"), .max_steps = 2, .config_hash = "aaaa", .tokenizer_fingerprint = "t1"};
  { TrainingRun a(1, o); a.fit(data); }
  TrainerOptions other = o;
  other.config_hash = "bbbb";
  TrainingRun b(1, other);
  tg::Status s = b.trainer->resume();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("configured differently"), std::string::npos) << s.message();
  other = o;
  other.tokenizer_fingerprint = "t2";
  TrainingRun c(1, other);
  s = c.trainer->resume();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("another tokenizer"), std::string::npos) << s.message();
  TrainingRun d(1, o);
  EXPECT_TRUE(d.trainer->resume().ok());
}

TEST(TrainLoop, AccumulationKeepsTheMeanGradient) {
  // Two micro-batches of 4 and 2 samples give the same update as one batch of 6 (SGD, no dropout).
  const Data data;
  auto one_step = [&](std::vector<std::vector<int64_t>> batches, int64_t accumulate) {
    tg::manual_seed(11);
    Classifier model;
    model.drop->p = 0;
    tg::SGD opt(model.named_parameters(), {.lr = 0.5});
    Trainer t(model, opt, {.max_steps = 1, .accumulate = accumulate, .show_progress = false});
    tg::train::CrossEntropyStep step{[&](const std::vector<int64_t>& ids) { return model.forward(data.features(ids)); },
                                     [&](const std::vector<int64_t>& ids) { return data.labels(ids); }};
    t.fit(tg::train::BatchListSampler(std::move(batches), /*shuffle=*/false), step);
    return model.fc1->weight.to_vector<float>();
  };
  std::vector<float> split = one_step({{0, 1, 2, 3}, {4, 5}}, 2);
  std::vector<float> whole = one_step({{0, 1, 2, 3, 4, 5}}, 1);
  ASSERT_EQ(split.size(), whole.size());
  for (size_t i = 0; i < split.size(); ++i) EXPECT_NEAR(split[i], whole[i], 1e-6) << i;
  std::vector<float> wrong = one_step({{0, 1, 2, 3}, {4, 5}}, 1);  // two separate steps differ
  bool differs = false;
  for (size_t i = 0; i < wrong.size(); ++i) differs |= std::fabs(wrong[i] - whole[i]) > 1e-4;
  EXPECT_TRUE(differs);
}

TEST(TrainLoop, EarlyStoppingKeepLastAndBestModel) {
  const Data data;
  const std::string dir = loop_dir("early");
  tg::manual_seed(5);
  Classifier model;
  tg::AdamW opt(model.named_parameters());
  Trainer trainer(model, opt, {.run_dir = dir, .max_steps = 100, .eval_every = 1, .keep_last = 2, .save_best = true,
                               .early_stop = {.metric = "score", .maximize = true, .patience = 3}, .show_progress = false});
  // A score that peaks at step 4 and then falls: training stops after 3 evaluations without improvement.
  auto eval = [&] {
    const double s = static_cast<double>(trainer.state().step);
    return std::map<std::string, double>{{"score", -(s - 4) * (s - 4)}};
  };
  tg::train::CrossEntropyStep step{[&](const std::vector<int64_t>& ids) { return model.forward(data.features(ids)); },
                                   [&](const std::vector<int64_t>& ids) { return data.labels(ids); }};
  tg::train::FitResult r = trainer.fit(tg::train::ShuffledSampler(37, 4), step, eval);
  EXPECT_EQ(r.reason, tg::train::StopReason::kEarlyStopping);
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(trainer.state().best_step, 4);
  EXPECT_TRUE(fs::exists(dir + "/best.safetensors"));
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(dir)) checkpoints += e.path().filename().string().rfind("checkpoint-", 0) == 0;
  EXPECT_EQ(checkpoints, 2);
  EXPECT_TRUE(fs::exists(dir + "/checkpoint-00000007.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint-00000006.safetensors"));
  // A metric the evaluation does not return is an error naming it.
  Trainer bad(model, opt, {.max_steps = 3, .eval_every = 1, .early_stop = {.metric = "bleu"}, .show_progress = false});
  EXPECT_THROW(bad.fit(tg::train::ShuffledSampler(37, 4), step, eval), tg::Error);
}

TEST(TrainLoop, GradReadyHookSeesEachCompleteGradientOnce) {
  // Accumulation 2: the hook runs on the last micro-batch only, once per parameter, with the
  // gradient summed over both micro-batches (before the loop divides it by the count).
  const Data data;
  tg::manual_seed(8);
  Classifier model;
  model.drop->p = 0;
  tg::SGD opt(model.named_parameters(), {.lr = 0.1});
  Trainer trainer(model, opt, {.max_steps = 2, .accumulate = 2, .show_progress = false});
  std::map<std::string, int> calls;
  std::vector<float> seen;
  trainer.callbacks.on_grad_ready = [&](const std::string& name, const Tensor& p) {
    ++calls[name];
    if (name == "fc2.bias" && seen.empty()) seen = p.grad().to_vector<float>();
  };
  tg::train::CrossEntropyStep step{[&](const std::vector<int64_t>& ids) { return model.forward(data.features(ids)); },
                                   [&](const std::vector<int64_t>& ids) { return data.labels(ids); }};
  trainer.fit(tg::train::BatchListSampler({{0, 1}, {2, 3, 4}, {5}, {6}}, false), step);
  EXPECT_EQ(calls.size(), 4u);
  for (const auto& [n, c] : calls) EXPECT_EQ(c, 2) << n;
  // fc2.bias's gradient of the summed loss over samples 0..4 is sum(softmax - onehot): its entries add to 0.
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NEAR(seen[0] + seen[1] + seen[2], 0.0, 1e-5);
  EXPECT_GT(std::fabs(seen[0]) + std::fabs(seen[1]) + std::fabs(seen[2]), 0.1);
}

TEST(TrainLoop, BFloat16RunsResumeBitIdenticallyAndRecordTheirPrecision) {
  const Data data;
  TrainerOptions o{.max_steps = 10, .eval_every = 3, .eval_at_end = false, .precision = tg::kBFloat16};
  o.run_dir = loop_dir("bf16_straight");
  TrainingRun straight(1, o);
  straight.fit(data);
  TrainerOptions f32 = o;
  f32.precision = tg::kFloat32;
  f32.run_dir = loop_dir("f32_straight");
  TrainingRun plain(1, f32);
  plain.fit(data);
  EXPECT_NE(straight.losses, plain.losses) << "bfloat16 products give other losses than float32";
  for (size_t i = 0; i < plain.losses.size(); ++i) EXPECT_NEAR(straight.losses[i], plain.losses[i], 0.02) << i;

  o.run_dir = loop_dir("bf16_resumed");
  TrainerOptions first = o;
  first.max_steps = 6;
  TrainingRun a(1, first);
  a.fit(data);
  const tg::train::TrainState saved = tg::train::peek_train_state(o.run_dir + "/checkpoint-00000006.safetensors").value();
  EXPECT_EQ(saved.precision, "bfloat16");
  EXPECT_EQ(saved.cpu_path, tg::cpu_capability_name(tg::cpu_capability()));
  TrainingRun b(5, o);
  ASSERT_TRUE(b.trainer->resume().ok());
  b.fit(data);
  const std::vector<double> joined = losses_of(a, b);
  EXPECT_EQ(joined, straight.losses);
  // Resuming the same checkpoint in float32 is allowed, and said.
  TrainerOptions other = o;
  other.precision = tg::kFloat32;
  other.run_dir = loop_dir("bf16_then_f32");
  fs::create_directories(other.run_dir);
  fs::copy(o.run_dir + "/checkpoint-00000006.safetensors", other.run_dir);
  tg::write_file_atomic(other.run_dir + "/metrics.jsonl",
                        slurp(o.run_dir + "/metrics.jsonl").substr(0, static_cast<size_t>(saved.metrics_bytes))).or_throw();
  TrainingRun c(1, other);
  testing::internal::CaptureStderr();
  tg::Status s = c.trainer->resume();
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(said.find("was computed in bfloat16 on the"), std::string::npos) << said;
  EXPECT_NE(said.find("continues in float32"), std::string::npos) << said;
}

// ---- Run folders that cannot be turned against their owner: what a checkpoint says is checked ----

// Rewrites a checkpoint with some metadata entries replaced (as someone sharing it could).
void edit_checkpoint(const std::string& path, const std::map<std::string, std::string>& changes) {
  tg::SafetensorsFile f = tg::load_safetensors(path).value();
  for (const auto& [k, v] : changes) f.metadata[k] = v;
  tg::save_safetensors(path, f.tensors, f.metadata).or_throw();
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RunFolder, KeepLastDeletesOnlyTheFoldersOwnOlderCheckpoints) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("keep"), .max_steps = 3, .eval_at_end = false, .checkpoint_every = 1, .keep_last = 2};
  { TrainingRun a(1, o); a.fit(data); }
  // A victim outside the folder, the run's own files, and names close to the pattern.
  const std::string victim = o.run_dir + "_victim.txt";
  for (const std::string& f : {victim, o.run_dir + "/tokenizer.txt", o.run_dir + "/checkpoint-1.safetensors",
                               o.run_dir + "/checkpoint-00000001.safetensors.bak", o.run_dir + "/checkpoint-0000000x.safetensors"})
    tg::write_file_atomic(f, "keep me").or_throw();
  const std::string victim_rel = "../" + fs::path(victim).filename().string();
  edit_checkpoint(o.run_dir + "/checkpoint-00000003.safetensors",
                  {{"kept", victim_rel + "\ntokenizer.txt\nmetrics.jsonl\ncheckpoint-1.safetensors\n" + victim}});
  o.max_steps = 6;
  TrainingRun b(1, o);
  ASSERT_TRUE(b.trainer->resume().ok());
  b.fit(data);
  EXPECT_TRUE(fs::exists(victim));
  EXPECT_EQ(names_in(o.run_dir),
            (std::vector<std::string>{".lock", "checkpoint-00000001.safetensors.bak", "checkpoint-00000003.safetensors",
                                      "checkpoint-00000005.safetensors", "checkpoint-00000006.safetensors",
                                      "checkpoint-0000000x.safetensors", "checkpoint-1.safetensors", "metrics.jsonl",
                                      "tokenizer.txt"}));
  // checkpoint-3 stays (this run resumed from it); the next run, resumed from 6, lets it go.
  o.max_steps = 7;
  TrainingRun c(1, o);
  ASSERT_TRUE(c.trainer->resume().ok());
  c.fit(data);
  EXPECT_FALSE(fs::exists(o.run_dir + "/checkpoint-00000003.safetensors"));
  EXPECT_FALSE(fs::exists(o.run_dir + "/checkpoint-00000005.safetensors"));
  EXPECT_TRUE(fs::exists(o.run_dir + "/checkpoint-00000006.safetensors"));
  EXPECT_TRUE(fs::exists(o.run_dir + "/checkpoint-00000007.safetensors"));
  fs::remove(victim);
}

// Each edit is refused with one line naming the file, and nothing in the folder changes.
TEST(RunFolder, ResumeRefusesAPositionOrMetricsCutThatDisagreesWithTheFiles) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("edited"), .max_steps = 6, .eval_every = 2};
  { TrainingRun a(1, o); a.fit(data); }
  const std::string ckpt = o.run_dir + "/checkpoint-00000006.safetensors", metrics = o.run_dir + "/metrics.jsonl";
  const std::string original = slurp(ckpt), log = slurp(metrics);
  const int64_t bytes = tg::train::peek_train_state(ckpt).value().metrics_bytes;
  ASSERT_EQ(bytes, static_cast<int64_t>(log.size()));
  const int64_t earlier_line_end = static_cast<int64_t>(log.rfind('\n', log.size() - 2)) + 1;
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"metrics_bytes", "0"}}, "its first 0 bytes"},
      {{{"metrics_bytes", std::to_string(earlier_line_end)}}, "an edited checkpoint, or the log of another run"},
      {{{"metrics_bytes", std::to_string(bytes - 3)}}, "is not the end of a line"},
      {{{"metrics_bytes", std::to_string(bytes + 10)}}, "fewer than the"},
      {{{"metrics_bytes", "-1"}}, "records no length of metrics.jsonl"},
      {{{"step", "3"}}, "its name says step 6"},
      {{{"step", "100000000"}}, "its name says step 6"},
      {{{"samples", "2"}}, "each step takes at least one sample"},
  };
  for (const auto& [changes, expected] : cases) {
    edit_checkpoint(ckpt, changes);
    TrainingRun b(1, o);
    tg::Status s = b.trainer->resume();
    ASSERT_FALSE(s.ok()) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("checkpoint-00000006"), std::string::npos) << s.message();
    EXPECT_EQ(slurp(metrics), log) << expected;
    tg::write_file_atomic(ckpt, original).or_throw();
  }
  // Renamed to agree with an edited step: the optimizer's own count still tells.
  edit_checkpoint(ckpt, {{"step", "3"}});
  fs::rename(ckpt, o.run_dir + "/checkpoint-00000003.safetensors");
  for (int i : {2, 4}) fs::remove(o.run_dir + fmt::format("/checkpoint-{:08}.safetensors", i));
  TrainingRun c(1, o);
  tg::Status s = c.trainer->resume();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("disagrees with the optimizer's step count 6"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(metrics), log);
}

// Another process's lock on the folder (flock on DIR/.lock, as a second run would hold it).
int hold_lock(const std::string& dir, const std::string& pid) {
  fs::create_directories(dir);
  const int fd = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) return -1;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) return -1;
  return fd;
}

TEST(RunFolder, ASecondRunOnTheSameFolderIsRefusedNamingTheHolder) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("locked"), .max_steps = 2, .eval_at_end = false};
  const int fd = hold_lock(o.run_dir, "4242\n");
  ASSERT_GE(fd, 0);
  TrainingRun a(1, o);
  tg::Status s = a.trainer->start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("in use by another run (process 4242 holds"), std::string::npos) << s.message();
  EXPECT_FALSE(tg::train::check_run_dir(o.run_dir, false, false).ok());
  EXPECT_FALSE(fs::exists(o.run_dir + "/metrics.jsonl")) << "nothing written";
  ::close(fd);  // the holder ends
  TrainingRun b(1, o);
  ASSERT_TRUE(b.trainer->start().ok());
  b.fit(data);
  TrainingRun c(1, o);  // this process holds the folder now: its own runs share the claim
  EXPECT_TRUE(c.trainer->resume().ok());
}

TEST(RunFolder, AKilledHoldersLockNeverBlocksTheNextRun) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("killed"), .max_steps = 2, .eval_at_end = false};
  fs::create_directories(o.run_dir);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another run: takes the lock, says so, waits to be killed (system calls only)
    const std::string me = std::to_string(::getpid()) + "\n";
    const int fd = hold_lock(o.run_dir, me);
    const char ok = fd >= 0 ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  TrainingRun a(1, o);
  tg::Status s = a.trainer->start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("process " + std::to_string(child) + " holds"), std::string::npos) << s.message();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  TrainingRun b(1, o);
  ASSERT_TRUE(b.trainer->start().ok());
  b.fit(data);
  EXPECT_EQ(b.trainer->state().step, 2);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(RunFolder, ALinkLeadingOutOfTheFolderIsRefusedByName) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("link"), .max_steps = 2, .eval_at_end = false};
  { TrainingRun a(1, o); a.fit(data); }
  const std::string outside = o.run_dir + "_outside.jsonl";
  tg::write_file_atomic(outside, "").or_throw();
  fs::rename(o.run_dir + "/metrics.jsonl", o.run_dir + "/metrics.real");
  fs::create_symlink(outside, o.run_dir + "/metrics.jsonl");
  TrainingRun b(1, o);
  tg::Status s = b.trainer->resume();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metrics.jsonl: a symbolic link to"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("outside the run folder"), std::string::npos) << s.message();
  s = tg::train::check_run_dir(o.run_dir, true, false);
  EXPECT_FALSE(s.ok());
  TrainingRun c(1, o);
  EXPECT_FALSE(c.trainer->start(/*overwrite=*/true).ok());
  EXPECT_EQ(slurp(outside), "");
  // A link that stays inside the folder is not followed either where the run writes: metrics.jsonl
  // (appended in place) is refused by name, and a save never writes through a link (it would
  // replace what the link points to: model.safetensors -> tokenizer.json).
  fs::remove(o.run_dir + "/metrics.jsonl");
  fs::create_symlink("metrics.real", o.run_dir + "/metrics.jsonl");
  TrainingRun d(1, o);
  s = d.trainer->resume();
  ASSERT_FALSE(s.ok()) << "a link inside the folder";
  EXPECT_NE(s.message().find("metrics.jsonl: a symbolic link; the log is written in place"), std::string::npos) << s.message();
  tg::write_file_atomic(o.run_dir + "/tokenizer.json", "{}").or_throw();
  fs::create_symlink("tokenizer.json", o.run_dir + "/model.safetensors");
  s = tg::save_module(*d.model, o.run_dir + "/model.safetensors");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.safetensors: a symbolic link; a file is never written through a link"), std::string::npos)
      << s.message();
  EXPECT_EQ(slurp(o.run_dir + "/tokenizer.json"), "{}");
  fs::remove(outside);
}

// Files a run writes in place (the lock, metrics.jsonl) are refused when they have other names:
// the run would change another run's files (cp -al makes such copies).
TEST(RunFolder, InPlaceFilesWithOtherHardLinksAreRefusedByName) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("hardlink"), .max_steps = 2, .eval_at_end = false};
  { TrainingRun a(1, o); a.fit(data); }
  const std::string copy = o.run_dir + "_copy.jsonl";
  fs::remove(copy);
  fs::create_hard_link(o.run_dir + "/metrics.jsonl", copy);
  const std::string before = slurp(copy);
  TrainingRun b(1, o);
  tg::Status s = b.trainer->resume();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metrics.jsonl: has 1 other hard link(s)"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(copy), before);
  fs::remove(copy);
  // The lock: a fresh folder whose .lock is another file's second name.
  const std::string dir = loop_dir("hardlock"), victim = dir + "_victim.txt";
  fs::create_directories(dir);
  tg::write_file_atomic(victim, "precious").or_throw();
  fs::create_hard_link(victim, dir + "/.lock");
  s = tg::train::claim_run_dir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(".lock: has 1 other hard link(s)"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(victim), "precious");
  fs::remove(victim);
}

// A checkpoint whose bytes fail the integrity checks (a flipped byte: its checksum; NaN weights
// written with a valid checksum) is set aside as NAME.corrupt when --resume picks it, saying so,
// and the one before it is used; named on purpose it is refused and left alone.
TEST(RunFolder, ACorruptNewestCheckpointIsSetAsideAndTheOneBeforeItUsed) {
  const Data data;
  TrainerOptions o{.run_dir = loop_dir("corrupt"), .max_steps = 6, .eval_every = 2, .keep_last = 5};
  { TrainingRun a(1, o); a.fit(data); }
  const std::string c4 = o.run_dir + "/checkpoint-00000004.safetensors", c6 = o.run_dir + "/checkpoint-00000006.safetensors";
  const std::string good6 = slurp(c6);
  auto flipped = [](std::string bytes, size_t from_end) {
    bytes[bytes.size() - from_end] ^= 0x10;
    return bytes;
  };
  // A fresh run resumed by --resume's rule: its status, what it said on stderr and the step it is at.
  struct Resumed {
    tg::Status status;
    std::string said;
    int64_t step;
  };
  auto resume_newest = [&o] {
    TrainingRun b(1, o);
    testing::internal::CaptureStderr();
    tg::Status s = b.trainer->resume();
    return Resumed{s, testing::internal::GetCapturedStderr(), b.trainer->state().step};
  };
  // Named on purpose: refused, the file stays as it is.
  tg::write_file_atomic(c6, flipped(good6, 3)).or_throw();
  {
    TrainingRun b(1, o);
    tg::Status s = b.trainer->resume(c6);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("fails its checksum"), std::string::npos) << s.message();
    EXPECT_TRUE(fs::exists(c6));
  }
  // Picked by --resume: set aside, step 4 used, and it is the last good checkpoint.
  {
    TrainingRun b(1, o);
    testing::internal::CaptureStderr();
    tg::Status s = b.trainer->resume();
    const std::string said = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(b.trainer->state().step, 4);
    EXPECT_EQ(b.trainer->last_checkpoint(), c4);
    EXPECT_NE(said.find("checkpoint-00000006.safetensors: tensor '"), std::string::npos) << said;
    EXPECT_NE(said.find("fails its checksum"), std::string::npos) << said;
    EXPECT_NE(said.find("set aside as checkpoint-00000006.safetensors.corrupt"), std::string::npos) << said;
    EXPECT_NE(said.find("resuming from checkpoint-00000004.safetensors"), std::string::npos) << said;
    EXPECT_FALSE(fs::exists(c6));
    EXPECT_EQ(slurp(c6 + ".corrupt"), flipped(good6, 3));
  }
  // NaN weights under a valid checksum: caught by the finiteness check, named.
  fs::remove(c6 + ".corrupt");
  {
    tg::SafetensorsFile f = tg::load_safetensors(c4).value();
    tg::StateDict edited;
    for (const auto& [n, t] : f.tensors) edited.insert(n, n == "model.fc1.weight" ? tg::full(t.shape(), NAN) : t);
    tg::save_safetensors(c6, edited, f.metadata).or_throw();
    const Resumed r = resume_newest();
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.step, 4);
    EXPECT_NE(r.said.find("'model.fc1.weight' holds NaN at flat index 0"), std::string::npos) << r.said;
    EXPECT_TRUE(fs::exists(c6 + ".corrupt"));
  }
  // Every checkpoint corrupt: nothing to resume from, said so.
  for (const auto& name : names_in(o.run_dir))
    if (tg::train::checkpoint_step(name) >= 0)
      tg::write_file_atomic(o.run_dir + "/" + name, flipped(slurp(o.run_dir + "/" + name), 1)).or_throw();
  const Resumed none = resume_newest();
  ASSERT_FALSE(none.status.ok());
  EXPECT_NE(none.status.message().find("every checkpoint is corrupt"), std::string::npos) << none.status.message();
}

// The settings a resumed run cannot change are named, each with both values (whole values are
// compared: two long paths that differ past what a message shows are still different).
TEST(RunFolder, ResumeNamesEachSettingThatDiffers) {
  const Data data;
  const std::string long_path = "/data/" + std::string(300, 'x');
  TrainerOptions o{.run_dir = loop_dir("settings"), .max_steps = 2, .eval_at_end = false,
                   .config = {{"--layers", "1"}, {"--text", long_path + "/a.txt"}}};
  { TrainingRun a(1, o); a.fit(data); }
  auto resume_with = [&](tg::Metadata config) {
    TrainerOptions r = o;
    r.config = std::move(config);
    TrainingRun b(1, r);
    return b.trainer->resume();
  };
  EXPECT_TRUE(resume_with(o.config).ok());
  tg::Status s = resume_with({{"--layers", "2"}, {"--text", long_path + "/a.txt"}, {"--new", "x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("saved by a run configured differently: --layers is 2 here but 1 in the run being resumed; "
                             "--new is x here but (not set) in the run being resumed"),
            std::string::npos)
      << s.message();
  s = resume_with({{"--layers", "1"}, {"--text", long_path + "/b.txt"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--text is /data/xxx"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tgt
