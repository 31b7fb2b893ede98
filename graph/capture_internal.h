#pragma once
// What ops need from a CUDA graph being captured (tg::cuda::Graph, graph/cuda.cc). Not a public
// header.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tg::detail {

// A value that changes from step to step (a dropout key, an optimizer's step size, a step number)
// must not be recorded as a kernel's argument: every replay would reuse the captured step's. While
// a graph is being captured on `device`, an op passes such values through device memory instead:
// step_values returns where its kernels find the `count` values, which hold `now` when the captured
// step runs and, before each replay, what `next` writes there (the host work the replay skips:
// drawing the next key, counting the step), the `next`s called in the order they were given.
// `check` (if any) throws when a replay cannot give the values (a scope they need is missing): a
// replay calls every check before any `next`, so that a refused replay changes no host state.
// Outside a capture it returns nullptr (pass the values by value, as usual).
const uint64_t* step_values(int device, const uint64_t* now, size_t count, std::function<void(uint64_t*)> next,
                            std::function<void()> check = {});

// A step number a kernel records (clip_grad_norm_'s and NonFiniteFlag::check's, for the non-finite
// flag): while capturing, a step value that is one more at each replay; nullptr outside a capture.
const int64_t* replay_step(int device, int64_t step);

// A graph is being captured on `device` (every kernel queued there is recorded).
bool capturing(int device);

}  // namespace tg::detail
