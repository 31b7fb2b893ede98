#include "train/cli.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "dist/dist.h"
#include "graph/error.h"

namespace tg::cli {

namespace {

std::string g_program;  // set by run_main

using Target = std::variant<int*, int64_t*, uint64_t*, double*, bool*, std::string*>;

std::string number_text(double v) { return fmt::format("{}", v); }

// A string shown as a C literal, so that a default of "\n" or "" is visible in the usage.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += {'\\', static_cast<char>(c)};
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A leading '+' is accepted (from_chars itself accepts only '-'), but not "+-1" or "++1".
std::string_view without_plus(std::string_view t) {
  if (t.size() > 1 && t[0] == '+' && t[1] != '+' && t[1] != '-') t.remove_prefix(1);
  return t;
}

// Whether the whole text is a number: "-1" and "-0.5" are values, not flags.
bool is_number(std::string_view t) {
  t = without_plus(t);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec != std::errc::invalid_argument && p == t.data() + t.size() && !t.empty();
}

bool is_bool_word(std::string_view t) { return t == "0" || t == "1" || t == "true" || t == "false"; }

template <class T>
Status parse_integer(const std::string& flag, std::string_view text, T* out) {
  std::string_view t = without_plus(text);
  const bool negative = !t.empty() && t[0] == '-';
  const std::string_view digits = negative ? t.substr(1) : t;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit))
    return io_error("{}: expected an integer, got '{}'", flag, text);
  if (std::is_unsigned_v<T> && negative) return io_error("{}: expected a non-negative integer, got '{}'", flag, text);
  T v{};
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range)
    return io_error("{}: expected an integer from {} to {}, got '{}'", flag, std::numeric_limits<T>::min(),
                    std::numeric_limits<T>::max(), text);
  if (ec != std::errc() || p != t.data() + t.size()) return io_error("{}: expected an integer, got '{}'", flag, text);
  *out = v;
  return {};
}

Status parse_double(const std::string& flag, std::string_view text, double* out) {
  std::string_view t = without_plus(text);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
    return io_error("{}: expected a number, got '{}'", flag, text);
  if (ec == std::errc::result_out_of_range) return io_error("{}: '{}' is out of the range of a double", flag, text);
  if (!std::isfinite(v)) return io_error("{}: expected a finite number, got '{}'", flag, text);
  *out = v;
  return {};
}

Status parse_bool(const std::string& flag, std::string_view text, bool* out) {
  if (!is_bool_word(text)) return io_error("{}: expected true, false, 1 or 0, got '{}'", flag, text);
  *out = text == "1" || text == "true";
  return {};
}

// Optimal string alignment distance: edits, with a swap of neighbours counting as one ("dropuot").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

bool g_several = false;  // one of several processes (mpirun): set by run_main

void print_error(const std::string& message) {
  std::fflush(stdout);  // what the program printed comes first
  std::string m = message;
  while (!m.empty() && (m.back() == '\n' || m.back() == '\r')) m.pop_back();
  if (m.empty()) m = "unknown error";
  if (g_several) {
    // An error every process raised together is printed once, by process 0; one of this process
    // alone says which process it is.
    if (dist::error_is_shared()) {
      if (!dist::is_main()) return;
    } else {
      m = fmt::format("process {} of {}: {}", dist::rank(), dist::size(), m);
    }
  }
  if (g_program.empty()) std::fprintf(stderr, "%s\n", m.c_str());
  else std::fprintf(stderr, "%s: %s\n", g_program.c_str(), m.c_str());
  std::fflush(stderr);
}

}  // namespace

struct Flag::Spec {
  std::string name, help, default_text;
  Target target;
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  std::vector<std::string> choices;
  bool not_empty = false;
  bool given = false;

  std::string shown() const { return "--" + name; }
  bool is_bool() const { return std::holds_alternative<bool*>(target); }
  bool is_string() const { return std::holds_alternative<std::string*>(target); }
  bool is_numeric() const { return !is_bool() && !is_string(); }

  std::string value_text() const {
    return std::visit(
        [](auto* v) -> std::string {
          using T = std::remove_pointer_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) return quoted(*v);
          else if constexpr (std::is_same_v<T, bool>) return *v ? "true" : "false";
          else if constexpr (std::is_same_v<T, double>) return number_text(*v);
          else return std::to_string(*v);
        },
        target);
  }

  // "in [0, 1)", ">= 1", "> 0", "<= 250"; "" without bounds.
  std::string bounds_text() const {
    if (lo && hi)
      return fmt::format("in {}{}, {}{}", lo_open ? '(' : '[', number_text(*lo), number_text(*hi), hi_open ? ')' : ']');
    if (lo) return fmt::format("{} {}", lo_open ? ">" : ">=", number_text(*lo));
    if (hi) return fmt::format("{} {}", hi_open ? "<" : "<=", number_text(*hi));
    return "";
  }

  std::string choices_text() const {
    std::string out;
    for (const auto& c : choices) out += (out.empty() ? "" : ", ") + c;
    return out;
  }

  Status set(std::string_view text) {
    const std::string flag = shown();
    return std::visit(
        [&](auto* v) -> Status {
          using T = std::remove_pointer_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            *v = std::string(text);
            return {};
          } else if constexpr (std::is_same_v<T, bool>) {
            return parse_bool(flag, text, v);
          } else if constexpr (std::is_same_v<T, double>) {
            return parse_double(flag, text, v);
          } else {
            return parse_integer(flag, text, v);
          }
        },
        target);
  }

  // The declared checks, on the value the variable holds now (given or default).
  Status check() const {
    const std::string suffix = given ? "" : " (the default)";
    if (is_numeric()) {
      // long double holds every int64 and uint64 exactly on x86-64, so large values compare right.
      const long double v = std::visit(
          [](auto* p) -> long double {
            if constexpr (std::is_arithmetic_v<std::remove_pointer_t<decltype(p)>>) return static_cast<long double>(*p);
            else return 0;
          },
          target);
      const bool low = lo && (lo_open ? !(v > *lo) : !(v >= *lo));
      const bool high = hi && (hi_open ? !(v < *hi) : !(v <= *hi));
      if (low || high) return io_error("{}: must be {}, got {}{}", shown(), bounds_text(), value_text(), suffix);
    }
    if (is_string()) {
      const std::string& s = *std::get<std::string*>(target);
      if (not_empty && s.empty()) return io_error("{}: must not be empty{}", shown(), suffix);
      if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end())
        return io_error("{}: expected one of {}, got '{}'{}", shown(), choices_text(), s, suffix);
    }
    return {};
  }

  void need_numeric(const char* what) const {
    TG_CHECK(is_numeric(), "cli", "{}: {}() is for numeric flags", shown(), what);
  }
};

Flag::Flag(std::unique_ptr<Spec> spec) : spec_(std::move(spec)) {}
Flag::~Flag() = default;
const std::string& Flag::name() const { return spec_->name; }

Flag& Flag::min(double lo) {
  spec_->need_numeric("min");
  TG_CHECK(!std::isnan(lo), "cli", "{}: min() of NaN", spec_->shown());
  spec_->lo = lo, spec_->lo_open = false;
  return *this;
}
Flag& Flag::above(double lo) {
  min(lo);
  spec_->lo_open = true;
  return *this;
}
Flag& Flag::max(double hi) {
  spec_->need_numeric("max");
  TG_CHECK(!std::isnan(hi), "cli", "{}: max() of NaN", spec_->shown());
  spec_->hi = hi, spec_->hi_open = false;
  return *this;
}
Flag& Flag::below(double hi) {
  max(hi);
  spec_->hi_open = true;
  return *this;
}
Flag& Flag::range(double lo, double hi) {
  TG_CHECK(lo <= hi, "cli", "{}: range({}, {}) is empty", spec_->shown(), lo, hi);
  return min(lo).max(hi);
}
Flag& Flag::choices(std::vector<std::string> allowed) {
  TG_CHECK(spec_->is_string(), "cli", "{}: choices() is for string flags", spec_->shown());
  TG_CHECK(!allowed.empty(), "cli", "{}: choices() needs at least one choice", spec_->shown());
  spec_->choices = std::move(allowed);
  return *this;
}
Flag& Flag::not_empty() {
  TG_CHECK(spec_->is_string(), "cli", "{}: not_empty() is for string flags", spec_->shown());
  spec_->not_empty = true;
  return *this;
}

Flags::Flags(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}
Flags::~Flags() = default;

Flag::Spec* Flags::find(std::string_view name) const {
  for (const auto& f : flags_)
    if (f->spec_->name == name) return f->spec_.get();
  return nullptr;
}

Flag& Flags::add_flag(const std::string& name, std::unique_ptr<Flag::Spec> spec) {
  const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '_';
  });
  TG_CHECK(valid, "cli", "bad flag name '{}' (lower-case letters, digits and '_')", name);
  TG_CHECK(name != "help" && name != "h", "cli", "--{} is reserved for the usage", name);
  TG_CHECK(!find(name), "cli", "flag --{} is defined twice", name);
  // --noX sets a bool X to false, so "noX" and a bool "X" cannot both be flags.
  if (spec->is_bool()) TG_CHECK(!find("no" + name), "cli", "bool flag --{} clashes with flag --no{}", name, name);
  if (name.rfind("no", 0) == 0)
    if (Flag::Spec* b = find(name.substr(2)); b && b->is_bool())
      TG_CHECK(false, "cli", "flag --{} clashes with the negation of bool flag --{}", name, b->name);
  spec->name = name;
  spec->default_text = spec->value_text();
  flags_.push_back(std::unique_ptr<Flag>(new Flag(std::move(spec))));
  return *flags_.back();
}

#define TG_CLI_ADD(T)                                                          \
  Flag& Flags::add(const std::string& name, T* value, std::string help) {     \
    TG_CHECK(value != nullptr, "cli", "--{}: null variable", name);            \
    auto spec = std::make_unique<Flag::Spec>();                                \
    spec->target = value;                                                      \
    spec->help = std::move(help);                                              \
    return add_flag(name, std::move(spec));                                    \
  }
TG_CLI_ADD(int)
TG_CLI_ADD(int64_t)
TG_CLI_ADD(uint64_t)
TG_CLI_ADD(double)
TG_CLI_ADD(bool)
TG_CLI_ADD(std::string)
#undef TG_CLI_ADD

void Flags::check(std::function<std::string()> rule) { rules_.push_back(std::move(rule)); }

bool Flags::given(std::string_view name) const {
  const Flag::Spec* s = find(name);
  TG_CHECK(s != nullptr, "cli", "given(): no flag named '{}'", name);
  return s->given;
}

std::string Flags::usage() const {
  auto head = [](const Flag::Spec& s) -> std::string {
    if (s.is_bool()) return "--[no]" + s.name;
    const char* type = std::visit(
        [](auto* v) -> const char* {
          using T = std::remove_pointer_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) return "STR";
          else if constexpr (std::is_same_v<T, double>) return "NUM";
          else if constexpr (std::is_same_v<T, uint64_t>) return "UINT";
          else return "INT";
        },
        s.target);
    return fmt::format("--{} {}", s.name, type);
  };
  size_t width = std::string_view("--help").size();
  for (const auto& f : flags_) width = std::max(width, head(*f->spec_).size());

  std::string out = fmt::format("{}: {}\n\nusage: {} [flags]\n\nflags:\n", program_, summary_, program_);
  for (const auto& f : flags_) {
    const Flag::Spec& s = *f->spec_;
    std::string notes = "default: " + s.default_text;
    if (!s.bounds_text().empty()) notes += "; " + s.bounds_text();
    if (!s.choices.empty()) notes += "; one of " + s.choices_text();
    if (s.not_empty) notes += "; not empty";
    out += fmt::format("  {:<{}}  {}{}({})\n", head(s), width, s.help, s.help.empty() ? "" : " ", notes);
  }
  out += fmt::format("  {:<{}}  print this help and exit\n", "--help", width);
  out += "\n--name=value, --name value and -name value are the same. Bools: --name, --noname, "
         "--name=true|false|1|0, --name 0.\nA value that starts with '-' and is not a number is written --name=VALUE.\n";
  return out;
}

Status Flags::parse(int argc, char** argv) {
  for (auto& f : flags_) f->spec_->given = false;
  // A program that does not go through run_main() still gets "program: message" from fail().
  if (g_program.empty()) g_program = program_;
  // Help first, wherever it is, so that `prog --typo --help` still helps.
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-help" || a == "-h") {
      std::fputs(usage().c_str(), stdout);
      std::fflush(stdout);
      std::exit(0);
    }
  }
  bool flags_ended = false;  // after "--" everything is positional, and positionals are errors
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--" && !flags_ended) {
      flags_ended = true;
      continue;
    }
    if (flags_ended || arg.size() < 2 || arg[0] != '-' || is_number(arg))
      return io_error("unexpected argument '{}' (flags start with --)", arg);

    const std::string_view dashes = arg.substr(0, arg[1] == '-' ? 2 : 1);
    std::string_view name = arg.substr(dashes.size());
    std::optional<std::string_view> value;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    Flag::Spec* s = find(name);
    if (!s && name.rfind("no", 0) == 0) {  // --noX for a bool X
      if (Flag::Spec* b = find(name.substr(2)); b && b->is_bool()) {
        if (value) return io_error("--{}: takes no value (write --{}={})", name, b->name, *value);
        *std::get<bool*>(b->target) = false;
        b->given = true;
        continue;
      }
    }
    if (!s) {
      std::string_view best;
      size_t best_d = name.size() >= 6 ? 2 : 1;  // how far a typo may be
      for (const auto& f : flags_) {
        const std::string& n = f->spec_->name;
        const size_t d = edit_distance(name, n);
        if (d <= best_d && (best.empty() || d < best_d)) best = n, best_d = d;
      }
      if (best.empty() && !name.empty()) {  // or the one flag it abbreviates
        for (const auto& f : flags_) {
          if (f->spec_->name.rfind(name, 0) != 0) continue;
          if (!best.empty()) {
            best = {};
            break;
          }
          best = f->spec_->name;
        }
      }
      if (best.empty()) return io_error("unknown flag {}{}", dashes, name);
      return io_error("unknown flag {}{} (did you mean {}{}?)", dashes, name, dashes, best);
    }
    if (!value && s->is_bool()) {
      value = "true";
      if (i + 1 < argc && is_bool_word(argv[i + 1])) value = argv[++i];  // --cbow 0 means false
    }
    if (!value) {
      if (i + 1 >= argc) return io_error("{}: missing value", s->shown());
      const std::string_view next = argv[i + 1];
      if (next.size() > 1 && next[0] == '-' && !is_number(next))
        return io_error("{}: missing value (the next argument '{}' is a flag; write {}=VALUE for a value that starts with -)",
                        s->shown(), next, s->shown());
      value = next;
      ++i;
    }
    TG_RETURN_IF_ERROR(s->set(*value));
    s->given = true;
  }
  for (const auto& f : flags_) TG_RETURN_IF_ERROR(f->spec_->check());
  for (const auto& rule : rules_)
    if (std::string message = rule(); !message.empty()) return Status::error(std::move(message));
  return {};
}

const std::string& program_name() { return g_program; }

namespace {
// After an error: with several processes, one that failed alone ends the whole job (the others
// would wait for it); an error they all raised together lets each exit normally.
[[noreturn]] void exit_after_error(int code) {
  if (g_several && !dist::error_is_shared()) dist::abort_job(code);
  std::exit(code);
}
}  // namespace

void fail(const std::string& message, int code) {
  print_error(message);
  exit_after_error(code);
}

int run_main(int argc, char** argv, const std::function<int()>& body) {
  if (argc > 0 && argv != nullptr && argv[0] != nullptr) {
    const std::string_view a0 = argv[0];
    const size_t slash = a0.find_last_of('/');
    g_program = std::string(slash == std::string_view::npos ? a0 : a0.substr(slash + 1));
  }
  try {
    if (dist::launched_as_several()) {  // join the other processes; only process 0 prints results
      g_several = dist::world().size() > 1;
      if (g_several && !dist::is_main() && !std::freopen("/dev/null", "w", stdout)) std::fclose(stdout);
    }
    return body();
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
  } catch (const std::exception& e) {
    print_error(e.what());
  } catch (...) {
    print_error("unknown error (an exception that is not a std::exception)");
  }
  if (g_several && !dist::error_is_shared()) dist::abort_job(1);
  return 1;
}

}  // namespace tg::cli
