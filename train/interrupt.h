#pragma once
// Ctrl-C (SIGINT) and SIGTERM during training. While an InterruptGuard lives, the first signal only
// sets a flag (with one line on stderr): the training loop finishes its current step, writes a
// checkpoint and returns StopReason::kInterrupted, and the program exits with 128 + the signal
// (130 for Ctrl-C, 143 for SIGTERM). A second signal exits at once with the same code, leaving the
// last complete checkpoint (checkpoints are written atomically, so none is ever torn).
// Trainer::fit installs one itself (TrainerOptions::handle_interrupts); outside a guard the
// signals keep their usual effect.
namespace tg::train {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers (nested guards share the first one's)
  ~InterruptGuard();  // restores what was there before
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal received while a guard is installed (SIGINT or SIGTERM), or 0 (also once the
// outermost guard is gone).
int interrupt_signal();
// The exit code for a run stopped by signal sig: 128 + sig.
inline int interrupt_exit_code(int sig) { return 128 + sig; }

}  // namespace tg::train
