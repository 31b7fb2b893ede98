#include "examples/common.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include <absl/strings/str_cat.h>
#include <fmt/format.h>

#include "models/safetensors.h"

namespace tg::examples {

static std::string g_program = "tapegrad";

void set_program_name(const char* argv0) { g_program = std::filesystem::path(argv0).filename().string(); }

void fail(const std::string& message) {
  std::fprintf(stderr, "\n%s: %s\n", g_program.c_str(), message.c_str());
  std::exit(1);
}

absl::StatusOr<std::string> read_text(const std::string& path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    if (!std::filesystem::exists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    std::string cmd = "gzip -dc -- '" + path + "'";
    if (path.find('\'') != std::string::npos) return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported name"));
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return absl::InternalError(absl::StrCat(path, ": cannot run gzip"));
    std::string out;
    std::array<char, 65536> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int rc = ::pclose(p);
    if (rc != 0) return absl::DataLossError(absl::StrCat(path, ": not a valid gzip file"));
    return out;
  }
  absl::StatusOr<std::string> bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  return *bytes;
}

absl::Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot create directory (", ec.message(), ")"));
  return absl::OkStatus();
}

// ---- Progress ----

Progress::Progress(int64_t total) : total_(std::max<int64_t>(total, 1)), start_(std::chrono::steady_clock::now()), last_() {}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

static std::string clock_text(double s) {
  int64_t t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}

void Progress::update(int64_t done, const std::string& extra) {
  auto now = std::chrono::steady_clock::now();
  // Redrawn in place on a terminal (10 times a second); one line every 10 s in a log file.
  static const bool tty = ::isatty(2) != 0;
  if (done < total_ && now - last_ < (tty ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10000))) return;
  if (!tty && last_ == std::chrono::steady_clock::time_point{} && done < total_) {  // the first call only starts the clock
    last_ = now;
    return;
  }
  last_ = now;
  last_done_ = done;
  double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  int filled = static_cast<int>(frac * 25);
  double el = elapsed(), eta = frac > 0 ? el * (1 - frac) / frac : 0;
  std::fprintf(stderr, tty ? "\r[%s%s] %3d%% %lld/%lld  %s ETA %s  %s   " : "[%s%s] %3d%% %lld/%lld  %s ETA %s  %s\n", std::string(static_cast<size_t>(filled), '=').c_str(),
               std::string(static_cast<size_t>(25 - filled), ' ').c_str(), static_cast<int>(frac * 100),
               static_cast<long long>(done), static_cast<long long>(total_), clock_text(el).c_str(),
               clock_text(eta).c_str(), extra.c_str());
  std::fflush(stderr);
}

void Progress::finish(const std::string& extra) {
  if (last_done_ != total_) update(total_, extra);
  if (::isatty(2)) std::fprintf(stderr, "\n");
}

// ---- Metrics ----

Metrics::Metrics(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "w")) {
  if (!f_) fail(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
}
Metrics::~Metrics() {
  if (f_) std::fclose(f_);
}

void Metrics::log(const std::map<std::string, double>& values, const std::string& kind) {
  std::string line = fmt::format("{{\"kind\": \"{}\"", kind);
  for (const auto& [k, v] : values)
    line += std::isfinite(v) ? fmt::format(", \"{}\": {:.6g}", k, v) : fmt::format(", \"{}\": null", k);
  line += "}\n";
  std::fputs(line.c_str(), f_);
  std::fflush(f_);
}

// ---- CharVocab ----

CharVocab CharVocab::build(const std::string& text) {
  int64_t counts[256] = {};
  for (unsigned char c : text) ++counts[c];
  std::vector<int> chars;
  for (int c = 0; c < 256; ++c)
    if (counts[c] > 0) chars.push_back(c);
  std::stable_sort(chars.begin(), chars.end(), [&](int a, int b) { return counts[a] > counts[b]; });
  CharVocab v;
  for (int c : chars) v.chars_.push_back(static_cast<char>(c));
  for (size_t i = 0; i < v.chars_.size(); ++i) v.id_of_[static_cast<unsigned char>(v.chars_[i])] = static_cast<int64_t>(i);
  if (!v.chars_.empty()) {  // unknown bytes map to the rarest character
    for (int c = 0; c < 256; ++c)
      if (counts[c] == 0) v.id_of_[c] = static_cast<int64_t>(v.chars_.size()) - 1;
  }
  return v;
}

std::string CharVocab::serialize() const {
  std::string out;
  for (char c : chars_) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

absl::StatusOr<CharVocab> CharVocab::parse(const std::string& s) {
  if (s.empty() || s.size() % 2 != 0 || s.size() > 512) return absl::InvalidArgumentError("malformed character vocabulary");
  std::string text;
  for (size_t i = 0; i < s.size(); i += 2) {
    char* end = nullptr;
    std::string hex = s.substr(i, 2);
    long v = std::strtol(hex.c_str(), &end, 16);
    if (*end != '\0') return absl::InvalidArgumentError("malformed character vocabulary");
    text.push_back(static_cast<char>(v));
  }
  CharVocab v;
  v.chars_ = text;
  int64_t seen[256] = {};
  for (size_t i = 0; i < text.size(); ++i) {
    if (seen[static_cast<unsigned char>(text[i])]++) return absl::InvalidArgumentError("repeated character in vocabulary");
    v.id_of_[static_cast<unsigned char>(text[i])] = static_cast<int64_t>(i);
  }
  for (int c = 0; c < 256; ++c)
    if (!seen[c]) v.id_of_[c] = static_cast<int64_t>(text.size()) - 1;
  return v;
}

std::vector<int64_t> CharVocab::encode(const std::string& text) const {
  std::vector<int64_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = id_of_[static_cast<unsigned char>(text[i])];
  return out;
}

std::string CharVocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) out.push_back(id >= 0 && id < size() ? chars_[static_cast<size_t>(id)] : '?');
  return out;
}

}  // namespace tg::examples
