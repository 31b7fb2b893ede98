#pragma once
// The training loop a user's own model plugs into (in the spirit of Keras' fit and Lightning's
// Trainer). The user owns the model and the step function that computes a loss; the loop owns
// epochs, gradient accumulation, clipping, the learning-rate schedule, evaluation, early stopping,
// checkpoints (keep the last K), the divergence stop, metrics.jsonl, the progress bar and resume.
//
//   tg::train::Trainer trainer(model, opt, {.run_dir = "runs/mine", .max_steps = 1000,
//                                           .eval_every = 100, .clip_grad_norm = 1.0});
//   auto step = [&](const std::vector<int64_t>& ids) {          // which samples this batch holds
//     Batch b = make_batch(data, ids);
//     return tg::train::StepOutput{tg::cross_entropy(model.forward(b.x), b.y, {.reduction = tg::Reduction::kSum}),
//                                  static_cast<double>(b.y.numel())};
//   };
//   tg::train::FitResult r = trainer.fit(tg::train::ShuffledSampler(data.size(), 32), step);
//
// One optimizer step, in this order: for each micro-batch, forward (the step function) and
// backward of the summed loss; after the last micro-batch's backward has completed a parameter's
// gradient, callbacks.on_grad_ready (where data-parallel all-reduce sits); the global gradient
// norm; if the loss or the norm is not finite, stop *before* the optimizer step (the parameters
// stay those of the previous step; no checkpoint is written); divide the gradients by the total
// count of the micro-batches (so means stay right however a batch is split) and clip; the
// optimizer step with the schedule's learning rate. Under mpirun (several processes) the same
// loop runs data-parallel with no change to the program: see TrainerOptions::comm.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../distributed/dist.h"
#include "../distributed/grad_sync.h"
#include "../models/module.h"
#include "../optim/optimizer.h"
#include "checkpoint.h"
#include "run_dir.h"  // check_run_dir, claim_run_dir: the run folder
#include "sampler.h"

namespace tg::train {

// What a step function returns for one micro-batch: the loss summed over what the batch covers
// (a one-element tensor that requires grad), and how many tokens or samples that is.
struct StepOutput {
  Tensor loss_sum{};
  double count = 0;
};
// Row i of the batch a step function builds should be samples[i]: the loop keys dropout by sample
// (tg::SampleKeyScope), which keeps masks the same for any number of processes.
using StepFn = std::function<StepOutput(const std::vector<int64_t>& samples)>;
// Evaluation: named metrics ("valid_loss", "bleu", ...). Runs with the model in eval mode, no grad.
// With several processes it runs on every one of them (evaluate_loss inside it splits its batches
// among them) and process 0's numbers are used everywhere.
using EvalFn = std::function<std::map<std::string, double>()>;

struct EarlyStopping {
  std::string metric{};     // a key the eval function returns, e.g. "valid_loss" ("": off)
  bool maximize = false;  // true for BLEU or accuracy
  int64_t patience = 5;   // evaluations without improvement before stopping
  double min_delta = 0;   // a smaller improvement does not count
};

struct TrainerOptions {
  std::string run_dir{};           // checkpoints, metrics.jsonl ("": nothing is written)
  int64_t max_steps = 0;         // stop at this optimizer step (0: no limit)
  int64_t max_epochs = 0;        // stop after this many epochs (0: no limit)
  double max_minutes = 0;        // wall-clock budget, resumed runs included (0: none)
  int64_t accumulate = 1;        // micro-batches per optimizer step (an epoch's end cuts a step short)
  double clip_grad_norm = 0;     // global L2 norm limit on the mean gradient (0: no clipping)
  int64_t eval_every = 0;        // optimizer steps between evaluations (0: none by count)
  bool eval_each_epoch = false;  // also evaluate when an epoch ends
  bool eval_at_end = true;       // and when training stops (unless it just did)
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: only with evaluations and at the end)
  int64_t keep_last = 3;         // checkpoints kept in run_dir; older ones are deleted
  bool save_best = false;        // early_stop.metric's best model to run_dir/best.safetensors
  EarlyStopping early_stop{};
  uint64_t seed = 1;             // the data order (a resumed run takes the saved one)
  int64_t log_every = 0;         // steps between "train" lines in metrics.jsonl; 0: each step on the
                                 // CPU, every 25th on a GPU (a report reads the loss: the host waits)
  bool show_progress = true;     // a progress bar on stderr
  // Ctrl-C / SIGTERM during fit(): finish the step, save a checkpoint, return kInterrupted (a
  // second signal exits at once); see train/interrupt.h. false: the signals keep their usual effect.
  bool handle_interrupts = true;
  std::string unit = "tok";      // what a step function's count counts, for the progress line
  // kBFloat16: the step function and the evaluation run under tg::AutocastGuard (ops/autocast.h):
  // matrix products in bfloat16 with float32 sums; parameters, gradients, the optimizer, the
  // all-reduce and checkpoints stay float32. The precision and the kernel path are recorded in each
  // checkpoint; resuming with another is allowed and reported (the run is then not bit-identical).
  DType precision = kFloat32;
  // The settings a resumed run must share with the run it continues, by the name a user knows
  // them by ("--layers" -> "2", "--text" -> the file's canonical path): recorded in each checkpoint,
  // and a resume that differs is refused naming each setting, both values. config_hash, when left
  // empty, is derived from them.
  Metadata config{};
  std::string config_hash{};       // must match on resume (a hash of the program's configuration)
  std::string tokenizer_fingerprint{};  // must match on resume (see text::Tokenizer::fingerprint)
  // Data parallelism: the processes that train together (nullptr: tg::dist::world(), i.e. every
  // process of an mpirun or srun launch, or this one alone). With several, each takes its share
  // of every batch (dist::shard), gradients are summed across them in buckets during backward and
  // divided by the global count, process 0's state is sent to the others at start and resume,
  // and only process 0 writes files and shows progress. Results do not depend on the number of
  // processes beyond the order of floating-point sums.
  dist::Communicator* comm = nullptr;
  dist::GradSyncOptions grad_sync{};
  int64_t check_replicas_every = 0;  // steps between checks that every process holds the same parameters (0: never)
};

// What the loop reports after each optimizer step.
struct StepInfo {
  int64_t step = 0, epoch = 0;
  double loss = 0;       // mean over the step's tokens or samples
  double grad_norm = 0;  // of the mean gradient, before clipping
  double lr = 0, count = 0, seconds = 0;
};

// With several processes every callback runs on every process (with the same StepInfo and
// metrics) except on_checkpoint, which runs on process 0, the one that writes.
struct Callbacks {
  // Each trainable parameter, once its gradient for the step is complete (the last micro-batch):
  // the gradient of the *summed* loss, before the loop divides it by the count and clips (with
  // several processes: this process's share, before the sum over processes).
  std::function<void(const std::string& name, const Tensor& param)> on_grad_ready{};
  std::function<void(const StepInfo&)> on_step{};  // after each optimizer step
  std::function<void(int64_t step, const std::map<std::string, double>& metrics)> on_eval{};
  std::function<void(TrainState& state)> before_save{};  // add the program's own state.user entries
  std::function<void(const std::string& path)> on_checkpoint{};
  std::function<bool(const StepInfo&)> should_stop{};  // true: stop after this step (with a checkpoint)
};

enum class StopReason { kMaxSteps, kMaxEpochs, kTimeBudget, kEarlyStopping, kStopRequested, kDiverged, kInterrupted };
const char* stop_reason_name(StopReason r);
// The exit code programs use when training stopped on a non-finite loss or gradient.
inline constexpr int kExitDiverged = 3;

struct FitResult {
  StopReason reason = StopReason::kMaxSteps;
  int64_t step = 0;             // optimizer steps taken in all
  std::string message{};          // one line: why it stopped (for kDiverged: step, loss, norm, last checkpoint)
  std::string last_checkpoint{};  // "" when none was written
  int signal = 0;                 // kInterrupted: SIGINT or SIGTERM
  // A limit (max_steps, max_epochs, max_minutes) was already reached when fit began (a resumed,
  // finished run): no step was taken, and process 0 said so on stderr.
  bool nothing_left = false;
  bool diverged() const { return reason == StopReason::kDiverged; }
  bool interrupted() const { return reason == StopReason::kInterrupted; }
  // What a program returns: 0, kExitDiverged (3), or 128 + the signal (130 Ctrl-C, 143 SIGTERM).
  int exit_code() const { return diverged() ? kExitDiverged : interrupted() ? 128 + signal : 0; }
};

class Trainer {
 public:
  Trainer(Module& model, Optimizer& opt, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // lr for step 1, 2, ... (default: the optimizer's own lr, unchanged).
  void set_schedule(std::function<double(int64_t step)> lr_at) { schedule_ = std::move(lr_at); }
  Callbacks callbacks;

  // A fresh run. A run_dir holding an earlier run (checkpoints or metrics.jsonl) is refused unless
  // overwrite, which deletes that run's checkpoints, metrics.jsonl and best.safetensors.
  Status start(bool overwrite = false);
  // Continues from the newest checkpoint in run_dir (or from `path`): parameters, optimizer,
  // random generators, data position, early-stopping state and metrics history; metrics.jsonl
  // is cut back to the checkpoint and appended to.
  Status resume(const std::string& path = "");
  // Trains until a limit, early stopping, a stop request or divergence. Calls start() if neither
  // start() nor resume() was called. File errors throw tg::Error.
  FitResult fit(const Sampler& train, const StepFn& step, const EvalFn& eval = {});

  // The mean loss over batches through a step function, in eval mode without grad. With several
  // processes each takes every size()-th batch and the sums are combined: call it on all of them.
  double evaluate_loss(const std::vector<std::vector<int64_t>>& batches, const StepFn& step);
  // Writes a checkpoint now (with fit's bookkeeping: keep-last-K); returns its path. With several
  // processes: call it on all; process 0 writes, the others wait for it.
  std::string save_checkpoint();
  // Appends a line to metrics.jsonl (and the history) at the current step, e.g. a final BLEU.
  void log(const std::string& kind, const std::vector<std::pair<std::string, double>>& values);

  double seconds() const { return elapsed(); }  // training time so far, resumed runs included
  const TrainState& state() const { return state_; }
  TrainState& state() { return state_; }
  const History& history() const { return state_.history; }
  const TrainerOptions& options() const { return opts_; }
  Module& model() { return model_; }
  dist::Communicator& comm() { return *comm_; }
  bool distributed() const { return comm_->size() > 1; }
  // The last step's gradient synchronisation (zero without several processes).
  dist::SyncStats sync_stats() const;
  std::string checkpoint_path(int64_t step) const;
  std::string last_checkpoint() const;  // newest kept, or ""

 private:
  struct Impl;
  bool evaluate(const EvalFn& eval, FitResult& result);  // true: early stopping says stop
  Status resume_here(const std::string& path);
  Status agree(Status s);         // process 0's status, on every process
  Status check_same_setup();      // every process started with the same configuration
  void send_state_from_main();    // process 0's model, optimizer and state to the others
  void check_replicas();
  void open_metrics(int64_t keep_bytes);
  void set_precision_record();  // state_.precision and cpu_path from the options and the path in use
  double elapsed() const;

  Module& model_;
  Optimizer& opt_;
  TrainerOptions opts_;
  dist::Communicator* comm_;
  std::function<double(int64_t)> schedule_{};
  TrainState state_;
  std::unique_ptr<Impl> impl_;
  bool started_ = false;
};

// The common step for classifiers and language models: logits from the user's forward, targets,
// and summed cross-entropy; count = targets other than ignore_index. With the logits on a GPU,
// targets made on the CPU are counted there and moved to the GPU (no wait); targets already on
// the GPU are counted there (a wait for the device each step).
struct CrossEntropyStep {
  std::function<Tensor(const std::vector<int64_t>&)> logits{};   // [.., C]
  std::function<Tensor(const std::vector<int64_t>&)> targets{};  // int64 [..]
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  StepOutput operator()(const std::vector<int64_t>& samples) const;
};

}  // namespace tg::train
