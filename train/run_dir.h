#pragma once
// The run folder a training program writes into: claimed by one process at a time, checked for an
// earlier run before anything is written, and never holding a link that leads out of it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../io/status.h"

namespace tg::train {

// What a program checks before it reads data or writes anything into a run folder: with resume,
// that DIR holds a checkpoint; otherwise that it holds no earlier run, unless overwrite. The
// refusal names --overwrite, and --resume too when the program can resume. It also claims the
// folder (claim_run_dir) and refuses one holding a symbolic link that leads outside it.
Status check_run_dir(const std::string& dir, bool resume, bool overwrite, bool can_resume = true);

// Claims DIR for this process until it ends: a kernel lock (flock) on DIR/.lock, which the kernel
// drops however the process ends (a SIGKILLed run never blocks the next). Another process that
// holds it is refused with one line naming its pid; claims within one process share the lock.
// With several processes (mpirun) only process 0, the one that writes, claims. check_run_dir and
// Trainer::start / resume claim their folder.
Status claim_run_dir(const std::string& dir);

// Deletes the `*.tmp-XXXXXX` files that interrupted atomic writes left in a folder.
void remove_stale_temporaries(const std::string& dir);

// The checkpoint files of DIR (regular files named checkpoint-<step>.safetensors), oldest step first.
std::vector<std::pair<int64_t, std::string>> checkpoints_in(const std::string& dir);

// The files of an earlier run in DIR: checkpoints, metrics.jsonl, best.safetensors, sorted.
std::vector<std::filesystem::path> earlier_run(const std::string& dir);

// A run writes only inside its folder: an entry of DIR that is a symbolic link resolving outside it
// is refused, naming the link and its target.
Status check_no_link_out(const std::string& dir);

}  // namespace tg::train
