#pragma once
// Files: whole-file reads, atomic writes, folders. Every failure is a tg::Status whose message
// names the file and the reason.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "status.h"

namespace tg {

// The bytes of a regular file (a folder, device or pipe is refused).
Result<std::string> read_file(const std::string& path);
// Text for the programs: like read_file, but a name ending in .gz is decompressed (gzip -dc).
Result<std::string> read_text(const std::string& path);

// Writes bytes to path atomically: a temporary file in the same folder, fsync, rename over the
// target. Readers see the old file or the new one, never a torn one.
Status write_file_atomic(const std::string& path, std::string_view bytes);

// Creates a folder and its parents; an error when the path exists and is not a folder.
Status make_dirs(const std::string& path);

// The deepest nesting of objects and arrays in JSON text (strings skipped), counted only up to
// just past `limit`: JSON files are checked with it before they are parsed, since printing or
// walking a value nested a million deep would overflow the stack.
int json_depth(std::string_view json_text, int limit = 64);

// Opens PATH for reading, refusing anything but a regular file (or a symbolic link to one) by name:
// "PATH: not a regular file (a FIFO): refused". Opened non-blocking, so a FIFO never hangs the
// open. Returns the descriptor (the caller closes it); flags are added to O_RDONLY | O_NONBLOCK.
Result<int> open_regular_file(const std::string& path, int flags = 0);
// "a folder", "a FIFO", "a socket", "a device", "a regular file" for a stat mode.
const char* file_kind(unsigned mode);

// Text for a one-line message: at most max_bytes (cut on a UTF-8 boundary, "..." appended).
std::string clip_for_message(std::string_view text, size_t max_bytes = 60);

// A place where a test may kill the process (crash-safety tests): with TG_FAULT_KILL_AT=N in the
// environment the process SIGKILLs itself at the N-th fault point it passes, and with
// TG_FAULT_COUNT_FILE=path it writes how many it passed to that file at exit. Costs one load when
// neither is set. Points sit inside the atomic write and between training steps.
void fault_point(const char* where);

// The path as one spelling of the file: absolute, "." and ".." gone, symbolic links resolved (as
// far as the path exists). "" stays "". For settings a resumed run compares ("data.txt" and
// "/home/me/data.txt" are the same file).
std::string canonical_path(const std::string& path);

// FNV-1a, 64 bits, as 16 hex digits: the fingerprint of tokenizer files and configurations
// stored in checkpoints (a check against mix-ups, not a cryptographic hash).
std::string fingerprint(std::string_view bytes);

}  // namespace tg
