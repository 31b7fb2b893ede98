#include "io/file.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace tg {

const char* file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return S_ISREG(mode) ? "a regular file" : "not a regular file";
}

Result<int> open_regular_file(const std::string& path, int flags) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), flags | O_RDONLY | O_NONBLOCK);
  if (fd < 0) return io_error("{}: cannot open ({})", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("{}: cannot read ({})", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("{}: not a regular file ({}): refused", path, file_kind(st.st_mode));
  }
  return fd;
}

Result<std::string> read_file(const std::string& path) {
  Result<int> fd = open_regular_file(path, O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  std::string bytes;
  struct stat st {};
  if (::fstat(*fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  std::array<char, 65536> buf;
  for (;;) {
    const ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return io_error("{}: read error ({})", path, std::strerror(err));
    }
    if (n == 0) break;
    bytes.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(*fd);
  return bytes;
}

Result<std::string> read_text(const std::string& path) {
  if (path.size() <= 3 || path.compare(path.size() - 3, 3, ".gz") != 0) return read_file(path);
  // gzip reads the file we opened and checked (inherited as its standard input), not the path,
  // which could be swapped for a FIFO in between.
  Result<int> fd = open_regular_file(path, 0);
  if (!fd.ok()) return fd.status();
  std::string cmd = fmt::format("gzip -dc < /dev/fd/{} 2>/dev/null", *fd);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    const int err = errno;
    ::close(*fd);
    return io_error("{}: cannot run gzip ({})", path, std::strerror(err));
  }
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = ::pclose(p);
  ::close(*fd);
  if (rc != 0) return io_error("{}: not a valid gzip file (gzip -dc failed)", path);
  return out;
}

namespace {

// fsync on a folder, so that a rename inside it survives a power cut; errors are ignored where the
// file system cannot sync folders (EINVAL), as on some network and FUSE file systems.
Status sync_folder(const std::string& folder, const std::string& path) {
  int dfd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("{}: cannot open its folder to flush it ({})", path, std::strerror(errno));
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != EROFS) return io_error("{}: flushing its folder failed ({})", path, std::strerror(err));
  return {};
}

}  // namespace

namespace {
struct FaultConfig {
  long long kill_at = 0;
  const char* count_file = nullptr;
  std::atomic<long long> passed{0};
};
FaultConfig* fault_config() {
  static FaultConfig* config = [] {
    const char* kill = std::getenv("TG_FAULT_KILL_AT");
    const char* count = std::getenv("TG_FAULT_COUNT_FILE");
    if (!kill && !count) return static_cast<FaultConfig*>(nullptr);
    auto* c = new FaultConfig();
    if (kill) c->kill_at = std::atoll(kill);
    c->count_file = count;
    if (count) {
      std::atexit([] {
        FaultConfig* f = fault_config();
        if (std::FILE* out = std::fopen(f->count_file, "w")) {
          std::fprintf(out, "%lld\n", f->passed.load());
          std::fclose(out);
        }
      });
    }
    return c;
  }();
  return config;
}
}  // namespace

void fault_point(const char* where) {
  FaultConfig* c = fault_config();
  if (!c) return;
  const long long n = ++c->passed;
  if (n == c->kill_at) {
    std::fprintf(stderr, "tapegrad: fault point %lld (%s): killed for a test\n", n, where);
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  }
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  // Never through a symbolic link: whoever made the link would choose which file a save replaces
  // (model.safetensors -> tokenizer.json in a downloaded folder). And only a regular file is ever
  // replaced: renaming over a device node, a pipe or a folder would destroy it.
  const std::string target = path;
  std::error_code ec;
  if (std::filesystem::is_symlink(path, ec))
    return io_error("{}: a symbolic link; a file is never written through a link (it would replace what the link "
                    "points to): remove the link or write elsewhere", path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return io_error("{}: exists and is not a regular file (a device, folder or pipe); it is not replaced", path);
  const size_t slash = target.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  std::string tmp = target + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) return io_error("{}: cannot create a temporary file beside it ({})", path, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::string err = w == 0 ? "no space written" : std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return io_error("{}: write failed ({})", path, err);
    }
    done += static_cast<size_t>(w);
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return io_error("{}: flushing failed ({})", path, err);
  }
  fault_point("write_file_atomic: written, not renamed");
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return io_error("{}: rename failed ({})", path, err);
  }
  fault_point("write_file_atomic: renamed, folder not flushed");
  return sync_folder(folder, path);
}

Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    return io_error("{}: cannot create the folder ({})", path, ec ? ec.message() : "a file of that name exists");
  return {};
}

std::string canonical_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path c = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

std::string fingerprint(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

int json_depth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escape = false;
  for (char c : s) {
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

std::string clip_for_message(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes > 3 ? max_bytes - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace tg
