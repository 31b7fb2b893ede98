#pragma once
// tg::Status and tg::Result<T>: how reading and writing files report ordinary failure (a missing
// file, a corrupt checkpoint, a malformed corpus line) without exceptions and without Abseil in
// public headers. The message is one line that names the file and says what was wrong:
//
//   tg::Result<tg::SafetensorsFile> f = tg::load_safetensors("model.safetensors");
//   if (!f.ok()) { std::fprintf(stderr, "%s\n", f.status().message().c_str()); return 1; }
//   use(f->tensors);
//
// Or, where an exception is fine: `auto f = tg::load_safetensors(path).value();` throws tg::Error
// with that same message. Programming errors (wrong shapes, bad arguments) stay tg::Error exceptions.
#include <optional>
#include <string>
#include <utility>

#include "../graph/error.h"

namespace tg {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }  // "" on success
  // Throws tg::Error(message) on failure.
  void or_throw() const {
    if (failed_) throw Error(message_);
  }

 private:
  bool failed_ = false;
  std::string message_;
};

// A failed Status with a formatted message: return tg::io_error("{}: line {}: expected a tab", path, line);
template <class... Args>
Status io_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status::error(fmt::format(f, std::forward<Args>(args)...));
}

// A value or the Status saying why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as absl::StatusOr
  Result(Status error) : status_(std::move(error)) {  // NOLINT
    if (status_.ok()) status_ = Status::error("internal error: a Result made from a success Status holds no value");
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // The value; throws tg::Error with the status message when there is none.
  T& value() & { return check(), *value_; }
  const T& value() const& { return check(), *value_; }
  T&& value() && { return check(), std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!value_) throw Error(status_.message());
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace tg

// Inside functions returning Status or Result<T>: return early on failure.
#define TG_RETURN_IF_ERROR(expr)           \
  do {                                     \
    ::tg::Status tg_status_ = (expr);      \
    if (!tg_status_.ok()) return tg_status_; \
  } while (0)
