// The run folder: its lock, what an earlier run left in it, the links it may not hold.
#include "train/run_dir.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "distributed/dist.h"
#include "io/file.h"
#include "train/checkpoint.h"

namespace tg::train {

namespace fs = std::filesystem;

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at != std::string::npos && name.size() - at == 11 && e.is_regular_file()) fs::remove(e.path(), ec);
  }
}

namespace {
bool is_checkpoint_name(const std::string& name) { return checkpoint_step(name) >= 0; }
}  // namespace

// The checkpoint files of a folder (regular files with the exact name pattern), oldest step first.
std::vector<std::pair<int64_t, std::string>> checkpoints_in(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const int64_t step = checkpoint_step(name);
    std::error_code sec;
    if (step >= 0 && e.symlink_status(sec).type() == fs::file_type::regular) out.emplace_back(step, name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A run writes only inside its folder: an entry that is a symbolic link resolving outside it would
// let whoever prepared the folder make the run append to or replace a file elsewhere. (A file a run
// writes is never a link at all: write_file_atomic refuses one, the lock and metrics.jsonl are
// opened with O_NOFOLLOW.)
Status check_no_link_out(const std::string& dir) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(dir, ec);
  if (ec) return io_error("{}: cannot resolve the run folder ({})", dir, ec.message());
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code lec;
    if (!e.is_symlink(lec)) continue;
    const fs::path target = fs::weakly_canonical(e.path(), lec);
    const auto mismatch = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
    if (lec || mismatch.first != root.end())
      return io_error("{}: a symbolic link to {}, outside the run folder; a run writes only inside its folder (remove the "
                      "link or choose another folder)", e.path().string(), lec ? "an unresolvable place" : target.string());
  }
  if (ec) return io_error("{}: cannot list the run folder ({})", dir, ec.message());
  return {};
}

// The files of an earlier run in dir: checkpoints, metrics.jsonl, best.safetensors.
std::vector<fs::path> earlier_run(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_checkpoint_name(name) || name == "metrics.jsonl" || name == "best.safetensors") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status claim_run_dir(const std::string& dir) {
  if (!dist::is_main()) return {};
  std::error_code ec;
  const std::string key = fs::weakly_canonical(dir, ec).string();
  if (ec) return io_error("{}: cannot resolve the run folder ({})", dir, ec.message());
  static std::mutex m;
  static std::set<std::string> held;  // folders this process claimed; their lock files stay open until exit
  std::lock_guard<std::mutex> lock(m);
  if (held.count(key)) return {};
  const std::string path = dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0)
    return io_error("{}: cannot open the run folder's lock ({}{})", path, std::strerror(errno),
                    errno == ELOOP ? ": it is a symbolic link" : "");
  // The lock is written in place (the pid): another name for the same file would be changed too.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
    const bool linked = S_ISREG(st.st_mode) && st.st_nlink > 1;
    ::close(fd);
    return linked ? io_error("{}: has {} other hard link(s) (a copy made with cp -al?); the lock is written in place, which "
                             "would change them too: refused (delete it; the run makes its own)", path, st.st_nlink - 1)
                  : io_error("{}: not a regular file ({}): refused", path, file_kind(st.st_mode));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (err == EWOULDBLOCK)
      return io_error("{}: in use by another run (process {} holds {}); wait for it to end, or choose another folder", dir,
                      pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ? "?" : pid, path);
    return io_error("{}: cannot lock the run folder ({})", path, std::strerror(err));
  }
  const std::string me = std::to_string(::getpid()) + "\n";  // for the message of the next one only
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // The lock holds without the pid; the message of a refused run then says "process ?".
  }
  held.insert(key);
  return {};
}

Status check_run_dir(const std::string& dir, bool resume, bool overwrite, bool can_resume) {
  if (resume && overwrite) return Status::error("--resume and --overwrite exclude each other");
  TG_RETURN_IF_ERROR(check_no_link_out(dir));
  TG_RETURN_IF_ERROR(claim_run_dir(dir));
  const std::vector<fs::path> earlier = earlier_run(dir);
  if (resume) {
    for (const auto& p : earlier)
      if (is_checkpoint_name(p.filename().string())) return {};
    return io_error("{}: no checkpoint-*.safetensors to resume from", dir);
  }
  if (!earlier.empty() && !overwrite)
    return io_error("{}: holds an earlier run ({}); {}", dir, earlier.front().filename().string(),
                    can_resume ? "continue it (--resume) or replace it on purpose (--overwrite)"
                               : "replace it on purpose (--overwrite) or choose another folder");
  return {};
}

}  // namespace tg::train
