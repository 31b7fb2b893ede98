#pragma once
// A progress line on stderr for long loops:
//
//   train [██████████▌             ]  45% 900/2000  0:42<0:51  2.1k tok/s  loss 2.31
//
// On a terminal it is redrawn in place, at most 10 times a second. When stderr is a file or a pipe
// (a batch job's log) it writes plain lines instead, without the bar: one every ~10 s and one at
// finish(), so that logs stay short.
//
//   tg::train::Progress progress(steps, "train", "tok");
//   for (int64_t s = 0; s < steps; ++s) {
//     tokens += train_step();
//     progress.update(s + 1, fmt::format("loss {:.3f}", loss), tokens);
//   }
//   progress.finish(fmt::format("loss {:.3f}", loss));
#include <cstdint>
#include <cstdio>
#include <string>

namespace tg::train {

// "0:07", "2:05", "1:02:03" (hours are not wrapped); "--:--" for a negative or non-finite time.
std::string format_duration(double seconds);

// A rate for humans: "0.42", "12.5", "1234", "21.3k", "1.2M".
std::string format_rate(double per_second);

// One progress line, computed from its parts (no clock, no terminal): what Progress prints.
// rate: units per second, shown as "1234 tok/s"; with no unit it counts steps, shown as "it/s"
// (or "s/it" when slower than one a second); negative: no rate shown. bar_width 0 leaves the bar
// out. Nothing is divided by zero: neither rate nor ETA before 0.1 s and one step are measured.
std::string progress_line(const std::string& label, int64_t done, int64_t total, double elapsed_s, double rate,
                          const std::string& unit, const std::string& extra, int bar_width = 24);

class Progress {
 public:
  // total: the number of steps (values below 1 count as 1); label: printed first ("train");
  // unit: the name of what update()'s units_done counts ("tok", "words").
  explicit Progress(int64_t total, std::string label = "", std::string unit = "");
  ~Progress();  // ends a line left open on the terminal
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // done of total steps; extra: free text at the end of the line; units_done: the units (tokens,
  // words) processed since construction, shown as a rate "1234 tok/s" (< 0: the step rate).
  void update(int64_t done, const std::string& extra = "", int64_t units_done = -1);
  // The last line (the last done, or total when update was never called), then a newline. Once.
  void finish(const std::string& extra = "");
  // Seconds since construction.
  double elapsed() const;

 private:
  void draw(const std::string& extra, bool final);

  int64_t total_, done_ = -1, units_ = -1;
  std::string label_, unit_;
  std::FILE* out_ = stderr;
  bool tty_ = false, drawn_ = false, finished_ = false, updated_ = false;
  double start_s_, last_draw_s_;  // steady-clock seconds
};

}  // namespace tg::train
