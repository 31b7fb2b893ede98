#pragma once
// The metrics log of a run: one JSON object per line (metrics.jsonl), appended and flushed as
// training goes, and the same values kept in memory as series for the report.
//
//   {"kind": "train", "step": 12, "loss": 2.3104, "lr": 0.0003}
//   {"kind": "valid", "step": 500, "valid_loss": 1.98}
//
// Resuming continues the file: the checkpoint stores bytes() and history(); the resumed run opens
// the log with keep_bytes = that length (dropping lines written after the checkpoint, by a run
// that died before its next one) and restores the history with set_history().
//
//   auto metrics = tg::train::Metrics::open(dir + "/metrics.jsonl", resumed ? state.metrics_bytes : -1).value();
//   metrics.log("train", step, {{"loss", loss}, {"lr", lr}}).or_throw();
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/status.h"

namespace tg::train {

class Metrics {
 public:
  // Series keyed "kind/name" ("train/loss", "valid/valid_loss"), points (step, value).
  using History = std::map<std::string, std::vector<std::pair<double, double>>>;

  // Opens (creates) path for appending. keep_bytes >= 0: the file is first cut to that many bytes;
  // an error when it is shorter. keep_bytes < 0: everything is kept but a torn last line (a crash
  // mid-write), which is dropped so that the next line starts on a line of its own.
  static Result<Metrics> open(const std::string& path, int64_t keep_bytes = -1);

  Metrics(Metrics&& other) noexcept;
  Metrics& operator=(Metrics&& other) noexcept;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;
  ~Metrics();

  // Appends {"kind": kind, "step": step, name: value, ...} and flushes it to the file. Values are
  // written with the digits that read back as the same double; non-finite ones as null (and left
  // out of the history). Names "kind" and "step" are refused.
  Status log(const std::string& kind, int64_t step, const std::vector<std::pair<std::string, double>>& values);

  // The file's length after the last line: what a checkpoint stores to resume from.
  int64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

  // Every value logged through this object (or restored), as series.
  const History& history() const { return history_; }
  void set_history(History h) { history_ = std::move(h); }

  // Reads the bytes of a metrics.jsonl back into a History: each non-empty line must be a JSON
  // object with a numeric "step"; numbers become points, null and other values are skipped.
  // Errors name source and the line number.
  static Result<History> parse(std::string_view bytes, const std::string& source);

 private:
  Metrics(std::string path, int fd, int64_t bytes) : path_(std::move(path)), fd_(fd), bytes_(bytes) {}

  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  History history_;
};

}  // namespace tg::train
