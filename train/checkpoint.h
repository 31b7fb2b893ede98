#pragma once
// TrainState: everything a bit-identical resume needs, in one safetensors file written atomically.
//
//   tensors   "model.<parameter>"      the model's parameters (PyTorch-style names)
//             "optim.<state>"          the optimizer's moments and step counts
//             "history.<kind>/<name>"  float64 [n, 2]: (step, value) of every logged metric
//   metadata  "format" = "tapegrad.train_state", "version" = "1", "optimizer", "lr",
//             "rng.<stream>" (each random generator's state), "step", "micro_step", "epoch",
//             "epoch_samples", "samples", "sampler_seed", "seconds", "early_stop.*", "metrics_bytes",
//             "config_hash", "tokenizer_fingerprint", "precision", "cpu_path", "config.<setting>" and
//             "user.<key>" entries.
//
// Nothing in a checkpoint names a file: which checkpoints a run keeps is derived from the names in
// its folder (checkpoint_step), never from a list stored in a file someone may have edited.
//
// The data position is counted in global samples (so a run on 2 processes can resume on 1).
// Loading parses every number strictly and checks every name and shape before anything changes:
// a failed load leaves the model, the optimizer and the generators as they were.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../graph/random.h"
#include "../io/safetensors.h"
#include "../models/module.h"
#include "../optim/optimizer.h"

namespace tg::train {

// (step, value) points of every logged metric, keyed "kind/name" ("train/loss", "valid/bleu").
using History = std::map<std::string, std::vector<std::pair<double, double>>>;

struct TrainState {
  static constexpr int64_t kVersion = 1;
  int64_t step = 0;           // optimizer steps taken
  int64_t micro_step = 0;     // gradient-accumulation micro-steps into the next step
  int64_t epoch = 0;          // the epoch in progress (0-based)
  int64_t epoch_samples = 0;  // global samples of that epoch already consumed
  int64_t samples = 0;        // global samples consumed since the start
  uint64_t sampler_seed = 0;  // the data order's seed (overrides the one a resumed run was built with)
  double seconds = 0;         // training time so far
  // Early stopping: the best value of the watched metric, when, and evaluations since.
  double best = 0;
  bool has_best = false;
  int64_t best_step = 0, bad_evals = 0;
  int64_t metrics_bytes = -1;     // metrics.jsonl's length when this state was saved
  History history{};
  std::string config_hash{}, tokenizer_fingerprint{};
  Metadata config{};  // the program's settings by name ("--layers" -> "2"), compared on resume
  std::string precision = "float32", cpu_path{};  // what computed the run so far (cpu_path: with bfloat16 only)
  std::map<std::string, Generator::State> rngs{};  // every random stream; "default" is tg::default_generator()
  Metadata user{};                                 // the program's own entries
};

// "checkpoint-00000020.safetensors" -> 20; -1 for any other name. Exactly "checkpoint-", eight or
// more digits (the step, zero-padded) and ".safetensors": the only files keep-last-K deletes.
int64_t checkpoint_step(std::string_view file_name);
std::string checkpoint_name(int64_t step);

// Saves state + model + optimizer (the generators are taken from state.rngs).
Status save_train_state(const std::string& path, const TrainState& state, const Module& model, const Optimizer& opt);
// Loads into model and optimizer (built as when saved: names, shapes and optimizer type are
// checked) and returns the state; restores nothing of the generators (the caller does).
Result<TrainState> load_train_state(const std::string& path, Module& model, Optimizer& opt);
// The same, in memory: what process 0 sends the others when a data-parallel run starts.
std::string serialize_train_state(const TrainState& state, const Module& model, const Optimizer& opt);
Result<TrainState> parse_train_state(std::string_view bytes, const std::string& source, Module& model, Optimizer& opt);
// Reads only the metadata and history (no model needed): for tools and for choosing a checkpoint.
Result<TrainState> peek_train_state(const std::string& path);

// A checkpoint read once and checked for integrity: the safetensors checks, each tensor's
// checksum (files we write carry them), finite model and optimizer values. *corrupt is set when
// the bytes were read but fail these checks (as opposed to a file that cannot be read at all).
Result<SafetensorsFile> read_checkpoint(const std::string& path, bool* corrupt = nullptr);
Result<TrainState> peek_train_state(const SafetensorsFile& file, const std::string& path);
Result<TrainState> load_train_state(const SafetensorsFile& file, const std::string& path, Module& model, Optimizer& opt);

}  // namespace tg::train
