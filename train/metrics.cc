#include "train/metrics.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "io/file.h"

namespace tg::train {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        else out += c;
    }
  }
  return out + "\"";
}

// Reads n bytes at offset; false on a short read or an error (errno set).
bool read_at(int fd, char* buf, size_t n, int64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, buf, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r, n -= static_cast<size_t>(r), offset += r;
  }
  return true;
}

// The length of the file up to and including its last newline (0 when it has none).
Result<int64_t> end_of_last_line(int fd, int64_t size, const std::string& path) {
  char buf[4096];
  for (int64_t end = size; end > 0;) {
    const int64_t start = std::max<int64_t>(0, end - static_cast<int64_t>(sizeof buf));
    if (!read_at(fd, buf, static_cast<size_t>(end - start), start)) return io_error("{}: read error ({})", path, std::strerror(errno));
    for (int64_t i = end - start; i-- > 0;)
      if (buf[i] == '\n') return start + i + 1;
    end = start;
  }
  return int64_t{0};
}

Status cut(int fd, int64_t length, const std::string& path) {
  if (::ftruncate(fd, length) != 0) return io_error("{}: cannot truncate to {} bytes ({})", path, length, std::strerror(errno));
  return {};
}

}  // namespace

Result<Metrics> Metrics::open(const std::string& path, int64_t keep_bytes) {
  // Appended to and cut in place: never through a symbolic link (O_NOFOLLOW), never a file with
  // other names (another run's log, after cp -al), never a FIFO or device (O_NONBLOCK, then fstat).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0 && errno == ELOOP)
    return io_error("{}: a symbolic link; the log is written in place, never through a link (remove the link)", path);
  if (fd < 0) return io_error("{}: cannot open for appending ({})", path, std::strerror(errno));
  Metrics m(path, fd, 0);  // closes fd on every early return
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("{}: cannot stat ({})", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return io_error("{}: not a regular file ({}): refused", path, file_kind(st.st_mode));
  if (st.st_nlink > 1)
    return io_error("{}: has {} other hard link(s) (a copy made with cp -al?); the log is appended to in place, which "
                    "would change them too: refused (copy the folder with plain cp)", path, st.st_nlink - 1);
  const int64_t size = st.st_size;
  if (keep_bytes >= 0) {
    if (size < keep_bytes)
      return io_error("{}: has {} bytes, fewer than the {} recorded at the checkpoint (the log was cut or replaced)", path, size,
                      keep_bytes);
    char last = '\n';
    if (keep_bytes > 0 && !read_at(fd, &last, 1, keep_bytes - 1)) return io_error("{}: read error ({})", path, std::strerror(errno));
    if (last != '\n')
      return io_error("{}: byte {} recorded at the checkpoint is not the end of a line (not the log this run wrote)", path,
                      keep_bytes);
    TG_RETURN_IF_ERROR(cut(fd, keep_bytes, path));
    m.bytes_ = keep_bytes;
  } else {
    Result<int64_t> end = end_of_last_line(fd, size, path);
    if (!end.ok()) return end.status();
    if (*end != size) TG_RETURN_IF_ERROR(cut(fd, *end, path));  // a torn last line
    m.bytes_ = *end;
  }
  return m;
}

Metrics::Metrics(Metrics&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), bytes_(o.bytes_), history_(std::move(o.history_)) {}

Metrics& Metrics::operator=(Metrics&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_), fd_ = std::exchange(o.fd_, -1), bytes_ = o.bytes_, history_ = std::move(o.history_);
  }
  return *this;
}

Metrics::~Metrics() {
  if (fd_ >= 0) ::close(fd_);
}

Status Metrics::log(const std::string& kind, int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& name = values[i].first;
    TG_CHECK(name != "kind" && name != "step", "Metrics::log", "\"{}\" is the line's own field, not a value name", name);
    for (size_t j = 0; j < i; ++j) TG_CHECK(values[j].first != name, "Metrics::log", "value \"{}\" given twice", name);
  }
  if (fd_ < 0) return io_error("{}: the metrics log is not open", path_);
  // fmt's "{}" is the shortest text that reads back as the same double.
  std::string line = fmt::format("{{\"kind\": {}, \"step\": {}", json_string(kind), step);
  for (const auto& [name, v] : values)
    line += std::isfinite(v) ? fmt::format(", {}: {}", json_string(name), v) : fmt::format(", {}: null", json_string(name));
  line += "}\n";
  for (size_t off = 0; off < line.size();) {
    const ssize_t w = ::write(fd_, line.data() + off, line.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error("{}: cannot write ({})", path_, w < 0 ? std::strerror(errno) : "no progress");
    off += static_cast<size_t>(w);
  }
  bytes_ += static_cast<int64_t>(line.size());
  for (const auto& [name, v] : values)
    if (std::isfinite(v)) history_[kind + "/" + name].emplace_back(static_cast<double>(step), v);
  return {};
}

Result<Metrics::History> Metrics::parse(std::string_view bytes, const std::string& source) {
  History h;
  int64_t number = 0;
  for (size_t pos = 0; pos < bytes.size();) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return io_error("{}:{}: not a JSON object", source, number);
    const auto kind = j.find("kind");
    if (kind == j.end() || !kind->is_string()) return io_error("{}:{}: no \"kind\" string", source, number);
    const auto step = j.find("step");
    if (step == j.end() || !step->is_number()) return io_error("{}:{}: no numeric \"step\"", source, number);
    const double x = step->get<double>();
    const std::string prefix = kind->get<std::string>() + "/";
    for (const auto& [name, v] : j.items())
      if (name != "kind" && name != "step" && v.is_number()) h[prefix + name].emplace_back(x, v.get<double>());
  }
  return h;
}

}  // namespace tg::train
