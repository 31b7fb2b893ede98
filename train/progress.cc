#include "train/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace tg::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 3.6e9) return "--:--";
  const auto t = static_cast<int64_t>(seconds + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}

std::string format_rate(double r) {
  if (!std::isfinite(r) || r < 0) return "?";
  if (r < 10) return fmt::format("{:.2f}", r);
  if (r < 100) return fmt::format("{:.1f}", r);
  if (r < 1e4) return fmt::format("{:.0f}", r);
  if (r < 1e6) return fmt::format("{:.1f}k", r / 1e3);
  if (r < 1e9) return fmt::format("{:.1f}M", r / 1e6);
  return fmt::format("{:.1f}G", r / 1e9);
}

std::string progress_line(const std::string& label, int64_t done, int64_t total, double elapsed_s, double rate,
                          const std::string& unit, const std::string& extra, int bar_width) {
  total = std::max<int64_t>(total, 1);
  const double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
  std::string line = label.empty() ? "" : label + " ";
  if (bar_width > 0) {  // eighths of a block: the bar moves smoothly even when long
    const auto eighths = static_cast<int64_t>(frac * bar_width * 8);
    static const char* kPartial[] = {"", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589"};
    line += "[";
    for (int64_t i = 0; i < eighths / 8; ++i) line += "\u2588";
    int64_t used = eighths / 8;
    if (eighths % 8 != 0) line += kPartial[eighths % 8], ++used;
    line += std::string(static_cast<size_t>(bar_width - used), ' ') + "] ";
  }
  line += fmt::format("{:3d}% {}/{}  {}", static_cast<int>(frac * 100), done, total, format_duration(elapsed_s));
  // A rate or an ETA from less than 0.1 s of work would be noise ("125M it/s").
  const bool measured = elapsed_s >= 0.1 && std::isfinite(elapsed_s);
  const bool eta = measured && done > 0;
  if (done < total) line += "<" + (eta ? format_duration(elapsed_s * static_cast<double>(total - done) / static_cast<double>(done)) : "--:--");
  if (measured && rate >= 0 && std::isfinite(rate)) {
    if (!unit.empty()) line += fmt::format("  {} {}/s", format_rate(rate), unit);
    else if (rate >= 1) line += fmt::format("  {} it/s", format_rate(rate));
    else if (rate > 0) line += fmt::format("  {} s/it", format_rate(1 / rate));
  }
  if (!extra.empty()) line += "  " + extra;
  return line;
}

namespace {

// The first `columns` characters (code points) of s.
std::string fit(const std::string& s, size_t columns) {
  size_t i = 0;
  for (size_t n = 0; i < s.size() && n < columns; ++n) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return s.substr(0, i);
}

}  // namespace

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(int64_t total, std::string label, std::string unit)
    : total_(std::max<int64_t>(total, 1)),
      label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(::isatty(::fileno(stderr)) != 0),
      start_s_(steady_seconds()),
      last_draw_s_(start_s_) {}

Progress::~Progress() {
  if (tty_ && drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

double Progress::elapsed() const { return steady_seconds() - start_s_; }

void Progress::update(int64_t done, const std::string& extra, int64_t units_done) {
  done_ = done;
  units_ = units_done;
  updated_ = true;
  if (finished_) return;
  const double now = steady_seconds();
  // A terminal: 10 redraws a second at most (the first and the last at once). A log: one line per
  // ~10 s (the last comes from finish()).
  const double gap = tty_ ? 0.1 : 10.0;
  if (now - last_draw_s_ < gap && !(tty_ && (!drawn_ || done >= total_))) return;
  last_draw_s_ = now;
  draw(extra, false);
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  if (done_ < 0) done_ = total_;
  draw(extra, true);
  finished_ = true;
}

void Progress::draw(const std::string& extra, bool final) {
  const double el = elapsed();
  // Units counted: their rate; otherwise the step rate, once update() has reported a step (a
  // Progress used as a timer, finish() alone, shows none).
  double rate = -1;
  if (el > 0 && units_ >= 0) rate = static_cast<double>(units_) / el;
  else if (el > 0 && updated_) rate = static_cast<double>(done_) / el;
  const std::string line = progress_line(label_, done_, total_, el, rate, units_ >= 0 ? unit_ : "", extra, tty_ ? 24 : 0);
  if (tty_) {
    winsize ws{};
    const size_t columns = ::ioctl(::fileno(stderr), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 120;
    // Cut to the terminal's width, so that "\r" returns to the start of this same line.
    std::fprintf(out_, "\r%s\x1b[K%s", fit(line, columns - 1).c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace tg::train
