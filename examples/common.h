#pragma once
// Shared by the example programs: one-line fatal errors, reading text, a progress line with ETA,
// metrics as JSON lines, and a character vocabulary.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

namespace tg::examples {

// Prints "program: message" on stderr and exits with status 1.
[[noreturn]] void fail(const std::string& message);
// The value, or fail() with its status message.
template <class T>
T or_fail(absl::StatusOr<T> v) {
  if (!v.ok()) fail(std::string(v.status().message()));
  return *std::move(v);
}
inline void or_fail(const absl::Status& s) {
  if (!s.ok()) fail(std::string(s.message()));
}
void set_program_name(const char* argv0);

// Reads a UTF-8 (or any byte) text file whole; gzip-compressed files (.gz) are read through gzip -dc.
absl::StatusOr<std::string> read_text(const std::string& path);
// Creates a directory (and parents); error when it exists as a file.
absl::Status make_dirs(const std::string& path);

// "[=====>    ] 45% 1234/2000  ETA 0:42  extra" on stderr, redrawn in place at most 10 times a second.
class Progress {
 public:
  explicit Progress(int64_t total);
  void update(int64_t done, const std::string& extra);
  void finish(const std::string& extra);
  double elapsed() const;

 private:
  int64_t total_, last_done_ = -1;
  std::chrono::steady_clock::time_point start_, last_;
};

// Appends {"key": value, ...} lines to a file (metrics.jsonl), flushed after each line.
class Metrics {
 public:
  explicit Metrics(const std::string& path);
  ~Metrics();
  void log(const std::map<std::string, double>& values, const std::string& kind = "train");
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// Characters (bytes) to ids, most frequent first; unknown characters map to id 0 (the rarest
// character in the training text is kept as the fallback).
class CharVocab {
 public:
  static CharVocab build(const std::string& text);
  static absl::StatusOr<CharVocab> parse(const std::string& serialized);
  std::string serialize() const;  // the characters in id order, as a JSON-free hex string
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }

 private:
  std::string chars_;
  int64_t id_of_[256] = {};
};

}  // namespace tg::examples
