#include "train/interrupt.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <unistd.h>

#include "train/cli.h"

namespace tg::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<int> g_depth{0};
struct sigaction g_old_int {}, g_old_term {};
char g_name[64] = "tapegrad";  // the program's name, copied before the handler may need it

void write_all(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// Only async-signal-safe calls here: write and _exit.
void on_signal(int sig) {
  const char* what = sig == SIGINT ? "SIGINT" : "SIGTERM";
  if (g_signal != 0) {
    write_all("\n");
    write_all(g_name);
    write_all(": second ");
    write_all(what);
    write_all(": stopping now; the last complete checkpoint stays\n");
    ::_exit(128 + sig);
  }
  g_signal = sig;
  write_all("\n");
  write_all(g_name);
  write_all(": ");
  write_all(what);
  write_all(": finishing this step and saving a checkpoint (send it again to stop at once)\n");
}

}  // namespace

InterruptGuard::InterruptGuard() {
  if (g_depth.fetch_add(1) != 0) return;
  g_signal = 0;
  const std::string& name = cli::program_name();
  std::strncpy(g_name, name.empty() ? "tapegrad" : name.c_str(), sizeof g_name - 1);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  if (g_depth.fetch_sub(1) != 1) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_signal = 0;
}

int interrupt_signal() { return g_signal; }

}  // namespace tg::train
