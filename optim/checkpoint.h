#pragma once
// Training checkpoints: the model's parameters, the optimizer's state (moments, step count,
// learning rate) and the random generator's state in one safetensors file, written atomically.
// Resuming from one continues exactly where training stopped: the losses that follow are
// bit-identical to those of a run that never stopped (tested).
//
// Names inside: "model.<parameter>", "optim.<state>"; metadata "format", "optimizer", "rng",
// "lr" and the caller's own entries (say, the epoch and data position) prefixed "user.".
#include <string>

#include <absl/status/status.h>

#include "models/safetensors.h"
#include "optim/optimizer.h"

namespace tg {

absl::Status save_checkpoint(const std::string& path, const Module& model, const Optimizer& opt,
                             const Metadata& user = {});
// Restores model, optimizer and tg::default_generator(); returns the caller's entries. The model
// and optimizer must be built as they were when saved (names, shapes and optimizer type are checked).
absl::StatusOr<Metadata> load_checkpoint(const std::string& path, Module& model, Optimizer& opt);

}  // namespace tg
